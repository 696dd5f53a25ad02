/* main_train.c — `unpad-train`: unpadded BERT pre-training with virtual ranks (micro-batches with
 * gradient accumulation, each timed as if it were its own GPU), several processes, checkpoints that
 * resume exactly, per-operator traces, evaluation, and tensor dumps for the peer comparisons.
 * This file parses the arguments; exec/gpu/trainer.h is the run. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/trainer.h"

static void usage(FILE *f)
{
    char policies[256];
    fprintf(f,
            "usage: unpad-train --model F (--data F | --synthetic) --batch B --steps N [options]\n"
            "  --model F          model config, or a name in models/ (bert-large, bert-base, ...)\n"
            "  --data F           shard file or folder made by unpad-data\n"
            "  --synthetic        random tokens, lengths drawn from --dist\n"
            "  --dist F           length distribution for --synthetic, or a name in models/dists/ (default wiki512)\n"
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
            "  --gemm-tune on|off after the first step, time cuBLASLt's first 16 algorithms for the GEMMs\n"
            "                     of the token counts at hand and keep the fastest (off: the heuristic's\n"
            "                     first choices; on: the choices are saved with checkpoints, and a run\n"
            "                     resumed with --gemm-tune on uses them instead of tuning)\n"
            "  --grad-write on|off on (the default): the first micro-batch of a step writes the\n"
            "                     parameter gradients; off: they are zeroed at the step's start and\n"
            "                     every micro-batch adds\n"
            "  --fp8 on|off       off (the default); on: the encoder's Linear forwards and data gradients\n"
            "                     as FP8 products (E4M3 activations and weights, E5M2 gradients, delayed\n"
            "                     per-tensor scaling; weight gradients stay bf16); bf16 build only\n"
            "  --graphs on|off    off (the default); on: each micro-batch's forward and backward launched\n"
            "                     as one CUDA graph, captured while the step before computes (the\n"
            "                     first step, traced steps and bucketed all-reduces launch as usual)\n"
            "  --last-layer heads|all heads (the default): the last layer after its attention (output\n"
            "                     projection, FFN, LayerNorms) on the rows the heads read only, the masked\n"
            "                     positions and each sequence's first token; all: on every token\n"
            "  --act-tokens N     activations for N tokens per micro-batch at start (default: from the\n"
            "                     data's lengths, B x mean + 5 sqrt(B) x their deviation); a larger\n"
            "                     micro-batch makes them again, larger (said in the summary)\n"
            "  --virtual-ranks K  K micro-batches per step, accumulated (each timed as its own rank)\n"
            "  --accum K          the same: gradient accumulation over K micro-batches of --batch\n"
            "  --policy P         balance every step's global batch over the (virtual) ranks:\n"
            "                     %s (default: no balancing, loader order)\n"
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
            "  --log-file F       metrics, one JSON object per line: every logged step and evaluation\n"
            "                     (with --resume, appended to after a resume line)\n"
            "  --summary-json F   the run's summary in JSON (default: beside --log-file F, F less its\n"
            "                     extension then .summary.json)\n"
            "  --eval F           held-out shard; --eval-every k (0: at the end only), --eval-batches n (20)\n"
            "  --save DIR         checkpoint every --save-every k steps (0: at the end only) and at the end,\n"
            "                     into DIR/step-NNNNNN/; --keep-last N keeps the N newest (0: all; default)\n"
            "  --resume DIR       continue from DIR's latest complete checkpoint (same model, batch, ranks\n"
            "                     and seed); DIR may also be one step folder or an old-style DIR/ckpt.bin\n"
            "  --skip-nonfinite   a step whose loss or gradient norm is not finite changes nothing and the\n"
            "                     run goes on (counted); default: the run stops (exit code 3)\n"
            "  --trace F          per-operator trace rows (CSV); --trace-json F: Chrome trace events\n"
            "  --trace-steps a:b  steps traced (default all when tracing)\n"
            "  --hw F             hardware spec of the cost model and the trace rows (default: the one under\n"
            "                     models/hw whose device is this GPU's name, else models/hw/h200-sxm.cfg)\n"
            "  --dump-weights F   the weights before step 1 (the working copy's values, fp32 file)\n"
            "  --dump-grads F     the gradients, losses (and with one rank the batch) of the first step\n"
            "  --dump-final F     the fp32 master weights after the last step\n"
            "  --dump-batches F   every step's batch (one process), for the many-step reference\n"
            "  --debug-nonfinite-step k  (testing) make step k's loss and gradient NaN\n"
            "  --precision P      bf16 (default: bf16 activations and weights, fp32 accumulation, master\n"
            "                     weights and optimizer) | fp32 (everything fp32, GEMMs without TF32, a\n"
            "                     plain FMHA: slow, for tight checks); runs bin/unpad-train-fp32\n"
            "  --fp32             the same as --precision fp32\n"
            "  --help             this text\n"
            "Default files (models/...) are under the project home: $UNPAD_HOME, else the folder above bin/.\n",
            balance_policy_list(policies, sizeof policies, " | "));
}


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

static int arg_name(const char *flag, const char *v, int ok, const char *expected)
{
    if (!ok)
        fprintf(stderr, "unpad-train: %s: '%s' is not %s\n", flag, v, expected);
    return !ok;
}

enum { O_MODEL = 256, O_DATA, O_SYN, O_DIST, O_BATCH, O_STEPS, O_LR, O_WARM, O_WD, O_NORM, O_SEED,
       O_NODROP, O_GELU, O_ACTTOK, O_VR, O_ACCUM, O_LOG, O_EVAL, O_EVERY, O_EBATCH, O_SAVE, O_SEVERY, O_RESUME,
       O_TRACE, O_TJSON, O_TSTEPS, O_HW, O_DW, O_DG, O_FP32, O_POLICY, O_COUNT, O_PLAN, O_CALIB,
       O_NPROC, O_GROUPS, O_STREAMS, O_BUCKET, O_NOCALIB, O_ONLINE, O_OWIN, O_PREC, O_LOGFILE,
       O_SUMMARY, O_KEEP, O_SKIPNF, O_DEBUGNF, O_DFINAL, O_DBATCH, O_ADROP, O_TUNE, O_GWRITE, O_FP8, O_GRAPHS, O_LAST,
       O_HELP };

/* One option into a; 1 on a bad value (said on stderr). */
static int parse_one(int c, const char *v, train_args *a)
{
    int bad = 0, s = 0;
    switch (c) {
    case O_MODEL: a->model = v; break;
    case O_DATA: a->data = v; break;
    case O_SYN: a->synthetic = 1; break;
    case O_DIST: a->dist = v; break;
    case O_BATCH: return arg_int("--batch", v, 1, 65535, &a->batch);
    case O_STEPS: return arg_int("--steps", v, 1, 1000000000, &a->steps);
    case O_LR: return arg_double("--lr", v, 0, 1, &a->lr);
    case O_WARM: return arg_int("--warmup-steps", v, 0, 1000000000, &a->warmup);
    case O_WD: return arg_double("--weight-decay", v, 0, 1, &a->wd);
    case O_NORM: return arg_double("--max-grad-norm", v, 1e-6, 1e9, &a->max_norm);
    case O_SEED:
        bad = arg_int("--seed", v, 0, 2147483647, &s);
        a->seed = s;
        break;
    case O_NODROP: a->no_dropout = 1; break;
    case O_ADROP: return arg_double("--attn-dropout", v, 0, 0.99, &a->attn_dropout);
    case O_GELU:
        bad = arg_name("--gelu", v, !strcmp(v, "erf") || !strcmp(v, "tanh"), "tanh or erf");
        a->gelu_erf = !strcmp(v, "erf");
        break;
    case O_TUNE:
        bad = arg_name("--gemm-tune", v, !strcmp(v, "on") || !strcmp(v, "off"), "on or off");
        a->gemm_tune = !strcmp(v, "on");
        break;
    case O_GWRITE:
        bad = arg_name("--grad-write", v, !strcmp(v, "on") || !strcmp(v, "off"), "on or off");
        a->grad_write = !strcmp(v, "on");
        break;
    case O_FP8:
        bad = arg_name("--fp8", v, !strcmp(v, "on") || !strcmp(v, "off"), "on or off");
        a->fp8 = !strcmp(v, "on");
        break;
    case O_GRAPHS:
        bad = arg_name("--graphs", v, !strcmp(v, "on") || !strcmp(v, "off"), "on or off");
        a->graphs = !strcmp(v, "on");
        break;
    case O_LAST:
        bad = arg_name("--last-layer", v, !strcmp(v, "heads") || !strcmp(v, "all"), "heads or all");
        a->last_heads = !strcmp(v, "heads");
        break;
    case O_ACTTOK: return arg_int("--act-tokens", v, 1, 1 << 30, &a->act_tokens);
    case O_VR: return arg_int("--virtual-ranks", v, 1, 1024, &a->vranks);
    case O_ACCUM: return arg_int("--accum", v, 1, 1024, &a->vranks);
    case O_LOG: return arg_int("--log-every", v, 1, 1000000000, &a->log_every);
    case O_LOGFILE: a->log_file = v; break;
    case O_SUMMARY: a->summary_json = v; break;
    case O_EVAL: a->eval = v; break;
    case O_EVERY: return arg_int("--eval-every", v, 0, 1000000000, &a->eval_every);
    case O_EBATCH: return arg_int("--eval-batches", v, 1, 1000000, &a->eval_batches);
    case O_SAVE: a->save = v; break;
    case O_SEVERY: return arg_int("--save-every", v, 0, 1000000000, &a->save_every);
    case O_KEEP: return arg_int("--keep-last", v, 0, 1000000, &a->keep_last);
    case O_RESUME: a->resume = v; break;
    case O_SKIPNF: a->skip_nonfinite = 1; break;
    case O_DEBUGNF: return arg_int("--debug-nonfinite-step", v, 1, 1000000000, &a->debug_nonfinite_step);
    case O_TRACE: a->trace = v; break;
    case O_TJSON: a->trace_json = v; break;
    case O_TSTEPS:
        bad = arg_name("--trace-steps", v,
                       sscanf(v, "%d:%d", &a->trace_a, &a->trace_b) == 2 && a->trace_a >= 1 && a->trace_b >= a->trace_a,
                       "FIRST:LAST (1 <= FIRST <= LAST)");
        break;
    case O_HW: a->hw = v; break;
    case O_DW: a->dump_w = v; break;
    case O_DG: a->dump_g = v; break;
    case O_DFINAL: a->dump_final = v; break;
    case O_DBATCH: a->dump_batches = v; break;
    case O_FP32: a->precision = "fp32"; break;
    case O_PREC:
        bad = arg_name("--precision", v, !strcmp(v, "bf16") || !strcmp(v, "fp32"), "bf16 or fp32");
        a->precision = v;
        break;
    case O_POLICY: {
        balance_policy p;
        unpad_err e = {0};
        if (balance_policy_parse(v, &p, &e)) {
            fprintf(stderr, "unpad-train: --policy: %s\n", e.msg);
            bad = 1;
        }
        a->policy = v;
        break;
    }
    case O_COUNT:
        bad = arg_name("--count", v, balance_count_from_name(v) >= 0, "equal or free");
        a->count = v;
        break;
    case O_PLAN: a->plan = v; break;
    case O_CALIB: a->calib = v; break;
    case O_NPROC: return arg_int("--nproc", v, 1, 4096, &a->nproc);
    case O_GROUPS: {
        int bounds[GROUP_MAX], nb;
        unpad_err e = {0};
        if (group_bounds_parse(v, bounds, &nb, &e)) {
            fprintf(stderr, "unpad-train: --fmha-groups: %s\n", e.msg);
            bad = 1;
        }
        a->groups = v;
        break;
    }
    case O_STREAMS: return arg_int("--streams", v, 1, BERT_MAX_STREAMS, &a->streams);
    case O_BUCKET: return arg_double("--bucket-mb", v, 0, 1e6, &a->bucket_mb);
    case O_NOCALIB: a->no_calib = 1; break;
    case O_ONLINE: a->online = 1; break;
    case O_OWIN: return arg_int("--online-window", v, 1, 100000, &a->online_window);
    }
    return bad;
}

