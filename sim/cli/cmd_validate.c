/* cmd_validate.c — `unpad validate`: predict every measured row from its own batch description
 * with a calibration, join, and report the errors (tables, CSV, plot). */
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "opts.h"
#include "outfile.h"
#include "plot.h"
#include "progress.h"
#include "prov.h"
#include "resolve.h"
#include "validate.h"
#include "workload.h"

extern char **environ;

const char cmd_validate_what[] = "compare predictions with measured traces (error tables, plot)";

enum { MAX_TRACES = 256, MAX_MODELS = 16 };

static void usage(FILE *f)
{
    fprintf(f,
            "usage: unpad validate --traces F [F...] [--calib F] [--hw F] [--model F]... [--csv OUT]\n"
            "                      [--plot OUT.png|svg|pdf] [--json F] [--quiet] [--fp8 on|off]\n"
            "       unpad validate --workloads F [--seed S] [--steps K] [--calib F] [--hw F] [--json F]\n"
            "                      [--csv OUT] [--plot OUT.png|svg|pdf] [--quiet] [--fp8 on|off]\n"
            "  --traces F   measured trace CSV (held-out: not the ones the calibration was fitted on);\n"
            "               more files may follow it; each file is one run\n"
            "  --calib F    fitted coefficients (default: models/calib/<hw>.cfg if it exists)\n"
            "  --no-calib       the uncalibrated default coefficients instead\n"
            "  --hw F       hardware spec (default models/hw/h200-sxm.cfg); other hardware is refused\n"
            "  --model F    model config, or a name in models/ (default: the model each trace names)\n"
            "  --csv OUT    predicted and measured per row, rank load and step, for plots\n"
            "               (--workloads: per logged step, its batch's tokens, sum of len^2 and\n"
            "               longest, measured and predicted ms); OUT '-': only the CSV, on standard\n"
            "               output\n"
            "  --plot OUT   render plots/validate.gp with gnuplot to OUT, in the format of its\n"
            "               extension: .png, .svg or .pdf (pdfcairo); --workloads:\n"
            "               plots/workload-steps.gp (each logged step's error against its tokens)\n"
            "  --json F     also write the error tables (--workloads: the table) as JSON\n"
            "               (docs/json.md); F '-': only the JSON, on standard output\n"
            "  --quiet      no progress line on stderr (it appears only on a terminal)\n"
            "  --fp8 on     measurements of unpad-train --fp8 on, against models/calib/<hw>-fp8.cfg\n"
            "               (fitted on --fp8 on traces); the traces' products and the workloads'\n"
            "               logs must agree with the calibration's\n"
            "  --workloads F  a table of measured workloads (traces/workloads-heldout.csv): per\n"
            "               workload the measured wall step time, predict on the trainer's own\n"
            "               batches, the what-if's mean step time, their errors, and the memory\n"
            "  --seed S     the trainer's --seed of those runs (default 21, scripts/gpu-heldout.sh)\n"
            "  --steps K    sampled steps of the what-if (default 2000)\n");
}

/* Draws plots/<gp> from csv into png, an image of the format its extension gives (written whole or
 * not at all). */
static int run_gnuplot(const char *gp, const char *csv, const char *png, const char *title)
{
    const char *term = plot_image_format(png);
    if (strchr(csv, '\'') || strchr(png, '\'')) {
        fprintf(stderr, "unpad validate: --plot: file names with a quote are not supported\n");
        return 1;
    }
    char script[4200], rel[256], expr[12000], qtitle[2100];
    snprintf(rel, sizeof rel, "plots/%s", gp);
    if (cli_project_path("validate", rel, script, sizeof script))
        return 1;
    plot_quote(title, qtitle, sizeof qtitle);
    unpad_err err = {0};
    unpad_outfile *img; /* gnuplot draws into its temporary; renamed when not empty */
    if (outfile_open(png, &img, &err))
        return cli_error("validate", &err);
    snprintf(expr, sizeof expr, "csv='%s'; out='%s'; term='%s'; title=%s", csv, outfile_temp_path(img),
             term ? term : "png", qtitle);
    char *args[] = {"gnuplot", "-e", expr, script, NULL};
    pid_t pid;
    if (posix_spawnp(&pid, "gnuplot", NULL, NULL, args, environ)) {
        fprintf(stderr, "unpad validate: cannot run gnuplot\n");
        outfile_abort(img);
        return 1;
    }
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) ||
        outfile_size(img) <= 0) {
        fprintf(stderr, "unpad validate: gnuplot failed on %s, %s not written (see its message "
                        "above)\n", script, png);
        outfile_abort(img);
        return 1;
    }
    if (outfile_commit(img, &err))
        return cli_error("validate", &err);
    return 0;
}

