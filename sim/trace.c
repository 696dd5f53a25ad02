/* trace.c — reading and writing trace rows. */
#include "trace.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "group.h"

void trace_write_header(FILE *f) { fprintf(f, "%s\n", TRACE_HEADER); }

static const char *const products_names[] = {"bf16", "fp8", "fp32"};

const char *trace_products_name(int products)
{
    return products >= 0 && products < 3 ? products_names[products] : "?";
}

void trace_write_products(FILE *f, int products)
{
    fprintf(f, "%s %s\n", TRACE_PRODUCTS_TAG, trace_products_name(products));
}

/* line: a products line (TRACE_PRODUCTS_TAG and a name); sets set's products, or refuses an unknown
 * name or one that differs from what the set already holds. */
static int parse_products(const char *path, int lineno, const char *line, trace_set *set, unpad_err *err)
{
    const char *v = line + strlen(TRACE_PRODUCTS_TAG);
    while (*v == ' ' || *v == '\t')
        v++;
    size_t n = strcspn(v, " \t\r");
    for (const char *q = v + n; *q; q++)
        if (*q != ' ' && *q != '\t' && *q != '\r')
            n = 0; /* something after the name */
    int p = -1;
    for (int i = 0; i < 3; i++)
        if (n == strlen(products_names[i]) && !strncmp(v, products_names[i], n))
            p = i;
    if (p < 0)
        return unpad_fail(err, UNPAD_EINVAL, path, lineno,
                          "'%s': expected '%s bf16', '%s fp8' or '%s fp32' (the trainer's products)", line,
                          TRACE_PRODUCTS_TAG, TRACE_PRODUCTS_TAG, TRACE_PRODUCTS_TAG);
    if (set->products_line && set->products != p)
        return unpad_fail(err, UNPAD_EINVAL, path, lineno,
                          "products %s, where the rows before were measured with %s: one trace per precision",
                          products_names[p], trace_products_name(set->products));
    set->products = p;
    set->products_line = lineno;
    return UNPAD_OK;
}

void trace_write_row(FILE *f, const trace_row *r)
{
    fprintf(f, "%s,%s,%d,%d,%d,%s,%d,%d,%d,%ld,%ld,%.0f,%d,%.6g,%.6g,%.3f,%.3f\n", r->hw, r->model,
            r->gpus, r->rank, r->step, op_name((op_id)r->op), r->layer, r->group, r->stream, r->seqs,
            r->tokens, r->sum_len2, r->max_len, r->flops, r->bytes, r->start_us, r->dur_us);
}

int trace_append(trace_set *set, const trace_row *r)
{
    if (set->n == set->cap) {
        size_t cap = set->cap ? set->cap * 2 : 1024;
        trace_row *nr = realloc(set->rows, cap * sizeof *nr);
        if (!nr)
            return UNPAD_ENOMEM;
        set->rows = nr;
        set->cap = cap;
    }
    set->rows[set->n++] = *r;
    return UNPAD_OK;
}

void trace_set_free(trace_set *set)
{
    free(set->rows);
    for (size_t i = 0; i < set->nlens; i++)
        free(set->lens[i].len);
    free(set->lens);
    memset(set, 0, sizeof *set);
}

enum { NCOL = 17 };
static const char *COLS[NCOL] = {"hw", "model", "gpus", "rank", "step", "op", "layer", "group",
                                 "stream", "seqs", "tokens", "sum_len2", "max_len", "flops",
                                 "bytes", "start_us", "dur_us"};

static int field_long(const char *path, int lineno, const char *line, int col, const char *s,
                      long lo, long hi, long *out, unpad_err *err)
{
    long v;
    if (unpad_parse_long(s, &v) || v < lo || v > hi) {
        unpad_fail(err, UNPAD_EINVAL, path, lineno,
                   "bad value '%.64s' in column '%s' (expected an integer in [%ld, %ld])", s, COLS[col],
                   lo, hi);
        unpad_err_show_line(err, lineno, line);
        return UNPAD_EINVAL;
    }
    *out = v;
    return UNPAD_OK;
}

