/* robust.h — robust linear least squares (GSL's bisquare-weighted multifit) with the one setup the
 * calibrations share: the fit of the measured traces (fit.c) and the trainer's online refit of the
 * per-sequence cost (online.c).
 *
 *   robust_fit f;
 *   if (robust_alloc(&f, n, p, err)) return ...;
 *   gsl_matrix_set(f.X, i, j, ...); gsl_vector_set(f.y, i, ...);   (X starts zeroed)
 *   int st = robust_solve(&f);      GSL_SUCCESS, GSL_EMAXITER (not settled; result usable), or failed
 *   robust_coef(&f, j), robust_se(&f, j), robust_weight(&f, i)
 *   robust_free(&f);
 *
 * robust_alloc turns GSL's aborting error handler off (unpad_gsl_quiet): a failure is a status. */
#ifndef UNPAD_ROBUST_H
#define UNPAD_ROBUST_H

#include <stddef.h>

#include <gsl/gsl_multifit.h>

#include "unpad.h"

#define ROBUST_MAXITER 200
#define ROBUST_OUTLIER_WEIGHT 0.01 /* an equation weighted below this counts as an outlier */

typedef struct {
    size_t n, p;
    gsl_matrix *X;   /* (n, p) the equations' coefficients, zeroed */
    gsl_vector *y;   /* (n) their right-hand sides */
    gsl_vector *b;   /* (p) the solution */
    gsl_matrix *cov; /* (p, p) its covariance */
    gsl_multifit_robust_workspace *w;
} robust_fit;

/* n equations in p unknowns (n > p >= 1); UNPAD_ENOMEM (f is left freed) when memory runs out. */
int robust_alloc(robust_fit *f, size_t n, size_t p, unpad_err *err);
void robust_free(robust_fit *f);

/* Solves; a GSL status (GSL_SUCCESS, GSL_EMAXITER: the iterations did not settle, the result is
 * kept, or the failure; gsl_strerror names it). */
int robust_solve(robust_fit *f);

double robust_coef(const robust_fit *f, size_t j);
double robust_se(const robust_fit *f, size_t j);      /* sqrt of the variance, 0 if negative */
double robust_cov(const robust_fit *f, size_t i, size_t j);
double robust_weight(const robust_fit *f, size_t i);  /* the final bisquare weight of equation i */

#endif
