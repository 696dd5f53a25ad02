/* cmd_plan.c — `unpad plan`: choose the balancing policy (or evaluate the one given) and the FMHA
 * grouping for a run, print what it buys against loader order, and write the plan file. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "resolve.h"
#include "group.h"
#include "plan.h"

const char cmd_plan_what[] = "choose balancing and FMHA grouping; write a plan file";

static void usage(FILE *f)
{
    char names[256];
    fprintf(f,
            "usage: unpad plan [--dist F] [--model F] [--hw F] [--calib F] [--gpus N] [--batch B]\n"
            "                  [--policy P|auto] [--count equal|free] [--steps K] [--seed S]\n"
            "                  [--tokens] [--streams S] [--granularity G] [--threads T] [--out plan.cfg]\n"
            "  --dist F         sequence lengths (default models/dists/wiki512.csv)\n"
            "  --model F        model config (default models/bert-large.cfg)\n"
            "  --hw F           hardware spec (default models/hw/h200-sxm.cfg)\n"
            "  --calib F        fitted coefficients (default: models/calib/<hw>.cfg if it exists)\n"
            "  --no-calib       the uncalibrated default coefficients instead\n"
            "  --gpus N         data-parallel GPUs, 1..65536 (default 8)\n"
            "  --batch B        sequences per GPU, 1..65536 (default 56)\n"
            "  --policy P       %s, or auto: the lowest predicted step\n"
            "                   time (default auto; the policies are below)\n"
            "  --count C        equal (+-1 sequences per GPU) or free (default equal)\n"
            "  --steps K        sampled steps behind the predictions, 1..10000000 (default 1000)\n"
            "  --seed S         seed (default 1)\n"
            "  --tokens         balance tokens instead of the predicted per-sequence cost\n"
            "  --streams S      FMHA grouping: at most S CUDA streams, 1..%d (default 4)\n"
            "  --granularity G  FMHA grouping: cut only between lengths in different G-wide bins (default 1)\n"
            "  --threads T      worker threads, 0 = one per CPU (default 0)\n"
            "  --out F          write the plan file (for unpad-train --plan)\n"
            "The balancing policies:\n",
            balance_policy_list(names, sizeof names, ", "), GROUP_MAX_STREAMS);
    balance_policy_help_print(f, "  ");
}

int cmd_plan(int argc, char **argv)
{
    static const struct option opts[] = {
        {"dist", required_argument, 0, 'd'},   {"model", required_argument, 0, 'm'},
        {"hw", required_argument, 0, 'w'},     {"calib", required_argument, 0, 'c'}, {"no-calib", no_argument, 0, 'N'},
        {"gpus", required_argument, 0, 'g'},   {"batch", required_argument, 0, 'b'},
        {"policy", required_argument, 0, 'p'}, {"count", required_argument, 0, 'n'},
        {"steps", required_argument, 0, 'k'},  {"seed", required_argument, 0, 's'},
        {"tokens", no_argument, 0, 'T'},       {"streams", required_argument, 0, 'S'},
        {"granularity", required_argument, 0, 'G'}, {"threads", required_argument, 0, 't'},
        {"out", required_argument, 0, 'o'},    {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    resolve_req rq = {0};
    resolve_inputs in;
    memset(&in, 0, sizeof in);
    whatif_setup s;
    whatif_setup_default(&s);
    int gpus = 8, batch = 56, policy = -1, seed = 1, c;
    balance_count count = BAL_EQUAL;
    const char *out = NULL;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'd': rq.dist = optarg; break;
        case 'm': rq.model = optarg; break;
        case 'w': rq.hw = optarg; break;
        case 'c': rq.calib = optarg; break;
        case 'N': rq.no_calib = 1; break;
        case 'g': if (cli_int("plan", "--gpus", optarg, 1, 65536, &gpus)) return 2; break;
        case 'b': if (cli_int("plan", "--batch", optarg, 1, 65536, &batch)) return 2; break;
        case 'p':
            if (!strcmp(optarg, "auto"))
                policy = -1;
            else {
                balance_policy pv;
                unpad_err pe = {0};
                if (balance_policy_parse(optarg, &pv, &pe)) {
                    fprintf(stderr, "unpad plan: --policy: %s%s\n", pe.msg,
                            strcmp(optarg, "pack") ? ", or auto" : "");
                    return 2;
                }
                policy = (int)pv;
            }
            break;
        case 'n': {
            int v = balance_count_from_name(optarg);
            if (v < 0) {
                fprintf(stderr, "unpad plan: --count: unknown '%s' (expected equal or free)\n",
                        optarg);
                return 2;
            }
            count = v;
            break;
        }
        case 'k': if (cli_int("plan", "--steps", optarg, 1, 10000000, &s.steps)) return 2; break;
        case 's': if (cli_int("plan", "--seed", optarg, 0, 2147483647, &seed)) return 2; break;
        case 'T': s.weights_tokens = 1; break;
        case 'S':
            if (cli_int("plan", "--streams", optarg, 1, GROUP_MAX_STREAMS, &s.max_streams))
                return 2;
            break;
        case 'G':
            if (cli_int("plan", "--granularity", optarg, 1, 65536, &s.granularity))
                return 2;
            break;
        case 't': if (cli_int("plan", "--threads", optarg, 0, 256, &s.threads)) return 2; break;
        case 'o': out = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "unpad plan: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if ((long)gpus * batch > (1L << 24)) {
        fprintf(stderr, "unpad plan: %d GPUs x %d sequences is over 16,777,216 sequences a step\n",
                gpus, batch);
        return 2;
    }
    if (cli_inputs_load("plan", &rq, &in, 1))
        return 1;
    if (cli_check_outputs("plan", &in, NULL, 0, &out, 1)) {
        resolve_inputs_free(&in);
        return 1;
    }
    s.seed = (uint64_t)seed;
    s.dist = &in.dist;
    s.model = &in.model;
    s.hw = &in.hw;
    s.calib = &in.calib;
    unpad_plan p;
    whatif_row rows[BAL_POLICY_COUNT + 1];
    int n = 0, rc = 1;
    unpad_err err = {0};
    printf("unpad plan: %s on %d x %s (%s), %d sequences per GPU, lengths from %s\n",
           in.model.name, gpus, in.hw.name, in.calib_from == CALIB_FITTED ? "calibrated" : in.calib_from == CALIB_TRANSFERRED
           ? "transferred calibration" : "uncalibrated defaults",
           batch, in.dist_path);
    printf("  %s counts, %d sampled steps (seed %d), balancing %s\n\n", balance_count_name(count),
           s.steps, seed, s.weights_tokens ? "tokens" : "the predicted per-sequence cost");
    if (plan_make(&s, gpus, batch, policy, count, &p, rows, &n, &err)) {
        cli_error("plan", &err);
        goto out;
    }
    whatif_print_table(stdout, rows, n);
    char groups[CFG_STR_LEN];
    group_bounds_format(p.fmha_bounds, p.fmha_nb, groups, sizeof groups);
    printf("\nplan: policy %s (%s), %s counts\n", balance_policy_name(p.policy),
           policy < 0 ? "auto: lowest predicted step time" : "as asked",
           balance_count_name(p.count));
    printf("  predicted step %.2f ms, %.0f samples/s, imbalance %.4f (p99 %.4f), idle %.2f%%\n",
           p.pred_step_us / 1e3, p.pred_samples_per_s, p.pred_imbalance, p.pred_imbalance_p99,
           100 * p.pred_idle);
    printf("  against none (loader order): step %.2f ms, imbalance %.4f -> %.3fx the throughput\n",
           p.none_step_us / 1e3, p.none_imbalance,
           p.pred_step_us > 0 ? p.none_step_us / p.pred_step_us : 0);
    printf("  FMHA: slowest GPU's attention %.2f ms per step in loader order -> %.2f ms longest first "
           "with groups %s on %d stream%s (%.1f%% less)\n",
           p.pred_attn_us / 1e3, p.pred_attn_grouped_us / 1e3, groups, p.streams,
           p.streams > 1 ? "s" : "",
           p.pred_attn_us > 0 ? 100 * (1 - p.pred_attn_grouped_us / p.pred_attn_us) : 0);
    /* The grouping on a typical GPU batch, against one launch and the fixed buckets. */
    int *tl = malloc((size_t)batch * sizeof *tl);
    if (!tl) {
        fprintf(stderr, "unpad plan: out of memory\n");
        goto out;
    }
    whatif_typical_batch(&in.dist, batch, tl);
    static const int buckets[] = {128, 256, 384, 512};
    group_plan g1, gs, gp;
    int L = in.model.layers, H = in.model.heads;
    if (group_plan_bounds(&in.hw, &in.calib, H, tl, batch, buckets, 4, 1, &g1, &err) ||
        group_plan_bounds(&in.hw, &in.calib, H, tl, batch, buckets, 4, s.max_streams, &gs, &err) ||
        group_plan_bounds(&in.hw, &in.calib, H, tl, batch, p.fmha_bounds,
                          p.fmha_nb > 0 ? p.fmha_nb : 0, p.streams, &gp, &err)) {
        free(tl);
        cli_error("plan", &err);
        goto out;
    }
    double one_up = group_one_launch_us(&in.hw, &in.calib, H, tl, batch);
    for (int i = 0, j = batch - 1; i < j; i++, j--) { /* longest first */
        int t = tl[i];
        tl[i] = tl[j];
        tl[j] = t;
    }
    double one_down = group_one_launch_us(&in.hw, &in.calib, H, tl, batch);
    free(tl);
    printf("  FMHA on a typical GPU batch (the distribution's %d quantiles), per step (%d layers, "
           "fwd + bwd):\n", batch, L);
    printf("    one launch %.2f ms shortest first, %.2f ms longest first | buckets 128/256/384/512 "
           "on 1 stream %.2f ms, on %d stream%s %.2f ms | plan %.2f ms\n",
           L * one_up / 1e3, L * one_down / 1e3, L * g1.total_us / 1e3, gs.streams, gs.streams > 1 ? "s" : "",
           L * gs.total_us / 1e3, L * gp.total_us / 1e3);
    if (out) {
        if (plan_write(out, &p, &err)) {
            cli_error("plan", &err);
            goto out;
        }
        printf("  wrote %s\n", out);
    } else {
        printf("  (no --out: plan not written)\n");
    }
    rc = 0;
out:
    resolve_inputs_free(&in);
    return rc;
}
