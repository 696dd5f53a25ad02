/* balance.c — the balancing policies (one table: balance_policy_types) over integer weights, and
 * the imbalance metrics. Every decision compares integers and breaks ties by sequence index, GPU
 * index or node creation order, so the result is the same on every machine. */
#include "balance.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const COUNT_NAMES[BAL_COUNT_COUNT] = {"equal", "free"};

const char *balance_policy_name(balance_policy p)
{
    return (unsigned)p < BAL_POLICY_COUNT ? balance_policy_types[p].name : "?";
}

int balance_policy_from_name(const char *s)
{
    for (int i = 0; i < BAL_POLICY_COUNT; i++)
        if (s && !strcmp(s, balance_policy_types[i].name))
            return i;
    return -1;
}

int balance_policy_parse(const char *s, balance_policy *out, unpad_err *err)
{
    int v = balance_policy_from_name(s);
    if (v >= 0) {
        *out = (balance_policy)v;
        return UNPAD_OK;
    }
    if (s && !strcmp(s, "pack"))
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "'pack' is now 'ffd-tokens' (sequence packing is a layout: --layout packed)");
    char names[256];
    return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "unknown policy '%s' (expected %s)", s ? s : "",
                      balance_policy_list(names, sizeof names, " | "));
}

const char *balance_policy_list(char *buf, size_t n, const char *sep)
{
    size_t at = 0;
    if (n)
        buf[0] = '\0';
    for (int p = 0; p < BAL_POLICY_COUNT && at < n; p++) {
        int w = snprintf(buf + at, n - at, "%s%s", p ? sep : "", balance_policy_types[p].name);
        at += w > 0 ? (size_t)w : 0;
    }
    return buf;
}

void balance_policy_help_print(FILE *f, const char *indent)
{
    for (int p = 0; p < BAL_POLICY_COUNT; p++)
        fprintf(f, "%s%-11s %s\n", indent, balance_policy_types[p].name, balance_policy_types[p].help);
}

const char *balance_count_name(balance_count c)
{
    return (unsigned)c < BAL_COUNT_COUNT ? COUNT_NAMES[c] : "?";
}

int balance_count_from_name(const char *s)
{
    for (int i = 0; i < BAL_COUNT_COUNT; i++)
        if (s && !strcmp(s, COUNT_NAMES[i]))
            return i;
    return -1;
}

int balance_count_parse(const char *s, balance_count *out, unpad_err *err)
{
    int v = balance_count_from_name(s);
    if (v < 0)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "unknown count '%s' (expected equal | free)",
                          s ? s : "");
    *out = (balance_count)v;
    return UNPAD_OK;
}

void balance_weights(const seq_cost *sc, const int *len, int n, int64_t *w)
{
    for (int i = 0; i < n; i++) {
        if (!sc) {
            w[i] = len[i];
            continue;
        }
        /* Rounded once per sequence from the same three doubles on every rank (IEEE basic
         * operations, no contraction under -std=c11), so every rank gets the same integers. */
        double ns = BALANCE_NS_PER_US * seq_cost_us(sc, len[i]);
        int64_t v = ns < 1.0 ? 1 : ns > 1e15 ? (int64_t)1e15 : (int64_t)(ns + 0.5);
        w[i] = v;
    }
}

/* ---- workspace ------------------------------------------------------------------------------ */

/* Lengths spanning at most this many values are sorted by counting (sort_by_length). */
#define BAL_LEN_SPAN 4096

struct balance_ws {
    int max_n, max_gpus;
    /* shared by the policies that sort */
    uint64_t *key, *key_tmp;  /* (max_n) sort keys */
    int *order;               /* (max_n) sequence indices, heaviest first */
    /* The last two sorts (weights and their order): policies run one after another on the same
     * batch (a sweep, or a trainer comparing plans) sort once. Matched by content, not pointer. */
    int64_t *memo_w[2];       /* (max_n) */
    int *memo_order[2];       /* (max_n) */
    int memo_n[2];            /* 0: empty */
    int memo_next;            /* slot to replace */
    int64_t *wtmp;            /* (max_n) token weights when none are given */
    int *lcount;              /* (BAL_LEN_SPAN + 1) counts of the length-bucket sort */
    /* each policy's own arrays, laid out in this block by its layout function (the largest
     * policy sets the size): one block serves every policy in turn */
    unsigned char *scratch;
};

/* Carves 16-byte-aligned arrays out of a policy's scratch block; with base NULL it only counts. */
typedef struct {
    unsigned char *base;
    size_t used;
} ws_carver;

static void *carve(ws_carver *c, size_t count, size_t size)
{
    size_t off = (c->used + 15) & ~(size_t)15;
    c->used = off + count * size;
    return c->base ? c->base + off : NULL;
}

int balance_ws_alloc(int max_n, int max_gpus, balance_ws **out, unpad_err *err)
{
    if (max_n < 1 || max_gpus < 1 || max_n > (1 << 28) || max_gpus > (1 << 20))
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "balance workspace: %d sequences on %d GPUs is out of range", max_n,
                          max_gpus);
    balance_ws *ws = calloc(1, sizeof *ws);
    if (!ws)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    ws->max_n = max_n;
    ws->max_gpus = max_gpus;
    size_t n = (size_t)max_n, scratch = 1;
    for (int p = 0; p < BAL_POLICY_COUNT; p++) {
        const balance_policy_type *t = &balance_policy_types[p];
        size_t need = t->ws_size ? t->ws_size(max_n, max_gpus) : 0;
        scratch = need > scratch ? need : scratch;
    }
    ws->key = malloc(n * sizeof *ws->key);
    ws->key_tmp = malloc(n * sizeof *ws->key_tmp);
    ws->order = malloc(n * sizeof *ws->order);
    for (int m = 0; m < 2; m++) {
        ws->memo_w[m] = malloc(n * sizeof *ws->memo_w[m]);
        ws->memo_order[m] = malloc(n * sizeof *ws->memo_order[m]);
    }
    ws->wtmp = malloc(n * sizeof *ws->wtmp);
    ws->lcount = malloc((BAL_LEN_SPAN + 1) * sizeof *ws->lcount);
    ws->scratch = malloc(scratch);
    if (!ws->key || !ws->key_tmp || !ws->order || !ws->memo_w[0] || !ws->memo_w[1] ||
        !ws->memo_order[0] || !ws->memo_order[1] || !ws->wtmp || !ws->lcount || !ws->scratch) {
        balance_ws_free(ws);
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0,
                          "out of memory for a balance workspace of %d sequences on %d GPUs", max_n,
                          max_gpus);
    }
    *out = ws;
    return UNPAD_OK;
}

