/* plot.c — data files for the plot kinds and the gnuplot runs that draw them. */
#include "plot.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cost.h"
#include "group.h"
#include "step.h"
#include "outfile.h"

#define GNUPLOT_INSTALL "install it with: sudo apt-get install gnuplot-nox (or run `make deps` as root)"

int plot_gnuplot_find(char *path, size_t n, unpad_err *err)
{
    const char *env = getenv("UNPAD_GNUPLOT");
    if (env && *env) {
        if (access(env, X_OK) != 0)
            return unpad_fail(err, UNPAD_EIO, NULL, 0,
                              "gnuplot not found at UNPAD_GNUPLOT=%s: %s", env, GNUPLOT_INSTALL);
        snprintf(path, n, "%s", env);
        return UNPAD_OK;
    }
    const char *p = getenv("PATH");
    if (!p || !*p)
        p = "/usr/local/bin:/usr/bin:/bin";
    while (*p) {
        const char *e = strchr(p, ':');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len && len + 9 < n) {
            snprintf(path, n, "%.*s/gnuplot", (int)len, p);
            if (access(path, X_OK) == 0)
                return UNPAD_OK;
        }
        p = e ? e + 1 : p + len;
    }
    return unpad_fail(err, UNPAD_EIO, NULL, 0, "gnuplot is missing: %s", GNUPLOT_INSTALL);
}

const char *plot_image_format(const char *path)
{
    static const char *const fmt[] = {"png", "svg", "pdf"};
    const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    if (!dot || (slash && dot < slash))
        return NULL;
    for (size_t i = 0; i < sizeof fmt / sizeof fmt[0]; i++)
        if (!strcasecmp(dot + 1, fmt[i]))
            return fmt[i];
    return NULL;
}

/* 1 when gnuplot has the terminal named t (its GPVAL_TERMINALS). */
static int gnuplot_has(const char *gp, const char *t)
{
    char e[256];
    snprintf(e, sizeof e, "exit status (strstrt(' '.GPVAL_TERMINALS.' ', ' %s ') > 0 ? 0 : 3)", t);
    pid_t pid = fork();
    if (pid < 0)
        return 0;
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
            dup2(null, 2);
        }
        execl(gp, "gnuplot", "-e", e, (char *)NULL);
        _exit(127);
    }
    int status;
    return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int plot_image_check(const char *flag, const char *path, const char **fmt, unpad_err *err)
{
    *fmt = plot_image_format(path);
    if (!*fmt)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "%s %s: the extension gives the image's format: .png, .svg or .pdf", flag, path);
    if (strcmp(*fmt, "pdf"))
        return UNPAD_OK;
    char gp[4096];
    int rc = plot_gnuplot_find(gp, sizeof gp, err);
    if (rc)
        return rc;
    if (!gnuplot_has(gp, "pdfcairo"))
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "%s %s: this gnuplot (%s) has no pdfcairo terminal to draw a PDF: write .png or .svg",
                          flag, path, gp);
    return UNPAD_OK;
}

void plot_quote(const char *s, char *buf, size_t n)
{
    size_t o = 0;
    if (n < 3) {
        if (n)
            buf[0] = '\0';
        return;
    }
    buf[o++] = '\'';
    for (; *s && o + 3 < n; s++) {
        if (*s == '\'')
            buf[o++] = '\''; /* '' is a quote inside a single-quoted gnuplot string */
        buf[o++] = *s;
    }
    buf[o++] = '\'';
    buf[o] = '\0';
}

