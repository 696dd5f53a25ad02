/* check_ops.c — operator counts against closed forms, and the cost model's basic laws. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "cost.h"
#include "testutil.h"

static model_cfg M;
static hw_spec HW;
static calib_coef C;

static void setup(void)
{
    char p[512];
    unpad_err e = {0};
    ck_assert_int_eq(model_load(tu_path(p, sizeof p, "models/bert-large.cfg"), &M, &e), UNPAD_OK);
    ck_assert_int_eq(hw_load(tu_path(p, sizeof p, "models/hw/h200-sxm.cfg"), &HW, &e), UNPAD_OK);
    calib_default(&HW, &C);
}

START_TEST(test_names_roundtrip)
{
    for (int i = 0; i < OP_COUNT; i++) {
        ck_assert_int_eq(op_from_name(op_name((op_id)i)), i);
        ck_assert_str_ne(op_name((op_id)i), "?");
    }
    ck_assert_int_eq(op_from_name("nonsense"), -1);
    ck_assert_str_eq(op_name(OP_FMHA_FWD), "fmha_fwd");
    ck_assert_int_eq(op_is_per_layer(OP_QKV_BWD), 1);
    ck_assert_int_eq(op_is_per_layer(OP_LAMB), 0);
}
END_TEST

START_TEST(test_model_flops_closed_form)
{
    int len[] = {1, 2, 63, 64, 65, 128, 511, 512, 200, 333};
    int n = 10;
    double T = 0, S2 = 0, P = 0;
    for (int i = 0; i < n; i++) {
        T += len[i];
        S2 += (double)len[i] * len[i];
        P += ops_predictions(len[i], 76);
    }
    double H = 1024, F = 4096, L = 24, V = 30528;
    /* Forward GEMMs 8TH^2 + 4THF per layer, attention 4 H S2; backward twice the GEMMs and 2.5x
     * the attention (five matmuls against two); heads on P masked rows and n first tokens. */
    double layer = 3 * (8 * T * H * H + 4 * T * H * F) + 3.5 * 4 * H * S2;
    double heads = 3 * (2 * P * H * H + 2 * P * H * V) + 3 * (2 * n * H * H + 2 * n * H * 2);
    double expect = L * layer + heads;
    ck_assert_double_eq_tol(ops_model_flops(&M, len, n) / expect, 1.0, 1e-12);
    /* Per token, the encoder's training FLOPs are 6 x its weights (12.6M a layer, biases and
     * LayerNorms included, hence the 0.2%). */
    double per_token = 3 * 24 * (8 * H * H + 4 * H * F);
    ck_assert_double_eq_tol(per_token / (6 * 24 * 12596224.0), 1.0, 0.002);
}
END_TEST

START_TEST(test_bytes_of_known_operators)
{
    int len[] = {100, 300};
    op_batch b = {.len = len, .n = 2, .fused = 1, .gpus = 1, .dropout = 1};
    op_cost o[OP_COUNT];
    ck_assert_int_eq(ops_step(&M, &b, o, NULL), UNPAD_OK);
    double T = 400, H = 1024, NH = 16;
    ck_assert_double_eq_tol(o[OP_QKV_FWD].bytes, T * H * 2 + 3 * H * H * 2 + T * 3 * H * 2 + 3 * H * 2, 0.5);
    ck_assert_double_eq_tol(o[OP_FMHA_FWD].bytes, T * 3 * H * 2 + T * H * 2 + NH * T * 4, 0.5);
    ck_assert_double_eq_tol(o[OP_ATTN_LN_FWD].bytes, 6 * T * H + 8 * T, 0.5);
    ck_assert_double_eq_tol(o[OP_LAMB].bytes, 42.0 * model_param_count(&M), 0.5);
    ck_assert_double_eq_tol(o[OP_FMHA_FWD].sum_len2, 100.0 * 100 + 300.0 * 300, 1e-9);
    ck_assert_int_eq(o[OP_QKV_FWD].instances, 24);
    /* Unfused attention materialises the scores: at least 8 bytes per score element. */
    ck_assert(o[OP_FMHA_FWD].bytes_unfused - o[OP_FMHA_FWD].bytes_fused >= 8 * NH * (1e4 + 9e4));
    /* Padding to 512 multiplies GEMM work by 1024/400 and attention by 2*512^2/1e5. */
    op_batch bp = b;
    bp.padded = 1;
    bp.pad_len = 512;
    op_cost q[OP_COUNT];
    ck_assert_int_eq(ops_step(&M, &bp, q, NULL), UNPAD_OK);
    ck_assert_double_eq_tol(q[OP_QKV_FWD].tensor_flops / o[OP_QKV_FWD].tensor_flops, 1024.0 / 400, 1e-12);
    ck_assert_double_eq_tol(q[OP_FMHA_FWD].tensor_flops / o[OP_FMHA_FWD].tensor_flops,
                            2 * 512.0 * 512 / 1e5, 1e-12);
    /* No all-reduce on one GPU; ring volume 2(N-1)/N of fp32 gradients on 8. */
    ck_assert_double_eq_tol(o[OP_ALLREDUCE].bytes, 0, 1e-9);
    b.gpus = 8;
    ck_assert_int_eq(ops_step(&M, &b, o, NULL), UNPAD_OK);
    ck_assert_double_eq_tol(o[OP_ALLREDUCE].bytes, 2 * 7.0 / 8 * model_param_count(&M) * 4, 1);
}
END_TEST

