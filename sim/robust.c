/* robust.c — the shared setup of GSL's robust linear fit (bisquare, 200 iterations). */
#include "robust.h"

#include <math.h>
#include <string.h>

int robust_alloc(robust_fit *f, size_t n, size_t p, unpad_err *err)
{
    memset(f, 0, sizeof *f);
    if (p < 1 || n <= p)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "robust fit of %zu equations in %zu unknowns", n, p);
    unpad_gsl_quiet();
    f->n = n;
    f->p = p;
    f->X = gsl_matrix_calloc(n, p);
    f->y = gsl_vector_calloc(n);
    f->b = gsl_vector_calloc(p);
    f->cov = gsl_matrix_calloc(p, p);
    f->w = gsl_multifit_robust_alloc(gsl_multifit_robust_bisquare, n, p);
    if (f->w)
        gsl_multifit_robust_maxiter(ROBUST_MAXITER, f->w);
    if (!f->X || !f->y || !f->b || !f->cov || !f->w) {
        robust_free(f);
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory for a fit of %zu x %zu", n, p);
    }
    return UNPAD_OK;
}

void robust_free(robust_fit *f)
{
    if (f->w)
        gsl_multifit_robust_free(f->w);
    if (f->cov)
        gsl_matrix_free(f->cov);
    if (f->b)
        gsl_vector_free(f->b);
    if (f->y)
        gsl_vector_free(f->y);
    if (f->X)
        gsl_matrix_free(f->X);
    memset(f, 0, sizeof *f);
}

int robust_solve(robust_fit *f)
{
    return gsl_multifit_robust(f->X, f->y, f->b, f->cov, f->w);
}

double robust_coef(const robust_fit *f, size_t j) { return gsl_vector_get(f->b, j); }

double robust_cov(const robust_fit *f, size_t i, size_t j) { return gsl_matrix_get(f->cov, i, j); }

double robust_se(const robust_fit *f, size_t j)
{
    double v = gsl_matrix_get(f->cov, j, j);
    return v > 0 ? sqrt(v) : 0;
}

double robust_weight(const robust_fit *f, size_t i)
{
    gsl_multifit_robust_stats s = gsl_multifit_robust_statistics(f->w);
    return gsl_vector_get(s.weights, i);
}
