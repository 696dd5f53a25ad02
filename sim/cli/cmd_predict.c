/* cmd_predict.c — `unpad predict`: one training step per operator on one GPU, unpadded and
 * (with --padded) padded to the maximum length, side by side. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cost.h"
#include "outfile.h"
#include "resolve.h"
#include "trace.h"

const char cmd_predict_what[] = "predict one training step per operator (time, FLOPs, bytes)";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: unpad predict [--dist F] [--model F] [--hw F] [--calib F] [--gpus N] [--batch B]\n"
            "                     [--padded] [--unfused] [--seed S] [--steps K] [--csv OUT]\n"
            "  --dist F     sequence lengths: length,count CSV or one per line (default models/dists/wiki512.csv)\n"
            "  --model F    model config (default models/bert-large.cfg)\n"
            "  --hw F       hardware spec (default models/hw/h200-sxm.cfg)\n"
            "  --calib F    fitted coefficients (default: models/calib/<hw>.cfg if it exists)\n"
            "  --no-calib       the uncalibrated default coefficients instead\n"
            "  --gpus N     data-parallel GPUs, for all-reduce and exchange (default 1)\n"
            "  --batch B    sequences per GPU per step (default 56)\n"
            "  --padded     also predict the same batch padded to the model's max_len\n"
            "  --unfused    use unfused kernels (every intermediate through memory)\n"
            "  --seed S     seed of the sampled batch (default 1)\n"
            "  --steps K    also average samples/s over K sampled batches (default 100)\n"
            "  --csv OUT    write the predicted rows in the trace format (padded: OUT.padded.csv)\n");
}

static int write_csv(const char *path, const resolve_inputs *in, int gpus, const cost_step *st)
{
    unpad_err err = {0};
    unpad_outfile *o;
    if (outfile_open(path, &o, &err))
        return cli_error("predict", &err);
    FILE *f = outfile_stream(o);
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
        {"csv", required_argument, 0, 'o'},  {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    resolve_req rq = {0};
    resolve_inputs in;
    memset(&in, 0, sizeof in);
    int gpus = 1, batch = 56, padded = 0, fused = 1, seed = 1, steps = 100, c;
    const char *csv = NULL;
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
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "unpad predict: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    char pbuf[4200];
    snprintf(pbuf, sizeof pbuf, "%s.padded.csv", csv ? csv : "");
    const char *outs[2] = {csv, csv && padded ? pbuf : NULL};
    if (cli_inputs_load("predict", &rq, &in, 1))
        return 1;
    if (cli_check_outputs("predict", &in, NULL, 0, outs, 2)) {
        resolve_inputs_free(&in);
        return 1;
    }
    unpad_err err = {0};
    int rc = 1;
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
    printf("unpad predict: %s on %s, %d GPU%s x %d sequences (seed %d) from %s\n", m->name,
           in.hw.name, gpus, gpus > 1 ? "s" : "", batch, seed, in.dist_path);
    printf("  %ld tokens (mean length %.1f), %s kernels, ", tokens, (double)tokens / batch,
           fused ? "fused" : "unfused");
    if (in.calib_from == CALIB_DEFAULT)
        printf("uncalibrated default coefficients\n\n");
    else
        printf("coefficients %s in %s\n\n", calib_source_name(in.calib_from), in.calib_path);
    printf("%-14s %-13s %5s %10s %10s %10s %6s", "operator", "class", "count", "GFLOP", "MB",
           "time_us", "share");
    if (padded)
        printf(" | %10s %10s %6s", "pad_GFLOP", "pad_us", "share");
    printf("\n");
    for (int i = 0; i < OP_COUNT; i++) {
        const op_cost *o = &st[0].ops[i];
        double t = o->instances * st[0].time_us[i];
        if (t == 0 && (i == OP_ALLREDUCE || i == OP_EXCHANGE))
            continue;
        printf("%-14s %-13s %5d %10.2f %10.1f %10.1f %5.1f%%", op_name((op_id)i),
               op_class_name(op_class_of((op_id)i)), o->instances, o->instances * o->flops / 1e9,
               o->instances * o->bytes / 1e6, t, 100 * t / st[0].step_us);
        if (padded) {
            const op_cost *q = &st[1].ops[i];
            double tp = q->instances * st[1].time_us[i];
            printf(" | %10.2f %10.1f %5.1f%%", q->instances * q->flops / 1e9, tp,
                   100 * tp / st[1].step_us);
        }
        printf("\n");
    }
    printf("%-14s %-13s %5s %10s %10s %10.1f %5.1f%%", "step overhead", "", "", "", "",
           in.calib.step_overhead_us, 100 * in.calib.step_overhead_us / st[0].step_us);
    if (padded)
        printf(" | %10s %10.1f %5.1f%%", "", in.calib.step_overhead_us,
               100 * in.calib.step_overhead_us / st[1].step_us);
    printf("\n\n");
    printf("%-34s %14s", "", "unpadded");
    if (padded)
        printf(" %14s", "padded");
    printf("\n");
    printf("%-34s %14.2f", "step time (ms)", st[0].step_us / 1e3);
    if (padded)
        printf(" %14.2f", st[1].step_us / 1e3);
    printf("\n%-34s %14.1f", "samples/s (all GPUs)", gpus * batch / (st[0].step_us / 1e6));
    if (padded)
        printf(" %14.1f", gpus * batch / (st[1].step_us / 1e6));
    printf("\n%-34s %14.1f", "model TFLOP/s per GPU (useful work)", st[0].model_flops / st[0].step_us / 1e6);
    if (padded)
        printf(" %14.1f", st[0].model_flops / st[1].step_us / 1e6);
    printf("\n");
    if (padded)
        printf("%-34s %14s %13.2fx\n", "speed-up of unpadded", "", st[1].step_us / st[0].step_us);

    /* Expected throughput over many sampled batches (one GPU's batch per step). */
    double sum_us = 0;
    for (int k = 0; k < steps; k++) {
        dist_sample(smp, len, batch);
        cost_step s1;
        if (cost_predict_step(m, &in.hw, &in.calib, &b, &s1, &err)) {
            cli_error("predict", &err);
            goto out;
        }
        sum_us += s1.step_us;
    }
    printf("%-34s %14.1f   (mean over %d sampled batches)\n", "samples/s, expected", 
           gpus * batch / (sum_us / steps / 1e6), steps);
    if (csv) {
        if (write_csv(csv, &in, gpus, &st[0]))
            goto out;
        printf("\nwrote %s", csv);
        if (padded) {
            if (write_csv(pbuf, &in, gpus, &st[1]))
                goto out;
            printf(" and %s", pbuf);
        }
        printf("\n");
    }
    rc = 0;
out:
    dist_sampler_free(smp);
    free(st);
    free(len);
    resolve_inputs_free(&in);
    return rc;
}