void balance_ws_free(balance_ws *ws)
{
    if (!ws)
        return;
    free(ws->key);
    free(ws->key_tmp);
    free(ws->order);
    for (int m = 0; m < 2; m++) {
        free(ws->memo_w[m]);
        free(ws->memo_order[m]);
    }
    free(ws->wtmp);
    free(ws->lcount);
    free(ws->scratch);
    free(ws);
}

int balance_result_alloc(int max_n, int max_gpus, balance_result *r, unpad_err *err)
{
    memset(r, 0, sizeof *r);
    if (max_n < 1 || max_gpus < 1)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "balance result: bad size %d x %d", max_n,
                          max_gpus);
    r->max_n = max_n;
    r->max_gpus = max_gpus;
    r->gpu = malloc((size_t)max_n * sizeof *r->gpu);
    r->seq = malloc((size_t)max_n * sizeof *r->seq);
    r->start = malloc(((size_t)max_gpus + 1) * sizeof *r->start);
    r->load = malloc((size_t)max_gpus * sizeof *r->load);
    r->tokens = malloc((size_t)max_gpus * sizeof *r->tokens);
    if (!r->gpu || !r->seq || !r->start || !r->load || !r->tokens) {
        balance_result_free(r);
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    }
    return UNPAD_OK;
}

void balance_result_free(balance_result *r)
{
    free(r->gpu);
    free(r->seq);
    free(r->start);
    free(r->load);
    free(r->tokens);
    memset(r, 0, sizeof *r);
}

/* ---- shared steps --------------------------------------------------------------------------- */

static int check_input(const balance_ws *ws, const balance_input *in, const balance_result *out,
                       unpad_err *err)
{
    if (!in || !in->len || in->n < 1)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "balance: empty batch");
    if (in->gpus < 1 || in->gpus > in->n)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "balance: %d GPUs for %d sequences (need 1 <= GPUs <= sequences)", in->gpus,
                          in->n);
    if (in->n > ws->max_n || in->gpus > ws->max_gpus)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "balance: %d sequences on %d GPUs exceed the workspace (%d on %d)", in->n,
                          in->gpus, ws->max_n, ws->max_gpus);
    if (in->n > out->max_n || in->gpus > out->max_gpus)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "balance: %d sequences on %d GPUs exceed the result (%d on %d)", in->n,
                          in->gpus, out->max_n, out->max_gpus);
    if ((unsigned)in->count >= BAL_COUNT_COUNT)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "balance: bad count constraint %d",
                          (int)in->count);
    for (int i = 0; i < in->n; i++) {
        if (in->len[i] < 0)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "balance: sequence %d has length %d", i,
                              in->len[i]);
        if (in->w && (in->w[i] < 0 || in->w[i] > ((int64_t)1 << 40)))
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                              "balance: sequence %d has weight %lld (expected 0 to 2^40)", i,
                              (long long)in->w[i]);
    }
    return UNPAD_OK;
}

static const int64_t *weights_of(balance_ws *ws, const balance_input *in)
{
    if (in->w)
        return in->w;
    for (int i = 0; i < in->n; i++)
        ws->wtmp[i] = in->len[i];
    return ws->wtmp;
}

static int bits_for(uint64_t v)
{
    int b = 0;
    while (v) {
        b++;
        v >>= 1;
    }
    return b;
}

static int cmp_desc_then_index(const void *a, const void *b, void *ctx)
{
    const int64_t *w = ctx;
    int i = *(const int *)a, j = *(const int *)b;
    if (w[i] != w[j])
        return w[i] > w[j] ? -1 : 1;
    return (i > j) - (i < j);
}

static void radix_sort_heaviest_first(balance_ws *ws, const int64_t *w, int n);

/* ws->order by length, longest first, ties by lower index (one counting pass), kept only when it is
 * also the order of the weights: w equal within a length and strictly lower for every shorter
 * length, as a per-sequence cost of the length gives. 1 when kept; 0 (order undefined) otherwise. */
static int sort_by_length(balance_ws *ws, const int64_t *w, const int *len, int n)
{
    int lo = len[0], hi = len[0];
    for (int i = 1; i < n; i++) {
        lo = len[i] < lo ? len[i] : lo;
        hi = len[i] > hi ? len[i] : hi;
    }
    if ((long)hi - lo >= BAL_LEN_SPAN)
        return 0;
    int span = hi - lo + 1, *c = ws->lcount;
    memset(c, 0, (size_t)(span + 1) * sizeof *c);
    for (int i = 0; i < n; i++)
        c[hi - len[i] + 1]++;
    for (int d = 0; d < span; d++)
        c[d + 1] += c[d];
    for (int i = 0; i < n; i++)
        ws->order[c[hi - len[i]]++] = i;
    for (int i = 1; i < n; i++) {
        int a = ws->order[i - 1], b = ws->order[i];
        if (len[a] == len[b] ? w[a] != w[b] : w[a] <= w[b])
            return 0;
    }
    return 1;
}

/* ws->order = indices sorted heaviest first, ties by lower index; len (or NULL) the lengths the
 * weights were made from, for the counting sort. */