static void stat_json(json_w *w, const char *key, const validate_stat *s)
{
    json_obj(w, key);
    json_int(w, "n", s->n);
    json_num(w, "median_abs_pct", s->n ? s->median_abs_pct : NAN);
    json_num(w, "max_abs_pct", s->n ? s->max_abs_pct : NAN);
    json_num(w, "bias_pct", s->n ? s->bias_pct : NAN);
    json_end(w);
}

/* The report's tables (docs/json.md, validate). */
static void report_json(json_w *w, const validate_report *rep, const char *const *traces, int n)
{
    json_arr(w, "traces");
    for (int i = 0; i < n; i++)
        json_str(w, NULL, traces[i]);
    json_end(w);
    json_obj(w, "summary");
    stat_json(w, "rows", &rep->all_rows);
    stat_json(w, "step_time", &rep->step_time);
    stat_json(w, "rank_load", &rep->rank_load);
    json_int(w, "imbalance_steps", rep->imb_steps);
    json_num(w, "imbalance_max_diff", rep->imb_steps ? rep->imb_max_diff : NAN);
    json_num(w, "imbalance_median_diff", rep->imb_steps ? rep->imb_median_diff : NAN);
    json_int(w, "unmatched_measured_rows", (long long)rep->unmatched_meas);
    json_int(w, "unmatched_predicted_rows", (long long)rep->unmatched_pred);
    json_end(w);
    json_arr(w, "operators");
    for (int i = 0; i < OP_COUNT; i++)
        if (rep->op[i].n) {
            json_obj(w, NULL);
            json_str(w, "name", op_name((op_id)i));
            stat_json(w, "error", &rep->op[i]);
            json_end(w);
        }
    json_end(w);
    json_arr(w, "ranks");
    for (int r = 0; r < rep->nrank; r++) {
        json_obj(w, NULL);
        json_int(w, "rank", r);
        stat_json(w, "load_error", &rep->rank[r]);
        json_end(w);
    }
    json_end(w);
    json_arr(w, "runs");
    for (int i = 0; i < rep->nruns; i++) {
        const validate_run *u = &rep->runs[i];
        json_obj(w, NULL);
        json_str(w, "trace", u->name);
        json_str(w, "model", u->model);
        json_int(w, "gpus", u->gpus);
        json_num(w, "seqs_per_rank", u->seqs_per_rank);
        json_num(w, "measured_step_us", u->meas_step_us);
        json_num(w, "predicted_step_us", u->pred_step_us);
        stat_json(w, "step_time", &u->step_time);
        stat_json(w, "rank_load", &u->rank_load);
        json_int(w, "imbalance_steps", u->imb_steps);
        json_num(w, "measured_imbalance", u->imb_steps ? u->meas_imb : NAN);
        json_num(w, "predicted_imbalance", u->imb_steps ? u->pred_imb : NAN);
        json_num(w, "imbalance_max_diff", u->imb_steps ? u->imb_max_diff : NAN);
        json_end(w);
    }
    json_end(w);
    json_arr(w, "steps");
    for (size_t i = 0; i < rep->nsteps; i++) {
        const validate_step *t = &rep->steps[i];
        json_obj(w, NULL);
        json_int(w, "run", t->run);
        json_int(w, "step", t->step);
        json_int(w, "ranks", t->ranks);
        json_num(w, "measured_us", t->meas_us);
        json_num(w, "predicted_us", t->pred_us);
        json_num(w, "measured_imbalance", t->meas_imb > 0 ? t->meas_imb : NAN);
        json_num(w, "predicted_imbalance", t->pred_imb > 0 ? t->pred_imb : NAN);
        json_end(w);
    }
    json_end(w);
}

static int have_gnuplot(void)
{
    return system("command -v gnuplot >/dev/null 2>&1") == 0;
}

/* A fraction as a percentage (null where not known). */
static void pct_json(json_w *w, const char *key, double frac) { json_num(w, key, 100 * frac); }

