/* cmd_predict.c — `unpad predict`: one training step per operator on one GPU for a sampled batch,
 * in one or more length layouts side by side, and the expected throughput over many sampled
 * batches, all from the step model (step.h) that `whatif` and `plan` use. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
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

#define MAX_LAYOUTS 6 /* and, with --max-len, the uncapped unpadded batch beside them */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: unpad predict [--dist F] [--model F] [--hw F] [--calib F] [--gpus N] [--batch B]\n"
            "                     [--max-len N] [--layout LIST] [--padded] [--unfused] [--seed S]\n"
            "                     [--steps K] [--csv OUT] [--json OUT] [--quiet]\n"
            "  --dist F       sequence lengths: length,count CSV or one per line (default models/dists/wiki512.csv)\n"
            "  --model F      model config (default models/bert-large.cfg)\n"
            "  --hw F         hardware spec (default models/hw/h200-sxm.cfg)\n"
            "  --calib F      fitted coefficients (default: models/calib/<hw>.cfg if it exists)\n"
            "  --no-calib     the uncalibrated default coefficients instead\n"
            "  --gpus N       data-parallel GPUs, for all-reduce and exchange (default 1)\n"
            "  --batch B      sequences per GPU per step (default 56)\n"
            "  --max-len N    truncate longer sequences to N (at most the model's max_len)\n"
            "  --layout LIST  up to %d of unpadded (default), padded, pad-longest, buckets=B1/B2/...,\n"
            "                 packed[:K], side by side (docs/planning.md defines them)\n"
            "  --padded       the same as --layout unpadded,padded\n"
            "  --unfused      use unfused kernels (every intermediate through memory)\n"
            "  --seed S       seed of the sampled batches (default 1)\n"
            "  --steps K      the expected throughput over K sampled batches, 1..1000000 (default 100)\n"
            "  --csv OUT      the first sampled batch's predicted rows in the trace format (first\n"
            "                 layout; the others with -<layout> before the extension:\n"
            "                 predict.csv, predict-padded.csv)\n"
            "  --json OUT     write the prediction as JSON (docs/json.md); OUT '-': only the JSON, on\n"
            "                 standard output\n"
            "  --quiet        no progress line on stderr (it appears only on a terminal)\n"
            "The throughput is the expected one: total samples / total predicted time over K sampled\n"
            "steps. The operator table is the first sampled batch, to show where the time goes.\n"
            "With --gpus N every GPU is taken to run a batch like this one (`unpad whatif` for the\n"
            "balance between GPUs).\n",
            MAX_LAYOUTS);
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
} column;

/* The document of docs/json.md: the first layout in sampled_batch and expected, a `padded` layout
 * (when asked) in their padded_* keys, and every layout in `layouts`. */
static int predict_json(json_w *w, const resolve_inputs *in, const step_model *sm,
                        const column *col, int nlay, int gpus, int batch, int fused, int steps,
                        int cap, const net_cost *ar, const memory_use *mu, int fits)
{
    int pad = -1;
    for (int l = 1; l < nlay && pad < 0; l++)
        if (col[l].lay.kind == LAYOUT_PADDED && col[l].cap == cap)
            pad = l;
    const column *c0 = &col[0], *cp = pad >= 0 ? &col[pad] : NULL;
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
    if (cap)
        json_int(w, "max_len", cap);
    else
        json_null(w, "max_len");
    json_end(w);
    json_obj(w, "sampled_batch");
    json_int(w, "tokens", (long long)c0->sb.shape.real_tokens);
    json_num(w, "mean_len", c0->sb.shape.real_tokens / batch);
    json_num(w, "step_us", c0->st.step_us);
    json_num(w, "padded_step_us", cp ? cp->st.step_us : NAN);
    json_num(w, "step_overhead_us", sm->overhead_us);
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
        const op_cost *q = cp ? &cp->st.ops[i] : NULL;
        double tp = q ? q->instances * cp->st.time_us[i] : NAN;
        json_num(w, "padded_flops", q ? q->instances * q->flops : NAN);
        json_num(w, "padded_time_us", tp);
        json_num(w, "padded_share", q ? tp / cp->st.step_us : NAN);
        json_end(w);
    }
    json_end(w);
    json_end(w);
    double st0 = c0->sum_us / steps, stp = cp ? cp->sum_us / steps : NAN;
    json_obj(w, "expected");
    json_int(w, "steps", steps);
    json_num(w, "step_us", st0);
    json_num(w, "samples_per_s", (double)gpus * batch * steps / (c0->sum_us / 1e6));
    json_num(w, "model_tflops_per_gpu", c0->sum_flops / c0->sum_us / 1e6);
    json_num(w, "padded_step_us", stp);
    json_num(w, "padded_samples_per_s", cp ? (double)gpus * batch * steps / (cp->sum_us / 1e6) : NAN);
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
        json_num(w, "sampled_tokens", k->sb.shape.tokens);
        json_num(w, "sampled_padding_fraction", 1 - k->sb.shape.real_tokens / k->sb.shape.tokens);
        json_num(w, "sampled_step_us", k->st.step_us);
        json_num(w, "padding_fraction", 1 - k->sum_real / k->sum_tokens);
        json_num(w, "step_us", k->sum_us / steps);
        json_num(w, "samples_per_s", (double)gpus * batch * steps / (k->sum_us / 1e6));
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
    json_num(w, "available_gib", in->hw.memory_gib);
    json_bool(w, "fits", fits);
    json_end(w);
    return 0;
}

