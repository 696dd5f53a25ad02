/* calib.c — cost-model coefficients: defaults, and the models/calib/<hw>.cfg files. */
#include "calib.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define CF(k, t, f, lo, hi, req, h) {k, t, offsetof(calib_coef, f), lo, hi, req, h}
const cfg_field calib_schema[] = {
    CF("hw", CFG_NAME, hw, 0, 0, CFG_REQUIRED, "hardware the coefficients were fitted on"),
    CF("transferred", CFG_BOOL, transferred, 0, 1, CFG_OPTIONAL,
       "true: carried from other hardware by `unpad calibrate --transfer`, not measured"),
    CF("fp8", CFG_BOOL, fp8, 0, 1, CFG_OPTIONAL,
       "true: fitted on traces of unpad-train --fp8 on (the encoder's Linear forwards and data gradients at FP8 peak)"),
    CF("gemm_eff", CFG_DOUBLE, gemm_eff, 0.01, 1, CFG_OPTIONAL, "large-GEMM fraction of bf16 peak"),
    CF("gemm_m_half", CFG_DOUBLE, gemm_m_half, 0, 1e6, CFG_OPTIONAL, "GEMM rows at half efficiency"),
    CF("attn_eff", CFG_DOUBLE, attn_eff, 0.01, 1, CFG_OPTIONAL, "FMHA forward tile fraction of bf16 peak"),
    CF("attn_cta_us", CFG_DOUBLE, attn_cta_us, 0, 1000, CFG_OPTIONAL, "FMHA forward fixed cost per tile, us"),
    CF("attn_ctas_per_sm", CFG_DOUBLE, attn_ctas_per_sm, 1, 64, CFG_OPTIONAL, "FMHA forward tiles resident per SM"),
    CF("attn_bwd_eff", CFG_DOUBLE, attn_bwd_eff, 0, 1, CFG_OPTIONAL, "FMHA backward tile fraction of bf16 peak"),
    CF("attn_bwd_cta_us", CFG_DOUBLE, attn_bwd_cta_us, 0, 1000, CFG_OPTIONAL, "FMHA backward fixed cost per tile, us"),
    CF("attn_bwd_ctas_per_sm", CFG_DOUBLE, attn_bwd_ctas_per_sm, 0, 64, CFG_OPTIONAL,
       "FMHA backward tiles resident per SM (0: the backward uses the forward's three)"),
    CF("bw_eff", CFG_DOUBLE, bw_eff, 0.01, 1, CFG_OPTIONAL, "memory-bound fraction of bandwidth"),
    CF("launch_us", CFG_DOUBLE, launch_us, 0, 1000, CFG_OPTIONAL, "per kernel launch, us"),
    CF("optim_bw_eff", CFG_DOUBLE, optim_bw_eff, 0.01, 1, CFG_OPTIONAL, "optimizer fraction of bandwidth"),
    CF("comm_eff", CFG_DOUBLE, comm_eff, 0.01, 1, CFG_OPTIONAL, "collectives fraction of link bandwidth"),
    CF("step_overhead_us", CFG_DOUBLE, step_overhead_us, 0, 1e6, CFG_OPTIONAL, "per-step overhead, us"),
    CF("host_launch_us", CFG_DOUBLE, host_launch_us, 0, 1000, CFG_OPTIONAL,
       "host time to enqueue one forward kernel, us (the GPU waits where its kernels are shorter; 0: none)"),
    CF("graph_launch_us", CFG_DOUBLE, graph_launch_us, 0, 1000, CFG_OPTIONAL,
       "with --graphs on: the GPU's gap per kernel inside a CUDA graph, us (0: not fitted)"),
    CF("graph_step_overhead_us", CFG_DOUBLE, graph_step_overhead_us, 0, 1e6, CFG_OPTIONAL,
       "with --graphs on: per-step overhead, us (with graph_launch_us)"),
    CF("gemm_narrow", CFG_DOUBLE, gemm_narrow, -1, 10, CFG_OPTIONAL,
       "GEMM inverse efficiency added per unit of (1024 / hidden - 1)"),
    CF("bw_narrow", CFG_DOUBLE, bw_narrow, -1, 10, CFG_OPTIONAL,
       "memory-bound inverse efficiency added per unit of (1024 / hidden - 1)"),
    CF("attn_narrow", CFG_DOUBLE, attn_narrow, -10, 10, CFG_OPTIONAL,
       "FMHA forward tile inverse efficiency added per unit of (1024 / (64 heads) - 1)"),
    CF("attn_bwd_narrow", CFG_DOUBLE, attn_bwd_narrow, -10, 10, CFG_OPTIONAL,
       "FMHA backward tile inverse efficiency added per unit of (1024 / (64 heads) - 1)"),
    CF("attn_load", CFG_DOUBLE, attn_load, -10, 10, CFG_OPTIONAL,
       "FMHA forward tile inverse efficiency added per unit of ln(waves / 10)"),
    CF("attn_bwd_load", CFG_DOUBLE, attn_bwd_load, -10, 10, CFG_OPTIONAL,
       "FMHA backward tile inverse efficiency added per unit of ln(waves / 10)"),
    CF("attn_load_tiles_max", CFG_DOUBLE, attn_load_tiles_max, 0, 1e12, CFG_OPTIONAL,
       "the largest FMHA launch (tiles) the load terms were fitted on; larger ones are held there"),
#define OPE(name, id) CF("eff_" name, CFG_DOUBLE, op_eff[id], 0, 1, CFG_OPTIONAL, \
                         "per-operator efficiency (GEMM: of its products' peak; else: of bandwidth), 0: class value")
    OPE("embed_fwd", OP_EMBED_FWD), OPE("qkv_fwd", OP_QKV_FWD), OPE("attn_out_fwd", OP_ATTN_OUT_FWD),
    OPE("attn_ln_fwd", OP_ATTN_LN_FWD), OPE("ffn1_fwd", OP_FFN1_FWD), OPE("ffn2_fwd", OP_FFN2_FWD),
    OPE("ffn_ln_fwd", OP_FFN_LN_FWD), OPE("mlm_head_fwd", OP_MLM_HEAD_FWD),
    OPE("nsp_head_fwd", OP_NSP_HEAD_FWD), OPE("loss_fwd", OP_LOSS_FWD), OPE("loss_bwd", OP_LOSS_BWD),
    OPE("nsp_head_bwd", OP_NSP_HEAD_BWD), OPE("mlm_head_bwd", OP_MLM_HEAD_BWD),
    OPE("ffn_ln_bwd", OP_FFN_LN_BWD), OPE("ffn2_bwd", OP_FFN2_BWD), OPE("ffn1_bwd", OP_FFN1_BWD),
    OPE("attn_ln_bwd", OP_ATTN_LN_BWD), OPE("attn_out_bwd", OP_ATTN_OUT_BWD),
    OPE("qkv_bwd", OP_QKV_BWD), OPE("embed_bwd", OP_EMBED_BWD),
