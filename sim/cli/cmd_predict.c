/* cmd_predict.c — `unpad predict`: one training step per operator on one GPU for a sampled batch,
 * in one or more length layouts side by side, and the expected throughput over many sampled
 * batches, all from the step model (step.h) that `whatif` and `plan` use. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "opts.h"
#include "layout.h"
#include "outfile.h"
#include "memory.h"
#include "net.h"
#include "progress.h"
#include "prov.h"
#include "resolve.h"
#include "step.h"
#include "trace.h"

const char cmd_predict_what[] = "predict one training step per operator (time, FLOPs, bytes)";

#define MAX_LAYOUTS 6 /* and, with --max-len, the uncapped unpadded batch beside them (when trainable) */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: unpad predict [--dist F] [--model F] [--hw F] [--calib F] [--gpus N] [--batch B]\n"
            "                     [--max-len N] [--layout LIST] [--padded] [--unfused] [--seed S]\n"
            "                     [--steps K] [--accum K] [--fp8 on|off] [--graphs on|off]\n"
            "                     [--last-layer heads|all] [--train-samples N [--price P]]\n"
            "                     [--csv OUT]\n"
            "                     [--json OUT]\n"
            "                     [--quiet]\n"
            "  --dist F       sequence lengths: length,count CSV or one per line, or a name in\n"
            "                 models/dists/ (default wiki512)\n"
            "  --model F      model config, or a name in models/ (default bert-large)\n"
            "  --hw F         hardware spec, or a name in models/hw/ (default h200-sxm)\n"
            "  --calib F      fitted coefficients, or a name in models/calib/ (default: <hw> if it exists)\n"
            "  --no-calib     the uncalibrated default coefficients instead\n"
            "  --faster L     what-if: make operators or classes F times as fast, L = NAME=F,...\n"
            "                 (fmha_bwd=1.3, gemm=1.1, overhead=2; docs/planning.md)\n"
            "  --hw-set L     what-if: the hardware spec's numbers, L = KEY=VALUE,...\n"
            "                 (gpus_per_node=4,node_bw_gbs=25: the keys of models/hw/*.cfg)\n"
            "  --gpus N       data-parallel GPUs, for all-reduce and exchange (default 1)\n"
            "  --batch B      sequences per GPU per step (per micro-batch with --accum; default 56)\n"
            "  --fp8 on|off   the trainer's --fp8 on (default off): its memory (FP8 weights, operand, E4M3\n"
            "                 FFN output), and its step times from models/calib/<hw>-fp8.cfg where that\n"
            "                 exists (fitted on --fp8 on traces), else the bf16 products'\n"
            "  --graphs on|off  the trainer's --graphs on (default off): each pass one CUDA graph, no\n"
            "                 wait for the host (the calibration's graph_launch_us; docs/planning.md)\n"
            "  --last-layer heads|all  the trainer's --last-layer: heads (the default) runs the last layer\n"
            "                 after its attention on the rows the heads read only; all: on every token\n"
            "  --accum K      gradient accumulation: K micro-batches of B a step, LAMB and the\n"
            "                 all-reduce once (unpad-train --virtual-ranks K), 1..1024 (default 1)\n"
            "  --max-len N    truncate longer sequences to N (at most the model's max_len)\n"
            "  --layout LIST  up to %d of unpadded (default), padded, pad-longest, buckets=B1/B2/...,\n"
            "                 packed[:K], side by side (docs/planning.md defines them)\n"
            "  --padded       the same as --layout unpadded,padded\n"
            "  --unfused      use unfused kernels (every intermediate through memory)\n"
            "  --seed S       seed of the sampled batches (default 1)\n"
            "  --steps K      the expected throughput over K sampled batches, 1..1000000 (default 100)\n"
            "  --csv OUT      the first sampled batch's predicted rows in the trace format (first\n"
            "                 layout; the others with -<layout> before the extension:\n"
            "                 predict.csv, predict-padded.csv); OUT '-' (one layout): only the CSV,\n"
            "                 on standard output\n"
            "  --json OUT     write the prediction as JSON (docs/json.md); OUT '-': only the JSON, on\n"
            "                 standard output\n"
            "  --quiet        no progress line on stderr (it appears only on a terminal)\n",
            MAX_LAYOUTS);
    cli_train_usage(f, 17);
    fprintf(f,
            "The throughput is the expected one: total samples / total predicted time over K sampled\n"
            "steps. The operator table is the first sampled batch, to show where the time goes.\n"
            "With --gpus N every GPU is taken to run a batch like this one (`unpad whatif` for the\n"
            "balance between GPUs).\n");
}

