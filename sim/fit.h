/* fit.h — calibration: the cost model's coefficients fitted to measured trace rows (GSL least
 * squares, robust to outliers: fit.c), the helpers that predict one trace row from its own batch
 * description (fit_row.c, shared with validate.c), the report of a fit (fit_report.c) and the
 * transfer of a calibration to other hardware (fit_transfer.c). Synthetic traces: synth.h.
 *
 * A trace row carries flops, bytes, seqs, tokens, sum_len2 and max_len but not the individual
 * lengths. Every operator except the FMHA is linear in what the row carries, so its op_cost is
 * rebuilt exactly (ops_step gives the shape: launches, the tensor share of the FLOPs, GEMM rows per
 * FLOP). The FMHA tile simulation needs lengths: fit_row_lengths rebuilds a list with the row's
 * count, total and maximum exactly and its sum of squares approximately (as few sequences at
 * max_len as needed, the others spread uniformly with the remaining mean and variance), and
 * fit_fmha_us averages the simulation over a few fixed launch orders (the row does not carry the
 * order). docs/calibration.md states what that approximation costs.
 *
 * The fits (each relative: residual = (predicted - measured) / measured):
 *   joint robust linear fit (gsl_multifit_robust, bisquare) over GEMM, memory-bound and optimizer
 *   rows with a shared launch overhead and one efficiency per operator (op_eff, calib.h):
 *     GEMM op:   dur - scalar/fp32 = tf/peak * (1/eff_op) + tf/(peak M) * (m_half/gemm_eff) + launches * launch_us
 *     memory op: dur = bytes/bw * (1/eff_op) + launches * launch_us       (normalization, elementwise)
 *     optim:     dur = bytes/bw * (1/optim_bw_eff) + launches * launch_us
 *   an operator with fewer than FIT_OP_MIN_ROWS rows shares one column with the others of its
 *   class; gemm_eff and bw_eff are that pooled value, or the work-weighted mean of the operators';
 *   FMHA: per direction (forward and backward are different kernels) a robust linear fit through
 *     the tile simulation's decomposition, unknowns 1/attn_eff and attn_cta_us (attn_bwd_*), with
 *     bisquare reweighting (launch_us and bw_eff from the joint fit);
 *   all-reduce / exchange: dur - latency = bytes/link_bw * (1/comm_eff), robust, using per step
 *     the fastest rank's row (slower ranks' rows include waiting for the slowest);
 *   step overhead: robust location of (step span - busy time) per traced step and rank, or, with
 *     fit_overhead_untraced, of (wall time - the step model without overhead) per untraced step. */
#ifndef UNPAD_FIT_H
#define UNPAD_FIT_H

#include <stdio.h>

#include "calib.h"
#include "cost.h"
#include "trace.h"

/* ---- predicting one trace row ------------------------------------------------------------------ */

/* The model config whose name is `name`, or NULL. */
const model_cfg *fit_model_find(const model_cfg *models, int n_models, const char *name);

/* Rebuilds r->seqs lengths into len[0..r->seqs): sum exactly r->tokens, maximum r->max_len, sum of
 * squares close to r->sum_len2. EINVAL when the description is impossible (tokens < seqs, ...). */
int fit_row_lengths(const trace_row *r, int model_max_len, int *len, unpad_err *err);

/* The op_cost of a row: flops and bytes from the row, launches and the tensor/rows shares from
 * ops_step on the rebuilt batch. The variant (fused or unfused) is the one whose byte count is
 * nearer the row's. */
int fit_row_cost(const model_cfg *m, const trace_row *r, op_cost *oc, unpad_err *err);
/* The same, and the rebuilt lengths in *len (malloc'd, the caller frees; NULL: not wanted). */
int fit_row_cost_lengths(const model_cfg *m, const trace_row *r, op_cost *oc, int **len,
                         unpad_err *err);
/* A row's time from its op_cost (and lengths, for the FMHA), as cost_predict_step times it. */
double fit_row_time(const model_cfg *m, const hw_spec *hw, const calib_coef *c, const trace_row *r,
                    const op_cost *oc, const int *len);

