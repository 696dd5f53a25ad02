/* cmd_predict.c — `unpad predict`: one training step per operator on one GPU, unpadded and
 * (with --padded) padded to the maximum length, side by side. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cost.h"
#include "outfile.h"
#include "progress.h"
#include "prov.h"
#include "resolve.h"
#include "trace.h"

const char cmd_predict_what[] = "predict one training step per operator (time, FLOPs, bytes)";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: unpad predict [--dist F] [--model F] [--hw F] [--calib F] [--gpus N] [--batch B]\n"
            "                     [--padded] [--unfused] [--seed S] [--steps K] [--csv OUT] [--json OUT]\n"
            "                     [--quiet]\n"
            "  --dist F     sequence lengths: length,count CSV or one per line (default models/dists/wiki512.csv)\n"
            "  --model F    model config (default models/bert-large.cfg)\n"
            "  --hw F       hardware spec (default models/hw/h200-sxm.cfg)\n"
            "  --calib F    fitted coefficients (default: models/calib/<hw>.cfg if it exists)\n"
            "  --no-calib       the uncalibrated default coefficients instead\n"
            "  --gpus N     data-parallel GPUs, for all-reduce and exchange (default 1)\n"
            "  --batch B    sequences per GPU per step (default 56)\n"
            "  --padded     also predict the same batch padded to the model's max_len\n"
            "  --unfused    use unfused kernels (every intermediate through memory)\n"
            "  --seed S     seed of the sampled batches (default 1)\n"
            "  --steps K    sampled steps behind the expected throughput, 1..1000000 (default 100)\n"
            "  --csv OUT    write the operator table's rows in the trace format; with --padded the\n"
            "               padded rows go to OUT with -padded before its extension\n"
            "               (predict.csv: predict-padded.csv)\n"
            "  --json OUT   write the prediction as JSON (docs/json.md); OUT '-': only the JSON, on\n"
            "               standard output\n"
            "  --quiet      no progress line on stderr (it appears only on a terminal)\n"
            "The throughput is the expected one: the mean step over K sampled steps (one GPU's batch\n"
            "each). The operator table is the first sampled batch, to show where the time goes.\n");
}

/* path with -padded before its extension: predict.csv -> predict-padded.csv. */
static void padded_name(const char *path, char *buf, size_t n)
{
    const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    size_t stem = dot && (!slash || dot > slash + 1) ? (size_t)(dot - path) : strlen(path);
    snprintf(buf, n, "%.*s-padded%s", (int)stem, path, path + stem);
}

static int write_csv(const char *path, const resolve_inputs *in, int gpus, const cost_step *st,
                     const char *prov)
{
    unpad_err err = {0};
    unpad_outfile *o;
    if (outfile_open(path, &o, &err))
        return cli_error("predict", &err);
    FILE *f = outfile_stream(o);
    fputs(prov, f);
    trace_write_header(f);
    trace_emit_predicted(f, in->hw.name, in->model.name, gpus, 0, 0, in->model.layers, st, 0);
    if (outfile_commit(o, &err))
        return cli_error("predict", &err);
    return 0;
}

