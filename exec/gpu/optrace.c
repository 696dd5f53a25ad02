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
    int *len; /* (n) the rank's lengths in micro-batch order */
    int n, cap;
} rank_costs;

struct optrace {
    char hw[64];
    model_cfg m;
    FILE *csv, *json;
    int json_first;
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
};

static cudaEvent_t event_get(optrace *t)
{
    if (t->usedpool == t->npool) {
        int n = t->npool ? 2 * t->npool : 1024;
        t->pool = realloc(t->pool, (size_t)n * sizeof *t->pool);
        if (!t->pool) {
            fprintf(stderr, "%s:%d: out of host memory\n", __FILE__, __LINE__);
            exit(EXIT_FAILURE);
        }
        for (int i = t->npool; i < n; i++)
            cudaCheck(cudaEventCreate(&t->pool[i]));
        t->npool = n;
    }
    return t->pool[t->usedpool++];
}

optrace *optrace_create(const char *hw, const model_cfg *m, FILE *csv, FILE *json)
{
    optrace *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    snprintf(t->hw, sizeof t->hw, "%.63s", hw);
    t->m = *m;
    t->csv = csv;
    t->json = json;
    t->json_first = 1;
    t->open_rec = -1;
    t->gpus = 1;
    cudaCheck(cudaEventCreate(&t->step_start));
    if (csv)
        trace_write_header(csv);
    if (json)
        fprintf(json, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    return t;
}

void optrace_free(optrace *t)
{
    if (!t)
        return;
    if (t->json)
        fprintf(t->json, "\n]}\n");
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

static op_record *record_new(optrace *t, int op, int layer, cudaStream_t s)
{
    if (t->nrec == t->caprec) {
        t->caprec = t->caprec ? 2 * t->caprec : 1024;
        t->rec = realloc(t->rec, (size_t)t->caprec * sizeof *t->rec);
        if (!t->rec) {
            fprintf(stderr, "%s:%d: out of host memory\n", __FILE__, __LINE__);
            exit(EXIT_FAILURE);
        }
    }
    op_record *r = &t->rec[t->nrec];
    r->op = op;
    r->layer = layer;
    r->rank = t->rank;
    r->gpus = t->gpus;
    r->costs = t->nrc - 1;
    r->group = r->stream = -1;
    r->own = 0;
    r->bytes = -1;
    r->start = event_get(t);
    r->end = event_get(t);
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
    r->group = bucket;
    r->stream = stream;
    r->bytes = bytes;
}

void optrace_bucket_end(optrace *t, cudaStream_t s) { hook_end(t, OP_ALLREDUCE, -1, s); }

static void hook_end(void *ctx, int op, int layer, cudaStream_t s)
{
    optrace *t = ctx;
    if (t->open_rec < 0 || t->rec[t->open_rec].op != op || t->rec[t->open_rec].layer != layer) {
        fprintf(stderr, "%s:%d: trace: end of %s (layer %d) without its begin\n", __FILE__, __LINE__,
                op_name((op_id)op), layer);
        exit(EXIT_FAILURE);
    }
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
    cudaCheck(cudaEventRecord(t->step_start, s));
}

void optrace_rank_begin(optrace *t, int rank, int gpus, const int *len, int n)
{
    t->rank = rank;
    t->gpus = gpus;
    if (t->nrc == t->caprc) {
        t->caprc = t->caprc ? 2 * t->caprc : 16;
        t->rc = realloc(t->rc, (size_t)t->caprc * sizeof *t->rc);
        if (!t->rc) {
            fprintf(stderr, "%s:%d: out of host memory\n", __FILE__, __LINE__);
            exit(EXIT_FAILURE);
        }
    }
    rank_costs *r = &t->rc[t->nrc++];
    if (t->nrc > t->grown) { /* a fresh slot from realloc: no length buffer yet */
        r->len = NULL;
        r->cap = 0;
        t->grown = t->nrc;
    }
    batch_costs_of(&t->m, len, n, gpus, &r->bc);
    if (n > r->cap) {
        free(r->len);
        r->len = malloc((size_t)n * sizeof *r->len);
        if (!r->len) {
            fprintf(stderr, "%s:%d: out of host memory\n", __FILE__, __LINE__);
            exit(EXIT_FAILURE);
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
    int active, rank, op, layer;
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

static void span_add(span_set *u, const trace_row *row, double *rank_us, int max_ranks, double *op_us)
{
    if (u->active && (u->rank != row->rank || u->op != row->op || u->layer != row->layer))
        span_flush(u, rank_us, max_ranks, op_us);
    if (u->n == u->cap) {
        u->cap = u->cap ? 2 * u->cap : 16;
        u->span = realloc(u->span, (size_t)u->cap * sizeof *u->span);
        if (!u->span) {
            fprintf(stderr, "%s:%d: out of host memory\n", __FILE__, __LINE__);
            exit(EXIT_FAILURE);
        }
    }
    u->active = 1;
    u->rank = row->rank;
    u->op = row->op;
    u->layer = row->layer;
    u->span[u->n].start = row->start_us;
    u->span[u->n].end = row->start_us + row->dur_us;
    u->n++;
}

void optrace_step_end(optrace *t, double *rank_us, int max_ranks)
{
    span_set u = {0};
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
            row.seqs = c->seqs;
            row.tokens = c->tokens;
            row.sum_len2 = c->sum_len2;
            row.max_len = c->max_len;
            row.flops = c->c[r->op].flops;
            row.bytes = c->c[r->op].bytes;
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
            if (rank_us && compute && r->rank >= 0 && r->rank < max_ranks)
                rank_us[r->rank] += row.dur_us;
        }
        if (t->csv)
            trace_write_row(t->csv, &row);
        if (t->json) {
            fprintf(t->json,
                    "%s{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, "
                    "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"step\": %d, \"layer\": %d, \"tokens\": %ld, "
                    "\"flops\": %.0f, \"bytes\": %.0f}}",
                    t->json_first ? "" : ",\n", op_name((op_id)r->op),
                    op_class_name(op_class_of((op_id)r->op)), row.rank, row.stream > 0 ? row.stream : 0,
                    /* steps laid one after another on the timeline: offset by step x 1 s */
                    t->step * 1e6 + row.start_us, row.dur_us, t->step, row.layer, row.tokens, row.flops,
                    row.bytes);
            t->json_first = 0;
        }
    }
    span_flush(&u, rank_us, max_ranks, t->op_us);
    free(u.span);
    t->steps_done++;
    if (t->csv)
        fflush(t->csv);
    t->nrec = 0;
    t->usedpool = 0;
    t->nrc = 0;
}

double optrace_op_mean_us(const optrace *t, int op)
{
    return t->steps_done > 0 && op >= 0 && op < OP_COUNT ? t->op_us[op] / t->steps_done : 0;
}