/* The FMHA tile simulation (cost_fmha_us) averaged over FIT_FMHA_ORDERS fixed pseudo-random
 * orders of len[0..n): the prediction for a batch whose launch order is unknown. */
#define FIT_FMHA_ORDERS 8
double fit_fmha_us(const hw_spec *hw, const calib_coef *c, int heads, const int *len, int n, int dir);

/* Predicted duration of one row with coefficients c (as cost_predict_step would time it). */
int fit_row_predict(const model_cfg *m, const hw_spec *hw, const calib_coef *c, const trace_row *r,
                    double *us, unpad_err *err);

/* FMHA time of several rows' batches (the groups of one grouped launch, 1..64 rows) on their
 * streams: cost_fmha_streams_us over the rows' rebuilt lengths in group order, averaged over
 * FIT_FMHA_ORDERS orders within each group, floored by the bytes, plus the launches of the
 * longest stream chain. */
int fit_rows_fmha_together(const model_cfg *m, const hw_spec *hw, const calib_coef *c,
                           const trace_row *const *rows, int n, double *us, unpad_err *err);

/* ---- checks on input traces ------------------------------------------------------------------- */

/* Appends to models[0..*n) (room for cap) the config of every model a row names that is not there
 * yet, loaded from <dir>/<name>.cfg; a name that is not a plain file name is refused. */
int fit_models_resolve(const trace_set *sets, int nsets, const char *dir, model_cfg *models, int *n,
                       int cap, unpad_err *err);

/* Refuses a trace with no rows, rows of mixed hardware, hardware other than `hw` (NULL: any), or
 * the fp32 build's products (bf16 and --fp8 on traces are taken; cli_traces_load refuses a mix). */
int fit_check_trace(const trace_set *set, const char *path, const char *hw, unpad_err *err);

/* Refuses a trace whose rows name more than one model, or a layer the model (among
 * models[0..n)) does not have; the row is named by its position, step, rank and operator. */
int fit_check_trace_model(const trace_set *set, const char *path, const model_cfg *models, int n, unpad_err *err);

/* ---- calibration ------------------------------------------------------------------------------ */

typedef enum {
    FIT_GEMM_EFF,
    FIT_GEMM_M_HALF,
    FIT_ATTN_EFF,
    FIT_ATTN_CTA_US,
    FIT_ATTN_BWD_EFF,
    FIT_ATTN_BWD_CTA_US,
    FIT_BW_EFF,
    FIT_LAUNCH_US,
    FIT_OPTIM_BW_EFF,
    FIT_COMM_EFF,
    FIT_STEP_OVERHEAD_US,
    FIT_GEMM_NARROW,
    FIT_BW_NARROW,
    FIT_ATTN_NARROW,
    FIT_ATTN_BWD_NARROW,
    FIT_ATTN_LOAD,
    FIT_ATTN_BWD_LOAD,
    FIT_HOST_LAUNCH_US,
    FIT_GRAPH_LAUNCH_US,
    FIT_GRAPH_STEP_OVERHEAD_US,
    FIT_NPARAM
} fit_param_id;

typedef struct {
    double value, se; /* coefficient and its standard error (0 when not fitted) */
    int fitted;       /* 0: no rows determined it; value kept from the initial coefficients */
    long rows;        /* rows (or steps) that determined it */
} fit_param;

/* Residual summary of one group of rows under the fitted coefficients, in % of the measured time. */
typedef struct {
    long rows;       /* rows in the group */
    long rejected;   /* rows the robust fit gave (almost) zero weight: outliers */
    double median_abs_pct, max_abs_pct, rms_pct, bias_pct; /* rms and bias over kept rows */
} fit_resid;

/* Rows an operator needs for an efficiency of its own in the joint fit. */
#define FIT_OP_MIN_ROWS 8

/* residual groups: op classes, then the step overhead, then the steps run as CUDA graphs */
enum { FIT_GROUP_STEP = OPC_COUNT, FIT_GROUP_GRAPHS, FIT_NGROUP };