static void args_default(train_args *a)
{
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
    a->attn_dropout = -1;
    a->bucket_mb = 32;
    a->online_window = 8;
    a->gemm_tune = 0;  /* the step gains under 1% for 2 s of timing (docs/trainer.md, measured) */
    a->last_heads = 1; /* the last layer's rows the heads do not read are not computed (docs/trainer.md) */
    a->grad_write = 1; /* no memset of the gradients: +0.7-1.0% a step at batch 56 (docs/trainer.md) */
}

/* 0: parsed; 1: bad arguments (said); -1: --help printed. */
static int parse_args(int argc, char **argv, train_args *a)
{
    static const struct option opts[] = {
        {"model", 1, 0, O_MODEL}, {"data", 1, 0, O_DATA}, {"synthetic", 0, 0, O_SYN},
        {"dist", 1, 0, O_DIST}, {"batch", 1, 0, O_BATCH}, {"steps", 1, 0, O_STEPS}, {"lr", 1, 0, O_LR},
        {"warmup-steps", 1, 0, O_WARM}, {"weight-decay", 1, 0, O_WD}, {"max-grad-norm", 1, 0, O_NORM},
        {"seed", 1, 0, O_SEED}, {"no-dropout", 0, 0, O_NODROP}, {"gelu", 1, 0, O_GELU},
        {"virtual-ranks", 1, 0, O_VR}, {"accum", 1, 0, O_ACCUM}, {"log-every", 1, 0, O_LOG}, {"eval", 1, 0, O_EVAL},
        {"eval-every", 1, 0, O_EVERY}, {"eval-batches", 1, 0, O_EBATCH}, {"save", 1, 0, O_SAVE},
        {"save-every", 1, 0, O_SEVERY}, {"resume", 1, 0, O_RESUME}, {"trace", 1, 0, O_TRACE},
        {"trace-json", 1, 0, O_TJSON}, {"trace-steps", 1, 0, O_TSTEPS}, {"hw", 1, 0, O_HW},
        {"dump-weights", 1, 0, O_DW}, {"dump-grads", 1, 0, O_DG}, {"fp32", 0, 0, O_FP32},
        {"policy", 1, 0, O_POLICY}, {"count", 1, 0, O_COUNT}, {"plan", 1, 0, O_PLAN},
        {"calib", 1, 0, O_CALIB}, {"nproc", 1, 0, O_NPROC}, {"fmha-groups", 1, 0, O_GROUPS},
        {"streams", 1, 0, O_STREAMS}, {"bucket-mb", 1, 0, O_BUCKET}, {"no-calib", 0, 0, O_NOCALIB},
        {"calibrate-online", 0, 0, O_ONLINE}, {"online-window", 1, 0, O_OWIN}, {"precision", 1, 0, O_PREC},
        {"log-file", 1, 0, O_LOGFILE}, {"summary-json", 1, 0, O_SUMMARY}, {"keep-last", 1, 0, O_KEEP},
        {"skip-nonfinite", 0, 0, O_SKIPNF}, {"debug-nonfinite-step", 1, 0, O_DEBUGNF},
        {"dump-final", 1, 0, O_DFINAL}, {"dump-batches", 1, 0, O_DBATCH}, {"attn-dropout", 1, 0, O_ADROP},
        {"gemm-tune", 1, 0, O_TUNE}, {"grad-write", 1, 0, O_GWRITE}, {"fp8", 1, 0, O_FP8},
        {"graphs", 1, 0, O_GRAPHS}, {"last-layer", 1, 0, O_LAST}, {"act-tokens", 1, 0, O_ACTTOK},
        {"help", 0, 0, O_HELP},
        {0, 0, 0, 0}};
    args_default(a);
    /* a flag's value given twice is refused: which one was meant? */
    const char *given[sizeof opts / sizeof opts[0]] = {0};
    int c, bad = 0, at = -1, given_vr = 0, given_accum = 0;
    opterr = 0; /* said below as "unpad-train: ...", not under the path it was run by */
    while ((c = getopt_long(argc, argv, ":h", opts, &at)) != -1) {
        if (c == O_HELP || c == 'h') {
            usage(stdout);
            return -1;
        }
        if (c == '?' || c == ':') {
            unpad_getopt_error("unpad-train", c, argc, argv);
            usage(stderr);
            return 1;
        }
        if (optarg && at >= 0 && unpad_flag_once("unpad-train", opts[at].name, optarg, &given[at]))
            return 1;
        at = -1;
        given_vr |= c == O_VR;
        given_accum |= c == O_ACCUM;
        bad |= parse_one(c, optarg, a);
    }
    if (bad)
        return 1;
    if (optind < argc) {
        fprintf(stderr, "unpad-train: unexpected argument '%s'\n", argv[optind]);
        return 1;
    }
    if (a->data && a->synthetic) {
        fprintf(stderr, "unpad-train: --data and --synthetic exclude each other: shards, or random tokens\n");
        return 1;
    }
    if (given_vr && given_accum) {
        fprintf(stderr, "unpad-train: --virtual-ranks and --accum are the same setting (micro-batches a process "
                        "runs per step): give one\n");
        return 1;
    }
    if (!a->model || (!a->data && !a->synthetic) || !a->batch || !a->steps) {
        fprintf(stderr, "unpad-train: --model, one of --data / --synthetic, --batch and --steps are needed\n");
        usage(stderr);
        return 1;
    }
    if (a->calib && a->no_calib) {
        fprintf(stderr, "unpad-train: --calib and --no-calib exclude each other\n");
        return 1;
    }
    if (a->warmup > a->steps) {
        fprintf(stderr, "unpad-train: --warmup-steps %d is beyond --steps %d: the learning rate would never reach "
                "--lr; the schedule's warm-up is part of its --steps\n", a->warmup, a->steps);
        return 1;
    }
    if (a->no_dropout && a->attn_dropout > 0) {
        fprintf(stderr, "unpad-train: --no-dropout with --attn-dropout %g: no dropout is run; give one of them\n",
                a->attn_dropout);
        return 1;
    }
    return 0;
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
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : 2;
    if (strcmp(a.precision, UNPAD_PRECISION))
        return exec_precision(a.precision, argv);
    unpad_err err = {0}, e2 = {0};
    /* What the host can check is checked before a rank starts or a GPU is looked for, and said
     * once: under a launcher every rank checks, rank 0 speaks. */
    if (trainer_preflight(&a, &err)) {
        comm_t env;
        comm_env(&env);
        if (env.rank == 0)
            fprintf(stderr, "unpad-train: %s\n", err.msg);
        return 1;
    }
    /* Ranks are started (or found) before anything touches the GPU: fork after CUDA is unsafe. */
    int is_parent = 0;
    rc = comm_spawn(a.nproc, &is_parent, &err);
    if (is_parent) {
        if (rc && err.msg[0])
            fprintf(stderr, "unpad-train: %s\n", err.msg);
        return rc;
    }
    trainer t;
    const char *outcome = "failed";
    rc = trainer_create(&t, &a, argc, argv, &err) ? 1 : trainer_run(&t, &outcome, &err);
    if (rc && err.msg[0]) {
        fflush(stdout);
        fprintf(stderr, "unpad-train: %s\n", err.msg);
    }
    if (trainer_report_summary(&t, outcome, rc ? err.msg : "", &e2) && !rc) {
        fprintf(stderr, "unpad-train: %s\n", e2.msg);
        rc = 1;
    }
    trainer_free(&t);
    return rc;
}
