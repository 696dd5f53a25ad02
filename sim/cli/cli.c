/* cli.c — flag parsing and input loading for the `unpad` subcommands. */
#include "cli.h"

#include <errno.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fit.h"
#include "outfile.h"

int cli_int(const char *cmd, const char *flag, const char *val, long lo, long hi, int *out)
{
    long v;
    if (!val) {
        fprintf(stderr, "unpad %s: %s needs a value\n", cmd, flag);
        return 1;
    }
    if (unpad_parse_long(val, &v)) {
        fprintf(stderr, "unpad %s: %s: bad number '%s' (expected an integer in [%ld, %ld])\n", cmd,
                flag, val, lo, hi);
        return 1;
    }
    if (v < lo || v > hi) {
        fprintf(stderr, "unpad %s: %s = %ld is out of range (expected [%ld, %ld])\n", cmd, flag, v,
                lo, hi);
        return 1;
    }
    *out = (int)v;
    return 0;
}

int cli_double(const char *cmd, const char *flag, const char *val, double lo, double hi, double *out)
{
    double v;
    if (!val) {
        fprintf(stderr, "unpad %s: %s needs a value\n", cmd, flag);
        return 1;
    }
    if (unpad_parse_double(val, &v)) {
        fprintf(stderr, "unpad %s: %s: bad number '%s' (expected a number in [%g, %g])\n", cmd, flag,
                val, lo, hi);
        return 1;
    }
    if (v < lo || v > hi) {
        fprintf(stderr, "unpad %s: %s = %g is out of range (expected [%g, %g])\n", cmd, flag, v, lo,
                hi);
        return 1;
    }
    *out = v;
    return 0;
}

/* Appends x to *v (k used of cap, doubled as needed). 0, or 1 after printing why. */
static int int_append(const char *cmd, int x, int **v, int *k, int *cap)
{
    if (*k == *cap) {
        int *g = realloc(*v, (size_t)(*cap *= 2) * sizeof **v);
        if (!g) {
            fprintf(stderr, "unpad %s: out of memory\n", cmd);
            return 1;
        }
        *v = g;
    }
    (*v)[(*k)++] = x;
    return 0;
}

/* One item of an integer list: N, or a range A..B (every integer), A..BxK (times K) or A..B+K
 * (plus K), the values up to B, appended to *v. 0, or 1 after printing why. */
static int int_item(const char *cmd, const char *flag, char *tok, long lo, long hi, int **v, int *k, int *cap)
{
    char *dots = strstr(tok, "..");
    if (!dots) {
        int one;
        return cli_int(cmd, flag, tok, lo, hi, &one) || int_append(cmd, one, v, k, cap);
    }
    long a, b, step = 1;
    int times = 0;
    *dots = '\0';
    char *end = dots + 2, *op = strpbrk(end, "x+");
    if (op) {
        times = *op == 'x';
        *op = '\0';
        if (unpad_parse_long(op + 1, &step) || step < (times ? 2 : 1)) {
            fprintf(stderr, "unpad %s: %s: bad step '%s' in '%s..%s%c%s' (A..B+K: K >= 1; A..BxK: K >= 2)\n",
                    cmd, flag, op + 1, tok, end, times ? 'x' : '+', op + 1);
            return 1;
        }
    }
    if (unpad_parse_long(tok, &a) || unpad_parse_long(end, &b) || a > b || a < lo || b > hi) {
        fprintf(stderr, "unpad %s: %s: bad range '%s..%s' (expected A..B with %ld <= A <= B <= %ld, "
                        "optionally +K or xK: 16..128+16, 8..4096x2)\n", cmd, flag, tok, end, lo, hi);
        return 1;
    }
    if (times && a < 1) {
        fprintf(stderr, "unpad %s: %s: a range xK starts at 1 or more, not %ld\n", cmd, flag, a);
        return 1;
    }
    for (long x = a, made = 1;; x = times ? x * step : x + step, made++) {
        if (made > 4096) {
            fprintf(stderr, "unpad %s: %s: the range '%s..%s' makes more than 4096 values\n", cmd, flag, tok, end);
            return 1;
        }
        if (int_append(cmd, (int)x, v, k, cap))
            return 1;
        if (times ? x > b / step : x > b - step) /* the next value would pass B */
            return 0;
    }
}

