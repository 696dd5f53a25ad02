/* optrace.c — per-operator CUDA-event timing and trace rows (see optrace.h). */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "common.h"
#include "gpu/optrace.h"
#include "trace.h"

/* What a row counts: sequences, tokens, sum of squared lengths, longest, and every operator's
 * predicted FLOPs and bytes for them. */
typedef struct {
    op_cost c[OP_COUNT];
    long seqs, tokens;
    double sum_len2;
    int max_len;
} batch_costs;

typedef struct {
    int op, layer, rank, gpus, costs; /* costs: index into the per-rank cost tables, -1 none */
    int group, stream;                /* -1 when not grouped */
    int own;                          /* 1: counts below (an FMHA group), not the rank's */
    batch_costs gc;
    double bytes;                     /* >= 0: the row's bytes (an all-reduce bucket) */
    cudaEvent_t start, end;
} op_record;

typedef struct {
    batch_costs bc;
    op_cost last[OP_COUNT]; /* the last layer's operators on the heads' rows (optrace_set_last_heads) */
    int has_last;
    int *len; /* (n) the rank's lengths in micro-batch order */
    int n, cap;
} rank_costs;

struct optrace {
    char hw[64];
    model_cfg m;
    FILE *csv;
    chrome_trace *json;
    int proc_rank;
    int64_t start_us;        /* the run's start, epoch microseconds */
    double step_host_us;     /* when the step was enqueued, microseconds since start_us */
    int oom;                 /* a record could not be kept this step */
    op_record *rec;
    int nrec, caprec;
    cudaEvent_t *pool; /* created events, reused across steps */
    int npool, usedpool;
    cudaEvent_t step_start;
    int step;
    rank_costs *rc;
    int nrc, caprc;
    int rank, gpus;
    int open_rec; /* index of the record awaiting its end, -1 none */
    int grown;    /* rc slots whose len buffers are initialised */
    double op_us[OP_COUNT]; /* summed over the written steps (grouped rows: their union) */
    int steps_done;
    int last_heads; /* the trainer's last layer after its attention on the heads' rows */
    double last_busy_us; /* the last step's summed operator time (optrace_last_busy_us) */
};

/* Two events from the pool (grown as needed); 0 when host memory runs out (t->oom set). */
static int events_get(optrace *t, cudaEvent_t *a, cudaEvent_t *b)
{
    if (t->usedpool + 2 > t->npool) {
        int n = t->npool ? 2 * t->npool : 1024;
        cudaEvent_t *p = realloc(t->pool, (size_t)n * sizeof *p);
        if (!p) {
            t->oom = 1;
            return 0;
        }
        t->pool = p;
        for (int i = t->npool; i < n; i++)
            cudaCheck(cudaEventCreate(&t->pool[i]));
        t->npool = n;
    }
    *a = t->pool[t->usedpool++];
    *b = t->pool[t->usedpool++];
    return 1;
}

/* The JSON lanes: named once, so the viewer shows what each row of the timeline is. */
static void name_lanes(optrace *t, int vranks)
{
    char name[96];
    snprintf(name, sizeof name, "rank %d", t->proc_rank);
    chrome_trace_process_name(t->json, t->proc_rank, name);
    chrome_trace_thread_name(t->json, t->proc_rank, OPTRACE_TID_STEPS, "steps");
    chrome_trace_thread_name(t->json, t->proc_rank, OPTRACE_TID_ALLREDUCE, "all-reduce (communication stream)");
    chrome_trace_thread_name(t->json, t->proc_rank, OPTRACE_TID_OPTIMIZER, "optimizer (LAMB)");
    for (int v = 0; v < vranks; v++)
        for (int k = 0; k < BERT_MAX_STREAMS; k++) {
            if (k == 0)
                snprintf(name, sizeof name, "virtual rank %d: compute stream", v);
            else
                snprintf(name, sizeof name, "virtual rank %d: FMHA group stream %d", v, k);
            chrome_trace_thread_name(t->json, t->proc_rank, v * 16 + k, name);
        }
}

optrace *optrace_create(const char *hw, const model_cfg *m, int products, FILE *csv, chrome_trace *json,
                        int proc_rank, int vranks, int64_t start_us, unpad_err *err)
{
    optrace *t = calloc(1, sizeof *t);
    if (!t) {
        unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of host memory for the tracer");
        return NULL;
    }
    snprintf(t->hw, sizeof t->hw, "%.63s", hw);
    t->m = *m;
    t->csv = csv;
    t->json = json;
    t->proc_rank = proc_rank;
    t->start_us = start_us;
    t->open_rec = -1;
    t->gpus = 1;
    cudaCheck(cudaEventCreate(&t->step_start));
    if (csv) {
        trace_write_products(csv, products);
        trace_write_header(csv);
    }
    if (json)
        name_lanes(t, vranks);
    return t;
}

