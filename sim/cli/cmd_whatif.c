/* cmd_whatif.c — `unpad whatif`: Monte Carlo sweep over GPU counts, batch sizes, policies, count
 * constraints and length layouts; prints the table and writes one CSV row per configuration. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "memory.h"
#include "opts.h"
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
            "                    [--granularity G] [--max-len N] [--layout LIST] [--accum LIST]\n"
            "                    [--virtual-ranks] [--fp8 on|off] [--graphs on|off] [--last-layer heads|all]\n"
            "                    [--train-samples N [--price P]] [--csv OUT] [--json OUT] [--quiet]\n"
            "  --gpus LIST      GPU counts, comma-separated (default 8); an item may be a range:\n"
            "                   A..B (every count), A..B+K (step K), A..BxK (times K): 8..4096x2\n"
            "  --batch LIST     sequences per GPU (per micro-batch with --accum), comma-separated\n"
            "                   (default 56)\n"
            "  --accum LIST     gradient accumulation: micro-batches per GPU and step, 1..1024,\n"
            "                   comma-separated (default 1; unpad-train --virtual-ranks K on each GPU)\n"
            "  --policy LIST    of %s (default all; below)\n"
            "  --count LIST     of equal, free: sequences per GPU equal (+-1) or free (default equal);\n"
            "                   none and sort-deal always give equal counts: one row each\n"
            "  --dist F         sequence lengths, or a name in models/dists/ (default wiki512)\n"
            "  --model F        model config, or a name in models/ (default bert-large)\n"
            "  --hw F           hardware spec, or a name in models/hw/ (default h200-sxm)\n"
            "  --calib F        fitted coefficients, or a name in models/calib/ (default: <hw> if it exists)\n"
            "  --no-calib       the uncalibrated default coefficients instead\n"
            "  --faster L       what-if: make operators or classes F times as fast, L = NAME=F,...\n"
            "                   (fmha_bwd=1.3, gemm=1.1, overhead=2; docs/planning.md)\n"
            "  --hw-set L       what-if: the hardware spec's numbers, L = KEY=VALUE,...\n"
            "                   (gpus_per_node=4,node_bw_gbs=25: the keys of models/hw/*.cfg)\n"
            "  --steps K        sampled steps per configuration, 1..10000000 (default 1000, and for a\n"
            "                   configuration of more than 8,388 sequences a step as many as make\n"
            "                   8,388,608 sequences, at least 100)\n"
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
            "  --fp8 on|off     the trainer's --fp8 on (default off): its memory (FP8 weights, operand, E4M3\n"
            "                   FFN output), its step times from models/calib/<hw>-fp8.cfg where that\n"
            "                   exists (fitted on --fp8 on traces), else the bf16 products'\n"
            "  --graphs on|off  the trainer's --graphs on (default off): each pass one CUDA graph, no\n"
            "                   wait for the host (the calibration's graph_launch_us; docs/planning.md)\n"
            "  --last-layer heads|all  the trainer's --last-layer: heads (the default) runs the last\n"
            "                   layer after its attention on the rows the heads read only; all: on every token\n"
            "  --csv OUT        write one row per configuration (OUT.partial while running); OUT\n"
            "                   '-': only the CSV, on standard output\n"
            "  --json OUT       write the sweep as JSON (docs/json.md; OUT.partial while running:\n"
            "                   a row per line); OUT '-': only the JSON, on standard output\n"
            "  --quiet          no progress line on stderr (it appears only on a terminal)\n",
            balance_policy_list(names, sizeof names, ", "), GROUP_MAX_STREAMS);
    cli_train_usage(f, 19);
    fprintf(f,
            "Step time = the slowest GPU's batch timed per operator by the step model (as unpad\n"
            "predict) + optimizer, overhead, all-reduce (a ring in a node, hierarchical across nodes)\n"
            "and, for a balancing policy, the sample exchange. Memory: the trainer's device memory per\n"
            "GPU (NO: more than the hardware's, no time to train; TIGHT: under 1%% to spare). Rows\n"
            "with the same GPUs and batch share their sampled steps, drawn otherwise than unpad\n"
            "predict's: for one GPU the two expectations differ by sampling only (about 0.3%% at 1,000\n"
            "steps of Wikipedia lengths). Rows are printed as they are done (the largest\n"
            "configurations first); the CSV and JSON list them in the order of the lists. Time to\n"
            "train: the samples at the row's samples/s, all its GPUs held (one with --virtual-ranks).\n"
            "The policies:\n");
    balance_policy_help_print(f, "  ");
}

/* A --policy or --count list: the names parsed into v. */
typedef struct {
    int v[BAL_POLICY_COUNT * 4];
    int n, max;
    int (*parse)(const char *, int *, unpad_err *);
} name_list;

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