int cli_int_list(const char *cmd, const char *flag, const char *val, long lo, long hi, int **out,
                 int *n)
{
    if (!val) {
        fprintf(stderr, "unpad %s: %s needs a value\n", cmd, flag);
        return 1;
    }
    if (unpad_list_has_empty(val)) {
        fprintf(stderr, "unpad %s: %s: an empty item in '%s'\n", cmd, flag, val);
        return 1;
    }
    int cap = 16, k = 0;
    int *v = malloc((size_t)cap * sizeof *v);
    char *copy = strdup(val);
    if (!v || !copy) {
        free(v);
        free(copy);
        fprintf(stderr, "unpad %s: out of memory\n", cmd);
        return 1;
    }
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        if (int_item(cmd, flag, tok, lo, hi, &v, &k, &cap)) {
            free(v);
            free(copy);
            return 1;
        }
    free(copy);
    if (!k) {
        free(v);
        fprintf(stderr, "unpad %s: %s: empty list\n", cmd, flag);
        return 1;
    }
    *out = v;
    *n = k;
    return 0;
}

int cli_project_path(const char *cmd, const char *rel, char *buf, size_t n)
{
    unpad_err err = {0};
    return resolve_project_path(rel, buf, n, &err) ? cli_error(cmd, &err) : 0;
}

int cli_inputs_load(const char *cmd, resolve_req *rq, resolve_inputs *in, int need_dist)
{
    unpad_err err = {0};
    rq->need_dist = need_dist;
    return resolve_inputs_load(rq, in, &err) ? cli_error(cmd, &err) : 0;
}

int cli_resolve_names(const char *cmd, const char *flag, const char **v, int n, const char *dir, const char *ext,
                      cli_path *store)
{
    unpad_err err = {0};
    for (int i = 0; i < n; i++) {
        if (!v[i])
            continue;
        if (resolve_named(v[i], flag, dir, ext, store[i].s, sizeof store[i].s, &err)) {
            fprintf(stderr, "unpad %s: %s\n", cmd, err.msg);
            return 2;
        }
        v[i] = store[i].s;
    }
    return -1;
}

int cli_error(const char *cmd, const unpad_err *err)
{
    fprintf(stderr, "unpad %s: %s\n", cmd, err->msg);
    return 1;
}