void optrace_set_last_heads(optrace *t, int on) { t->last_heads = on; }

void optrace_free(optrace *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->npool; i++)
        cudaEventDestroy(t->pool[i]);
    cudaEventDestroy(t->step_start);
    free(t->pool);
    free(t->rec);
    for (int i = 0; i < t->grown; i++)
        free(t->rc[i].len);
    free(t->rc);
    free(t);
}

static void hook_end(void *ctx, int op, int layer, cudaStream_t s);

static void batch_costs_of(const model_cfg *m, const int *len, int n, int gpus, batch_costs *bc)
{
    memset(bc, 0, sizeof *bc);
    op_batch ob = {.len = len, .n = n, .fused = 1, .gpus = gpus, .dropout = 1};
    unpad_err err = {0};
    if (n < 1 || ops_step(m, &ob, bc->c, &err))
        memset(bc->c, 0, sizeof bc->c); /* an empty batch: rows get zero FLOPs */
    bc->seqs = n;
    for (int i = 0; i < n; i++) {
        bc->tokens += len[i];
        bc->sum_len2 += (double)len[i] * len[i];
        if (len[i] > bc->max_len)
            bc->max_len = len[i];
    }
}

/* A new record whose start is recorded on s; NULL when host memory ran out (the step's rows are
 * dropped and optrace_step_end reports it). */
static op_record *record_new(optrace *t, int op, int layer, cudaStream_t s)
{
    if (t->oom)
        return NULL;
    if (t->nrec == t->caprec) {
        int cap = t->caprec ? 2 * t->caprec : 1024;
        op_record *p = realloc(t->rec, (size_t)cap * sizeof *p);
        if (!p) {
            t->oom = 1;
            return NULL;
        }
        t->rec = p;
        t->caprec = cap;
    }
    op_record *r = &t->rec[t->nrec];
    if (!events_get(t, &r->start, &r->end))
        return NULL;
    r->op = op;
    r->layer = layer;
    r->rank = t->rank;
    r->gpus = t->gpus;
    r->costs = t->nrc - 1;
    r->group = r->stream = -1;
    r->own = 0;
    r->bytes = -1;
    cudaCheck(cudaEventRecord(r->start, s));
    t->open_rec = t->nrec++;
    return r;
}

static void hook_begin(void *ctx, int op, int layer, cudaStream_t s) { record_new(ctx, op, layer, s); }

static void group_begin(void *ctx, int op, int layer, int group, int stream, int seq_begin, int seq_end,
                        cudaStream_t s)
{
    optrace *t = ctx;
    op_record *r = record_new(t, op, layer, s);
    if (!r)
        return;
    r->group = group;
    r->stream = stream;
    if (t->nrc > 0) {
        const rank_costs *rc = &t->rc[t->nrc - 1];
        if (seq_begin >= 0 && seq_end <= rc->n && seq_begin < seq_end) {
            batch_costs_of(&t->m, rc->len + seq_begin, seq_end - seq_begin, t->gpus, &r->gc);
            r->own = 1;
        }
    }
}

static void group_end(void *ctx, int op, int layer, int group, cudaStream_t s)
{
    (void)group;
    hook_end(ctx, op, layer, s);
}

bert_group_hooks optrace_group_hooks(optrace *t)
{
    bert_group_hooks h = {group_begin, group_end, t};
    return h;
}

void optrace_bucket_begin(optrace *t, int bucket, int stream, double bytes, cudaStream_t s)
{
    op_record *r = record_new(t, OP_ALLREDUCE, -1, s);
    if (!r)
        return;
    r->group = bucket;
    r->stream = stream;
    r->bytes = bytes;
}

void optrace_bucket_end(optrace *t, cudaStream_t s) { hook_end(t, OP_ALLREDUCE, -1, s); }

static void hook_end(void *ctx, int op, int layer, cudaStream_t s)
{
    optrace *t = ctx;
    if (t->oom)
        return;
    invariantCheck(t->open_rec >= 0 && t->rec[t->open_rec].op == op && t->rec[t->open_rec].layer == layer,
                   "trace: end of %s (layer %d) without its begin", op_name((op_id)op), layer);
    cudaCheck(cudaEventRecord(t->rec[t->open_rec].end, s));
    t->open_rec = -1;
}