/* Parses a comma list of names into the name_list dst (CLI_CALL). */
static int opt_names(const char *cmd, const char *flag, const char *val, void *dst)
{
    name_list *l = dst;
    char buf[512];
    if (strlen(val) >= sizeof buf) {
        fprintf(stderr, "unpad %s: %s: list too long\n", cmd, flag);
        return 1;
    }
    strcpy(buf, val);
    l->n = 0;
    if (unpad_list_has_empty(val)) {
        fprintf(stderr, "unpad %s: %s: an empty item in '%s'\n", cmd, flag, val);
        return 1;
    }
    char *save = NULL;
    unpad_err err = {0};
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int v;
        if (l->parse(t, &v, &err)) {
            fprintf(stderr, "unpad %s: %s: %s\n", cmd, flag, err.msg);
            return 1;
        }
        if (l->n >= l->max) {
            fprintf(stderr, "unpad %s: %s: more than %d entries\n", cmd, flag, l->max);
            return 1;
        }
        for (int k = 0; k < l->n; k++)
            if (l->v[k] == v) {
                fprintf(stderr, "unpad %s: %s: %s is asked twice\n", cmd, flag, t);
                return 1;
            }
        l->v[l->n++] = v;
    }
    if (!l->n) {
        fprintf(stderr, "unpad %s: %s: empty list\n", cmd, flag);
        return 1;
    }
    return 0;
}

/* The flags: the lists swept, and the sweep's settings (in w.s). */
typedef struct {
    cli_sweep w;
    name_list pol, cnt;
    cli_layouts lays;
    cli_ints accum;   /* micro-batches per GPU (NULL: 1) */
    const char *csv;
} whatif_opts;

static int whatif_parse(int argc, char **argv, whatif_opts *o)
{
    memset(o, 0, sizeof *o);
    cli_sweep_init(&o->w);
    o->pol = (name_list){.max = BAL_POLICY_COUNT * 4, .parse = policy_parse};
    for (int p = 0; p < BAL_POLICY_COUNT; p++)
        o->pol.v[o->pol.n++] = p;
    o->cnt = (name_list){.v = {BAL_EQUAL}, .n = 1, .max = BAL_COUNT_COUNT * 4, .parse = count_parse};
    o->lays.n = 1;
    o->lays.v[0] = (layout){.kind = LAYOUT_UNPADDED, .per_row = LAYOUT_PACK_DEFAULT};
    whatif_setup *s = &o->w.s;
    const cli_opt opts[] = {
        CLI_OPTS_SWEEP(&o->w),
        CLI_OPT_CALL("policy", opt_names, &o->pol),
        CLI_OPT_CALL("count", opt_names, &o->cnt),
        CLI_OPT_INT("attn-steps", &s->attn_steps, 0, 1000000),
        CLI_OPT_OUT("csv", &o->csv),
        CLI_OPT_LAYOUTS("layout", &o->lays, CLI_MAX_LAYOUTS),
        CLI_OPT_FLAG("virtual-ranks", &s->serial_ranks),
        CLI_OPT_INTS("accum", &o->accum, 1, WHATIF_ACCUM_MAX),
    };
    int rc = cli_opts_parse("whatif", argc, argv, 1, opts, CLI_NOPTS(opts), usage, NULL);
    if (rc >= 0)
        return rc;
    if (o->w.prices.n > 1) {
        fprintf(stderr, "unpad whatif: --price: one price (a list goes with plan --hw A,B)\n");
        return 2;
    }
    if (cli_sweep_check("whatif", &o->w, 1))
        return 2;
    if (!o->accum.v && cli_int_list("whatif", "--accum", "1", 1, WHATIF_ACCUM_MAX, &o->accum.v, &o->accum.n))
        return 2;
    for (int i = 0; i < o->accum.n; i++)
        for (int k = 0; k < i; k++)
            if (o->accum.v[k] == o->accum.v[i]) {
                fprintf(stderr, "unpad whatif: --accum %d is asked twice\n", o->accum.v[i]);
                return 2;
            }
    int accumulates = 0;
    for (int i = 0; i < o->accum.n; i++)
        accumulates |= o->accum.v[i] > 1;
    if (accumulates && s->serial_ranks) {
        fprintf(stderr, "unpad whatif: --accum and --virtual-ranks exclude each other (--virtual-ranks K on one GPU "
                        "is --gpus 1 --accum K)\n");
        return 2;
    }
    for (int i = 0; i < o->w.gpus.n; i++)
        for (int b = 0; b < o->w.batch.n; b++)
            for (int a = 0; a < o->accum.n; a++)
                if ((long)o->w.gpus.v[i] * o->w.batch.v[b] * o->accum.v[a] > (1L << 24)) {
                    fprintf(stderr, "unpad whatif: %d GPUs x %d micro-batches x %d sequences is more than "
                                    "16,777,216 sequences a step\n", o->w.gpus.v[i], o->accum.v[a], o->w.batch.v[b]);
                    return 2;
                }
    long total = (long)o->w.gpus.n * o->w.batch.n * o->accum.n * o->pol.n * o->cnt.n * o->lays.n;
    if (total > 100000) {
        fprintf(stderr, "unpad whatif: %ld configurations (at most 100,000)\n", total);
        return 2;
    }
    return -1;
}

