/* fit_report.c — what a calibration tells the person: the coefficient and residual tables, and
 * every row's residual as CSV. */
#include "fit.h"

#include <stdio.h>

#include "outfile.h"

int fit_write_residuals(const char *path, const trace_set *sets, int nsets, const model_cfg *models,
                        int n_models, const hw_spec *hw, const calib_coef *c, unpad_err *err)
{
    unpad_outfile *o;
    int rc = outfile_open(path, &o, err);
    if (rc)
        return rc;
    FILE *f = outfile_stream(o);
    fprintf(f, "trace,step,rank,op,layer,group,stream,measured_us,predicted_us,err_pct\n");
    for (int s = 0; s < nsets && !rc; s++)
        for (size_t i = 0; i < sets[s].n; i++) {
            const trace_row *r = &sets[s].rows[i];
            const model_cfg *m = fit_model_find(models, n_models, r->model);
            double p;
            if (!m) {
                rc = unpad_fail(err, UNPAD_EINVAL, NULL, 0, "no model config '%s'", r->model);
                break;
            }
            if (r->dur_us <= 0)
                continue;
            if ((rc = fit_row_predict(m, hw, c, r, &p, err)))
                break;
            fprintf(f, "%d,%d,%d,%s,%d,%d,%d,%.3f,%.3f,%.3f\n", s + 1, r->step, r->rank,
                    op_name((op_id)r->op), r->layer, r->group, r->stream, r->dur_us, p,
                    100 * (p - r->dur_us) / r->dur_us);
        }
    if (rc) {
        outfile_abort(o);
        return rc;
    }
    return outfile_commit(o, err);
}

void fit_print(FILE *f, const fit_result *r, const calib_coef *init)
{
    fprintf(f, "%-22s %14s %12s %10s %8s\n", "coefficient", "fitted", "std. error", "initial", "rows");
    calib_coef ini = *init;
    for (int p = 0; p < FIT_NPARAM; p++) {
        const fit_param *q = &r->param[p];
        double v0 = *fit_param_field(&ini, (fit_param_id)p);
        if (q->fitted)
            fprintf(f, "%-22s %14.6g %12.3g %10.4g %8ld\n", fit_param_name((fit_param_id)p), q->value, q->se, v0,
                    q->rows);
        else
            fprintf(f, "%-22s %14.6g %12s %10.4g %8s\n", fit_param_name((fit_param_id)p), q->value, "(kept)", v0, "-");
    }
    fprintf(f, "%-22s %14.6g %12s %10.4g %8s\n", "attn_ctas_per_sm", r->coef.attn_ctas_per_sm,
            "(kept)", init->attn_ctas_per_sm, "-");
    fprintf(f, "%-22s %14.6g %12s %10.4g %8s\n", "attn_bwd_ctas_per_sm",
            calib_fmha(&r->coef, 1).ctas_per_sm, "(kept)", calib_fmha(init, 1).ctas_per_sm, "-");
    int any = 0;
    for (int op = 0; op < OP_COUNT; op++)
        any |= r->op[op].fitted;
    if (any) {
        fprintf(f, "\nper-operator efficiency (GEMM: of its products' peak at large M, with the shared small-M term;\n"
                   "memory-bound: of bandwidth); others use the class value above\n");
        fprintf(f, "%-18s %14s %12s %10s %8s\n", "operator", "eff", "std. error", "class", "rows");
        for (int op = 0; op < OP_COUNT; op++) {
            const fit_param *q = &r->op[op];
            if (!q->fitted)
                continue;
            int gemm = op_class_of((op_id)op) == OPC_GEMM;
            fprintf(f, "eff_%-14s %14.6g %12.3g %10s %8ld\n", op_name((op_id)op), q->value, q->se,
                    gemm ? "gemm" : "bandwidth", q->rows);
        }
    }
    fprintf(f, "\nresiduals: (predicted - measured) / measured, %% (outliers: rows a robust fit set aside,\n"
               "not in the statistics; step overhead: %% of the step span)\n");
    fprintf(f, "%-15s %8s %8s %10s %9s %8s %8s\n", "class", "rows", "outliers", "median|e|", "max|e|",
            "rms", "bias");
    for (int g = 0; g < FIT_NGROUP; g++) {
        const fit_resid *s = &r->resid[g];
        if (!s->rows)
            continue;
        fprintf(f, "%-15s %8ld %8ld %10.3f %9.3f %8.3f %+8.3f\n", fit_group_name(g), s->rows,
                s->rejected, s->median_abs_pct, s->max_abs_pct, s->rms_pct, s->bias_pct);
    }
    fprintf(f, "rows used %ld, left out %ld\n", r->rows_used, r->rows_skipped);
    if (r->notes[0])
        fprintf(f, "notes: %s\n", r->notes);
}
