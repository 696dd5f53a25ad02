/* online.c — the trainer's online refit of the per-sequence cost (see online.h). */
#include "online.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit.h>

#include "robust.h"

#define NCOEF 4            /* k, c0, c1, c2 */

typedef struct {
    int step;
    double n, s1, s2; /* sequences, sum of lengths, sum of squared lengths */
    double t_us;      /* measured compute time */
} online_obs;

struct online_cal {
    online_opts o;
    int max_ranks;
    online_obs *obs; /* (window x max_ranks) */
    int nobs, cap;
    int newest;      /* newest step seen (valid when nobs > 0 or seen) */
    int seen;
};

int online_alloc(const online_opts *opts, int max_ranks, online_cal **out, unpad_err *err)
{
    *out = NULL;
    if (!opts || opts->window < 1 || max_ranks < 1 || opts->min_obs < 0 || opts->min_cv < 0)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "online calibration needs window >= 1 and max_ranks >= 1 (got window %d, "
                          "max_ranks %d)", opts ? opts->window : 0, max_ranks);
    if ((long)opts->window * max_ranks > 100000000L)
        return unpad_fail(err, UNPAD_ERANGE, NULL, 0, "window %d x %d ranks: too many observations",
                          opts->window, max_ranks);
    online_cal *oc = calloc(1, sizeof *oc);
    if (!oc)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    oc->o = *opts;
    if (oc->o.min_obs == 0)
        oc->o.min_obs = NCOEF + 3;
    if (oc->o.min_cv == 0)
        oc->o.min_cv = 1e-4;
    oc->max_ranks = max_ranks;
    oc->cap = opts->window * max_ranks;
    oc->obs = malloc(sizeof *oc->obs * (size_t)oc->cap);
    if (!oc->obs) {
        free(oc);
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    }
    *out = oc;
    return UNPAD_OK;
}

void online_free(online_cal *oc)
{
    if (!oc)
        return;
    free(oc->obs);
    free(oc);
}

void online_reset(online_cal *oc)
{
    oc->nobs = 0;
    oc->seen = 0;
}

int online_count(const online_cal *oc) { return oc->nobs; }

int online_steps(const online_cal *oc)
{
    /* steps are few (window); a quadratic count keeps the struct simple */
    int k = 0;
    for (int i = 0; i < oc->nobs; i++) {
        int dup = 0;
        for (int j = 0; j < i && !dup; j++)
            dup = oc->obs[j].step == oc->obs[i].step;
        k += !dup;
    }
    return k;
}

int online_add(online_cal *oc, int step, const int *len, int n, double compute_ms, unpad_err *err)
{
    if (n < 1 || !len)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "step %d: an observation needs at least one sequence", step);
    if (!(compute_ms > 0) || !isfinite(compute_ms))
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "step %d: compute time %g ms (expected a finite time > 0)", step, compute_ms);
    double s1 = 0, s2 = 0;
    for (int i = 0; i < n; i++) {
        if (len[i] < 1 || len[i] > 65535)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                              "step %d: sequence %d has length %d (expected 1..65535)", step, i, len[i]);
        s1 += len[i];
        s2 += (double)len[i] * len[i];
    }
    if (oc->seen && step <= oc->newest - oc->o.window)
        return unpad_fail(err, UNPAD_ERANGE, NULL, 0,
                          "step %d is older than the window (newest step %d, window %d steps)", step,
                          oc->newest, oc->o.window);
    if (!oc->seen || step > oc->newest) {
        oc->newest = step;
        oc->seen = 1;
        int k = 0; /* slide: keep the steps newest - W + 1 .. newest */
        for (int i = 0; i < oc->nobs; i++)
            if (oc->obs[i].step > oc->newest - oc->o.window)
                oc->obs[k++] = oc->obs[i];
        oc->nobs = k;
    }
    int same = 0;
    for (int i = 0; i < oc->nobs; i++)
        same += oc->obs[i].step == step;
    if (same >= oc->max_ranks || oc->nobs >= oc->cap)
        return unpad_fail(err, UNPAD_ERANGE, NULL, 0,
                          "step %d already has %d observations (max_ranks %d)", step, same, oc->max_ranks);
    oc->obs[oc->nobs++] = (online_obs){.step = step, .n = n, .s1 = s1, .s2 = s2, .t_us = compute_ms * 1e3};
    return UNPAD_OK;
}

/* Coefficient of variation of x[0..n). */
static double cv_of(const double *x, int n)
{
    double m = 0, v = 0;
    for (int i = 0; i < n; i++)
        m += x[i];
    m /= n;
    for (int i = 0; i < n; i++)
        v += (x[i] - m) * (x[i] - m);
    v /= n;
    return m != 0 ? sqrt(v) / fabs(m) : 0;
}

