/* synth.h — synthetic traces: the cost model's own times under known coefficients, with noise and
 * outliers, in the trace format (tests and demonstrations of the calibration; every file says on
 * its first line that it is synthetic, so it is never mistaken for a measurement). */
#ifndef UNPAD_SYNTH_H
#define UNPAD_SYNTH_H

#include <stdio.h>

#include "calib.h"
#include "dist.h"
#include "model.h"

typedef struct {
    int gpus, steps, batch;      /* ranks, steps and sequences per rank per step */
    unsigned long seed;
    double noise;                /* relative Gaussian noise on every duration (e.g. 0.01) */
    double outlier_frac;         /* fraction of rows multiplied by outlier_scale */
    double outlier_scale;
    double overhead_jitter;      /* relative jitter of the step overhead */
} synth_opts;

/* 2 GPUs x 8 steps x 56 sequences, seed 1, noise 0.01, outliers 0.005 x 2.5, jitter 0.05. */
void synth_opts_default(synth_opts *o);

/* The coefficients the tests' and the demonstration's synthetic traces are made with: unlike the
 * uncalibrated defaults, so a calibration that recovers them has moved. */
void synth_truth_default(const hw_spec *hw, calib_coef *c);

/* Writes a trace whose rows are cost_predict_step's times under `truth` for batches drawn from
 * `dist`, with noise and outliers, laid out in time like a trainer's trace (the step's operator
 * order, trace_step_next; a gap of the step overhead before the all-reduce and the optimizer;
 * all-reduce rows of faster ranks include their wait for the slowest). */
int synth_trace_write(FILE *f, const model_cfg *m, const hw_spec *hw, const calib_coef *truth,
                      const unpad_dist *dist, const synth_opts *o, unpad_err *err);

#endif
