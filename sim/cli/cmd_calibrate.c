/* cmd_calibrate.c — `unpad calibrate`: fit the cost model's coefficients to measured traces and
 * write models/calib/<hw>.cfg. Two side modes share the inputs: --transfer carries a calibration to
 * other hardware (an estimate, for cross-hardware predictions), --synthesize writes a synthetic
 * trace from known coefficients (tests and demonstrations; labelled synthetic in the file). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "opts.h"
#include "fit.h"
#include "outfile.h"
#include "resolve.h"
#include "synth.h"
#include "workload.h"

const char cmd_calibrate_what[] = "fit the cost model's coefficients to measured traces";

enum { MAX_TRACES = 256, MAX_MODELS = 16, MAX_TABLES = 16 };

static void usage(FILE *f)
{
    fprintf(f,
            "usage: unpad calibrate --traces F [F...] [--hw F] [--model F]... [--init F] [--out F]\n"
            "                       [--residuals CSV]\n"
            "       unpad calibrate --transfer CALIB --hw F [--from-hw F] [--out F]\n"
            "       unpad calibrate --synthesize OUT [--truth CALIB] [--hw F] [--model F] [--dist F]\n"
            "                       [--gpus N] [--steps K] [--batch B] [--seed S] [--noise X]\n"
            "                       [--outliers X] [--outlier-scale X]\n"
            "  --traces F     measured trace CSV (traces/*.csv); more files may follow it\n"
            "  --hw F         hardware spec the traces were measured on (default models/hw/h200-sxm.cfg);\n"
            "                 a trace from other hardware is refused\n"
            "  --model F      model config, or a name in models/ (default: the model each trace names)\n"
            "  --init F       starting coefficients (default: the uncalibrated defaults)\n"
            "  --out F        write the fitted (or transferred) coefficients (models/calib/<hw>.cfg),\n"
            "                 atomically; without it the coefficients are printed, not written\n"
            "  --residuals F  write every row's measured and predicted time and %% error as CSV\n"
            "                 (F '-' for --out or --residuals: only that file, on standard output)\n"
            "  --workloads F  fit the step overhead on the untraced steps of these runs instead of\n"
            "                 the gaps between traced operators, and the FMHA on the traced batches'\n"
            "                 own lengths (reproduced from the seed) instead of lengths rebuilt from\n"
            "                 the rows' counts: a workload table (traces/workloads-calib.csv,\n"
            "                 scripts/gpu-calib.sh: --seed 21; its trace column names the trace)\n"
            "                 with the trainer's logs in logs/ beside it; may repeat (runs of several\n"
            "                 machines or starts: each table's traces must then lie beside it)\n"
            "  --transfer C   carry calibration C (fitted on --from-hw, default models/hw/<its hw>.cfg)\n"
            "                 to the hardware of --hw: efficiencies kept, sizes and overheads scaled by\n"
            "                 the specs; an estimate for cross-hardware prediction, not a measurement\n"
            "  --synthesize O write a SYNTHETIC trace (labelled so) from the coefficients of --truth\n"
            "                 (default: gemm_eff 0.62, gemm_m_half 400, attn_eff 0.38, attn_cta_us 1.5,\n"
            "                 bw_eff 0.71, launch_us 4, optim_bw_eff 0.75, comm_eff 0.85, overhead 150)\n"
            "  --gpus N --steps K --batch B --seed S   synthetic run shape (default 2, 8, 56, 1)\n"
            "  --noise X      relative Gaussian noise of each duration (default 0.01)\n"
            "  --outliers X   fraction of rows made outliers (default 0.005), x --outlier-scale (default 2.5)\n");
}

static int do_synthesize(const char *out, resolve_inputs *in, const char *truth_path, synth_opts *o)
{
    unpad_err err = {0};
    calib_coef truth;
    if (truth_path) {
        if (calib_load(truth_path, &in->hw, &truth, &err))
            return cli_error("calibrate", &err);
    } else {
        synth_truth_default(&in->hw, &truth);
    }
    unpad_outfile *of;
    if (outfile_open(out, &of, &err))
        return cli_error("calibrate", &err);
    int rc = synth_trace_write(outfile_stream(of), &in->model, &in->hw, &truth, &in->dist, o, &err);
    if (rc)
        outfile_abort(of);
    else
        rc = outfile_commit(of, &err);
    if (rc)
        return cli_error("calibrate", &err);
    printf("wrote %s: SYNTHETIC trace of %s on %s, %d GPU%s x %d steps x %d sequences (seed %lu)\n",
           out, in->model.name, in->hw.name, o->gpus, o->gpus > 1 ? "s" : "", o->steps, o->batch,
           o->seed);
    return 0;
}

static int do_transfer(const char *src_path, const char *from_hw_path, const hw_spec *to, const char *out)
{
    unpad_err err = {0};
    calib_coef src, dst;
    /* Read without a hardware check (the whole point is another GPU): once for its hardware
     * name, then again over the defaults of that hardware. */
    calib_default(NULL, &src);
    if (cfg_load(src_path, calib_schema, calib_schema_len, &src, &err))
        return cli_error("calibrate", &err);
    char buf[4200];
    if (!from_hw_path) {
        char rel[600];
        snprintf(rel, sizeof rel, "models/hw/%s.cfg", src.hw);
        if (cli_project_path("calibrate", rel, buf, sizeof buf))
            return 1;
        from_hw_path = buf;
    }
    hw_spec from;
    if (hw_load(from_hw_path, &from, &err))
        return cli_error("calibrate", &err);
    if (strcmp(from.name, src.hw)) {
        fprintf(stderr, "unpad calibrate: %s was fitted on '%s' but --from-hw %s is '%s'\n", src_path,
                src.hw, from_hw_path, from.name);
        return 1;
    }
    calib_default(&from, &src);
    src.attn_bwd_eff = src.attn_bwd_cta_us = src.attn_bwd_ctas_per_sm = 0; /* absent: as forward */
    if (cfg_load(src_path, calib_schema, calib_schema_len, &src, &err))
        return cli_error("calibrate", &err);
    fit_transfer(&src, &from, to, &dst);
    char comment[2048];
    snprintf(comment, sizeof comment,
             "TRANSFERRED, not measured: %s (fitted on %s) carried to %s by `unpad calibrate "
             "--transfer`.\n# Efficiencies kept; gemm_m_half x SMs %d/%d; attn_cta_us, attn_bwd_cta_us x clock "
             "%.3g/%.3g; launch_us x spec launch %.3g/%.3g.", src_path, from.name, to->name, to->sms, from.sms,
             from.clock_ghz, to->clock_ghz, to->launch_us, from.launch_us);
    if (out && calib_write(out, &dst, comment, &err))
        return cli_error("calibrate", &err);
    printf("%-18s %12s %12s\n", "coefficient", from.name, to->name);
    for (size_t i = 1; i < calib_schema_len; i++) {
        const cfg_field *k = &calib_schema[i];
        if (k->type != CFG_DOUBLE)
            continue;
        printf("%-18s %12.6g %12.6g\n", k->key, *(const double *)((const char *)&src + k->offset),
               *(const double *)((const char *)&dst + k->offset));
    }
    if (out)
        printf("wrote %s (an estimate: no %s trace was fitted)\n", out, to->name);
    return 0;
}

