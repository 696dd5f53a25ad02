/* cmd_calibrate.c — `unpad calibrate`: fit the cost model's coefficients to measured traces and
 * write models/calib/<hw>.cfg. Two side modes share the inputs: --transfer carries a calibration to
 * other hardware (an estimate, for cross-hardware predictions), --synthesize writes a synthetic
 * trace from known coefficients (tests and demonstrations; labelled synthetic in the file). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fit.h"
#include "outfile.h"
#include "resolve.h"
#include "synth.h"

const char cmd_calibrate_what[] = "fit the cost model's coefficients to measured traces";

enum { MAX_TRACES = 256, MAX_MODELS = 16 };

static void usage(FILE *f)
{
    fprintf(f,
            "usage: unpad calibrate --traces F [F...] [--hw F] [--model F]... [--init F] [--out F]\n"
            "                       [--residuals CSV]\n"
            "       unpad calibrate --transfer CALIB --hw F [--from-hw F] --out F\n"
            "       unpad calibrate --synthesize OUT [--truth CALIB] [--hw F] [--model F] [--dist F]\n"
            "                       [--gpus N] [--steps K] [--batch B] [--seed S] [--noise X]\n"
            "                       [--outliers X] [--outlier-scale X]\n"
            "  --traces F     measured trace CSV (traces/*.csv); more files may follow it\n"
            "  --hw F         hardware spec the traces were measured on (default models/hw/h200-sxm.cfg);\n"
            "                 a trace from other hardware is refused\n"
            "  --model F      model config (default: models/<name>.cfg for each model the traces name)\n"
            "  --init F       starting coefficients (default: the uncalibrated defaults)\n"
            "  --out F        write the fitted coefficients (models/calib/<hw>.cfg), atomically\n"
            "  --residuals F  write every row's measured and predicted time and %% error as CSV\n"
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
             "--transfer`.\n# Efficiencies kept; gemm_m_half x SMs %d/%d; attn_cta_us, attn_bwd_cta_us x clock %.3g/%.3g; "
             "launch_us x spec launch %.3g/%.3g.", src_path, from.name, to->name, to->sms, from.sms,
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

int cmd_calibrate(int argc, char **argv)
{
    static const struct option opts[] = {
        {"traces", required_argument, 0, 't'},   {"hw", required_argument, 0, 'w'},
        {"model", required_argument, 0, 'm'},    {"init", required_argument, 0, 'i'},
        {"out", required_argument, 0, 'o'},      {"residuals", required_argument, 0, 'r'},
        {"transfer", required_argument, 0, 'T'}, {"from-hw", required_argument, 0, 'F'},
        {"synthesize", required_argument, 0, 'S'}, {"truth", required_argument, 0, 'u'},
        {"dist", required_argument, 0, 'd'},     {"gpus", required_argument, 0, 'g'},
        {"steps", required_argument, 0, 'k'},    {"batch", required_argument, 0, 'b'},
        {"seed", required_argument, 0, 's'},     {"noise", required_argument, 0, 'n'},
        {"outliers", required_argument, 0, 'x'}, {"outlier-scale", required_argument, 0, 'X'},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
    const char *traces[MAX_TRACES], *model_paths[MAX_MODELS];
    int ntraces = 0, nmodel_paths = 0, c, seed = 1;
    const char *init_path = NULL, *out = NULL, *resid_path = NULL, *transfer = NULL, *from_hw = NULL;
    const char *synth = NULL, *truth = NULL;
    resolve_req rq = {0};
    resolve_inputs in;
    memset(&in, 0, sizeof in);
    synth_opts so;
    synth_opts_default(&so);
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 't':
            if (ntraces == MAX_TRACES) {
                fprintf(stderr, "unpad calibrate: more than %d traces\n", MAX_TRACES);
                return 2;
            }
            traces[ntraces++] = optarg;
            break;
        case 'w': rq.hw = optarg; break;
        case 'm':
            if (nmodel_paths == MAX_MODELS) {
                fprintf(stderr, "unpad calibrate: more than %d --model\n", MAX_MODELS);
                return 2;
            }
            model_paths[nmodel_paths++] = optarg;
            break;
        case 'i': init_path = optarg; break;
        case 'o': out = optarg; break;
        case 'r': resid_path = optarg; break;
        case 'T': transfer = optarg; break;
        case 'F': from_hw = optarg; break;
        case 'S': synth = optarg; break;
        case 'u': truth = optarg; break;
        case 'd': rq.dist = optarg; break;
        case 'g': if (cli_int("calibrate", "--gpus", optarg, 1, 1024, &so.gpus)) return 2; break;
        case 'k': if (cli_int("calibrate", "--steps", optarg, 1, 100000, &so.steps)) return 2; break;
        case 'b': if (cli_int("calibrate", "--batch", optarg, 1, 4096, &so.batch)) return 2; break;
        case 's': if (cli_int("calibrate", "--seed", optarg, 0, 2147483647, &seed)) return 2; break;
        case 'n': if (cli_double("calibrate", "--noise", optarg, 0, 0.5, &so.noise)) return 2; break;
        case 'x': if (cli_double("calibrate", "--outliers", optarg, 0, 0.5, &so.outlier_frac)) return 2; break;
        case 'X': if (cli_double("calibrate", "--outlier-scale", optarg, 0.01, 100, &so.outlier_scale)) return 2; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    /* Files after the options are more traces (so `--traces traces/calib-*.csv` works). */
    for (; optind < argc; optind++) {
        if (!ntraces || ntraces == MAX_TRACES) {
            fprintf(stderr, "unpad calibrate: unexpected argument '%s'\n", argv[optind]);
            return 2;
        }
        traces[ntraces++] = argv[optind];
    }
    so.seed = (unsigned long)seed;
    /* Before any work: no output may be one of the inputs. */
    const char *outs[3] = {synth, out, resid_path};
    const char *more[MAX_TRACES + MAX_MODELS + 4] = {init_path, transfer, from_hw, truth};
    int nmore = 4;
    for (int i = 0; i < ntraces; i++)
        more[nmore++] = traces[i];
    for (int i = 0; i < nmodel_paths; i++)
        more[nmore++] = model_paths[i];
    rq.no_calib = 1; /* the coefficients come from --init, --transfer or --truth, never from here */
    if (!!synth + !!transfer + !!ntraces != 1) {
        fprintf(stderr, "unpad calibrate: give exactly one of --traces, --transfer, --synthesize\n");
        usage(stderr);
        return 2;
    }
    if (synth) {
        if (nmodel_paths > 1) {
            fprintf(stderr, "unpad calibrate: --synthesize takes one --model\n");
            return 2;
        }
        rq.model = nmodel_paths ? model_paths[0] : NULL;
        if (cli_inputs_load("calibrate", &rq, &in, 1))
            return 1;
        if (cli_check_outputs("calibrate", &in, more, nmore, outs, 3)) {
            resolve_inputs_free(&in);
            return 1;
        }
        int rc = do_synthesize(synth, &in, truth, &so);
        resolve_inputs_free(&in);
        return rc;
    }
    if (cli_inputs_load("calibrate", &rq, &in, 0))
        return 1;
    if (cli_check_outputs("calibrate", &in, more, nmore, outs, 3))
        return 1;
    if (transfer)
        return do_transfer(transfer, from_hw, &in.hw, out);

    unpad_err err = {0};
    calib_coef init;
    if (init_path) {
        if (calib_load(init_path, &in.hw, &init, &err))
            return cli_error("calibrate", &err);
    } else {
        calib_default(&in.hw, &init);
    }
    int rc = 1, nmodels = 0;
    trace_set *sets = calloc((size_t)ntraces, sizeof *sets);
    model_cfg *models = calloc(MAX_MODELS, sizeof *models);
    fit_result *res = calloc(1, sizeof *res);
    if (!sets || !models || !res) {
        fprintf(stderr, "unpad calibrate: out of memory\n");
        goto out;
    }
    for (int i = 0; i < nmodel_paths; i++)
        if (model_load(model_paths[i], &models[nmodels++], &err)) {
            cli_error("calibrate", &err);
            goto out;
        }
    long rows = 0;
    for (int i = 0; i < ntraces; i++) {
        if (trace_read(traces[i], &sets[i], &err) || fit_check_trace(&sets[i], traces[i], in.hw.name, &err)) {
            cli_error("calibrate", &err);
            goto out;
        }
        rows += (long)sets[i].n;
    }
    char mdir[RESOLVE_PATH_LEN];
    if (cli_project_path("calibrate", "models", mdir, sizeof mdir))
        goto out;
    if (fit_models_resolve(sets, ntraces, mdir, models,
                           &nmodels, MAX_MODELS, &err)) {
        cli_error("calibrate", &err);
        goto out;
    }
    printf("unpad calibrate: %ld rows from %d trace%s on %s\n\n", rows, ntraces, ntraces > 1 ? "s" : "",
           in.hw.name);
    if (fit_calibrate(sets, ntraces, models, nmodels, &in.hw, &init, res, &err)) {
        cli_error("calibrate", &err);
        goto out;
    }
    fit_print(stdout, res, &init);
    if (resid_path) {
        if (fit_write_residuals(resid_path, sets, ntraces, models, nmodels, &in.hw, &res->coef, &err)) {
            cli_error("calibrate", &err);
            goto out;
        }
        printf("wrote %s\n", resid_path);
    }
    if (out) {
        char comment[4096];
        int at = snprintf(comment, sizeof comment, "fitted by `unpad calibrate` on %ld rows of:", rows);
        for (int i = 0; i < ntraces && at < (int)sizeof comment - 200; i++)
            at += snprintf(comment + at, sizeof comment - (size_t)at, " %s", traces[i]);
        at += snprintf(comment + at, sizeof comment - (size_t)at, "\n# standard errors:");
        for (int p = 0; p < FIT_NPARAM && at < (int)sizeof comment - 60; p++)
            if (res->param[p].fitted)
                at += snprintf(comment + at, sizeof comment - (size_t)at, " %s %.3g;",
                               fit_param_name((fit_param_id)p), res->param[p].se);
        if (calib_write(out, &res->coef, comment, &err)) {
            cli_error("calibrate", &err);
            goto out;
        }
        printf("wrote %s\n", out);
    } else {
        printf("(nothing written: pass --out models/calib/%s.cfg)\n", in.hw.name);
    }
    rc = 0;
out:
    if (sets)
        for (int i = 0; i < ntraces; i++)
            trace_set_free(&sets[i]);
    free(sets);
    free(models);
    free(res);
    resolve_inputs_free(&in);
    return rc;
}