START_TEST(test_bad_batches)
{
    int len[] = {100, 600};
    op_batch b = {.len = len, .n = 2, .fused = 1, .gpus = 1};
    op_cost o[OP_COUNT];
    unpad_err e = {0};
    ck_assert_int_eq(ops_step(&M, &b, o, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "sequence 1 has length 600"), "%s", e.msg);
    b.n = 0;
    ck_assert_int_eq(ops_step(&M, &b, o, &e), UNPAD_EINVAL);
}
END_TEST

START_TEST(test_fmha_waves)
{
    /* One 64-row tile per sequence and head: 2 x 132 slots fill one wave exactly; one more tile
     * starts a second wave. */
    calib_coef c = C;
    c.attn_ctas_per_sm = 2;
    int len[600];
    for (int i = 0; i < 600; i++)
        len[i] = COST_FMHA_TILE;
    double one = cost_fmha_cta_us(&HW, &c, COST_FMHA_TILE, COST_FMHA_TILE, 0);
    ck_assert_double_eq_tol(cost_fmha_us(&HW, &c, 1, len, 264, 0), one, 1e-9);
    ck_assert_double_eq_tol(cost_fmha_us(&HW, &c, 1, len, 265, 0), 2 * one, 1e-9);
    ck_assert_double_eq_tol(cost_fmha_us(&HW, &c, 2, len, 132, 0), one, 1e-9);
    /* Backward tiles cost 2.5x the matmul work of forward ones. */
    ck_assert(cost_fmha_cta_us(&HW, &c, 128, 512, 1) > 2 * cost_fmha_cta_us(&HW, &c, 128, 512, 0));
}
END_TEST

START_TEST(test_fmha_prefix_equals_each_prefix_alone)
{
    /* The prefix pass the grouping planner uses must give, for every prefix, exactly the time of
     * that prefix simulated on its own (ragged lengths, several waves, both directions). */
    int len[90];
    for (int i = 0; i < 90; i++)
        len[i] = 512 - (i * 53) % 511;
    double pre[90];
    for (int dir = 0; dir < 2; dir++) {
        double all = cost_fmha_prefix_us(&HW, &C, 16, len, 90, dir, pre);
        ck_assert(all == pre[89]);
        for (int k = 1; k <= 90; k++)
            ck_assert_msg(pre[k - 1] == cost_fmha_us(&HW, &C, 16, len, k, dir), "dir %d prefix %d", dir, k);
        for (int k = 1; k < 90; k++)
            ck_assert(pre[k] >= pre[k - 1]);
    }
}
END_TEST

START_TEST(test_step_laws_and_seq_cost)
{
    int len[56];
    for (int i = 0; i < 56; i++)
        len[i] = 64 + (i * 37) % 449;
    op_batch b = {.len = len, .n = 56, .fused = 1, .gpus = 1, .dropout = 1};
    cost_step a, p, u;
    ck_assert_int_eq(cost_predict_step(&M, &HW, &C, &b, &a, NULL), UNPAD_OK);
    op_batch bp = b;
    bp.padded = 1;
    bp.pad_len = 512;
    ck_assert_int_eq(cost_predict_step(&M, &HW, &C, &bp, &p, NULL), UNPAD_OK);
    op_batch bu = b;
    bu.fused = 0;
    ck_assert_int_eq(cost_predict_step(&M, &HW, &C, &bu, &u, NULL), UNPAD_OK);
    ck_assert(p.step_us > a.step_us);
    ck_assert(u.step_us > a.step_us);
    /* Model FLOPs never exceed the GPU's peak. */
    ck_assert(a.model_flops / a.step_us / 1e6 < HW.peak_bf16_tflops);
    seq_cost sc;
    ck_assert_int_eq(cost_seq_model(&M, &HW, &C, &sc, NULL), UNPAD_OK);
    ck_assert(sc.c1 > 0 && sc.c2 > 0);
    /* The fitted per-sequence cost reproduces a uniform batch's compute within 5%. */
    for (int i = 0; i < 56; i++)
        len[i] = 256;
    ck_assert_int_eq(cost_predict_step(&M, &HW, &C, &b, &a, NULL), UNPAD_OK);
    double fixed = a.time_us[OP_LAMB] + C.step_overhead_us;
    ck_assert_double_eq_tol((a.compute_us - fixed) / (56 * seq_cost_us(&sc, 256)), 1.0, 0.05);
}
END_TEST