/* The workloads table (docs/json.md, validate --workloads). */
static void workloads_json(json_w *w, const char *path, const workload_row *rows, int n)
{
    workload_summary s;
    workload_summarize(rows, n, &s);
    json_str(w, "workloads_table", path);
    json_obj(w, "summary");
    json_int(w, "workloads", s.n);
    json_int(w, "whatif_within_2pct", s.within);
    pct_json(w, "whatif_max_abs_pct", s.whatif_max_abs);
    pct_json(w, "predict_max_abs_pct", s.predict_max_abs);
    json_int(w, "measured_in_band", s.in_band);
    pct_json(w, "draw_mean_pct", s.draw_mean);
    json_int(w, "draw_above", s.draw_above);
    pct_json(w, "memory_max_abs_pct", s.mem_max_abs);
    json_int(w, "step_logs", s.step_logs);
    json_int(w, "per_step_within_2pct", s.step_within);
    pct_json(w, "per_step_max_abs_pct", s.step_max_abs);
    json_end(w);
    json_arr(w, "workloads");
    for (int i = 0; i < n; i++) {
        const workload_row *r = &rows[i];
        int log = !isnan(r->step_err);
        json_obj(w, NULL);
        json_str(w, "name", r->name);
        json_str(w, "model", r->model);
        json_int(w, "batch", r->batch);
        json_int(w, "virtual_ranks", r->vranks);
        json_str(w, "policy", r->policy);
        json_str(w, "dist", r->dist);
        json_int(w, "steps", r->steps);
        json_num(w, "measured_step_ms", r->meas_ms);
        json_num(w, "measured_median_step_ms", r->meas_median_ms);
        json_num(w, "predict_step_ms", r->predict_ms);
        json_num(w, "whatif_step_ms", r->whatif_ms);
        pct_json(w, "predict_error_pct", r->predict_err);
        pct_json(w, "whatif_error_pct", r->whatif_err);
        json_num(w, "band_lo_ms", r->band_lo_ms);
        json_num(w, "band_hi_ms", r->band_hi_ms);
        json_bool(w, "measured_in_band", workload_in_band(r));
        json_bool(w, "graphs", r->graphs != 0);
        json_bool(w, "last_heads", r->last_heads);
        pct_json(w, "per_step_median_error_pct", r->step_err);
        if (log)
            json_int(w, "stalls", r->stalls);
        else
            json_null(w, "stalls");
        json_num(w, "measured_memory_gib", r->meas_gib);
        json_num(w, "predicted_memory_gib", r->mem_gib);
        pct_json(w, "memory_error_pct", r->mem_err);
        json_end(w);
    }
    json_end(w);
}

/* A temporary CSV under /tmp for a plot drawn without --csv: its path in tmp (64 bytes). */
static int temp_csv(char *tmp)
{
    strcpy(tmp, "/tmp/unpad-validate-XXXXXX.csv");
    int fd = mkstemps(tmp, 4);
    if (fd < 0) {
        fprintf(stderr, "unpad validate: cannot create a temporary CSV for the plot\n");
        tmp[0] = 0;
        return 1;
    }
    close(fd);
    return 0;
}

