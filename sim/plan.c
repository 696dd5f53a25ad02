/* plan.c — the plan file (read, check, write) and making a plan from a what-if. */
#include "plan.h"

#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory.h"

/* The file's form: strings where the plan has enums and lists; checked after parsing. */
typedef struct {
    char policy[CFG_STR_LEN], count[CFG_STR_LEN], weights[CFG_STR_LEN];
    int gpus, batch;
    char fmha_groups[CFG_STR_LEN];
    int fmha_granularity, streams, seed;
    double cost_c0, cost_c1, cost_c2;
    char model[CFG_STR_LEN], hw[CFG_STR_LEN], dist[CFG_STR_LEN], calib[CFG_STR_LEN];
    int steps;
    double pred_step_us, pred_samples_per_s, pred_imbalance, pred_imbalance_p99, pred_idle;
    double none_step_us, none_imbalance, pred_attn_us, pred_attn_grouped_us;
} plan_file;

#define PF(k, t, f, lo, hi, req, h) {k, t, offsetof(plan_file, f), lo, hi, req, h}
static const cfg_field plan_schema[] = {
    PF("policy", CFG_STRING, policy, 0, 0, CFG_REQUIRED,
       "balancing policy (`unpad plan --help` lists them)"),
    PF("count", CFG_STRING, count, 0, 0, CFG_REQUIRED, "sequences per GPU: equal or free"),
    PF("weights", CFG_STRING, weights, 0, 0, CFG_OPTIONAL,
       "what is balanced: cost (c0 + c1 len + c2 len^2) or tokens"),
    PF("gpus", CFG_INT, gpus, 1, 1 << 20, CFG_REQUIRED, "data-parallel GPUs"),
    PF("batch", CFG_INT, batch, 1, 1 << 16, CFG_REQUIRED, "sequences per GPU (global batch gpus x batch)"),
    PF("fmha_groups", CFG_STRING, fmha_groups, 0, 0, CFG_OPTIONAL,
       "FMHA group upper lengths, ascending (128,384), auto (plan each step) or none (one launch)"),
    PF("fmha_granularity", CFG_INT, fmha_granularity, 1, 1 << 16, CFG_OPTIONAL,
       "auto grouping: cut only between lengths in different bins this wide"),
    PF("streams", CFG_INT, streams, 1, GROUP_MAX_STREAMS, CFG_OPTIONAL, "CUDA streams for the FMHA groups"),
    PF("seed", CFG_INT, seed, 0, 2147483647, CFG_OPTIONAL, "seed of the Monte Carlo and of the run"),
    PF("cost_c0", CFG_DOUBLE, cost_c0, 0, 1e9, CFG_OPTIONAL, "per-sequence cost: constant, us"),
    PF("cost_c1", CFG_DOUBLE, cost_c1, 0, 1e9, CFG_OPTIONAL, "per-sequence cost: per token, us"),
    PF("cost_c2", CFG_DOUBLE, cost_c2, 0, 1e9, CFG_OPTIONAL, "per-sequence cost: per token squared, us"),
    PF("model", CFG_STRING, model, 0, 0, CFG_OPTIONAL, "model the plan was made for"),
    PF("hw", CFG_STRING, hw, 0, 0, CFG_OPTIONAL, "hardware the plan was made for"),
    PF("dist", CFG_STRING, dist, 0, 0, CFG_OPTIONAL, "length distribution the plan was made for"),
    PF("calib", CFG_STRING, calib, 0, 0, CFG_OPTIONAL,
       "the predictions' coefficients: calibrated, uncalibrated defaults or an estimate"),
    PF("steps", CFG_INT, steps, 0, 1000000000, CFG_OPTIONAL, "Monte Carlo steps behind the predictions"),
    PF("pred_step_us", CFG_DOUBLE, pred_step_us, 0, 1e12, CFG_OPTIONAL, "predicted mean step time, us"),
    PF("pred_samples_per_s", CFG_DOUBLE, pred_samples_per_s, 0, 1e12, CFG_OPTIONAL, "predicted samples/s"),
    PF("pred_imbalance", CFG_DOUBLE, pred_imbalance, 0, 1e6, CFG_OPTIONAL, "predicted mean max/mean GPU time"),
    PF("pred_imbalance_p99", CFG_DOUBLE, pred_imbalance_p99, 0, 1e6, CFG_OPTIONAL, "its 99th percentile"),
    PF("pred_idle", CFG_DOUBLE, pred_idle, 0, 1, CFG_OPTIONAL, "predicted straggler idle fraction"),
    PF("none_step_us", CFG_DOUBLE, none_step_us, 0, 1e12, CFG_OPTIONAL, "step time with policy none, us"),
    PF("none_imbalance", CFG_DOUBLE, none_imbalance, 0, 1e6, CFG_OPTIONAL, "imbalance with policy none"),
    PF("pred_attn_us", CFG_DOUBLE, pred_attn_us, 0, 1e12, CFG_OPTIONAL,
       "slowest GPU's FMHA per step, one launch, us"),
    PF("pred_attn_grouped_us", CFG_DOUBLE, pred_attn_grouped_us, 0, 1e12, CFG_OPTIONAL,
       "the same with the FMHA groups, us"),
};
static const size_t plan_schema_len = sizeof plan_schema / sizeof plan_schema[0];

