/* plot.c — data files for the plot kinds and the gnuplot runs that draw them. */
#include "plot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cost.h"
#include "group.h"
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

/* Starts <out><suffix> (its name in path); NULL with err filled on failure. */
static unpad_outfile *open_csv(const char *out, const char *suffix, char *path, size_t n,
                               unpad_err *err)
{
    snprintf(path, n, "%s%s", out, suffix);
    unpad_outfile *o;
    return outfile_open(path, &o, err) ? NULL : o;
}

/* ---- hist ------------------------------------------------------------------------------------ */

int plot_hist(const char *plot_dir, const unpad_dist *d, const char *out, unpad_err *err)
{
    char path[4096], qpath[4200], title[1024], qtitle[1100], vars[8192];
    unpad_outfile *o = open_csv(out, ".csv", path, sizeof path, err);
    if (!o)
        return UNPAD_EIO;
    FILE *f = outfile_stream(o);
    fprintf(f, "length,count,percent\n");
    for (int l = 1; l <= d->max_len; l++)
        fprintf(f, "%d,%.0f,%.6f\n", l, d->count[l], 100.0 * d->count[l] / d->total);
    int rc = outfile_commit(o, err);
    if (rc)
        return rc;
    dist_stats s;
    dist_compute_stats(d, &s);
    const char *base = strrchr(d->source, '/');
    snprintf(title, sizeof title,
             "Sequence lengths: %s (%.0f sequences, mean %.1f, median %d, %.1f%% at %d)",
             base ? base + 1 : d->source, s.count, s.mean, s.p50, 100 * s.share_at_max, s.max);
    plot_quote(path, qpath, sizeof qpath);
    plot_quote(title, qtitle, sizeof qtitle);
    snprintf(vars, sizeof vars, "data=%s; title=%s; mean=%g; p50=%d; p90=%d", qpath, qtitle, s.mean,
             s.p50, s.p90);
    return plot_render(plot_dir, "hist", vars, out, err);
}

/* ---- load ------------------------------------------------------------------------------------ */

