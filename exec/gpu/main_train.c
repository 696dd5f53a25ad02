/* main_train.c — `unpad-train`: unpadded BERT pre-training on one GPU (issue 5), with virtual ranks
 * (micro-batches with gradient accumulation, each timed as if it were its own GPU), checkpoints
 * that resume exactly, per-operator traces, evaluation, and tensor dumps for the peer comparison. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "common.h"
#include "dist.h"
#include "gpu/bert.h"
#include "balance.h"
#include "calib.h"
#include "cost.h"
#include "gpu/ckpt.h"
#include "gpu/comm.h"
#include "gpu/dp.h"
#include "gpu/dump.h"
#include "gpu/gradsync.h"
#include "gpu/optrace.h"
#include "gpu/source.h"
#include "group.h"
#include "model.h"
#include "online.h"
#include "ops.h"
#include "plan.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: unpad-train --model F (--data F | --synthetic) --batch B --steps N [options]\n"
            "  --model F          model config (models/bert-large.cfg, ...)\n"
            "  --data F           shard file or folder made by unpad-data\n"
            "  --synthetic        random tokens, lengths drawn from --dist\n"
            "  --dist F           length distribution for --synthetic (default models/dists/wiki512.csv)\n"
            "  --batch B          sequences per (virtual) rank and step\n"
            "  --steps N          total steps of the schedule\n"
            "  --lr X             peak learning rate (4.25e-4)\n"
            "  --warmup-steps K   linear warm-up steps (0), then polynomial decay (power 1) to 0\n"
            "  --weight-decay X   LAMB decoupled weight decay (0.01)\n"
            "  --max-grad-norm X  global gradient clipping norm (1.0)\n"
            "  --seed S           initialisation, data order and dropout (1)\n"
            "  --no-dropout       no dropout (the peer comparison)\n"
            "  --attn-dropout P   attention-probability dropout instead of the model config's\n"
            "  --gelu tanh|erf    GELU form: tanh in the GEMM epilogue (default, faster) or erf\n"
            "  --virtual-ranks K  K micro-batches per step, accumulated (each timed as its own rank)\n"
            "  --policy P         balance every step's global batch over the (virtual) ranks:\n"
            "                     none | sort-deal | lpt | kk | pack (default: no balancing, loader order)\n"
            "  --count C          equal | free sequence counts per rank (equal)\n"
            "  --plan F           take policy and count from a plan written by 'unpad plan'\n"
            "  --calib F          cost-model coefficients for the balanced cost and the FMHA grouping\n"
            "                     (default: models/calib/<hw>.cfg when it exists, else the defaults)\n"
            "  --no-calib         the uncalibrated default coefficients even where that file exists\n"
            "  --calibrate-online refit the balanced per-sequence cost every step from the measured\n"
            "                     per-rank compute times of the last --online-window W steps (8)\n"
            "  --fmha-groups G    attention in length groups, one launch each: auto (planned every\n"
            "                     micro-batch) | none (one launch; the default) | 128,256,384 (fixed)\n"
            "  --streams S        CUDA streams for the FMHA groups (1..8; default the plan's, else 2)\n"
            "  --bucket-mb X      gradient all-reduce buckets of X MB, overlapped with backward (32);\n"
            "                     0: one all-reduce after backward\n"
            "  --nproc N          start N ranks (one GPU each) and supervise them; with N = 1 the\n"
            "                     single rank still goes through NCCL (or launch with mpirun -np N)\n"
            "  --log-every k      progress line every k steps (10)\n"
            "  --eval F           held-out shard; --eval-every k (0: at the end only), --eval-batches n (20)\n"
            "  --save DIR         checkpoint every --save-every k steps (0: at the end only) and at the end\n"
            "  --resume DIR       continue from DIR/ckpt.bin (same model, batch and seed)\n"
            "  --trace F          per-operator trace rows (CSV); --trace-json F: Chrome trace events\n"
            "  --trace-steps a:b  steps traced (default all when tracing)\n"
            "  --hw F             hardware spec naming the trace rows (models/hw/h200-sxm.cfg)\n"
            "  --dump-weights F   the weights before step 1 (the working copy's values, fp32 file)\n"
            "  --dump-grads F     the gradients, losses (and with one rank the batch) of the first step\n"
            "  --precision P      bf16 (default: bf16 activations and weights, fp32 accumulation, master\n"
            "                     weights and optimizer) | fp32 (everything fp32, GEMMs without TF32, a\n"
            "                     plain FMHA: slow, for tight checks); runs bin/unpad-train-fp32\n"
            "  --fp32             the same as --precision fp32\n");
}

typedef struct {
    const char *model, *data, *dist, *eval, *save, *resume, *trace, *trace_json, *hw;
    const char *dump_w, *dump_g, *policy, *count, *plan, *calib, *groups;
    const char *precision; /* bf16 | fp32: the build the run needs */
    int nproc, streams, no_calib, online, online_window;
    double bucket_mb;
    int synthetic, batch, steps, warmup, vranks, log_every, eval_every, eval_batches, save_every;
    int no_dropout, gelu_erf, trace_a, trace_b;
    double lr, wd, max_norm;
    double attn_dropout; /* --attn-dropout; < 0: the model config's */
    long seed;
} train_args;

static int arg_int(const char *flag, const char *v, long lo, long hi, int *out)
{
    long x;
    if (unpad_parse_long(v, &x) || x < lo || x > hi) {
        fprintf(stderr, "unpad-train: %s: '%s' is not an integer in [%ld, %ld]\n", flag, v, lo, hi);
        return 1;
    }
    *out = (int)x;
    return 0;
}

static int arg_double(const char *flag, const char *v, double lo, double hi, double *out)
{
    double x;
    if (unpad_parse_double(v, &x) || !(x >= lo && x <= hi)) {
        fprintf(stderr, "unpad-train: %s: '%s' is not a number in [%g, %g]\n", flag, v, lo, hi);
        return 1;
    }
    *out = x;
    return 0;
}