void plan_default(unpad_plan *p)
{
    memset(p, 0, sizeof *p);
    p->policy = BAL_KK;
    p->count = BAL_EQUAL;
    p->gpus = 1;
    p->batch = 1;
    p->fmha_nb = 0;
    p->fmha_granularity = 1;
    p->streams = 1;
    p->seed = 1;
    strcpy(p->model, "unknown");
    strcpy(p->hw, "unknown");
    strcpy(p->dist, "unknown");
    strcpy(p->calib, "unknown");
}

const seq_cost *plan_seq_cost(const unpad_plan *p)
{
    return p->weights_tokens ? NULL : &p->cost;
}

/* Line number and text of `key = ...` in text (0 when absent), for errors found after parsing. */
static int key_line(const char *name, const char *text, size_t len, const char *key, char *raw,
                    size_t rawn)
{
    unpad_lines it;
    size_t kl = strlen(key);
    unpad_lines_init(&it, name, text, len);
    while (unpad_lines_next(&it, NULL) > 0) {
        const char *t = it.line;
        while (isspace((unsigned char)*t))
            t++;
        if (strncmp(t, key, kl))
            continue;
        t += kl;
        while (isspace((unsigned char)*t))
            t++;
        if (*t == '=') {
            snprintf(raw, rawn, "%s", it.line);
            return it.lineno;
        }
    }
    raw[0] = '\0';
    return 0;
}

static int bad_value(const char *name, const char *text, size_t len, const char *key,
                     unpad_err *err, const char *fmt, const char *val)
{
    char raw[UNPAD_LINE_MAX + 1];
    int line = key_line(name, text, len, key, raw, sizeof raw);
    unpad_fail(err, UNPAD_EINVAL, name, line, fmt, val);
    if (line)
        unpad_err_show_line(err, line, raw);
    return UNPAD_EINVAL;
}