/* Relative rms of what is left of y after least squares on the columns X (n x p, p < n). */
static double resid_cv(const gsl_matrix *X, const double *y, int n)
{
    size_t p = X->size2;
    gsl_vector *yv = gsl_vector_alloc((size_t)n), *c = gsl_vector_alloc(p);
    gsl_matrix *cov = gsl_matrix_alloc(p, p);
    gsl_multifit_linear_workspace *w = gsl_multifit_linear_alloc((size_t)n, p);
    double out = -1, chisq, m = 0;
    if (yv && c && cov && w) {
        for (int i = 0; i < n; i++) {
            gsl_vector_set(yv, (size_t)i, y[i]);
            m += fabs(y[i]);
        }
        m /= n;
        if (!gsl_multifit_linear(X, yv, c, cov, &chisq, w))
            out = m > 0 ? sqrt(chisq / n) / m : 0;
    }
    if (w) gsl_multifit_linear_free(w);
    if (cov) gsl_matrix_free(cov);
    if (c) gsl_vector_free(c);
    if (yv) gsl_vector_free(yv);
    return out;
}

/* The observations as columns: sequences, sum of lengths and of squared lengths, and the scales
 * that bring each to unit mean (the normal equations stay well conditioned: S2 ~ 1e7). */
typedef struct {
    int n;
    double *s1, *s2, *cnt;  /* (n) */
    double sc[NCOEF];       /* 1, mean count, mean S1, mean S2 */
    int fit_c0;             /* the counts vary: c0 is fitted (else the prior's is kept) */
} refit_cols;

static void cols_free(refit_cols *x)
{
    free(x->s1);
    free(x->s2);
    free(x->cnt);
}

/* The columns of the window, and the refusals of data that cannot separate the terms: every rank
 * with the same tokens, or S2 moving in step with (1, n, S1). */
static int refit_columns(const online_cal *oc, refit_cols *x, unpad_err *err)
{
    int n = x->n = oc->nobs;
    x->s1 = calloc((size_t)n, sizeof *x->s1);
    x->s2 = calloc((size_t)n, sizeof *x->s2);
    x->cnt = calloc((size_t)n, sizeof *x->cnt);
    if (!x->s1 || !x->s2 || !x->cnt)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    for (int i = 0; i < n; i++) {
        x->s1[i] = oc->obs[i].s1;
        x->s2[i] = oc->obs[i].s2;
        x->cnt[i] = oc->obs[i].n;
    }
    double cv1 = cv_of(x->s1, n), cvn = cv_of(x->cnt, n);
    if (cv1 < oc->o.min_cv)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "degenerate observations: every rank carried the same tokens (sum of "
                          "lengths varies by %.2g, below %.2g) over %d observations, so the per-token "
                          "cost cannot be told from the fixed cost; keep the previous model",
                          cv1, oc->o.min_cv, n);
    x->fit_c0 = cvn >= oc->o.min_cv;
    x->sc[0] = 1;
    for (int i = 0; i < n; i++) {
        x->sc[1] += x->cnt[i] / n;
        x->sc[2] += x->s1[i] / n;
        x->sc[3] += x->s2[i] / n;
    }
    /* S2 must move on its own: what is left of it after (1, n, S1) must vary. */
    int q = 2 + x->fit_c0;
    gsl_matrix *A = gsl_matrix_alloc((size_t)n, (size_t)q);
    if (!A)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    for (int i = 0; i < n; i++) {
        int j = 0;
        gsl_matrix_set(A, (size_t)i, (size_t)j++, 1.0);
        if (x->fit_c0)
            gsl_matrix_set(A, (size_t)i, (size_t)j++, x->cnt[i] / x->sc[1]);
        gsl_matrix_set(A, (size_t)i, (size_t)j, x->s1[i] / x->sc[2]);
    }
    double rest = resid_cv(A, x->s2, n);
    gsl_matrix_free(A);
    if (rest >= 0 && rest < oc->o.min_cv)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "degenerate observations: the sum of squared lengths moves in step with "
                          "the token count (independent part %.2g of its mean), so the attention "
                          "(len^2) cost cannot be told from the per-token cost; keep the previous model",
                          rest);
    return UNPAD_OK;
}

/* A cost falling with the length would misorder sequences: a negative coefficient within two
 * standard errors of 0 is noise and becomes 0; beyond that the data contradict the model. */
static int refit_signs(online_fit *out, int fit_c0, unpad_err *err)
{
    struct { double *v, se; const char *name; } chk[3] = {
        {&out->cost.c0, out->se_c0, "c0 (per sequence)"},
        {&out->cost.c1, out->se_c1, "c1 (per token)"},
        {&out->cost.c2, out->se_c2, "c2 (per token^2)"}};
    for (int j = 0; j < 3; j++) {
        if (*chk[j].v >= 0 || (j == 0 && !fit_c0))
            continue;
        if (!(-*chk[j].v <= 2 * chk[j].se))
            return unpad_fail(err, UNPAD_ERANGE, NULL, 0,
                              "the observations imply a negative %s = %.3g +- %.2g us: the measured "
                              "times do not follow c0 + c1 len + c2 len^2 (keep the previous model)",
                              chk[j].name, *chk[j].v, chk[j].se);
        size_t used = strlen(out->notes);
        snprintf(out->notes + used, sizeof out->notes - used, "%s %.3g within 2 s.e. of 0, set to 0; ",
                 chk[j].name, *chk[j].v);
        *chk[j].v = 0;
    }
    return UNPAD_OK;
}

