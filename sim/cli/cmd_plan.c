/* cmd_plan.c — `unpad plan`: choose the balancing policy (or evaluate the one given) and the FMHA
 * grouping for a run, print what it buys against loader order, and write the plan file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "opts.h"
#include "layout.h"
#include "memory.h"
#include "resolve.h"
#include "group.h"
#include "plan.h"
#include "prov.h"
#include "rows.h"

#define PL(n) ((n) == 1 ? "" : "s") /* a plural's s */

const char cmd_plan_what[] = "choose balancing and FMHA grouping; write a plan file";

static void usage(FILE *f)
{
    char names[256];
    fprintf(f,
            "usage: unpad plan [--dist F] [--model F] [--hw F] [--calib F] [--gpus LIST] [--batch LIST]\n"
            "                  [--policy P|auto] [--count equal|free] [--steps K] [--seed S]\n"
            "                  [--tokens] [--streams S] [--granularity G] [--threads T] [--out plan.cfg]\n"
            "                  [--max-len N] [--layout LIST] [--accum K | --global-batch G]\n"
            "                  [--train-samples N [--price P] [--deadline H] [--budget B]]\n"
            "                  [--fp8 on|off] [--graphs on|off] [--last-layer heads|all] [--json F] [--quiet]\n"
            "  --dist F         sequence lengths, or a name in models/dists/ (default wiki512)\n"
            "  --model F        model config, or a name in models/ (default bert-large)\n"
            "  --hw F           hardware spec, or a name in models/hw/ (default h200-sxm)\n"
            "  --calib F        fitted coefficients, or a name in models/calib/ (default: <hw> if it exists)\n"
            "  --no-calib       the uncalibrated default coefficients instead\n"
            "  --faster L       what-if: make operators or classes F times as fast, L = NAME=F,...\n"
            "                   (fmha_bwd=1.3, gemm=1.1, overhead=2; docs/planning.md)\n"
            "  --hw-set L       what-if: the hardware spec's numbers, L = KEY=VALUE,...\n"
            "                   (gpus_per_node=4,node_bw_gbs=25: the keys of models/hw/*.cfg)\n"
            "  --gpus LIST      data-parallel GPUs, 1..65536, comma-separated (default 8); an item may\n"
            "                   be a range: A..B, A..B+K (step K), A..BxK (times K): 8..64x2\n"
            "  --batch LIST     sequences per GPU, 1..65536, comma-separated (default 56): one plan\n"
            "                   per GPU count and batch size\n"
            "  --accum K        gradient accumulation: each GPU runs K micro-batches of --batch a\n"
            "                   step (unpad-train --virtual-ranks K), 1..1024 (default 1)\n"
            "  --global-batch G sequences a step over all GPUs: for each --gpus count, the fastest\n"
            "                   --batch x --accum that fits the memory and trains G / gpus a GPU\n"
            "  --deadline H     with --train-samples: mark the plans that train them within H hours,\n"
            "                   and name the one of fewest GPU-hours among them\n"
            "  --budget B       with --train-samples and --price: mark the plans that cost at most B,\n"
            "                   and name the fastest of them\n"
            "  --policy P       %s, or auto: the lowest predicted step\n"
            "                   time (default auto; the policies are below)\n"
            "  --count C        equal (+-1 sequences per GPU) or free (default equal)\n"
            "  --steps K        sampled steps per configuration, 1..10000000 (default 1000, and for a\n"
            "                   configuration of more than 8,388 sequences a step as many as make\n"
            "                   8,388,608 sequences, at least 100)\n"
            "  --seed S         seed (default 1)\n"
            "  --tokens         balance tokens instead of the predicted per-sequence cost\n"
            "  --streams S      FMHA grouping: at most S CUDA streams, 1..%d (default 4)\n"
            "  --granularity G  FMHA grouping: cut only between lengths in different G-wide bins (default 1)\n"
            "  --threads T      worker threads, 0 = one per CPU (default 0)\n"
            "  --out F          write the plan file (for unpad-train --plan); with several\n"
            "                   configurations one file each, F's name + -<gpus>x<batch>\n"
            "                   (plan.cfg: plan-8x56.cfg, plan-16x56.cfg, ...)\n"
            "  --json F         write the plans as JSON (docs/json.md); F '-': only the JSON, on\n"
            "                   standard output\n"
            "  --quiet          no progress line on stderr (it appears only on a terminal)\n"
            "  --max-len N      predict with sequences truncated to N (at most the model's max_len)\n"
            "  --fp8 on|off     the trainer's --fp8 on (default off): its memory (FP8 weights, operand, E4M3\n"
            "                   FFN output), its step times from models/calib/<hw>-fp8.cfg where that\n"
            "                   exists (fitted on --fp8 on traces), else the bf16 products'\n"
            "  --graphs on|off  the trainer's --graphs on (default off): each pass one CUDA graph, no\n"
            "                   wait for the host (the calibration's graph_launch_us; docs/planning.md)\n"
            "  --last-layer heads|all  the trainer's --last-layer: heads (the default) runs the last\n"
            "                   layer after its attention on the rows the heads read only; all: on every token\n"
            "  --layout LIST    also predict the chosen policy in these layouts (padded, pad-longest,\n"
            "                   buckets=B1/B2/..., packed[:K]) beside the trainer's unpadded one (shown\n"
            "                   always; unpadded in the list adds nothing)\n",
            balance_policy_list(names, sizeof names, ", "), GROUP_MAX_STREAMS);
    cli_train_usage(f, 19);
    fprintf(f, "A batch whose trainer memory does not fit the hardware's is refused, with what it needs\n"
               "and the largest batch that fits. The balancing policies:\n");
    balance_policy_help_print(f, "  ");
}