static int parse_args(int argc, char **argv, train_args *a)
{
    enum { O_MODEL = 256, O_DATA, O_SYN, O_DIST, O_BATCH, O_STEPS, O_LR, O_WARM, O_WD, O_NORM, O_SEED,
           O_NODROP, O_GELU, O_VR, O_LOG, O_EVAL, O_EVERY, O_EBATCH, O_SAVE, O_SEVERY, O_RESUME,
           O_TRACE, O_TJSON, O_TSTEPS, O_HW, O_DW, O_DG, O_FP32, O_POLICY, O_COUNT, O_PLAN, O_CALIB,
           O_NPROC, O_GROUPS, O_STREAMS, O_BUCKET, O_NOCALIB, O_ONLINE, O_OWIN, O_PREC, O_ADROP, O_HELP };
    static const struct option opts[] = {
        {"model", 1, 0, O_MODEL}, {"data", 1, 0, O_DATA}, {"synthetic", 0, 0, O_SYN},
        {"dist", 1, 0, O_DIST}, {"batch", 1, 0, O_BATCH}, {"steps", 1, 0, O_STEPS}, {"lr", 1, 0, O_LR},
        {"warmup-steps", 1, 0, O_WARM}, {"weight-decay", 1, 0, O_WD}, {"max-grad-norm", 1, 0, O_NORM},
        {"seed", 1, 0, O_SEED}, {"no-dropout", 0, 0, O_NODROP}, {"gelu", 1, 0, O_GELU},
        {"virtual-ranks", 1, 0, O_VR}, {"log-every", 1, 0, O_LOG}, {"eval", 1, 0, O_EVAL},
        {"eval-every", 1, 0, O_EVERY}, {"eval-batches", 1, 0, O_EBATCH}, {"save", 1, 0, O_SAVE},
        {"save-every", 1, 0, O_SEVERY}, {"resume", 1, 0, O_RESUME}, {"trace", 1, 0, O_TRACE},
        {"trace-json", 1, 0, O_TJSON}, {"trace-steps", 1, 0, O_TSTEPS}, {"hw", 1, 0, O_HW},
        {"dump-weights", 1, 0, O_DW}, {"dump-grads", 1, 0, O_DG}, {"fp32", 0, 0, O_FP32},
        {"policy", 1, 0, O_POLICY}, {"count", 1, 0, O_COUNT}, {"plan", 1, 0, O_PLAN},
        {"calib", 1, 0, O_CALIB}, {"nproc", 1, 0, O_NPROC}, {"fmha-groups", 1, 0, O_GROUPS},
        {"streams", 1, 0, O_STREAMS}, {"bucket-mb", 1, 0, O_BUCKET}, {"no-calib", 0, 0, O_NOCALIB},
        {"calibrate-online", 0, 0, O_ONLINE}, {"online-window", 1, 0, O_OWIN}, {"precision", 1, 0, O_PREC},
        {"attn-dropout", 1, 0, O_ADROP}, {"help", 0, 0, O_HELP}, {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    a->lr = 4.25e-4;
    a->precision = UNPAD_PRECISION;
    a->wd = 0.01;
    a->max_norm = 1.0;
    a->seed = 1;
    a->vranks = 1;
    a->log_every = 10;
    a->eval_batches = 20;
    a->trace_a = 1;
    a->trace_b = 1 << 30;
    a->hw = "models/hw/h200-sxm.cfg";
    a->bucket_mb = 32;
    a->online_window = 8;
    a->attn_dropout = -1;
    int c, bad = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case O_MODEL: a->model = optarg; break;
        case O_DATA: a->data = optarg; break;
        case O_SYN: a->synthetic = 1; break;
        case O_DIST: a->dist = optarg; break;
        case O_BATCH: bad |= arg_int("--batch", optarg, 1, 65535, &a->batch); break;
        case O_STEPS: bad |= arg_int("--steps", optarg, 1, 1000000000, &a->steps); break;
        case O_LR: bad |= arg_double("--lr", optarg, 0, 1, &a->lr); break;
        case O_WARM: bad |= arg_int("--warmup-steps", optarg, 0, 1000000000, &a->warmup); break;
        case O_WD: bad |= arg_double("--weight-decay", optarg, 0, 1, &a->wd); break;
        case O_NORM: bad |= arg_double("--max-grad-norm", optarg, 1e-6, 1e9, &a->max_norm); break;
        case O_SEED: {
            int s;
            bad |= arg_int("--seed", optarg, 0, 2147483647, &s);
            a->seed = s;
            break;
        }
        case O_NODROP: a->no_dropout = 1; break;
        case O_ADROP: bad |= arg_double("--attn-dropout", optarg, 0, 0.99, &a->attn_dropout); break;
        case O_GELU:
            if (!strcmp(optarg, "erf"))
                a->gelu_erf = 1;
            else if (strcmp(optarg, "tanh")) {
                fprintf(stderr, "unpad-train: --gelu: '%s' is neither tanh nor erf\n", optarg);
                bad = 1;
            }
            break;
        case O_VR: bad |= arg_int("--virtual-ranks", optarg, 1, 1024, &a->vranks); break;
        case O_LOG: bad |= arg_int("--log-every", optarg, 1, 1000000000, &a->log_every); break;
        case O_EVAL: a->eval = optarg; break;
        case O_EVERY: bad |= arg_int("--eval-every", optarg, 0, 1000000000, &a->eval_every); break;
        case O_EBATCH: bad |= arg_int("--eval-batches", optarg, 1, 1000000, &a->eval_batches); break;
        case O_SAVE: a->save = optarg; break;
        case O_SEVERY: bad |= arg_int("--save-every", optarg, 0, 1000000000, &a->save_every); break;
        case O_RESUME: a->resume = optarg; break;
        case O_TRACE: a->trace = optarg; break;
        case O_TJSON: a->trace_json = optarg; break;
        case O_TSTEPS:
            if (sscanf(optarg, "%d:%d", &a->trace_a, &a->trace_b) != 2 || a->trace_a < 1 ||
                a->trace_b < a->trace_a) {
                fprintf(stderr, "unpad-train: --trace-steps: '%s' is not FIRST:LAST (1 <= FIRST <= LAST)\n",
                        optarg);
                bad = 1;
            }
            break;
        case O_HW: a->hw = optarg; break;
        case O_DW: a->dump_w = optarg; break;
        case O_DG: a->dump_g = optarg; break;
        case O_FP32: a->precision = "fp32"; break;
        case O_PREC:
            if (strcmp(optarg, "bf16") && strcmp(optarg, "fp32")) {
                fprintf(stderr, "unpad-train: --precision: '%s' is not bf16 or fp32\n", optarg);
                bad = 1;
            }
            a->precision = optarg;
            break;
        case O_POLICY:
            if (balance_policy_from_name(optarg) < 0) {
                fprintf(stderr, "unpad-train: --policy: '%s' is not none, sort-deal, lpt, kk or pack\n", optarg);
                bad = 1;
            }
            a->policy = optarg;
            break;
        case O_COUNT:
            if (balance_count_from_name(optarg) < 0) {
                fprintf(stderr, "unpad-train: --count: '%s' is not equal or free\n", optarg);
                bad = 1;
            }
            a->count = optarg;
            break;
        case O_PLAN: a->plan = optarg; break;
        case O_CALIB: a->calib = optarg; break;
        case O_NPROC: bad |= arg_int("--nproc", optarg, 1, 4096, &a->nproc); break;
        case O_GROUPS: {
            int bounds[GROUP_MAX], nb;
            unpad_err e = {0};
            if (group_bounds_parse(optarg, bounds, &nb, &e)) {
                fprintf(stderr, "unpad-train: --fmha-groups: %s\n", e.msg);
                bad = 1;
            }
            a->groups = optarg;
            break;
        }
        case O_STREAMS: bad |= arg_int("--streams", optarg, 1, BERT_MAX_STREAMS, &a->streams); break;
        case O_BUCKET: bad |= arg_double("--bucket-mb", optarg, 0, 1e6, &a->bucket_mb); break;
        case O_NOCALIB: a->no_calib = 1; break;
        case O_ONLINE: a->online = 1; break;
        case O_OWIN: bad |= arg_int("--online-window", optarg, 1, 100000, &a->online_window); break;
        case O_HELP: usage(stdout); exit(0);
        default: usage(stderr); return 1;
        }
    }
    if (bad)
        return 1;
    if (optind < argc) {
        fprintf(stderr, "unpad-train: unexpected argument '%s'\n", argv[optind]);
        return 1;
    }
    if (!a->model || (!a->data && !a->synthetic) || (a->data && a->synthetic) || !a->batch || !a->steps) {
        fprintf(stderr, "unpad-train: --model, one of --data / --synthetic, --batch and --steps are needed\n");
        usage(stderr);
        return 1;
    }
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* MLPerf BERT schedule: linear warm-up, then polynomial decay (power 1) towards 0 at `steps`. */
static double lr_at(const train_args *a, int step)
{
    if (a->warmup > 0 && step <= a->warmup)
        return a->lr * step / a->warmup;
    double frac = (double)(step - 1 - a->warmup) / (double)(a->steps - a->warmup);
    return a->lr * (1.0 - (frac < 0 ? 0 : frac > 1 ? 1 : frac));
}

static void batch_view(const shard_batch *sb, bert_batch *bb)
{
    bb->n = sb->n;
    bb->T = (int)sb->T;
    bb->P = (int)sb->P;
    bb->max_len = sb->max_seqlen;
    bb->ids = sb->tokens;
    bb->types = sb->segments;
    bb->cu_seqlens = sb->cu_seqlens;
    bb->mlm_rows = sb->mpos;
    bb->mlm_labels = sb->mlabels;
    bb->nsp_labels = sb->nsp;
}

static void batch_lengths(const shard_batch *sb, int *len)
{
    for (int i = 0; i < sb->n; i++)
        len[i] = sb->cu_seqlens[i + 1] - sb->cu_seqlens[i];
}

/* The FMHA grouping the trainer runs: planned per micro-batch from its lengths. */
typedef struct {
    int nb;                 /* -1 auto, 0 one launch, else fixed boundaries */
    int bounds[GROUP_MAX];
    group_opts opts;        /* streams, granularity for auto */
    const hw_spec *hw;
    const calib_coef *cc;
    int heads;
} fmha_grouping;

/* Groups of a micro-batch whose sequences are longest first (the balanced path builds them so):
 * the planner's length groups are then contiguous sequence ranges. */
static int micro_groups(const fmha_grouping *fg, const int *len, int n, bert_fmha_groups *out, unpad_err *err)
{
    out->ngroups = 0;
    if (fg->nb == 0 || n < 2)
        return UNPAD_OK;
    group_plan gp;
    int rc = fg->nb < 0 ? group_plan_auto(fg->hw, fg->cc, fg->heads, len, n, &fg->opts, &gp, err)
                        : group_plan_bounds(fg->hw, fg->cc, fg->heads, len, n, fg->bounds, fg->nb,
                                            fg->opts.max_streams, &gp, err);
    if (rc || (rc = group_seq_ranges(&gp, len, n, out->seq_begin, out->seq_end, out->max_len, err)))
        return rc;
    for (int g = 0; g < gp.ngroups; g++)
        out->stream[g] = gp.stream[g];
    out->ngroups = gp.ngroups;
    return UNPAD_OK;
}

/* Every global virtual rank's lengths of the global batch dp_step just built: rank g's are
 * len[off[g] .. off[g + 1]). */
static void online_snapshot(const dp *d, int R, int *len, int *off)
{
    off[0] = 0;
    for (int g = 0; g < R; g++)
        off[g + 1] = off[g] + dp_rank_lengths(d, g, len + off[g]);
}

static int fail(const char *what, const unpad_err *err)
{
    fflush(stdout);
    fprintf(stderr, "unpad-train: %s%s%s\n", what ? what : "", what ? ": " : "", err->msg);
    return 1;
}

/* MLM accuracy and loss over n batches of an evaluation source, dropout off. */
static void evaluate(bert *b, batch_source *src, int nb, int B, shard_batch *sb, cudaStream_t s,
                     double *acc, double *loss)
{
    double tot_l = 0, tot_c = 0, tot_p = 0;
    unpad_err err = {0};
    bert_set_dropout(b, 0);
    long n = source_samples(src);
    for (int i = 0; i < nb; i++) {
        if (n > 0 && (int64_t)i * B >= n)
            break;
        if (source_get(src, (int64_t)i * B, B, sb, &err)) {
            fprintf(stderr, "unpad-train: evaluation data: %s\n", err.msg);
            exit(EXIT_FAILURE);
        }
        bert_batch bb;
        batch_view(sb, &bb);
        if (bert_batch_upload(b, &bb, s, &err)) {
            fprintf(stderr, "unpad-train: evaluation batch: %s\n", err.msg);
            exit(EXIT_FAILURE);
        }
        bert_stats_reset(b, s);
        bert_forward(b, 0, s);
        double ml, nl, mc, nc;
        bert_stats_read(b, &ml, &nl, &mc, &nc, s);
        tot_l += ml;
        tot_c += mc;
        tot_p += bb.P;
    }
    bert_set_dropout(b, 1);
    *acc = tot_p > 0 ? tot_c / tot_p : 0;
    *loss = tot_p > 0 ? tot_l / tot_p : 0;
}

/* Each precision is its own build (kernels/common.h: floatX): a run asking for the other one
 * continues in the sibling binary next to this one, with the same arguments. Returns only on
 * failure. */
static int exec_precision(const char *precision, char **argv)
{
    char self[4096], path[4200];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        perror("unpad-train: /proc/self/exe");
        return 2;
    }
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = 0;
    snprintf(path, sizeof path, "%s/unpad-train%s", slash ? self : ".", strcmp(precision, "fp32") ? "" : "-fp32");
    execv(path, argv);
    fprintf(stderr, "unpad-train: --precision %s runs %s: %s (build it with 'make gpu')\n", precision,
            path, strerror(errno));
    return 2;
}