/* --workloads: measured wall step times against predict and whatif (workload.h). */
static int validate_workloads(resolve_req *rq, const char *path, uint64_t seed, int steps, int quiet,
                              const char *json, const char *csv, const char *plot, int argc, char **argv)
{
    resolve_inputs in;
    memset(&in, 0, sizeof in);
    if (cli_inputs_load("validate", rq, &in, 0))
        return 1;
    unpad_err err = {0};
    workload_row *rows = NULL;
    int n = 0, rc = 1;
    char home[4096], label[4400], tmpcsv[64] = "";
    cli_json j = {0};
    if (workload_load(path, &rows, &n, &err) || resolve_home(home, sizeof home, &err)) {
        cli_error("validate", &err);
        goto out;
    }
    const char *outs[3] = {json && strcmp(json, "-") ? json : NULL, csv, plot}, *ins[1] = {path};
    if (cli_check_outputs("validate", &in, ins, 1, outs, 3))
        goto out;
    cli_prov prov;
    cli_prov_init(&prov, argc, argv);
    cli_prov_inputs(&prov, &in, 0);
    prov.model = prov.model_path = NULL; /* the table names a model per workload */
    cli_prov_seed(&prov, (long long)seed);
    if (json && cli_json_open("validate", json, &prov, &j)) /* before any text: "-" keeps stdout */
        goto out;
    char logs[4200];
    const char *slash = strrchr(path, '/');
    snprintf(logs, sizeof logs, "%.*s%slogs", slash ? (int)(slash - path) : 0, path, slash ? "/" : "");
    workload_setup s = {.home = home, .logs = logs, .hw = &in.hw, .calib = &in.calib, .seed = seed,
                        .whatif_steps = steps, .keep_steps = csv || plot};
    printf("unpad validate: %d workloads of %s on %s, %s\n\n", n, path, in.hw.name,
           cli_calib_label(&in, label, sizeof label));
    if (progress_start("unpad validate", "workloads", n, n, progress_wanted(quiet), &s.progress, &err)) {
        cli_error("validate", &err);
        goto out;
    }
    int wrc = workload_predict(&s, rows, n, &err);
    progress_end(s.progress);
    if (wrc) {
        cli_error("validate", &err);
        goto out;
    }
    workload_print(stdout, rows, n);
    int logged = 0;
    for (int i = 0; i < n; i++)
        logged += rows[i].nper_step > 0;
    if ((csv || plot) && !logged) {
        fprintf(stderr, "unpad validate: %s: no trainer log beside the table (%s/<workload>.log with `step N/M | "
                        "... | X ms/step` lines of steps %d..): --%s has no steps to %s\n",
                path, logs, WORKLOAD_FIRST_STEP, csv ? "csv" : "plot", csv ? "write" : "draw");
        goto out;
    }
    /* the plot's data: --csv's file, else (none, or standard output) a temporary one */
    if (plot && (!csv || outfile_is_stdout(csv)) && temp_csv(tmpcsv))
        goto out;
    const char *csv_path = tmpcsv[0] ? tmpcsv : csv;
    char pc[8192];
    cli_prov_comment(&prov, pc, sizeof pc);
    if ((csv && workload_write_steps_csv(csv, rows, n, pc, &err)) ||
        (tmpcsv[0] && workload_write_steps_csv(tmpcsv, rows, n, pc, &err))) {
        cli_error("validate", &err);
        goto out;
    }
    if (plot) {
        char title[2048];
        snprintf(title, sizeof title,
                 "unpad validate --workloads %.600s: each logged step against the step model (%.900s)",
                 path, label);
        if (run_gnuplot("workload-steps.gp", csv_path, plot, title))
            goto out;
    }
    if (json) {
        workloads_json(&j.w, path, rows, n);
        if (cli_json_close("validate", &j))
            goto out;
        if (!j.to_stdout)
            printf("\nwrote %s\n", json);
    }
    if (csv && !j.to_stdout)
        printf("%swrote %s\n", json ? "" : "\n", csv);
    if (plot && !j.to_stdout)
        printf("%swrote %s\n", json || csv ? "" : "\n", plot);
    rc = 0;
out:
    if (tmpcsv[0])
        remove(tmpcsv);
    cli_json_abandon(&j);
    workload_free_steps(rows, n);
    free(rows);
    resolve_inputs_free(&in);
    return rc;
}

/* The flags. */
typedef struct {
    resolve_req rq;
    const char *trace_v[MAX_TRACES], *model_v[MAX_MODELS];
    cli_strs traces, models;
    const char *csv, *plot, *json, *workloads;
    int quiet, wseed, wsteps;
    cli_path model_at[MAX_MODELS]; /* the --model names resolved */
} validate_opts;

static int validate_parse(int argc, char **argv, validate_opts *o)
{
    memset(o, 0, sizeof *o);
    o->traces = (cli_strs){.v = o->trace_v, .max = MAX_TRACES, .what = "traces"};
    o->models = (cli_strs){.v = o->model_v, .max = MAX_MODELS, .what = "--model"};
    o->wseed = WORKLOAD_SEED;
    o->wsteps = 2000;
    const cli_opt opts[] = {
        CLI_OPT_STRS("traces", &o->traces),
        CLI_OPTS_CALIB(&o->rq),
        CLI_OPT_HW(&o->rq),
        CLI_OPT_STRS("model", &o->models),
        CLI_OPT_OUT("csv", &o->csv),
        CLI_OPT_OUT_FILE("plot", &o->plot, "an image file, whose extension gives its format"),
        CLI_OPT_OUT("json", &o->json),
        CLI_OPT_FLAG("quiet", &o->quiet),
        CLI_OPT_STR("workloads", &o->workloads),
        CLI_OPT_SEED(&o->wseed),
        CLI_OPT_INT("steps", &o->wsteps, 1, 10000000),
        CLI_OPT_CALL("fp8", cli_parse_on_off, &o->rq.fp8),
    };
    /* files after the options are more traces (so `--traces traces/heldout-*.csv` works) */
    int rc = cli_opts_parse("validate", argc, argv, 1, opts, CLI_NOPTS(opts), usage, &o->traces);
    if (rc < 0 && o->rq.faster) {
        fprintf(stderr, "unpad validate: --faster is a what-if; validate compares the calibration itself with "
                        "measurements\n");
        return 2;
    }
    return rc >= 0 ? rc
                   : cli_resolve_names("validate", "--model", o->models.v, o->models.n, "models", ".cfg",
                                       o->model_at);
}