/* One row per configuration, in the order of the lists; where the count cannot matter, one row
 * (count equal): *merged counts the rows left out so. */
static whatif_row *whatif_rows_make(const whatif_opts *o, int *n, int *merged)
{
    long total = (long)o->w.gpus.n * o->w.batch.n * o->accum.n * o->pol.n * o->cnt.n * o->lays.n;
    whatif_row *rows = calloc((size_t)total, sizeof *rows);
    if (!rows)
        return NULL;
    *n = *merged = 0;
    for (int i = 0; i < o->w.gpus.n; i++)
        for (int b = 0; b < o->w.batch.n; b++)
            for (int a = 0; a < o->accum.n; a++)
                for (int l = 0; l < o->lays.n; l++)
                    for (int p = 0; p < o->pol.n; p++)
                        for (int q = 0; q < o->cnt.n; q++) {
                            int pol = o->pol.v[p];
                            whatif_row r = {.gpus = o->w.gpus.v[i], .batch = o->w.batch.v[b],
                                            .accum = o->accum.v[a], .policy = pol,
                                            .count = cli_count_matters(pol) ? o->cnt.v[q] : BAL_EQUAL,
                                            .layout = l};
                            int dup = 0;
                            for (int k = 0; k < *n && !dup; k++)
                                dup = rows[k].gpus == r.gpus && rows[k].batch == r.batch &&
                                      rows[k].accum == r.accum && rows[k].policy == r.policy &&
                                      rows[k].count == r.count && rows[k].layout == r.layout;
                            if (dup)
                                ++*merged;
                            else
                                rows[(*n)++] = r;
                        }
    return rows;
}

/* The progress line's work: as whatif.c weighs its cells, free-count kk costs 4x. */
static long long whatif_work(const whatif_setup *s, const whatif_row *rows, int n)
{
    long long work = 0;
    for (int k = 0; k < n; k++) {
        long seqs = (long)rows[k].gpus * rows[k].accum * rows[k].batch;
        work += (long long)whatif_config_steps(s, seqs) * seqs *
                (rows[k].policy == BAL_KK && rows[k].count == BAL_FREE ? 4 : 1);
    }
    return work;
}