#undef OPE
};
const size_t calib_schema_len = sizeof calib_schema / sizeof calib_schema[0];

/* The backward FMHA on its own coefficients (a copy of the forward's where it had none), so that
 * one direction can change without the other. */
static void fmha_split(calib_coef *c)
{
    if (c->attn_bwd_ctas_per_sm > 0)
        return;
    c->attn_bwd_eff = c->attn_eff;
    c->attn_bwd_cta_us = c->attn_cta_us;
    c->attn_bwd_ctas_per_sm = c->attn_ctas_per_sm;
    c->attn_bwd_narrow = c->attn_narrow;
    c->attn_bwd_load = c->attn_load;
}

/* The efficiency that --faster scales for operator i as it stands: the FMHA's tile efficiency,
 * LAMB's streaming efficiency, else the operator's own or its class's; 0 for a collective. */
static double faster_base(const calib_coef *c, int i)
{
    op_class k = op_class_of((op_id)i);
    if (i == OP_FMHA_FWD)
        return c->attn_eff;
    if (i == OP_FMHA_BWD)
        return c->attn_bwd_ctas_per_sm > 0 ? c->attn_bwd_eff : c->attn_eff;
    if (k == OPC_OPTIM)
        return c->optim_bw_eff;
    if (k == OPC_COMM)
        return 0;
    return c->op_eff[i] > 0 ? c->op_eff[i] : k == OPC_GEMM ? c->gemm_eff : c->bw_eff;
}

/* The largest factor an item takes before an efficiency it scales passes 1, and what sets it. */
typedef struct {
    double max, eff;
    const char *by;
} faster_limit;