static void sort_heaviest_first(balance_ws *ws, const int64_t *w, const int *len, int n)
{
    for (int m = 0; m < 2; m++)
        if (ws->memo_n[m] == n && !memcmp(ws->memo_w[m], w, (size_t)n * sizeof *w)) {
            memcpy(ws->order, ws->memo_order[m], (size_t)n * sizeof *ws->order);
            return;
        }
    if (!len || n < 2 || !sort_by_length(ws, w, len, n))
        radix_sort_heaviest_first(ws, w, n);
    int m = ws->memo_next;
    ws->memo_next = !m;
    memcpy(ws->memo_w[m], w, (size_t)n * sizeof *w);
    memcpy(ws->memo_order[m], ws->order, (size_t)n * sizeof *ws->order);
    ws->memo_n[m] = n;
}

/* The general case: an LSD radix sort on (max - w, index) keys, 8 bits a pass, skipping passes
 * where every key shares the byte. */
static void radix_sort_heaviest_first(balance_ws *ws, const int64_t *w, int n)
{
    int64_t wmax = 0;
    for (int i = 0; i < n; i++)
        if (w[i] > wmax)
            wmax = w[i];
    int ib = bits_for((uint64_t)(n - 1)), wb = bits_for((uint64_t)wmax);
    if (ib + wb > 64) {
        for (int i = 0; i < n; i++)
            ws->order[i] = i;
        qsort_r(ws->order, (size_t)n, sizeof *ws->order, cmp_desc_then_index, (void *)w);
        return;
    }
    uint64_t *k = ws->key, *t = ws->key_tmp;
    for (int i = 0; i < n; i++)
        k[i] = ((uint64_t)(wmax - w[i]) << ib) | (uint64_t)i;
    /* Only the weight bits are sorted: the keys start in index order and every pass is stable,
     * so equal weights keep ascending indices (one pass fewer than sorting the index bits too). */
    int bits = ib + wb;
    for (int shift = ib; shift < bits; shift += 8) {
        int cnt[257] = {0};
        for (int i = 0; i < n; i++)
            cnt[((k[i] >> shift) & 255) + 1]++;
        if (cnt[((k[0] >> shift) & 255) + 1] == n)
            continue;
        for (int d = 0; d < 256; d++)
            cnt[d + 1] += cnt[d];
        for (int i = 0; i < n; i++)
            t[cnt[(k[i] >> shift) & 255]++] = k[i];
        uint64_t *s = k;
        k = t;
        t = s;
    }
    uint64_t mask = ib >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << ib) - 1);
    for (int i = 0; i < n; i++)
        ws->order[i] = (int)(k[i] & mask);
}

/* Slots per GPU under the count constraint: equal: floor(n/k) + (g < n mod k); free: n. */
static void set_caps(int *cap, int n, int k, balance_count c)
{
    for (int g = 0; g < k; g++)
        cap[g] = c == BAL_EQUAL ? n / k + (g < n % k) : n;
}

/* Fills out->start/seq/load/tokens from out->gpu. */
static void finish(const balance_input *in, const int64_t *w, balance_result *out)
{
    int n = in->n, k = in->gpus;
    out->n = n;
    out->gpus = k;
    for (int g = 0; g <= k; g++)
        out->start[g] = 0;
    for (int g = 0; g < k; g++)
        out->load[g] = out->tokens[g] = 0;
    for (int i = 0; i < n; i++) {
        int g = out->gpu[i];
        out->start[g + 1]++;
        out->load[g] += w[i];
        out->tokens[g] += in->len[i];
    }
    for (int g = 0; g < k; g++)
        out->start[g + 1] += out->start[g];
    /* Counting placement in index order keeps each GPU's list ascending. */
    int *fill = out->start; /* reuse: shift back afterwards */
    for (int i = 0; i < n; i++)
        out->seq[fill[out->gpu[i]]++] = i;
    for (int g = k; g > 0; g--)
        out->start[g] = out->start[g - 1];
    out->start[0] = 0;
}

/* ---- none and sort-deal --------------------------------------------------------------------- */

static int assign_none(balance_ws *ws, const balance_input *in, balance_result *out, unpad_err *err)
{
    const int64_t *w = weights_of(ws, in);
    int n = in->n, k = in->gpus, q = n / k, r = n % k;
    for (int i = 0; i < n; i++)
        out->gpu[i] = i < r * (q + 1) ? i / (q + 1) : r + (i - r * (q + 1)) / q;
    finish(in, w, out);
    return UNPAD_OK;
}

static int assign_sort_deal(balance_ws *ws, const balance_input *in, balance_result *out,
                            unpad_err *err)
{
    const int64_t *w = weights_of(ws, in);
    sort_heaviest_first(ws, w, in->len, in->n);
    for (int i = 0; i < in->n; i++)
        out->gpu[ws->order[i]] = i % in->gpus;
    finish(in, w, out);
    return UNPAD_OK;
}

/* ---- lpt ------------------------------------------------------------------------------------- */

/* The least-loaded GPU with a free slot comes from a winner tree over the GPUs: node i holds the
 * first of its two children's GPUs by (key, index), the left child's GPUs having the lower indices;
 * a placement replays one leaf's path to the root, one comparison a level and no early exit. */
typedef struct {
    int *win;         /* (2 * max tree size) winner of node i; leaf size + g holds GPU g */
    int *cap, *cnt;   /* (max_gpus) slots and sequences placed */
    int64_t *key;     /* (max tree size) the GPU's load; INT64_MAX once full, and past the GPUs */
} lpt_ws;

static int tree_size_for(int k)
{
    int size = 1;
    while (size < k)
        size <<= 1;
    return size;
}