int main(int argc, char **argv)
{
    train_args a;
    if (parse_args(argc, argv, &a))
        return 2;
    if (strcmp(a.precision, UNPAD_PRECISION))
        return exec_precision(a.precision, argv);
    /* Ranks are started (or found) before anything touches the GPU: fork after CUDA is unsafe. */
    int is_parent = 0, spawn_rc = comm_spawn(a.nproc, &is_parent);
    if (is_parent)
        return spawn_rc;
    comm_t comm;
    if (comm_init(&comm))
        return 1;
    int rank0 = comm.rank == 0;
    unpad_err err = {0};
    model_cfg cfg;
    hw_spec hw;
    if (model_load(a.model, &cfg, &err))
        return fail(NULL, &err);
    if (a.attn_dropout >= 0)
        cfg.attn_dropout = a.attn_dropout;
    if (hw_load(a.hw, &hw, &err))
        return fail(NULL, &err);

    unpad_dist dist = {0};
    batch_source *src = NULL, *evsrc = NULL;
    if (a.synthetic) {
        if (dist_load(a.dist ? a.dist : dist_default_path(), &dist, &err))
            return fail(NULL, &err);
        if (source_synthetic(&cfg, &dist, (uint64_t)a.seed, &src, &err))
            return fail(NULL, &err);
    } else if (source_shard(&cfg, a.data, (uint64_t)a.seed, &src, &err)) {
        return fail("training data", &err);
    }
    if (a.eval && source_shard(&cfg, a.eval, 0, &evsrc, &err))
        return fail("evaluation data", &err);

    int K = a.vranks, B = a.batch, R = comm.size * K;
    int64_t step_samples = (int64_t)R * B;
    /* the cost model's coefficients: --calib, else the fitted file of this hardware if any */
    calib_coef cc;
    char calib_path[512];
    const char *calib_from = "the uncalibrated defaults";
    snprintf(calib_path, sizeof calib_path, "models/calib/%s.cfg", hw.name);
    if (a.calib && a.no_calib) {
        fprintf(stderr, "unpad-train: --calib and --no-calib exclude each other\n");
        return 2;
    }
    if (a.calib || (!a.no_calib && access(calib_path, R_OK) == 0)) {
        const char *f = a.calib ? a.calib : calib_path;
        if (calib_load(f, &hw, &cc, &err))
            return fail("calibration", &err);
        calib_from = f;
    } else {
        calib_default(&hw, &cc);
    }
    fmha_grouping fg = {.nb = 0, .hw = &hw, .cc = &cc, .heads = cfg.heads};
    group_opts_default(&fg.opts);
    fg.opts.max_streams = 2;
    unpad_plan plan;
    if (a.plan && plan_load(a.plan, &plan, &err))
        return fail("plan", &err);
    if (a.plan) {
        fg.nb = plan.fmha_nb;
        memcpy(fg.bounds, plan.fmha_bounds, sizeof fg.bounds);
        fg.opts.granularity = plan.fmha_granularity;
        fg.opts.max_streams = plan.streams;
    }
    if (a.groups && group_bounds_parse(a.groups, fg.bounds, &fg.nb, &err))
        return fail("--fmha-groups", &err);
    if (a.streams)
        fg.opts.max_streams = a.streams;
    /* grouped attention needs micro-batches longest first: the balanced path builds them so */
    int balanced = a.policy || a.plan || comm.launcher != COMM_SINGLE || fg.nb != 0;
    balance_policy policy = BAL_NONE;
    balance_count count = BAL_EQUAL;
    seq_cost scost;
    int weights_tokens = 0;
    if (balanced) {
        if (a.plan && !a.calib) {
            policy = plan.policy;
            count = plan.count;
            scost = plan.cost;
            weights_tokens = plan.weights_tokens;
        } else {
            if (a.plan) {
                policy = plan.policy;
                count = plan.count;
            }
            if (cost_seq_model(&cfg, &hw, &cc, &scost, &err))
                return fail(NULL, &err);
        }
        if (a.policy)
            policy = (balance_policy)balance_policy_from_name(a.policy);
        if (a.count)
            count = (balance_count)balance_count_from_name(a.count);
    }
    if (a.online && (!balanced || weights_tokens)) {
        fprintf(stderr, "unpad-train: --calibrate-online refits the balanced per-sequence cost: it needs "
                        "--policy (or --plan with weights = cost)\n");
        return 2;
    }
    /* with free counts a rank may take more, shorter sequences than B */
    int seq_cap = balanced && count == BAL_FREE ? (4 * B < R * B ? 4 * B : R * B) : B;
    int max_len = source_max_len(src);
    if (evsrc && source_max_len(evsrc) > max_len)
        max_len = source_max_len(evsrc);
    bert_options opt = {.gelu_erf = a.gelu_erf, .dropout = !a.no_dropout, .seed = (uint64_t)a.seed,
                        .max_tokens = B * max_len, .max_seqs = seq_cap,
                        .max_preds = B * cfg.max_predictions + (seq_cap - B)};
    int dev = 0;
    struct cudaDeviceProp prop;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaGetDeviceProperties(&prop, dev));
    bert *b = bert_create(&cfg, &opt, &err);
    if (!b)
        return fail(NULL, &err);
    cudaStream_t s;
    cudaCheck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    dp *dpp = NULL;
    if (balanced) {
        dp_options o = {.K = K, .B = B, .max_len = max_len, .max_pred = cfg.max_predictions,
                        .policy = policy, .count = count, .cost = weights_tokens ? NULL : &scost};
        if (!(dpp = dp_create(&comm, &o, opt.max_tokens, &err)))
            return fail(NULL, &err);
    }

    /* online calibration: every rank's lengths of the current and the prefetched global batch,
     * and every rank's measured compute time, gathered to every rank so all refit alike */
    online_cal *oc = NULL;
    int *olen = NULL, *ooff = NULL, *otime_dev = NULL;
    int32_t *otime = NULL;
    int online_refits = 0, online_refused = 0;
    online_fit ofit = {0};
    char online_why[256] = "";
    if (a.online) {
        online_opts oo = {.window = a.online_window};
        if (online_alloc(&oo, R, &oc, &err))
            return fail("--calibrate-online", &err);
        olen = malloc(2 * (size_t)step_samples * sizeof *olen);
        ooff = malloc(2 * ((size_t)R + 1) * sizeof *ooff);
        otime = malloc((size_t)R * sizeof *otime);
        cudaCheck(cudaMalloc((void **)&otime_dev, (size_t)R * sizeof *otime_dev));
        if (!olen || !ooff || !otime) {
            fprintf(stderr, "unpad-train: out of host memory\n");
            return 1;
        }
    }

    if (!rank0) /* one voice: rank 0 reports for all */
        if (!freopen("/dev/null", "w", stdout))
            perror("stdout");
    printf("unpad-train: %s (%d layers, hidden %d, %lld parameters) on %s, %s\n", cfg.name, cfg.layers,
           cfg.hidden, (long long)model_param_count(&cfg), prop.name,
           strcmp(UNPAD_PRECISION, "fp32") ? "bf16 activations and weights"
                                           : "fp32 throughout (the fp32 build)");
    printf("  data %s\n", source_describe(src));
    printf("  batch %d x %d virtual rank%s = %d sequences/step, %d steps, lr %.3g (warm-up %d, poly 1), "
           "wd %.3g, dropout %s (attention %g), GELU %s\n",
           B, K, K == 1 ? "" : "s", B * K, a.steps, a.lr, a.warmup, a.wd, a.no_dropout ? "off" : "on",
           a.no_dropout ? 0.0 : cfg.attn_dropout, a.gelu_erf ? "erf" : "tanh");
    printf("  device memory: %.2f GiB for parameters, optimizer and activations (%d tokens per micro-batch)\n",
           bert_device_bytes(b) / 1073741824.0, opt.max_tokens);
    if (balanced)
        printf("  %d rank%s x %d virtual = %d ranks; every step balanced with %s, %s counts, on %s "
               "(cost %.3g + %.3g len + %.3g len^2 us)%s\n", comm.size, comm.size == 1 ? "" : "s", K, R,
               balance_policy_name(policy), balance_count_name(count), weights_tokens ? "tokens" : "predicted cost",
               scost.c0, scost.c1, scost.c2,
               comm.launcher == COMM_SINGLE ? "" : ", NCCL all-reduce of the gradients");
    if (comm.launcher != COMM_SINGLE) {
        if (a.bucket_mb > 0)
            printf("  gradient all-reduce in buckets of >= %.0f MB on its own stream, overlapped with backward\n",
                   a.bucket_mb);
        else
            printf("  gradient all-reduce in one call after backward\n");
    }
    {
        char gb[256];
        group_bounds_format(fg.bounds, fg.nb, gb, sizeof gb);
        printf("  FMHA groups: %s%s; cost model: %s\n", gb,
               fg.nb == 0 ? " (one launch per micro-batch)" : "", calib_from);
        if (fg.nb != 0)
            printf("  FMHA groups on up to %d stream%s\n", fg.opts.max_streams, fg.opts.max_streams == 1 ? "" : "s");
    }

    /* ranks = all ranks x virtual ranks: the global batch's layout, whatever the process count */
    ckpt_state st = {.step = 0, .data_pos = 0, .seed = (uint64_t)a.seed, .batch = B, .ranks = R};
    if (a.resume) {
        ckpt_state got;
        if (ckpt_load(a.resume, b, &got, &err))
            return fail("resume", &err);
        if (got.seed != (uint64_t)a.seed || got.batch != B || got.ranks != R) {
            fprintf(stderr, "unpad-train: resume: %s/ckpt.bin was made with --seed %llu --batch %d and %d "
                            "ranks in all (processes x --virtual-ranks; now %d x %d); give the same to "
                            "continue exactly\n",
                    a.resume, (unsigned long long)got.seed, got.batch, got.ranks, comm.size, K);
            return 1;
        }
        st = got;
        printf("  resumed from %s/ckpt.bin at step %lld (data position %lld)\n", a.resume,
               (long long)st.step, (long long)st.data_pos);
    }

    FILE *tcsv = NULL, *tjson = NULL;
    optrace *tr = NULL;
    if (a.trace && !(tcsv = fopen(a.trace, "w"))) {
        perror(a.trace);
        return 1;
    }
    if (a.trace_json && !(tjson = fopen(a.trace_json, "w"))) {
        perror(a.trace_json);
        return 1;
    }
    if (tcsv || tjson)
        tr = optrace_create(hw.name, &cfg, tcsv, tjson);
    gradsync *gs = NULL;
    if (comm.launcher != COMM_SINGLE && a.bucket_mb > 0 &&
        !(gs = gradsync_create(&comm, bert_grad(b), bert_param_count(b), a.bucket_mb * 1048576.0, &err)))
        return fail(NULL, &err);

    /* two sets of K micro-batches: the next step's are read while the GPU runs this one's */
    shard_batch *bufs = calloc(2 * (size_t)K, sizeof *bufs);
    int *lens = malloc((size_t)seq_cap * sizeof *lens);
    /* predicted cost per rank of the current and the prefetched global batch, like bufs */
    double *pred_buf = calloc(2 * (size_t)R, sizeof *pred_buf), *meas_us = calloc((size_t)K, sizeof *meas_us);
    cudaEvent_t ev_ar;
    cudaCheck(cudaEventCreateWithFlags(&ev_ar, cudaEventDisableTiming));
    cudaEvent_t *evr = calloc(2 * (size_t)K, sizeof *evr);
    for (int r = 0; r < 2 * K; r++)
        cudaCheck(cudaEventCreate(&evr[r]));
    double imb_meas_sum = 0, imb_pred_sum = 0;
    int imb_steps = 0;
    for (int r = 0; r < 2 * K; r++)
        /* free counts: more, shorter sequences may round their 15% up once each */
        if (shard_batch_alloc(&bufs[r], seq_cap, (long)B * max_len,
                              (long)B * cfg.max_predictions + (seq_cap - B))) {
            fprintf(stderr, "unpad-train: out of host memory for the batches\n");
            return 1;
        }
    int cur = 0, have_next = 0;

    cudaEvent_t ev0, ev1;
    cudaCheck(cudaEventCreate(&ev0));
    cudaCheck(cudaEventCreate(&ev1));
    double win_t0 = now_s(), win_samples = 0, win_flops = 0, win_loss = 0, win_mlm = 0, win_nsp = 0;
    double win_acc_c = 0, win_acc_p = 0, tot_time = 0, tot_samples = 0, tot_flops = 0, first_loss = -1;
    double last_loss = 0, last_acc = 0, *rank_us = calloc((size_t)K, sizeof *rank_us);
    int win_steps = 0, steps_run = 0;
    double t_start = now_s();

    for (int step = (int)st.step + 1; step <= a.steps; step++) {
        double t_step = now_s();
        int tracing = tr && step >= a.trace_a && step <= a.trace_b;
        /* the global batch: K micro-batches from the sample stream */
        shard_batch *mb = bufs + (size_t)cur * K;
        if (!have_next) {
            if (dpp) {
                if (dp_step(dpp, src, st.data_pos, mb, pred_buf + (size_t)cur * R, &err))
                    return fail("data", &err);
                if (oc)
                    online_snapshot(dpp, R, olen + (size_t)cur * step_samples, ooff + (size_t)cur * (R + 1));
            } else {
                for (int r = 0; r < K; r++)
                    if (source_get(src, st.data_pos + (int64_t)r * B, B, &mb[r], &err))
                        return fail("data", &err);
            }
        }
        const double *pred_us = pred_buf + (size_t)cur * R;
        long Ptot = 0, Ntot = 0;
        double flops = 0;
        for (int r = 0; r < K; r++) {
            Ptot += mb[r].P;
            Ntot += mb[r].n;
            batch_lengths(&mb[r], lens);
            flops += ops_model_flops(&cfg, lens, mb[r].n);
        }
        if (dpp) { /* the loss is normalised over the GLOBAL batch, whatever each rank holds */
            Ptot = dp_global_predictions(dpp);
            Ntot = (long)step_samples;
            flops *= comm.size; /* throughput is reported for all ranks */
        }
        bert_set_hooks(b, NULL);
        bert_set_group_hooks(b, NULL);
        if (tracing) {
            optrace_step_begin(tr, step, s);
            bert_hooks h = optrace_hooks(tr);
            bert_set_hooks(b, &h);
            bert_group_hooks gh = optrace_group_hooks(tr);
            bert_set_group_hooks(b, &gh);
        }
        if (gs)
            gradsync_begin(gs, tracing ? tr : NULL);
        cudaCheck(cudaEventRecord(ev0, s));
        bert_grad_zero(b, s);
        bert_stats_reset(b, s);
        for (int r = 0; r < K; r++) {
            bert_batch bb;
            batch_view(&mb[r], &bb);
            if (bert_batch_upload(b, &bb, s, &err))
                return fail("batch", &err);
            batch_lengths(&mb[r], lens);
            if (fg.nb != 0) {
                bert_fmha_groups grp;
                if (micro_groups(&fg, lens, mb[r].n, &grp, &err) || bert_set_fmha_groups(b, &grp, &err))
                    return fail("FMHA groups", &err);
            }
            if (tracing)
                optrace_rank_begin(tr, r, K, lens, mb[r].n);
            /* the last micro-batch completes the gradients: its backward starts the all-reduce */
            bert_set_grads_ready(b, gs && r == K - 1 ? gradsync_ready : NULL, gs);
            uint64_t dseed = mix64((uint64_t)a.seed * 0x100000001B3ull ^
                                   mix64((uint64_t)step * 4096 + (uint64_t)(comm.rank * K + r)));
            cudaCheck(cudaEventRecord(evr[2 * r], s));
            bert_forward(b, dseed, s);
            bert_backward(b, 1.0f / (float)(Ptot > 0 ? Ptot : 1), 1.0f / (float)Ntot, s);
            cudaCheck(cudaEventRecord(evr[2 * r + 1], s));
        }
        bert_set_grads_ready(b, NULL, NULL);
        if (gs) {
            gradsync_finish(gs, s); /* s waits for every bucket */
            dp_after(dpp, gradsync_done(gs));
        } else if (comm.launcher != COMM_SINGLE) {
            if (tracing)
                optrace_op_begin(tr, OP_ALLREDUCE, s);
            comm_allreduce_sum_f32(&comm, bert_grad(b), (size_t)bert_param_count(b), s);
            if (tracing)
                optrace_op_end(tr, OP_ALLREDUCE, s);
            cudaCheck(cudaEventRecord(ev_ar, s));
            dp_after(dpp, ev_ar);
        }
        if (step == (int)st.step + 1 && a.dump_w) {
            /* the weights the first step saw (before its LAMB update) */
            dump_file d;
            if (dump_open(&d, a.dump_w, &err))
                return fail(NULL, &err);
            dump_params(&d, b, 0);
            if (dump_close(&d, &err))
                return fail(NULL, &err);
        }
        if (step == (int)st.step + 1 && a.dump_g) {
            dump_file d;
            if (dump_open(&d, a.dump_g, &err))
                return fail(NULL, &err);
            dump_params(&d, b, 1);
            double ml, nl, mc, nc;
            bert_stats_read(b, &ml, &nl, &mc, &nc, s);
            float losses[4] = {(float)(ml / (Ptot ? Ptot : 1)), (float)(nl / Ntot), (float)mc, (float)nc};
            int64_t d4 = 4, dT = mb[0].T, dn = mb[0].n, dn1 = mb[0].n + 1, dP = mb[0].P;
            dump_add(&d, "loss.mlm,loss.nsp,mlm_correct,nsp_correct", 0, 1, &d4, losses);
            if (K == 1) { /* the peer comparison needs the batch; with K > 1 only the gradients */
                dump_add(&d, "batch.ids", 1, 1, &dT, mb[0].tokens);
                dump_add(&d, "batch.types", 1, 1, &dT, mb[0].segments);
                dump_add(&d, "batch.cu_seqlens", 1, 1, &dn1, mb[0].cu_seqlens);
                dump_add(&d, "batch.mlm_rows", 1, 1, &dP, mb[0].mpos);
                dump_add(&d, "batch.mlm_labels", 1, 1, &dP, mb[0].mlabels);
                dump_add(&d, "batch.nsp_labels", 1, 1, &dn, mb[0].nsp);
            }
            if (dump_close(&d, &err))
                return fail(NULL, &err);
            printf("  dumped the gradients and batch of step %d to %s\n", step, a.dump_g);
        }
        bert_lamb_hparams hp = {.lr = lr_at(&a, step), .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-6,
                                .weight_decay = a.wd, .max_grad_norm = a.max_norm, .step = step};
        if (tracing)
            optrace_op_begin(tr, OP_LAMB, s);
        bert_lamb_step(b, &hp, s);
        if (tracing)
            optrace_op_end(tr, OP_LAMB, s);
        cudaCheck(cudaEventRecord(ev1, s));
        /* read the next step's batches while this one computes */
        have_next = 0;
        if (step < a.steps) {
            shard_batch *nb = bufs + (size_t)(1 - cur) * K;
            if (dpp) {
                if (dp_step(dpp, src, st.data_pos + step_samples, nb, pred_buf + (size_t)(1 - cur) * R, &err))
                    return fail("data", &err);
                if (oc)
                    online_snapshot(dpp, R, olen + (size_t)(1 - cur) * step_samples,
                                    ooff + (size_t)(1 - cur) * (R + 1));
            } else {
                for (int r = 0; r < K; r++)
                    if (source_get(src, st.data_pos + (int64_t)(K + r) * B, B, &nb[r], &err))
                        return fail("data", &err);
            }
            have_next = 1;
        }
        double ml, nl, mc, nc;
        bert_stats_read(b, &ml, &nl, &mc, &nc, s); /* synchronises */
        if (tracing)
            optrace_step_end(tr, rank_us, K);
        double mlm = ml / (Ptot ? Ptot : 1), nsp = nl / Ntot, loss = mlm + nsp;
        if (!isfinite(loss)) {
            fprintf(stderr, "unpad-train: step %d: the loss is %g (diverged); stopping\n", step, loss);
            return 1;
        }
        if (first_loss < 0)
            first_loss = loss;
        last_loss = loss;
        last_acc = Ptot ? mc / Ptot : 0;
        /* each virtual rank's compute, measured, beside its predicted cost */
        double mmax = 0, mmean = 0;
        for (int r = 0; r < K; r++) {
            float ms;
            cudaCheck(cudaEventElapsedTime(&ms, evr[2 * r], evr[2 * r + 1]));
            meas_us[r] = 1e3 * ms;
            mmean += meas_us[r] / K;
            mmax = meas_us[r] > mmax ? meas_us[r] : mmax;
        }
        double pmax = 0, pmean = 0;
        for (int g = 0; g < R; g++) {
            pmean += pred_us[g] / R;
            pmax = pred_us[g] > pmax ? pred_us[g] : pmax;
        }
        if (dpp && K > 1 && steps_run > 0) { /* step 1 warms up: left out */
            imb_meas_sum += mmean > 0 ? mmax / mmean : 0;
            imb_pred_sum += pmean > 0 ? pmax / pmean : 0;
            imb_steps++;
        }
        if (oc && steps_run > 0) { /* step 1 warms up: left out */
            for (int r = 0; r < K; r++)
                otime[comm.rank * K + r] = (int32_t)(meas_us[r] * 1e3 < 2e9 ? meas_us[r] * 1e3 : 2e9);
            if (comm_uses_nccl(&comm)) {
                cudaCheck(cudaMemcpyAsync(otime_dev + comm.rank * K, otime + comm.rank * K, (size_t)K * 4,
                                          cudaMemcpyHostToDevice, s));
                comm_allgather_i32(&comm, otime_dev + comm.rank * K, otime_dev, (size_t)K, s);
                cudaCheck(cudaMemcpyAsync(otime, otime_dev, (size_t)R * 4, cudaMemcpyDeviceToHost, s));
                cudaCheck(cudaStreamSynchronize(s));
            }
            const int *L0 = olen + (size_t)cur * step_samples, *off = ooff + (size_t)cur * (R + 1);
            for (int g = 0; g < R; g++)
                if (off[g + 1] > off[g] && otime[g] > 0 &&
                    online_add(oc, step, L0 + off[g], off[g + 1] - off[g], otime[g] * 1e-6, &err))
                    return fail("--calibrate-online", &err);
            online_fit f;
            unpad_err e2 = {0};
            if (online_refit(oc, &scost, &f, &e2) == UNPAD_OK) {
                scost = f.cost; /* the balancer reads it from the next global batch it builds */
                ofit = f;
                online_refits++;
            } else {
                online_refused++;
                snprintf(online_why, sizeof online_why, "%.255s", e2.msg);
            }
        }
        st.step = step;
        st.data_pos += step_samples;
        cur = have_next ? 1 - cur : cur;
        steps_run++;
        /* the first step (plans, warm-up) is left out of the throughput; wall time per step */
        if (steps_run > 1) {
            tot_time += now_s() - t_step;
            tot_samples += Ntot;
            tot_flops += flops;
        }
        win_steps++;
        win_samples += Ntot;
        win_flops += flops;
        win_loss += loss;
        win_mlm += mlm;
        win_nsp += nsp;
        win_acc_c += mc;
        win_acc_p += Ptot;
        if (step % a.log_every == 0 || step == a.steps) {
            double dt = now_s() - win_t0;
            printf("step %6d | loss %.4f (mlm %.4f nsp %.4f) | mlm acc %.4f | lr %.3e | %8.1f samples/s | "
                   "%6.1f TFLOP/s | %.1f ms/step",
                   step, win_loss / win_steps, win_mlm / win_steps, win_nsp / win_steps,
                   win_acc_p ? win_acc_c / win_acc_p : 0, hp.lr, win_samples / dt, win_flops / dt * 1e-12,
                   1e3 * dt / win_steps);
            if (dpp && K > 1) {
                printf(" | rank max/mean %.3f (predicted %.3f)", mmean > 0 ? mmax / mmean : 0,
                       pmean > 0 ? pmax / pmean : 0);
            } else if (tracing && K > 1) {
                double mx = 0, mean = 0;
                for (int r = 0; r < K; r++) {
                    mean += rank_us[r] / K;
                    mx = rank_us[r] > mx ? rank_us[r] : mx;
                }
                printf(" | rank max/mean %.3f", mean > 0 ? mx / mean : 0);
            }
            printf("\n");
            if (oc && online_refits)
                printf("online %6d | cost %.4g + %.4g len + %.4g len^2 us (+ %.4g us per rank) | fit rms %.2f%% "
                       "max %.2f%% over %d ranks x %d steps%s%s\n",
                       step, ofit.cost.c0, ofit.cost.c1, ofit.cost.c2, ofit.fixed_us, ofit.rms_pct,
                       ofit.max_abs_pct, ofit.obs / (ofit.steps ? ofit.steps : 1), ofit.steps,
                       ofit.notes[0] ? "; " : "", ofit.notes);
            else if (oc && online_refused)
                printf("online %6d | no refit yet: %s\n", step, online_why);
            fflush(stdout);
            win_t0 = now_s();
            win_steps = 0;
            win_samples = win_flops = win_loss = win_mlm = win_nsp = win_acc_c = win_acc_p = 0;
        }
        if (evsrc && a.eval_every && step % a.eval_every == 0) {
            double acc, el;
            evaluate(b, evsrc, a.eval_batches, B, &bufs[(size_t)(1 - cur) * K], s, &acc, &el);
            printf("eval  %6d | mlm loss %.4f | mlm acc %.4f\n", step, el, acc);
        }
        if (rank0 && a.save && ((a.save_every && step % a.save_every == 0) || step == a.steps)) {
            if (ckpt_save(a.save, b, &st, &err))
                return fail("checkpoint", &err);
            printf("  checkpoint %s/ckpt.bin at step %d\n", a.save, step);
            fflush(stdout);
        }
    }
    double wall = now_s() - t_start;
    if (evsrc && !(a.eval_every && a.steps % a.eval_every == 0)) {
        double acc, el;
        evaluate(b, evsrc, a.eval_batches, B, &bufs[0], s, &acc, &el);
        printf("eval  %6d | mlm loss %.4f | mlm acc %.4f\n", a.steps, el, acc);
    }
    size_t fr, tot;
    cudaCheck(cudaMemGetInfo(&fr, &tot));
    printf("summary: %d steps in %.1f s | loss %.4f -> %.4f | mlm acc %.4f | %.1f samples/s | %.1f model "
           "TFLOP/s | device memory in use %.2f GiB\n",
           steps_run, wall, first_loss, last_loss, last_acc, tot_time > 0 ? tot_samples / tot_time : 0,
           tot_time > 0 ? tot_flops / tot_time * 1e-12 : 0, (tot - fr) / 1073741824.0);

    if (imb_steps)
        printf("balance: %s, %s counts, %d ranks: measured rank max/mean %.4f, predicted %.4f (mean over %d "
               "steps)\n", balance_policy_name(policy), balance_count_name(count), R, imb_meas_sum / imb_steps,
               imb_pred_sum / imb_steps, imb_steps);

    if (tr) {
        double fw = optrace_op_mean_us(tr, OP_FMHA_FWD), bw = optrace_op_mean_us(tr, OP_FMHA_BWD);
        printf("attention: fmha_fwd %.3f ms + fmha_bwd %.3f ms = %.3f ms per traced step (all ranks and "
               "layers; grouped launches count their overlap once)\n", fw * 1e-3, bw * 1e-3, (fw + bw) * 1e-3);
        if (comm.launcher != COMM_SINGLE)
            printf("all-reduce: %.3f ms per traced step on the communication stream%s\n",
                   optrace_op_mean_us(tr, OP_ALLREDUCE) * 1e-3, gs ? " (overlapped with backward)" : "");
    }
    if (oc)
        printf("online calibration: %d refits, %d refused%s%s\n", online_refits, online_refused,
               online_refused ? "; last refusal: " : "", online_refused ? online_why : "");
    online_free(oc);
    free(olen);
    free(ooff);
    free(otime);
    if (otime_dev)
        cudaCheck(cudaFree(otime_dev));
    optrace_free(tr);
    gradsync_free(gs);
    dp_free(dpp);
    for (int r = 0; r < 2 * K; r++)
        cudaCheck(cudaEventDestroy(evr[r]));
    free(evr);
    free(pred_buf);
    cudaCheck(cudaEventDestroy(ev_ar));
    free(meas_us);
    comm_free(&comm);
    if (tcsv)
        fclose(tcsv);
    if (tjson)
        fclose(tjson);
    for (int r = 0; r < 2 * K; r++)
        shard_batch_free(&bufs[r]);
    free(bufs);
    free(lens);
    free(rank_us);
    source_free(src);
    source_free(evsrc);
    dist_free(&dist);
    bert_free(b);
    cudaCheck(cudaStreamDestroy(s));
    return 0;
}
