/* cmd_whatif.c — `unpad whatif`: Monte Carlo sweep over GPU counts, batch sizes, policies and count
 * constraints; prints the table and writes one CSV row per configuration. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "resolve.h"
#include "whatif.h"

const char cmd_whatif_what[] = "what-if sweep: step time, samples/s, imbalance per policy";

static void usage(FILE *f)
{
    char names[256];
    fprintf(f,
            "usage: unpad whatif [--gpus LIST] [--batch LIST] [--policy LIST] [--count LIST]\n"
            "                    [--dist F] [--model F] [--hw F] [--calib F] [--steps K] [--seed S]\n"
            "                    [--threads T] [--tokens] [--attn-steps A] [--streams S]\n"
            "                    [--granularity G] [--csv OUT]\n"
            "  --gpus LIST      GPU counts, comma-separated (default 8)\n"
            "  --batch LIST     sequences per GPU, comma-separated (default 56)\n"
            "  --policy LIST    of %s (default all; below)\n"
            "  --count LIST     of equal, free: sequences per GPU equal (+-1) or free (default equal)\n"
            "  --dist F         sequence lengths (default models/dists/wiki512.csv)\n"
            "  --model F        model config (default models/bert-large.cfg)\n"
            "  --hw F           hardware spec (default models/hw/h200-sxm.cfg)\n"
            "  --calib F        fitted coefficients (default: models/calib/<hw>.cfg if it exists)\n"
            "  --no-calib       the uncalibrated default coefficients instead\n"
            "  --steps K        sampled steps per configuration, 1..10000000 (default 1000)\n"
            "  --seed S         seed of the sampled steps (default 1)\n"
            "  --threads T      worker threads, 0 = one per CPU (default 0)\n"
            "  --tokens         balance tokens instead of the predicted per-sequence cost\n"
            "  --attn-steps A   steps whose slowest GPU's attention is timed (default 32; 0: none)\n"
            "  --streams S      FMHA grouping: at most S streams, 1..%d (default 4)\n"
            "  --granularity G  FMHA grouping: cut only between lengths in different G-wide bins (default 1)\n"
            "  --csv OUT        write one row per configuration\n"
            "Step time = slowest GPU's summed per-sequence cost + optimizer, overhead, all-reduce and\n"
            "(for a balancing policy) sample exchange. Policies with the same GPUs and batch share\n"
            "their sampled steps. The policies:\n",
            balance_policy_list(names, sizeof names, ", "), GROUP_MAX_STREAMS);
    balance_policy_help_print(f, "  ");
}

static int policy_parse(const char *s, int *v, unpad_err *err)
{
    balance_policy p;
    int rc = balance_policy_parse(s, &p, err);
    *v = (int)p;
    return rc;
}

static int count_parse(const char *s, int *v, unpad_err *err)
{
    balance_count c;
    int rc = balance_count_parse(s, &c, err);
    *v = (int)c;
    return rc;
}

/* Parses a comma list of names with parse into out[]. */
static int name_list(const char *flag, const char *val, int (*parse)(const char *, int *, unpad_err *),
                     int *out, int *n, int max)
{
    char buf[512];
    if (strlen(val) >= sizeof buf) {
        fprintf(stderr, "unpad whatif: %s: list too long\n", flag);
        return 1;
    }
    strcpy(buf, val);
    *n = 0;
    char *save = NULL;
    unpad_err err = {0};
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int v;
        if (parse(t, &v, &err)) {
            fprintf(stderr, "unpad whatif: %s: %s\n", flag, err.msg);
            return 1;
        }
        if (*n >= max) {
            fprintf(stderr, "unpad whatif: %s: more than %d entries\n", flag, max);
            return 1;
        }
        out[(*n)++] = v;
    }
    if (!*n) {
        fprintf(stderr, "unpad whatif: %s: empty list\n", flag);
        return 1;
    }
    return 0;
}

