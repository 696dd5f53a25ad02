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

typedef struct {
    trace_row *rows;
    size_t n, cap;
} trace_set;

void trace_write_header(FILE *f);
void trace_write_row(FILE *f, const trace_row *r);

/* Reads a trace CSV, appending to set; every malformed line is refused with file:line:reason
 * (the header exactly TRACE_HEADER; integers within their columns' ranges, step at most INT_MAX;
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

/* Predicted rows of one GPU's step from the cost model: per layer for encoder operators, start
 * times laid end to end from t0. Returns the end time. */
struct cost_step;
double trace_emit_predicted(FILE *f, const char *hw, const char *model, int gpus, int rank, int step,
                            int layers, const struct cost_step *st, double t0);

#endif