/* What the traces were measured on and what predicted them. */
typedef struct {
    resolve_inputs in;
    trace_set *sets;       /* (traces.n) */
    model_cfg *models;     /* (MAX_MODELS) */
    int nmodels;
    validate_report rep;
    cli_prov prov;
} validate_data;

/* Each trace predicted from its own rows and joined into the report, with a progress line. */
static int validate_runs(const validate_opts *o, validate_data *d)
{
    unpad_err err = {0};
    validate_ctx ctx = {.models = d->models, .n_models = d->nmodels, .hw = &d->in.hw, .calib = &d->in.calib};
    int n = o->traces.n;
    long long rows = 0;
    for (int i = 0; i < n; i++)
        rows += (long long)d->sets[i].n;
    progress *prog;
    if (progress_start("unpad validate", "traces", n, rows, progress_wanted(o->quiet), &prog, &err))
        return cli_error("validate", &err);
    for (int i = 0; i < n; i++) {
        trace_set pred = {0};
        int r = validate_predict_set(&d->sets[i], d->models, d->nmodels, &d->in.hw, &d->in.calib, &pred, &err);
        if (!r)
            r = validate_add_run(&d->rep, o->traces.v[i], &pred, &d->sets[i], &ctx, &err);
        trace_set_free(&pred);
        if (r) {
            progress_end(prog);
            fprintf(stderr, "unpad validate: %s: %s\n", o->traces.v[i], err.msg);
            return 1;
        }
        progress_add(prog, 1, (long long)d->sets[i].n);
    }
    progress_end(prog);
    if (validate_finish(&d->rep, &err))
        return cli_error("validate", &err);
    return 0;
}

/* --csv and --plot (drawn from --csv, or from a temporary CSV removed afterwards). */
static int validate_write_plot(const validate_opts *o, const validate_data *d)
{
    unpad_err err = {0};
    char tmpcsv[64] = "";
    /* the plot's data: --csv's file, else (none, or standard output) a temporary one */
    if (o->plot && (!o->csv || outfile_is_stdout(o->csv)) && temp_csv(tmpcsv))
        return 1;
    const char *csv_path = tmpcsv[0] ? tmpcsv : o->csv;
    char pc[8192];
    cli_prov_comment(&d->prov, pc, sizeof pc);
    int rc = 0;
    if (o->csv && validate_write_csv(o->csv, &d->rep, pc, &err))
        rc = cli_error("validate", &err);
    if (!rc && tmpcsv[0] && validate_write_csv(tmpcsv, &d->rep, pc, &err))
        rc = cli_error("validate", &err);
    if (!rc && o->csv)
        printf("\nwrote %s\n", o->csv);
    if (!rc && o->plot) {
        const cli_prov *p = &d->prov;
        int n = o->traces.n;
        char title[2048];
        snprintf(title, sizeof title,
                 "unpad validate: predicted (%s calibration%s%s) against measured, %d trace%s on %s",
                 p->calibration, p->calibration_path ? " " : "", p->calibration_path ? p->calibration_path : "",
                 n, n > 1 ? "s" : "", d->in.hw.name);
        rc = run_gnuplot("validate.gp", csv_path, o->plot, title);
        if (!rc)
            printf("wrote %s\n", o->plot);
    }
    if (tmpcsv[0])
        remove(tmpcsv);
    return rc;
}