int plan_parse(const char *name, const char *text, size_t len, unpad_plan *p, unpad_err *err)
{
    plan_file f;
    memset(&f, 0, sizeof f);
    strcpy(f.weights, "cost");
    strcpy(f.fmha_groups, "none");
    strcpy(f.model, "unknown");
    strcpy(f.hw, "unknown");
    strcpy(f.dist, "unknown");
    strcpy(f.calib, "unknown");
    f.fmha_granularity = 1;
    f.streams = 1;
    f.seed = 1;
    f.cost_c0 = f.cost_c1 = f.cost_c2 = -1; /* absent */
    int rc = cfg_parse(name, text, len, plan_schema, plan_schema_len, &f, err);
    if (rc)
        return rc;
    unpad_plan q;
    plan_default(&q);
    unpad_err pe = {0};
    if (balance_policy_parse(f.policy, &q.policy, &pe))
        return bad_value(name, text, len, "policy", err, "%s", pe.msg);
    int v;
    if ((v = balance_count_from_name(f.count)) < 0)
        return bad_value(name, text, len, "count", err, "unknown count '%s' (expected equal or free)",
                         f.count);
    q.count = v;
    if (!strcmp(f.weights, "tokens"))
        q.weights_tokens = 1;
    else if (strcmp(f.weights, "cost"))
        return bad_value(name, text, len, "weights", err, "unknown weights '%s' (expected cost or tokens)",
                         f.weights);
    unpad_err ge = {0};
    if (group_bounds_parse(f.fmha_groups, q.fmha_bounds, &q.fmha_nb, &ge))
        return bad_value(name, text, len, "fmha_groups", err, "%s", ge.msg);
    if (!q.weights_tokens && (f.cost_c0 < 0 || f.cost_c1 < 0 || f.cost_c2 < 0)) {
        const char *miss = f.cost_c0 < 0 ? "cost_c0" : f.cost_c1 < 0 ? "cost_c1" : "cost_c2";
        return unpad_fail(err, UNPAD_EINVAL, name, 0,
                          "missing key '%s' (weights = cost needs cost_c0, cost_c1 and cost_c2; "
                          "write them with `unpad plan`, or set weights = tokens)", miss);
    }
    q.gpus = f.gpus;
    q.batch = f.batch;
    q.fmha_granularity = f.fmha_granularity;
    q.streams = f.streams;
    q.seed = f.seed;
    q.cost = (seq_cost){f.cost_c0 < 0 ? 0 : f.cost_c0, f.cost_c1 < 0 ? 0 : f.cost_c1,
                        f.cost_c2 < 0 ? 0 : f.cost_c2};
    memcpy(q.model, f.model, sizeof q.model);
    memcpy(q.hw, f.hw, sizeof q.hw);
    memcpy(q.dist, f.dist, sizeof q.dist);
    memcpy(q.calib, f.calib, sizeof q.calib);
    q.steps = f.steps;
    q.pred_step_us = f.pred_step_us;
    q.pred_samples_per_s = f.pred_samples_per_s;
    q.pred_imbalance = f.pred_imbalance;
    q.pred_imbalance_p99 = f.pred_imbalance_p99;
    q.pred_idle = f.pred_idle;
    q.none_step_us = f.none_step_us;
    q.none_imbalance = f.none_imbalance;
    q.pred_attn_us = f.pred_attn_us;
    q.pred_attn_grouped_us = f.pred_attn_grouped_us;
    *p = q;
    return UNPAD_OK;
}

int plan_load(const char *path, unpad_plan *p, unpad_err *err)
{
    char *text;
    size_t len;
    int rc = unpad_read_file(path, &text, &len, err);
    if (rc)
        return rc;
    rc = plan_parse(path, text, len, p, err);
    free(text);
    return rc;
}

int plan_write(const char *path, const unpad_plan *p, unpad_err *err)
{
    if ((unsigned)p->policy >= BAL_POLICY_COUNT || (unsigned)p->count >= BAL_COUNT_COUNT)
        return unpad_fail(err, UNPAD_EINVAL, path, 0, "plan with a bad policy or count");
    plan_file f;
    memset(&f, 0, sizeof f);
    snprintf(f.policy, sizeof f.policy, "%s", balance_policy_name(p->policy));
    snprintf(f.count, sizeof f.count, "%s", balance_count_name(p->count));
    snprintf(f.weights, sizeof f.weights, "%s", p->weights_tokens ? "tokens" : "cost");
    f.gpus = p->gpus;
    f.batch = p->batch;
    group_bounds_format(p->fmha_bounds, p->fmha_nb, f.fmha_groups, sizeof f.fmha_groups);
    f.fmha_granularity = p->fmha_granularity;
    f.streams = p->streams;
    f.seed = (int)p->seed;
    f.cost_c0 = p->cost.c0;
    f.cost_c1 = p->cost.c1;
    f.cost_c2 = p->cost.c2;
    snprintf(f.model, sizeof f.model, "%s", p->model[0] ? p->model : "unknown");
    snprintf(f.hw, sizeof f.hw, "%s", p->hw[0] ? p->hw : "unknown");
    snprintf(f.dist, sizeof f.dist, "%s", p->dist[0] ? p->dist : "unknown");
    snprintf(f.calib, sizeof f.calib, "%s", p->calib[0] ? p->calib : "unknown");
    f.steps = p->steps;
    f.pred_step_us = p->pred_step_us;
    f.pred_samples_per_s = p->pred_samples_per_s;
    f.pred_imbalance = p->pred_imbalance;
    f.pred_imbalance_p99 = p->pred_imbalance_p99;
    f.pred_idle = p->pred_idle;
    f.none_step_us = p->none_step_us;
    f.none_imbalance = p->none_imbalance;
    f.pred_attn_us = p->pred_attn_us;
    f.pred_attn_grouped_us = p->pred_attn_grouped_us;
    char head[sizeof p->provenance + 256];
    int len = snprintf(head, sizeof head,
                       "unpad plan: balancing and FMHA grouping for unpad-train --plan (written by "
                       "`unpad plan`; the pred_* lines are the simulator's predictions)\n%s",
                       p->provenance);
    while (len > 0 && len < (int)sizeof head && head[len - 1] == '\n')
        head[--len] = '\0'; /* cfg_write ends the comment */
    return cfg_write(path, head, plan_schema, plan_schema_len, &f, err);
}