/* The FMHA on a typical GPU batch (the distribution's quantiles), per step, all layers:
 * one launch shortest and longest first, the 128/256/384/512 buckets on 1 and s streams, the plan. */
typedef struct {
    double one_up_us, one_down_us, buckets1_us, buckets_us, plan_us;
    int buckets_streams;
} typical_fmha;

static int fmha_typical(const resolve_inputs *in, const whatif_setup *s, const unpad_plan *p,
                        typical_fmha *t, unpad_err *err)
{
    int batch = p->batch, L = in->model.layers, H = in->model.heads;
    int *tl = malloc((size_t)batch * sizeof *tl);
    if (!tl)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    whatif_typical_batch(&in->dist, batch, tl);
    static const int buckets[] = {128, 256, 384, 512};
    group_plan g1, gs, gp;
    int rc = group_plan_bounds(&in->hw, &in->calib, H, tl, batch, buckets, 4, 1, &g1, err);
    if (!rc)
        rc = group_plan_bounds(&in->hw, &in->calib, H, tl, batch, buckets, 4, s->max_streams, &gs,
                               err);
    if (!rc)
        rc = group_plan_bounds(&in->hw, &in->calib, H, tl, batch, p->fmha_bounds,
                               p->fmha_nb > 0 ? p->fmha_nb : 0, p->streams, &gp, err);
    if (rc) {
        free(tl);
        return rc;
    }
    t->one_up_us = L * group_one_launch_us(&in->hw, &in->calib, H, tl, batch);
    for (int i = 0, j = batch - 1; i < j; i++, j--) { /* longest first */
        int x = tl[i];
        tl[i] = tl[j];
        tl[j] = x;
    }
    t->one_down_us = L * group_one_launch_us(&in->hw, &in->calib, H, tl, batch);
    free(tl);
    t->buckets1_us = L * g1.total_us;
    t->buckets_us = L * gs.total_us;
    t->buckets_streams = gs.streams;
    t->plan_us = L * gp.total_us;
    return UNPAD_OK;
}

/* out with -<gpus>x<batch> before its extension: plan.cfg -> plan-8x56.cfg. */
static void plan_file_name(const char *out, const char *hw, int gpus, int batch, char *buf, size_t n)
{
    const char *slash = strrchr(out, '/'), *dot = strrchr(out, '.');
    size_t stem = dot && (!slash || dot > slash + 1) ? (size_t)(dot - out) : strlen(out);
    snprintf(buf, n, "%.*s-%s%s%dx%d%s", (int)stem, out, hw ? hw : "", hw ? "-" : "", gpus, batch, out + stem);
}

static void plan_json(json_w *w, const unpad_plan *p, const char *file, const typical_fmha *t,
                      const double train[3], double price, double deadline_h, double budget, const whatif_row *rows,
                      int n)
{
    json_obj(w, NULL);
    json_str(w, "hw", p->hw);
    json_str(w, "calibration", p->calib);
    json_num(w, "price_per_gpu_hour", price > 0 ? price : NAN);
    json_int(w, "gpus", p->gpus);
    json_int(w, "batch", p->batch);
    json_int(w, "accum", n > 0 && rows[0].accum > 1 ? rows[0].accum : 1);
    json_str(w, "file", file);
    json_str(w, "policy", balance_policy_name(p->policy));
    json_str(w, "count", balance_count_name(p->count));
    json_str(w, "weights", p->weights_tokens ? "tokens" : "cost");
    json_arr(w, "fmha_bounds");
    for (int i = 0; i < p->fmha_nb; i++)
        json_int(w, NULL, p->fmha_bounds[i]);
    json_end(w);
    json_int(w, "fmha_streams", p->streams);
    json_obj(w, "cost");
    json_num(w, "c0_us", p->cost.c0);
    json_num(w, "c1_us", p->cost.c1);
    json_num(w, "c2_us", p->cost.c2);
    json_end(w);
    json_num(w, "pred_step_us", p->pred_step_us);
    json_num(w, "pred_samples_per_s", p->pred_samples_per_s);
    json_num(w, "pred_imbalance", p->pred_imbalance);
    json_num(w, "pred_imbalance_p99", p->pred_imbalance_p99);
    json_num(w, "pred_idle", p->pred_idle);
    json_num(w, "none_step_us", p->none_step_us);
    json_num(w, "none_imbalance", p->none_imbalance);
    json_num(w, "speedup_over_none", p->pred_step_us > 0 ? p->none_step_us / p->pred_step_us : NAN);
    json_num(w, "pred_attn_us", p->pred_attn_us);
    json_num(w, "pred_attn_grouped_us", p->pred_attn_grouped_us);
    json_num(w, "pred_train_hours", train[0]);
    json_num(w, "pred_gpu_hours", train[1]);
    json_num(w, "pred_cost", train[2]);
    if (deadline_h > 0 && !isnan(train[0]))
        json_bool(w, "meets_deadline", train[0] <= deadline_h);
    else
        json_null(w, "meets_deadline");
    if (budget > 0 && !isnan(train[2]))
        json_bool(w, "within_budget", train[2] <= budget);
    else
        json_null(w, "within_budget");
    json_obj(w, "typical_batch_fmha");
    json_num(w, "one_launch_shortest_first_us", t->one_up_us);
    json_num(w, "one_launch_longest_first_us", t->one_down_us);
    json_num(w, "buckets_one_stream_us", t->buckets1_us);
    json_num(w, "buckets_us", t->buckets_us);
    json_int(w, "buckets_streams", t->buckets_streams);
    json_num(w, "plan_us", t->plan_us);
    json_end(w);
    json_arr(w, "candidates");
    for (int i = 0; i < n; i++)
        cli_row_json(w, NULL, &rows[i]);
    json_end(w);
    json_end(w);
}