static void limit_by(faster_limit *l, double eff, const char *by)
{
    if (eff > 0 && 1 / eff < l->max) {
        l->max = 1 / eff;
        l->eff = eff;
        l->by = by;
    }
}

/* Operator i F times as fast (F within its limit). */
static void faster_op(calib_coef *c, int i, double f)
{
    op_class k = op_class_of((op_id)i);
    if (i == OP_FMHA_FWD || i == OP_FMHA_BWD) {
        fmha_split(c);
        int b = i == OP_FMHA_BWD;
        *(b ? &c->attn_bwd_eff : &c->attn_eff) *= f;
        *(b ? &c->attn_bwd_cta_us : &c->attn_cta_us) /= f;
        *(b ? &c->attn_bwd_narrow : &c->attn_narrow) /= f;
        *(b ? &c->attn_bwd_load : &c->attn_load) /= f;
        if (b) /* the backward's passes with its tiles */
            c->attn_bwd_pass_x = (c->attn_bwd_pass_x > 0 ? c->attn_bwd_pass_x : 1) * f;
        return;
    }
    if (k == OPC_OPTIM) { /* LAMB's streaming efficiency also times the FMHA backward's passes: they stay */
        c->optim_bw_eff *= f;
        c->attn_bwd_pass_x = (c->attn_bwd_pass_x > 0 ? c->attn_bwd_pass_x : 1) / f;
        return;
    }
    if (c->op_eff[i] <= 0)
        c->op_eff[i] = k == OPC_GEMM ? c->gemm_eff : c->bw_eff;
    c->op_eff[i] *= f;
}

#define FASTER_ITEMS 64

int calib_faster(calib_coef *c, const char *list, unpad_err *err)
{
    char buf[256];
    if (!list || !*list)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "--faster: empty list (NAME=F,...)");
    if (strlen(list) >= sizeof buf || strlen(list) >= sizeof c->faster)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "--faster: list too long");
    if (unpad_list_has_empty(list))
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "--faster: an empty item in '%s'", list);
    snprintf(buf, sizeof buf, "%s", list);
    const char *seen[FASTER_ITEMS];
    double seen_f[FASTER_ITEMS];
    int nseen = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        double f;
        if (!eq || eq == t || unpad_parse_double(eq + 1, &f) || !(f >= 0.01 && f <= 100))
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                              "--faster: '%s' is not NAME=F with F in [0.01, 100] (e.g. fmha_bwd=1.3, gemm=1.05, "
                              "overhead=2)", t);
        *eq = '\0'; /* t: the name alone */
        for (int j = 0; j < nseen; j++)
            if (!strcmp(seen[j], t))
                return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                                  "--faster: '%s' is given twice (%s=%g and %s=%g); give it once, with the product "
                                  "of the factors (%s=%.4g)", t, t, seen_f[j], t, f, t, seen_f[j] * f);
        if (nseen == FASTER_ITEMS)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "--faster: more than %d items", FASTER_ITEMS);
        seen[nseen] = t;
        seen_f[nseen++] = f;
        int op = op_from_name(t), cls = -1;
        for (int k = 0; k < OPC_COUNT && op < 0; k++)
            if (!strcmp(t, op_class_name((op_class)k)))
                cls = k;
        if (op >= 0 && op_class_of((op_id)op) == OPC_COMM)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                              "--faster %s: the collectives go by class (communication=F: the network's bandwidth "
                              "x F)", t);
        if (op < 0 && cls < 0 && strcmp(t, "overhead"))
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                              "--faster: unknown '%s' (an operator such as fmha_bwd, a class: gemm, attention, "
                              "normalization, elementwise, optimizer, communication; or overhead)", t);
        /* the efficiencies the item scales: each at most 1 after it */
        faster_limit lim = {HUGE_VAL, 0, NULL};
        if (op >= 0)
            limit_by(&lim, faster_base(c, op), op_name((op_id)op));
        else if (cls >= 0 && cls != OPC_COMM)
            for (int i = 0; i < OP_COUNT; i++)
                if (op_class_of((op_id)i) == (op_class)cls)
                    limit_by(&lim, faster_base(c, i), op_name((op_id)i));
        if (cls == OPC_GEMM)
            limit_by(&lim, c->gemm_eff, "gemm_eff (the small-M term's)");
        if (f > lim.max * (1 + 1e-9)) {
            double most = floor(lim.max * 100) / 100; /* as printed, still within */
            if (op >= 0)
                return unpad_fail(err, UNPAD_ERANGE, NULL, 0,
                                  "--faster %s=%g: its efficiency %.3f would become %.3f, past the hardware's peak "
                                  "(at most x%.2f)", t, f, lim.eff, lim.eff * f, most);
            return unpad_fail(err, UNPAD_ERANGE, NULL, 0,
                              "--faster %s=%g: %s's efficiency %.3f would become %.3f, past the hardware's peak; "
                              "%s is at most x%.2f (limited by %s)", t, f, lim.by, lim.eff, lim.eff * f, t, most,
                              lim.by);
        }
        if (op >= 0) {
            faster_op(c, op, f);
        } else if (cls == OPC_COMM) { /* a faster network: link_bw_gbs is a measured bus bandwidth, not a peak */
            c->comm_eff *= f;
        } else if (cls >= 0) {
            for (int i = 0; i < OP_COUNT; i++)
                if (op_class_of((op_id)i) == (op_class)cls)
                    faster_op(c, i, f);
            if (cls == OPC_GEMM) { /* the shared terms: the whole inverse efficiency / F */
                c->gemm_eff *= f;
                c->gemm_narrow /= f;
            }
        } else { /* overhead: the host's work, the step's and its enqueueing */
            c->step_overhead_us /= f;
            c->host_launch_us /= f;
            c->graph_step_overhead_us /= f;
        }
    }
    snprintf(c->faster, sizeof c->faster, "%s", list);
    return UNPAD_OK;
}