/* The trainer's memory per GPU for micro-batches of b sequences (free counts: up to 4 b a rank). */
static int batch_fits(const whatif_setup *s, int gpus, int accum, balance_count count, int b, long *tokens, char *why,
                      size_t n)
{
    long ranks = (long)gpus * accum;
    int seq_cap = count == BAL_FREE ? (4 < ranks ? 4 * b : (int)ranks * b) : b;
    memory_setup ms;
    memory_use mu;
    int cap = s->max_len > 0 && s->max_len < s->model->max_len ? s->max_len : s->model->max_len;
    memory_trainer_setup(s->model, b, memory_dist_tokens(b, 1, cap, s->dist), seq_cap, gpus > 1, &ms);
    ms.fp8 = s->fp8;
    ms.last_heads = s->last_heads;
    memory_predict(s->model, s->hw, &ms, &mu);
    if (tokens)
        *tokens = ms.tokens;
    return memory_fits(&mu, s->hw, why, n);
}

int plan_batch_fits(const whatif_setup *s, int gpus, int accum, balance_count count, int batch, long *tokens,
                    char *why, size_t n)
{
    if (why && n)
        why[0] = '\0';
    if (batch_fits(s, gpus, accum, count, batch, tokens, why, n))
        return batch;
    int lo = 0, hi = batch; /* the largest that fits: memory grows with the batch */
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        *(batch_fits(s, gpus, accum, count, mid, NULL, NULL, 0) ? &lo : &hi) = mid;
    }
    return lo;
}

int plan_split(const whatif_setup *s, int gpus, int per_gpu, int policy, balance_count count, whatif_row *rows,
               int max, int *n, unpad_err *err)
{
    *n = 0;
    if (gpus < 1 || per_gpu < 1 || max < 1)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "plan: %d GPUs x %d sequences", gpus, per_gpu);
    int fit = plan_batch_fits(s, gpus, 1, count, per_gpu, NULL, NULL, 0);
    if (fit < 1)
        return unpad_fail(err, UNPAD_ERANGE, NULL, 0,
                          "not even one sequence per GPU fits %s's memory with %s", s->hw->name, s->model->name);
    /* the fewest micro-batches first: every way of cutting per_gpu into equal micro-batches that fit */
    for (int k = (per_gpu + fit - 1) / fit; k <= per_gpu && k <= WHATIF_ACCUM_MAX && *n < max; k++)
        if (per_gpu % k == 0 && plan_batch_fits(s, gpus, k, count, per_gpu / k, NULL, NULL, 0) == per_gpu / k)
            rows[(*n)++] = (whatif_row){.gpus = gpus, .batch = per_gpu / k, .accum = k,
                                        .policy = policy < 0 ? BAL_KK : policy, .count = count};
    if (*n == 0)
        return unpad_fail(err, UNPAD_ERANGE, NULL, 0,
                          "%d sequences per GPU cannot be cut into at most %d equal micro-batches of at most %d",
                          per_gpu, WHATIF_ACCUM_MAX, fit);
    whatif_setup ws = *s;
    ws.layouts = NULL;
    ws.nlayouts = 0;
    ws.attn_steps = 0;
    int rc = whatif_run(&ws, rows, *n, err);
    if (rc)
        return rc;
    int best = 0;
    for (int i = 1; i < *n; i++)
        if (rows[i].samples_per_s > rows[best].samples_per_s)
            best = i;
    if (best) { /* the fastest first */
        whatif_row t = rows[0];
        rows[0] = rows[best];
        rows[best] = t;
    }
    return UNPAD_OK;
}