/* One configuration: the plan, its table and summary, its file. */
static int plan_one(resolve_inputs *in, whatif_setup *s, int gpus, int batch, int accum, int policy,
                    balance_count count, const char *file, const char *prov_comment, json_w *w,
                    const layout *lay, int nlay, double deadline_h, double budget, whatif_row *chosen)
{
    unpad_plan p;
    whatif_row rows[BAL_POLICY_COUNT + 1];
    int n = 0;
    unpad_err err = {0};
    if (plan_make(s, gpus, batch, accum, policy, count, &p, rows, &n, &err))
        return cli_error("plan", &err);
    for (int i = 0; i < n; i++)
        if (rows[i].policy == p.policy)
            *chosen = rows[i];
    snprintf(p.provenance, sizeof p.provenance, "%s", prov_comment);
    char label[4400];
    snprintf(p.calib, sizeof p.calib, "%.255s", cli_calib_label(in, label, sizeof label));
    if (accum > 1)
        printf("\n%d GPU%s x %d micro-batches x %d sequences (%d sequences per GPU and step):\n", gpus, PL(gpus),
               accum, batch, accum * batch);
    else
        printf("\n%d GPU%s x %d sequences per GPU:\n", gpus, PL(gpus), batch);
    int with_train = s->train_samples > 0;
    whatif_print_table(stdout, rows, n, with_train);
    if (nlay > 0) { /* the chosen policy in the other layouts, beside the trainer's */
        layout all[16];
        whatif_row lrows[16];
        all[0] = (layout){.kind = LAYOUT_UNPADDED, .per_row = LAYOUT_PACK_DEFAULT};
        for (int l = 0; l < nlay; l++)
            all[l + 1] = lay[l];
        whatif_setup ls = *s;
        ls.layouts = all;
        ls.nlayouts = nlay + 1;
        ls.progress = NULL;
        for (int l = 0; l <= nlay; l++)
            lrows[l] = (whatif_row){.gpus = gpus, .batch = batch, .accum = accum, .policy = p.policy,
                                    .count = count, .layout = l};
        if (whatif_run(&ls, lrows, nlay + 1, &err))
            return cli_error("plan", &err);
        printf("\nthe policy %s in other length layouts (the plan is for the trainer's, unpadded):\n",
               balance_policy_name(p.policy));
        whatif_print_table(stdout, lrows, nlay + 1, with_train);
    }
    char groups[CFG_STR_LEN];
    group_bounds_format(p.fmha_bounds, p.fmha_nb, groups, sizeof groups);
    printf("\nplan: policy %s (%s), %s counts\n", balance_policy_name(p.policy),
           policy < 0 ? "auto: lowest predicted step time" : "as asked",
           balance_count_name(p.count));
    if (accum > 1)
        printf("  train it with unpad-train --batch %d --virtual-ranks %d --plan FILE on each of the %d GPU%s\n", batch,
               accum, gpus, PL(gpus));
    printf("  predicted step %.2f ms, %.0f samples/s, imbalance %.4f (p99 %.4f), idle %.2f%%\n",
           p.pred_step_us / 1e3, p.pred_samples_per_s, p.pred_imbalance, p.pred_imbalance_p99,
           100 * p.pred_idle);
    if (chosen->mem_tight)
        printf("  memory: %.2f of the %.2f GiB per GPU, under %.0f%% to spare (the model is within 0.4%% of the "
               "trainer's measured use; nothing else may hold the GPU)\n", chosen->mem_gib, in->hw.memory_gib,
               100 * MEMORY_TIGHT);
    printf("  against none (loader order): step %.2f ms, imbalance %.4f -> %.3fx the throughput\n",
           p.none_step_us / 1e3, p.none_imbalance,
           p.pred_step_us > 0 ? p.none_step_us / p.pred_step_us : 0);
    printf("  FMHA: slowest GPU's attention %.2f ms per step in loader order -> %.2f ms longest first "
           "with groups %s on %d stream%s (%.1f%% less)\n",
           p.pred_attn_us / 1e3, p.pred_attn_grouped_us / 1e3, groups, p.streams,
           p.streams > 1 ? "s" : "",
           p.pred_attn_us > 0 ? 100 * (1 - p.pred_attn_grouped_us / p.pred_attn_us) : 0);
    double train[3];
    whatif_train(s->train_samples, p.pred_samples_per_s, s->serial_ranks ? 1 : gpus, s->gpu_hour_price, &train[0],
                 &train[1], &train[2]);
    if (with_train) {
        char nsamples[64];
        printf("  to train %s samples: %.2f hours on %d GPU%s, %.1f GPU-hours",
               cli_count_format(s->train_samples, nsamples, sizeof nsamples), train[0], gpus, gpus > 1 ? "s" : "",
               train[1]);
        if (!isnan(train[2]))
            printf(train[2] < 100 ? ", cost %.2f at %g per GPU-hour" : ", cost %.0f at %g per GPU-hour", train[2],
                   s->gpu_hour_price);
        if (deadline_h > 0)
            printf("; %s the %g-hour deadline", train[0] <= deadline_h ? "within" : "PAST", deadline_h);
        if (budget > 0 && !isnan(train[2]))
            printf("; %s the budget of %g", train[2] <= budget ? "within" : "OVER", budget);
        printf("\n");
    }
    typical_fmha t = {0};
    if (fmha_typical(in, s, &p, &t, &err))
        return cli_error("plan", &err);
    printf("  FMHA on a typical GPU batch (the distribution's %d quantiles), per step (%d layers, "
           "fwd + bwd):\n", batch, in->model.layers);
    printf("    one launch %.2f ms shortest first, %.2f ms longest first | buckets 128/256/384/512 "
           "on 1 stream %.2f ms, on %d stream%s %.2f ms | plan %.2f ms\n",
           t.one_up_us / 1e3, t.one_down_us / 1e3, t.buckets1_us / 1e3, t.buckets_streams,
           t.buckets_streams > 1 ? "s" : "", t.buckets_us / 1e3, t.plan_us / 1e3);
    if (file) {
        if (plan_write(file, &p, &err))
            return cli_error("plan", &err);
        printf("  wrote %s\n", file);
    }
    if (w)
        plan_json(w, &p, file, &t, train, s->gpu_hour_price, deadline_h, budget, rows, n);
    return 0;
}