int plot_render(const char *plot_dir, const char *kind, const char *vars, const char *out,
                unpad_err *err)
{
    char gp[4096], script[4096];
    int rc = plot_gnuplot_find(gp, sizeof gp, err);
    if (rc)
        return rc;
    snprintf(script, sizeof script, "%s/%s.gp", plot_dir, kind);
    if (access(script, R_OK) != 0)
        return unpad_fail(err, UNPAD_EIO, script, 0, "cannot read the gnuplot script: %s",
                          strerror(errno));
    static const char *const terms[2] = {"png", "svg"};
    for (int t = 0; t < 2; t++) {
        char file[4096], qfile[4200], qdir[4200], e[16384];
        snprintf(file, sizeof file, "%s.%s", out, terms[t]);
        /* gnuplot draws into a temporary, renamed to the final name only when not empty. */
        unpad_outfile *img;
        if ((rc = outfile_open(file, &img, err)))
            return rc;
        plot_quote(outfile_temp_path(img), qfile, sizeof qfile);
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/", plot_dir);
        plot_quote(dir, qdir, sizeof qdir);
        if (snprintf(e, sizeof e, "term='%s'; out=%s; plotdir=%s; %s", terms[t], qfile, qdir,
                     vars ? vars : "") >= (int)sizeof e) {
            outfile_abort(img);
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "gnuplot variables too long");
        }
        char log[] = "/tmp/unpad-gnuplot-XXXXXX";
        int fd = mkstemp(log);
        if (fd < 0) {
            outfile_abort(img);
            return unpad_fail(err, UNPAD_EIO, NULL, 0, "cannot make a temporary file: %s",
                              strerror(errno));
        }
        pid_t pid = fork();
        if (pid < 0) {
            close(fd);
            unlink(log);
            outfile_abort(img);
            return unpad_fail(err, UNPAD_EIO, NULL, 0, "cannot start gnuplot: %s", strerror(errno));
        }
        if (pid == 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            execl(gp, "gnuplot", "-e", e, script, (char *)NULL);
            _exit(127);
        }
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        close(fd);
        char msg[2048] = "";
        FILE *lf = fopen(log, "r");
        if (lf) {
            size_t got = fread(msg, 1, sizeof msg - 1, lf);
            msg[got] = '\0';
            fclose(lf);
        }
        unlink(log);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            outfile_abort(img);
            return unpad_fail(err, UNPAD_EIO, script, 0, "gnuplot failed (%s, exit %d): %s", file,
                              WIFEXITED(status) ? WEXITSTATUS(status) : -1, msg);
        }
        if (outfile_size(img) <= 0) {
            outfile_abort(img);
            return unpad_fail(err, UNPAD_EIO, script, 0, "gnuplot wrote no %s: %s", file, msg);
        }
        if ((rc = outfile_commit(img, err)))
            return rc;
    }
    return UNPAD_OK;
}

/* ---- data files -------------------------------------------------------------------------------- */

/* A CSV written complete or not at all (outfile.h), so a reader never sees half a file. */
typedef struct {
    unpad_outfile *o;
    FILE *f;
    char path[4096];
} csv_file;

static int csv_open(csv_file *c, const char *out, const char *suffix, const char *prov,
                    unpad_err *err)
{
    snprintf(c->path, sizeof c->path, "%s%s", out, suffix);
    c->f = NULL;
    int rc = outfile_open(c->path, &c->o, err);
    if (rc)
        return rc;
    c->f = outfile_stream(c->o);
    if (prov)
        fputs(prov, c->f);
    return UNPAD_OK;
}

static int csv_close(csv_file *c, unpad_err *err)
{
    c->f = NULL;
    return outfile_commit(c->o, err);
}

