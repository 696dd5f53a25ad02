/* group.c — FMHA grouping planner: the dynamic programme, its brute-force check, fixed boundaries
 * and the timeline of a plan (model in group.h). */
#include "group.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"

/* Query rows per FMHA tile: the same tile cost.c's simulation dispatches. */
#define GROUP_FMHA_TILE COST_FMHA_TILE

void group_opts_default(group_opts *o)
{
    o->max_streams = 4;
    o->granularity = 1;
    o->max_units = 48;
}

static int cmp_int_desc(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x < y) - (x > y);
}

/* The backward's per-token passes over sequences d[0..n) (cost_fmha_passes_us). They stream at the
 * memory's bandwidth, so groups on several streams do not overlap them: every timeline below adds
 * the passes of all its sequences in series. */
static double passes_us(const hw_spec *hw, const calib_coef *c, int heads, const int *d, int n)
{
    return cost_fmha_passes_us(hw, c, heads, cost_fmha_tokens(d, n), 1);
}

/* Time of sequences d[0..n) as one group alone: forward + backward + two launches. */
static double group_alone_us(const hw_spec *hw, const calib_coef *c, int heads, const int *d, int n)
{
    return cost_fmha_us(hw, c, heads, d, n, 0) + cost_fmha_us(hw, c, heads, d, n, 1) +
           passes_us(hw, c, heads, d, n) + 2 * c->launch_us;
}

/* The FMHA coefficients of this batch: the width and load terms applied once, the load from every
 * tile of the micro-batch whatever its grouping (the groups of a layer share the GPU, on streams or
 * one after another), so splitting a batch into groups does not by itself make tiles faster. */
static const calib_coef *batch_calib(const hw_spec *hw, const calib_coef *c, int heads, const int *len, int n,
                                     calib_coef *tmp)
{
    return cost_fmha_coef(hw, c, heads, &len, &n, 1, tmp);
}

/* W: every tile's time spread over all slots, plus one launch each way. */
static double work_us(const hw_spec *hw, const calib_coef *c, int heads, const int *d, int n)
{
    calib_coef tmp;
    c = batch_calib(hw, c, heads, d, n, &tmp);
    double slots[2] = {hw->sms * calib_fmha(c, 0).ctas_per_sm, hw->sms * calib_fmha(c, 1).ctas_per_sm};
    double sum = 0;
    for (int s = 0; s < n; s++) {
        int tiles = (d[s] + GROUP_FMHA_TILE - 1) / GROUP_FMHA_TILE;
        for (int t = 0; t < tiles; t++) {
            int rows = t + 1 < tiles ? GROUP_FMHA_TILE : d[s] - t * GROUP_FMHA_TILE;
            sum += heads * (cost_fmha_cta_us(hw, c, rows, d[s], 0) / slots[0] +
                            cost_fmha_cta_us(hw, c, rows, d[s], 1) / slots[1]);
        }
    }
    return sum + passes_us(hw, c, heads, d, n) + 2 * c->launch_us;
}

double group_one_launch_us(const hw_spec *hw, const calib_coef *c, int heads, const int *len, int n)
{
    calib_coef tmp;
    return group_alone_us(hw, batch_calib(hw, c, heads, len, n, &tmp), heads, len, n);
}

/* Sorted copy (longest first) and candidate units: unit u spans d[p[u] .. p[u+1]). */
typedef struct {
    int *d;        /* (n) lengths, longest first */
    int n;
    int m;         /* units */
    int p[GROUP_MAX + 1];
    int gran;      /* granularity used */
} units;

