/* cmd_validate.c — `unpad validate`: predict every measured row from its own batch description
 * with a calibration, join, and report the errors (tables, CSV, plot). */
#include <getopt.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
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
            "                      [--plot OUT.png] [--json F] [--quiet]\n"
            "       unpad validate --workloads F [--seed S] [--steps K] [--calib F] [--hw F]\n"
            "  --traces F   measured trace CSV (held-out: not the ones the calibration was fitted on);\n"
            "               more files may follow it; each file is one run\n"
            "  --calib F    fitted coefficients (default: models/calib/<hw>.cfg if it exists)\n"
            "  --no-calib       the uncalibrated default coefficients instead\n"
            "  --hw F       hardware spec (default models/hw/h200-sxm.cfg); other hardware is refused\n"
            "  --model F    model config (default: models/<name>.cfg for each model the traces name)\n"
            "  --csv OUT    predicted and measured per row, rank load and step, for plots\n"
            "  --plot OUT   render plots/validate.gp with gnuplot to OUT (PNG)\n"
            "  --json F     also write the error tables as JSON (docs/json.md); F '-': only the JSON,\n"
            "               on standard output\n"
            "  --quiet      no progress line on stderr (it appears only on a terminal)\n"
            "  --workloads F  a table of measured workloads (traces/heldout-workloads.csv): per\n"
            "               workload the measured wall step time, predict on the trainer's own\n"
            "               batches, the what-if's mean step time, their errors, and the memory\n"
            "  --seed S     the trainer's --seed of those runs (default 21, scripts/gpu-heldout.sh)\n"
            "  --steps K    sampled steps of the what-if (default 2000)\n");
}