/* --policy P|auto into an int (-1: auto). */
static int opt_policy(const char *cmd, const char *flag, const char *val, void *dst)
{
    if (!strcmp(val, "auto")) {
        *(int *)dst = -1;
        return 0;
    }
    balance_policy pv;
    unpad_err pe = {0};
    if (balance_policy_parse(val, &pv, &pe)) {
        fprintf(stderr, "unpad %s: %s: %s%s\n", cmd, flag, pe.msg, strcmp(val, "pack") ? ", or auto" : "");
        return 1;
    }
    *(int *)dst = (int)pv;
    return 0;
}

#define PLAN_MAX_HW 8

/* The flags: the configurations planned, and the sweep's settings (in w.s). */
typedef struct {
    cli_sweep w;
    int policy;           /* -1: auto */
    balance_count count;
    cli_layouts lays;     /* the other layouts the chosen policy is predicted in */
    const char *out;
    int accum;            /* micro-batches per GPU and step */
    int global;           /* --global-batch: sequences a step over all GPUs (0: --batch, --accum) */
    double deadline;      /* --deadline: hours to train --train-samples in (0: none) */
    double budget;        /* --budget: the most a run may cost at --price (0: none) */
    char hwlist[1024];    /* --hw A,B,...: the hardware compared (hw[0..nhw)) */
    const char *hw[PLAN_MAX_HW];
    int nhw;
} plan_opts;

