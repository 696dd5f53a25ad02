/* optrace.c — per-operator CUDA-event timing and trace rows (see optrace.h). */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "common.h"
#include "gpu/optrace.h"
#include "trace.h"

typedef struct {
    int op, layer, rank, gpus, costs; /* costs: index into the per-rank cost tables */
    cudaEvent_t start, end;
} op_record;

typedef struct {
    op_cost c[OP_COUNT];
    long seqs, tokens;
    double sum_len2;
    int max_len;
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
    free(t->rc);
    free(t);
}

static void hook_begin(void *ctx, int op, int layer, cudaStream_t s)
{
    optrace *t = ctx;
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
    r->start = event_get(t);
    r->end = event_get(t);
    cudaCheck(cudaEventRecord(r->start, s));
    t->open_rec = t->nrec++;
}

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
    memset(r, 0, sizeof *r);
    op_batch ob = {.len = len, .n = n, .fused = 1, .gpus = gpus, .dropout = 1};
    unpad_err err = {0};
    if (ops_step(&t->m, &ob, r->c, &err))
        memset(r->c, 0, sizeof r->c); /* an empty batch: rows get zero FLOPs */
    r->seqs = n;
    for (int i = 0; i < n; i++) {
        r->tokens += len[i];
        r->sum_len2 += (double)len[i] * len[i];
        if (len[i] > r->max_len)
            r->max_len = len[i];
    }
}

void optrace_op_begin(optrace *t, int op, cudaStream_t s) { hook_begin(t, op, -1, s); }
void optrace_op_end(optrace *t, int op, cudaStream_t s) { hook_end(t, op, -1, s); }

void optrace_step_end(optrace *t, double *rank_us, int max_ranks)
{
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
        row.group = -1;
        row.stream = -1;
        if (r->costs >= 0) {
            const rank_costs *c = &t->rc[r->costs];
            row.seqs = c->seqs;
            row.tokens = c->tokens;
            row.sum_len2 = c->sum_len2;
            row.max_len = c->max_len;
            row.flops = c->c[r->op].flops;
            row.bytes = c->c[r->op].bytes;
        }
        row.start_us = a * 1000.0;
        row.dur_us = d * 1000.0;
        if (rank_us && r->rank >= 0 && r->rank < max_ranks && r->op != OP_LAMB &&
            r->op != OP_ALLREDUCE && r->op != OP_EXCHANGE)
            rank_us[r->rank] += row.dur_us;
        if (t->csv)
            trace_write_row(t->csv, &row);
        if (t->json) {
            fprintf(t->json,
                    "%s{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, "
                    "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"step\": %d, \"layer\": %d, \"tokens\": %ld, "
                    "\"flops\": %.0f, \"bytes\": %.0f}}",
                    t->json_first ? "" : ",\n", op_name((op_id)r->op),
                    op_class_name(op_class_of((op_id)r->op)), row.rank, 0,
                    /* steps laid one after another on the timeline: offset by step x 1 s */
                    t->step * 1e6 + row.start_us, row.dur_us, t->step, row.layer, row.tokens, row.flops,
                    row.bytes);
            t->json_first = 0;
        }
    }
    if (t->csv)
        fflush(t->csv);
    t->nrec = 0;
    t->usedpool = 0;
    t->nrc = 0;
}