/* The flags. */
typedef struct {
    resolve_req rq;
    const char *trace_v[MAX_TRACES], *model_v[MAX_MODELS], *table_v[MAX_TABLES];
    cli_strs traces, models, workloads;
    const char *init, *out, *resid, *transfer, *from_hw, *synth, *truth;
    synth_opts so;
    int seed;
    cli_path model_at[MAX_MODELS], calib_at[3], hw_at[1]; /* the names resolved */
} calibrate_opts;

static int calibrate_parse(int argc, char **argv, calibrate_opts *o)
{
    memset(o, 0, sizeof *o);
    o->traces = (cli_strs){.v = o->trace_v, .max = MAX_TRACES, .what = "traces"};
    o->models = (cli_strs){.v = o->model_v, .max = MAX_MODELS, .what = "--model"};
    o->workloads = (cli_strs){.v = o->table_v, .max = MAX_TABLES, .what = "--workloads tables"};
    synth_opts_default(&o->so);
    o->seed = 1;
    synth_opts *so = &o->so;
    const cli_opt opts[] = {
        CLI_OPT_STRS("traces", &o->traces),
        CLI_OPT_HW(&o->rq),
        CLI_OPT_STRS("model", &o->models),
        CLI_OPT_STR("init", &o->init),
        CLI_OPT_OUT("out", &o->out),
        CLI_OPT_OUT("residuals", &o->resid),
        CLI_OPT_STRS("workloads", &o->workloads),
        CLI_OPT_STR("transfer", &o->transfer),
        CLI_OPT_STR("from-hw", &o->from_hw),
        CLI_OPT_STR("synthesize", &o->synth),
        CLI_OPT_STR("truth", &o->truth),
        CLI_OPT_DIST(&o->rq),
        CLI_OPT_INT("gpus", &so->gpus, 1, 1024),
        CLI_OPT_INT("steps", &so->steps, 1, 100000),
        CLI_OPT_INT("batch", &so->batch, 1, 4096),
        CLI_OPT_SEED(&o->seed),
        CLI_OPT_DOUBLE("noise", &so->noise, 0, 0.5),
        CLI_OPT_DOUBLE("outliers", &so->outlier_frac, 0, 0.5),
        CLI_OPT_DOUBLE("outlier-scale", &so->outlier_scale, 0.01, 100),
    };
    /* files after the options are more traces (so `--traces traces/calib-*.csv` works) */
    int rc = cli_opts_parse("calibrate", argc, argv, 1, opts, CLI_NOPTS(opts), usage, &o->traces);
    if (rc >= 0)
        return rc;
    o->so.seed = (unsigned long)o->seed;
    o->rq.no_calib = 1; /* the coefficients come from --init, --transfer or --truth, never from here */
    if (!!o->synth + !!o->transfer + !!o->traces.n != 1) {
        fprintf(stderr, "unpad calibrate: give exactly one of --traces, --transfer, --synthesize\n");
        usage(stderr);
        return 2;
    }
    if (o->workloads.n && !o->traces.n) {
        fprintf(stderr, "unpad calibrate: --workloads goes with --traces (it fits the step overhead on top of "
                        "their fit)\n");
        return 2;
    }
    if (o->synth && o->models.n > 1) {
        fprintf(stderr, "unpad calibrate: --synthesize takes one --model\n");
        return 2;
    }
    if ((rc = cli_resolve_names("calibrate", "--model", o->models.v, o->models.n, "models", ".cfg",
                                o->model_at)) >= 0 ||
        (rc = cli_resolve_names("calibrate", "--init", &o->init, 1, "models/calib", ".cfg", &o->calib_at[0])) >= 0 ||
        (rc = cli_resolve_names("calibrate", "--transfer", &o->transfer, 1, "models/calib", ".cfg", &o->calib_at[1])) >=
            0 ||
        (rc = cli_resolve_names("calibrate", "--truth", &o->truth, 1, "models/calib", ".cfg", &o->calib_at[2])) >= 0 ||
        (rc = cli_resolve_names("calibrate", "--from-hw", &o->from_hw, 1, "models/hw", ".cfg", o->hw_at)) >= 0)
        return rc;
    return -1;
}