static int run_gnuplot(const char *csv, const char *png, const char *title)
{
    if (strchr(csv, '\'') || strchr(png, '\'')) {
        fprintf(stderr, "unpad validate: --plot: file names with a quote are not supported\n");
        return 1;
    }
    char script[4200], expr[12000], qtitle[2100];
    if (cli_project_path("validate", "plots/validate.gp", script, sizeof script))
        return 1;
    plot_quote(title, qtitle, sizeof qtitle);
    unpad_err err = {0};
    unpad_outfile *img; /* gnuplot draws into its temporary; renamed when not empty */
    if (outfile_open(png, &img, &err))
        return cli_error("validate", &err);
    snprintf(expr, sizeof expr, "csv='%s'; out='%s'; title=%s", csv, outfile_temp_path(img), qtitle);
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

/* --workloads: measured wall step times against predict and whatif (workload.h). */
static int validate_workloads(resolve_req *rq, const char *path, uint64_t seed, int steps)
{
    resolve_inputs in;
    memset(&in, 0, sizeof in);
    if (cli_inputs_load("validate", rq, &in, 0))
        return 1;
    unpad_err err = {0};
    workload_row *rows = NULL;
    int n = 0, rc = 1;
    char home[4096], label[4400];
    if (workload_load(path, &rows, &n, &err) || resolve_home(home, sizeof home, &err)) {
        cli_error("validate", &err);
        goto out;
    }
    char logs[4200];
    const char *slash = strrchr(path, '/');
    snprintf(logs, sizeof logs, "%.*s%slogs", slash ? (int)(slash - path) : 0, path, slash ? "/" : "");
    workload_setup s = {.home = home, .logs = logs, .hw = &in.hw, .calib = &in.calib, .seed = seed,
                        .whatif_steps = steps};
    printf("unpad validate: %d workloads of %s on %s, %s\n\n", n, path, in.hw.name,
           cli_calib_label(&in, label, sizeof label));
    if (workload_predict(&s, rows, n, &err)) {
        cli_error("validate", &err);
        goto out;
    }
    workload_print(stdout, rows, n);
    rc = 0;
out:
    free(rows);
    resolve_inputs_free(&in);
    return rc;
}

int cmd_validate(int argc, char **argv)
{
    static const struct option opts[] = {
        {"traces", required_argument, 0, 't'}, {"calib", required_argument, 0, 'c'}, {"no-calib", no_argument, 0, 'N'},
        {"hw", required_argument, 0, 'w'},     {"model", required_argument, 0, 'm'},
        {"csv", required_argument, 0, 'o'},    {"plot", required_argument, 0, 'p'},
        {"json", required_argument, 0, 'j'},   {"quiet", no_argument, 0, 'q'},
        {"workloads", required_argument, 0, 'W'}, {"seed", required_argument, 0, 's'},
        {"steps", required_argument, 0, 'k'},  {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *traces[MAX_TRACES], *model_paths[MAX_MODELS];
    int ntraces = 0, nmodel_paths = 0, quiet = 0, c;
    progress *prog = NULL;
    const char *csv = NULL, *plot = NULL, *json = NULL, *workloads = NULL;
    int wseed = 21, wsteps = 2000;
    resolve_req rq = {0};
    resolve_inputs in;
    memset(&in, 0, sizeof in);
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 't':
            if (ntraces == MAX_TRACES) {
                fprintf(stderr, "unpad validate: more than %d traces\n", MAX_TRACES);
                return 2;
            }
            traces[ntraces++] = optarg;
            break;
        case 'c': rq.calib = optarg; break;
        case 'N': rq.no_calib = 1; break;
        case 'w': rq.hw = optarg; break;
        case 'm':
            if (nmodel_paths == MAX_MODELS) {
                fprintf(stderr, "unpad validate: more than %d --model\n", MAX_MODELS);
                return 2;
            }
            model_paths[nmodel_paths++] = optarg;
            break;
        case 'o': csv = optarg; break;
        case 'p': plot = optarg; break;
        case 'j': json = optarg; break;
        case 'q': quiet = 1; break;
        case 'W': workloads = optarg; break;
        case 's': if (cli_int("validate", "--seed", optarg, 0, 2147483647, &wseed)) return 2; break;
        case 'k': if (cli_int("validate", "--steps", optarg, 1, 10000000, &wsteps)) return 2; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    for (; optind < argc; optind++) {
        if (!ntraces || ntraces == MAX_TRACES) {
            fprintf(stderr, "unpad validate: unexpected argument '%s'\n", argv[optind]);
            return 2;
        }
        traces[ntraces++] = argv[optind];
    }
    if (workloads && !ntraces)
        return validate_workloads(&rq, workloads, (uint64_t)wseed, wsteps);
    if (!ntraces) {
        fprintf(stderr, "unpad validate: --traces or --workloads is required\n");
        usage(stderr);
        return 2;
    }
    if (plot && !have_gnuplot()) {
        fprintf(stderr, "unpad validate: --plot needs gnuplot, which is not installed here "
                        "(apt-get install gnuplot-nox); the tables and --csv work without it\n");
        return 1;
    }
    if (cli_inputs_load("validate", &rq, &in, 0))
        return 1;
    const char *outs[3] = {csv, plot, json && strcmp(json, "-") ? json : NULL};
    const char *more[MAX_TRACES + MAX_MODELS];
    for (int i = 0; i < ntraces; i++)
        more[i] = traces[i];
    for (int i = 0; i < nmodel_paths; i++)
        more[ntraces + i] = model_paths[i];
    if (cli_check_outputs("validate", &in, more, ntraces + nmodel_paths, outs, 3)) {
        resolve_inputs_free(&in);
        return 1;
    }
    unpad_err err = {0};
    int rc = 1, nmodels = 0;
    trace_set *sets = calloc((size_t)ntraces, sizeof *sets);
    model_cfg *models = calloc(MAX_MODELS, sizeof *models);
    validate_report rep;
    memset(&rep, 0, sizeof rep);
    char tmpcsv[64] = "";
    if (!sets || !models) {
        fprintf(stderr, "unpad validate: out of memory\n");
        goto out;
    }
    for (int i = 0; i < nmodel_paths; i++)
        if (model_load(model_paths[i], &models[nmodels++], &err)) {
            cli_error("validate", &err);
            goto out;
        }
    for (int i = 0; i < ntraces; i++)
        if (trace_read(traces[i], &sets[i], &err) || fit_check_trace(&sets[i], traces[i], in.hw.name, &err)) {
            cli_error("validate", &err);
            goto out;
        }
    char mdir[RESOLVE_PATH_LEN];
    if (cli_project_path("validate", "models", mdir, sizeof mdir))
        goto out;
    if (fit_models_resolve(sets, ntraces, mdir, models,
                           &nmodels, MAX_MODELS, &err)) {
        cli_error("validate", &err);
        goto out;
    }
    cli_prov prov;
    cli_prov_init(&prov, argc, argv);
    cli_prov_inputs(&prov, &in, 0);
    prov.model = nmodels == 1 ? models[0].name : NULL; /* the traces name their models */
    prov.model_path = nmodel_paths == 1 ? model_paths[0] : NULL;
    printf("unpad validate: %d trace%s on %s\n", ntraces, ntraces > 1 ? "s" : "", in.hw.name);
    cli_prov_print(stdout, &prov);
    validate_ctx ctx = {.models = models, .n_models = nmodels, .hw = &in.hw, .calib = &in.calib};
    long long rows = 0;
    for (int i = 0; i < ntraces; i++)
        rows += (long long)sets[i].n;
    if (progress_start("unpad validate", "traces", ntraces, rows, progress_wanted(quiet), &prog,
                       &err)) {
        cli_error("validate", &err);
        goto out;
    }
    for (int i = 0; i < ntraces; i++) {
        trace_set pred = {0};
        int r = validate_predict_set(&sets[i], models, nmodels, &in.hw, &in.calib, &pred, &err);
        if (!r)
            r = validate_add_run(&rep, traces[i], &pred, &sets[i], &ctx, &err);
        trace_set_free(&pred);
        if (r) {
            fprintf(stderr, "unpad validate: %s: %s\n", traces[i], err.msg);
            goto out;
        }
        progress_add(prog, 1, (long long)sets[i].n);
    }
    progress_end(prog);
    prog = NULL;
    if (validate_finish(&rep, &err)) {
        cli_error("validate", &err);
        goto out;
    }
    validate_print(stdout, &rep);
    if (json) {
        cli_json j;
        if (cli_json_open("validate", json, &prov, &j))
            goto out;
        report_json(&j.w, &rep, traces, ntraces);
        if (cli_json_close("validate", &j))
            goto out;
        if (!j.to_stdout)
            printf("\nwrote %s\n", json);
    }
    if (!csv && plot) {
        strcpy(tmpcsv, "/tmp/unpad-validate-XXXXXX.csv");
        int fd = mkstemps(tmpcsv, 4);
        if (fd < 0) {
            fprintf(stderr, "unpad validate: cannot create a temporary CSV for the plot\n");
            tmpcsv[0] = '\0';
            goto out;
        }
        close(fd);
    }
    const char *csv_path = csv ? csv : tmpcsv[0] ? tmpcsv : NULL;
    char pc[8192];
    cli_prov_comment(&prov, pc, sizeof pc);
    if (csv_path && validate_write_csv(csv_path, &rep, pc, &err)) {
        cli_error("validate", &err);
        goto out;
    }
    if (csv)
        printf("\nwrote %s\n", csv);
    if (plot) {
        char title[2048];
        snprintf(title, sizeof title,
                 "unpad validate: predicted (%s calibration%s%s) against measured, %d trace%s on %s",
                 prov.calibration, prov.calibration_path ? " " : "",
                 prov.calibration_path ? prov.calibration_path : "", ntraces,
                 ntraces > 1 ? "s" : "", in.hw.name);
        if (run_gnuplot(csv_path, plot, title))
            goto out;
        printf("wrote %s\n", plot);
    }
    rc = 0;
out:
    progress_end(prog);
    if (tmpcsv[0])
        remove(tmpcsv);
    if (sets)
        for (int i = 0; i < ntraces; i++)
            trace_set_free(&sets[i]);
    free(sets);
    free(models);
    validate_report_free(&rep);
    resolve_inputs_free(&in);
    return rc;
}