static void csv_abandon(csv_file *c)
{
    if (c->f) {
        outfile_abort(c->o);
        c->f = NULL;
    }
}

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* 16279552 -> "16,279,552" */
static void format_thousands(double v, char *buf, size_t n)
{
    char digits[32];
    snprintf(digits, sizeof digits, "%.0f", v);
    size_t len = strlen(digits), o = 0;
    for (size_t i = 0; i < len && o + 2 < n; i++) {
        if (i && (len - i) % 3 == 0 && digits[i - 1] != '-')
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
}

/* ---- hist ------------------------------------------------------------------------------------ */

int plot_hist(const char *plot_dir, const unpad_dist *d, const char *prov, const char *out,
              unpad_err *err)
{
    csv_file c;
    char count[64];
    int rc = csv_open(&c, out, ".csv", prov, err);
    if (rc)
        return rc;
    fprintf(c.f, "length,count,percent\n");
    for (int l = 1; l <= d->max_len; l++)
        fprintf(c.f, "%d,%s,%.6f\n", l, dist_count_text(d->count[l], count, sizeof count),
                100.0 * d->count[l] / d->total);
    if ((rc = csv_close(&c, err)))
        return rc;
    dist_stats s;
    dist_compute_stats(d, &s);
    char qpath[4200], title[1024], qtitle[1100], vars[8192];
    if (s.fractional)
        dist_count_text(s.count, count, sizeof count);
    else
        format_thousands(s.count, count, sizeof count);
    snprintf(title, sizeof title, "Sequence lengths of %s: %s %s", base_name(d->source), count,
             s.fractional ? "(counts as weights)" : "sequences");
    plot_quote(c.path, qpath, sizeof qpath);
    plot_quote(title, qtitle, sizeof qtitle);
    snprintf(vars, sizeof vars,
             "data=%s; title=%s; mean=%.17g; p50=%d; maxlen=%d; spike=%.17g; pad=%.17g", qpath,
             qtitle, s.mean, s.p50, s.max, 100 * s.share_at_max,
             100 * dist_padding_fraction(d, s.max));
    return plot_render(plot_dir, "hist", vars, out, err);
}

/* ---- load ------------------------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The value at fraction q of sorted v[0..n) (linear between neighbours). */
static double quantile(const double *v, int n, double q)
{
    double pos = q * (n - 1);
    int i = (int)pos;
    return i + 1 < n ? v[i] + (pos - i) * (v[i + 1] - v[i]) : v[n - 1];
}

/* The per-GPU step times (ms) of one sampled step under every policy: t[p * gpus + g]. */
static int load_compute(const plot_load_setup *s, double *t, unpad_err *err)
{
    int k = s->gpus, n = s->gpus * s->batch, rc;
    int *len = malloc((size_t)n * sizeof *len), *glen = malloc((size_t)n * sizeof *glen);
    int64_t *w = malloc((size_t)n * sizeof *w);
    balance_ws *ws = NULL;
    balance_result r = {0};
    dist_sampler *smp = NULL;
    step_model sm = {0};
    if (!len || !glen || !w) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        goto out;
    }
    seq_cost sc;
    if ((rc = cost_seq_model(s->model, s->hw, s->calib, &sc, err)) ||
        (rc = step_model_init(&sm, s->model, s->hw, s->calib, step_trainer_flags(s->last_heads), err)) ||
        (rc = dist_sampler_alloc(s->dist, s->seed, &smp, err)) ||
        (rc = balance_ws_alloc(n, k, &ws, err)) || (rc = balance_result_alloc(n, k, &r, err)))
        goto out;
    dist_sample(smp, len, n);
    balance_weights(&sc, len, n, w);
    for (int p = 0; p < BAL_POLICY_COUNT; p++) {
        balance_input in = {len, s->weights_tokens ? NULL : w, n, k, p, s->count};
        if ((rc = balance_assign(ws, &in, &r, err)))
            goto out;
        for (int g = 0; g < k; g++) {
            int m = 0;
            for (int q = r.start[g]; q < r.start[g + 1]; q++)
                glen[m++] = len[r.seq[q]];
            cost_step st;
            step_batch b;
            if (m == 0) {
                t[p * k + g] = 0;
                continue;
            }
            /* the step model of predict and whatif, on this GPU's batch */
            if ((rc = step_batch_of(&sm, glen, m, &b, err)) ||
                (rc = step_model_predict(&sm, s->model, s->hw, s->calib, &b, k, &st, err)))
                goto out;
            if (p == BAL_NONE) /* loader order moves no samples */
                st.step_us -= st.ops[OP_EXCHANGE].instances * st.time_us[OP_EXCHANGE];
            t[p * k + g] = st.step_us / 1e3;
        }
    }
out:
    dist_sampler_free(smp);
    step_model_free(&sm);
    balance_ws_free(ws);
    if (r.gpu)
        balance_result_free(&r);
    free(len);
    free(glen);
    free(w);
    return rc;
}

/* A what-if picture says so: "\nWHAT-IF: --faster L; --hw-set L" after the title (nothing for none). */
static void what_if_title(char *title, size_t n, const char *faster, const char *hw_set)
{
    size_t o = strlen(title);
    int f = faster && faster[0], h = hw_set && hw_set[0];
    if ((f || h) && o < n)
        snprintf(title + o, n - o, "\nWHAT-IF: %s%s%s%s%s", f ? "--faster " : "", f ? faster : "", f && h ? "; " : "",
                 h ? "--hw-set " : "", h ? hw_set : "");
}

