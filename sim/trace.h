/* trace.h — trace rows (traces/NAME.csv): one row per operator per layer per step per rank, measured
 * by the trainer or predicted by the simulator, in the same columns so comparisons are joins:
 *   hw,model,gpus,rank,step,op,layer,group,stream,seqs,tokens,sum_len2,max_len,flops,bytes,start_us,dur_us
 * layer is -1 for operators outside the encoder layers; group and stream are -1 when not grouped. */
#ifndef UNPAD_TRACE_H
#define UNPAD_TRACE_H

#include <stdio.h>

#include "cfg.h"
#include "ops.h"

#define TRACE_HEADER \
    "hw,model,gpus,rank,step,op,layer,group,stream,seqs,tokens,sum_len2,max_len,flops,bytes,start_us,dur_us"

typedef struct {
    char hw[64];
    char model[64];
    int gpus, rank, step;
    int op;          /* op_id */
    int layer, group, stream;
    long seqs, tokens;
    double sum_len2;
    int max_len;
    double flops, bytes;
    double start_us, dur_us;
} trace_row;

/* The attention lengths of one traced batch (one step of one rank), where they are known: the
 * rows carry only their counts, and a synthetic run's lengths can be reproduced from its seed. */
typedef struct {
    int step, rank, n;
    int *len;
} trace_batch_lengths;

/* The products the trainer measured a trace with, from its comment line "# products: NAME" before
 * the header (TRACE_PRODUCTS_TAG): bf16 (the default build), fp8 (--fp8 on) or fp32 (the fp32
 * build). A trace without the line (the simulator's, or older traces) is bf16. */
#define TRACE_PRODUCTS_TAG "# products:"
enum { TRACE_BF16 = 0, TRACE_FP8, TRACE_FP32 };
const char *trace_products_name(int products);
void trace_write_products(FILE *f, int products);

typedef struct {
    trace_row *rows;
    size_t n, cap;
    int products;      /* TRACE_BF16 / TRACE_FP8 / TRACE_FP32 */
    int products_line; /* the line that named them (0: none, bf16) */
    trace_batch_lengths *lens; /* (nlens) optional, owned: fit.c uses them instead of rebuilding */
    size_t nlens;
} trace_set;

void trace_write_header(FILE *f);
void trace_write_row(FILE *f, const trace_row *r);

/* Reads a trace CSV, appending to set; every malformed line is refused with file:line:reason
 * (a products line naming bf16, fp8 or fp32, and not another than the set's; the header exactly
 * TRACE_HEADER; integers within their columns' ranges, step at most INT_MAX;
 * times at most 1e15 us, FLOPs, bytes and sum_len2 at most 1e30; no NUL byte, no over-long line).
 * On failure set is left as it was. */
int trace_read(const char *path, trace_set *set, unpad_err *err);
/* The same from text[0..len) in memory; name stands for the file in messages. */
int trace_parse(const char *name, const char *text, size_t len, trace_set *set, unpad_err *err);
int trace_append(trace_set *set, const trace_row *r);
void trace_set_free(trace_set *set);

/* A busy interval of a trace (start_us, start_us + dur_us). */
typedef struct {
    double start, end;
} trace_span;

/* Time covered by the union of s[0..n) (n >= 1): overlapping operators on several streams count
 * once. Sorts s by start. */
double trace_span_union(trace_span *s, size_t n);

/* The operator order of one training step on one GPU, as the trainer runs it (the order of a
 * trace's rows): the sample exchange (gpus > 1), the embedding, every layer's forward, the heads
 * and the loss, every layer's backward from the last layer down, the embedding's backward, the
 * gradient all-reduce (gpus > 1), the optimizer. Layer is -1 outside the encoder layers.
 *   trace_step_iter it;
 *   trace_step_begin(&it, layers, gpus);
 *   while (trace_step_next(&it, &op, &layer)) ... */
typedef struct {
    int layers, gpus;
    int phase, layer, k;   /* position */
} trace_step_iter;

void trace_step_begin(trace_step_iter *it, int layers, int gpus);
int trace_step_next(trace_step_iter *it, op_id *op, int *layer); /* 0 after the last */

/* The row emitter: sets r's operator, layer, batch description (seqs .. bytes, from oc) and times,
 * writes it, and returns its end, start_us + dur_us. r's hw, model, gpus, rank, step, group and
 * stream are the caller's. */
double trace_emit_op(FILE *f, trace_row *r, op_id op, int layer, const op_cost *oc,
                     double start_us, double dur_us);

/* Predicted rows of one GPU's step from the cost model: the step's operator order, start
 * times laid end to end from t0. Returns the end time. */
struct cost_step;
double trace_emit_predicted(FILE *f, const char *hw, const char *model, int gpus, int rank, int step,
                            int layers, const struct cost_step *st, double t0);

#endif