bert_hooks optrace_hooks(optrace *t)
{
    bert_hooks h = {hook_begin, hook_end, t};
    return h;
}

void optrace_step_begin(optrace *t, int step, cudaStream_t s)
{
    t->step = step;
    t->nrec = 0;
    t->usedpool = 0;
    t->nrc = 0;
    t->rank = 0;
    t->oom = 0;
    t->step_host_us = (double)(chrome_trace_now_us() - t->start_us);
    cudaCheck(cudaEventRecord(t->step_start, s));
}

void optrace_rank_begin(optrace *t, int rank, int gpus, const int *len, int n)
{
    t->rank = rank;
    t->gpus = gpus;
    if (t->oom)
        return;
    if (t->nrc == t->caprc) {
        int cap = t->caprc ? 2 * t->caprc : 16;
        rank_costs *p = realloc(t->rc, (size_t)cap * sizeof *p);
        if (!p) {
            t->oom = 1;
            return;
        }
        t->rc = p;
        t->caprc = cap;
    }
    rank_costs *r = &t->rc[t->nrc++];
    if (t->nrc > t->grown) { /* a fresh slot from realloc: no length buffer yet */
        r->len = NULL;
        r->cap = 0;
        t->grown = t->nrc;
    }
    batch_costs_of(&t->m, len, n, gpus, &r->bc);
    /* the last layer on the heads' rows: its operators' counts at those rows for tokens (the masked
     * positions as the model counts them, ops_predictions, and the first tokens) */
    r->has_last = t->last_heads && n > 0;
    if (r->has_last) {
        ops_shape sh = {.seqs = n};
        for (int i = 0; i < n; i++)
            sh.preds += ops_predictions(len[i], t->m.max_predictions);
        sh.tokens = sh.attn_tokens = sh.real_tokens = ops_head_rows(r->bc.tokens, sh.preds, n);
        ops_count(&t->m, &sh, 1, gpus, 1, r->last);
    }
    if (n > r->cap) {
        free(r->len);
        r->cap = 0;
        if (!(r->len = malloc((size_t)n * sizeof *r->len))) {
            t->nrc--;
            t->oom = 1;
            return;
        }
        r->cap = n;
    }
    memcpy(r->len, len, (size_t)n * sizeof *len);
    r->n = n;
}

void optrace_op_begin(optrace *t, int op, cudaStream_t s) { hook_begin(t, op, -1, s); }
void optrace_op_end(optrace *t, int op, cudaStream_t s) { hook_end(t, op, -1, s); }

/* Grouped FMHA rows of one (rank, op, layer) overlap on several streams: they add their union to
 * the rank's time, not their sum. */
typedef struct {
    int active, rank, op, layer, oom;
    trace_span *span;
    int n, cap;
} span_set;

static void span_flush(span_set *u, double *rank_us, int max_ranks, double *op_us)
{
    if (!u->active || u->n == 0) {
        u->active = 0;
        return;
    }
    double t = trace_span_union(u->span, (size_t)u->n);
    op_us[u->op] += t;
    if (rank_us && u->rank >= 0 && u->rank < max_ranks)
        rank_us[u->rank] += t;
    u->active = 0;
    u->n = 0;
}

/* Adds a grouped row's span; when host memory runs out u->oom is set and the span left out. */
static void span_add(span_set *u, const trace_row *row, double *rank_us, int max_ranks, double *op_us)
{
    if (u->active && (u->rank != row->rank || u->op != row->op || u->layer != row->layer))
        span_flush(u, rank_us, max_ranks, op_us);
    if (u->n == u->cap) {
        int cap = u->cap ? 2 * u->cap : 16;
        trace_span *p = realloc(u->span, (size_t)cap * sizeof *p);
        if (!p) {
            u->oom = 1;
            return;
        }
        u->span = p;
        u->cap = cap;
    }
    u->active = 1;
    u->rank = row->rank;
    u->op = row->op;
    u->layer = row->layer;
    u->span[u->n].start = row->start_us;
    u->span[u->n].end = row->start_us + row->dur_us;
    u->n++;
}

/* The JSON event of one row: its lane and its args. */
static void json_row(optrace *t, const op_record *r, const trace_row *row)
{
    int tid = r->op == OP_ALLREDUCE ? OPTRACE_TID_ALLREDUCE
            : r->op == OP_LAMB      ? OPTRACE_TID_OPTIMIZER
                                    : r->rank * 16 + (row->stream > 0 ? row->stream : 0);
    const chrome_arg args[] = {{"step", t->step},         {"layer", row->layer},
                               {"virtual_rank", r->rank}, {"group", row->group},
                               {"tokens", (double)row->tokens}, {"flops", row->flops},
                               {"bytes", row->bytes}};
    chrome_trace_complete(t->json, op_name((op_id)r->op), op_class_name(op_class_of((op_id)r->op)), t->proc_rank,
                          tid, t->step_host_us + row->start_us, row->dur_us, args, 7);
}