/* Largest accepted value of each number column that is not an integer: far beyond any real
 * step, small enough that sums over any trace stay finite. */
static const double DOUBLE_MAX_OF[NCOL] = {[11] = 1e30, [13] = 1e30, [14] = 1e30, [15] = 1e15,
                                           [16] = 1e15};

static int field_double(const char *path, int lineno, const char *line, int col, const char *s,
                        double *out, unpad_err *err)
{
    double v;
    if (unpad_parse_double(s, &v) || v < 0 || v > DOUBLE_MAX_OF[col]) {
        unpad_fail(err, UNPAD_EINVAL, path, lineno,
                   "bad value '%.64s' in column '%s' (expected a number in [0, %g])", s, COLS[col],
                   DOUBLE_MAX_OF[col]);
        unpad_err_show_line(err, lineno, line);
        return UNPAD_EINVAL;
    }
    *out = v;
    return UNPAD_OK;
}

int trace_parse(const char *path, const char *text, size_t len, trace_set *set, unpad_err *err)
{
    int rc = UNPAD_OK, header = 0, got;
    size_t before = set->n;
    int before_products = set->products, before_line = set->products_line;
    unpad_lines it;
    char line[UNPAD_LINE_MAX + 1];
    unpad_lines_init(&it, path, text, len);
    while ((got = unpad_lines_next(&it, err)) > 0) {
        const int lineno = it.lineno;
        memcpy(line, it.line, it.len + 1);
        if (it.len && !strncmp(line, TRACE_PRODUCTS_TAG, strlen(TRACE_PRODUCTS_TAG))) {
            if ((rc = parse_products(path, lineno, line, set, err)))
                goto fail;
            continue;
        }
        if (!it.len || line[0] == '#')
            continue;
        if (!header) {
            if (strcmp(line, TRACE_HEADER)) {
                rc = unpad_fail(err, UNPAD_EINVAL, path, lineno,
                                "not a trace: expected the header '%s'", TRACE_HEADER);
                unpad_err_show_line(err, lineno, line);
                goto fail;
            }
            header = 1;
            continue;
        }
        char *f[NCOL + 1];
        int nf = 0;
        for (char *p = it.line; nf <= NCOL;) {
            f[nf++] = p;
            char *c = strchr(p, ',');
            if (!c)
                break;
            *c = '\0';
            p = c + 1;
        }
        if (nf != NCOL) {
            rc = unpad_fail(err, UNPAD_EINVAL, path, lineno, "expected %d columns, found %d%s", NCOL,
                            nf > NCOL ? NCOL + 1 : nf, nf > NCOL ? " or more" : "");
            unpad_err_show_line(err, lineno, line);
            goto fail;
        }
        trace_row r;
        memset(&r, 0, sizeof r);
        if (strlen(f[0]) >= sizeof r.hw || strlen(f[1]) >= sizeof r.model || !*f[0] || !*f[1]) {
            rc = unpad_fail(err, UNPAD_EINVAL, path, lineno, "hw and model must be 1..63 characters");
            unpad_err_show_line(err, lineno, line);
            goto fail;
        }
        strcpy(r.hw, f[0]);
        strcpy(r.model, f[1]);
        long v[NCOL];
        /* Integer columns stored in an int never exceed INT_MAX. */
        static const long LO[NCOL] = {0, 0, 1, 0, 0, 0, -1, -1, -1, 0, 0, 0, 0};
        static const long HI[NCOL] = {0, 0, 1 << 20, 1 << 20, INT_MAX, 0, 4096, GROUP_MAX - 1,
                                      GROUP_MAX_STREAMS - 1, 1L << 40, 1L << 50, 0, 1 << 20};
        for (int c = 2; c <= 12; c++) {
            if (c == 5) {
                int op = op_from_name(f[5]);
                if (op < 0) {
                    rc = unpad_fail(err, UNPAD_EINVAL, path, lineno,
                                    "unknown operator '%.64s' in column 'op'", f[5]);
                    unpad_err_show_line(err, lineno, line);
                    goto fail;
                }
                r.op = op;
                continue;
            }
            if (c == 11) {
                if ((rc = field_double(path, lineno, line, c, f[c], &r.sum_len2, err)))
                    goto fail;
                continue;
            }
            if ((rc = field_long(path, lineno, line, c, f[c], LO[c], HI[c], &v[c], err)))
                goto fail;
        }
        r.gpus = (int)v[2];
        r.rank = (int)v[3];
        r.step = (int)v[4];
        r.layer = (int)v[6];
        r.group = (int)v[7];
        r.stream = (int)v[8];
        r.seqs = v[9];
        r.tokens = v[10];
        r.max_len = (int)v[12];
        if (r.rank >= r.gpus) {
            rc = unpad_fail(err, UNPAD_EINVAL, path, lineno, "rank %d is not below gpus %d", r.rank,
                            r.gpus);
            unpad_err_show_line(err, lineno, line);
            goto fail;
        }
        /* a batch's sum of squared lengths lies between tokens^2 / seqs (all equal) and tokens x
         * its longest (written rounded to a whole number) */
        if (r.seqs > 0 && r.tokens > 0 &&
            (r.sum_len2 < (double)r.tokens * r.tokens / r.seqs - 0.5 ||
             r.sum_len2 > (double)r.tokens * r.max_len + 0.5)) {
            rc = unpad_fail(err, UNPAD_EINVAL, path, lineno,
                            "sum_len2 %.0f cannot come from %ld sequences of %ld tokens, the longest %d "
                            "(expected %.0f..%.0f)", r.sum_len2, r.seqs, r.tokens, r.max_len,
                            ceil((double)r.tokens * r.tokens / r.seqs - 0.5), (double)r.tokens * r.max_len);
            unpad_err_show_line(err, lineno, line);
            goto fail;
        }
        if ((rc = field_double(path, lineno, line, 13, f[13], &r.flops, err)) ||
            (rc = field_double(path, lineno, line, 14, f[14], &r.bytes, err)) ||
            (rc = field_double(path, lineno, line, 15, f[15], &r.start_us, err)) ||
            (rc = field_double(path, lineno, line, 16, f[16], &r.dur_us, err)))
            goto fail;
        if (trace_append(set, &r)) {
            rc = unpad_fail(err, UNPAD_ENOMEM, path, 0, "out of memory");
            goto fail;
        }
    }
    if (got < 0) {
        rc = err ? err->code : UNPAD_EINVAL;
        goto fail;
    }
    if (!header) {
        rc = unpad_fail(err, UNPAD_EINVAL, path, 0, "empty file: expected the header '%s'",
                        TRACE_HEADER);
        goto fail;
    }
    return UNPAD_OK;
fail:
    set->n = before; /* nothing half-read is kept */
    set->products = before_products;
    set->products_line = before_line;
    return rc;
}