static int units_make(const int *len, int n, const group_opts *o, units *u, unpad_err *err)
{
    if (n < 1)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "FMHA grouping of an empty batch");
    if (o->max_streams < 1 || o->max_streams > GROUP_MAX_STREAMS || o->granularity < 1 ||
        o->max_units < 1 || o->max_units > GROUP_MAX)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "FMHA grouping options out of range (streams 1..%d, granularity >= 1, "
                          "units 1..%d)", GROUP_MAX_STREAMS, GROUP_MAX);
    for (int i = 0; i < n; i++)
        if (len[i] < 1)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "FMHA grouping: sequence %d has length %d",
                              i, len[i]);
    u->d = malloc((size_t)n * sizeof *u->d);
    if (!u->d)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    memcpy(u->d, len, (size_t)n * sizeof *u->d);
    qsort(u->d, (size_t)n, sizeof *u->d, cmp_int_desc);
    u->n = n;
    for (int g = o->granularity;; g = g * 2) {
        int m = 0;
        u->p[0] = 0;
        for (int i = 1; i < n && m < o->max_units; i++)
            if ((u->d[i - 1] - 1) / g != (u->d[i] - 1) / g)
                u->p[++m] = i;
        int over = 0;
        for (int i = u->p[m] + 1; i < n && !over; i++)
            over = (u->d[i - 1] - 1) / g != (u->d[i] - 1) / g;
        if (m + 1 <= o->max_units && !over) {
            u->p[++m] = n;
            u->m = m;
            u->gran = g;
            return UNPAD_OK;
        }
    }
}

/* The groups' kernels sharing the device (cost_fmha_streams_us), forward then backward, launched
 * longest first; a stream's launches follow each other, so the longest chain pays its launches. */
static double plan_sim_us(const hw_spec *hw, const calib_coef *c, int heads, const units *u,
                          const int *cuts, int G, const int *gstream)
{
    const int *len[GROUP_MAX];
    int cnt[GROUP_MAX], per[GROUP_MAX_STREAMS] = {0}, chain = 0;
    for (int g = 0; g < G; g++) {
        len[g] = u->d + u->p[cuts[g]];
        cnt[g] = u->p[cuts[g + 1]] - u->p[cuts[g]];
        if (++per[gstream[g]] > chain)
            chain = per[gstream[g]];
    }
    return cost_fmha_streams_us(hw, c, heads, len, cnt, gstream, G, 0, NULL) +
           cost_fmha_streams_us(hw, c, heads, len, cnt, gstream, G, 1, NULL) +
           passes_us(hw, c, heads, u->d, u->p[cuts[G]]) + 2.0 * chain * c->launch_us;
}

/* Fills p's groups from cut unit indices cuts[0..G] (cuts[0] = 0, cuts[G] = m) and streams. */
static void plan_fill(const hw_spec *hw, const calib_coef *c, int heads, const units *u,
                      const int *cuts, int G, const int *gstream, double W, group_plan *p)
{
    memset(p, 0, sizeof *p);
    p->ngroups = G;
    p->work_us = W;
    double chain[GROUP_MAX_STREAMS] = {0};
    int smax = 0;
    for (int g = 0; g < G; g++) {
        int a = u->p[cuts[g]], b = u->p[cuts[g + 1]];
        p->hi[g] = u->d[a];
        p->lo[g] = u->d[b - 1];
        p->count[g] = b - a;
        p->stream[g] = gstream[g];
        p->us[g] = group_alone_us(hw, c, heads, u->d + a, b - a);
        p->start_us[g] = chain[gstream[g]];
        chain[gstream[g]] += p->us[g];
        p->end_us[g] = chain[gstream[g]];
        if (gstream[g] + 1 > smax)
            smax = gstream[g] + 1;
    }
    p->streams = smax;
    for (int s = 0; s < smax; s++)
        if (chain[s] > p->chain_us)
            p->chain_us = chain[s];
    p->objective_us = p->chain_us > W ? p->chain_us : W;
    p->total_us = plan_sim_us(hw, c, heads, u, cuts, G, gstream);
    /* Sharing the multiprocessors stretches every kernel: the chains end at the simulated total. */
    double k = p->chain_us > 0 ? p->total_us / p->chain_us : 1;
    for (int g = 0; g < G; g++) {
        p->start_us[g] *= k;
        p->end_us[g] *= k;
    }
}

/* (cost, groups) compared lexicographically: the cost is exact; groups break ties. */
typedef struct {
    double cost;
    int groups;
} val;