/* --traces: the inputs, the traces, the report and its outputs. */
static int validate_traces(const validate_opts *o, validate_data *d, int argc, char **argv)
{
    int n = o->traces.n;
    const char *outs[3] = {o->csv, o->plot, o->json && strcmp(o->json, "-") ? o->json : NULL};
    const char *more[MAX_TRACES + MAX_MODELS];
    for (int i = 0; i < n; i++)
        more[i] = o->traces.v[i];
    for (int i = 0; i < o->models.n; i++)
        more[n + i] = o->models.v[i];
    if (cli_check_outputs("validate", &d->in, more, n + o->models.n, outs, 3))
        return 1;
    d->sets = calloc((size_t)n, sizeof *d->sets);
    d->models = calloc(MAX_MODELS, sizeof *d->models);
    if (!d->sets || !d->models) {
        fprintf(stderr, "unpad validate: out of memory\n");
        return 1;
    }
    if (cli_traces_load("validate", o->traces.v, n, o->models.v, o->models.n, d->in.hw.name, d->sets, d->models,
                        &d->nmodels, MAX_MODELS))
        return 1;
    if ((d->sets[0].products == TRACE_FP8) != !!d->in.calib.fp8) {
        fprintf(stderr, "unpad validate: %s: measured with %s products, but the calibration%s%s describes %s: %s\n",
                o->traces.v[0], trace_products_name(d->sets[0].products), d->in.calib_path[0] ? " " : "",
                d->in.calib_path, d->in.calib.fp8 ? "--fp8 on's" : "bf16 products",
                d->in.calib.fp8 ? "give traces of unpad-train --fp8 on"
                                : "pass --fp8 on (and an FP8 calibration, models/calib/<hw>-fp8.cfg)");
        return 1;
    }
    cli_prov *prov = &d->prov;
    cli_prov_init(prov, argc, argv);
    cli_prov_inputs(prov, &d->in, 0);
    prov->model = d->nmodels == 1 ? d->models[0].name : NULL; /* the traces name their models */
    prov->model_path = o->models.n == 1 ? o->models.v[0] : NULL;
    cli_json j = {0};
    if (o->json && cli_json_open("validate", o->json, prov, &j)) /* before any text: "-" keeps stdout */
        return 1;
    printf("unpad validate: %d trace%s on %s\n", n, n > 1 ? "s" : "", d->in.hw.name);
    cli_prov_print(stdout, prov);
    if (validate_runs(o, d)) {
        cli_json_abandon(&j);
        return 1;
    }
    validate_print(stdout, &d->rep);
    if (o->json) {
        report_json(&j.w, &d->rep, o->traces.v, n);
        int jrc = cli_json_close("validate", &j);
        cli_json_abandon(&j); /* what a failed close left open */
        if (jrc)
            return 1;
        if (!j.to_stdout)
            printf("\nwrote %s\n", o->json);
    }
    return validate_write_plot(o, d);
}

int cmd_validate(int argc, char **argv)
{
    validate_opts o;
    int rc = validate_parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (o.workloads && o.traces.n) {
        fprintf(stderr, "unpad validate: --traces and --workloads are two modes (traced operators, "
                        "untraced wall step times): give one\n");
        return 2;
    }
    if (o.workloads && o.models.n) {
        fprintf(stderr, "unpad validate: --model applies to --traces, not to --workloads (whose table names "
                        "each workload's model)\n");
        return 2;
    }
    if (o.plot && !have_gnuplot()) {
        fprintf(stderr, "unpad validate: --plot needs gnuplot, which is not installed here "
                        "(apt-get install gnuplot-nox); the tables and --csv work without it\n");
        return 1;
    }
    const char *fmt;
    unpad_err err = {0};
    if (o.plot && plot_image_check("--plot", o.plot, &fmt, &err)) {
        cli_error("validate", &err);
        return 2;
    }
    if (o.workloads)
        return validate_workloads(&o.rq, o.workloads, (uint64_t)o.wseed, o.wsteps, o.quiet, o.json, o.csv, o.plot,
                                  argc, argv);
    if (!o.traces.n) {
        fprintf(stderr, "unpad validate: --traces or --workloads is required\n");
        usage(stderr);
        return 2;
    }
    validate_data *d = calloc(1, sizeof *d);
    if (!d) {
        fprintf(stderr, "unpad validate: out of memory\n");
        return 1;
    }
    rc = cli_inputs_load("validate", &o.rq, &d->in, 0) ? 1 : validate_traces(&o, d, argc, argv);
    for (int i = 0; d->sets && i < o.traces.n; i++)
        trace_set_free(&d->sets[i]);
    free(d->sets);
    free(d->models);
    validate_report_free(&d->rep);
    resolve_inputs_free(&d->in);
    free(d);
    return rc;
}