int plot_load(const char *plot_dir, const plot_load_setup *s, const char *out, unpad_err *err)
{
    int k = s->gpus, n = s->gpus * s->batch, rc;
    if (k < 1 || s->batch < 1 || n > (1 << 22))
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "load plot: %d GPUs x %d sequences", k,
                          s->batch);
    int *len = malloc((size_t)n * sizeof *len), *glen = malloc((size_t)n * sizeof *glen);
    int64_t *w = malloc((size_t)n * sizeof *w);
    double *t = malloc((size_t)k * BAL_POLICY_COUNT * sizeof *t);
    double imb[BAL_POLICY_COUNT];
    balance_ws *ws = NULL;
    balance_result r = {0};
    dist_sampler *smp = NULL;
    unpad_outfile *o = NULL;
    char path[4096];
    if (!len || !glen || !w || !t) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        goto out;
    }
    seq_cost sc;
    if ((rc = cost_seq_model(s->model, s->hw, s->calib, &sc, err)) ||
        (rc = dist_sampler_alloc(s->dist, s->seed, &smp, err)) ||
        (rc = balance_ws_alloc(n, k, &ws, err)) || (rc = balance_result_alloc(n, k, &r, err)))
        goto out;
    dist_sample(smp, len, n);
    balance_weights(&sc, len, n, w);
    for (int p = 0; p < BAL_POLICY_COUNT; p++) {
        balance_input in = {len, s->weights_tokens ? NULL : w, n, k, p, s->count};
        if ((rc = balance_assign(ws, &in, &r, err)))
            goto out;
        double mx = 0, sum = 0;
        for (int g = 0; g < k; g++) {
            int m = 0;
            for (int q = r.start[g]; q < r.start[g + 1]; q++)
                glen[m++] = len[r.seq[q]];
            cost_step st;
            op_batch b = {.len = glen, .n = m, .fused = 1, .gpus = k, .dropout = 1};
            if (m == 0) {
                t[p * k + g] = 0;
                continue;
            }
            if ((rc = cost_predict_step(s->model, s->hw, s->calib, &b, &st, err)))
                goto out;
            if (p == BAL_NONE) /* loader order moves no samples */
                st.step_us -= st.ops[OP_EXCHANGE].instances * st.time_us[OP_EXCHANGE];
            t[p * k + g] = st.step_us / 1e3;
            mx = t[p * k + g] > mx ? t[p * k + g] : mx;
            sum += t[p * k + g];
        }
        imb[p] = sum > 0 ? mx / (sum / k) : 1;
    }
    if (!(o = open_csv(out, ".csv", path, sizeof path, err))) {
        rc = UNPAD_EIO;
        goto out;
    }
    FILE *f = outfile_stream(o);
    fprintf(f, "gpu");
    for (int p = 0; p < BAL_POLICY_COUNT; p++)
        fprintf(f, ",%s (max/mean %.3f)", balance_policy_name(p), imb[p]);
    fprintf(f, "\n");
    for (int g = 0; g < k; g++) {
        fprintf(f, "%d", g);
        for (int p = 0; p < BAL_POLICY_COUNT; p++)
            fprintf(f, ",%.4f", t[p * k + g]);
        fprintf(f, "\n");
    }
    rc = outfile_commit(o, err);
    o = NULL;
    if (rc)
        goto out;
    char qpath[4200], title[1024], qtitle[1100], vars[8192];
    snprintf(title, sizeof title,
             "Predicted step time per GPU, one sampled step: %s on %d x %s, batch %d per GPU, %s "
             "counts, seed %llu",
             s->model->name, k, s->hw->name, s->batch, balance_count_name(s->count),
             (unsigned long long)s->seed);
    plot_quote(path, qpath, sizeof qpath);
    plot_quote(title, qtitle, sizeof qtitle);
    snprintf(vars, sizeof vars, "data=%s; title=%s; gpus=%d; npol=%d", qpath, qtitle, k,
             BAL_POLICY_COUNT);
    rc = plot_render(plot_dir, "load", vars, out, err);
out:
    outfile_abort(o);
    dist_sampler_free(smp);
    balance_ws_free(ws);
    if (r.gpu)
        balance_result_free(&r);
    free(len);
    free(glen);
    free(w);
    free(t);
    return rc;
}

/* ---- imbalance ------------------------------------------------------------------------------- */

typedef struct {
    int gpus, batch;
    char series[64];   /* policy/count */
    double mean, p99;
} imb_point;

static int find_col(char **cols, int nc, const char *name)
{
    for (int i = 0; i < nc; i++)
        if (!strcmp(cols[i], name))
            return i;
    return -1;
}

static int split_csv(char *line, char **cols, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(line, ",\r\n", &save); t && n < max; t = strtok_r(NULL, ",\r\n", &save))
        cols[n++] = t;
    return n;
}