int plan_check_fit(const whatif_setup *s, int gpus, int batch, int accum, balance_count count, unpad_err *err)
{
    accum = accum < 1 ? 1 : accum;
    char why[256];
    long tokens;
    int lo = plan_batch_fits(s, gpus, accum, count, batch, &tokens, why, sizeof why);
    if (lo < batch) {
        char hint[160] = "";
        if (lo >= 1) { /* as many sequences a step in micro-batches that fit */
            long total = (long)batch * accum;
            int k = (int)((total + lo - 1) / lo);
            if (k <= WHATIF_ACCUM_MAX && total % k == 0)
                snprintf(hint, sizeof hint, "; --batch %ld --accum %d trains %ld a GPU per step in micro-batches "
                         "that fit", total / k, k, total);
            else if (k <= WHATIF_ACCUM_MAX)
                snprintf(hint, sizeof hint, "; --batch %ld --accum %d trains about as many (%ld) in micro-batches "
                         "that fit", (total + k - 1) / k, k, (total + k - 1) / k * k);
        }
        return unpad_fail(err, UNPAD_ERANGE, NULL, 0,
                          "%d sequences per GPU%s do not fit: the trainer (%s, an arena for %ld tokens) "
                          "%s; at most %d sequences per GPU fit%s", batch, accum > 1 ? " and micro-batch" : "",
                          s->model->name, tokens, why, lo, hint);
    }
    return UNPAD_OK;
}

int plan_make(const whatif_setup *s, int gpus, int batch, int accum, int policy, balance_count count,
              unpad_plan *out, whatif_row *rows, int *nrows, unpad_err *err)
{
    if (policy >= BAL_POLICY_COUNT || (unsigned)count >= BAL_COUNT_COUNT)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "plan: bad policy %d or count %d", policy,
                          (int)count);
    /* The trainer runs unpadded: the plan is for that layout (with the cap, if any). */
    whatif_setup ws = *s;
    ws.layouts = NULL;
    ws.nlayouts = 0;
    if (ws.attn_steps < 1)
        ws.attn_steps = 32;
    accum = accum < 1 ? 1 : accum;
    int rc = plan_check_fit(s, gpus, batch, accum, count, err);
    if (rc)
        return rc;
    int n = 0;
    rows[n++] = (whatif_row){.gpus = gpus, .batch = batch, .accum = accum, .policy = BAL_NONE, .count = count};
    for (int p = BAL_SORT_DEAL; p < BAL_POLICY_COUNT; p++)
        if (policy < 0 || policy == p)
            rows[n++] = (whatif_row){.gpus = gpus, .batch = batch, .accum = accum, .policy = p, .count = count};
    rc = whatif_run(&ws, rows, n, err);
    if (rc)
        return rc;
    int best = 0;
    if (policy >= 0)
        best = policy == BAL_NONE ? 0 : 1;
    else
        for (int i = 1; i < n; i++)
            if (rows[i].step_us < rows[best].step_us)
                best = i;
    const whatif_row *r = &rows[best];
    unpad_plan p;
    plan_default(&p);
    p.policy = r->policy;
    p.count = count;
    p.weights_tokens = s->weights_tokens;
    p.gpus = gpus;
    p.batch = batch;
    if ((rc = group_bounds_parse(r->bounds, p.fmha_bounds, &p.fmha_nb, err)))
        return rc;
    p.fmha_granularity = s->granularity > 0 ? s->granularity : 1;
    p.streams = r->streams > 0 ? r->streams : 1;
    p.seed = (long)(s->seed & 0x7fffffff);
    if ((rc = cost_seq_model(s->model, s->hw, s->calib, &p.cost, err)))
        return rc;
    snprintf(p.model, sizeof p.model, "%s", s->model->name);
    snprintf(p.hw, sizeof p.hw, "%s", s->hw->name);
    snprintf(p.dist, sizeof p.dist, "%s", s->dist->source);
    p.steps = r->steps;
    p.pred_step_us = r->step_us;
    p.pred_samples_per_s = r->samples_per_s;
    p.pred_imbalance = r->imbalance_mean;
    p.pred_imbalance_p99 = r->imbalance_p99;
    p.pred_idle = r->idle_mean;
    p.none_step_us = rows[0].step_us;
    p.none_imbalance = rows[0].imbalance_mean;
    p.pred_attn_us = r->attn_us;
    p.pred_attn_grouped_us = r->attn_grouped_us;
    *out = p;
    *nrows = n;
    return UNPAD_OK;
}