int plot_load(const char *plot_dir, const plot_load_setup *s, const char *out, unpad_err *err)
{
    int k = s->gpus, rc;
    if (k < 1 || s->batch < 1 || (long)k * s->batch > (1 << 22))
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "load plot: %d GPUs x %d sequences", k,
                          s->batch);
    double *t = malloc((size_t)k * BAL_POLICY_COUNT * sizeof *t), *v = malloc((size_t)k * sizeof *v);
    csv_file c = {0}, cg = {0};
    if (!t || !v) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        goto out;
    }
    if ((rc = load_compute(s, t, err)) || (rc = csv_open(&c, out, ".csv", s->prov, err)) ||
        (rc = csv_open(&cg, out, "-gpus.csv", s->prov, err)))
        goto out;
    /* Per policy: the step ends with the slowest GPU (max); mean/max is the busy share. */
    fprintf(c.f, "policy,step_ms,mean_ms,min_ms,p25_ms,median_ms,p75_ms,imbalance,idle_percent\n");
    fprintf(cg.f, "policy_index,policy,gpu,ms\n");
    for (int p = 0; p < BAL_POLICY_COUNT; p++) {
        double sum = 0;
        for (int g = 0; g < k; g++) {
            v[g] = t[p * k + g];
            sum += v[g];
            fprintf(cg.f, "%d,%s,%d,%.6f\n", p, balance_policy_name(p), g, v[g]);
        }
        qsort(v, (size_t)k, sizeof *v, cmp_double);
        double mean = sum / k, mx = v[k - 1];
        fprintf(c.f, "%s,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.4f\n", balance_policy_name(p), mx,
                mean, v[0], quantile(v, k, 0.25), quantile(v, k, 0.5), quantile(v, k, 0.75),
                mean > 0 ? mx / mean : 1, mx > 0 ? 100 * (1 - mean / mx) : 0);
    }
    rc = csv_close(&c, err);
    if (!rc)
        rc = csv_close(&cg, err);
    c.f = cg.f = NULL;
    if (rc)
        goto out;
    char qpath[4200], qgpus[4200], title[1024], qtitle[1100], vars[12288];
    snprintf(title, sizeof title,
             "Predicted time of each GPU on one sampled step (seed %llu): %s on %d x %s, %d "
             "sequences per GPU (%s counts), lengths from %s%s%s",
             (unsigned long long)s->seed, s->model->name, k, s->hw->name, s->batch,
             balance_count_name(s->count), base_name(s->dist->source), s->calib->graphs ? ", CUDA graphs" : "",
             s->last_heads ? "" : ", every layer on all tokens");
    what_if_title(title, sizeof title, s->calib->faster, s->hw_set);
    plot_quote(c.path, qpath, sizeof qpath);
    plot_quote(cg.path, qgpus, sizeof qgpus);
    plot_quote(title, qtitle, sizeof qtitle);
    snprintf(vars, sizeof vars, "data=%s; data_gpus=%s; title=%s; gpus=%d; npol=%d", qpath, qgpus,
             qtitle, k, BAL_POLICY_COUNT);
    rc = plot_render(plot_dir, "load", vars, out, err);
out:
    csv_abandon(&c);
    csv_abandon(&cg);
    free(t);
    free(v);
    return rc;
}

/* ---- imbalance ------------------------------------------------------------------------------- */

typedef struct {
    int gpus, batch, steps, accum;
    char series[64];   /* "policy/count" */
    char layout[64];   /* "" in a CSV without the column */
    double mean, p99;
} imb_point;

/* What the what-if CSV's comment lines say (cmd_whatif writes them). */
typedef struct {
    char model[128], hw[128], dist[256];
    char faster[256]; /* a what-if's --faster list ("# what-if: --faster LIST ...") */
    char hw_set[256]; /* a what-if's --hw-set list ("# what-if: --hw-set LIST ...") */
    int has_prov;   /* written by unpad (a "# unpad:" line) */
    int complete;   /* ... and finished (a "# complete" line) */
} imb_source;

static int find_col(char **cols, int nc, const char *name)
{
    for (int i = 0; i < nc; i++)
        if (!strcmp(cols[i], name))
            return i;
    return -1;
}

/* Splits a CSV line at commas, keeping empty fields. */
static int split_csv(char *line, char **cols, int max)
{
    int n = 0;
    line[strcspn(line, "\r\n")] = '\0';
    for (char *p = line; n < max;) {
        cols[n++] = p;
        char *comma = strchr(p, ',');
        if (!comma)
            break;
        *comma = '\0';
        p = comma + 1;
    }
    return n;
}

/* "# key: value" into buf when the line is that comment. */
static void comment_value(const char *line, const char *key, char *buf, size_t n)
{
    size_t k = strlen(key);
    if (!strncmp(line, "# ", 2) && !strncmp(line + 2, key, k) && line[2 + k] == ':') {
        const char *v = line + 3 + k;
        while (*v == ' ')
            v++;
        snprintf(buf, n, "%.*s", (int)strcspn(v, " ("), v);
    }
}