static int val_less(val a, val b)
{
    return a.cost < b.cost || (a.cost == b.cost && a.groups < b.groups);
}

/* The DP's tables; by_sim 0: the plan of fewest streams reaching the least objective
 * max(W, chain); by_sim 1: of the DP's best plan for each stream count 1..S and one launch, the
 * one whose simulated total (plan_sim_us) is least. */
static int plan_dp(const hw_spec *hw, const calib_coef *c, int heads, const int *len, int n,
                   const group_opts *o, int by_sim, group_plan *out, unpad_err *err)
{
    units u;
    int rc = units_make(len, n, o, &u, err);
    if (rc)
        return rc;
    int m = u.m, S = o->max_streams, M = m + 1;
    double *seg = malloc((size_t)M * M * sizeof *seg);
    val *g1 = malloc((size_t)M * M * sizeof *g1);
    int *g1cut = malloc((size_t)M * M * sizeof *g1cut);
    val *f = malloc((size_t)(S + 1) * M * sizeof *f);
    int *fcut = malloc((size_t)(S + 1) * M * sizeof *fcut);
    double *pre_f = malloc((size_t)n * sizeof *pre_f), *pre_b = malloc((size_t)n * sizeof *pre_b);
    if (!seg || !g1 || !g1cut || !f || !fcut || !pre_f || !pre_b) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        goto out;
    }
    /* seg(a, b) = group_alone_us of units [a, b): one prefix simulation per start unit gives every
     * end at once (the same numbers, O(m n) tiles instead of O(m^2 n)). */
    for (int a = 0; a < m; a++) {
        int n0 = u.p[a], k = n - n0;
        cost_fmha_prefix_us(hw, c, heads, u.d + n0, k, 0, pre_f);
        cost_fmha_prefix_us(hw, c, heads, u.d + n0, k, 1, pre_b);
        double tokens = 0; /* of units [a, b), added unit by unit: the passes stay O(n) a start */
        for (int b = a + 1; b <= m; b++) {
            int last = u.p[b] - n0 - 1;
            tokens += cost_fmha_tokens(u.d + u.p[b - 1], u.p[b] - u.p[b - 1]);
            seg[a * M + b] = pre_f[last] + pre_b[last] + cost_fmha_passes_us(hw, c, heads, tokens, 1) +
                             2 * c->launch_us;
        }
    }
    /* g1(a, b): best single-stream grouping of units [a, b); its first group is [a, g1cut). */
    for (int b = 1; b <= m; b++)
        for (int a = b - 1; a >= 0; a--) {
            val best = {seg[a * M + b], 1};
            int cut = b;
            for (int k = a + 1; k < b; k++) {
                val v = {seg[a * M + k] + g1[k * M + b].cost, 1 + g1[k * M + b].groups};
                if (val_less(v, best)) {
                    best = v;
                    cut = k;
                }
            }
            g1[a * M + b] = best;
            g1cut[a * M + b] = cut;
        }
    /* f_s(b): units [0, b) on at most s streams; the last used stream takes [fcut, b). */
    for (int b = 0; b <= m; b++) {
        f[b] = (val){b ? INFINITY : 0, 0};
        fcut[b] = -1;
    }
    for (int s = 1; s <= S; s++)
        for (int b = 0; b <= m; b++) {
            val best = f[(s - 1) * M + b];
            int cut = -1;
            for (int a = 0; a < b; a++) {
                val prev = f[(s - 1) * M + a], seg1 = g1[a * M + b];
                if (isinf(prev.cost))
                    continue;
                val v = {prev.cost > seg1.cost ? prev.cost : seg1.cost, prev.groups + seg1.groups};
                if (val_less(v, best)) {
                    best = v;
                    cut = a;
                }
            }
            f[s * M + b] = best;
            fcut[s * M + b] = cut;
        }
    double W = work_us(hw, c, heads, u.d, n);
    int sbest = 1;
    double tbest = INFINITY;
    for (int s = 1; s <= S; s++) { /* fewest streams reaching the least objective */
        double t = f[s * M + m].cost > W ? f[s * M + m].cost : W;
        if (t < tbest) {
            tbest = t;
            sbest = s;
        }
    }
    int have = 0;
    for (int s = by_sim ? 1 : sbest; s <= (by_sim ? S : sbest); s++) {
        /* Walk back from the last stream (shortest lengths) to the first (longest). */
        int ranges[GROUP_MAX_STREAMS + 1][2], nr = 0;
        for (int t = s, b = m; b > 0; t--) {
            int a = fcut[t * M + b];
            if (a < 0)
                continue; /* stream t unused at this prefix */
            ranges[nr][0] = a;
            ranges[nr][1] = b;
            nr++;
            b = a;
        }
        int cuts[GROUP_MAX + 1], gstream[GROUP_MAX], G = 0;
        cuts[0] = 0;
        for (int r = nr - 1, st = 0; r >= 0; r--, st++)
            for (int a = ranges[r][0]; a < ranges[r][1]; a = g1cut[a * M + ranges[r][1]]) {
                gstream[G] = st;
                cuts[++G] = g1cut[a * M + ranges[r][1]];
            }
        group_plan cand;
        plan_fill(hw, c, heads, &u, cuts, G, gstream, W, &cand);
        if (!have || cand.total_us < out->total_us ||
            (cand.total_us == out->total_us && cand.ngroups < out->ngroups)) {
            *out = cand;
            have = 1;
        }
    }
    if (by_sim) { /* one launch of the whole batch, longest first */
        int cuts[2] = {0, m}, gstream[1] = {0};
        group_plan one;
        plan_fill(hw, c, heads, &u, cuts, 1, gstream, W, &one);
        if (one.total_us <= out->total_us)
            *out = one;
    }
