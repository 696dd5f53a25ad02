/* check_cost.c — per-operator efficiencies of the cost model: the class formula when none is set,
 * the operator's own value when set, and calibration files with and without them. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "cost.h"
#include "testutil.h"

static hw_spec h200;

static void setup(void)
{
    char p[512];
    ck_assert_int_eq(hw_load(tu_path(p, sizeof p, "models/hw/h200-sxm.cfg"), &h200, NULL), UNPAD_OK);
}

START_TEST(test_gemm_eff_class_and_operator)
{
    calib_coef c;
    calib_default(&h200, &c);
    c.gemm_eff = 0.7;
    c.gemm_m_half = 500;
    /* no per-operator value: gemm_eff M / (M + m_half), as before */
    ck_assert_double_eq_tol(cost_gemm_eff(&c, OP_FFN1_FWD, 2000, 1024), 0.7 * 2000 / 2500.0, 1e-12);
    /* with one: 1/eff = 1/eff_op + m_half / (gemm_eff M) */
    c.op_eff[OP_FFN1_FWD] = 0.55;
    ck_assert_double_eq_tol(cost_gemm_eff(&c, OP_FFN1_FWD, 2000, 1024), 1 / (1 / 0.55 + 500 / (0.7 * 2000)), 1e-12);
    ck_assert_double_eq_tol(cost_gemm_eff(&c, OP_FFN2_FWD, 2000, 1024), 0.7 * 2000 / 2500.0, 1e-12);
    /* the operator's time follows: FLOPs at that efficiency plus its launch */
    op_cost oc = {.op = OP_FFN1_FWD, .launches = 1, .flops = 1e11, .tensor_flops = 1e11, .bytes = 1e6, .rows = 2000,
                  .width = 1024};
    double t = cost_op_us(&h200, &c, &oc);
    double want = 1e11 / (h200.peak_bf16_tflops * 1e6 * cost_gemm_eff(&c, OP_FFN1_FWD, 2000, 1024)) + c.launch_us;
    ck_assert_double_eq_tol(t, want, 1e-9 * want);
    /* a narrower model (hidden 768): 1/eff gains gemm_narrow x (1024/768 - 1), and the small-M
     * term scales by 1024/768 (fewer output tiles per row); at the reference width nothing changes */
    c.gemm_narrow = 0.2;
    double wr = 1024.0 / 768;
    ck_assert_double_eq_tol(cost_gemm_eff(&c, OP_FFN1_FWD, 2000, 768),
                            1 / (1 / 0.55 + 0.2 * (wr - 1) + wr * 500 / (0.7 * 2000)), 1e-12);
    ck_assert_double_eq_tol(cost_gemm_eff(&c, OP_FFN1_FWD, 2000, 1024), 1 / (1 / 0.55 + 500 / (0.7 * 2000)),
                            1e-12);
    /* width 0 (an op_cost made by hand): the reference */
    ck_assert_double_eq_tol(cost_gemm_eff(&c, OP_FFN1_FWD, 2000, 0), cost_gemm_eff(&c, OP_FFN1_FWD, 2000, 1024),
                            1e-15);
}
END_TEST

/* An FP8 calibration (c.fp8): the encoder's Linear forwards at the FP8 peak, their backwards half
 * (the data gradient), every other operator's products at bf16's; those Linear products are timed
 * by their FLOPs alone (ops.h counts bf16 bytes). */