int trace_read(const char *path, trace_set *set, unpad_err *err)
{
    char *text;
    size_t len;
    int rc = unpad_read_file(path, &text, &len, err);
    if (rc)
        return rc;
    rc = trace_parse(path, text, len, set, err);
    free(text);
    return rc;
}

static int span_cmp(const void *a, const void *b)
{
    const trace_span *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

double trace_span_union(trace_span *s, size_t n)
{
    qsort(s, n, sizeof *s, span_cmp);
    double busy = 0, a = s[0].start, b = s[0].end;
    for (size_t i = 1; i < n; i++) {
        if (s[i].start > b) {
            busy += b - a;
            a = s[i].start;
            b = s[i].end;
        } else if (s[i].end > b) {
            b = s[i].end;
        }
    }
    return busy + (b - a);
}

/* One step's phases: each a run of operators, once or over the layers (up or down). */
static const op_id LAYER_FWD[] = {OP_QKV_FWD, OP_FMHA_FWD, OP_ATTN_OUT_FWD, OP_ATTN_LN_FWD,
                                  OP_FFN1_FWD, OP_FFN2_FWD, OP_FFN_LN_FWD};
static const op_id HEADS[] = {OP_MLM_HEAD_FWD, OP_NSP_HEAD_FWD, OP_LOSS_FWD,
                              OP_LOSS_BWD, OP_NSP_HEAD_BWD, OP_MLM_HEAD_BWD};
static const op_id LAYER_BWD[] = {OP_FFN_LN_BWD, OP_FFN2_BWD, OP_FFN1_BWD, OP_ATTN_LN_BWD,
                                  OP_ATTN_OUT_BWD, OP_FMHA_BWD, OP_QKV_BWD};
static const op_id EXCHANGE[] = {OP_EXCHANGE}, EMBED_FWD[] = {OP_EMBED_FWD},
                   EMBED_BWD[] = {OP_EMBED_BWD}, ALLREDUCE[] = {OP_ALLREDUCE}, LAMB[] = {OP_LAMB};

enum { ONCE, LAYERS_UP, LAYERS_DOWN };
#define PHASE(ops, how, multi) {ops, sizeof ops / sizeof ops[0], how, multi}
static const struct {
    const op_id *ops;
    int n, how;
    int multi_gpu;   /* 1: only with gpus > 1 */
} STEP_ORDER[] = {
    PHASE(EXCHANGE, ONCE, 1),       PHASE(EMBED_FWD, ONCE, 0), PHASE(LAYER_FWD, LAYERS_UP, 0),
    PHASE(HEADS, ONCE, 0),          PHASE(LAYER_BWD, LAYERS_DOWN, 0), PHASE(EMBED_BWD, ONCE, 0),
    PHASE(ALLREDUCE, ONCE, 1),      PHASE(LAMB, ONCE, 0),
};
#undef PHASE
enum { NPHASE = sizeof STEP_ORDER / sizeof STEP_ORDER[0] };

/* Moves to the first repetition of phase it->phase that has rows (skipping empty ones). */
static void phase_enter(trace_step_iter *it)
{
    for (; it->phase < NPHASE; it->phase++) {
        int how = STEP_ORDER[it->phase].how;
        if (STEP_ORDER[it->phase].multi_gpu && it->gpus < 2)
            continue;
        if (how != ONCE && it->layers < 1)
            continue;
        it->layer = how == LAYERS_DOWN ? it->layers - 1 : how == LAYERS_UP ? 0 : -1;
        it->k = 0;
        return;
    }
}

void trace_step_begin(trace_step_iter *it, int layers, int gpus)
{
    *it = (trace_step_iter){.layers = layers, .gpus = gpus};
    phase_enter(it);
}

int trace_step_next(trace_step_iter *it, op_id *op, int *layer)
{
    if (it->phase >= NPHASE)
        return 0;
    int how = STEP_ORDER[it->phase].how;
    *op = STEP_ORDER[it->phase].ops[it->k];
    *layer = it->layer;
    if (++it->k < STEP_ORDER[it->phase].n)
        return 1;
    it->k = 0;
    if (how == LAYERS_UP && ++it->layer < it->layers)
        return 1;
    if (how == LAYERS_DOWN && --it->layer >= 0)
        return 1;
    it->phase++;
    phase_enter(it);
    return 1;
}

double trace_emit_op(FILE *f, trace_row *r, op_id op, int layer, const op_cost *oc, double start_us,
                     double dur_us)
{
    r->op = op;
    r->layer = layer;
    r->seqs = oc->seqs;
    r->tokens = oc->tokens;
    r->sum_len2 = oc->sum_len2;
    r->max_len = oc->max_len;
    r->flops = oc->flops;
    r->bytes = oc->bytes;
    r->start_us = start_us;
    r->dur_us = dur_us;
    trace_write_row(f, r);
    return start_us + dur_us;
}

double trace_emit_predicted(FILE *f, const char *hw, const char *model, int gpus, int rank, int step,
                            int layers, const cost_step *st, double t0)
{
    double t = t0;
    trace_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.hw, sizeof r.hw, "%s", hw);
    snprintf(r.model, sizeof r.model, "%s", model);
    r.gpus = gpus;
    r.rank = rank;
    r.step = step;
    r.group = r.stream = -1;
    trace_step_iter it;
    op_id op;
    int layer;
    trace_step_begin(&it, layers, gpus);
    while (trace_step_next(&it, &op, &layer))
        t = trace_emit_op(f, &r, op, layer, &st->ops[op], t, st->time_us[op]);
    return t;
}