out:
    free(seg);
    free(g1);
    free(g1cut);
    free(f);
    free(fcut);
    free(pre_f);
    free(pre_b);
    free(u.d);
    return rc;
}

int group_plan_dp(const hw_spec *hw, const calib_coef *c, int heads, const int *len, int n,
                  const group_opts *o, group_plan *out, unpad_err *err)
{
    calib_coef tmp;
    return plan_dp(hw, batch_calib(hw, c, heads, len, n, &tmp), heads, len, n, o, 0, out, err);
}

int group_plan_auto(const hw_spec *hw, const calib_coef *c, int heads, const int *len, int n,
                    const group_opts *o, group_plan *out, unpad_err *err)
{
    calib_coef tmp;
    return plan_dp(hw, batch_calib(hw, c, heads, len, n, &tmp), heads, len, n, o, 1, out, err);
}

int group_plan_brute(const hw_spec *hw, const calib_coef *c, int heads, const int *len, int n,
                     const group_opts *o, group_plan *out, unpad_err *err)
{
    calib_coef tmp;
    c = batch_calib(hw, c, heads, len, n, &tmp);
    units u;
    int rc = units_make(len, n, o, &u, err);
    if (rc)
        return rc;
    int m = u.m;
    if (m > 14) {
        free(u.d);
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "brute force over %d units (at most 14)", m);
    }
    double W = work_us(hw, c, heads, u.d, n);
    double best = INFINITY;
    int best_cuts[GROUP_MAX + 1], best_stream[GROUP_MAX], bestG = 0;
    for (unsigned cm = 0; cm < (1u << (m - 1)); cm++) {
        int cuts[GROUP_MAX + 1], G = 0;
        cuts[0] = 0;
        for (int i = 1; i < m; i++)
            if (cm >> (i - 1) & 1)
                cuts[++G] = i;
        cuts[++G] = m;
        double t[GROUP_MAX];
        for (int g = 0; g < G; g++)
            t[g] = group_alone_us(hw, c, heads, u.d + u.p[cuts[g]],
                                  u.p[cuts[g + 1]] - u.p[cuts[g]]);
        /* Stream splits: a break after group g where bit g is set. */
        for (unsigned sm = 0; sm < (1u << (G - 1)); sm++) {
            if (__builtin_popcount(sm) + 1 > o->max_streams)
                continue;
            double chain = 0, worst = 0;
            int st[GROUP_MAX], s = 0;
            for (int g = 0; g < G; g++) {
                st[g] = s;
                chain += t[g];
                if (chain > worst)
                    worst = chain;
                if (g + 1 < G && (sm >> g & 1)) {
                    chain = 0;
                    s++;
                }
            }
            double tot = worst > W ? worst : W;
            if (tot < best) {
                best = tot;
                bestG = G;
                memcpy(best_cuts, cuts, sizeof(int) * (size_t)(G + 1));
                memcpy(best_stream, st, sizeof(int) * (size_t)G);
            }
        }
    }
    plan_fill(hw, c, heads, &u, best_cuts, bestG, best_stream, W, out);
    free(u.d);
    return UNPAD_OK;
}