static size_t lpt_layout(unsigned char *base, int max_n, int max_gpus, lpt_ws *s)
{
    ws_carver c = {base, 0};
    size_t k = (size_t)max_gpus, size = (size_t)tree_size_for(max_gpus);
    s->win = carve(&c, 2 * size, sizeof *s->win);
    s->cap = carve(&c, k, sizeof *s->cap);
    s->cnt = carve(&c, k, sizeof *s->cnt);
    s->key = carve(&c, size, sizeof *s->key);
    return c.used;
}

static size_t lpt_ws_size(int max_n, int max_gpus)
{
    lpt_ws s;
    return lpt_layout(NULL, max_n, max_gpus, &s);
}

static void win_set(lpt_ws *s, int i)
{
    int a = s->win[2 * i], b = s->win[2 * i + 1];
    s->win[i] = s->key[b] < s->key[a] ? b : a;
}

static int assign_lpt(balance_ws *ws, const balance_input *in, balance_result *out, unpad_err *err)
{
    lpt_ws s;
    lpt_layout(ws->scratch, ws->max_n, ws->max_gpus, &s);
    const int64_t *w = weights_of(ws, in);
    int n = in->n, k = in->gpus, size = tree_size_for(k);
    sort_heaviest_first(ws, w, in->len, n);
    set_caps(s.cap, n, k, in->count);
    for (int g = 0; g < size; g++) {
        s.key[g] = g < k ? 0 : INT64_MAX;
        s.win[size + g] = g;
    }
    for (int g = 0; g < k; g++)
        s.cnt[g] = 0;
    for (int i = size - 1; i >= 1; i--)
        win_set(&s, i);
    for (int i = 0; i < n; i++) {
        int q = ws->order[i], g = s.win[1];
        out->gpu[q] = g;
        s.key[g] = ++s.cnt[g] == s.cap[g] ? INT64_MAX : s.key[g] + w[q]; /* full: never first again */
        for (int j = (size + g) >> 1; j >= 1; j >>= 1)
            win_set(&s, j);
    }
    finish(in, w, out);
    return UNPAD_OK;
}

/* ---- kk -------------------------------------------------------------------------------------- */

/* One subset of a Karmarkar-Karp partial partition: its weight and its sequences as a linked list
 * through kk_ws.next (head -1: empty, a padding item of the balanced variant). */
typedef struct {
    int64_t sum;
    int32_t head, tail;
} kk_entry;

/* A partial partition: m nonzero subsets stored in descending order of sum at arena[off..off+m);
 * the other k - m subsets are empty. */
typedef struct {
    int64_t diff;   /* largest sum - smallest sum (0 for an empty subset) */
    int32_t off, m;
    int32_t id;     /* creation order: ties in the heap go to the older node */
    int32_t single; /* 1: a lone sequence, its entry at single[off] */
} kk_node;

typedef struct {
    kk_node *nodes;       /* (max_n + max_gpus) heap of partial partitions */
    kk_entry *arena[2];   /* (arena_cap) entries of the live nodes, double-buffered */
    int arena_cap, arena_cur, arena_top;
    kk_entry *run, *run_tmp; /* (max_gpus) merge scratch */
    kk_entry *single;     /* (max_n) lone sequences, heaviest first (free counts) */
    int32_t *next;        /* (max_n) list links of the subsets */
    const int *order;     /* the workspace's sort, heaviest first */
} kk_ws;

static size_t kk_layout(unsigned char *base, int max_n, int max_gpus, kk_ws *s)
{
    ws_carver c = {base, 0};
    size_t n = (size_t)max_n, k = (size_t)max_gpus;
    s->arena_cap = 2 * (max_n + max_gpus) + max_gpus;
    s->nodes = carve(&c, n + k, sizeof *s->nodes);
    s->arena[0] = carve(&c, (size_t)s->arena_cap, sizeof(kk_entry));
    s->arena[1] = carve(&c, (size_t)s->arena_cap, sizeof(kk_entry));
    s->run = carve(&c, k, sizeof(kk_entry));
    s->run_tmp = carve(&c, k, sizeof(kk_entry));
    s->single = carve(&c, n, sizeof(kk_entry));
    s->next = carve(&c, n, sizeof *s->next);
    return c.used;
}

static size_t kk_ws_size(int max_n, int max_gpus)
{
    kk_ws s;
    return kk_layout(NULL, max_n, max_gpus, &s);
}

static int node_before(const kk_node *a, const kk_node *b)
{
    return a->diff > b->diff || (a->diff == b->diff && a->id < b->id);
}

/* The partial partitions' heap is 4-ary (half the levels of a binary one, the children of a node
 * side by side) and sifts by moving the hole, one copy a level. */
#define KK_ARITY 4

static void node_down(kk_node *h, int size, int i)
{
    kk_node x = h[i];
    for (;;) {
        int c = KK_ARITY * i + 1, best = c;
        if (c >= size)
            break;
        int end = c + KK_ARITY < size ? c + KK_ARITY : size;
        for (int j = c + 1; j < end; j++)
            if (node_before(&h[j], &h[best]))
                best = j;
        if (!node_before(&h[best], &x))
            break;
        h[i] = h[best];
        i = best;
    }
    h[i] = x;
}