static int read_whatif_csv(const char *path, imb_point **out, int *np, imb_source *src,
                           unpad_err *err)
{
    char *text;
    size_t len;
    int rc = unpad_read_file(path, &text, &len, err);
    if (rc)
        return rc;
    enum { NEED = 7 };
    int got, cap = 64, n = 0, lineno = 0, ci[NEED] = {-1, -1, -1, -1, -1, -1, -1}, ci_layout = -1, ci_accum = -1;
    static const char *const need[NEED] = {"gpus", "batch", "policy", "count", "imbalance_mean",
                                           "imbalance_p99", "steps"};
    imb_point *v = malloc((size_t)cap * sizeof *v);
    memset(src, 0, sizeof *src);
    if (!v) {
        free(text);
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    }
    unpad_lines it; /* a NUL byte or an over-long line is refused, never taken as the end */
    unpad_lines_init(&it, path, text, len);
    while ((got = unpad_lines_next(&it, err)) > 0) {
        lineno = it.lineno;
        char raw[UNPAD_LINE_MAX + 1], *cols[64], *line = it.line;
        memcpy(raw, it.line, it.len + 1);
        if (line[0] == '#') {
            comment_value(line, "model", src->model, sizeof src->model);
            comment_value(line, "hw", src->hw, sizeof src->hw);
            comment_value(line, "distribution", src->dist, sizeof src->dist);
            if (!strncmp(line, "# what-if: --faster ", 20))
                snprintf(src->faster, sizeof src->faster, "%.*s", (int)strcspn(line + 20, " "), line + 20);
            if (!strncmp(line, "# what-if: --hw-set ", 20))
                snprintf(src->hw_set, sizeof src->hw_set, "%.*s", (int)strcspn(line + 20, " "), line + 20);
            src->has_prov |= !strncmp(line, "# unpad:", 8);
            src->complete |= !strncmp(line, "# complete", 10);
            continue;
        }
        if (line[0] == '\0' || line[0] == '\r')
            continue;
        int nc = split_csv(line, cols, 64);
        if (ci[0] < 0) {
            ci_layout = find_col(cols, nc, "layout");
            ci_accum = find_col(cols, nc, "accum");
            for (int j = 0; j < NEED; j++)
                if ((ci[j] = find_col(cols, nc, need[j])) < 0 && j < NEED - 1) {
                    rc = unpad_fail(err, UNPAD_EINVAL, path, lineno,
                                    "header has no column '%s' (expected a CSV written by "
                                    "`unpad whatif --csv`)", need[j]);
                    unpad_err_show_line(err, lineno, raw);
                    goto out;
                }
            continue;
        }
        imb_point p = {0};
        long g, b, k = 0;
        int maxc = 0;
        for (int j = 0; j < NEED; j++)
            maxc = ci[j] > maxc ? ci[j] : maxc;
        if (nc <= maxc ||
            unpad_parse_long(cols[ci[0]], &g) || unpad_parse_long(cols[ci[1]], &b) ||
            unpad_parse_double(cols[ci[4]], &p.mean) || unpad_parse_double(cols[ci[5]], &p.p99) ||
            (ci[6] >= 0 && unpad_parse_long(cols[ci[6]], &k)) || g < 1 || b < 1 ||
            g > (1L << 24) || b > (1L << 24) || k < 0 || k > INT_MAX) {
            rc = unpad_fail(err, UNPAD_EINVAL, path, lineno,
                            "bad what-if row (expected gpus and batch in 1..16777216 and numbers for the "
                            "imbalance columns)");
            unpad_err_show_line(err, lineno, raw);
            goto out;
        }
        p.gpus = (int)g;
        p.batch = (int)b;
        p.steps = (int)k;
        long acc = 1;
        if (ci_layout >= 0 && ci_layout < nc)
            snprintf(p.layout, sizeof p.layout, "%s", cols[ci_layout]);
        if (ci_accum >= 0 && (ci_accum >= nc || unpad_parse_long(cols[ci_accum], &acc) || acc < 1 || acc > 1 << 20)) {
            rc = unpad_fail(err, UNPAD_EINVAL, path, lineno, "bad what-if row (expected accum in 1..1048576)");
            unpad_err_show_line(err, lineno, raw);
            goto out;
        }
        p.accum = (int)acc;
        snprintf(p.series, sizeof p.series, "%s/%s", cols[ci[2]], cols[ci[3]]);
        if (n == cap) {
            imb_point *nv = realloc(v, (size_t)(cap *= 2) * sizeof *v);
            if (!nv) {
                rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
                goto out;
            }
            v = nv;
        }
        v[n++] = p;
    }
    if (got < 0)
        rc = err ? err->code : UNPAD_EINVAL;
    else if (n == 0)
        rc = unpad_fail(err, UNPAD_EINVAL, path, 0, "no what-if rows");
out:
    free(text);
    if (rc) {
        free(v);
        return rc;
    }
    *out = v;
    *np = n;
    return UNPAD_OK;
}