/* Quality over the observations the robust fit kept. */
static void refit_quality(const online_cal *oc, const robust_fit *rf, online_fit *out)
{
    double sum2 = 0, mx = 0;
    int kept = 0;
    for (int i = 0; i < oc->nobs; i++) {
        if (robust_weight(rf, (size_t)i) < ROBUST_OUTLIER_WEIGHT) {
            out->outliers++;
            continue;
        }
        const online_obs *o = &oc->obs[i];
        double pred = out->fixed_us + out->cost.c0 * o->n + out->cost.c1 * o->s1 + out->cost.c2 * o->s2;
        double e = (pred - o->t_us) / o->t_us * 100;
        sum2 += e * e;
        if (fabs(e) > mx)
            mx = fabs(e);
        kept++;
    }
    out->rms_pct = kept ? sqrt(sum2 / kept) : 0;
    out->max_abs_pct = mx;
}

/* The robust fit of t = fixed + c0 n + c1 S1 + c2 S2 on the scaled columns, into out. */
static int refit_solve(const online_cal *oc, const refit_cols *x, const seq_cost *prior, robust_fit *rf,
                       online_fit *out, unpad_err *err)
{
    int n = x->n, fit_c0 = x->fit_c0;
    int p = 3 + fit_c0, col_c0 = fit_c0 ? 1 : -1, col_c1 = fit_c0 ? 2 : 1, col_c2 = col_c1 + 1;
    int rc = robust_alloc(rf, (size_t)n, (size_t)p, err);
    if (rc)
        return rc;
    gsl_matrix *X = rf->X;
    const double *sc = x->sc;
    double c0_prior = prior ? prior->c0 : 0;
    /* Absolute residuals (us): the ranks' times are alike, so this weighs them alike too, and
     * GSL's bisquare scale works on them (with every row divided by its time the response is
     * constant and the outliers were not set aside). */
    for (int i = 0; i < n; i++) {
        double yy = oc->obs[i].t_us;
        gsl_matrix_set(X, (size_t)i, 0, 1.0);
        if (fit_c0)
            gsl_matrix_set(X, (size_t)i, (size_t)col_c0, x->cnt[i] / sc[1]);
        else
            yy -= c0_prior * x->cnt[i];
        gsl_matrix_set(X, (size_t)i, (size_t)col_c1, x->s1[i] / sc[2]);
        gsl_matrix_set(X, (size_t)i, (size_t)col_c2, x->s2[i] / sc[3]);
        gsl_vector_set(rf->y, (size_t)i, yy);
    }
    int st = robust_solve(rf);
    if (st && st != GSL_EMAXITER)
        return unpad_fail(err, UNPAD_ERANGE, NULL, 0, "per-sequence cost refit failed: %s over %d observations",
                          gsl_strerror(st), n);
    if (st == GSL_EMAXITER)
        snprintf(out->notes, sizeof out->notes, "robust iterations did not settle (result kept); ");
    out->fixed_us = robust_coef(rf, 0);
    out->se_fixed = robust_se(rf, 0);
    out->c0_fitted = fit_c0;
    out->cost.c0 = fit_c0 ? robust_coef(rf, (size_t)col_c0) / sc[1] : c0_prior;
    out->se_c0 = fit_c0 ? robust_se(rf, (size_t)col_c0) / sc[1] : 0;
    out->cost.c1 = robust_coef(rf, (size_t)col_c1) / sc[2];
    out->se_c1 = robust_se(rf, (size_t)col_c1) / sc[2];
    out->cost.c2 = robust_coef(rf, (size_t)col_c2) / sc[3];
    out->se_c2 = robust_se(rf, (size_t)col_c2) / sc[3];
    return UNPAD_OK;
}

int online_refit(const online_cal *oc, const seq_cost *prior, online_fit *out, unpad_err *err)
{
    unpad_gsl_quiet();
    memset(out, 0, sizeof *out);
    int n = oc->nobs;
    out->obs = n;
    out->steps = online_steps(oc);
    if (n < oc->o.min_obs)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "too few observations to refit the per-sequence cost: %d in the window "
                          "(%d steps), need %d", n, out->steps, oc->o.min_obs);
    refit_cols x = {0};
    robust_fit rf = {0};
    int rc = refit_columns(oc, &x, err);
    if (!rc)
        rc = refit_solve(oc, &x, prior, &rf, out, err);
    if (!rc)
        rc = refit_signs(out, x.fit_c0, err);
    if (!rc)
        refit_quality(oc, &rf, out);
    robust_free(&rf);
    cols_free(&x);
    return rc;
}