static void whatif_print_title(const whatif_opts *o, const resolve_inputs *in, const cli_prov *prov,
                               const whatif_row *rows, int n, int merged)
{
    const whatif_setup *s = &o->w.s;
    printf("unpad whatif: %s on %s, %d configuration%s x %d sampled steps, balancing %s%s",
           in->model.name, in->hw.name, n, n == 1 ? "" : "s", s->steps,
           s->weights_tokens ? "tokens" : "the predicted per-sequence cost",
           s->serial_ranks ? "; the GPUs are virtual ranks run one after another on one GPU" : "");
    if (s->max_len)
        printf("; lengths truncated to %d", s->max_len);
    if (s->fp8)
        printf("; memory with --fp8 on, %s", cli_fp8_times(in));
    printf("; %s\n", cli_last_layer_text(s->last_heads));
    cli_prov_print(stdout, prov);
    int *g = malloc(3 * (size_t)n * sizeof *g);
    if (g) { /* the configurations that sample fewer steps */
        for (int k = 0; k < n; k++) {
            g[k] = rows[k].gpus;
            g[n + k] = rows[k].batch;
            g[2 * n + k] = rows[k].accum;
        }
        cli_steps_note(stdout, s, g, g + n, g + 2 * n, n);
        cli_graphs_note(stdout, in, g, n, s->serial_ranks);
        free(g);
    }
    if (merged)
        printf("  (none and sort-deal always give equal counts: one row each, count equal)\n");
    printf("\n");
    whatif_print_header(stdout, s->train_samples > 0);
    fflush(stdout);
}

/* What the table's columns mean, each GPU count's all-reduce, the memory and attention notes. */
static void whatif_print_notes(const whatif_opts *o, const resolve_inputs *in, const whatif_row *rows, int n)
{
    const whatif_setup *s = &o->w.s;
    printf("\n  imb = slowest / mean GPU step time (mean and 99th percentile over the steps); idle = "
           "1 - mean/max.\n"
           "  tokens = rows the GEMMs run per GPU and step (padding included), pad = their padding.\n");
    if (s->serial_ranks)
        printf("  --virtual-ranks: the ranks run one after another, so the step is the sum of their batches and\n"
               "  their imbalance costs no time (imb and idle are those of as many GPUs); a policy changes\n"
               "  the step only through how it groups lengths.\n");
    for (int i = 0; i < o->w.gpus.n; i++) { /* how each GPU count's all-reduce runs */
        int g = o->w.gpus.v[i];
        net_cost nc1;
        char d[256];
        net_allreduce(&in->hw, &in->calib, 4.0 * (double)model_param_count(&in->model),
                      s->serial_ranks ? 1 : g, &nc1);
        printf("  all-reduce on %d GPU%s: %s, %.3f ms\n", g, g > 1 ? "s" : "",
               net_algo_describe(&nc1, d, sizeof d), nc1.us / 1e3);
    }
    int nofit = 0;
    for (int i = 0; i < n; i++)
        nofit += !rows[i].mem_fits;
    printf("  memory = the trainer's device memory per GPU (activations for B x mean + 5 sqrt(B) x sd of the "
           "lengths unpadded, B x the padded length otherwise)%s", nofit ? "" : "; every row fits");
    if (nofit)
        printf("; %d row%s marked NO need more than the %.1f GiB of %s", nofit, nofit > 1 ? "s" : "",
               in->hw.memory_gib, in->hw.name);
    int tight = 0;
    for (int i = 0; i < n; i++)
        tight += rows[i].mem_tight;
    if (tight)
        printf("; %d marked TIGHT fit%s with under %.0f%% to spare", tight, tight > 1 ? "" : "s", 100 * MEMORY_TIGHT);
    printf("\n");
    if (s->attn_steps > 0)
        printf("  attn = slowest GPU's FMHA per step (all layers, fwd + bwd; mean of %d steps): one "
               "launch vs grouped.\n", s->attn_steps < s->steps ? s->attn_steps : s->steps);
    else
        printf("  attention not timed (--attn-steps 0): '-' in the table, empty in the CSV, null in "
               "the JSON.\n");
    int cells = 0; /* the (GPUs, batch) pairs: rows are done a pair at a time */
    for (int k = 0; k < n; k++) {
        int first = 1;
        for (int m = 0; m < k && first; m++)
            first = rows[m].gpus != rows[k].gpus || rows[m].batch != rows[k].batch;
        cells += first;
    }
    if (cells > 1)
        printf("  rows in the order they were done; the CSV and JSON follow the order of the lists.\n");
}