/* op_cost's per-instance counts, side by side. */
static void counts_of(const op_cost *o, double v[6])
{
    double c[6] = {o->flops, o->tensor_flops, o->bytes, o->bytes_fused, o->bytes_unfused, o->rows};
    memcpy(v, c, sizeof c);
}

START_TEST(test_last_layer_on_head_rows)
{
    /* The last layer after its attention on R = P + n rows: each of those ten operators' counts per
     * instance are the mean over the layers, ((L - 1) x its counts at T + its counts at R) / L (the
     * weights' bytes, the same at any row count, stay whole); every other operator as without. */
    static const op_id ten[] = {OP_ATTN_OUT_FWD, OP_ATTN_LN_FWD, OP_FFN1_FWD, OP_FFN2_FWD, OP_FFN_LN_FWD,
                                OP_FFN_LN_BWD, OP_FFN2_BWD, OP_FFN1_BWD, OP_ATTN_LN_BWD, OP_ATTN_OUT_BWD};
    int on_rows = 0;
    for (int i = 0; i < OP_COUNT; i++)
        on_rows += ops_on_head_rows((op_id)i);
    ck_assert_int_eq(on_rows, 10);
    for (size_t k = 0; k < sizeof ten / sizeof ten[0]; k++)
        ck_assert(ops_on_head_rows(ten[k]));
    for (int fused = 0; fused < 2; fused++) {
        double T = 14000, P = 2100, n = 56, R = ops_head_rows(T, P, n), L = M.layers;
        ck_assert_double_eq(R, P + n);
        ops_shape full = {.seqs = n, .tokens = T, .attn_tokens = T, .sum_len2 = 4.5e6, .preds = P, .real_tokens = T,
                          .max_len = 512};
        ops_shape heads = full, at_r = full, whole = full;
        heads.last_heads = 1;
        heads.head_rows = R;
        at_r.tokens = R;
        whole.last_heads = 1;
        whole.head_rows = T;
        op_cost off[OP_COUNT], on[OP_COUNT], r[OP_COUNT], w[OP_COUNT];
        ops_count(&M, &full, fused, 1, 1, off);
        ops_count(&M, &heads, fused, 1, 1, on);
        ops_count(&M, &at_r, fused, 1, 1, r);
        ops_count(&M, &whole, fused, 1, 1, w);
        for (int i = 0; i < OP_COUNT; i++) {
            double a[6], b[6], c[6], d[6];
            counts_of(&off[i], a);
            counts_of(&on[i], b);
            counts_of(&r[i], c);
            counts_of(&w[i], d);
            ck_assert_int_eq(on[i].instances, off[i].instances);
            ck_assert_int_eq(on[i].launches, off[i].launches);
            for (int f = 0; f < 6; f++) {
                double want = ops_on_head_rows((op_id)i) ? ((L - 1) * a[f] + c[f]) / L : a[f];
                ck_assert_msg(fabs(b[f] - want) <= 1e-12 * fabs(want), "%s count %d: %.17g, want %.17g",
                              op_name((op_id)i), f, b[f], want);
                ck_assert_msg(d[f] == a[f], "%s count %d: head_rows = T changed it", op_name((op_id)i), f);
            }
        }
        /* and fewer: the FFN's GEMMs by (T - R) / (L T) of their FLOPs */
        ck_assert_double_eq_tol(on[OP_FFN1_FWD].tensor_flops / off[OP_FFN1_FWD].tensor_flops,
                                1 - (T - R) / (L * T), 1e-12);
    }
    /* ops_step: P + n of the batch, at most its T */
    ck_assert_double_eq(ops_head_rows(10, 8, 5), 10);
    int len[] = {100, 300};
    op_batch b = {.len = len, .n = 2, .fused = 1, .gpus = 1, .dropout = 1};
    op_cost o[OP_COUNT], h[OP_COUNT];
    ck_assert_int_eq(ops_step(&M, &b, o, NULL), UNPAD_OK);
    b.last_heads = 1;
    ck_assert_int_eq(ops_step(&M, &b, h, NULL), UNPAD_OK);
    double R = ops_predictions(100, 76) + ops_predictions(300, 76) + 2;
    ck_assert_double_eq_tol(h[OP_FFN2_BWD].tensor_flops / o[OP_FFN2_BWD].tensor_flops, (23 * 400 + R) / (24 * 400),
                            1e-12);
    ck_assert(h[OP_QKV_FWD].flops == o[OP_QKV_FWD].flops);
}
END_TEST

Suite *ops_suite(void)
{
    Suite *s = suite_create("ops");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_names_roundtrip);
    tcase_add_test(tc, test_model_flops_closed_form);
    tcase_add_test(tc, test_bytes_of_known_operators);
    tcase_add_test(tc, test_bad_batches);
    tcase_add_test(tc, test_fmha_waves);
    tcase_add_test(tc, test_fmha_prefix_equals_each_prefix_alone);
    tcase_add_test(tc, test_step_laws_and_seq_cost);
    tcase_add_test(tc, test_last_layer_on_head_rows);
    suite_add_tcase(s, tc);
    return s;
}