int cmd_predict(int argc, char **argv)
{
    static const struct option opts[] = {
        {"dist", required_argument, 0, 'd'}, {"model", required_argument, 0, 'm'},
        {"hw", required_argument, 0, 'w'},   {"calib", required_argument, 0, 'c'},
        {"no-calib", no_argument, 0, 'N'},   {"gpus", required_argument, 0, 'g'},
        {"batch", required_argument, 0, 'b'}, {"padded", no_argument, 0, 'p'},
        {"unfused", no_argument, 0, 'u'},    {"seed", required_argument, 0, 's'},
        {"steps", required_argument, 0, 'k'}, {"csv", required_argument, 0, 'o'},
        {"max-len", required_argument, 0, 'L'}, {"layout", required_argument, 0, 'Y'},
        {"json", required_argument, 0, 'j'}, {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'},       {0, 0, 0, 0}};
    resolve_req rq = {0};
    resolve_inputs in;
    memset(&in, 0, sizeof in);
    int gpus = 1, batch = 56, fused = 1, seed = 1, steps = 100, cap = 0, quiet = 0, c, nlay = 1;
    layout lays[MAX_LAYOUTS + 1] = {{.kind = LAYOUT_UNPADDED, .per_row = LAYOUT_PACK_DEFAULT}};
    const char *csv = NULL, *json = NULL;
    unpad_err err = {0};
    progress *prog = NULL;
    cli_json jdoc = {0};
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
        case 'p':
            nlay = 2;
            lays[1] = (layout){.kind = LAYOUT_PADDED, .per_row = LAYOUT_PACK_DEFAULT};
            break;
        case 'u': fused = 0; break;
        case 's': if (cli_int("predict", "--seed", optarg, 0, 2147483647, &seed)) return 2; break;
        case 'k': if (cli_int("predict", "--steps", optarg, 1, 1000000, &steps)) return 2; break;
        case 'o': csv = optarg; break;
        case 'j': json = optarg; break;
        case 'q': quiet = 1; break;
        case 'L': if (cli_int("predict", "--max-len", optarg, 1, 1 << 20, &cap)) return 2; break;
        case 'Y':
            if (layout_parse_list("--layout", optarg, lays, &nlay, MAX_LAYOUTS, &err))
                return cli_error("predict", &err) + 1;
            break;
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
    int rc = 1, *len = malloc(sizeof *len * (size_t)batch);
    int *scratch = malloc(sizeof *scratch * (size_t)layout_scratch_len(batch));
    column *col = calloc(MAX_LAYOUTS + 1, sizeof *col);
    unpad_dist capped = {0};
    step_model sm = {0};
    const model_cfg *m = &in.model;
    if (!len || !scratch || !col) {
        fprintf(stderr, "unpad predict: out of memory\n");
        goto out;
    }
    if (layout_check_cap(cap, m->max_len, &err) || layout_truncate(&in.dist, cap, &capped, &err) ||
        step_model_init(&sm, m, &in.hw, &in.calib, fused, &err)) {
        cli_error("predict", &err);
        goto out;
    }
    if (cap) /* what the cap changes: the same batches, uncapped */
        lays[nlay++] = (layout){.kind = LAYOUT_UNPADDED, .per_row = LAYOUT_PACK_DEFAULT};
    for (int l = 0; l < nlay; l++) {
        column *k = &col[l];
        k->lay = lays[l];
        k->cap = cap && l == nlay - 1 ? 0 : cap;
        /* every layout but buckets sees the same batches (the same seed), capped afterwards;
         * buckets draw from the capped distribution, one bucket a step */
        int buckets = k->lay.kind == LAYOUT_BUCKETS;
        if (layout_resolve(&k->lay, k->cap, m->max_len, (buckets ? &capped : &in.dist)->max_len,
                           "--layout", &err) ||
            layout_sampler_alloc(&k->lay, buckets ? &capped : &in.dist, (uint64_t)seed, &k->smp,
                                 &err)) {
            cli_error("predict", &err);
            goto out;
        }
        layout_name(&k->lay, k->name, sizeof k->name);
        if (cap && !k->cap)
            snprintf(k->name, sizeof k->name, "no cap (unpadded)");
    }
    { /* refuse an output that is an input or another output, before the work */
        char names[MAX_LAYOUTS + 1][4200];
        const char *outs[MAX_LAYOUTS + 2] = {0};
        for (int l = 0; csv && l < nlay; l++) {
            layout_csv_name(csv, col[l].name, l, names[l], sizeof names[l]);
            outs[l] = names[l];
        }
        outs[nlay] = json && strcmp(json, "-") ? json : NULL;
        if (cli_check_outputs("predict", &in, NULL, 0, outs, nlay + 1))
            goto out;
    }
    net_cost ar;
    net_allreduce(&in.hw, &in.calib, sm.param_bytes, gpus, &ar);
    /* The sampled batch (the first step of each layout's sampler), then the expected throughput
     * over `steps` sampled batches: total samples / total predicted time. */
    if (progress_start("unpad predict", "steps", steps, steps, progress_wanted(quiet), &prog, &err)) {
        cli_error("predict", &err);
        goto out;
    }
    for (int t = 0; t < steps; t++) {
        if (t % 1024 == 1023)
            progress_add(prog, 1024, 1024);
        for (int l = 0; l < nlay; l++) {
            column *k = &col[l];
            cost_step st;
            layout_sample(k->smp, len, batch);
            for (int i = 0; k->cap && i < batch; i++)
                len[i] = len[i] > k->cap ? k->cap : len[i];
            layout_batch(&k->lay, &sm, len, NULL, batch, scratch, &k->sb);
            if (step_model_predict(&sm, m, &in.hw, &in.calib, &k->sb, gpus, &st, &err)) {
                cli_error("predict", &err);
                goto out;
            }
            if (t == 0)
                k->st = st;
            k->sum_us += st.step_us;
            k->sum_tokens += k->sb.shape.tokens;
            k->sum_real += k->sb.shape.real_tokens;
            k->sum_flops += st.model_flops;
        }
    }
    progress_end(prog);
    prog = NULL;
    cli_prov prov;
    char pc[8192];
    cli_prov_init(&prov, argc, argv);
    cli_prov_inputs(&prov, &in, 1);
    cli_prov_seed(&prov, seed);
    cli_prov_comment(&prov, pc, sizeof pc);
    if (json && cli_json_open("predict", json, &prov, &jdoc))
        goto out;
    char label[4400];
    const cost_step *s0 = &col[0].st;
    printf("unpad predict: %s on %s, %d GPU%s x %d sequences from %s", m->name, in.hw.name, gpus,
           gpus > 1 ? "s" : "", batch, in.dist_path);
    if (cap)
        printf(", truncated to %d", cap);
    printf("\n  coefficients: %s; %s kernels\n", cli_calib_label(&in, label, sizeof label),
           fused ? "fused" : "unfused");
    cli_prov_print(stdout, &prov);
    printf("  the sampled batch (seed %d): %.0f real tokens (mean length %.1f), longest %d\n\n", seed,
           col[0].sb.shape.real_tokens, col[0].sb.shape.real_tokens / batch, col[0].sb.shape.max_len);
    printf("%-14s %-13s %5s %10s %10s %10s %6s", "operator", "class", "count", "GFLOP", "MB",
           "time_us", "share");
    for (int l = 1; l < nlay; l++)
        printf(" | %-17.17s", col[l].name);
    printf("\n%-14s %-13s %5s %10s %10s %10s %6s", "", "", "", "", "", col[0].name, "");
    for (int l = 1; l < nlay; l++)
        printf(" | %10s %6s", "time_us", "share");
    printf("\n");
    for (int i = 0; i < OP_COUNT; i++) {
        const op_cost *o = &s0->ops[i];
        double t = o->instances * s0->time_us[i];
        if (t == 0 && (i == OP_ALLREDUCE || i == OP_EXCHANGE))
            continue;
        printf("%-14s %-13s %5d %10.2f %10.1f %10.1f %5.1f%%", op_name((op_id)i),
               op_class_name(op_class_of((op_id)i)), o->instances, o->instances * o->flops / 1e9,
               o->instances * o->bytes / 1e6, t, 100 * t / s0->step_us);
        for (int l = 1; l < nlay; l++) {
            const cost_step *q = &col[l].st;
            double tp = q->ops[i].instances * q->time_us[i];
            printf(" | %10.1f %5.1f%%", tp, 100 * tp / q->step_us);
        }
        printf("\n");
    }
    printf("%-14s %-13s %5s %10s %10s %10.1f %5.1f%%", "step overhead", "", "", "", "",
           sm.overhead_us, 100 * sm.overhead_us / s0->step_us);
    for (int l = 1; l < nlay; l++)
        printf(" | %10.1f %5.1f%%", sm.overhead_us, 100 * sm.overhead_us / col[l].st.step_us);
    printf("\n\n%-46s", "");
    for (int l = 0; l < nlay; l++)
        printf(" %23.23s", col[l].name);
    printf("\n%-46s", "tokens computed, the sampled batch");
    for (int l = 0; l < nlay; l++)
        printf(" %23.0f", col[l].sb.shape.tokens);
    printf("\n%-46s", "padding fraction, the sampled batch");
    for (int l = 0; l < nlay; l++)
        printf(" %22.1f%%", 100 * (1 - col[l].sb.shape.real_tokens / col[l].sb.shape.tokens));
    printf("\n%-46s", "step time, the sampled batch (ms)");
    for (int l = 0; l < nlay; l++)
        printf(" %23.2f", col[l].st.step_us / 1e3);
    char what[96];
    snprintf(what, sizeof what, "\n\nexpected over %d sampled batches (seed %d):", steps, seed);
    printf("%s", what);
    printf("\n%-46s", "  padding fraction");
    for (int l = 0; l < nlay; l++)
        printf(" %22.1f%%", 100 * (1 - col[l].sum_real / col[l].sum_tokens));
    printf("\n%-46s", "  mean step time (ms)");
    for (int l = 0; l < nlay; l++)
        printf(" %23.2f", col[l].sum_us / steps / 1e3);
    printf("\n%-46s", "  throughput (samples/s: samples / total time)");
    for (int l = 0; l < nlay; l++)
        printf(" %23.1f", (double)gpus * batch * steps / (col[l].sum_us / 1e6));
    printf("\n%-46s", "  model TFLOP/s per GPU (useful work)");
    for (int l = 0; l < nlay; l++)
        printf(" %23.1f", col[l].sum_flops / col[l].sum_us / 1e6);
    if (nlay > 1) {
        printf("\n%-46s", "  time against the first layout");
        for (int l = 0; l < nlay; l++)
            printf(" %22.3fx", col[l].sum_us / col[0].sum_us);
    }
    printf("\n\n");
    char net[256], why[128];
    printf("  all-reduce over %d GPU%s: %s, %.3f ms\n", gpus, gpus > 1 ? "s" : "",
           net_algo_describe(&ar, net, sizeof net), ar.us / 1e3);
    memory_setup ms;
    memory_use mu;
    memory_trainer_setup(m, batch, col[0].lay.len, batch, gpus > 1, &ms);
    memory_predict(m, &in.hw, &ms, &mu);
    int fits = memory_fits(&mu, &in.hw, why, sizeof why);
    printf("  device memory per GPU (the trainer: an arena for %d x %d tokens): %.2f GiB, %s: %s\n",
           batch, col[0].lay.len, mu.total_gib, fits ? "fits" : "DOES NOT FIT", why);
    if (gpus > 1)
        printf("  (every GPU as fast as one GPU's sampled batch: unpad whatif adds the wait for the "
               "slowest of the %d)\n", gpus);
    if (json && predict_json(&jdoc.w, &in, &sm, col, nlay, gpus, batch, fused, steps, cap, &ar, &mu,
                             fits))
        goto out;
    if (csv) {
        for (int l = 0; l < nlay; l++) {
            char pbuf[4200];
            layout_csv_name(csv, col[l].name, l, pbuf, sizeof pbuf);
            if (write_csv(pbuf, &in, gpus, &col[l].st, pc))
                goto out;
            printf("%s %s", l ? "" : "  wrote", pbuf);
        }
        printf("\n");
    }
    if (json) {
        if (cli_json_close("predict", &jdoc))
            goto out;
        if (!jdoc.to_stdout)
            printf("  wrote %s\n", json);
    }
    rc = 0;
out:
    progress_end(prog);
    cli_json_abandon(&jdoc);
    for (int l = 0; col && l < nlay; l++)
        layout_sampler_free(col[l].smp);
    free(col);
    free(len);
    free(scratch);
    dist_free(&capped);
    step_model_free(&sm);
    resolve_inputs_free(&in);
    return rc;
}