void calib_graphs(calib_coef *c)
{
    if (c->graphs)
        return;
    c->graphs = c->graph_launch_us > 0 ? CALIB_GRAPHS_FITTED : CALIB_GRAPHS_ESTIMATED;
    if (c->graphs == CALIB_GRAPHS_FITTED) {
        c->launch_us = c->graph_launch_us;
        c->step_overhead_us = c->graph_step_overhead_us;
    }
    c->host_launch_us = 0;
}

const char *calib_graphs_label(const calib_coef *c)
{
    switch (c->graphs) {
    case CALIB_GRAPHS_FITTED: return "on";
    case CALIB_GRAPHS_ESTIMATED:
        return "on (an estimate: the calibration has no graph_launch_us, so the launches and the step overhead "
               "are as measured without graphs; the host's wait is left out)";
    }
    return "";
}

void calib_default(const hw_spec *hw, calib_coef *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->hw, sizeof c->hw, "%s", hw ? hw->name : "unknown");
    c->gemm_eff = 0.80;       /* 8192^3 bf16 GEMM on the H200: 788 of 989.5 TFLOP/s */
    c->gemm_m_half = 256;     /* small GEMMs fill few tiles of 128 rows */
    c->attn_eff = 0.50;       /* flash attention forward+backward reaches ~40-60% of peak */
    c->attn_cta_us = 1.0;     /* prologue/epilogue of one tile */
    /* this project's kernels (kernels/fmha.cu) on sm90's 228 KB of shared memory: the forward's
     * 75 KB a CTA let 3 reside, the backward's 95 KB 2 */
    c->attn_ctas_per_sm = 3;
    c->attn_bwd_eff = c->attn_eff;
    c->attn_bwd_cta_us = c->attn_cta_us;
    c->attn_bwd_ctas_per_sm = 2;
    c->bw_eff = 0.80;         /* copy reaches ~0.9 of datasheet; real kernels somewhat less */
    c->launch_us = hw ? hw->launch_us : 2.5;
    c->optim_bw_eff = 0.80;
    c->comm_eff = 1.0;        /* link_bw_gbs is already a measured bus bandwidth */
    c->step_overhead_us = 100;
    c->fitted = 0;
}