typedef struct {
    calib_coef coef;           /* the fitted coefficients (fitted = 1), others from the initial */
    fit_param param[FIT_NPARAM];
    fit_param op[OP_COUNT];    /* per-operator efficiencies (calib_coef.op_eff); fitted = 0: class value */
    fit_resid resid[FIT_NGROUP];
    long rows_used, rows_skipped;
    char notes[1024];          /* what was skipped or kept, for the person reading the output */
} fit_result;

const char *fit_param_name(fit_param_id p);  /* "gemm_eff", ... as in calib files */
double *fit_param_field(calib_coef *c, fit_param_id p); /* the field of c that p is */
const char *fit_group_name(int g);           /* op class names, then "step overhead" */

/* Fits the coefficients to the rows of sets[0..nsets) (one set per trace file: steps are numbered
 * per file). `init` gives the starting values and the coefficients with no rows (attn_ctas_per_sm
 * is never fitted). models[] must hold every model named by a row. */
int fit_calibrate(const trace_set *sets, int nsets, const model_cfg *models, int n_models,
                  const hw_spec *hw, const calib_coef *init, fit_result *out, unpad_err *err);

/* The step overhead from untraced steps instead of the traced gaps: gap_us[i] is a step's measured
 * wall time minus what the step model without overhead gives for its batch, step_us[i] its wall
 * time (both microseconds); the overhead is their robust location (bisquare), floored at 0, and
 * replaces out's step overhead, its row count and its residual group (% of the step). Tracing
 * leaves gaps between the operators that untraced steps do not have, so this is the overhead of
 * the steps a user runs. */
int fit_overhead_untraced(fit_result *out, const double *gap_us, const double *step_us, size_t n,
                          unpad_err *err);

/* The host's enqueueing time per kernel (calib_coef.host_launch_us, step_host_wait_us) from the
 * same untraced steps: gap_us[i] as above with no wait modelled, wait_us[i * nh + j] the wait
 * step i has under host time hs[j] (hs[0] = 0, increasing). For each candidate the overhead is the
 * gaps' robust location, and the one kept is the candidate whose steps' median |residual| (% of
 * the step, over every step: a candidate cannot gain by making steps outliers) is least. Sets
 * out's host_launch_us (its row count, its standard error the grid's step) and writes the gaps
 * under it into gap_us, for fit_overhead_untraced. The wait only grows the predicted steps, so a
 * data set without steps short enough to wait keeps 0. */
int fit_host_untraced(fit_result *out, double *gap_us, const double *step_us, size_t n, const double *hs,
                      int nh, const double *wait_us, unpad_err *err);

/* The coefficients of the trainer's --graphs on (calib_coef.graph_launch_us, graph_step_overhead_us)
 * from untraced steps of runs with graphs: gap_us[i] is a step's wall time minus the step model's
 * time for its batch with no launches, no host wait and no overhead, launches[i] the step's kernel
 * launches (the model's time per microsecond of launch_us), step_us[i] its wall time. A robust
 * (bisquare) fit of gap = graph_launch_us x launches + graph_step_overhead_us, each floored at 0;
 * the launch counts must differ between steps (runs of two models, or of other virtual-rank counts). */
int fit_graphs_untraced(fit_result *out, const double *gap_us, const double *launches, const double *step_us,
                        size_t n, unpad_err *err);

/* Per-row residuals (set index, row keys, measured, predicted, % error) as CSV, written atomically. */
int fit_write_residuals(const char *path, const trace_set *sets, int nsets, const model_cfg *models,
                        int n_models, const hw_spec *hw, const calib_coef *c, unpad_err *err);

/* Prints the coefficient table (value ± se, initial value) and the residual summary. */
void fit_print(FILE *f, const fit_result *r, const calib_coef *init);

/* ---- cross-hardware transfer ------------------------------------------------------------------ */

/* Coefficients for hardware `to` from a calibration fitted on `from`: efficiencies (fractions of
 * peak) carried over, gemm_m_half scaled by the multiprocessor ratio (rows needed to fill the GPU),
 * attn_cta_us by the clock ratio, launch_us by the ratio of the specs' launch overheads; the
 * step overhead kept. An estimate, not a measurement: `transferred` is set, so the written file
 * says so. */
void fit_transfer(const calib_coef *src, const hw_spec *from, const hw_spec *to, calib_coef *out);

#endif