int group_plan_bounds(const hw_spec *hw, const calib_coef *c, int heads, const int *len, int n,
                      const int *bounds, int nb, int max_streams, group_plan *out, unpad_err *err)
{
    if (nb < 0 || nb + 1 > GROUP_MAX)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "%d FMHA group boundaries (at most %d)", nb,
                          GROUP_MAX - 1);
    for (int j = 1; j < nb; j++)
        if (bounds[j] <= bounds[j - 1])
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                              "FMHA group boundaries must ascend (%d after %d)", bounds[j],
                              bounds[j - 1]);
    int S = max_streams < 1 ? 1 : max_streams > GROUP_MAX_STREAMS ? GROUP_MAX_STREAMS : max_streams;
    group_opts o = {S, 1, GROUP_MAX};
    calib_coef tmp;
    c = batch_calib(hw, c, heads, len, n, &tmp);
    units u;
    int rc = units_make(len, n, &o, &u, err);
    if (rc)
        return rc;
    /* Units = the non-empty bins, longest first. */
    int m = 0;
    u.p[0] = 0;
    for (int i = 1; i < n; i++) {
        int bi = 0, bj = 0;
        while (bi < nb && u.d[i - 1] > bounds[bi])
            bi++;
        while (bj < nb && u.d[i] > bounds[bj])
            bj++;
        if (bi != bj)
            u.p[++m] = i;
    }
    u.p[++m] = n;
    u.m = m;
    /* Groups are fixed; choose the contiguous stream split minimising the longest chain. */
    double t[GROUP_MAX], pre[GROUP_MAX + 1] = {0};
    for (int g = 0; g < m; g++) {
        t[g] = group_alone_us(hw, c, heads, u.d + u.p[g], u.p[g + 1] - u.p[g]);
        pre[g + 1] = pre[g] + t[g];
    }
    double f[GROUP_MAX_STREAMS + 1][GROUP_MAX + 1];
    int fc[GROUP_MAX_STREAMS + 1][GROUP_MAX + 1];
    for (int b = 0; b <= m; b++)
        f[0][b] = b ? INFINITY : 0;
    for (int s = 1; s <= S; s++)
        for (int b = 0; b <= m; b++) {
            f[s][b] = f[s - 1][b];
            fc[s][b] = -1;
            for (int a = 0; a < b; a++) {
                double v = f[s - 1][a] > pre[b] - pre[a] ? f[s - 1][a] : pre[b] - pre[a];
                if (v < f[s][b]) {
                    f[s][b] = v;
                    fc[s][b] = a;
                }
            }
        }
    double W = work_us(hw, c, heads, u.d, n);
    int sbest = 1;
    double tbest = INFINITY;
    for (int s = 1; s <= S; s++) {
        double tt = f[s][m] > W ? f[s][m] : W;
        if (tt < tbest) {
            tbest = tt;
            sbest = s;
        }
    }
    int brk[GROUP_MAX_STREAMS + 1], nbk = 0;
    for (int s = sbest, b = m; b > 0; s--) {
        int a = fc[s][b];
        if (a < 0)
            continue;
        brk[nbk++] = a;
        b = a;
    }
    int cuts[GROUP_MAX + 1], gstream[GROUP_MAX];
    for (int g = 0; g <= m; g++)
        cuts[g] = g;
    for (int g = 0; g < m; g++) {
        int st = 0;
        for (int r = 0; r < nbk; r++)
            if (brk[r] > 0 && g >= brk[r])
                st++;
        gstream[g] = st;
    }
    plan_fill(hw, c, heads, &u, cuts, m, gstream, W, out);
    free(u.d);
    return UNPAD_OK;
}