int calib_load(const char *path, const hw_spec *hw, calib_coef *c, unpad_err *err)
{
    calib_default(hw, c);
    /* the backward's three only from the file (a file without them: the forward's apply) */
    c->attn_bwd_eff = c->attn_bwd_cta_us = c->attn_bwd_ctas_per_sm = 0;
    int rc = cfg_load(path, calib_schema, calib_schema_len, c, err);
    if (rc)
        return rc;
    if (c->attn_bwd_ctas_per_sm > 0 && c->attn_bwd_eff < 0.01)
        return unpad_fail(err, UNPAD_EINVAL, path, 0,
                          "attn_bwd_ctas_per_sm is set but attn_bwd_eff is %g (expected 0.01..1)",
                          c->attn_bwd_eff);
    if (c->attn_bwd_ctas_per_sm == 0 && (c->attn_bwd_eff > 0 || c->attn_bwd_cta_us > 0))
        return unpad_fail(err, UNPAD_EINVAL, path, 0,
                          "attn_bwd_eff or attn_bwd_cta_us given without attn_bwd_ctas_per_sm (the "
                          "backward's coefficients go together)");
    if (hw && strcmp(c->hw, hw->name))
        return unpad_fail(err, UNPAD_EINVAL, path, 0,
                          "fitted on '%s' but the hardware spec is '%s' (use the calibration of "
                          "the same GPU, or none)", c->hw, hw->name);
    if (hw && c->fp8 && !(hw->peak_fp8_tflops > 0))
        return unpad_fail(err, UNPAD_EINVAL, path, 0,
                          "fp8 = true (fitted on --fp8 on traces) but the hardware spec '%s' gives no "
                          "peak_fp8_tflops", hw->name);
    c->fitted = 1;
    return UNPAD_OK;
}

calib_fmha_coef calib_fmha(const calib_coef *c, int dir)
{
    if (dir && c->attn_bwd_ctas_per_sm > 0)
        return (calib_fmha_coef){c->attn_bwd_eff, c->attn_bwd_cta_us, c->attn_bwd_ctas_per_sm};
    return (calib_fmha_coef){c->attn_eff, c->attn_cta_us, c->attn_ctas_per_sm};
}

const calib_coef *calib_fmha_heads(const calib_coef *c, int heads, calib_coef *tmp)
{
    if (c->attn_narrow == 0 && c->attn_bwd_narrow == 0)
        return c;
    double w = calib_narrow(64.0 * heads);
    *tmp = *c;
    tmp->attn_eff = 1 / (1 / c->attn_eff + c->attn_narrow * w);
    if (c->attn_bwd_ctas_per_sm > 0)
        tmp->attn_bwd_eff = 1 / (1 / c->attn_bwd_eff + c->attn_bwd_narrow * w);
    tmp->attn_narrow = tmp->attn_bwd_narrow = 0;
    return tmp;
}

double calib_fmha_load_x(double tiles, double slots)
{
    double w = slots > 0 ? tiles / slots : 1;
    return log((w > 1 ? w : 1) / CALIB_FMHA_WAVES_REF);
}

const calib_coef *calib_fmha_tiles(const calib_coef *c, int sms, double tiles, calib_coef *tmp)
{
    if (c->attn_load == 0 && c->attn_bwd_load == 0)
        return c;
    if (c->attn_load_tiles_max > 0 && tiles > c->attn_load_tiles_max)
        tiles = c->attn_load_tiles_max;
    if (tmp != c)
        *tmp = *c;
    tmp->attn_eff = 1 / (1 / c->attn_eff + c->attn_load * calib_fmha_load_x(tiles, sms * c->attn_ctas_per_sm));
    if (c->attn_bwd_ctas_per_sm > 0)
        tmp->attn_bwd_eff = 1 / (1 / c->attn_bwd_eff +
                                 c->attn_bwd_load * calib_fmha_load_x(tiles, sms * c->attn_bwd_ctas_per_sm));
    tmp->attn_load = tmp->attn_bwd_load = 0;
    return tmp;
}

calib_source calib_source_of(const calib_coef *c)
{
    return !c->fitted ? CALIB_DEFAULT : c->transferred ? CALIB_TRANSFERRED : CALIB_FITTED;
}

const char *calib_source_name(calib_source s)
{
    switch (s) {
    case CALIB_DEFAULT: return "default";
    case CALIB_FITTED: return "fitted";
    case CALIB_TRANSFERRED: return "transferred";
    }
    return "unknown";
}

int calib_write(const char *path, const calib_coef *c, const char *comment, unpad_err *err)
{
    return cfg_write(path, comment, calib_schema, calib_schema_len, c, err);
}
