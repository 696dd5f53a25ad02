/* online.h — online calibration of the per-sequence cost the balancers use .
 *
 * The trainer measures, every step, each rank's compute time (forward + backward of its
 * micro-batch, without the collectives) and knows the lengths it gave that rank. With the
 * per-sequence cost of cost.h, cost(len) = c0 + c1 len + c2 len^2 (microseconds), a rank's time is
 *
 *     t = k + c0 n + c1 S1 + c2 S2,     n sequences, S1 = sum len, S2 = sum len^2,
 *
 * where k is the per-rank work that does not depend on the batch (launches of fixed-size kernels,
 * host work) and is the same on every rank, so it does not change an assignment. online_refit fits
 * (k, c0, c1, c2) to the observations of the last W steps with GSL's robust least squares
 * (gsl_multifit_robust, bisquare, on residuals in microseconds: the ranks' times are alike),
 * and returns a seq_cost the balancers take as it is (balance_weights, unpad_plan.cost).
 *
 * It refuses (UNPAD_EINVAL / UNPAD_ERANGE, with the reason in unpad_err) rather than return a
 * model it cannot support: too few observations, loads that do not vary (every rank with the same
 * tokens: c1 cannot be told from k), S2 moving in step with S1 (c2 cannot be told from c1), or a
 * coefficient that comes out clearly negative (a cost that falls with the length would misorder
 * sequences). When the sequence count is the same in every observation (equal-count policies), c0
 * cannot be told from k either; it does not change an equal-count assignment, so the fit keeps c0
 * from the prior model and says so (c0_fitted = 0).
 *
 * Usage (one accumulator per trainer; observations of all ranks gathered to every rank, so every
 * rank refits the same model from the same numbers and the assignment stays identical):
 *
 *     online_cal *oc;  online_alloc(&(online_opts){.window = 20}, ranks, &oc, &err);
 *     every step s, every rank r:  online_add(oc, s, len_r, n_r, compute_ms_r, &err);
 *     every K steps:  if (online_refit(oc, &current, &fit, &err) == UNPAD_OK) current = fit.cost;
 *     online_free(oc); */
#ifndef UNPAD_ONLINE_H
#define UNPAD_ONLINE_H

#include "cost.h"
#include "unpad.h"

typedef struct online_cal online_cal; /* opaque: the window of observations */

typedef struct {
    int window;       /* W: steps kept; an observation older than the newest step - W + 1 is dropped (>= 1) */
    int min_obs;      /* fewest observations for a refit; 0: 3 more than the unknowns (7) */
    double min_cv;    /* smallest coefficient of variation of S1 (and of n, to fit c0) over the
                       * window that counts as varying; 0: 1e-4 */
} online_opts;

/* Fit of one refit. Units: microseconds (per sequence for cost, per rank for fixed_us). */
typedef struct {
    seq_cost cost;     /* c0 (us per sequence), c1 (us per token), c2 (us per token^2) */
    double fixed_us;   /* k: per-rank time that does not depend on the batch */
    double se_fixed, se_c0, se_c1, se_c2; /* standard errors (se_c0 = 0 when c0 was not fitted) */
    int c0_fitted;     /* 0: the sequence count did not vary; c0 is the prior's (0 without one) */
    int obs;           /* observations in the window (used) */
    int steps;         /* distinct steps in the window */
    int outliers;      /* observations the robust fit weighted below 0.01 */
    double rms_pct;    /* rms of (predicted - measured) / measured over the other observations, % */
    double max_abs_pct;/* largest |relative residual| over the other observations, % */
    char notes[256];   /* what was clamped or kept, for a log line; "" when nothing */
} online_fit;

/* An accumulator for up to max_ranks observations per step over opts->window steps. */
int online_alloc(const online_opts *opts, int max_ranks, online_cal **out, unpad_err *err);
void online_free(online_cal *oc);

/* Forgets every observation. */
void online_reset(online_cal *oc);

/* One observation: a rank at step `step` ran the sequences len[0..n) (tokens, 1..65535 each) in
 * compute_ms milliseconds (> 0). A step newer than the newest slides the window; an observation of
 * a step already out of the window is refused (UNPAD_ERANGE), as is a step with more than
 * max_ranks observations. */
int online_add(online_cal *oc, int step, const int *len, int n, double compute_ms, unpad_err *err);

/* Observations and distinct steps now in the window. */
int online_count(const online_cal *oc);
int online_steps(const online_cal *oc);

/* Refits over the window. prior (may be NULL) supplies c0 when the counts do not vary. On a
 * refusal *out is left with the counts filled and the previous model should be kept. */
int online_refit(const online_cal *oc, const seq_cost *prior, online_fit *out, unpad_err *err);

#endif