int cmd_predict(int argc, char **argv)
{
    static const struct option opts[] = {
        {"dist", required_argument, 0, 'd'}, {"model", required_argument, 0, 'm'},
        {"hw", required_argument, 0, 'w'},   {"calib", required_argument, 0, 'c'}, {"no-calib", no_argument, 0, 'N'},
        {"gpus", required_argument, 0, 'g'}, {"batch", required_argument, 0, 'b'},
        {"padded", no_argument, 0, 'p'},     {"unfused", no_argument, 0, 'u'},
        {"seed", required_argument, 0, 's'}, {"steps", required_argument, 0, 'k'},
        {"csv", required_argument, 0, 'o'},  {"json", required_argument, 0, 'j'},
        {"quiet", no_argument, 0, 'q'},      {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    resolve_req rq = {0};
    resolve_inputs in;
    memset(&in, 0, sizeof in);
    int gpus = 1, batch = 56, padded = 0, fused = 1, seed = 1, steps = 100, quiet = 0, c;
    progress *prog = NULL;
    const char *csv = NULL, *json = NULL;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'd': rq.dist = optarg; break;
        case 'm': rq.model = optarg; break;
        case 'w': rq.hw = optarg; break;
        case 'c': rq.calib = optarg; break;
        case 'N': rq.no_calib = 1; break;
        case 'g': if (cli_int("predict", "--gpus", optarg, 1, 65536, &gpus)) return 2; break;
        case 'b': if (cli_int("predict", "--batch", optarg, 1, 4096, &batch)) return 2; break;
        case 'p': padded = 1; break;
        case 'u': fused = 0; break;
        case 's': if (cli_int("predict", "--seed", optarg, 0, 2147483647, &seed)) return 2; break;
        case 'k': if (cli_int("predict", "--steps", optarg, 1, 1000000, &steps)) return 2; break;
        case 'o': csv = optarg; break;
        case 'j': json = optarg; break;
        case 'q': quiet = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "unpad predict: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (cli_inputs_load("predict", &rq, &in, 1))
        return 1;
    unpad_err err = {0};
    int rc = 1;
    cli_json jdoc = {0};
    json_w *w = json ? &jdoc.w : NULL;
    char pbuf[4200];
    if (csv)
        padded_name(csv, pbuf, sizeof pbuf);
    const char *outs[3] = {csv, csv && padded ? pbuf : NULL, json && strcmp(json, "-") ? json : NULL};
    if (cli_check_outputs("predict", &in, NULL, 0, outs, 3)) {
        resolve_inputs_free(&in);
        return 1;
    }
    int *len = malloc(sizeof *len * (size_t)batch);
    dist_sampler *smp = NULL;
    cost_step *st = calloc(2, sizeof *st);
    if (!len || !st) {
        fprintf(stderr, "unpad predict: out of memory\n");
        goto out;
    }
    if (dist_sampler_alloc(&in.dist, (uint64_t)seed, &smp, &err)) {
        cli_error("predict", &err);
        goto out;
    }
    dist_sample(smp, len, batch);
    const model_cfg *m = &in.model;
    op_batch b = {.len = len, .n = batch, .fused = fused, .gpus = gpus, .dropout = 1};
    if (cost_predict_step(m, &in.hw, &in.calib, &b, &st[0], &err)) {
        cli_error("predict", &err);
        goto out;
    }
    op_batch bp = b;
    bp.padded = 1;
    bp.pad_len = m->max_len;
    if (padded && cost_predict_step(m, &in.hw, &in.calib, &bp, &st[1], &err)) {
        cli_error("predict", &err);
        goto out;
    }
    long tokens = st[0].ops[OP_QKV_FWD].tokens;
    cli_prov prov;
    char pc[8192];
    cli_prov_init(&prov, argc, argv);
    cli_prov_inputs(&prov, &in, 1);
    cli_prov_seed(&prov, seed);
    cli_prov_comment(&prov, pc, sizeof pc);
    if (json) {
        if (cli_json_open("predict", json, &prov, &jdoc))
            goto out;
        json_obj(w, "config");
        json_int(w, "gpus", gpus);
        json_int(w, "batch", batch);
        json_bool(w, "fused", fused);
        json_bool(w, "padded", padded);
        if (padded)
            json_int(w, "pad_len", m->max_len);
        else
            json_null(w, "pad_len");
        json_int(w, "steps", steps);
        json_end(w);
    }
    printf("unpad predict: %s on %s, %d GPU%s x %d sequences, %s kernels\n", m->name, in.hw.name,
           gpus, gpus > 1 ? "s" : "", batch, fused ? "fused" : "unfused");
    cli_prov_print(stdout, &prov);
    printf("\none training step of the first sampled batch: %ld tokens (mean length %.1f)%s\n\n",
           tokens, (double)tokens / batch, padded ? ", beside it padded to max_len" : "");
    printf("%-14s %-13s %5s %10s %10s %10s %6s", "operator", "class", "count", "GFLOP", "MB",
           "time_us", "share");
    if (padded)
        printf(" | %10s %10s %6s", "pad_GFLOP", "pad_us", "share");
    printf("\n");
    if (w) {
        json_obj(w, "sampled_batch");
        json_int(w, "tokens", tokens);
        json_num(w, "mean_len", (double)tokens / batch);
        json_num(w, "step_us", st[0].step_us);
        json_num(w, "padded_step_us", padded ? st[1].step_us : NAN);
        json_num(w, "step_overhead_us", in.calib.step_overhead_us);
        json_arr(w, "operators");
    }
    for (int i = 0; i < OP_COUNT; i++) {
        const op_cost *o = &st[0].ops[i];
        double t = o->instances * st[0].time_us[i];
        if (t == 0 && (i == OP_ALLREDUCE || i == OP_EXCHANGE))
            continue;
        printf("%-14s %-13s %5d %10.2f %10.1f %10.1f %5.1f%%", op_name((op_id)i),
               op_class_name(op_class_of((op_id)i)), o->instances, o->instances * o->flops / 1e9,
               o->instances * o->bytes / 1e6, t, 100 * t / st[0].step_us);
        const op_cost *q = &st[1].ops[i];
        double tp = q->instances * st[1].time_us[i];
        if (padded)
            printf(" | %10.2f %10.1f %5.1f%%", q->instances * q->flops / 1e9, tp,
                   100 * tp / st[1].step_us);
        printf("\n");
        if (w) {
            json_obj(w, NULL);
            json_str(w, "name", op_name((op_id)i));
            json_str(w, "class", op_class_name(op_class_of((op_id)i)));
            json_int(w, "instances", o->instances);
            json_num(w, "flops", o->instances * o->flops);
            json_num(w, "bytes", o->instances * o->bytes);
            json_num(w, "time_us", t);
            json_num(w, "share", t / st[0].step_us);
            json_num(w, "padded_flops", padded ? q->instances * q->flops : NAN);
            json_num(w, "padded_time_us", padded ? tp : NAN);
            json_num(w, "padded_share", padded ? tp / st[1].step_us : NAN);
            json_end(w);
        }
    }
    if (w) {
        json_end(w);
        json_end(w);
    }
    printf("%-14s %-13s %5s %10s %10s %10.1f %5.1f%%", "step overhead", "", "", "", "",
           in.calib.step_overhead_us, 100 * in.calib.step_overhead_us / st[0].step_us);
    if (padded)
        printf(" | %10s %10.1f %5.1f%%", "", in.calib.step_overhead_us,
               100 * in.calib.step_overhead_us / st[1].step_us);
    printf("\n%-14s %-13s %5s %10s %10s %10.1f", "step", "", "", "", "", st[0].step_us);
    if (padded)
        printf(" %6s | %10s %10.1f", "", "", st[1].step_us);
    printf("\n\n");

    /* The throughput: the mean step over `steps` sampled batches (the first is the table's). */
    double sum_us = st[0].step_us, sum_pad_us = padded ? st[1].step_us : 0,
           sum_flops = st[0].model_flops;
    if (progress_start("unpad predict", "steps", steps, steps, progress_wanted(quiet), &prog,
                       &err)) {
        cli_error("predict", &err);
        goto out;
    }
    for (int k = 1; k < steps; k++) {
        if (k % 1024 == 0)
            progress_add(prog, 1024, 1024);
        dist_sample(smp, len, batch);
        cost_step s1, s2;
        if (cost_predict_step(m, &in.hw, &in.calib, &b, &s1, &err) ||
            (padded && cost_predict_step(m, &in.hw, &in.calib, &bp, &s2, &err))) {
            cli_error("predict", &err);
            goto out;
        }
        sum_us += s1.step_us;
        sum_flops += s1.model_flops;
        if (padded)
            sum_pad_us += s2.step_us;
    }
    progress_end(prog);
    prog = NULL;
    double step_us = sum_us / steps, pad_us = sum_pad_us / steps;
    double sps = gpus * batch / (step_us / 1e6), pad_sps = gpus * batch / (pad_us / 1e6);
    double tflops = sum_flops / sum_us / 1e6, pad_tflops = sum_flops / sum_pad_us / 1e6;
    printf("expected over %d sampled steps (seed %d):%*s %14s", steps, seed, 1, "", "unpadded");
    if (padded)
        printf(" %14s", "padded");
    printf("\n%-38s %14.2f", "  step time (ms)", step_us / 1e3);
    if (padded)
        printf(" %14.2f", pad_us / 1e3);
    printf("\n%-38s %14.1f", "  throughput (samples/s, all GPUs)", sps);
    if (padded)
        printf(" %14.1f", pad_sps);
    printf("\n%-38s %14.1f", "  model TFLOP/s per GPU (useful work)", tflops);
    if (padded)
        printf(" %14.1f", pad_tflops);
    printf("\n");
    if (padded)
        printf("%-38s %14s %13.2fx\n", "  speed-up of unpadded", "", pad_us / step_us);
    if (gpus > 1)
        printf("  (every GPU as fast as one GPU's sampled batch: unpad whatif adds the wait for the "
               "slowest of the %d)\n", gpus);
    if (w) {
        json_obj(w, "expected");
        json_int(w, "steps", steps);
        json_num(w, "step_us", step_us);
        json_num(w, "samples_per_s", sps);
        json_num(w, "model_tflops_per_gpu", tflops);
        json_num(w, "padded_step_us", padded ? pad_us : NAN);
        json_num(w, "padded_samples_per_s", padded ? pad_sps : NAN);
        json_num(w, "padded_model_tflops_per_gpu", padded ? pad_tflops : NAN);
        json_num(w, "speedup", padded ? pad_us / step_us : NAN);
        json_end(w);
    }
    if (csv) {
        if (write_csv(csv, &in, gpus, &st[0], pc))
            goto out;
        printf("\nwrote %s", csv);
        if (padded) {
            if (write_csv(pbuf, &in, gpus, &st[1], pc))
                goto out;
            printf(" and %s (padded)", pbuf);
        }
        printf("\n");
    }
    if (json) {
        if (cli_json_close("predict", &jdoc))
            goto out;
        if (!jdoc.to_stdout)
            printf("wrote %s\n", json);
    }
    rc = 0;
out:
    progress_end(prog);
    cli_json_abandon(&jdoc);
    dist_sampler_free(smp);
    free(st);
    free(len);
    resolve_inputs_free(&in);
    return rc;
}