START_TEST(test_fp8_products)
{
    calib_coef c;
    calib_default(&h200, &c);
    double p16 = 1 / (h200.peak_bf16_tflops * 1e6), p8 = 1 / (h200.peak_fp8_tflops * 1e6);
    ck_assert_double_eq_tol(cost_tensor_us(&h200, 0, OP_FFN1_FWD), p16, 1e-18);
    ck_assert_double_eq_tol(cost_tensor_us(&h200, 1, OP_FFN1_FWD), p8, 1e-18);
    ck_assert_double_eq_tol(cost_tensor_us(&h200, 1, OP_QKV_BWD), 0.5 * p16 + 0.5 * p8, 1e-18);
    /* FFN2's weight gradient traced under ffn1_bwd: ffn2_bwd half its counted FLOPs, all FP8;
     * ffn1_bwd 1.5 x its own, a third FP8 */
    ck_assert_double_eq_tol(cost_tensor_us(&h200, 1, OP_FFN2_BWD), 0.5 * p8, 1e-18);
    ck_assert_double_eq_tol(cost_tensor_us(&h200, 1, OP_FFN1_BWD), 1.5 * (p16 * 2 / 3 + p8 / 3), 1e-18);
    ck_assert_double_eq_tol(cost_tensor_us(&h200, 0, OP_FFN2_BWD), p16, 1e-18);
    ck_assert_double_eq_tol(cost_tensor_us(&h200, 1, OP_MLM_HEAD_FWD), p16, 1e-18);
    ck_assert_double_eq_tol(cost_tensor_us(&h200, 1, OP_FMHA_FWD), p16, 1e-18);
    /* a row with a large byte count: memory-bound as bf16, compute-bound as FP8 */
    op_cost oc = {.op = OP_QKV_BWD, .launches = 2, .flops = 1e11, .tensor_flops = 1e11, .bytes = 2e9,
                  .rows = 8000, .width = 1024};
    double e = cost_gemm_eff(&c, OP_QKV_BWD, 8000, 1024);
    double mem = 2e9 / (h200.mem_bw_gbs * 1e3 * c.bw_eff) + 2 * c.launch_us;
    ck_assert_double_eq_tol(cost_op_us(&h200, &c, &oc), mem, 1e-9 * mem);
    c.fp8 = 1;
    double f8 = 1e11 * (0.5 * p16 + 0.5 * p8) / e + 2 * c.launch_us;
    ck_assert_double_eq_tol(cost_op_us(&h200, &c, &oc), f8, 1e-9 * f8);
    ck_assert(cost_flops_only(&c, OP_QKV_BWD) && !cost_flops_only(&c, OP_FFN_LN_BWD));
    /* a spec without FP8 tensor cores refuses an FP8 calibration */
    char p[512], cal[600];
    hw_spec a100;
    ck_assert_int_eq(hw_load(tu_path(p, sizeof p, "models/hw/a100-sxm4-80g.cfg"), &a100, NULL), UNPAD_OK);
    snprintf(cal, sizeof cal, "hw = a100-sxm4-80g\nfp8 = true\n");
    tu_write_tmp(p, sizeof p, ".cfg", cal);
    unpad_err err = {0};
    ck_assert_int_eq(calib_load(p, &a100, &c, &err), UNPAD_EINVAL);
    ck_assert_msg(strstr(err.msg, "fp8 = true (fitted on --fp8 on traces) but the hardware spec 'a100-sxm4-80g' "
                                  "gives no peak_fp8_tflops"), "%s", err.msg);
    unlink(p);
}
END_TEST

START_TEST(test_bw_eff_per_operator)
{
    calib_coef c;
    calib_default(&h200, &c);
    c.bw_eff = 0.5;
    c.optim_bw_eff = 0.8;
    c.op_eff[OP_LOSS_FWD] = 0.12;
    ck_assert_double_eq(cost_bw_eff(&c, OP_LOSS_FWD, 1024), 0.12);
    ck_assert_double_eq(cost_bw_eff(&c, OP_ATTN_LN_FWD, 1024), 0.5);
    ck_assert_double_eq(cost_bw_eff(&c, OP_LAMB, 1024), 0.8);
    /* narrow models: memory-bound operators gain bw_narrow x (1024/hidden - 1) in 1/eff; the
     * optimizer (per parameter) and GEMMs do not */
    c.bw_narrow = 0.75;
    ck_assert_double_eq_tol(cost_bw_eff(&c, OP_LOSS_FWD, 768), 1 / (1 / 0.12 + 0.25), 1e-12);
    ck_assert_double_eq(cost_bw_eff(&c, OP_LAMB, 768), 0.8);
    ck_assert_double_eq(cost_bw_eff(&c, OP_LOSS_FWD, 1024), 0.12);
    c.bw_narrow = 0;
    op_cost oc = {.op = OP_LOSS_FWD, .launches = 1, .flops = 0, .bytes = 1e8};
    double want = 1e8 / (h200.mem_bw_gbs * 1e3 * 0.12) + c.launch_us;
    ck_assert_double_eq_tol(cost_op_us(&h200, &c, &oc), want, 1e-9 * want);
}
END_TEST