int cmd_whatif(int argc, char **argv)
{
    static const struct option opts[] = {
        {"gpus", required_argument, 0, 'g'},       {"batch", required_argument, 0, 'b'},
        {"policy", required_argument, 0, 'p'},     {"count", required_argument, 0, 'n'},
        {"dist", required_argument, 0, 'd'},       {"model", required_argument, 0, 'm'},
        {"hw", required_argument, 0, 'w'},         {"calib", required_argument, 0, 'c'}, {"no-calib", no_argument, 0, 'N'},
        {"steps", required_argument, 0, 'k'},      {"seed", required_argument, 0, 's'},
        {"threads", required_argument, 0, 't'},    {"tokens", no_argument, 0, 'T'},
        {"attn-steps", required_argument, 0, 'a'}, {"streams", required_argument, 0, 'S'},
        {"granularity", required_argument, 0, 'G'}, {"csv", required_argument, 0, 'o'},
        {"help", no_argument, 0, 'h'},             {0, 0, 0, 0}};
    resolve_req rq = {0};
    resolve_inputs in;
    memset(&in, 0, sizeof in);
    whatif_setup s;
    whatif_setup_default(&s);
    int *gpus = NULL, *batch = NULL, ng = 0, nb = 0, pol[BAL_POLICY_COUNT * 4], np = 0,
        cnt[BAL_COUNT_COUNT * 4], nc = 0, seed = 1, c, rc = 2;
    for (int p = 0; p < BAL_POLICY_COUNT; p++)
        pol[np++] = p;
    cnt[nc++] = BAL_EQUAL;
    const char *csv = NULL;
    whatif_row *rows = NULL;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'g':
            free(gpus);
            if (cli_int_list("whatif", "--gpus", optarg, 1, 65536, &gpus, &ng))
                goto out;
            break;
        case 'b':
            free(batch);
            if (cli_int_list("whatif", "--batch", optarg, 1, 65536, &batch, &nb))
                goto out;
            break;
        case 'p':
            if (name_list("--policy", optarg, policy_parse, pol, &np, BAL_POLICY_COUNT * 4))
                goto out;
            break;
        case 'n':
            if (name_list("--count", optarg, count_parse, cnt, &nc, BAL_COUNT_COUNT * 4))
                goto out;
            break;
        case 'd': rq.dist = optarg; break;
        case 'm': rq.model = optarg; break;
        case 'w': rq.hw = optarg; break;
        case 'c': rq.calib = optarg; break;
        case 'N': rq.no_calib = 1; break;
        case 'k': if (cli_int("whatif", "--steps", optarg, 1, 10000000, &s.steps)) goto out; break;
        case 's': if (cli_int("whatif", "--seed", optarg, 0, 2147483647, &seed)) goto out; break;
        case 't': if (cli_int("whatif", "--threads", optarg, 0, 256, &s.threads)) goto out; break;
        case 'T': s.weights_tokens = 1; break;
        case 'a':
            if (cli_int("whatif", "--attn-steps", optarg, 0, 1000000, &s.attn_steps))
                goto out;
            break;
        case 'S':
            if (cli_int("whatif", "--streams", optarg, 1, GROUP_MAX_STREAMS, &s.max_streams))
                goto out;
            break;
        case 'G':
            if (cli_int("whatif", "--granularity", optarg, 1, 65536, &s.granularity))
                goto out;
            break;
        case 'o': csv = optarg; break;
        case 'h': usage(stdout); rc = 0; goto out;
        default: usage(stderr); goto out;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "unpad whatif: unexpected argument '%s'\n", argv[optind]);
        goto out;
    }
    if ((!gpus && cli_int_list("whatif", "--gpus", "8", 1, 65536, &gpus, &ng)) ||
        (!batch && cli_int_list("whatif", "--batch", "56", 1, 65536, &batch, &nb)))
        goto out;
    for (int i = 0; i < ng; i++)
        for (int j = 0; j < nb; j++)
            if ((long)gpus[i] * batch[j] > (1L << 24)) {
                fprintf(stderr,
                        "unpad whatif: %d GPUs x %d sequences is over 16,777,216 sequences a step\n",
                        gpus[i], batch[j]);
                goto out;
            }
    long total = (long)ng * nb * np * nc;
    if (total > 100000) {
        fprintf(stderr, "unpad whatif: %ld configurations (at most 100,000)\n", total);
        goto out;
    }
    rc = 1;
    if (cli_inputs_load("whatif", &rq, &in, 1) || cli_check_outputs("whatif", &in, NULL, 0, &csv, 1))
        goto out;
    s.seed = (uint64_t)seed;
    s.dist = &in.dist;
    s.model = &in.model;
    s.hw = &in.hw;
    s.calib = &in.calib;
    rows = calloc((size_t)total, sizeof *rows);
    if (!rows) {
        fprintf(stderr, "unpad whatif: out of memory\n");
        goto out;
    }
    int n = 0;
    for (int i = 0; i < ng; i++)
        for (int j = 0; j < nb; j++)
            for (int p = 0; p < np; p++)
                for (int q = 0; q < nc; q++)
                    rows[n++] = (whatif_row){.gpus = gpus[i], .batch = batch[j], .policy = pol[p],
                                             .count = cnt[q]};
    unpad_err err = {0};
    printf("unpad whatif: %s on %s (%s), lengths from %s\n", in.model.name, in.hw.name,
           in.calib_from == CALIB_FITTED ? "calibrated" : in.calib_from == CALIB_TRANSFERRED
           ? "transferred calibration" : "uncalibrated defaults", in.dist_path);
    printf("  %d configurations x %d sampled steps (seed %d), balancing %s\n\n", n, s.steps, seed,
           s.weights_tokens ? "tokens" : "the predicted per-sequence cost");
    if (whatif_run(&s, rows, n, &err)) {
        cli_error("whatif", &err);
        goto out;
    }
    whatif_print_table(stdout, rows, n);
    printf("\n  imb = slowest / mean GPU step time (mean and 99th percentile over the steps); idle = "
           "1 - mean/max.\n");
    if (s.attn_steps > 0)
        printf("  attn = slowest GPU's FMHA per step (all layers, fwd + bwd; mean of %d steps): one "
               "launch vs grouped.\n", s.attn_steps < s.steps ? s.attn_steps : s.steps);
    else
        printf("  attention not timed (--attn-steps 0).\n");
    if (csv) {
        if (whatif_write_csv(csv, rows, n, &err)) {
            cli_error("whatif", &err);
            goto out;
        }
        printf("  wrote %s\n", csv);
    }
    rc = 0;
out:
    free(gpus);
    free(batch);
    free(rows);
    resolve_inputs_free(&in);
    return rc;
}