/* The value of `key` (0 gpus, 1 batch) having points at the most distinct values of the other. */
static int busiest(const imb_point *v, int n, int key)
{
    int best = key ? v[0].batch : v[0].gpus, bestc = 0;
    for (int i = 0; i < n; i++) {
        int val = key ? v[i].batch : v[i].gpus, c = 0;
        for (int j = 0; j < n; j++) {
            int other = key ? v[j].gpus : v[j].batch, dup = 0;
            if ((key ? v[j].batch : v[j].gpus) != val)
                continue;
            for (int m = 0; m < j; m++)
                if ((key ? v[m].batch : v[m].gpus) == val &&
                    (key ? v[m].gpus : v[m].batch) == other && !strcmp(v[m].series, v[j].series))
                    dup = 1;
            c += !dup;
        }
        if (c > bestc) {
            bestc = c;
            best = val;
        }
    }
    return best;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* One panel as plain CSV: a row per x (ascending), two columns per series (mean, p99), empty
 * where the series has no point at that x; only rows where the other axis equals `fixed`. */
static int write_panel(const char *out, const char *suffix, const char *prov, const imb_point *v,
                       int n, char series[][64], int ns, int xkey, int fixed, unpad_err *err)
{
    csv_file c;
    int rc = csv_open(&c, out, suffix, prov, err);
    if (rc)
        return rc;
    int *xs = malloc((size_t)n * sizeof *xs), nx = 0;
    if (!xs) {
        csv_abandon(&c);
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        int x = xkey ? v[i].batch : v[i].gpus, dup = 0;
        if ((xkey ? v[i].gpus : v[i].batch) != fixed)
            continue;
        for (int j = 0; j < nx; j++)
            dup |= xs[j] == x;
        if (!dup)
            xs[nx++] = x;
    }
    qsort(xs, (size_t)nx, sizeof *xs, cmp_int);
    fprintf(c.f, "# %s at %s = %d; per series: imbalance mean and 99th percentile over the steps\n",
            xkey ? "batch" : "gpus", xkey ? "gpus" : "batch", fixed);
    fprintf(c.f, "%s", xkey ? "batch" : "gpus");
    for (int s = 0; s < ns; s++)
        fprintf(c.f, ",%s mean,%s p99", series[s], series[s]);
    fprintf(c.f, "\n");
    for (int j = 0; j < nx; j++) {
        fprintf(c.f, "%d", xs[j]);
        for (int s = 0; s < ns; s++) {
            const imb_point *p = NULL;
            for (int i = 0; i < n && !p; i++)
                if (!strcmp(v[i].series, series[s]) && (xkey ? v[i].batch : v[i].gpus) == xs[j] &&
                    (xkey ? v[i].gpus : v[i].batch) == fixed)
                    p = &v[i];
            if (p)
                fprintf(c.f, ",%.6f,%.6f", p->mean, p->p99);
            else
                fprintf(c.f, ",,");
        }
        fprintf(c.f, "\n");
    }
    free(xs);
    return csv_close(&c, err);
}

/* Keeps the rows of one layout and one accumulation (those asked; where not asked, the CSV's only
 * one, else refused naming what it holds). */
static int imbalance_select(const char *path, imb_point *v, int *n, const char *layout, int accum, char *what,
                            size_t wn, unpad_err *err)
{
    char seen_l[512] = "", seen_a[256] = "";
    int nl = 0, na = 0;
    for (int i = 0; i < *n; i++) {
        int dup = 0;
        for (int j = 0; j < i && !dup; j++)
            dup = !strcmp(v[j].layout, v[i].layout);
        if (!dup && strlen(seen_l) + strlen(v[i].layout) + 3 < sizeof seen_l) {
            snprintf(seen_l + strlen(seen_l), sizeof seen_l - strlen(seen_l), "%s%s", nl ? ", " : "", v[i].layout);
            nl++;
        }
        dup = 0;
        for (int j = 0; j < i && !dup; j++)
            dup = v[j].accum == v[i].accum;
        if (!dup && strlen(seen_a) + 16 < sizeof seen_a) {
            snprintf(seen_a + strlen(seen_a), sizeof seen_a - strlen(seen_a), "%s%d", na ? ", " : "", v[i].accum);
            na++;
        }
    }
    if (!layout && nl > 1)
        return unpad_fail(err, UNPAD_EINVAL, path, 0,
                          "rows of %d length layouts (%s): choose one with --layout NAME", nl, seen_l);
    if (!accum && na > 1)
        return unpad_fail(err, UNPAD_EINVAL, path, 0,
                          "rows of %d accumulations (%s): choose one with --accum K", na, seen_a);
    int k = 0;
    for (int i = 0; i < *n; i++)
        if ((!layout || !strcmp(v[i].layout, layout)) && (!accum || v[i].accum == accum))
            v[k++] = v[i];
    if (!k)
        return unpad_fail(err, UNPAD_EINVAL, path, 0,
                          "no rows of %s%s%s%s (the CSV holds layouts %s; accumulations %s)",
                          layout ? "layout " : "", layout ? layout : "", layout && accum ? " and " : "",
                          accum ? "that accumulation" : "", seen_l, seen_a);
    *n = k;
    what[0] = '\0';
    if (layout || (nl == 1 && v[0].layout[0] && strcmp(v[0].layout, "unpadded")))
        snprintf(what, wn, "; layout %s", v[0].layout);
    if (accum > 1 || (na == 1 && v[0].accum > 1))
        snprintf(what + strlen(what), wn - strlen(what), "; %d micro-batches a step", v[0].accum);
    return UNPAD_OK;
}

int plot_imbalance(const char *plot_dir, const char *whatif_csv, int batch, int gpus, const char *layout,
                   int accum, const char *prov, const char *out, unpad_err *err)
{
    imb_point *v = NULL;
    imb_source src;
    char what[160];
    int n = 0, rc = read_whatif_csv(whatif_csv, &v, &n, &src, err);
    if (!rc && (rc = imbalance_select(whatif_csv, v, &n, layout, accum, what, sizeof what, err)))
        free(v);
    if (rc)
        return rc;
    char series[32][64];
    int ns = 0, min_steps = 0, max_steps = 0;
    for (int i = 0; i < n; i++) {
        int s;
        for (s = 0; s < ns; s++)
            if (!strcmp(series[s], v[i].series))
                break;
        if (s == ns && ns < 32)
            snprintf(series[ns++], 64, "%s", v[i].series);
        if (v[i].steps && (!min_steps || v[i].steps < min_steps))
            min_steps = v[i].steps;
        max_steps = v[i].steps > max_steps ? v[i].steps : max_steps;
    }
    if (!batch)
        batch = busiest(v, n, 1);
    if (!gpus)
        gpus = busiest(v, n, 0);
    int have_b = 0, have_g = 0, xs_g[256], ng = 0;
    for (int i = 0; i < n; i++) {
        have_b |= v[i].batch == batch;
        have_g |= v[i].gpus == gpus;
        int dup = 0;
        for (int j = 0; j < ng; j++)
            dup |= xs_g[j] == v[i].gpus;
        if (!dup && ng < 256)
            xs_g[ng++] = v[i].gpus;
    }
    qsort(xs_g, (size_t)ng, sizeof *xs_g, cmp_int);
    if (!have_b || !have_g) {
        free(v);
        return unpad_fail(err, UNPAD_EINVAL, whatif_csv, 0, "no rows with %s = %d",
                          have_b ? "gpus" : "batch", have_b ? gpus : batch);
    }
    if ((rc = write_panel(out, "-gpus.csv", prov, v, n, series, ns, 0, batch, err)) ||
        (rc = write_panel(out, "-batch.csv", prov, v, n, series, ns, 1, gpus, err))) {
        free(v);
        return rc;
    }
    free(v);
    /* Colour by policy, dashes by count: series "policy/count"; legend "policy (count counts)". */
    char titles[32 * 80] = "", pols[256] = "", cnts[256] = "", qt[4096], qg[4200], qb[4200],
         title[1024], qtitle[1100], vars[16384], pg[4096], pb[4096];
    int any_free = 0, any_equal = 0;
    for (int s = 0; s < ns; s++) {
        char name[64], *slash;
        snprintf(name, sizeof name, "%.63s", series[s]);
        slash = strchr(name, '/');
        if (slash)
            *slash = '\0';
        int pi = balance_policy_from_name(name), cj = slash ? balance_count_from_name(slash + 1) : 0;
        any_free |= cj == BAL_FREE;
        any_equal |= cj != BAL_FREE;
        size_t o = strlen(pols), q = strlen(cnts), t = strlen(titles);
        snprintf(pols + o, sizeof pols - o, "%s%d", s ? " " : "", pi < 0 ? s % 8 + 1 : pi + 1);
        snprintf(cnts + q, sizeof cnts - q, "%s%d", s ? " " : "", cj < 0 ? 0 : cj);
        snprintf(titles + t, sizeof titles - t, "%s%s (%s counts)", s ? "|" : "", name,
                 slash ? slash + 1 : "equal");
    }
    char steps[64];
    if (min_steps == max_steps)
        snprintf(steps, sizeof steps, "%d sampled steps per point", max_steps);
    else
        snprintf(steps, sizeof steps, "%d-%d sampled steps per point", min_steps, max_steps);
    snprintf(title, sizeof title,
             "Imbalance: how much longer the slowest GPU's predicted step takes than the mean "
             "GPU's%s%s%s%s%s",
             src.model[0] ? ": " : "", src.model, src.hw[0] ? " on " : "", src.hw,
             src.has_prov && !src.complete ? " (PARTIAL: an interrupted what-if)" : "");
    size_t o = strlen(title);
    what_if_title(title, sizeof title, src.faster, src.hw_set);
    o = strlen(title);
    o += (size_t)snprintf(title + o, sizeof title - o, "\n%s; ", steps);
    if (what[0] && o < sizeof title) /* the layout and accumulation chosen */
        o += (size_t)snprintf(title + o, sizeof title - o, "%s; ", what + 2);
    if (src.dist[0] && o < sizeof title)
        o += (size_t)snprintf(title + o, sizeof title - o, "lengths from %s; ", base_name(src.dist));
    if (o < sizeof title)
        snprintf(title + o, sizeof title - o, "imbalance 1.25 = 25%%; on the bottom edge: below 0.001%%");
    snprintf(pg, sizeof pg, "%s-gpus.csv", out);
    snprintf(pb, sizeof pb, "%s-batch.csv", out);
    plot_quote(titles, qt, sizeof qt);
    plot_quote(pg, qg, sizeof qg);
    plot_quote(pb, qb, sizeof qb);
    plot_quote(title, qtitle, sizeof qtitle);
    snprintf(vars, sizeof vars,
             "data_gpus=%s; data_batch=%s; titles=%s; colors='%s'; counts='%s'; nseries=%d; "
             "fixed_batch=%d; fixed_gpus=%d; logx=%d; title=%s; both_counts=%d",
             qg, qb, qt, pols, cnts, ns, batch, gpus, ng > 2 && xs_g[ng - 1] >= 4 * xs_g[0], qtitle,
             any_free && any_equal);
    return plot_render(plot_dir, "imbalance", vars, out, err);
}

/* ---- groups ---------------------------------------------------------------------------------- */

/* One CSV row per launch: row, option index, stream, start, end, its lengths and count. */
static void timeline_rows(FILE *f, const group_plan *p, int *row, int option)
{
    for (int s = 0; s < p->streams; s++) {
        for (int g = 0; g < p->ngroups; g++)
            if (p->stream[g] == s)
                fprintf(f, "%d,%d,%d,%.3f,%.3f,%d,%d,%d\n", *row, option, s + 1, p->start_us[g],
                        p->end_us[g], p->lo[g], p->hi[g], p->count[g]);
        ++*row;
    }
}

int plot_groups(const char *plot_dir, const plot_groups_setup *s, const char *out, unpad_err *err)
{
    static const int buckets[] = {128, 256, 384, 512};
    const int heads = s->model->heads;
    group_opts o = {s->max_streams, s->granularity, 48};
    group_plan dp, bk;
    int rc = group_plan_auto(s->hw, s->calib, heads, s->len, s->n, &o, &dp, err);
    if (rc || (rc = group_plan_bounds(s->hw, s->calib, heads, s->len, s->n, buckets, 4,
                                      s->max_streams, &bk, err)))
        return rc;
    double one = group_one_launch_us(s->hw, s->calib, heads, s->len, s->n);
    csv_file c;
    if ((rc = csv_open(&c, out, ".csv", s->prov, err)))
        return rc;
    fprintf(c.f, "# option 1: one launch in loader order; 2: buckets 128/256/384/512; 3: the plan "
                 "(unpad plan / --fmha-groups auto)\n");
    fprintf(c.f, "row,option,stream,start_us,end_us,min_len,max_len,sequences\n");
    int row = 0, lo = s->len[0], hi = s->len[0];
    for (int i = 1; i < s->n; i++) {
        lo = s->len[i] < lo ? s->len[i] : lo;
        hi = s->len[i] > hi ? s->len[i] : hi;
    }
    fprintf(c.f, "%d,1,1,0,%.3f,%d,%d,%d\n", row++, one, lo, hi, s->n);
    int bk_row = row;
    timeline_rows(c.f, &bk, &row, 2);
    int dp_row = row;
    timeline_rows(c.f, &dp, &row, 3);
    if ((rc = csv_close(&c, err)))
        return rc;
    char title[1024], qtitle[1100], qpath[4200], vars[8192], dpwhat[256], qdp[300];
    snprintf(title, sizeof title,
             "FMHA (attention) launches of one GPU's %d sequences (%s): %s on %s%s",
             s->n, s->what ? s->what : "given lengths", s->model->name, s->hw->name,
             s->calib->graphs ? ", CUDA graphs" : "");
    what_if_title(title, sizeof title, s->calib->faster, s->hw_set);
    if (dp.ngroups == 1)
        snprintf(dpwhat, sizeof dpwhat, "one launch, longest first");
    else
        snprintf(dpwhat, sizeof dpwhat, "%d groups on %d stream%s, longest first", dp.ngroups,
                 dp.streams, dp.streams > 1 ? "s" : "");
    plot_quote(title, qtitle, sizeof qtitle);
    plot_quote(c.path, qpath, sizeof qpath);
    plot_quote(dpwhat, qdp, sizeof qdp);
    snprintf(vars, sizeof vars,
             "data=%s; title=%s; rows=%d; work=%.17g; one=%.17g; bk=%.17g; bk_streams=%d; "
             "dp=%.17g; dpwhat=%s; bk_row=%d; dp_row=%d",
             qpath, qtitle, row, dp.work_us, one, bk.total_us, bk.streams, dp.total_us, qdp,
             bk_row, dp_row);
    return plot_render(plot_dir, "groups", vars, out, err);
}
