/* cmd_whatif.c — `unpad whatif`: Monte Carlo sweep over GPU counts, batch sizes, policies, count
 * constraints and length layouts; prints the table and writes one CSV row per configuration. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "prov.h"
#include "resolve.h"
#include "rows.h"
#include "whatif.h"

const char cmd_whatif_what[] = "what-if sweep: step time, samples/s, imbalance, memory per policy and layout";

static void usage(FILE *f)
{
    char names[256];
    fprintf(f,
            "usage: unpad whatif [--gpus LIST] [--batch LIST] [--policy LIST] [--count LIST]\n"
            "                    [--dist F] [--model F] [--hw F] [--calib F] [--steps K] [--seed S]\n"
            "                    [--threads T] [--tokens] [--attn-steps A] [--streams S]\n"
            "                    [--granularity G] [--max-len N] [--layout LIST] [--virtual-ranks]\n"
            "                    [--csv OUT] [--json OUT] [--quiet]\n"
            "  --gpus LIST      GPU counts, comma-separated (default 8)\n"
            "  --batch LIST     sequences per GPU, comma-separated (default 56)\n"
            "  --policy LIST    of %s (default all; below)\n"
            "  --count LIST     of equal, free: sequences per GPU equal (+-1) or free (default equal);\n"
            "                   none and sort-deal always give equal counts: one row each\n"
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
            "  --max-len N      truncate longer sequences to N (at most the model's max_len)\n"
            "  --layout LIST    of unpadded (default), padded, pad-longest, buckets=B1/B2/...,\n"
            "                   packed[:K] (rows of max_len, at most K sequences a row, default 3)\n"
            "  --virtual-ranks  the --gpus are virtual ranks run one after another on one GPU\n"
            "                   (unpad-train --virtual-ranks): the step is the sum of their batches\n"
            "  --csv OUT        write one row per configuration (OUT.partial while running)\n"
            "  --json OUT       write the sweep as JSON (docs/json.md; OUT.partial while running:\n"
            "                   a row per line); OUT '-': only the JSON, on standard output\n"
            "  --quiet          no progress line on stderr (it appears only on a terminal)\n"
            "Step time = the slowest GPU's batch timed per operator by the step model (as unpad\n"
            "predict) + optimizer, overhead, all-reduce (a ring in a node, hierarchical across nodes)\n"
            "and, for a balancing policy, the sample exchange. Memory: the trainer's device memory per\n"
            "GPU (NO: more than the hardware's). Rows with the same GPUs and batch share their\n"
            "sampled steps. Rows are printed as they are done (the largest configurations first);\n"
            "the CSV and JSON list them in the order of the lists. The policies:\n",
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
        {"json", required_argument, 0, 'j'},       {"quiet", no_argument, 0, 'q'},
        {"max-len", required_argument, 0, 'L'},    {"layout", required_argument, 0, 'Y'},
        {"virtual-ranks", no_argument, 0, 'V'},    {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    resolve_req rq = {0};
    resolve_inputs in;
    memset(&in, 0, sizeof in);
    whatif_setup s;
    whatif_setup_default(&s);
    int *gpus = NULL, *batch = NULL, ng = 0, nb = 0, pol[BAL_POLICY_COUNT * 4], np = 0,
        cnt[BAL_COUNT_COUNT * 4], nc = 0, seed = 1, quiet = 0, c, rc = 2;
    for (int p = 0; p < BAL_POLICY_COUNT; p++)
        pol[np++] = p;
    cnt[nc++] = BAL_EQUAL;
    const char *csv = NULL, *json = NULL;
    whatif_row *rows = NULL;
    cli_rows ro = {0};
    cli_json jdoc = {0};
    progress *prog = NULL;
    layout lay[16];
    int nlay = 1;
    lay[0] = (layout){.kind = LAYOUT_UNPADDED, .per_row = LAYOUT_PACK_DEFAULT};
    unpad_err err = {0};
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
        case 'j': json = optarg; break;
        case 'q': quiet = 1; break;
        case 'L': if (cli_int("whatif", "--max-len", optarg, 1, 1 << 20, &s.max_len)) goto out; break;
        case 'Y':
            if (layout_parse_list("--layout", optarg, lay, &nlay, 16, &err)) {
                cli_error("whatif", &err);
                goto out;
            }
            break;
        case 'V': s.serial_ranks = 1; break;
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
    long total = (long)ng * nb * np * nc * nlay;
    if (total > 100000) {
        fprintf(stderr, "unpad whatif: %ld configurations (at most 100,000)\n", total);
        goto out;
    }
    rc = 1;
    const char *outs[2] = {csv, json && strcmp(json, "-") ? json : NULL};
    if (cli_inputs_load("whatif", &rq, &in, 1) || cli_check_outputs("whatif", &in, NULL, 0, outs, 2))
        goto out;
    s.seed = (uint64_t)seed;
    s.dist = &in.dist;
    s.model = &in.model;
    s.hw = &in.hw;
    s.calib = &in.calib;
    s.layouts = lay;
    s.nlayouts = nlay;
    if (layout_check_cap(s.max_len, in.model.max_len, &err)) {
        cli_error("whatif", &err);
        goto out;
    }
    for (int l = 0; l < nlay; l++) { /* refuse a layout before the sweep starts */
        layout t = lay[l];
        if (layout_resolve(&t, s.max_len, in.model.max_len, in.dist.max_len, "--layout", &err)) {
            cli_error("whatif", &err);
            goto out;
        }
    }
    rows = calloc((size_t)total, sizeof *rows);
    if (!rows) {
        fprintf(stderr, "unpad whatif: out of memory\n");
        goto out;
    }
    /* One row per configuration; where the count cannot matter, one row (count equal). */
    int n = 0, merged = 0;
    for (int i = 0; i < ng; i++)
        for (int b = 0; b < nb; b++)
            for (int l = 0; l < nlay; l++)
                for (int p = 0; p < np; p++)
                    for (int q = 0; q < nc; q++) {
                        whatif_row r = {.gpus = gpus[i], .batch = batch[b], .policy = pol[p],
                                        .count = cli_count_matters(pol[p]) ? cnt[q] : BAL_EQUAL,
                                        .layout = l};
                        int dup = 0;
                        for (int k = 0; k < n && !dup; k++)
                            dup = rows[k].gpus == r.gpus && rows[k].batch == r.batch &&
                                  rows[k].policy == r.policy && rows[k].count == r.count &&
                                  rows[k].layout == r.layout;
                        if (dup)
                            merged++;
                        else
                            rows[n++] = r;
                    }
    cli_prov prov;
    char pc[8192];
    cli_prov_init(&prov, argc, argv);
    cli_prov_inputs(&prov, &in, 1);
    cli_prov_seed(&prov, seed);
    cli_prov_comment(&prov, pc, sizeof pc);
    if (json && cli_json_open("whatif", json, &prov, &jdoc))
        goto out;
    int cells = 0;
    for (int k = 0; k < n; k++) {
        int first = 1;
        for (int m = 0; m < k && first; m++)
            first = rows[m].gpus != rows[k].gpus || rows[m].batch != rows[k].batch;
        cells += first;
    }
    long long work = 0;
    for (int k = 0; k < n; k++) /* as whatif.c weighs its cells: free-count kk costs 4x */
        work += (long long)s.steps * rows[k].gpus * rows[k].batch *
                (rows[k].policy == BAL_KK && rows[k].count == BAL_FREE ? 4 : 1);
    if (progress_start("unpad whatif", "configurations", n, work, progress_wanted(quiet), &prog,
                       &err)) {
        cli_error("whatif", &err);
        goto out;
    }
    ro = (cli_rows){.cmd = "whatif", .text = stdout, .progress = prog, .csv = csv, .json = json,
                    .prov_comment = pc};
    if (cli_rows_open(&ro))
        goto out;
    s.progress = prog;
    s.row_done = cli_rows_done;
    s.row_ctx = &ro;
    char label[4400];
    printf("unpad whatif: %s on %s, %d configurations x %d sampled steps, balancing %s\n",
           in.model.name, in.hw.name, n, s.steps,
           s.weights_tokens ? "tokens" : "the predicted per-sequence cost");
    printf("  coefficients: %s%s", cli_calib_label(&in, label, sizeof label),
           s.serial_ranks ? "; the GPUs are virtual ranks run one after another on one GPU" : "");
    if (s.max_len)
        printf("; lengths truncated to %d", s.max_len);
    printf("\n");
    cli_prov_print(stdout, &prov);
    if (merged)
        printf("  (none and sort-deal always give equal counts: one row each, count equal)\n");
    printf("\n");
    whatif_print_header(stdout);
    fflush(stdout);
    if (whatif_run(&s, rows, n, &err)) {
        progress_end(prog);
        prog = NULL;
        cli_error("whatif", &err);
        goto out;
    }
    progress_end(prog);
    prog = NULL;
    printf("\n  imb = slowest / mean GPU step time (mean and 99th percentile over the steps); idle = "
           "1 - mean/max.\n"
           "  tokens = rows the GEMMs run per GPU and step (padding included), pad = their padding.\n");
    for (int i = 0; i < ng; i++) { /* how each GPU count's all-reduce runs */
        net_cost nc1;
        char d[256];
        net_allreduce(&in.hw, &in.calib, 4.0 * (double)model_param_count(&in.model),
                      s.serial_ranks ? 1 : gpus[i], &nc1);
        printf("  all-reduce on %d GPU%s: %s, %.3f ms\n", gpus[i], gpus[i] > 1 ? "s" : "",
               net_algo_describe(&nc1, d, sizeof d), nc1.us / 1e3);
    }
    int nofit = 0;
    for (int i = 0; i < n; i++)
        nofit += !rows[i].mem_fits;
    printf("  memory = the trainer's device memory per GPU (its arena holds batch x %d tokens)%s",
           s.max_len ? s.max_len : in.model.max_len, nofit ? "" : "; every row fits");
    if (nofit)
        printf("; %d row%s marked NO need more than the %.1f GiB of %s", nofit, nofit > 1 ? "s" : "",
               in.hw.memory_gib, in.hw.name);
    printf("\n");
    if (s.attn_steps > 0)
        printf("  attn = slowest GPU's FMHA per step (all layers, fwd + bwd; mean of %d steps): one "
               "launch vs grouped.\n", s.attn_steps < s.steps ? s.attn_steps : s.steps);
    else
        printf("  attention not timed (--attn-steps 0): '-' in the table, empty in the CSV, null in "
               "the JSON.\n");
    if (cells > 1)
        printf("  rows in the order they were done; the CSV and JSON follow the order of the lists.\n");
    if (json) {
        json_w *w = &jdoc.w;
        json_bool(w, "complete", 1);
        json_obj(w, "config");
        json_int(w, "steps", s.steps);
        json_int(w, "attn_steps", s.attn_steps < s.steps ? s.attn_steps : s.steps);
        json_str(w, "weights", s.weights_tokens ? "tokens" : "cost");
        json_int(w, "max_streams", s.max_streams);
        json_int(w, "granularity", s.granularity);
        json_int(w, "max_len", s.max_len ? s.max_len : in.model.max_len);
        json_bool(w, "virtual_ranks", s.serial_ranks);
        json_end(w);
        cli_rows_json(w, rows, n);
        if (cli_json_close("whatif", &jdoc))
            goto out;
    }
    if (cli_rows_finish(&ro, rows, n))
        goto out;
    if (csv)
        printf("  wrote %s\n", csv);
    if (json && !jdoc.to_stdout)
        printf("  wrote %s\n", json);
    rc = 0;
out:
    progress_end(prog);
    cli_rows_abandon(&ro);
    cli_json_abandon(&jdoc);
    free(gpus);
    free(batch);
    free(rows);
    resolve_inputs_free(&in);
    return rc;
}