int optrace_step_end(optrace *t, double *rank_us, int max_ranks, unpad_err *err)
{
    if (t->oom) {
        cudaCheck(cudaDeviceSynchronize());
        t->nrec = t->usedpool = t->nrc = 0;
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "trace of step %d: out of host memory", t->step);
    }
    span_set u = {0};
    double step_end_us = 0, lamb_us = 0;
    if (rank_us)
        for (int i = 0; i < max_ranks; i++)
            rank_us[i] = 0;
    for (int i = 0; i < t->nrec; i++) {
        op_record *r = &t->rec[i];
        float a, d;
        cudaCheck(cudaEventSynchronize(r->end));
        cudaCheck(cudaEventElapsedTime(&a, t->step_start, r->start));
        cudaCheck(cudaEventElapsedTime(&d, r->start, r->end));
        trace_row row = {0};
        snprintf(row.hw, sizeof row.hw, "%.63s", t->hw);
        snprintf(row.model, sizeof row.model, "%.63s", t->m.name);
        row.gpus = r->gpus;
        row.rank = r->rank;
        row.step = t->step;
        row.op = r->op;
        row.layer = r->layer;
        row.group = r->group;
        row.stream = r->stream;
        const batch_costs *c = r->own ? &r->gc : r->costs >= 0 ? &t->rc[r->costs].bc : NULL;
        if (c) {
            /* the last layer on the heads' rows: the batch as described, the FLOPs and bytes of
             * the rows computed (fit_row scales a GEMM's rows with its FLOPs) */
            const rank_costs *rk = !r->own && r->costs >= 0 ? &t->rc[r->costs] : NULL;
            int heads = rk && rk->has_last && r->layer == t->m.layers - 1 && ops_on_head_rows((op_id)r->op);
            row.seqs = c->seqs;
            row.tokens = c->tokens;
            row.sum_len2 = c->sum_len2;
            row.max_len = c->max_len;
            row.flops = heads ? rk->last[r->op].flops : c->c[r->op].flops;
            row.bytes = heads ? rk->last[r->op].bytes : c->c[r->op].bytes;
        }
        if (r->bytes >= 0) {
            row.flops = 0;
            row.bytes = r->bytes;
        }
        row.start_us = a * 1000.0;
        row.dur_us = d * 1000.0;
        int compute = r->op != OP_LAMB && r->op != OP_ALLREDUCE && r->op != OP_EXCHANGE;
        if (compute && r->group >= 0) {
            span_add(&u, &row, rank_us, max_ranks, t->op_us);
        } else {
            span_flush(&u, rank_us, max_ranks, t->op_us);
            t->op_us[r->op] += row.dur_us;
            if (r->op == OP_LAMB)
                lamb_us += row.dur_us;
            if (rank_us && compute && r->rank >= 0 && r->rank < max_ranks)
                rank_us[r->rank] += row.dur_us;
        }
        if (t->csv)
            trace_write_row(t->csv, &row);
        if (t->json)
            json_row(t, r, &row);
        if (row.start_us + row.dur_us > step_end_us)
            step_end_us = row.start_us + row.dur_us;
    }
    span_flush(&u, rank_us, max_ranks, t->op_us);
    free(u.span);
    t->last_busy_us = lamb_us;
    for (int i = 0; rank_us && i < max_ranks; i++)
        t->last_busy_us += rank_us[i];
    if (t->json && t->nrec > 0) {
        char name[32];
        snprintf(name, sizeof name, "step %d", t->step);
        const chrome_arg args[] = {{"step", t->step}};
        chrome_trace_complete(t->json, name, "step", t->proc_rank, OPTRACE_TID_STEPS, t->step_host_us, step_end_us,
                              args, 1);
    }
    t->steps_done++;
    if (t->csv)
        fflush(t->csv);
    t->nrec = 0;
    t->usedpool = 0;
    t->nrc = 0;
    if (u.oom)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "trace of step %d: out of host memory", t->step);
    return UNPAD_OK;
}

double optrace_last_busy_us(const optrace *t) { return t->last_busy_us; }

double optrace_op_mean_us(const optrace *t, int op)
{
    return t->steps_done > 0 && op >= 0 && op < OP_COUNT ? t->op_us[op] / t->steps_done : 0;
}