static void whatif_json(json_w *w, const whatif_setup *s, const resolve_inputs *in, const whatif_row *rows,
                        int n)
{
    json_bool(w, "complete", 1);
    json_obj(w, "config");
    json_int(w, "steps", s->steps);
    if (s->seq_budget > 0) /* a row's own steps: its "steps" */
        json_num(w, "sequence_budget", (double)s->seq_budget);
    else
        json_null(w, "sequence_budget");
    json_int(w, "attn_steps", s->attn_steps < s->steps ? s->attn_steps : s->steps);
    json_str(w, "weights", s->weights_tokens ? "tokens" : "cost");
    json_int(w, "max_streams", s->max_streams);
    json_int(w, "granularity", s->granularity);
    json_int(w, "max_len", s->max_len ? s->max_len : in->model.max_len);
    json_bool(w, "virtual_ranks", s->serial_ranks);
    json_bool(w, "fp8", s->fp8);
    json_bool(w, "fp8_step_times", in->calib.fp8);
    json_str(w, "last_layer", cli_last_layer_name(s->last_heads));
    json_num(w, "train_samples", s->train_samples > 0 ? s->train_samples : NAN);
    json_num(w, "price_per_gpu_hour", s->gpu_hour_price > 0 ? s->gpu_hour_price : NAN);
    json_end(w);
    cli_rows_json(w, rows, n);
}

/* The sweep and its outputs, after the flags and the inputs. */
static int whatif_sweep(whatif_opts *o, const resolve_inputs *in, int argc, char **argv)
{
    whatif_setup *s = &o->w.s;
    const char *csv = o->csv, *json = o->w.json;
    unpad_err err = {0};
    cli_setup_inputs(s, in, o->w.seed);
    s->layouts = o->lays.v;
    s->nlayouts = o->lays.n;
    if (cli_check_layouts("whatif", s->max_len, in, o->lays.v, o->lays.n) || cli_check_fp8("whatif", s->fp8, in))
        return 1;
    int n, merged, rc = 1;
    whatif_row *rows = whatif_rows_make(o, &n, &merged);
    if (!rows) {
        fprintf(stderr, "unpad whatif: out of memory\n");
        return 1;
    }
    cli_prov prov;
    char pc[8192];
    cli_prov_sampled(&prov, argc, argv, in, o->w.seed, pc, sizeof pc);
    cli_json jdoc = {0};
    cli_rows ro = {0};
    progress *prog = NULL;
    if (json && cli_json_open("whatif", json, &prov, &jdoc))
        goto out;
    if (progress_start("unpad whatif", "configurations", n, whatif_work(s, rows, n), progress_wanted(o->w.quiet),
                       &prog, &err)) {
        cli_error("whatif", &err);
        goto out;
    }
    ro = (cli_rows){.cmd = "whatif", .text = stdout, .progress = prog, .csv = csv, .json = json,
                    .prov_comment = pc, .train = s->train_samples > 0};
    if (cli_rows_open(&ro))
        goto out;
    s->progress = prog;
    s->row_done = cli_rows_done;
    s->row_ctx = &ro;
    whatif_print_title(o, in, &prov, rows, n, merged);
    int ran = whatif_run(s, rows, n, &err);
    progress_end(prog);
    prog = NULL;
    if (ran) {
        cli_error("whatif", &err);
        goto out;
    }
    whatif_print_notes(o, in, rows, n);
    if (json) {
        whatif_json(&jdoc.w, s, in, rows, n);
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
    free(rows);
    return rc;
}

int cmd_whatif(int argc, char **argv)
{
    whatif_opts o;
    int rc = whatif_parse(argc, argv, &o);
    if (rc < 0) {
        resolve_inputs in;
        memset(&in, 0, sizeof in);
        const char *outs[2] = {o.csv, o.w.json && strcmp(o.w.json, "-") ? o.w.json : NULL};
        o.w.rq.fp8 = o.w.s.fp8;
        o.w.rq.max_len = o.w.s.max_len;
        rc = cli_inputs_load("whatif", &o.w.rq, &in, 1) || cli_check_outputs("whatif", &in, NULL, 0, outs, 2)
                 ? 1 : whatif_sweep(&o, &in, argc, argv);
        resolve_inputs_free(&in);
    }
    cli_sweep_free(&o.w);
    cli_ints_free(&o.accum);
    return rc;
}