int group_plan_upper_bounds(const group_plan *p, int *bounds)
{
    /* Groups run longest first; boundaries ascend: the upper length of each shorter group. */
    int k = 0;
    for (int g = p->ngroups - 1; g >= 1; g--)
        bounds[k++] = p->hi[g];
    return k;
}

int group_seq_ranges(const group_plan *p, const int *len, int n, int *seq_begin, int *seq_end,
                     int *max_len, unpad_err *err)
{
    for (int i = 1; i < n; i++)
        if (len[i] > len[i - 1])
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                              "sequence %d (length %d) is longer than sequence %d (%d): grouped "
                              "attention needs the batch longest first", i, len[i], i - 1, len[i - 1]);
    int at = 0;
    for (int g = 0; g < p->ngroups; g++) {
        if (p->count[g] < 1 || at + p->count[g] > n)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "group %d of %d sequences overruns the batch of %d",
                              g, p->count[g], n);
        seq_begin[g] = at;
        at += p->count[g];
        seq_end[g] = at;
        max_len[g] = len[seq_begin[g]];
        if (len[seq_begin[g]] > p->hi[g] || len[at - 1] < p->lo[g])
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                              "group %d holds lengths %d..%d, but its sequences %d..%d run from %d to %d", g,
                              p->lo[g], p->hi[g], seq_begin[g], at - 1, len[seq_begin[g]], len[at - 1]);
    }
    if (at != n)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "the groups hold %d of the batch's %d sequences", at, n);
    return UNPAD_OK;
}

int group_bounds_parse(const char *s, int *bounds, int *nb, unpad_err *err)
{
    if (!s)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "no FMHA groups given");
    if (!strcmp(s, "auto")) {
        *nb = -1;
        return UNPAD_OK;
    }
    if (!strcmp(s, "none")) {
        *nb = 0;
        return UNPAD_OK;
    }
    if (!*s)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "empty FMHA groups list (expected auto, none or lengths like 128,256)");
    char buf[CFG_STR_LEN];
    if (strlen(s) >= sizeof buf)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "FMHA groups list too long");
    strcpy(buf, s);
    int k = 0;
    /* split at every comma: an empty item (128,,384 or a comma at either end) is a typo */
    for (char *tok = buf, *next; tok; tok = next) {
        if ((next = strchr(tok, ',')))
            *next++ = '\0';
        if (!*tok)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                              "empty item in the FMHA groups list '%s' (expected auto, none or "
                              "ascending lengths like 128,256,384)", s);
        long v;
        if (unpad_parse_long(tok, &v) || v < 1 || v > 1 << 20)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                              "bad FMHA group boundary '%s' (expected auto, none or ascending "
                              "lengths like 128,256,384)", tok);
        if (k + 1 >= GROUP_MAX)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "more than %d FMHA group boundaries",
                              GROUP_MAX - 1);
        if (k > 0 && v <= bounds[k - 1])
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                              "FMHA group boundaries must ascend (%ld after %d)", v, bounds[k - 1]);
        bounds[k++] = (int)v;
    }
    *nb = k;
    return UNPAD_OK;
}

void group_bounds_format(const int *bounds, int nb, char *buf, size_t n)
{
    if (nb < 0) {
        snprintf(buf, n, "auto");
        return;
    }
    if (nb == 0) {
        snprintf(buf, n, "none");
        return;
    }
    size_t o = 0;
    buf[0] = '\0';
    for (int j = 0; j < nb && o < n; j++)
        o += (size_t)snprintf(buf + o, n - o, j ? ",%d" : "%d", bounds[j]);
}