int cli_traces_load(const char *cmd, const char *const *traces, int n, const char *const *model_paths, int nm,
                    const char *hw, trace_set *sets, model_cfg *models, int *nmodels, int max)
{
    unpad_err err = {0};
    *nmodels = 0;
    for (int i = 0; i < nm; i++)
        if (model_load(model_paths[i], &models[(*nmodels)++], &err))
            return cli_error(cmd, &err);
    for (int i = 0; i < n; i++) {
        struct stat a, b;
        for (int j = 0; j < i; j++)
            if (stat(traces[i], &a) == 0 && stat(traces[j], &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
                fprintf(stderr, "unpad %s: %s: given twice (also as %s): its rows would count twice\n", cmd,
                        traces[i], traces[j]);
                return 1;
            }
        if (trace_read(traces[i], &sets[i], &err) || fit_check_trace(&sets[i], traces[i], hw, &err))
            return cli_error(cmd, &err);
        if (sets[i].products != sets[0].products) {
            fprintf(stderr, "unpad %s: %s:%d: measured with %s products, but %s with %s: one calibration describes "
                    "one kind of products (bf16, or unpad-train --fp8 on's); give the traces of one kind\n", cmd,
                    traces[i], sets[i].products_line, trace_products_name(sets[i].products), traces[0],
                    trace_products_name(sets[0].products));
            return 1;
        }
    }
    char mdir[RESOLVE_PATH_LEN];
    if (cli_project_path(cmd, "models", mdir, sizeof mdir))
        return 1;
    if (fit_models_resolve(sets, n, mdir, models, nmodels, max, &err))
        return cli_error(cmd, &err);
    for (int i = 0; i < n; i++)
        if (fit_check_trace_model(&sets[i], traces[i], models, *nmodels, &err))
            return cli_error(cmd, &err);
    return 0;
}

int cli_check_configs(const char *cmd, const int *gpus, int ng, const int *batch, int nb, int unique)
{
    for (int i = 0; i < ng; i++)
        for (int b = 0; b < nb; b++) {
            if ((long)gpus[i] * batch[b] > (1L << 24)) {
                fprintf(stderr, "unpad %s: %d GPUs x %d sequences is over 16,777,216 sequences a step\n",
                        cmd, gpus[i], batch[b]);
                return 1;
            }
            for (int k = 0; unique && k < i * nb + b; k++)
                if (gpus[k / nb] == gpus[i] && batch[k % nb] == batch[b]) {
                    fprintf(stderr, "unpad %s: %d GPUs x %d sequences is asked twice\n", cmd, gpus[i],
                            batch[b]);
                    return 1;
                }
        }
    return 0;
}

void cli_sweep_init(cli_sweep *w)
{
    memset(w, 0, sizeof *w);
    whatif_setup_default(&w->s);
    w->s.steps = 0; /* not given: cli_sweep_check */
    w->seed = 1;
}

int cli_opt_count(const char *cmd, const char *flag, const char *val, void *dst)
{
    char num[64];
    snprintf(num, sizeof num, "%s", val);
    size_t n = strlen(num);
    char last = n ? num[n - 1] : '\0';
    /* k thousand, M million, G or B billion, in either case (a count has no milli) */
    int up = toupper((unsigned char)last);
    double scale = up == 'K' ? 1e3 : up == 'M' ? 1e6 : up == 'G' || up == 'B' ? 1e9 : 1, v;
    if (scale > 1)
        num[n - 1] = '\0';
    if (strlen(val) >= sizeof num || unpad_parse_double(num, &v) || !(v * scale >= 1 && v * scale <= 1e15)) {
        fprintf(stderr, "unpad %s: %s: '%s' is not a count in [1, 1e15] (e.g. 3000000, 3e6, 3M, 400k, 1B)\n", cmd,
                flag, val);
        return 1;
    }
    *(double *)dst = v * scale;
    return 0;
}

const char *cli_count_format(double v, char *buf, size_t n)
{
    char digits[48];
    int len = snprintf(digits, sizeof digits, "%.0f", v);
    size_t o = 0;
    for (int i = 0; i < len && o + 2 < n; i++) {
        if (i && digits[i - 1] != '-' && (len - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

int cli_opt_prices(const char *cmd, const char *flag, const char *val, void *dst)
{
    cli_prices *p = dst;
    p->n = 0;
    if (unpad_list_has_empty(val)) {
        fprintf(stderr, "unpad %s: %s: an empty item in '%s'\n", cmd, flag, val);
        return 1;
    }
    char buf[512];
    if (strlen(val) >= sizeof buf) {
        fprintf(stderr, "unpad %s: %s: list too long\n", cmd, flag);
        return 1;
    }
    snprintf(buf, sizeof buf, "%s", val);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (p->n == CLI_MAX_PRICES) {
            fprintf(stderr, "unpad %s: %s: more than %d prices\n", cmd, flag, CLI_MAX_PRICES);
            return 1;
        }
        if (cli_double(cmd, flag, t, 1e-9, 1e9, &p->v[p->n]))
            return 1;
        p->n++;
    }
    return 0;
}

int cli_check_train(const char *cmd, double samples, double price)
{
    if (price > 0 && !(samples > 0)) {
        fprintf(stderr, "unpad %s: --price needs --train-samples (the cost is that of training them)\n", cmd);
        return 1;
    }
    return 0;
}

void cli_train_usage(FILE *f, int col)
{
    fprintf(f, "  --train-samples N%*stime to train N samples (3e6, 2.5M, 400k, 1B): hours and GPU-hours\n"
               "  --price P%*swith --train-samples: its cost at P per GPU-hour\n",
            col - 19 > 1 ? col - 19 : 1, "", col - 11 > 1 ? col - 11 : 1, "");
}

int cli_sweep_check(const char *cmd, cli_sweep *w, int unique)
{
    w->s.gpu_hour_price = w->prices.n ? w->prices.v[0] : 0;
    /* without --steps: 1000 steps, fewer for a configuration of more than 8,388 sequences a step */
    w->s.seq_budget = w->s.steps ? 0 : WHATIF_AUTO_SEQS;
    w->s.steps = w->s.steps ? w->s.steps : 1000;
    return cli_check_train(cmd, w->s.train_samples, w->s.gpu_hour_price) ||
           (!w->gpus.v && cli_int_list(cmd, "--gpus", "8", 1, 65536, &w->gpus.v, &w->gpus.n)) ||
           (!w->batch.v && cli_int_list(cmd, "--batch", "56", 1, 65536, &w->batch.v, &w->batch.n)) ||
           cli_check_configs(cmd, w->gpus.v, w->gpus.n, w->batch.v, w->batch.n, unique);
}

void cli_steps_note(FILE *f, const whatif_setup *s, const int *gpus, const int *batch, const int *accum, int k)
{
    int shown = 0, col = 0, more = 0;
    for (int i = 0; i < k; i++) {
        long n = (long)gpus[i] * (accum && accum[i] > 1 ? accum[i] : 1) * batch[i];
        int st = whatif_config_steps(s, n), seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = gpus[j] == gpus[i] && batch[j] == batch[i] && (!accum || accum[j] == accum[i]);
        if (st >= s->steps || seen)
            continue;
        if (shown == 8) { /* a long sweep: the rest by count */
            shown++;
            more = 1;
            continue;
        }
        if (shown > 8) {
            more++;
            continue;
        }
        if (!shown++) {
            char b[48], per[48];
            fprintf(f, "  sampled steps: %d a configuration, fewer for a step of more than %s sequences (at least "
                       "%d steps and %s\n  sequences; --steps K samples K each):", s->steps,
                    cli_count_format((double)(s->seq_budget / s->steps), per, sizeof per), WHATIF_AUTO_MIN_STEPS,
                    cli_count_format((double)s->seq_budget, b, sizeof b));
            col = 41;
        }
        char item[96];
        int len = snprintf(item, sizeof item, " %d GPU%s x %d", gpus[i], gpus[i] > 1 ? "s" : "", batch[i]);
        if (accum && accum[i] > 1)
            len += snprintf(item + len, sizeof item - len, " x %d micro-batches", accum[i]);
        len += snprintf(item + len, sizeof item - len, ": %d", st);
        if (shown > 1) { /* a comma, and a new line where the item would pass 116 columns */
            fprintf(f, ",%s", col + 1 + len > 116 ? "\n " : "");
            col = col + 1 + len > 116 ? 1 : col + 1;
        }
        fprintf(f, "%s", item);
        col += len;
    }
    if (more)
        fprintf(f, ",\n  and %d more configuration%s (each row's count: the steps column of the CSV and JSON)", more,
                more > 1 ? "s" : "");
    if (shown)
        fprintf(f, "\n");
}

void cli_sweep_free(cli_sweep *w)
{
    cli_ints_free(&w->gpus);
    cli_ints_free(&w->batch);
}

void cli_setup_inputs(whatif_setup *s, const resolve_inputs *in, int seed)
{
    s->seed = (uint64_t)seed;
    whatif_setup_inputs(s, &in->dist, &in->model, &in->hw, &in->calib);
}

int cli_check_layouts(const char *cmd, int max_len, const resolve_inputs *in, const layout *lay, int n)
{
    unpad_err err = {0};
    if (layout_check_cap(max_len, in->model.max_len, &err))
        return cli_error(cmd, &err);
    for (int l = 0; l < n; l++) {
        layout t = lay[l];
        if (layout_resolve(&t, max_len, in->model.max_len, in->dist.max_len, "--layout", &err))
            return cli_error(cmd, &err);
    }
    return 0;
}

const char *cli_fp8_times(const resolve_inputs *in)
{
    static char buf[2 * CFG_STR_LEN + 160];
    if (in->calib.fp8)
        return "step times with FP8 products (an FP8 calibration)";
    snprintf(buf, sizeof buf, "step times: the bf16 products' (%s; --fp8 on's need a calibration fitted on "
             "--fp8 on traces, models/calib/%s-fp8.cfg)",
             in->calib_from == CALIB_DEFAULT ? "uncalibrated defaults" : "a bf16 calibration", in->hw.name);
    return buf;
}

const char *cli_last_layer_name(int last_heads)
{
    return last_heads ? "heads" : "all";
}

const char *cli_last_layer_text(int last_heads)
{
    return last_heads ? "the last layer after its attention on the heads' rows (--last-layer heads)"
                      : "every layer on all tokens (--last-layer all)";
}

void cli_graphs_note(FILE *f, const resolve_inputs *in, const int *gpus, int n, int virtual_ranks)
{
    int several = 0;
    for (int i = 0; i < n; i++)
        several |= gpus[i] > 1;
    if (in->calib.graphs && several && !virtual_ranks)
        fprintf(f, "  --graphs on: unpad-train launches its passes as graphs on several GPUs only with --bucket-mb 0 "
                   "(its bucketed all-reduces start from inside the backward)\n");
}

int cli_check_fp8(const char *cmd, int fp8, const resolve_inputs *in)
{
    if (!fp8 || in->hw.peak_fp8_tflops > 0)
        return 0;
    fprintf(stderr, "unpad %s: --fp8 on: %s has no FP8 tensor cores (%s gives no peak_fp8_tflops)\n", cmd,
            in->hw.name, in->hw_path);
    return 1;
}

static const char *calib_label(const resolve_inputs *in, char *buf, size_t n);

const char *cli_calib_label(const resolve_inputs *in, char *buf, size_t n)
{
    calib_label(in, buf, n);
    size_t l = strlen(buf);
    if (in->calib.faster[0] && l < n) /* a what-if on top: never to be taken for the calibration */
        snprintf(buf + l, n - l, ", what-if --faster %s", in->calib.faster);
    return buf;
}

static const char *calib_label(const resolve_inputs *in, char *buf, size_t n)
{
    if (in->calib_from == CALIB_DEFAULT) {
        snprintf(buf, n, "uncalibrated defaults");
        return buf;
    }
    if (in->calib_from == CALIB_FITTED) {
        snprintf(buf, n, "calibrated (%s)", in->calib_path);
        return buf;
    }
    /* `unpad calibrate --transfer` names the hardware it was fitted on in its first comment */
    char from[256] = "other hardware", *text = NULL;
    if (unpad_read_file(in->calib_path, &text, NULL, NULL) == UNPAD_OK) {
        const char *p = strstr(text, "(fitted on ");
        if (p && sscanf(p, "(fitted on %255[^)])", from) != 1)
            snprintf(from, sizeof from, "other hardware");
        free(text);
    }
    snprintf(buf, n, "estimate (transferred from %s: %s)", from, in->calib_path);
    return buf;
}

/* The files cli_check_outputs accepted last: files[0..ni) the inputs, then no outputs (kept, so
 * that files a command writes beside its outputs are checked against the same run). */
static struct {
    const char **files;
    int ni, no;
} run_files;

int cli_check_outputs(const char *cmd, const resolve_inputs *in, const char *const *more, int nm,
                      const char *const *outs, int no)
{
    const char **all = calloc((size_t)nm + 5 + (size_t)no, sizeof *all);
    if (!all) {
        fprintf(stderr, "unpad %s: out of memory\n", cmd);
        return 1;
    }
    int n = 0;
    if (in) {
        all[n++] = in->model_path[0] ? in->model_path : NULL;
        all[n++] = in->hw_path[0] ? in->hw_path : NULL;
        all[n++] = in->calib_path[0] ? in->calib_path : NULL;
        all[n++] = in->dist.count && in->dist_path[0] ? in->dist_path : NULL;
        all[n++] = in->have_plan && in->plan_path[0] ? in->plan_path : NULL;
    }
    for (int i = 0; i < nm; i++)
        all[n++] = more[i];
    unpad_err err = {0};
    int rc = outfile_check_all(outs, no, all, n, &err);
    if (rc) {
        free(all);
        return cli_error(cmd, &err);
    }
    for (int i = 0; i < no; i++)
        all[n + i] = outs[i];
    free(run_files.files);
    run_files.files = all;
    run_files.ni = n;
    run_files.no = no;
    return 0;
}

int cli_check_more_outputs(const char *const *outs, int no, unpad_err *err)
{
    const int ni = run_files.ni, np = run_files.no;
    const char **all = calloc((size_t)np + (size_t)no + 1, sizeof *all);
    if (!all)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    for (int i = 0; i < np; i++)
        all[i] = run_files.files[ni + i];
    for (int i = 0; i < no; i++)
        all[np + i] = outs[i];
    int rc = outfile_check_all(all, np + no, run_files.files, ni, err);
    free(all);
    return rc;
}

/* ---- --json ------------------------------------------------------------------------------------ */

int cli_json_open(const char *cmd, const char *path, const cli_prov *prov, cli_json *j)
{
    memset(j, 0, sizeof j[0]);
    snprintf(j->path, sizeof j->path, "%s", path);
    if (outfile_is_stdout(path)) {
        /* The document keeps the real standard output; printf's text goes to /dev/null. */
        unpad_err err = {0};
        int std, fd = -1;
        if (outfile_stdout(&std, &err) || (fd = dup(std)) < 0 || !(j->out = fdopen(fd, "w"))) {
            fprintf(stderr, "unpad %s: --json -: %s\n", cmd, err.msg[0] ? err.msg : strerror(errno));
            if (fd >= 0)
                close(fd);
            return 1;
        }
        j->to_stdout = 1;
    }
    /* The document is built in memory and written out only when complete. */
    if (!(j->f = open_memstream(&j->buf, &j->len))) {
        fprintf(stderr, "unpad %s: --json: out of memory\n", cmd);
        return 1;
    }
    json_init(&j->w, j->f, 1);
    json_obj(&j->w, NULL);
    json_int(&j->w, "unpad_json", CLI_JSON_FORMAT);
    json_str(&j->w, "command", cmd);
    cli_prov_json(&j->w, prov);
    return 0;
}

int cli_json_close(const char *cmd, cli_json *j)
{
    unpad_err err = {0};
    json_end(&j->w);
    int rc = json_finish(&j->w, &err);
    if (fclose(j->f) != 0 && !rc)
        rc = unpad_fail(&err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    j->f = NULL;
    if (!rc && j->out) { /* standard output */
        int bad = fwrite(j->buf, 1, j->len, j->out) != j->len;
        if (fclose(j->out) != 0)
            bad = 1;
        j->out = NULL;
        if (bad)
            rc = unpad_fail(&err, UNPAD_EIO, NULL, 0, "write failed: %s", strerror(errno));
    } else if (!rc) { /* a file: complete or not at all */
        unpad_outfile *o;
        if (!(rc = outfile_open(j->path, &o, &err))) {
            fwrite(j->buf, 1, j->len, outfile_stream(o));
            rc = outfile_commit(o, &err);
        }
    }
    free(j->buf);
    j->buf = NULL;
    if (rc) {
        fprintf(stderr, "unpad %s: --json %s: %s\n", cmd, j->path, err.msg);
        return 1;
    }
    return 0;
}

void cli_json_abandon(cli_json *j)
{
    if (j->f)
        fclose(j->f);
    if (j->out)
        fclose(j->out);
    free(j->buf);
    j->f = j->out = NULL;
    j->buf = NULL;
}