/* The header comment of the fitted file: the traces and the standard errors. */
static void fit_comment(const calibrate_opts *o, long rows, const fit_result *res, char *comment, size_t n)
{
    int at = snprintf(comment, n, "fitted by `unpad calibrate` on %ld rows of:", rows);
    for (int i = 0; i < o->traces.n && at < (int)n - 200; i++)
        at += snprintf(comment + at, n - (size_t)at, " %s", o->traces.v[i]);
    at += snprintf(comment + at, n - (size_t)at, "\n# standard errors:");
    for (int p = 0; p < FIT_NPARAM && at < (int)n - 60; p++)
        if (res->param[p].fitted)
            at += snprintf(comment + at, n - (size_t)at, " %s %.3g;", fit_param_name((fit_param_id)p),
                           res->param[p].se);
}

/* The workload table of --workloads, read once: its rows and where their logs are. */
typedef struct {
    const char *path;
    workload_row *rows;
    int n;
    char home[4096], dir[4096], logs[4200];
} workload_table;

static int table_load(const char *path, workload_table *t)
{
    unpad_err err = {0};
    memset(t, 0, sizeof *t);
    if (workload_load(path, &t->rows, &t->n, &err) || resolve_home(t->home, sizeof t->home, &err))
        return cli_error("calibrate", &err);
    const char *slash = strrchr(path, '/');
    t->path = path;
    snprintf(t->dir, sizeof t->dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    snprintf(t->logs, sizeof t->logs, "%s/logs", t->dir);
    return 0;
}

/* Whether trace file `trace` is the one row w's `trace` column names: the same file name, and,
 * when several tables are given (whose runs share names), the file beside the table. */
static int table_names(const workload_table *t, const workload_row *w, const char *trace, int ntables)
{
    const char *b = strrchr(trace, '/');
    if (strcmp(b ? b + 1 : trace, w->trace))
        return 0;
    if (ntables == 1)
        return 1;
    char beside[8300], a[PATH_MAX], c[PATH_MAX];
    snprintf(beside, sizeof beside, "%s/%s", t->dir, w->trace);
    return realpath(beside, a) && realpath(trace, c) && !strcmp(a, c);
}

/* Host times per forward kernel tried for host_launch_us (fit_host_untraced): 0 to 40 us. */
#define HOST_GRID_N 81
#define HOST_GRID_STEP 0.5

/* --workloads, the runs with --graphs on (their logs say so): for each untraced step its wall time
 * minus the step model's with no launches, and its launches (the model's microseconds per
 * microsecond of launch_us), into gap0, launches, step from *k on. */
static int graph_steps(const workload_setup *s0, const workload_row *w, double *gap0, double *launches,
                       double *step, size_t *k, unpad_err *err)
{
    calib_coef c1 = *s0->calib;
    c1.launch_us = 1;
    workload_setup s1 = *s0;
    s1.calib = &c1;
    size_t k0 = *k, k1 = *k;
    int rc = workload_step_gaps(s0, w, gap0, step, k, err);
    if (!rc)
        rc = workload_step_gaps(&s1, w, launches, step, &k1, err);
    for (size_t i = k0; !rc && i < *k; i++)
        launches[i] = gap0[i] - launches[i];
    return rc;
}

/* --workloads: the host's enqueueing time per kernel and the step overhead from the untraced steps
 * of the table's runs (their trainer logs), under the coefficients just fitted; from the runs with
 * --graphs on among them, the graph coefficients instead. */
static int fit_untraced(const workload_table *tabs, int ntables, const hw_spec *hw, fit_result *res)
{
    unpad_err err = {0};
    int rc = 1, runs = 0, gruns = 0;
    size_t cap = 0, k = 0, kg = 0;
    double hs[HOST_GRID_N];
    for (int j = 0; j < HOST_GRID_N; j++)
        hs[j] = j * HOST_GRID_STEP;
    for (int j = 0; j < ntables; j++)
        for (int i = 0; i < tabs[j].n; i++)
            cap += (size_t)tabs[j].rows[i].steps;
    double *gap = malloc((cap ? cap : 1) * sizeof *gap), *step = malloc((cap ? cap : 1) * sizeof *step);
    double *wait = malloc((cap ? cap : 1) * HOST_GRID_N * sizeof *wait);
    double *ggap = malloc((cap ? cap : 1) * sizeof *ggap), *glaunch = malloc((cap ? cap : 1) * sizeof *glaunch);
    double *gstep = malloc((cap ? cap : 1) * sizeof *gstep);
    if (!gap || !step || !wait || !ggap || !glaunch || !gstep) {
        fprintf(stderr, "unpad calibrate: out of memory\n");
        goto out;
    }
    calib_coef c = res->coef, c0;
    c.step_overhead_us = 0;
    c.host_launch_us = 0;
    c0 = c;
    c0.launch_us = 0;
    for (int j = 0; j < ntables; j++) {
        const workload_table *t = &tabs[j];
        workload_setup s = {.home = t->home, .logs = t->logs, .hw = hw, .calib = &c, .seed = WORKLOAD_SEED};
        workload_setup s0 = s;
        s0.calib = &c0;
        for (int i = 0; i < t->n; i++) {
            const workload_row *w = &t->rows[i];
            int g = workload_log_graphs(&s, w);
            if (g ? graph_steps(&s0, w, ggap, glaunch, gstep, &kg, &err)
                  : workload_step_waits(&s, w, gap, step, &k, hs, HOST_GRID_N, wait, &err)) {
                cli_error("calibrate", &err);
                goto out;
            }
            runs += !g;
            gruns += g;
        }
    }
    if ((k || !kg) && (fit_host_untraced(res, gap, step, k, hs, HOST_GRID_N, wait, &err) ||
                       fit_overhead_untraced(res, gap, step, k, &err))) {
        cli_error("calibrate", &err);
        goto out;
    }
    if (kg && fit_graphs_untraced(res, ggap, glaunch, gstep, kg, &err)) {
        cli_error("calibrate", &err);
        goto out;
    }
    if (k)
        printf("step overhead and host time per kernel from %zu untraced steps of %d workloads (%s%s)\n", k, runs,
               tabs[0].path, ntables > 1 ? " and more" : "");
    if (kg)
        printf("--graphs on: graph_launch_us and graph_step_overhead_us from %zu untraced steps of %d workloads\n",
               kg, gruns);
    printf("\n");
    rc = 0;
out:
    free(gap);
    free(step);
    free(wait);
    free(ggap);
    free(glaunch);
    free(gstep);
    return rc;
}

/* The steps of set's rank-0 FMHA rows, each once, into steps (room for set->n); their count. */
static int traced_steps(const trace_set *set, int *steps)
{
    int n = 0;
    for (size_t r = 0; r < set->n; r++) {
        const trace_row *x = &set->rows[r];
        int seen = 0;
        for (int j = 0; j < n && !seen; j++)
            seen = steps[j] == x->step;
        if (x->op == OP_FMHA_FWD && x->rank == 0 && !seen)
            steps[n++] = x->step;
    }
    return n;
}

/* --workloads: the attention lengths of the traced batches of the table's one-rank runs,
 * reproduced from the seed (the trace rows carry only their counts), attached to the trace the
 * row's `trace` column names. Returns the batches attached, -1 on error (printed). */
static int attach_lengths(const workload_table *t, int ntables, const calibrate_opts *o, trace_set *sets)
{
    unpad_err err = {0};
    workload_setup ws = {.home = t->home, .seed = WORKLOAD_SEED};
    int got = 0;
    for (int i = 0; i < t->n; i++) {
        const workload_row *w = &t->rows[i];
        for (int k = 0; k < o->traces.n && w->vranks == 1; k++) {
            trace_set *set = &sets[k];
            if (set->nlens || !table_names(t, w, o->traces.v[k], ntables))
                continue;
            int *steps = malloc((set->n ? set->n : 1) * sizeof *steps), ns = steps ? traced_steps(set, steps) : 0;
            int *len = steps ? malloc(((size_t)ns * w->batch + 1) * sizeof *len) : NULL;
            set->lens = len ? calloc((size_t)ns + 1, sizeof *set->lens) : NULL;
            if (!set->lens) {
                free(steps);
                free(len);
                fprintf(stderr, "unpad calibrate: out of memory\n");
                return -1;
            }
            int rc = workload_batch_lengths(&ws, w, steps, ns, len, &err);
            for (int j = 0; !rc && j < ns; j++) {
                int *own = malloc((size_t)w->batch * sizeof *own);
                if (!own) {
                    rc = unpad_fail(&err, UNPAD_ENOMEM, NULL, 0, "out of memory");
                    break;
                }
                memcpy(own, len + (size_t)j * w->batch, (size_t)w->batch * sizeof *own);
                set->lens[set->nlens++] = (trace_batch_lengths){.step = steps[j], .rank = 0, .n = w->batch,
                                                                .len = own};
                got++;
            }
            free(steps);
            free(len);
            if (rc) {
                cli_error("calibrate", &err);
                return -1;
            }
        }
    }
    return got;
}

/* --traces: the fit, its table, the residuals and the coefficients' file. */
static int do_fit(const calibrate_opts *o, resolve_inputs *in, trace_set *sets, model_cfg *models,
                  fit_result *res)
{
    unpad_err err = {0};
    calib_coef init;
    if (o->init) {
        if (calib_load(o->init, &in->hw, &init, &err))
            return cli_error("calibrate", &err);
    } else {
        calib_default(&in->hw, &init);
    }
    int n = o->traces.n, nmodels;
    if (cli_traces_load("calibrate", o->traces.v, n, o->models.v, o->models.n, in->hw.name, sets, models, &nmodels,
                        MAX_MODELS))
        return 1;
    long rows = 0;
    for (int i = 0; i < n; i++)
        rows += (long)sets[i].n;
    printf("unpad calibrate: %ld rows from %d trace%s on %s%s\n", rows, n, n > 1 ? "s" : "", in->hw.name,
           n > 0 && sets[0].products == TRACE_FP8 ? ", FP8 products (unpad-train --fp8 on)" : "");
    workload_table *wt = calloc(MAX_TABLES, sizeof *wt);
    int rc = 0, nt = 0;
    if (!wt) {
        fprintf(stderr, "unpad calibrate: out of memory\n");
        return 1;
    }
    for (; nt < o->workloads.n && !rc; nt++) {
        int got = table_load(o->workloads.v[nt], &wt[nt]) ? -1 : attach_lengths(&wt[nt], o->workloads.n, o, sets);
        if (got < 0)
            rc = 1;
        else
            printf("attention lengths of %d traced batches reproduced from the seeds of %s\n", got,
                   o->workloads.v[nt]);
    }
    if (!rc) {
        printf("\n");
        if (fit_calibrate(sets, n, models, nmodels, &in->hw, &init, res, &err))
            rc = cli_error("calibrate", &err);
        else if (nt)
            rc = fit_untraced(wt, nt, &in->hw, res);
    }
    for (int j = 0; j < nt; j++)
        free(wt[j].rows);
    free(wt);
    if (rc)
        return rc;
    fit_print(stdout, res, &init);
    if (o->resid) {
        if (fit_write_residuals(o->resid, sets, n, models, nmodels, &in->hw, &res->coef, &err))
            return cli_error("calibrate", &err);
        printf("wrote %s\n", o->resid);
    }
    if (!o->out) {
        printf("(nothing written: pass --out models/calib/%s%s.cfg)\n", in->hw.name, res->coef.fp8 ? "-fp8" : "");
        return 0;
    }
    char comment[4096];
    fit_comment(o, rows, res, comment, sizeof comment);
    if (calib_write(o->out, &res->coef, comment, &err))
        return cli_error("calibrate", &err);
    printf("wrote %s\n", o->out);
    return 0;
}

/* The mode asked, after the inputs are loaded and no output is one of the inputs. */
static int calibrate_mode(const calibrate_opts *o, resolve_inputs *in)
{
    const char *outs[3] = {o->synth, o->out, o->resid};
    const char *more[MAX_TRACES + MAX_MODELS + MAX_TABLES + 4] = {o->init, o->transfer, o->from_hw, o->truth};
    int nmore = 4;
    for (int i = 0; i < o->workloads.n; i++)
        more[nmore++] = o->workloads.v[i];
    for (int i = 0; i < o->traces.n; i++)
        more[nmore++] = o->traces.v[i];
    for (int i = 0; i < o->models.n; i++)
        more[nmore++] = o->models.v[i];
    if (cli_check_outputs("calibrate", in, more, nmore, outs, 3))
        return 1;
    synth_opts so = o->so;
    if (o->synth)
        return do_synthesize(o->synth, in, o->truth, &so);
    if (o->transfer)
        return do_transfer(o->transfer, o->from_hw, &in->hw, o->out);
    trace_set *sets = calloc((size_t)o->traces.n, sizeof *sets);
    model_cfg *models = calloc(MAX_MODELS, sizeof *models);
    fit_result *res = calloc(1, sizeof *res);
    int rc = 1;
    if (!sets || !models || !res)
        fprintf(stderr, "unpad calibrate: out of memory\n");
    else
        rc = do_fit(o, in, sets, models, res);
    for (int i = 0; sets && i < o->traces.n; i++)
        trace_set_free(&sets[i]);
    free(sets);
    free(models);
    free(res);
    return rc;
}

int cmd_calibrate(int argc, char **argv)
{
    calibrate_opts o;
    int rc = calibrate_parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (o.synth)
        o.rq.model = o.models.n ? o.models.v[0] : NULL;
    resolve_inputs in;
    memset(&in, 0, sizeof in);
    rc = cli_inputs_load("calibrate", &o.rq, &in, o.synth != NULL) ? 1 : calibrate_mode(&o, &in);
    resolve_inputs_free(&in);
    return rc;
}