START_TEST(test_fmha_width_term)
{
    /* attn_narrow and attn_bwd_narrow: a model of fewer heads of 64 (narrower than 1024) adds them
     * x (1024 / (64 heads) - 1) to the tile's inverse efficiency; 16 heads are the reference */
    calib_coef c, tmp;
    calib_default(&h200, &c);
    c.attn_eff = 0.25;
    c.attn_bwd_eff = 0.26;
    ck_assert_ptr_eq(calib_fmha_heads(&c, 12, &tmp), &c); /* no width terms: c itself */
    c.attn_narrow = -1.5;
    c.attn_bwd_narrow = -0.9;
    const calib_coef *w = calib_fmha_heads(&c, 12, &tmp);
    ck_assert_ptr_eq(w, &tmp);
    ck_assert_double_eq_tol(calib_fmha(w, 0).eff, 1 / (4.0 - 1.5 / 3), 1e-12);
    ck_assert_double_eq_tol(calib_fmha(w, 1).eff, 1 / (1 / 0.26 - 0.9 / 3), 1e-12);
    ck_assert_double_eq(w->attn_narrow, 0); /* applied once */
    ck_assert_double_eq_tol(calib_fmha(calib_fmha_heads(&c, 16, &tmp), 0).eff, 0.25, 1e-15);
    /* the tile simulation takes it: 12 heads under the width term = 12 heads at that efficiency */
    int len[5] = {512, 300, 128, 64, 7};
    calib_coef direct = c;
    direct.attn_narrow = direct.attn_bwd_narrow = 0;
    direct.attn_eff = 1 / (4.0 - 1.5 / 3);
    direct.attn_bwd_eff = 1 / (1 / 0.26 - 0.9 / 3);
    for (int dir = 0; dir < 2; dir++) {
        double a = cost_fmha_us(&h200, &c, 12, len, 5, dir), b = cost_fmha_us(&h200, &direct, 12, len, 5, dir);
        ck_assert_double_eq_tol(a, b, 1e-9 * b);
        calib_coef none = c;
        none.attn_narrow = none.attn_bwd_narrow = 0;
        ck_assert_double_lt(a, cost_fmha_us(&h200, &none, 12, len, 5, dir)); /* faster tiles */
    }
}
END_TEST

START_TEST(test_fmha_load_term)
{
    /* attn_load, attn_bwd_load: a launch of W waves (tiles / (SMs x tiles per SM), at least 1) adds
     * them x ln(W / 10) to the tile's inverse efficiency, held at attn_load_tiles_max */
    calib_coef c, tmp;
    calib_default(&h200, &c);
    c.attn_eff = 0.25;
    c.attn_bwd_eff = 0.28;
    ck_assert_ptr_eq(calib_fmha_tiles(&c, 132, 5000, &tmp), &c); /* none: c itself */
    c.attn_load = 0.3;
    c.attn_bwd_load = 0.4;
    double slots = 132 * 3.0, slots_b = 132 * 2.0;
    const calib_coef *w = calib_fmha_tiles(&c, 132, 40 * slots, &tmp); /* 40 waves forward */
    ck_assert_double_eq_tol(calib_fmha(w, 0).eff, 1 / (4.0 + 0.3 * log(4.0)), 1e-12);
    ck_assert_double_eq_tol(calib_fmha(w, 1).eff, 1 / (1 / 0.28 + 0.4 * log(40 * slots / slots_b / 10)), 1e-12);
    ck_assert_double_eq(w->attn_load, 0); /* applied once */
    /* below one wave: one wave */
    ck_assert_double_eq_tol(calib_fmha(calib_fmha_tiles(&c, 132, 10, &tmp), 0).eff, 1 / (4.0 + 0.3 * log(0.1)), 1e-12);
    /* beyond the largest launch fitted: held there */
    c.attn_load_tiles_max = 20 * slots;
    ck_assert_double_eq_tol(calib_fmha(calib_fmha_tiles(&c, 132, 80 * slots, &tmp), 0).eff,
                            1 / (4.0 + 0.3 * log(2.0)), 1e-12);
    /* the tile simulation takes it: a larger batch's tiles run slower than without the term */
    int len[200];
    for (int i = 0; i < 200; i++)
        len[i] = 64 + (i * 37) % 449;
    calib_coef none = c;
    none.attn_load = none.attn_bwd_load = 0;
    for (int dir = 0; dir < 2; dir++) {
        ck_assert_double_gt(cost_fmha_us(&h200, &c, 16, len, 200, dir), cost_fmha_us(&h200, &none, 16, len, 200, dir));
        ck_assert_double_lt(cost_fmha_us(&h200, &c, 16, len, 8, dir), cost_fmha_us(&h200, &none, 16, len, 8, dir));
    }
}
END_TEST