/* path with -tag before its extension: predict.csv, padded -> predict-padded.csv. */
static void tagged_name(const char *path, const char *tag, char *buf, size_t n)
{
    const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    size_t stem = dot && (!slash || dot > slash + 1) ? (size_t)(dot - path) : strlen(path);
    snprintf(buf, n, "%.*s-%s%s", (int)stem, path, tag, path + stem);
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

/* The CSV of layout l: OUT for the first, OUT with -<layout> before its extension for the others. */
static void layout_csv_name(const char *csv, const char *name, int l, char *buf, size_t n)
{
    if (l == 0) {
        snprintf(buf, n, "%s", csv);
        return;
    }
    char nm[64];
    snprintf(nm, sizeof nm, "%s", name);
    for (char *p = nm; *p; p++)
        if (*p == '/' || *p == ':' || *p == '=' || *p == ' ' || *p == '(' || *p == ')')
            *p = '-';
    tagged_name(csv, nm, buf, n);
}

/* One layout's prediction: the sampled batch per operator, and the sums over the sampled steps. */
typedef struct {
    layout lay;
    char name[64];
    int cap;                /* lengths truncated to this (0: none) */
    layout_sampler *smp;
    cost_step st;           /* the sampled batch */
    step_batch sb;
    double sum_us, sum_tokens, sum_real, sum_flops; /* over the sampled steps */
    int nsq;                /* the spread between the sampled steps (Welford): steps seen, */
    double run_mean_us, m2_us; /* their running mean and sum of squared deviations */
    long mem_tokens;        /* the trainer's activations in this layout, in tokens */
    memory_use mu;          /* the trainer's device memory per GPU in this layout */
    int fits;               /* mu within the hardware's memory (no hours to train when not) */
} column;

/* The flags. */
typedef struct {
    resolve_req rq;
    int gpus, batch, unfused, seed, steps, cap, quiet, padded;
    int accum;                   /* micro-batches per GPU and step */
    int fp8;                     /* --fp8 on: the trainer's memory with FP8 products */
    int last_heads;              /* --last-layer heads (1, the default) | all (0) */
    double train_samples, price; /* --train-samples, --price (0: not asked) */
    cli_prices prices;           /* --price as given */
    cli_layouts lays; /* the layouts asked (--layout, --padded) */
    const char *csv, *json;
} predict_opts;

/* One run: the inputs, the step model, a column per layout, what was predicted. */
typedef struct {
    predict_opts o;
    resolve_inputs in;
    unpad_dist capped;      /* the distribution truncated to --max-len (bucket layouts draw from it) */
    step_model sm;
    column col[MAX_LAYOUTS + 1];
    int nlay;
    int *len, *scratch;     /* (batch), (layout_scratch_len(batch)) */
    net_cost ar;
    memory_use mu;
    long mem_tokens;        /* the trainer's activations, in tokens */
    int fits;
    cli_prov prov;
    char pc[8192];          /* the provenance comment of the CSVs */
} predict_run;

/* The standard deviation of column k's sampled step times (NaN below 2 steps): how much one step's
 * batch moves its time, the GPU's own noise not included. */
static double step_sd_us(const column *k)
{
    if (k->nsq < 2)
        return NAN;
    return sqrt(k->m2_us / (k->nsq - 1));
}

/* Steps a measurement needs for its mean step time to lie within 1% of the expected one, 9 times in
 * 10 (1.645 standard deviations of the mean, the steps' batches drawn independently); NaN below 2
 * sampled steps. */
static double steps_for_1pct(const column *k)
{
    double sd = step_sd_us(k);
    if (isnan(sd))
        return NAN;
    double n = ceil(pow(1.645 * sd / (0.01 * (k->sum_us / k->nsq)), 2));
    return n < 1 ? 1 : n;
}

/* 1: column l times the sampled batch of column 0 (every layout but buckets draws the same batches;
 * a buckets layout draws each step's batch from one bucket), so its single-batch figures compare. */
static int same_batch(const predict_run *r, int l)
{
    return l == 0 || (r->col[0].lay.kind != LAYOUT_BUCKETS && r->col[l].lay.kind != LAYOUT_BUCKETS);
}

/* The document of docs/json.md: the first layout in sampled_batch and expected, a `padded` layout
 * (when asked) in their padded_* keys, and every layout in `layouts`. */
static void predict_json(json_w *w, const predict_run *r)
{
    const resolve_inputs *in = &r->in;
    const step_model *sm = &r->sm;
    const column *col = r->col;
    const net_cost *ar = &r->ar;
    const memory_use *mu = &r->mu;
    int nlay = r->nlay, gpus = r->o.gpus, batch = r->o.batch, fused = !r->o.unfused,
        steps = r->o.steps, cap = r->o.cap, fits = r->fits;
    int pad = -1;
    for (int l = 1; l < nlay && pad < 0; l++)
        if (col[l].lay.kind == LAYOUT_PADDED && col[l].cap == cap)
            pad = l;
    const column *c0 = &col[0], *cp = pad >= 0 ? &col[pad] : NULL;
    const column *cps = pad >= 0 && same_batch(r, pad) ? cp : NULL; /* the sampled batch, padded */
    json_obj(w, "config");
    json_int(w, "gpus", gpus);
    json_int(w, "batch", batch);
    json_bool(w, "fused", fused);
    json_bool(w, "padded", cp != NULL);
    if (cp)
        json_int(w, "pad_len", cp->lay.len);
    else
        json_null(w, "pad_len");
    json_int(w, "steps", steps);
    json_int(w, "accum", r->o.accum);
    json_bool(w, "fp8", r->o.fp8);
    json_bool(w, "fp8_step_times", r->in.calib.fp8);
    json_str(w, "last_layer", cli_last_layer_name(r->o.last_heads));
    if (cap)
        json_int(w, "max_len", cap);
    else
        json_null(w, "max_len");
    json_num(w, "train_samples", r->o.train_samples > 0 ? r->o.train_samples : NAN);
    json_num(w, "price_per_gpu_hour", r->o.price > 0 ? r->o.price : NAN);
    json_end(w);
    json_obj(w, "sampled_batch");
    json_int(w, "tokens", (long long)c0->sb.shape.real_tokens);
    json_num(w, "mean_len", c0->sb.shape.real_tokens / batch);
    json_num(w, "step_us", c0->st.step_us);
    json_num(w, "padded_step_us", cps ? cps->st.step_us : NAN);
    json_num(w, "step_overhead_us", sm->overhead_us);
    json_num(w, "host_wait_us", c0->st.host_wait_us);
    json_arr(w, "operators");
    for (int i = 0; i < OP_COUNT; i++) {
        const op_cost *o = &c0->st.ops[i];
        double t = o->instances * c0->st.time_us[i];
        if (t == 0 && (i == OP_ALLREDUCE || i == OP_EXCHANGE))
            continue;
        json_obj(w, NULL);
        json_str(w, "name", op_name((op_id)i));
        json_str(w, "class", op_class_name(op_class_of((op_id)i)));
        json_int(w, "instances", o->instances);
        json_num(w, "flops", o->instances * o->flops);
        json_num(w, "bytes", o->instances * o->bytes);
        json_num(w, "time_us", t);
        json_num(w, "share", t / c0->st.step_us);
        const op_cost *q = cps ? &cps->st.ops[i] : NULL;
        double tp = q ? q->instances * cps->st.time_us[i] : NAN;
        json_num(w, "padded_flops", q ? q->instances * q->flops : NAN);
        json_num(w, "padded_time_us", tp);
        json_num(w, "padded_share", q ? tp / cps->st.step_us : NAN);
        json_end(w);
    }
    json_end(w);
    json_end(w);
    double st0 = c0->sum_us / steps, stp = cp ? cp->sum_us / steps : NAN;
    json_obj(w, "expected");
    json_int(w, "steps", steps);
    json_num(w, "step_us", st0);
    json_num(w, "step_sd_us", step_sd_us(c0));
    json_num(w, "steps_for_1pct", steps_for_1pct(c0));
    json_num(w, "samples_per_s", (double)gpus * r->o.accum * batch * steps / (c0->sum_us / 1e6));
    json_num(w, "model_tflops_per_gpu", c0->sum_flops / c0->sum_us / 1e6);
    json_num(w, "padded_step_us", stp);
    json_num(w, "padded_samples_per_s", cp ? (double)gpus * r->o.accum * batch * steps / (cp->sum_us / 1e6) : NAN);
    json_num(w, "padded_model_tflops_per_gpu", cp ? c0->sum_flops / cp->sum_us / 1e6 : NAN);
    json_num(w, "speedup", cp ? stp / st0 : NAN);
    json_end(w);
    json_arr(w, "layouts");
    for (int l = 0; l < nlay; l++) {
        const column *k = &col[l];
        json_obj(w, NULL);
        json_str(w, "layout", k->name);
        if (k->cap)
            json_int(w, "max_len", k->cap);
        else
            json_null(w, "max_len");
        int same = same_batch(r, l);
        json_num(w, "sampled_tokens", same ? k->sb.shape.tokens : NAN);
        json_num(w, "sampled_padding_fraction", same ? 1 - k->sb.shape.real_tokens / k->sb.shape.tokens : NAN);
        json_num(w, "sampled_step_us", same ? k->st.step_us : NAN);
        json_num(w, "padding_fraction", 1 - k->sum_real / k->sum_tokens);
        json_num(w, "step_us", k->sum_us / steps);
        json_num(w, "step_sd_us", step_sd_us(k));
        json_num(w, "steps_for_1pct", steps_for_1pct(k));
        double sps = (double)gpus * r->o.accum * batch * steps / (k->sum_us / 1e6), train[3];
        json_num(w, "samples_per_s", sps);
        whatif_train(k->fits ? r->o.train_samples : 0, sps, gpus, r->o.price, &train[0], &train[1], &train[2]);
        json_num(w, "mem_gib", k->mu.total_gib);
        json_bool(w, "fits", k->fits);
        json_num(w, "train_hours", train[0]);
        json_num(w, "gpu_hours", train[1]);
        json_num(w, "cost", train[2]);
        json_end(w);
    }
    json_end(w);
    char d[256];
    json_obj(w, "allreduce");
    json_str(w, "algorithm", net_algo_name(ar->algo));
    json_str(w, "description", net_algo_describe(ar, d, sizeof d));
    json_num(w, "us", ar->us);
    json_end(w);
    json_obj(w, "memory");
    json_num(w, "gib", mu->total_gib);
    json_num(w, "tokens", (double)r->mem_tokens);
    json_num(w, "fp8_gib", mu->fp8_gib);
    json_num(w, "available_gib", in->hw.memory_gib);
    json_bool(w, "fits", fits);
    json_end(w);
}

static int predict_parse(int argc, char **argv, predict_opts *o)
{
    *o = (predict_opts){.gpus = 1, .batch = 56, .seed = 1, .steps = 100, .accum = 1, .last_heads = 1};
    const cli_opt opts[] = {
        CLI_OPTS_INPUTS(&o->rq),
        CLI_OPT_INT("gpus", &o->gpus, 1, 65536),
        CLI_OPT_INT("batch", &o->batch, 1, 65536),
        CLI_OPT_FLAG("padded", &o->padded),
        CLI_OPT_FLAG("unfused", &o->unfused),
        CLI_OPT_SEED(&o->seed),
        CLI_OPT_INT("steps", &o->steps, 1, 1000000),
        CLI_OPT_OUT("csv", &o->csv),
        CLI_OPT_INT("max-len", &o->cap, 1, 1 << 20),
        CLI_OPT_LAYOUTS("layout", &o->lays, MAX_LAYOUTS),
        CLI_OPT_OUT("json", &o->json),
        CLI_OPT_FLAG("quiet", &o->quiet),
        CLI_OPTS_TRAIN(&o->train_samples, &o->prices),
        CLI_OPT_INT("accum", &o->accum, 1, WHATIF_ACCUM_MAX),
        CLI_OPT_CALL("fp8", cli_parse_on_off, &o->fp8),
        CLI_OPT_CALL("graphs", cli_parse_on_off, &o->rq.graphs),
        CLI_OPT_LAST_LAYER(&o->last_heads),
    };
    int rc = cli_opts_parse("predict", argc, argv, 1, opts, CLI_NOPTS(opts), usage, NULL);
    if (rc >= 0)
        return rc;
    if (o->padded && o->lays.n) {
        fprintf(stderr, "unpad predict: --padded is --layout unpadded,padded: give one of them (add padded to "
                        "the --layout list)\n");
        return 2;
    }
    if (!o->lays.n) { /* the default: unpadded, and padded beside it with --padded */
        o->lays.v[o->lays.n++] = (layout){.kind = LAYOUT_UNPADDED, .per_row = LAYOUT_PACK_DEFAULT};
        if (o->padded)
            o->lays.v[o->lays.n++] = (layout){.kind = LAYOUT_PADDED, .per_row = LAYOUT_PACK_DEFAULT};
    }
    if (o->prices.n > 1) {
        fprintf(stderr, "unpad predict: --price: one price (a list goes with plan --hw A,B)\n");
        return 2;
    }
    o->price = o->prices.n ? o->prices.v[0] : 0;
    return cli_check_train("predict", o->train_samples, o->price) ? 2 : -1;
}

/* The distribution's longest length that has sequences. */
static int dist_top(const unpad_dist *d)
{
    int l = d->max_len;
    while (l > 1 && !(d->count[l] > 0))
        l--;
    return l;
}

/* 1 when --max-len truncates no length of the distribution (none is longer than the cap). */
static int cap_changes_nothing(const predict_run *r)
{
    const unpad_dist *d = &r->in.dist;
    return r->o.cap && r->in.dist_longest <= d->max_len && dist_top(d) <= r->o.cap;
}

/* The step model, the capped distribution and a column per layout (with --max-len, the uncapped
 * unpadded batch last); every layout is resolved here, before any work. */
static int predict_setup(predict_run *r)
{
    const predict_opts *o = &r->o;
    const model_cfg *m = &r->in.model;
    unpad_err err = {0};
    r->len = malloc(sizeof *r->len * (size_t)o->batch);
    r->scratch = malloc(sizeof *r->scratch * (size_t)layout_scratch_len(o->batch));
    if (!r->len || !r->scratch) {
        fprintf(stderr, "unpad predict: out of memory\n");
        return 1;
    }
    if (cli_check_fp8("predict", o->fp8, &r->in))
        return 1;
    if (layout_check_cap(o->cap, m->max_len, &err) || layout_truncate(&r->in.dist, o->cap, &r->capped, &err) ||
        step_model_init(&r->sm, m, &r->in.hw, &r->in.calib,
                        (o->unfused ? 0 : STEP_FUSED) | (o->last_heads ? STEP_LAST_HEADS : 0), &err))
        return cli_error("predict", &err);
    layout lays[MAX_LAYOUTS + 1];
    r->nlay = o->lays.n;
    memcpy(lays, o->lays.v, sizeof lays[0] * (size_t)r->nlay);
    /* what the cap changes: the same batches, uncapped (none where the file has lengths the model
     * cannot train) */
    if (o->cap && r->in.dist_longest <= m->max_len && !cap_changes_nothing(r))
        lays[r->nlay++] = (layout){.kind = LAYOUT_UNPADDED, .per_row = LAYOUT_PACK_DEFAULT};
    for (int l = 0; l < r->nlay; l++) {
        column *k = &r->col[l];
        k->lay = lays[l];
        k->cap = o->cap && l >= o->lays.n ? 0 : o->cap;
        /* every layout but buckets sees the same batches (the same seed), capped afterwards;
         * buckets draw from the capped distribution, one bucket a step */
        const unpad_dist *d = k->lay.kind == LAYOUT_BUCKETS ? &r->capped : &r->in.dist;
        if (layout_resolve(&k->lay, k->cap, m->max_len, d->max_len, "--layout", &err) ||
            layout_sampler_alloc(&k->lay, d, (uint64_t)o->seed, &k->smp, &err))
            return cli_error("predict", &err);
        layout_name(&k->lay, k->name, sizeof k->name);
        if (o->cap && !k->cap)
            snprintf(k->name, sizeof k->name, "no cap (unpadded)");
    }
    return 0;
}

/* Refuses an output that is an input or another output, before the work. */
static int predict_check_outputs(const predict_run *r)
{
    const char *csv = r->o.csv, *json = r->o.json;
    if (outfile_is_stdout(csv) && r->nlay > 1) {
        fprintf(stderr, "unpad predict: --csv -: a CSV per layout (%d layouts), named after OUT; give a file name\n",
                r->nlay);
        return 1;
    }
    char names[MAX_LAYOUTS + 1][4200];
    const char *outs[MAX_LAYOUTS + 2] = {0};
    for (int l = 0; csv && l < r->nlay; l++) {
        layout_csv_name(csv, r->col[l].name, l, names[l], sizeof names[l]);
        outs[l] = names[l];
    }
    outs[r->nlay] = json && strcmp(json, "-") ? json : NULL;
    return cli_check_outputs("predict", &r->in, NULL, 0, outs, r->nlay + 1);
}

/* The sampled batch (the first step of each layout's sampler), then the sums over `steps` sampled
 * batches for the expected throughput: total samples / total predicted time. */
static int predict_sample(predict_run *r)
{
    const predict_opts *o = &r->o;
    unpad_err err = {0};
    progress *prog;
    if (progress_start("unpad predict", "steps", o->steps, o->steps, progress_wanted(o->quiet), &prog, &err))
        return cli_error("predict", &err);
    for (int t = 0; t < o->steps; t++) {
        if (t % 1024 == 1023)
            progress_add(prog, 1024, 1024);
        for (int l = 0; l < r->nlay; l++) {
            column *k = &r->col[l];
            double step_t = 0;
            for (int a = 0; a < o->accum; a++) { /* the step's micro-batches; the fixed part once */
                cost_step st;
                layout_sample(k->smp, r->len, o->batch);
                for (int i = 0; k->cap && i < o->batch; i++)
                    r->len[i] = r->len[i] > k->cap ? k->cap : r->len[i];
                step_batch sb;
                layout_batch(&k->lay, &r->sm, r->len, NULL, o->batch, r->scratch, &sb);
                if (step_model_predict(&r->sm, &r->in.model, &r->in.hw, &r->in.calib, &sb, o->gpus, &st, &err)) {
                    progress_end(prog);
                    return cli_error("predict", &err);
                }
                if (t == 0 && a == 0) {
                    k->st = st;
                    k->sb = sb;
                }
                /* each micro-batch's forward, backward and sample exchange; LAMB, the overhead and
                 * the all-reduce once, with the last; the wait for the host once, with the first */
                double once = st.ops[OP_LAMB].instances * st.time_us[OP_LAMB] + r->sm.overhead_us +
                              st.ops[OP_ALLREDUCE].instances * st.time_us[OP_ALLREDUCE];
                double part = st.step_us - st.host_wait_us - (a == o->accum - 1 ? 0 : once) +
                              (a == 0 ? st.host_wait_us : 0);
                k->sum_us += part;
                step_t += part;
                k->sum_tokens += sb.shape.tokens;
                k->sum_real += sb.shape.real_tokens;
                k->sum_flops += st.model_flops;
            }
            double dev = step_t - k->run_mean_us;
            k->run_mean_us += dev / ++k->nsq;
            k->m2_us += dev * (step_t - k->run_mean_us);
        }
    }
    progress_end(prog);
    return 0;
}

/* Column l's time t of the sampled batch and its share of the step; "-" where l draws another batch. */
static void print_share(const predict_run *r, int l, double t)
{
    if (same_batch(r, l))
        printf(" | %10.1f %5.1f%%", t, 100 * t / r->col[l].st.step_us);
    else
        printf(" | %10s %6s", "-", "-");
}

/* The title and the operator table of the sampled batch, a time and share column per layout. */
static void predict_print_ops(const predict_run *r)
{
    const predict_opts *o = &r->o;
    const column *col = r->col;
    int nlay = r->nlay;
    const cost_step *s0 = &col[0].st;
    printf("unpad predict: %s on %s, %d GPU%s x %d sequences", r->in.model.name, r->in.hw.name, o->gpus,
           o->gpus > 1 ? "s" : "", o->batch);
    if (o->accum > 1)
        printf(" x %d micro-batches (the table: one micro-batch)", o->accum);
    printf(" from %s", r->in.dist_path);
    if (o->cap)
        printf(cap_changes_nothing(r) ? ", --max-len %d (no length is longer: nothing truncated)" : ", truncated to %d",
               o->cap);
    if (r->in.dist_longest > r->in.model.max_len)
        printf(" (the file's lengths go up to %d)", r->in.dist_longest);
    printf("; %s kernels; %s\n", o->unfused ? "unfused" : "fused", cli_last_layer_text(o->last_heads));
    cli_prov_print(stdout, &r->prov);
    int first_buckets = col[0].lay.kind == LAYOUT_BUCKETS, others = 0;
    for (int l = 1; l < nlay; l++)
        others += !same_batch(r, l);
    printf("  the sampled batch (seed %d%s): %.0f real tokens (mean length %.1f), longest %d\n", o->seed,
           first_buckets ? ", from one bucket" : "", col[0].sb.shape.real_tokens,
           col[0].sb.shape.real_tokens / o->batch, col[0].sb.shape.max_len);
    if (others)
        printf("  (%s: their single-batch\n   figures are left out (-); the means over the sampled batches "
               "compare the layouts)\n",
               first_buckets ? "buckets draw each step's batch from one bucket, the other layouts other batches"
                             : "buckets layouts draw each step's batch from one bucket, not this batch");
    printf("\n");
    printf("%-14s %-13s %5s %10s %10s %10s %6s", "operator", "class", "count", "GFLOP", "MB",
           "time_us", "share");
    for (int l = 1; l < nlay; l++)
        printf(" | %-17.17s", col[l].name);
    printf("\n%-14s %-13s %5s %10s %10s %10s %6s", "", "", "", "", "", col[0].name, "");
    for (int l = 1; l < nlay; l++)
        printf(" | %10s %6s", "time_us", "share");
    printf("\n");
    for (int i = 0; i < OP_COUNT; i++) {
        const op_cost *c = &s0->ops[i];
        double t = c->instances * s0->time_us[i];
        if (t == 0 && (i == OP_ALLREDUCE || i == OP_EXCHANGE))
            continue;
        printf("%-14s %-13s %5d %10.2f %10.1f %10.1f %5.1f%%", op_name((op_id)i),
               op_class_name(op_class_of((op_id)i)), c->instances, c->instances * c->flops / 1e9,
               c->instances * c->bytes / 1e6, t, 100 * t / s0->step_us);
        for (int l = 1; l < nlay; l++) {
            const cost_step *q = &col[l].st;
            print_share(r, l, q->ops[i].instances * q->time_us[i]);
        }
        printf("\n");
    }
    double ov = r->sm.overhead_us;
    printf("%-14s %-13s %5s %10s %10s %10.1f %5.1f%%", "step overhead", "", "", "", "", ov, 100 * ov / s0->step_us);
    for (int l = 1; l < nlay; l++)
        print_share(r, l, ov);
    if (r->sm.host_launch_us > 0) { /* the GPU's wait for the host at the step's start */
        printf("\n%-14s %-13s %5s %10s %10s %10.1f %5.1f%%", "host wait", "", "", "", "", s0->host_wait_us,
               100 * s0->host_wait_us / s0->step_us);
        for (int l = 1; l < nlay; l++)
            print_share(r, l, col[l].st.host_wait_us);
    }
}

/* The layouts side by side: the sampled batch, then the expectation over the sampled steps. */
static void predict_print_layouts(const predict_run *r)
{
    const column *col = r->col;
    int nlay = r->nlay, steps = r->o.steps;
    printf("\n\n%-46s", "");
    for (int l = 0; l < nlay; l++)
        printf(" %23.23s", col[l].name);
    printf("\n%-46s", "tokens computed, the sampled batch");
    for (int l = 0; l < nlay; l++)
        same_batch(r, l) ? printf(" %23.0f", col[l].sb.shape.tokens) : printf(" %23s", "-");
    printf("\n%-46s", "padding fraction, the sampled batch");
    for (int l = 0; l < nlay; l++)
        same_batch(r, l) ? printf(" %22.1f%%", 100 * (1 - col[l].sb.shape.real_tokens / col[l].sb.shape.tokens))
                         : printf(" %23s", "-");
    printf("\n%-46s", "step time, the sampled batch (ms)");
    for (int l = 0; l < nlay; l++)
        same_batch(r, l) ? printf(" %23.2f", col[l].st.step_us / 1e3) : printf(" %23s", "-");
    if (r->o.accum > 1)
        printf("\n\nexpected over %d sampled steps of %d micro-batches (seed %d):", steps, r->o.accum, r->o.seed);
    else
        printf("\n\nexpected over %d sampled batches (seed %d):", steps, r->o.seed);
    printf("\n%-46s", "  padding fraction");
    for (int l = 0; l < nlay; l++)
        printf(" %22.1f%%", 100 * (1 - col[l].sum_real / col[l].sum_tokens));
    printf("\n%-46s", "  mean step time (ms)");
    for (int l = 0; l < nlay; l++)
        printf(" %23.2f", col[l].sum_us / steps / 1e3);
    if (steps >= 2) {
        printf("\n%-46s", "  sd from batch to batch (% of the mean)");
        for (int l = 0; l < nlay; l++)
            printf(" %22.1f%%", 100 * step_sd_us(&col[l]) / (col[l].sum_us / steps));
        printf("\n%-46s", "  steps to measure the mean within 1%");
        for (int l = 0; l < nlay; l++)
            printf(" %23.0f", steps_for_1pct(&col[l]));
    }
    printf("\n%-46s", "  throughput (samples/s: samples / total time)");
    for (int l = 0; l < nlay; l++)
        printf(" %23.1f", (double)r->o.gpus * r->o.accum * r->o.batch * steps / (col[l].sum_us / 1e6));
    printf("\n%-46s", "  model TFLOP/s per GPU (useful work)");
    for (int l = 0; l < nlay; l++)
        printf(" %23.1f", col[l].sum_flops / col[l].sum_us / 1e6);
    printf("\n%-46s", "  trainer memory per GPU, GiB (NO: too big)");
    for (int l = 0; l < nlay; l++) {
        char m[32];
        snprintf(m, sizeof m, "%.2f%s", col[l].mu.total_gib,
                 !col[l].fits ? " NO" : memory_tight(&col[l].mu, &r->in.hw) ? " TIGHT" : "");
        printf(" %23s", m);
    }
    if (nlay > 1) {
        printf("\n%-46s", "  time against the first layout");
        for (int l = 0; l < nlay; l++)
            printf(" %22.3fx", col[l].sum_us / col[0].sum_us);
    }
    if (r->o.train_samples > 0) {
        char count[64], label[128];
        double t[MAX_LAYOUTS + 1][3];
        for (int l = 0; l < nlay; l++) /* a layout that does not fit trains nothing */
            whatif_train(col[l].fits ? r->o.train_samples : 0,
                         (double)r->o.gpus * r->o.accum * r->o.batch * steps / (col[l].sum_us / 1e6),
                         r->o.gpus, r->o.price, &t[l][0], &t[l][1], &t[l][2]);
        snprintf(label, sizeof label, "  hours to train %s samples",
                 cli_count_format(r->o.train_samples, count, sizeof count));
        printf("\n%-46s", label);
        for (int l = 0; l < nlay; l++)
            isnan(t[l][0]) ? printf(" %23s", "-") : printf(" %23.2f", t[l][0]);
        printf("\n%-46s", "  GPU-hours");
        for (int l = 0; l < nlay; l++)
            isnan(t[l][1]) ? printf(" %23s", "-") : printf(" %23.1f", t[l][1]);
        if (r->o.price > 0) {
            snprintf(label, sizeof label, "  cost at %g per GPU-hour", r->o.price);
            printf("\n%-46s", label);
            for (int l = 0; l < nlay; l++)
                isnan(t[l][2]) ? printf(" %23s", "-") : printf(t[l][2] < 100 ? " %23.2f" : " %23.0f", t[l][2]);
        }
    }
    printf("\n\n");
    int top = dist_top(&r->in.dist);
    for (int l = 0; l < nlay; l++)
        if (col[l].lay.kind == LAYOUT_PADDED && col[l].lay.len > top) {
            printf("  (padded: every sequence to %d; the data's longest is %d: --max-len %d pads to that)\n",
                   col[l].lay.len, top, top);
            break;
        }
}

/* Each layout's trainer memory per GPU (as unpad whatif sizes it: activations for B x mean + 5
 * sqrt(B) x sd of the lengths unpadded, B x the padded length otherwise); the first layout's into
 * r->mu, r->mem_tokens and r->fits. */
static void predict_memory(predict_run *r)
{
    int gpus = r->o.gpus, batch = r->o.batch;
    for (int l = 0; l < r->nlay; l++) {
        column *k = &r->col[l];
        memory_setup ms;
        const layout *ly = &k->lay;
        k->mem_tokens = ly->kind == LAYOUT_UNPADDED ? memory_dist_tokens(batch, 1, ly->len, &r->in.dist)
                                                     : (long)batch * ly->len;
        memory_trainer_setup(&r->in.model, batch, k->mem_tokens, batch, gpus > 1, &ms);
        ms.fp8 = r->o.fp8; /* MEMORY_FP8_ON is --fp8 on's 1 */
        ms.last_heads = r->o.last_heads;
        memory_predict(&r->in.model, &r->in.hw, &ms, &k->mu);
        k->fits = memory_fits(&k->mu, &r->in.hw, NULL, 0);
    }
    r->mu = r->col[0].mu;
    r->mem_tokens = r->col[0].mem_tokens;
    r->fits = r->col[0].fits;
}

/* The all-reduce and the trainer's device memory (predict_memory's, the first layout). */
static void predict_print_memory(predict_run *r)
{
    int gpus = r->o.gpus;
    char net[256], why[128];
    printf("  all-reduce over %d GPU%s: %s, %.3f ms\n", gpus, gpus > 1 ? "s" : "",
           net_algo_describe(&r->ar, net, sizeof net), r->ar.us / 1e3);
    cli_graphs_note(stdout, &r->in, &gpus, 1, 0);
    int unpadded = r->col[0].lay.kind == LAYOUT_UNPADDED;
    long tokens = r->mem_tokens;
    memory_fits(&r->mu, &r->in.hw, why, sizeof why);
    printf("  device memory per GPU (the trainer: activations for %ld tokens, %s): %.2f GiB, %s: %s\n", tokens,
           unpadded ? "B x mean + 5 sqrt(B) x sd of the lengths" : "B x the padded length", r->mu.total_gib,
           !r->fits ? "DOES NOT FIT" : memory_tight(&r->mu, &r->in.hw) ? "fits, TIGHT (under 1% to spare)" : "fits",
           why);
    if (r->o.fp8)
        printf("  (--fp8 on: %.2f GiB of it are the FP8 weight copies, operand buffer and scales, and FFN1's\n"
               "  output takes one byte an element; %s)\n", r->mu.fp8_gib, cli_fp8_times(&r->in));
    if (gpus > 1)
        printf("  (every GPU as fast as one GPU's sampled batch: unpad whatif adds the wait for the "
               "slowest of the %d)\n", gpus);
}

/* Each layout's sampled batch as a CSV in the trace format. */
static int predict_write_csvs(const predict_run *r)
{
    for (int l = 0; l < r->nlay; l++) {
        char pbuf[4200];
        layout_csv_name(r->o.csv, r->col[l].name, l, pbuf, sizeof pbuf);
        if (write_csv(pbuf, &r->in, r->o.gpus, &r->col[l].st, r->pc))
            return 1;
        printf("%s %s", l ? "" : "  wrote", pbuf);
    }
    printf("\n");
    return 0;
}

/* Everything after the flags and the inputs: setup, sampling, the tables, the files. */
static int predict_run_all(predict_run *r, int argc, char **argv)
{
    const predict_opts *o = &r->o;
    cli_json jdoc = {0};
    if (predict_setup(r) || predict_check_outputs(r))
        return 1;
    net_allreduce(&r->in.hw, &r->in.calib, r->sm.param_bytes, o->gpus, &r->ar);
    if (predict_sample(r))
        return 1;
    cli_prov_sampled(&r->prov, argc, argv, &r->in, o->seed, r->pc, sizeof r->pc);
    if (o->json && cli_json_open("predict", o->json, &r->prov, &jdoc))
        return 1;
    predict_memory(r);
    predict_print_ops(r);
    predict_print_layouts(r);
    predict_print_memory(r);
    if (o->json)
        predict_json(&jdoc.w, r);
    int rc = o->csv ? predict_write_csvs(r) : 0;
    if (!rc && o->json) {
        rc = cli_json_close("predict", &jdoc);
        if (!rc && !jdoc.to_stdout)
            printf("  wrote %s\n", o->json);
    }
    cli_json_abandon(&jdoc);
    return rc;
}

int cmd_predict(int argc, char **argv)
{
    predict_run *r = calloc(1, sizeof *r);
    if (!r) {
        fprintf(stderr, "unpad predict: out of memory\n");
        return 1;
    }
    int rc = predict_parse(argc, argv, &r->o);
    if (rc < 0) {
        r->o.rq.fp8 = r->o.fp8;
        r->o.rq.max_len = r->o.cap;
        rc = cli_inputs_load("predict", &r->o.rq, &r->in, 1) ? 1 : predict_run_all(r, argc, argv);
    }
    for (int l = 0; l < r->nlay; l++)
        layout_sampler_free(r->col[l].smp);
    free(r->len);
    free(r->scratch);
    dist_free(&r->capped);
    step_model_free(&r->sm);
    resolve_inputs_free(&r->in);
    free(r);
    return rc;
}