static int read_whatif_csv(const char *path, imb_point **out, int *np, unpad_err *err)
{
    char *text;
    size_t len;
    int rc = unpad_read_file(path, &text, &len, err);
    if (rc)
        return rc;
    int cap = 64, n = 0, lineno = 0, got, ci[6] = {-1, -1, -1, -1, -1, -1};
    static const char *const need[6] = {"gpus", "batch", "policy", "count", "imbalance_mean",
                                        "imbalance_p99"};
    imb_point *v = malloc((size_t)cap * sizeof *v);
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
        if (line[0] == '#' || line[0] == '\0')
            continue;
        int nc = split_csv(line, cols, 64);
        if (ci[0] < 0) {
            for (int j = 0; j < 6; j++)
                if ((ci[j] = find_col(cols, nc, need[j])) < 0) {
                    rc = unpad_fail(err, UNPAD_EINVAL, path, lineno,
                                    "header has no column '%s' (expected a CSV written by "
                                    "`unpad whatif --csv`)", need[j]);
                    unpad_err_show_line(err, lineno, raw);
                    goto out;
                }
            continue;
        }
        imb_point p;
        long g, b;
        int maxc = 0;
        for (int j = 0; j < 6; j++)
            maxc = ci[j] > maxc ? ci[j] : maxc;
        if (nc <= maxc || unpad_parse_long(cols[ci[0]], &g) || unpad_parse_long(cols[ci[1]], &b) ||
            unpad_parse_double(cols[ci[4]], &p.mean) || unpad_parse_double(cols[ci[5]], &p.p99) ||
            g < 1 || b < 1 || g > (1L << 24) || b > (1L << 24)) {
            rc = unpad_fail(err, UNPAD_EINVAL, path, lineno,
                            "bad what-if row (expected gpus and batch in 1..16777216 and numbers for the "
                            "imbalance columns)");
            unpad_err_show_line(err, lineno, raw);
            goto out;
        }
        p.gpus = (int)g;
        p.batch = (int)b;
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

/* One block per series (gnuplot `index`): x, mean, p99 sorted by x, where the other axis = fixed. */
static int write_panel(const char *path, const imb_point *v, int n, char series[][64], int ns,
                       int xkey, int fixed, unpad_err *err)
{
    unpad_outfile *o;
    int rc = outfile_open(path, &o, err);
    if (rc)
        return rc;
    FILE *f = outfile_stream(o);
    fprintf(f, "# x = %s at %s = %d; blocks in the order of the series list\n",
            xkey ? "batch" : "gpus", xkey ? "gpus" : "batch", fixed);
    int *xs = malloc((size_t)n * sizeof *xs), oom = !xs;
    for (int s = 0; s < ns && xs; s++) {
        fprintf(f, "# %s: x,mean,p99\n", series[s]);
        int m = 0;
        for (int i = 0; i < n; i++)
            if (!strcmp(v[i].series, series[s]) && (xkey ? v[i].gpus : v[i].batch) == fixed)
                xs[m++] = i;
        /* sort the points by x */
        for (int a = 1; a < m; a++)
            for (int b = a; b > 0; b--) {
                int xa = xkey ? v[xs[b]].batch : v[xs[b]].gpus;
                int xb = xkey ? v[xs[b - 1]].batch : v[xs[b - 1]].gpus;
                if (xa >= xb)
                    break;
                int t = xs[b];
                xs[b] = xs[b - 1];
                xs[b - 1] = t;
            }
        for (int i = 0; i < m; i++)
            fprintf(f, "%d,%.6f,%.6f\n", xkey ? v[xs[i]].batch : v[xs[i]].gpus, v[xs[i]].mean,
                    v[xs[i]].p99);
        if (m == 0)
            fprintf(f, "NaN,NaN,NaN\n");
        fprintf(f, "\n\n");
    }
    free(xs);
    if (oom) {
        outfile_abort(o);
        return unpad_fail(err, UNPAD_ENOMEM, path, 0, "out of memory");
    }
    return outfile_commit(o, err);
}

int plot_imbalance(const char *plot_dir, const char *whatif_csv, int batch, int gpus,
                   const char *out, unpad_err *err)
{
    imb_point *v = NULL;
    int n = 0, rc = read_whatif_csv(whatif_csv, &v, &n, err);
    if (rc)
        return rc;
    char series[32][64];
    int ns = 0;
    for (int i = 0; i < n && ns < 32; i++) {
        int s;
        for (s = 0; s < ns; s++)
            if (!strcmp(series[s], v[i].series))
                break;
        if (s == ns)
            snprintf(series[ns++], 64, "%s", v[i].series);
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
    char pg[4096], pb[4096];
    snprintf(pg, sizeof pg, "%s-gpus.csv", out);
    snprintf(pb, sizeof pb, "%s-batch.csv", out);
    if ((rc = write_panel(pg, v, n, series, ns, 0, batch, err)) ||
        (rc = write_panel(pb, v, n, series, ns, 1, gpus, err))) {
        free(v);
        return rc;
    }
    free(v);
    /* Colour by policy, line by count: series "policy/count". */
    char titles[32 * 65] = "", pols[256] = "", cnts[256] = "", qt[4096], qg[4200], qb[4200],
         vars[16384];
    for (int s = 0; s < ns; s++) {
        char name[64], *slash;
        snprintf(name, sizeof name, "%s", series[s]);
        slash = strchr(name, '/');
        if (slash)
            *slash = '\0';
        int pi = balance_policy_from_name(name), cj = slash ? balance_count_from_name(slash + 1) : 0;
        size_t o = strlen(pols), q = strlen(cnts);
        snprintf(pols + o, sizeof pols - o, "%s%d", s ? " " : "", pi < 0 ? s % 8 + 1 : pi + 1);
        snprintf(cnts + q, sizeof cnts - q, "%s%d", s ? " " : "", cj < 0 ? 0 : cj);
        strcat(titles, s ? " " : "");
        strcat(titles, series[s]);
    }
    plot_quote(titles, qt, sizeof qt);
    plot_quote(pg, qg, sizeof qg);
    plot_quote(pb, qb, sizeof qb);
    snprintf(vars, sizeof vars,
             "data_gpus=%s; data_batch=%s; titles=%s; colors='%s'; counts='%s'; nseries=%d; "
             "fixed_batch=%d; fixed_gpus=%d; logx=%d",
             qg, qb, qt, pols, cnts, ns, batch, gpus, ng > 2 && xs_g[ng - 1] >= 4 * xs_g[0]);
    return plot_render(plot_dir, "imbalance", vars, out, err);
}

/* ---- groups ---------------------------------------------------------------------------------- */

static void timeline_rows(FILE *f, const group_plan *p, int *row, const char *name)
{
    for (int s = 0; s < p->streams; s++) {
        for (int g = 0; g < p->ngroups; g++)
            if (p->stream[g] == s)
                fprintf(f, "%d,%s stream %d,%.3f,%.3f,%d-%d (%d)\n", *row, name, s, p->start_us[g],
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
    char path[4096];
    unpad_outfile *csv = open_csv(out, ".csv", path, sizeof path, err);
    if (!csv)
        return UNPAD_EIO;
    FILE *f = outfile_stream(csv);
    fprintf(f, "row,label,start_us,end_us,group\n");
    int row = 0, lo = s->len[0], hi = s->len[0];
    for (int i = 1; i < s->n; i++) {
        lo = s->len[i] < lo ? s->len[i] : lo;
        hi = s->len[i] > hi ? s->len[i] : hi;
    }
    fprintf(f, "%d,one launch,0,%.3f,%d-%d (%d)\n", row++, one, lo, hi, s->n);
    timeline_rows(f, &bk, &row, "buckets 128/256/384/512");
    timeline_rows(f, &dp, &row, "plan");
    if ((rc = outfile_commit(csv, err)))
        return rc;
    char title[1024], sub[1024], qtitle[1100], qsub[1100], qpath[4200], vars[8192];
    snprintf(title, sizeof title, "FMHA grouping of one GPU's %d sequences (%s, %s on %s)", s->n,
             s->what ? s->what : "given lengths", s->model->name, s->hw->name);
    snprintf(sub, sizeof sub,
             "per layer, fwd + bwd: one launch %.0f us | buckets %.0f us | plan %.0f us (%d groups, "
             "%d streams) | all SMs busy %.0f us",
             one, bk.total_us, dp.total_us, dp.ngroups, dp.streams, dp.work_us);
    plot_quote(title, qtitle, sizeof qtitle);
    plot_quote(sub, qsub, sizeof qsub);
    plot_quote(path, qpath, sizeof qpath);
    snprintf(vars, sizeof vars, "data=%s; title=%s; subtitle=%s; rows=%d; work=%g", qpath, qtitle,
             qsub, row, dp.work_us);
    return plot_render(plot_dir, "groups", vars, out, err);
}
