/* cmd_validate.c — `unpad validate`: predict every measured row from its own batch description
 * with a calibration, join, and report the errors (tables, CSV, plot). */
#include <getopt.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "outfile.h"
#include "resolve.h"
#include "validate.h"

extern char **environ;

const char cmd_validate_what[] = "compare predictions with measured traces (error tables, plot)";

enum { MAX_TRACES = 256, MAX_MODELS = 16 };

static void usage(FILE *f)
{
    fprintf(f,
            "usage: unpad validate --traces F [F...] [--calib F] [--hw F] [--model F]... [--csv OUT]\n"
            "                      [--plot OUT.png]\n"
            "  --traces F   measured trace CSV (held-out: not the ones the calibration was fitted on);\n"
            "               more files may follow it; each file is one run\n"
            "  --calib F    fitted coefficients (default: models/calib/<hw>.cfg if it exists)\n"
            "  --no-calib       the uncalibrated default coefficients instead\n"
            "  --hw F       hardware spec (default models/hw/h200-sxm.cfg); other hardware is refused\n"
            "  --model F    model config (default: models/<name>.cfg for each model the traces name)\n"
            "  --csv OUT    predicted and measured per row, rank load and step, for plots\n"
            "  --plot OUT   render plots/validate.gp with gnuplot to OUT (PNG)\n");
}

static int run_gnuplot(const char *csv, const char *png)
{
    if (strchr(csv, '\'') || strchr(png, '\'')) {
        fprintf(stderr, "unpad validate: --plot: file names with a quote are not supported\n");
        return 1;
    }
    char script[4200], expr[9000];
    if (cli_project_path("validate", "plots/validate.gp", script, sizeof script))
        return 1;
    unpad_err err = {0};
    unpad_outfile *img; /* gnuplot draws into its temporary; renamed when not empty */
    if (outfile_open(png, &img, &err))
        return cli_error("validate", &err);
    snprintf(expr, sizeof expr, "csv='%s'; out='%s'", csv, outfile_temp_path(img));
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

static int have_gnuplot(void)
{
    return system("command -v gnuplot >/dev/null 2>&1") == 0;
}

int cmd_validate(int argc, char **argv)
{
    static const struct option opts[] = {
        {"traces", required_argument, 0, 't'}, {"calib", required_argument, 0, 'c'}, {"no-calib", no_argument, 0, 'N'},
        {"hw", required_argument, 0, 'w'},     {"model", required_argument, 0, 'm'},
        {"csv", required_argument, 0, 'o'},    {"plot", required_argument, 0, 'p'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    const char *traces[MAX_TRACES], *model_paths[MAX_MODELS];
    int ntraces = 0, nmodel_paths = 0, c;
    const char *csv = NULL, *plot = NULL;
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
    if (!ntraces) {
        fprintf(stderr, "unpad validate: --traces is required\n");
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
    const char *outs[2] = {csv, plot};
    const char *more[MAX_TRACES + MAX_MODELS];
    for (int i = 0; i < ntraces; i++)
        more[i] = traces[i];
    for (int i = 0; i < nmodel_paths; i++)
        more[ntraces + i] = model_paths[i];
    if (cli_check_outputs("validate", &in, more, ntraces + nmodel_paths, outs, 2)) {
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
    printf("unpad validate: %d trace%s on %s, %s\n", ntraces, ntraces > 1 ? "s" : "", in.hw.name,
           in.calib.fitted ? in.calib_path : "uncalibrated default coefficients");
    validate_ctx ctx = {.models = models, .n_models = nmodels, .hw = &in.hw, .calib = &in.calib};
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
    }
    if (validate_finish(&rep, &err)) {
        cli_error("validate", &err);
        goto out;
    }
    validate_print(stdout, &rep);
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
    if (csv_path && validate_write_csv(csv_path, &rep, &err)) {
        cli_error("validate", &err);
        goto out;
    }
    if (csv)
        printf("\nwrote %s\n", csv);
    if (plot) {
        if (run_gnuplot(csv_path, plot))
            goto out;
        printf("wrote %s\n", plot);
    }
    rc = 0;
out:
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