static void node_up(kk_node *h, int i)
{
    kk_node x = h[i];
    while (i > 0) {
        int p = (i - 1) / KK_ARITY;
        if (!node_before(&x, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

static kk_node node_pop(kk_node *h, int *size)
{
    kk_node top = h[0];
    h[0] = h[--*size];
    if (*size > 0)
        node_down(h, *size, 0);
    return top;
}

/* Copies the live nodes' entries to the other arena buffer so the top has room again. */
static void arena_compact(kk_ws *s, int live)
{
    kk_entry *src = s->arena[s->arena_cur], *dst = s->arena[!s->arena_cur];
    int top = 0;
    for (int i = 0; i < live; i++) {
        kk_node *nd = &s->nodes[i];
        if (nd->single)
            continue;
        memcpy(dst + top, src + nd->off, (size_t)nd->m * sizeof *dst);
        nd->off = top;
        top += nd->m;
    }
    s->arena_cur = !s->arena_cur;
    s->arena_top = top;
}

/* Stable merge sort of e[0..m) by descending sum. */
static void entries_sort(kk_entry *e, kk_entry *tmp, int m)
{
    if (m < 24) {
        for (int i = 1; i < m; i++) {
            kk_entry x = e[i];
            int j = i;
            while (j > 0 && e[j - 1].sum < x.sum) {
                e[j] = e[j - 1];
                j--;
            }
            e[j] = x;
        }
        return;
    }
    int h = m / 2;
    entries_sort(e, tmp, h);
    entries_sort(e + h, tmp, m - h);
    int i = 0, j = h, o = 0;
    while (i < h && j < m)
        tmp[o++] = e[j].sum > e[i].sum ? e[j++] : e[i++];
    while (i < h)
        tmp[o++] = e[i++];
    while (j < m)
        tmp[o++] = e[j++];
    memcpy(e, tmp, (size_t)m * sizeof *e);
}

static void list_concat(int32_t *next, kk_entry *a, const kk_entry *b)
{
    if (b->head < 0)
        return;
    if (a->head < 0) {
        a->head = b->head;
        a->tail = b->tail;
        return;
    }
    next[a->tail] = b->head;
    a->tail = b->tail;
}

/* A lone subset x joins an empty subset of the m < k subsets e (descending): e with x in place.
 * Ties: x after e's equal sums when x is B's, before them when it is A's (x_first). */
static int entries_insert(kk_entry *dst, const kk_entry *e, int m, const kk_entry *x, int x_first)
{
    int i = 0;
    int64_t v = x->sum;
    if (x_first)
        for (; i < m && e[i].sum > v; i++)
            dst[i] = e[i];
    else
        for (; i < m && e[i].sum >= v; i++)
            dst[i] = e[i];
    dst[i] = *x;
    for (; i < m; i++)
        dst[i + 1] = e[i];
    return m + 1;
}

/* Differencing step: subset i of A (heaviest first) joins subset k-1-i of B, so the heaviest of one
 * meets the lightest of the other. Result entries are written at the arena top, its node to *nd. */
static void kk_merge(kk_ws *s, int k, const kk_node *A, const kk_node *B, int id, kk_node *nd)
{
    kk_entry *ar = s->arena[s->arena_cur];
    const kk_entry *a = (A->single ? s->single : ar) + A->off;
    const kk_entry *b = (B->single ? s->single : ar) + B->off;
    int ma = A->m, mb = B->m, o = 0;
    kk_entry *dst = ar + s->arena_top;
    if (mb == 1 && ma < k) { /* nothing to combine, one subset more: most merges */
        o = entries_insert(dst, a, ma, b, 0);
    } else if (ma == 1 && mb < k) {
        o = entries_insert(dst, b, mb, a, 1);
    } else if (ma == k && mb == k) { /* every subset combined: the sorted run is the result */
        for (int i = 0; i < k; i++) {
            dst[i] = a[i];
            dst[i].sum += b[k - 1 - i].sum;
            list_concat(s->next, &dst[i], &b[k - 1 - i]);
        }
        entries_sort(dst, s->run_tmp, k);
        o = k;
    } else {
        int r1 = ma < k - mb ? ma : k - mb;          /* A alone: i in [0, r1) */
        int o_lo = k - mb > 0 ? k - mb : 0;          /* both: i in [o_lo, ma) */
        int r2 = ma - o_lo > 0 ? ma - o_lo : 0;
        int r3 = mb < k - ma ? mb : k - ma;          /* B alone: B[0..r3) */
        if (r1 < 0)
            r1 = 0;
        if (r3 < 0)
            r3 = 0;
        kk_entry *run = s->run;
        for (int t = 0; t < r2; t++) {
            int i = o_lo + t;
            run[t] = a[i];
            run[t].sum += b[k - 1 - i].sum;
            list_concat(s->next, &run[t], &b[k - 1 - i]);
        }
        entries_sort(run, s->run_tmp, r2);
        /* Three descending runs -> one; ties: A's run, then the combined run, then B's. */
        int i1 = 0, i2 = 0, i3 = 0;
        while (i1 < r1 || i2 < r2 || i3 < r3) {
            int pick = 0;
            int64_t best = INT64_MIN;
            if (i1 < r1 && a[i1].sum > best) {
                best = a[i1].sum;
                pick = 1;
            }
            if (i2 < r2 && run[i2].sum > best) {
                best = run[i2].sum;
                pick = 2;
            }
            if (i3 < r3 && b[i3].sum > best) {
                best = b[i3].sum;
                pick = 3;
            }
            dst[o++] = pick == 1 ? a[i1++] : pick == 2 ? run[i2++] : b[i3++];
        }
    }
    *nd = (kk_node){.diff = o ? dst[0].sum - (o == k ? dst[k - 1].sum : 0) : 0, .off = s->arena_top,
                    .m = o, .id = id};
    s->arena_top += o;
}

/* The queue's next lone sequence as a node (ids = sequence indices, as if it were in the heap). */
static kk_node kk_queued(const kk_ws *s, const int64_t *w, int qh)
{
    int i = s->order[qh];
    return (kk_node){.diff = w[i], .off = qh, .m = 1, .id = i, .single = 1};
}

/* The heap's second node: the first of the top's children; -1 when the top is alone. */
static int node_second(const kk_node *h, int size)
{
    if (size < 2)
        return -1;
    int best = 1, end = 1 + KK_ARITY < size ? 1 + KK_ARITY : size;
    for (int j = 2; j < end; j++)
        if (node_before(&h[j], &h[best]))
            best = j;
    return best;
}

static int assign_kk(balance_ws *ws, const balance_input *in, balance_result *out, unpad_err *err)
{
    kk_ws st, *s = &st;
    kk_layout(ws->scratch, ws->max_n, ws->max_gpus, s);
    s->order = ws->order;
    const int64_t *w = weights_of(ws, in);
    int n = in->n, k = in->gpus, live = 0, id = 0, qh = n;
    kk_node *h = s->nodes;
    kk_entry *ar = s->arena[0];
    s->arena_cur = 0;
    s->arena_top = 0;
    for (int i = 0; i < n; i++)
        s->next[i] = -1;
    sort_heaviest_first(ws, w, in->len, n);
    if (in->count == BAL_FREE) {
        /* Every sequence starts as its own partial partition: one subset holding it. They wait in
         * a sorted queue (ids = sequence indices, as if they were in the heap); only merged
         * partitions (ids n, n+1, ...) go through the heap. */
        for (int p = 0; p < n; p++)
            s->single[p] = (kk_entry){w[s->order[p]], s->order[p], s->order[p]};
        qh = 0;
        id = n;
    } else {
        /* Balanced variant: sorted sequences in consecutive k-tuples, one per GPU; every merge keeps
         * one member of each tuple per subset, so each GPU ends with the same count (+-1). */
        int tuples = (n + k - 1) / k;
        for (int t = 0; t < tuples; t++) {
            kk_entry *e = ar + s->arena_top;
            for (int j = 0; j < k; j++) {
                int p = t * k + j;
                e[j] = p < n ? (kk_entry){w[s->order[p]], s->order[p], s->order[p]}
                             : (kk_entry){0, -1, -1};
            }
            h[live++] = (kk_node){.diff = e[0].sum - e[k - 1].sum, .off = s->arena_top, .m = k,
                                  .id = id++};
            s->arena_top += k;
        }
        for (int i = (live - 2) / KK_ARITY; i >= 0; i--)
            node_down(h, live, i);
    }
    /* Each step differences the first two nodes of the queue of lone sequences (heaviest first,
     * which is also the heap's order among them) and the heap of merged nodes taken together. A
     * merge that takes the heap's top writes its result there (one sift instead of a pop and a
     * push; the heap's order is total, so what it yields next is the same), and skips the sift
     * when the result still comes before the top's children. */
    while (live + (n - qh) > 1) {
        if (s->arena_top + k > s->arena_cap)
            arena_compact(s, live);
        kk_node A, B, q = qh < n ? kk_queued(s, w, qh) : (kk_node){0};
        if (qh < n && (live == 0 || node_before(&q, &h[0]))) {
            A = q;
            if (++qh < n)
                q = kk_queued(s, w, qh);
            if (qh < n && (live == 0 || node_before(&q, &h[0]))) {
                B = q;
                qh++;
                kk_merge(s, k, &A, &B, id++, &h[live]);
                node_up(h, live++);
                continue;
            }
        } else {
            A = h[0];
            int c = node_second(h, live);
            if (qh < n && (c < 0 || node_before(&q, &h[c]))) {
                B = q;
                qh++;
                kk_merge(s, k, &A, &B, id++, &h[0]);
                if (c >= 0 && !node_before(&h[0], &h[c]))
                    node_down(h, live, 0);
                continue;
            }
            node_pop(h, &live);
        }
        B = h[0];
        kk_merge(s, k, &A, &B, id++, &h[0]);
        node_down(h, live, 0);
    }
    /* The last partial partition: subset p (heaviest first) goes to GPU p. */
    kk_node last = live ? h[0] : (kk_node){.off = 0, .m = 1, .single = 1}; /* n == 1 */
    const kk_entry *e = (last.single ? s->single : s->arena[s->arena_cur]) + last.off;
    for (int p = 0; p < last.m; p++)
        for (int i = e[p].head; i >= 0; i = s->next[i])
            out->gpu[i] = p;
    finish(in, w, out);
    return UNPAD_OK;
}

/* ---- ffd-tokens ------------------------------------------------------------------------------ */

typedef struct {
    int *cap, *left;          /* (max_gpus) slots, and those still free in a trial */
    int64_t *gload;           /* (max_gpus) remaining token budget */
    int64_t *tree;            /* (2 * tree_size) max remaining budget, segment tree */
    int tree_size;            /* power of two >= max_gpus */
    int tree_k, tree_linear;  /* GPUs in use; 1: few GPUs, scan the leaves instead */
    int equal;                /* equal counts (else free: no reservation, slots for all) */
    int *trial_gpu;           /* (max_n) the assignment of one FFD trial */
    const int *order;         /* the workspace's sort, longest first */
} ffd_ws;

static size_t ffd_layout(unsigned char *base, int max_n, int max_gpus, ffd_ws *s)
{
    ws_carver c = {base, 0};
    size_t k = (size_t)max_gpus;
    s->tree_size = 1;
    while (s->tree_size < max_gpus)
        s->tree_size <<= 1;
    s->cap = carve(&c, k, sizeof *s->cap);
    s->left = carve(&c, k, sizeof *s->left);
    s->gload = carve(&c, k, sizeof *s->gload);
    s->tree = carve(&c, 2 * (size_t)s->tree_size, sizeof *s->tree);
    s->trial_gpu = carve(&c, (size_t)max_n, sizeof *s->trial_gpu);
    return c.used;
}

static size_t ffd_ws_size(int max_n, int max_gpus)
{
    ffd_ws s;
    return ffd_layout(NULL, max_n, max_gpus, &s);
}

static void tree_set(ffd_ws *s, int g, int64_t v)
{
    int i = s->tree_size + g;
    s->tree[i] = v;
    if (s->tree_linear)
        return;
    for (i >>= 1; i >= 1; i >>= 1)
        s->tree[i] = s->tree[2 * i] > s->tree[2 * i + 1] ? s->tree[2 * i] : s->tree[2 * i + 1];
}

/* Lowest-index GPU whose key (ffd_key at `reserve`) is >= need, or -1. */
static int64_t ffd_key(const ffd_ws *s, int g, int64_t reserve);
static inline int tree_first_fit(const ffd_ws *s, int64_t need, int64_t reserve)
{
    if (s->tree_linear) { /* few GPUs: the keys from the state directly, no tree to keep */
        if (!s->equal) { /* no reservation, no GPU full: the key is the remaining budget */
            for (int g = 0; g < s->tree_k; g++)
                if (s->gload[g] >= need)
                    return g;
            return -1;
        }
        for (int g = 0; g < s->tree_k; g++)
            if (s->left[g] > 0 && ffd_key(s, g, reserve) >= need)
                return g;
        return -1;
    }
    if (s->tree[1] < need)
        return -1;
    int i = 1;
    while (i < s->tree_size)
        i = s->tree[2 * i] >= need ? 2 * i : 2 * i + 1;
    return i - s->tree_size;
}

/* Tree key of GPU g: remaining budget less the room its other free slots need at `reserve`
 * tokens each; -1 when it has no free slot. */
static int64_t ffd_key(const ffd_ws *s, int g, int64_t reserve)
{
    int left = s->left[g];
    return left == 0 ? -1 : s->gload[g] - (int64_t)(left - 1) * reserve;
}

static void ffd_rebuild(ffd_ws *s, int k, int64_t reserve)
{
    s->tree_k = k;
    s->tree_linear = k <= 32;
    if (s->tree_linear)
        return;
    for (int g = 0; g < s->tree_size; g++)
        s->tree[s->tree_size + g] = g < k ? ffd_key(s, g, reserve) : -1;
    for (int i = s->tree_size - 1; i >= 1; i--)
        s->tree[i] = s->tree[2 * i] > s->tree[2 * i + 1] ? s->tree[2 * i] : s->tree[2 * i + 1];
}

/* First-fit decreasing into k budgets of `budget` tokens (and the slots of the count constraint).
 * Under equal counts a GPU only takes a sequence if what remains of its budget still holds its
 * other free slots at the mean length of the sequences not yet placed; without that reservation
 * the long sequences crowd the first GPUs, the last ones get more sequences than slots, and only a
 * budget near twice the mean fits. The reservation falls as the sequences get shorter; the tree
 * is rebuilt when it has fallen by 1/128 (keys built with a larger reservation only ever refuse a
 * GPU that would fit, never accept one that does not). Integer arithmetic throughout.
 * Returns 1 and s->trial_gpu when everything fits. */
static int ffd_fits(ffd_ws *s, const int *len, int n, int k, int64_t budget, int64_t total,
                    int equal)
{
    for (int g = 0; g < k; g++) {
        s->gload[g] = budget; /* remaining budget */
        s->left[g] = s->cap[g];
    }
    int64_t left_tokens = total, reserve = equal ? total / n : 0;
    s->equal = equal;
    ffd_rebuild(s, k, reserve);
    for (int i = 0; i < n; i++) {
        int q = s->order[i];
        if (equal && i + 1 < n) {
            /* mean = (left - len) / m <= reserve - drop, without dividing for every sequence:
             * floor(a / m) <= r  <=>  a < (r + 1) m */
            int64_t a = left_tokens - len[q], m = n - i - 1;
            int64_t drop = reserve / 128 > 1 ? reserve / 128 : 1;
            if ((__int128)a < (__int128)(reserve - drop + 1) * m) {
                /* the same quotient; a 32-bit division where it fits is several times faster */
                reserve = (uint64_t)a <= UINT32_MAX ? (int64_t)((uint32_t)a / (uint32_t)m) : a / m;
                ffd_rebuild(s, k, reserve);
            }
        }
        int g = tree_first_fit(s, len[q], reserve);
        if (g < 0 && equal && i + 1 < n) {
            /* Refused under a stale reservation: retry with the current one (with it, a budget
             * of the whole batch always fits). */
            int64_t mean = (left_tokens - len[q]) / (n - i - 1);
            if (mean < reserve) {
                reserve = mean;
                ffd_rebuild(s, k, reserve);
                g = tree_first_fit(s, len[q], reserve);
            }
        }
        if (g < 0)
            return 0;
        s->trial_gpu[q] = g;
        s->gload[g] -= len[q];
        s->left[g]--;
        left_tokens -= len[q];
        if (!s->tree_linear) /* the linear scan reads the state itself */
            tree_set(s, g, ffd_key(s, g, reserve));
    }
    return 1;
}

static int assign_ffd_tokens(balance_ws *ws, const balance_input *in, balance_result *out,
                             unpad_err *err)
{
    ffd_ws st, *s = &st;
    ffd_layout(ws->scratch, ws->max_n, ws->max_gpus, s);
    s->order = ws->order;
    const int64_t *w = weights_of(ws, in);
    int n = in->n, k = in->gpus;
    /* Budgets are tokens: sort by length (wtmp may be w itself when w is tokens: same values). */
    int64_t *tok = ws->wtmp, total = 0, longest = 0;
    for (int i = 0; i < n; i++) {
        tok[i] = in->len[i];
        total += tok[i];
        if (tok[i] > longest)
            longest = tok[i];
    }
    sort_heaviest_first(ws, tok, in->len, n);
    set_caps(s->cap, n, k, in->count);
    int equal = in->count == BAL_EQUAL;
    /* The budget: from the lower bound, grow by steps that double until FFD fits, then bisect
     * to within 1/512 of the bound (the exact least budget buys nothing measurable). */
    int64_t lo = (total + k - 1) / k, hi;
    if (lo < longest)
        lo = longest;
    if (lo < 1)
        lo = 1;
    int64_t step = lo / (equal ? 64 : 256), tol = lo / 512;
    step = step > 1 ? step : 1;
    tol = tol > 1 ? tol : 1;
    /* out->gpu keeps the assignment of the last budget that fitted (fitted_at): the search ends
     * on it unless it ended on the whole batch untried */
    int64_t fitted_at = -1;
    for (hi = lo;; step *= 2) {
        if (hi >= total) {
            hi = total; /* any GPU can hold everything its slots allow */
            break;
        }
        if (ffd_fits(s, in->len, n, k, hi, total, equal)) {
            memcpy(out->gpu, s->trial_gpu, (size_t)n * sizeof *out->gpu);
            fitted_at = hi;
            break;
        }
        lo = hi + 1;
        hi += step;
    }
    while (hi - lo > tol) {
        int64_t mid = lo + (hi - lo) / 2;
        if (ffd_fits(s, in->len, n, k, mid, total, equal)) {
            hi = mid;
            memcpy(out->gpu, s->trial_gpu, (size_t)n * sizeof *out->gpu);
            fitted_at = mid;
        } else {
            lo = mid + 1;
        }
    }
    if (fitted_at != hi) {
        /* a budget of the whole batch always fits: the search ends on one that does */
        int fits = ffd_fits(s, in->len, n, k, hi, total, equal);
        UNPAD_INVARIANT(fits);
        memcpy(out->gpu, s->trial_gpu, (size_t)n * sizeof *out->gpu);
    }
    out->ffd_budget = hi;
    finish(in, w, out);
    return UNPAD_OK;
}

/* ---- the table ------------------------------------------------------------------------------ */

/* Adding a policy: its balance_policy value, a row here and its assign function. */
const balance_policy_type balance_policy_types[BAL_POLICY_COUNT] = {
    [BAL_NONE] = {"none", assign_none, NULL,
                  "loader order: GPU g takes the g-th consecutive slice of the batch", 1},
    [BAL_SORT_DEAL] = {"sort-deal", assign_sort_deal, NULL,
                       "sort longest first, deal round-robin (the MLPerf BERT submissions)", 1},
    [BAL_LPT] = {"lpt", assign_lpt, lpt_ws_size,
                 "longest processing time: heaviest first onto the least-loaded GPU", 0},
    [BAL_KK] = {"kk", assign_kk, kk_ws_size,
                "Karmarkar-Karp largest differencing (equal counts: the balanced variant)", 0},
    [BAL_FFD_TOKENS] = {"ffd-tokens", assign_ffd_tokens, ffd_ws_size,
                        "first-fit decreasing into the least per-GPU token budget that fits", 0},
};

int balance_count_matters(balance_policy p)
{
    return (unsigned)p >= BAL_POLICY_COUNT || !balance_policy_types[p].equal_always;
}

int balance_assign(balance_ws *ws, const balance_input *in, balance_result *out, unpad_err *err)
{
    if (!in)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "balance: no input");
    if ((unsigned)in->policy >= BAL_POLICY_COUNT)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "balance: unknown policy %d", (int)in->policy);
    int rc = check_input(ws, in, out, err);
    if (rc)
        return rc;
    out->ffd_budget = 0;
    return balance_policy_types[in->policy].assign(ws, in, out, err);
}

/* ---- metrics --------------------------------------------------------------------------------- */

void balance_metrics_compute(const balance_result *r, const int64_t *cost_ns, double fixed_us,
                             balance_metrics *m)
{
    int64_t tmax = -1, tsum = 0, kmax = 0, ksum = 0;
    int strag = 0;
    for (int g = 0; g < r->gpus; g++) {
        int64_t t = 0;
        if (cost_ns)
            for (int p = r->start[g]; p < r->start[g + 1]; p++)
                t += cost_ns[r->seq[p]];
        else
            t = r->load[g];
        if (t > tmax) {
            tmax = t;
            strag = g;
        }
        tsum += t;
        if (r->tokens[g] > kmax)
            kmax = r->tokens[g];
        ksum += r->tokens[g];
    }
    int k = r->gpus > 0 ? r->gpus : 1;
    m->max_us = (double)tmax / BALANCE_NS_PER_US + fixed_us;
    m->mean_us = (double)tsum / BALANCE_NS_PER_US / k + fixed_us;
    m->imbalance = m->mean_us > 0 ? m->max_us / m->mean_us : 1.0;
    m->idle = m->max_us > 0 ? 1.0 - m->mean_us / m->max_us : 0.0;
    m->max_tokens = kmax;
    m->mean_tokens = (double)ksum / k;
    m->token_imbalance = m->mean_tokens > 0 ? kmax / m->mean_tokens : 1.0;
    m->straggler = strag;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double balance_quantile(double *v, int n, double q)
{
    if (n < 1)
        return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    long rank = (long)(q * n);
    if ((double)rank < q * n)
        rank++;
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return v[rank - 1];
}

int balance_mc_summarise(const double *imbalance, const double *idle, const double *max_us,
                         const double *token_imbalance, int steps, balance_mc *out, unpad_err *err)
{
    memset(out, 0, sizeof *out);
    if (steps < 1)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "Monte Carlo summary of %d steps", steps);
    double *tmp = malloc((size_t)steps * sizeof *tmp);
    if (!tmp)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    double si = 0, sd = 0, st = 0, sk = 0, imax = 0;
    for (int i = 0; i < steps; i++) {
        si += imbalance[i];
        sd += idle[i];
        st += max_us[i];
        sk += token_imbalance[i];
        if (imbalance[i] > imax)
            imax = imbalance[i];
    }
    out->steps = steps;
    out->imbalance_mean = si / steps;
    out->idle_mean = sd / steps;
    out->step_us_mean = st / steps;
    out->token_imbalance_mean = sk / steps;
    out->imbalance_max = imax;
    memcpy(tmp, imbalance, (size_t)steps * sizeof *tmp);
    out->imbalance_p99 = balance_quantile(tmp, steps, 0.99);
    memcpy(tmp, idle, (size_t)steps * sizeof *tmp);
    out->idle_p99 = balance_quantile(tmp, steps, 0.99);
    free(tmp);
    return UNPAD_OK;
}