/* --faster: each item makes its operators F times as fast, and nothing else. */
START_TEST(test_faster)
{
    char p[512];
    calib_coef c, f;
    unpad_err e = {0};
    ck_assert_msg(calib_load(tu_path(p, sizeof p, "models/calib/h200-sxm.cfg"), &h200, &c, &e) == UNPAD_OK, "%s",
                  e.msg);
    int len[100];
    for (int i = 0; i < 100; i++)
        len[i] = 1 + (i * 97) % 512;
    /* the backward FMHA 1.5x, at both widths (the width and launch-size terms scale with it); the
     * forward unchanged */
    f = c;
    ck_assert_msg(calib_faster(&f, "fmha_bwd=1.5", &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_str_eq(f.faster, "fmha_bwd=1.5");
    for (int heads = 12; heads <= 16; heads += 4) {
        double launch = c.launch_us;
        double b0 = cost_fmha_us(&h200, &c, heads, len, 100, 1), b1 = cost_fmha_us(&h200, &f, heads, len, 100, 1);
        ck_assert_double_eq_tol((b1 - launch) / (b0 - launch), 1 / 1.5, 0.02);
        double f0 = cost_fmha_us(&h200, &f, heads, len, 100, 0), c0 = cost_fmha_us(&h200, &c, heads, len, 100, 0);
        ck_assert_double_eq_tol(f0, c0, 1e-9);
    }
    /* the GEMM class 1.25x: every GEMM's efficiency, at any row count and width */
    f = c;
    ck_assert_msg(calib_faster(&f, "gemm=1.25", &e) == UNPAD_OK, "%s", e.msg);
    for (int op = 0; op < OP_COUNT; op++)
        if (op_class_of((op_id)op) == OPC_GEMM)
            for (double rows = 100; rows < 1e5; rows *= 7)
                for (double w = 768; w <= 1024; w += 256)
                    ck_assert_double_eq_tol(
                        cost_gemm_eff(&f, (op_id)op, rows, w) / cost_gemm_eff(&c, (op_id)op, rows, w), 1.25, 1e-9);
    /* one operator: its own large-batch efficiency; the others untouched */
    f = c;
    c.host_launch_us = f.host_launch_us = 12;
    ck_assert_msg(calib_faster(&f, "attn_ln_bwd=1.4,lamb=1.1,overhead=2", &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_double_eq_tol(cost_bw_eff(&f, OP_ATTN_LN_BWD, 1024) / cost_bw_eff(&c, OP_ATTN_LN_BWD, 1024), 1.4, 1e-9);
    ck_assert_double_eq(cost_bw_eff(&f, OP_FFN_LN_BWD, 1024), cost_bw_eff(&c, OP_FFN_LN_BWD, 1024));
    ck_assert_double_eq_tol(f.optim_bw_eff, 1.1 * c.optim_bw_eff, 1e-12);
    ck_assert_double_eq_tol(f.step_overhead_us, c.step_overhead_us / 2, 1e-9);
    ck_assert_double_eq_tol(f.host_launch_us, 6, 1e-12); /* the host's enqueueing with its overhead */
    /* refused: past the peak, an unknown name, a factor out of range, a collective by name */
    static const struct { const char *list, *says; } bad[] = {
        {"gemm=3", "past the hardware's peak; gemm is at most x"},
        {"fmha=2", "unknown 'fmha'"},
        {"gemm=0", "not NAME=F"},
        {"gemm=0.001", "not NAME=F"},
        {"gemm=101", "not NAME=F"},
        {"gemm", "not NAME=F"},
        {"gemm=1.1,", "an empty item"},
        {"allreduce=2", "go by class"},
        {"gemm=1.2,gemm=1.4", "'gemm' is given twice (gemm=1.2 and gemm=1.4); give it once, with the product"},
        {"lamb=1.1,ffn1_fwd=1.1,lamb=1.1", "'lamb' is given twice"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        f = c;
        ck_assert_int_ne(calib_faster(&f, bad[i].list, &e), UNPAD_OK);
        ck_assert_msg(strstr(e.msg, bad[i].says), "%s: %s", bad[i].list, e.msg);
    }
    /* a class past the peak: the largest factor over all its operators (and the GEMMs' shared
     * efficiency), naming the one that sets it; that factor as printed is taken, a little more not */
    for (int k = 0; k < OPC_COUNT; k++) {
        if (k == OPC_COMM)
            continue;
        double most = k == OPC_GEMM ? 1 / c.gemm_eff : HUGE_VAL;
        const char *by = k == OPC_GEMM ? "gemm_eff" : NULL;
        for (int op = 0; op < OP_COUNT; op++) {
            double eff = op == OP_FMHA_FWD ? c.attn_eff : op == OP_FMHA_BWD ? c.attn_bwd_eff
                       : op_class_of((op_id)op) == OPC_OPTIM ? c.optim_bw_eff
                       : c.op_eff[op] > 0 ? c.op_eff[op] : k == OPC_GEMM ? c.gemm_eff : c.bw_eff;
            if (op_class_of((op_id)op) == (op_class)k && 1 / eff < most) {
                most = 1 / eff;
                by = op_name((op_id)op);
            }
        }
        char list[64], says[128];
        snprintf(list, sizeof list, "%s=%g", op_class_name((op_class)k), most * 1.05);
        snprintf(says, sizeof says, "%s is at most x%.2f (limited by %s", op_class_name((op_class)k),
                 floor(most * 100) / 100, by);
        f = c;
        ck_assert_int_eq(calib_faster(&f, list, &e), UNPAD_ERANGE);
        ck_assert_msg(strstr(e.msg, says), "%s: %s (expected '%s')", list, e.msg, says);
        snprintf(list, sizeof list, "%s=%.2f", op_class_name((op_class)k), floor(most * 100) / 100);
        f = c;
        ck_assert_msg(calib_faster(&f, list, &e) == UNPAD_OK, "%s: %s", list, e.msg);
        snprintf(list, sizeof list, "%s=%.2f", op_class_name((op_class)k), floor(most * 100) / 100 + 0.01);
        f = c;
        ck_assert_msg(calib_faster(&f, list, &e) == UNPAD_ERANGE, "%s taken", list);
    }
    /* communication: a network F times as fast, past comm_eff = 1 (the bandwidth terms / F, the
     * latencies as they are) */
    ck_assert_double_eq(c.comm_eff, 1);
    f = c;
    ck_assert_msg(calib_faster(&f, "communication=2", &e) == UNPAD_OK, "%s", e.msg);
    double lat = h200.link_lat_us * 3, bytes = 1.3e9;
    double t0 = cost_allreduce_us(&h200, &c, bytes, 8) - lat, t1 = cost_allreduce_us(&h200, &f, bytes, 8) - lat;
    ck_assert_double_eq_tol(t1 / t0, 0.5, 1e-9);
    /* an operator and its class are two names: both apply */
    f = c;
    ck_assert_msg(calib_faster(&f, "attention=1.1,fmha_bwd=1.2", &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_double_eq_tol(f.attn_bwd_eff, c.attn_bwd_eff * 1.1 * 1.2, 1e-12);
}
END_TEST

/* The FMHA backward's passes over its dQ accumulator: 14 bytes per token and hidden unit at the
 * streaming bandwidth, per token and not per 64-row tile (a sequence of 1 token and one of 64 take
 * one tile each; their backward operators differ by the tiles' work and the 63 tokens' passes
 * only), none in the forward, and --faster fmha_bwd=F makes them F times as fast. */
START_TEST(test_fmha_backward_passes)
{
    calib_coef c;
    calib_default(&h200, &c);
    const double per_token = 14.0 * 16 * 64 / (h200.mem_bw_gbs * 1e3 * c.optim_bw_eff);
    ck_assert_double_eq_tol(cost_fmha_passes_us(&h200, &c, 16, 1000, 1), 1000 * per_token, 1e-12);
    ck_assert(cost_fmha_passes_us(&h200, &c, 16, 1000, 0) == 0);
    ck_assert(cost_fmha_passes_us(&h200, &c, 16, 0, 1) == 0);
    /* in the operator model: one tile either way, the passes of 1 against 64 tokens */
    model_cfg m;
    char p[512];
    ck_assert_int_eq(model_load(tu_path(p, sizeof p, "models/bert-large.cfg"), &m, NULL), UNPAD_OK);
    int one = 1, full = 64;
    op_batch b1 = {.len = &one, .n = 1, .fused = 1, .gpus = 1, .dropout = 1};
    op_batch b64 = {.len = &full, .n = 1, .fused = 1, .gpus = 1, .dropout = 1};
    cost_step s1, s64;
    ck_assert_int_eq(cost_predict_step(&m, &h200, &c, &b1, &s1, NULL), UNPAD_OK);
    ck_assert_int_eq(cost_predict_step(&m, &h200, &c, &b64, &s64, NULL), UNPAD_OK);
    double tiles1 = cost_fmha_us(&h200, &c, 16, &one, 1, 1), tiles64 = cost_fmha_us(&h200, &c, 16, &full, 1, 1);
    ck_assert_double_eq_tol(s64.time_us[OP_FMHA_BWD] - s1.time_us[OP_FMHA_BWD],
                            tiles64 - tiles1 + 63 * per_token, 1e-9);
    ck_assert_double_eq_tol(s64.time_us[OP_FMHA_FWD] - s1.time_us[OP_FMHA_FWD],
                            cost_fmha_us(&h200, &c, 16, &full, 1, 0) - cost_fmha_us(&h200, &c, 16, &one, 1, 0), 1e-9);
    /* what-if speed-ups of the backward take the passes along */
    calib_coef f = c;
    ck_assert_int_eq(calib_faster(&f, "fmha_bwd=2", NULL), UNPAD_OK);
    ck_assert_double_eq_tol(cost_fmha_passes_us(&h200, &f, 16, 1000, 1), 500 * per_token, 1e-12);
    f = c;
    ck_assert_int_eq(calib_faster(&f, "fmha_fwd=2", NULL), UNPAD_OK);
    ck_assert_double_eq_tol(cost_fmha_passes_us(&h200, &f, 16, 1000, 1), 1000 * per_token, 1e-12);
    /* they stream at LAMB's efficiency, but a faster optimizer is not a faster attention */
    f = c;
    ck_assert_int_eq(calib_faster(&f, "optimizer=1.2,fmha_bwd=1.5", NULL), UNPAD_OK);
    ck_assert_double_eq_tol(cost_fmha_passes_us(&h200, &f, 16, 1000, 1), 1000 * per_token / 1.5, 1e-12);
    ck_assert_double_eq_tol(f.optim_bw_eff, 1.2 * c.optim_bw_eff, 1e-12);
}
END_TEST

START_TEST(test_calib_file_with_and_without_operators)
{
    char p[512], q[512];
    unpad_err e = {0};
    calib_coef c;
    /* an older file without eff_* keys: class values everywhere */
    ck_assert_ptr_nonnull(tu_write_tmp(p, sizeof p, ".cfg", "hw = h200-sxm\ngemm_eff = 0.7\n"));
    ck_assert_msg(calib_load(p, &h200, &c, &e) == UNPAD_OK, "%s", e.msg);
    for (int op = 0; op < OP_COUNT; op++)
        ck_assert_double_eq(c.op_eff[op], 0);
    unlink(p);
    /* written and read back */
    c.op_eff[OP_QKV_BWD] = 0.643;
    c.op_eff[OP_EMBED_BWD] = 0.242;
    snprintf(q, sizeof q, "/tmp/unpad-test-calib-%d.cfg", (int)getpid());
    ck_assert_msg(calib_write(q, &c, "test", &e) == UNPAD_OK, "%s", e.msg);
    calib_coef d;
    ck_assert_msg(calib_load(q, &h200, &d, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_double_eq_tol(d.op_eff[OP_QKV_BWD], 0.643, 1e-9);
    ck_assert_double_eq_tol(d.op_eff[OP_EMBED_BWD], 0.242, 1e-9);
    ck_assert_double_eq(d.op_eff[OP_FFN1_FWD], 0);
    unlink(q);
    /* the FMHA backward's three: absent, the forward's; given, its own; half given, refused */
    ck_assert_ptr_nonnull(tu_write_tmp(p, sizeof p, ".cfg", "hw = h200-sxm\nattn_eff = 0.2\n"
                                       "attn_cta_us = 3\nattn_ctas_per_sm = 3\n"));
    ck_assert_msg(calib_load(p, &h200, &c, &e) == UNPAD_OK, "%s", e.msg);
    calib_fmha_coef fb = calib_fmha(&c, 1);
    ck_assert(fb.eff == 0.2 && fb.cta_us == 3 && fb.ctas_per_sm == 3);
    unlink(p);
    ck_assert_ptr_nonnull(tu_write_tmp(p, sizeof p, ".cfg", "hw = h200-sxm\nattn_eff = 0.2\n"
                                       "attn_bwd_eff = 0.15\nattn_bwd_cta_us = 1\n"
                                       "attn_bwd_ctas_per_sm = 2\n"));
    ck_assert_msg(calib_load(p, &h200, &c, &e) == UNPAD_OK, "%s", e.msg);
    fb = calib_fmha(&c, 1);
    ck_assert(fb.eff == 0.15 && fb.cta_us == 1 && fb.ctas_per_sm == 2);
    ck_assert_double_eq(calib_fmha(&c, 0).eff, 0.2);
    /* the backward's tile time is its own: 2.5x the forward's FLOPs at its own rate and slots */
    double fwd = cost_fmha_cta_us(&h200, &c, 64, 512, 0), bwd = cost_fmha_cta_us(&h200, &c, 64, 512, 1);
    double fl = 4.0 * 64 * 512 * 64, slot = h200.peak_bf16_tflops * 1e6 / h200.sms;
    ck_assert_double_eq_tol(bwd, 1 + 2.5 * fl / (slot / 2 * 0.15), 1e-9);
    ck_assert_double_eq_tol(fwd, c.attn_cta_us + fl / (slot / c.attn_ctas_per_sm * 0.2), 1e-9);
    unlink(p);
    ck_assert_ptr_nonnull(tu_write_tmp(p, sizeof p, ".cfg", "hw = h200-sxm\nattn_bwd_eff = 0.15\n"));
    ck_assert_int_eq(calib_load(p, &h200, &c, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, p) && strstr(e.msg, "attn_bwd_ctas_per_sm"), "%s", e.msg);
    unlink(p);
    ck_assert_ptr_nonnull(tu_write_tmp(p, sizeof p, ".cfg", "hw = h200-sxm\nattn_bwd_ctas_per_sm = 2\n"));
    ck_assert_int_eq(calib_load(p, &h200, &c, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "attn_bwd_eff"), "%s", e.msg);
    unlink(p);
    /* out of range refused with the key named */
    ck_assert_ptr_nonnull(tu_write_tmp(p, sizeof p, ".cfg", "hw = h200-sxm\neff_loss_fwd = 1.5\n"));
    ck_assert_int_eq(calib_load(p, &h200, &c, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "eff_loss_fwd"));
    unlink(p);
}
END_TEST

Suite *cost_suite(void)
{
    Suite *s = suite_create("cost");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_gemm_eff_class_and_operator);
    tcase_add_test(tc, test_bw_eff_per_operator);
    tcase_add_test(tc, test_fp8_products);
    tcase_add_test(tc, test_calib_file_with_and_without_operators);
    tcase_add_test(tc, test_fmha_width_term);
    tcase_add_test(tc, test_fmha_load_term);
    tcase_add_test(tc, test_faster);
    tcase_add_test(tc, test_fmha_backward_passes);
    suite_add_tcase(s, tc);
    return s;
}