static int plan_opts_parse(int argc, char **argv, plan_opts *o)
{
    memset(o, 0, sizeof *o);
    cli_sweep_init(&o->w);
    o->policy = -1;
    o->count = BAL_EQUAL;
    o->accum = 1;
    const cli_opt opts[] = {
        CLI_OPTS_SWEEP(&o->w),
        CLI_OPT_INT("accum", &o->accum, 1, WHATIF_ACCUM_MAX),
        CLI_OPT_INT("global-batch", &o->global, 1, 1 << 24),
        CLI_OPT_DOUBLE("deadline", &o->deadline, 1e-3, 1e6),
        CLI_OPT_DOUBLE("budget", &o->budget, 1e-6, 1e15),
        CLI_OPT_CALL("policy", opt_policy, &o->policy),
        CLI_OPT_CALL("count", cli_parse_count, &o->count),
        CLI_OPT_OUT_FILE("out", &o->out, "a plan file per configuration, named after OUT"),
        CLI_OPT_LAYOUTS("layout", &o->lays, 15),
    };
    int rc = cli_opts_parse("plan", argc, argv, 1, opts, CLI_NOPTS(opts), usage, NULL);
    if (rc >= 0)
        return rc;
    if (o->global && (o->w.batch.v || o->accum > 1)) {
        fprintf(stderr, "unpad plan: --global-batch chooses --batch and --accum: give it or them\n");
        return 2;
    }
    if (o->deadline > 0 && !(o->w.s.train_samples > 0)) {
        fprintf(stderr, "unpad plan: --deadline needs --train-samples (the hours are those of training them)\n");
        return 2;
    }
    if (o->budget > 0 && (!(o->w.s.train_samples > 0) || !o->w.prices.n)) {
        fprintf(stderr, "unpad plan: --budget needs --train-samples and --price (the cost is that of training them)\n");
        return 2;
    }
    if (cli_sweep_check("plan", &o->w, 1))
        return 2;
    /* unpadded is the plan's own layout, in the table already: the list is of the others */
    int kept = 0;
    for (int l = 0; l < o->lays.n; l++)
        if (o->lays.v[l].kind != LAYOUT_UNPADDED)
            o->lays.v[kept++] = o->lays.v[l];
    o->lays.n = kept;
    /* --hw A,B: one plan per hardware too */
    o->hw[0] = o->w.rq.hw;
    o->nhw = 1;
    if (o->w.rq.hw && strchr(o->w.rq.hw, ',')) {
        if (unpad_list_has_empty(o->w.rq.hw) || strlen(o->w.rq.hw) >= sizeof o->hwlist) {
            fprintf(stderr, "unpad plan: --hw: '%s' is not a list of hardware specs A,B,...\n", o->w.rq.hw);
            return 2;
        }
        snprintf(o->hwlist, sizeof o->hwlist, "%s", o->w.rq.hw);
        o->nhw = 0;
        char *save = NULL;
        for (char *t = strtok_r(o->hwlist, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (o->nhw == PLAN_MAX_HW) {
                fprintf(stderr, "unpad plan: --hw: more than %d hardware specs\n", PLAN_MAX_HW);
                return 2;
            }
            for (int k = 0; k < o->nhw; k++)
                if (!strcmp(o->hw[k], t)) {
                    fprintf(stderr, "unpad plan: --hw: %s is asked twice\n", t);
                    return 2;
                }
            o->hw[o->nhw++] = t;
        }
        if (o->w.rq.calib) {
            fprintf(stderr, "unpad plan: --calib names one hardware's coefficients: with several --hw each takes "
                            "models/calib/<hw>.cfg (or --no-calib)\n");
            return 2;
        }
    }
    if (o->w.prices.n > 1 && o->w.prices.n != o->nhw) {
        fprintf(stderr, "unpad plan: --price: %d prices for %d hardware specs (give one, or one per --hw)\n",
                o->w.prices.n, o->nhw);
        return 2;
    }
    for (int i = 0; o->global && i < o->w.gpus.n; i++)
        if (o->global % o->w.gpus.v[i]) {
            fprintf(stderr, "unpad plan: --global-batch %d is not a multiple of %d GPUs (the trainer gives every GPU "
                            "the same number of sequences a step)\n", o->global, o->w.gpus.v[i]);
            return 2;
        }
    return -1;
}

/* The plan file of configuration (hardware h, gpus, batch): --out itself for one configuration, else
 * with -<gpus>x<batch> (several hardware: -<hw>-<gpus>x<batch>) before its extension. */
static void plan_file_of(const plan_opts *o, const char *hw, int gpus, int batch, char *buf, size_t n)
{
    if (o->nhw > 1 || o->w.gpus.n * (o->global ? 1 : o->w.batch.n) > 1)
        plan_file_name(o->out, o->nhw > 1 ? hw : NULL, gpus, batch, buf, n);
    else
        snprintf(buf, n, "%s", o->out);
}

/* Before any work: no plan file or --json over an input (of any hardware) or over each other. */
static int plan_check_outputs(const plan_opts *o, const resolve_inputs *in)
{
    int ng = o->w.gpus.n, nb = o->global ? 1 : o->w.batch.n, no = 0, nh = o->nhw;
    char (*names)[4200] = calloc((size_t)nh * ng * nb + 1, sizeof *names);
    const char **outs = calloc((size_t)nh * ng * nb + 1, sizeof *outs);
    if (!names || !outs) {
        free(names);
        free(outs);
        fprintf(stderr, "unpad plan: out of memory\n");
        return 1;
    }
    for (int h = 0; o->out && h < nh; h++)
        for (int i = 0; i < ng; i++)
            for (int b = 0; b < nb; b++) {
                int g = o->w.gpus.v[i];
                plan_file_of(o, in[h].hw.name, g, o->global ? o->global / g : o->w.batch.v[b], names[no],
                             sizeof names[no]);
                outs[no] = names[no];
                no++;
            }
    outs[no++] = o->w.json && strcmp(o->w.json, "-") ? o->w.json : NULL;
    const char *more[2 * PLAN_MAX_HW];
    int nm = 0;
    for (int h = 1; h < nh; h++) {
        more[nm++] = in[h].hw_path;
        more[nm++] = in[h].calib_path[0] ? in[h].calib_path : NULL;
    }
    int bad = cli_check_outputs("plan", &in[0], more, nm, outs, no);
    free(names);
    free(outs);
    return bad;
}

static void plan_print_title(const plan_opts *o, const resolve_inputs *in, const cli_prov *prov)
{
    const whatif_setup *s = &o->w.s;
    printf("unpad plan: %s on ", in[0].model.name);
    for (int h = 0; h < o->nhw; h++)
        printf("%s%s", h ? ", " : "", in[h].hw.name);
    printf(", %s counts, %d sampled steps per candidate, balancing %s; %s\n", balance_count_name(o->count), s->steps,
           s->weights_tokens ? "tokens" : "the predicted per-sequence cost", cli_last_layer_text(s->last_heads));
    cli_prov_print(stdout, prov);
    int ng = o->w.gpus.n, nb = o->global ? 1 : o->w.batch.n, *g = malloc(3 * (size_t)ng * nb * sizeof *g);
    if (g) { /* the configurations that sample fewer steps (--global-batch: its sequences a step) */
        for (int i = 0, k = 0; i < ng; i++)
            for (int b = 0; b < nb; b++, k++) {
                g[k] = o->w.gpus.v[i];
                g[ng * nb + k] = o->global ? o->global / o->w.gpus.v[i] : o->w.batch.v[b];
                g[2 * ng * nb + k] = o->global ? 1 : o->accum;
            }
        cli_steps_note(stdout, s, g, g + ng * nb, g + 2 * ng * nb, ng * nb);
        cli_graphs_note(stdout, in, g, ng * nb, 0);
        free(g);
    }
    if (s->max_len)
        printf("  lengths truncated to %d (the trainer truncates nothing: give it data made at that "
               "length)\n", s->max_len);
    for (int h = 0; s->fp8 && h < o->nhw; h++)
        printf("  %s: memory of the trainer with --fp8 on; %s\n", in[h].hw.name, cli_fp8_times(&in[h]));
}

/* The document's "config", and "plans" opened for plan_one's objects. */
static void plan_json_open(json_w *w, const plan_opts *o)
{
    const whatif_setup *s = &o->w.s;
    json_obj(w, "config");
    json_str(w, "policy", o->policy < 0 ? "auto" : balance_policy_name(o->policy));
    json_str(w, "count", balance_count_name(o->count));
    json_int(w, "steps", s->steps);
    if (s->seq_budget > 0)
        json_num(w, "sequence_budget", (double)s->seq_budget);
    else
        json_null(w, "sequence_budget");
    json_str(w, "weights", s->weights_tokens ? "tokens" : "cost");
    json_int(w, "max_streams", s->max_streams);
    json_int(w, "granularity", s->granularity);
    json_int(w, "accum", o->accum);
    json_bool(w, "fp8", s->fp8);
    json_str(w, "last_layer", cli_last_layer_name(s->last_heads));
    if (o->global)
        json_int(w, "global_batch", o->global);
    else
        json_null(w, "global_batch");
    json_num(w, "train_samples", s->train_samples > 0 ? s->train_samples : NAN);
    json_num(w, "price_per_gpu_hour", o->w.prices.n == 1 ? o->w.prices.v[0] : NAN);
    json_num(w, "deadline_hours", o->deadline > 0 ? o->deadline : NAN);
    json_num(w, "budget", o->budget > 0 ? o->budget : NAN);
    json_end(w);
    json_arr(w, "plans");
}

/* --global-batch: the micro-batch and accumulation of the fastest way to train global / gpus
 * sequences per GPU that fits, with the table of the ways tried. */
static int plan_choose_split(const whatif_setup *s, int gpus, const plan_opts *o, int *batch, int *accum)
{
    enum { MAX_WAYS = 6 };
    whatif_row rows[MAX_WAYS];
    int n = 0, per = o->global / gpus;
    unpad_err err = {0};
    whatif_setup ws = *s;
    ws.progress = NULL;
    if (plan_split(&ws, gpus, per, o->policy, o->count, rows, MAX_WAYS, &n, &err))
        return cli_error("plan", &err);
    printf("\n%d GPUs x %d sequences (global batch %d): the ways that fit, as micro-batches x accumulation (%s):\n",
           gpus, per, o->global, balance_policy_name(rows[0].policy));
    whatif_print_table(stdout, rows, n, s->train_samples > 0);
    printf("  chosen: --batch %d --accum %d, the highest samples/s\n", rows[0].batch, rows[0].accum);
    *batch = rows[0].batch;
    *accum = rows[0].accum;
    return 0;
}

/* The configurations side by side (each its chosen policy, hw[i] the hardware of r[i]), the fastest
 * and with --train-samples the fewest GPU-hours, overall and within --deadline. */
static void plan_summary(const plan_opts *o, const whatif_row *r, const char *const *hw, int n)
{
    const whatif_setup *s = &o->w.s;
    int train = s->train_samples > 0, cost = train && o->w.prices.n > 0;
    printf("\nthe plans side by side (each with its chosen policy):\n");
    printf("%-16s %5s %7s %-10s %9s %10s %8s %10s", "hw", "gpus", "batch", "policy", "step ms", "samples/s", "imb mean",
           "memory GiB");
    if (train)
        printf(" %9s %9s%s", "train h", "GPU-h", cost ? "        cost" : "");
    printf("\n");
    int fastest = 0, cheapest = -1, within = -1, afford = -1;
    for (int i = 0; i < n; i++) {
        char batch[32], mem[32];
        if (r[i].accum > 1)
            snprintf(batch, sizeof batch, "%dx%d", r[i].batch, r[i].accum);
        else
            snprintf(batch, sizeof batch, "%d", r[i].batch);
        snprintf(mem, sizeof mem, "%.1f%s", r[i].mem_gib, !r[i].mem_fits ? " NO" : r[i].mem_tight ? " TIGHT" : "");
        printf("%-16s %5d %7s %-10s %9.2f %10.1f %8.4f %10s", hw[i], r[i].gpus, batch,
               balance_policy_name(r[i].policy), r[i].step_us / 1e3, r[i].samples_per_s, r[i].imbalance_mean, mem);
        if (train) {
            printf(" %9.2f %9.1f", r[i].train_hours, r[i].gpu_hours);
            if (cost)
                printf(r[i].cost < 100 ? " %11.2f" : " %11.0f", r[i].cost);
            if (o->deadline > 0)
                printf("%s", r[i].train_hours <= o->deadline ? "" : "  (past the deadline)");
        }
        printf("\n");
        fastest = r[i].samples_per_s > r[fastest].samples_per_s ? i : fastest;
        /* cheapest: by cost where every hardware has its price, else by GPU-hours */
        double ci = cost ? r[i].cost : r[i].gpu_hours;
        if (train && (cheapest < 0 || ci < (cost ? r[cheapest].cost : r[cheapest].gpu_hours)))
            cheapest = i;
        if (train && o->deadline > 0 && r[i].train_hours <= o->deadline &&
            (within < 0 || ci < (cost ? r[within].cost : r[within].gpu_hours)))
            within = i;
        if (cost && o->budget > 0 && r[i].cost <= o->budget &&
            (afford < 0 || r[i].samples_per_s > r[afford].samples_per_s))
            afford = i;
    }
    const char *by = cost ? "cheapest" : "fewest GPU-hours";
    printf("  fastest: %s, %d GPU%s x %d", hw[fastest], r[fastest].gpus, PL(r[fastest].gpus), r[fastest].batch);
    if (r[fastest].accum > 1)
        printf(" x %d micro-batches", r[fastest].accum);
    printf(", %.0f samples/s\n", r[fastest].samples_per_s);
    if (cheapest >= 0)
        printf("  %s: %s, %d GPU%s (%.1f GPU-hours, %.2f hours%s)\n", by, hw[cheapest], r[cheapest].gpus,
               PL(r[cheapest].gpus),
               r[cheapest].gpu_hours, r[cheapest].train_hours, cost ? ", at the prices given" : "");
    if (o->deadline > 0 && within >= 0)
        printf("  %s within %g hour%s: %s, %d GPU%s (%.1f GPU-hours, %.2f hours)\n", by, o->deadline,
               o->deadline == 1 ? "" : "s", hw[within], r[within].gpus, PL(r[within].gpus), r[within].gpu_hours,
               r[within].train_hours);
    else if (o->deadline > 0)
        printf("  none of them trains %.4g samples within %g hour%s\n", s->train_samples, o->deadline,
               o->deadline == 1 ? "" : "s");
    if (o->budget > 0 && afford >= 0)
        printf("  fastest within a budget of %g: %s, %d GPU%s (%.2f hours, cost %.0f)\n", o->budget, hw[afford],
               r[afford].gpus, PL(r[afford].gpus), r[afford].train_hours, r[afford].cost);
    else if (o->budget > 0)
        printf("  none of them trains %.4g samples within a budget of %g\n", s->train_samples, o->budget);
}

/* 0 when every configuration asked for fits its hardware's memory; else each that does not is
 * named on stderr and nothing is planned, printed or written. (--global-batch chooses its own
 * micro-batches that fit.) */
static int plan_check_fits(plan_opts *o, const resolve_inputs *in)
{
    whatif_setup *s = &o->w.s;
    int bad = 0;
    for (int h = 0; !o->global && h < o->nhw; h++) {
        cli_setup_inputs(s, &in[h], o->w.seed);
        for (int i = 0; i < o->w.gpus.n; i++)
            for (int b = 0; b < o->w.batch.n; b++) {
                unpad_err err = {0};
                if (plan_check_fit(s, o->w.gpus.v[i], o->w.batch.v[b], o->accum, o->count, &err) == UNPAD_OK)
                    continue;
                fprintf(stderr, "unpad plan: %s, %d GPU%s x %d: %s\n", in[h].hw.name, o->w.gpus.v[i],
                        PL(o->w.gpus.v[i]), o->w.batch.v[b], err.msg);
                bad++;
            }
    }
    if (bad)
        fprintf(stderr, "unpad plan: %d configuration%s do%s not fit: nothing planned or written (unpad whatif "
                "compares every configuration, fitting or not)\n", bad, bad > 1 ? "s" : "", bad > 1 ? "" : "es");
    return bad > 0;
}

/* Every hardware's and configuration's plan and the outputs, after the flags and the inputs (in[h]
 * for o->hw[h]). */
static int plan_all(plan_opts *o, resolve_inputs *in, int argc, char **argv)
{
    whatif_setup *s = &o->w.s;
    int ng = o->w.gpus.n, nb = o->w.batch.n, nh = o->nhw;
    unpad_err err = {0};
    for (int h = 0; h < nh; h++)
        if (cli_check_layouts("plan", s->max_len, &in[h], o->lays.v, o->lays.n) ||
            cli_check_fp8("plan", s->fp8, &in[h]))
            return 1;
    if (plan_check_fits(o, in))
        return 1;
    cli_prov prov;
    char pc[sizeof ((unpad_plan *)0)->provenance];
    cli_prov_sampled(&prov, argc, argv, &in[0], o->w.seed, pc, sizeof pc);
    char hws[1024] = "", hw_paths[4 * 1100] = "", cals[256] = "", cal_paths[4 * 1100] = "";
    if (nh > 1) { /* the provenance of several: comma lists in the order of --hw */
        for (int h = 0; h < nh; h++) {
            const char *sep = h ? "," : "";
            snprintf(hws + strlen(hws), sizeof hws - strlen(hws), "%s%s", sep, in[h].hw.name);
            snprintf(hw_paths + strlen(hw_paths), sizeof hw_paths - strlen(hw_paths), "%s%s", sep, in[h].hw_path);
            snprintf(cals + strlen(cals), sizeof cals - strlen(cals), "%s%s", sep,
                     calib_source_name(in[h].calib_from));
            snprintf(cal_paths + strlen(cal_paths), sizeof cal_paths - strlen(cal_paths), "%s%s", sep,
                     in[h].calib_path[0] ? in[h].calib_path : "-");
        }
        prov.hw = hws;
        prov.hw_path = hw_paths;
        prov.calibration = cals;
        prov.calibration_path = cal_paths;
        cli_prov_comment(&prov, pc, sizeof pc);
    }
    cli_json jdoc = {0};
    progress *prog = NULL;
    whatif_row *chosen = NULL;
    const char **chosen_hw = NULL;
    int rc = 1;
    if (o->w.json && cli_json_open("plan", o->w.json, &prov, &jdoc))
        goto out;
    /* Progress over every candidate row of every configuration (plan_make's rows: none, and the
     * policy asked or every other). */
    int per = o->policy < 0 ? BAL_POLICY_COUNT : o->policy == BAL_NONE ? 1 : 2;
    long long work = 0;
    if (o->global) /* the ways to split, then the plan of the fastest: about twice the plan's work */
        nb = 1;
    for (int i = 0; i < ng; i++)
        for (int b = 0; b < nb; b++) {
            long long seqs = o->global ? 2LL * o->global : (long long)o->w.gpus.v[i] * o->accum * o->w.batch.v[b];
            work += (long long)nh * per * whatif_config_steps(s, (long)(o->global ? o->global : seqs)) * seqs;
        }
    if (progress_start("unpad plan", "candidates", (long long)nh * per * ng * nb, work, progress_wanted(o->w.quiet),
                       &prog, &err)) {
        cli_error("plan", &err);
        goto out;
    }
    s->progress = prog;
    plan_print_title(o, in, &prov);
    if (o->w.json)
        plan_json_open(&jdoc.w, o);
    chosen = calloc((size_t)nh * ng * nb, sizeof *chosen);
    chosen_hw = calloc((size_t)nh * ng * nb, sizeof *chosen_hw);
    if (!chosen || !chosen_hw) {
        fprintf(stderr, "unpad plan: out of memory\n");
        goto out;
    }
    int k = 0;
    for (int h = 0; h < nh; h++) {
        cli_setup_inputs(s, &in[h], o->w.seed);
        s->gpu_hour_price = o->w.prices.n > 1 ? o->w.prices.v[h] : o->w.prices.n ? o->w.prices.v[0] : 0;
        if (nh > 1) {
            char label[4400];
            printf("\n== %s: %s", in[h].hw.name, cli_calib_label(&in[h], label, sizeof label));
            if (s->gpu_hour_price > 0)
                printf("; %g per GPU-hour", s->gpu_hour_price);
            printf("\n");
        }
        for (int i = 0; i < ng; i++)
            for (int b = 0; b < nb; b++, k++) {
                char file[4200];
                int g = o->w.gpus.v[i], batch = o->global ? o->global / g : o->w.batch.v[b], accum = o->accum;
                if (o->global && plan_choose_split(s, g, o, &batch, &accum))
                    goto out;
                if (o->out)
                    plan_file_of(o, in[h].hw.name, g, o->global ? o->global / g : batch, file, sizeof file);
                if (plan_one(&in[h], s, g, batch, accum, o->policy, o->count, o->out ? file : NULL, pc,
                             o->w.json ? &jdoc.w : NULL, o->lays.v, o->lays.n, o->deadline, o->budget, &chosen[k]))
                    goto out;
                chosen_hw[k] = in[h].hw.name;
            }
    }
    if (k > 1)
        plan_summary(o, chosen, chosen_hw, k);
    progress_end(prog);
    prog = NULL;
    if (!o->out)
        printf("  (no --out: plan not written)\n");
    if (o->w.json) {
        json_end(&jdoc.w);
        if (cli_json_close("plan", &jdoc))
            goto out;
        if (!jdoc.to_stdout)
            printf("  wrote %s\n", o->w.json);
    }
    rc = 0;
out:
    free(chosen);
    free(chosen_hw);
    progress_end(prog);
    cli_json_abandon(&jdoc);
    return rc;
}

int cmd_plan(int argc, char **argv)
{
    plan_opts o;
    int rc = plan_opts_parse(argc, argv, &o);
    if (rc < 0) {
        resolve_inputs in[PLAN_MAX_HW];
        memset(in, 0, sizeof in);
        rc = 0;
        for (int h = 0; h < o.nhw && !rc; h++) {
            resolve_req rq = o.w.rq;
            rq.hw = o.hw[h];
            rq.fp8 = o.w.s.fp8;
            rq.max_len = o.w.s.max_len;
            rc = cli_inputs_load("plan", &rq, &in[h], 1);
        }
        rc = rc || plan_check_outputs(&o, in) ? 1 : plan_all(&o, in, argc, argv);
        for (int h = 0; h < o.nhw; h++)
            resolve_inputs_free(&in[h]);
    }
    cli_sweep_free(&o.w);
    return rc;
}
