/* check_step.c — the step model against the per-operator cost model it compiles: every operator
 * but the FMHA to rounding, the closed-form FMHA against the tile simulation within the bounds
 * docs/cost-model.md states, exact where the closed form is exact, the batch sums. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "dist.h"
#include "fit.h"
#include "step.h"
#include "testutil.h"

static model_cfg M, BASE;
static hw_spec HW;
static calib_coef FITTED, DEFAULT, FP8; /* FP8: the fitted coefficients as --fp8 on's (cost.h) */

static void setup(void)
{
    char p[512];
    unpad_err e = {0};
    ck_assert_int_eq(model_load(tu_path(p, sizeof p, "models/bert-large.cfg"), &M, &e), 0);
    ck_assert_int_eq(model_load(tu_path(p, sizeof p, "models/bert-base.cfg"), &BASE, &e), 0);
    ck_assert_int_eq(hw_load(tu_path(p, sizeof p, "models/hw/h200-sxm.cfg"), &HW, &e), 0);
    ck_assert_int_eq(calib_load(tu_path(p, sizeof p, "models/calib/h200-sxm.cfg"), &HW, &FITTED, &e), 0);
    calib_default(&HW, &DEFAULT);
    FP8 = FITTED;
    FP8.fp8 = 1;
}

static uint64_t rng = 88172645463325252ull;
static int next_len(int mode)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    unsigned u = (unsigned)(rng >> 11);
    switch (mode) {
    case 0: return 1 + (int)(u % 512);                       /* flat */
    case 1: return u % 4 == 0 ? 512 : 1 + (int)(u % 300);    /* a spike at 512 (Wikipedia-like) */
    case 2: return 1 + (int)((u % 1000) * (u % 1000) / 8000); /* short-heavy */
    default: return u % 2 ? 1 + (int)(u % 64) : 448 + (int)(u % 65); /* bimodal */
    }
}

START_TEST(test_operators_match_cost_model)
{
    /* Every operator but the FMHA (and the collectives, net.h) is the cost model's own time, with
     * bf16 products and with --fp8 on's, with every layer on all tokens and with the last layer
     * after its attention on the heads' rows (STEP_LAST_HEADS, op_batch.last_heads). */
    const calib_coef *cs[] = {&FITTED, &DEFAULT, &FP8};
    const model_cfg *ms[] = {&M, &BASE};
    int len[200];
    for (int t = 0; t < 12; t++) {
        const calib_coef *c = cs[t % 3];
        const model_cfg *m = ms[t / 2 % 2];
        int fused = t < 6, n = 3 + 37 * t % 190;
        for (int i = 0; i < n; i++)
            len[i] = next_len(t % 4);
        for (int heads = 0; heads < 2; heads++) {
            step_model sm;
            int flags = (fused ? STEP_FUSED : 0) | (heads ? STEP_LAST_HEADS : 0);
            ck_assert_int_eq(step_model_init(&sm, m, &HW, c, flags, NULL), UNPAD_OK);
            step_batch b;
            ck_assert_int_eq(step_batch_of(&sm, len, n, &b, NULL), UNPAD_OK);
            cost_step ref;
            op_batch ob = {.len = len, .n = n, .fused = fused, .gpus = 1, .dropout = 1, .last_heads = heads};
            ck_assert_int_eq(cost_predict_step(m, &HW, c, &ob, &ref, NULL), UNPAD_OK);
            double sum = 0;
            for (int i = 0; i < OP_COUNT; i++) {
                if (op_class_of((op_id)i) == OPC_COMM)
                    continue;
                double got = step_op_us(&sm, (op_id)i, &b);
                if (i == OP_FMHA_FWD || i == OP_FMHA_BWD)
                    got = ref.time_us[i]; /* the closed form: below */
                else
                    ck_assert_msg(fabs(got - ref.time_us[i]) <= 1e-9 * ref.time_us[i] + 1e-9,
                                  "%s (flags %d): step %.9g cost %.9g", op_name((op_id)i), flags, got,
                                  ref.time_us[i]);
                if (i != OP_LAMB)
                    sum += ref.ops[i].instances * got;
            }
            double batch = step_batch_us(&sm, &b);
            double closed = 0, sim = 0;
            for (int d = 0; d < 2; d++) {
                op_id op = d ? OP_FMHA_BWD : OP_FMHA_FWD;
                closed += ref.ops[op].instances * step_op_us(&sm, op, &b);
                sim += ref.ops[op].instances * ref.time_us[op];
            }
            ck_assert_double_eq_tol(batch, sum - sim + closed, 1e-9 * batch);
            /* and the whole step, less the collectives, as cost_predict_step adds it up, and the
             * wait for the host, the step model's own (step_host_wait_us) */
            cost_step st;
            ck_assert_int_eq(step_model_predict(&sm, m, &HW, c, &b, 1, &st, NULL), UNPAD_OK);
            ck_assert_double_eq(st.host_wait_us, step_host_wait_us(&sm, &b));
            ck_assert_double_eq_tol(st.step_us - st.host_wait_us, ref.step_us - sim + closed, 1e-9 * ref.step_us);
            ck_assert_double_eq_tol(st.model_flops, ref.model_flops, 1e-9 * ref.model_flops);
            step_model_free(&sm);
        }
    }
}
END_TEST

/* BERT-Large with the last layer after its attention on the heads' rows: a shorter step, by about
 * that layer's share of those operators' time times the rows it leaves out, (T - R) / T (less: their
 * launches and the small-GEMM term stay). */
START_TEST(test_last_heads_saves_the_last_layer)
{
    int len[56];
    for (int i = 0; i < 56; i++)
        len[i] = i % 4 == 0 ? 512 : 20 + (i * 97) % 280;
    cost_step st[2];
    step_batch b;
    for (int heads = 0; heads < 2; heads++) {
        step_model sm;
        ck_assert_int_eq(step_model_init(&sm, &M, &HW, &FITTED, STEP_FUSED | (heads ? STEP_LAST_HEADS : 0), NULL),
                         UNPAD_OK);
        ck_assert_int_eq(step_batch_of(&sm, len, 56, &b, NULL), UNPAD_OK);
        ck_assert_int_eq(step_model_predict(&sm, &M, &HW, &FITTED, &b, 1, &st[heads], NULL), UNPAD_OK);
        step_model_free(&sm);
    }
    double T = b.shape.tokens, R = b.shape.preds + b.shape.seqs, last = 0;
    for (int i = 0; i < OP_COUNT; i++)
        if (ops_on_head_rows((op_id)i))
            last += st[0].ops[i].instances * st[0].time_us[i] / M.layers;
    double saved = st[0].step_us - st[1].step_us, want = last * (1 - R / T);
    ck_assert(R < T / 4);
    ck_assert_msg(saved > 0.85 * want && saved <= want, "saved %.1f us of %.1f", saved, want);
    /* the same operators, the same instances: only their rows changed */
    ck_assert_double_eq(st[1].time_us[OP_QKV_FWD], st[0].time_us[OP_QKV_FWD]);
    ck_assert_int_eq(st[1].ops[OP_FFN1_FWD].instances, M.layers);
}
END_TEST

START_TEST(test_batch_sums)
{
    step_model sm;
    ck_assert_int_eq(step_model_init(&sm, &M, &HW, &FITTED, 1, NULL), UNPAD_OK);
    /* Predictions per sequence as ops_predictions, for every length. */
    for (int l = 1; l <= 512; l++) {
        step_batch b;
        ck_assert_int_eq(step_batch_of(&sm, &l, 1, &b, NULL), UNPAD_OK);
        ck_assert_int_eq((int)b.shape.preds, ops_predictions(l, M.max_predictions));
    }
    /* Tiles (64 rows), rows x keys (rounded to 64) and the class of the longest, by hand. */
    int len[] = {1, 64, 65, 128, 129, 200, 300, 300};
    step_batch b;
    ck_assert_int_eq(step_batch_of(&sm, len, 8, &b, NULL), UNPAD_OK);
    ck_assert_double_eq(b.tiles, 1 + 1 + 2 + 2 + 3 + 4 + 5 + 5);
    ck_assert_double_eq(b.tile_work, 64.0 * 64 * 2 + 128.0 * 128 * 2 + 192.0 * 192 + 256.0 * 256 +
                                         2 * 320.0 * 320);
    ck_assert_int_eq(b.top_k64, 5);
    ck_assert_double_eq(b.top_tiles, 2 * 5); /* 300: five 64-row tiles each */
    ck_assert_double_eq(b.shape.tokens, 1 + 64 + 65 + 128 + 129 + 200 + 600);
    ck_assert_double_eq(b.shape.sum_len2, 1 + 64.0 * 64 + 65 * 65 + 128 * 128 + 129 * 129 +
                                              200 * 200 + 2 * 300.0 * 300);
    /* a length the model cannot train is refused, naming it */
    int bad[] = {100, 513};
    unpad_err e = {0};
    ck_assert_int_eq(step_batch_of(&sm, bad, 2, &b, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "sequence 1 has length 513"));
    step_model_free(&sm);
}
END_TEST

START_TEST(test_fmha_exact_cases)
{
    calib_coef c = FITTED;
    c.attn_ctas_per_sm = 2;
    step_model sm;
    ck_assert_int_eq(step_model_init(&sm, &M, &HW, &c, 1, NULL), UNPAD_OK);
    int len[64];
    /* Every tile in a slot of its own: the longest tile. 16 heads x 16 tiles = 256 <= 264. */
    for (int i = 0; i < 16; i++)
        len[i] = 20 + 7 * i;
    step_batch b;
    ck_assert_int_eq(step_batch_of(&sm, len, 16, &b, NULL), UNPAD_OK);
    for (int d = 0; d < 2; d++) /* the tiles, plus the backward's passes over the 16 sequences' tokens */
        ck_assert_double_eq_tol(step_fmha_us(&sm, &b, d),
                                cost_fmha_us(&HW, &c, 16, len, 16, d) +
                                    cost_fmha_passes_us(&HW, &c, 16, cost_fmha_tokens(len, 16), d), 1e-9);
    /* Equal 512-long sequences: whole waves of equal tiles, as the simulation. */
    for (int n = 1; n <= 64; n += 7) {
        for (int i = 0; i < n; i++)
            len[i] = 512;
        ck_assert_int_eq(step_batch_of(&sm, len, n, &b, NULL), UNPAD_OK);
        for (int d = 0; d < 2; d++) {
            double sim = cost_fmha_us(&HW, &c, 16, len, n, d);
            double got = step_fmha_us(&sm, &b, d) - cost_fmha_passes_us(&HW, &c, 16, 512.0 * n, d);
            ck_assert_msg(got >= sim - 1e-9 && got <= sim * 1.0 + STEP_FMHA_TAIL *
                          cost_fmha_cta_us(&HW, &c, 128, 512, d) + 1e-9, "n %d: %g vs %g", n, got, sim);
        }
    }
    step_model_free(&sm);
}
END_TEST

START_TEST(test_fmha_closed_form_error)
{
    /* Against the simulation averaged over random launch orders (what the calibration fits), on
     * four length shapes, bert-large and bert-base: the error bounds docs/cost-model.md states. */
    const model_cfg *ms[] = {&M, &BASE};
    static const int sizes[] = {16, 32, 56, 96, 256};
    static const double max_bias[] = {0.03, 0.02, 0.012, 0.01, 0.006};
    static const double max_mean[] = {0.04, 0.03, 0.02, 0.013, 0.006};
    int len[256];
    for (int k = 0; k < 5; k++) {
        double bias = 0, mabs = 0;
        int cnt = 0;
        for (int mi = 0; mi < 2; mi++) {
            step_model sm;
            ck_assert_int_eq(step_model_init(&sm, ms[mi], &HW, &FITTED, 1, NULL), UNPAD_OK);
            for (int mode = 0; mode < 4; mode++)
                for (int rep = 0; rep < 6; rep++) {
                    int n = sizes[k];
                    for (int i = 0; i < n; i++)
                        len[i] = next_len(mode);
                    step_batch b;
                    ck_assert_int_eq(step_batch_of(&sm, len, n, &b, NULL), UNPAD_OK);
                    for (int d = 0; d < 2; d++) {
                        /* the tiles' closed form (the passes are exact in both) */
                        double sim = fit_fmha_us(&HW, &FITTED, ms[mi]->heads, len, n, d);
                        double pass = cost_fmha_passes_us(&HW, &FITTED, ms[mi]->heads, cost_fmha_tokens(len, n), d);
                        double r = (step_fmha_us(&sm, &b, d) - pass - sim) / sim;
                        bias += r;
                        mabs += fabs(r);
                        cnt++;
                    }
                }
            step_model_free(&sm);
        }
        bias /= cnt;
        mabs /= cnt;
        ck_assert_msg(fabs(bias) <= max_bias[k] && mabs <= max_mean[k],
                      "%d sequences: bias %+.4f, mean |error| %.4f", sizes[k], bias, mabs);
    }
}
END_TEST

START_TEST(test_host_wait)
{
    /* step_host_wait_us against a walk over every forward kernel in order (each op's instance
     * time from step_op_us, its launches enqueued host_launch_us apart): equal; 0 without a host
     * time; a small batch waits more than a large one; the wait grows with the host time. */
    static const op_id layer[] = {OP_QKV_FWD, OP_FMHA_FWD, OP_ATTN_OUT_FWD, OP_ATTN_LN_FWD,
                                  OP_FFN1_FWD, OP_FFN2_FWD, OP_FFN_LN_FWD};
    const model_cfg *ms[] = {&M, &BASE};
    int len[128];
    for (int t = 0; t < 8; t++) {
        calib_coef c = FITTED;
        c.host_launch_us = 4.0 + 3 * t;
        const model_cfg *m = ms[t % 2];
        int n = t < 4 ? 4 + t : 64 + 8 * t;
        for (int i = 0; i < n; i++)
            len[i] = next_len(t % 4);
        step_model sm;
        ck_assert_int_eq(step_model_init(&sm, m, &HW, &c, 1, NULL), UNPAD_OK);
        step_batch b;
        ck_assert_int_eq(step_batch_of(&sm, len, n, &b, NULL), UNPAD_OK);
        double host = 0, gpu = 0, wait = 0;
        for (int k = -1; k < 7 * m->layers; k++) {
            op_id op = k < 0 ? OP_EMBED_FWD : layer[k % 7];
            host += c.host_launch_us * sm.launches[op];
            if (host > gpu) {
                wait += host - gpu;
                gpu = host;
            }
            gpu += step_op_us(&sm, op, &b);
        }
        ck_assert_double_eq_tol(step_host_wait_us(&sm, &b), wait, 1e-9 * (1 + wait));
        /* the grid form: each host time's wait as the model with that host time gives it */
        double hs[3] = {0, c.host_launch_us, 2 * c.host_launch_us}, ws[3];
        step_host_waits_us(&sm, &b, hs, 3, ws);
        ck_assert_double_eq(ws[0], 0);
        ck_assert_double_eq(ws[1], step_host_wait_us(&sm, &b));
        sm.host_launch_us = hs[2];
        ck_assert_double_eq(ws[2], step_host_wait_us(&sm, &b));
        ck_assert_double_ge(wait, c.host_launch_us * sm.launches[OP_EMBED_FWD] - 1e-9);
        step_model_free(&sm);
        c.host_launch_us = 0;
        ck_assert_int_eq(step_model_init(&sm, m, &HW, &c, 1, NULL), UNPAD_OK);
        ck_assert_double_eq(step_host_wait_us(&sm, &b), 0);
        step_model_free(&sm);
    }
    /* four short sequences against 128 long ones, and a slower host */
    calib_coef c = FITTED;
    c.host_launch_us = 20;
    step_model sm;
    ck_assert_int_eq(step_model_init(&sm, &BASE, &HW, &c, 1, NULL), UNPAD_OK);
    int small[4] = {20, 30, 40, 50}, big[128];
    for (int i = 0; i < 128; i++)
        big[i] = 512;
    step_batch bs, bb;
    ck_assert_int_eq(step_batch_of(&sm, small, 4, &bs, NULL), UNPAD_OK);
    ck_assert_int_eq(step_batch_of(&sm, big, 128, &bb, NULL), UNPAD_OK);
    double ws = step_host_wait_us(&sm, &bs), wb = step_host_wait_us(&sm, &bb);
    ck_assert_msg(ws > 10 * wb, "small batch %g us, large %g us", ws, wb);
    step_model_free(&sm);
    c.host_launch_us = 40;
    ck_assert_int_eq(step_model_init(&sm, &BASE, &HW, &c, 1, NULL), UNPAD_OK);
    ck_assert_double_gt(step_host_wait_us(&sm, &bs), ws);
    step_model_free(&sm);
}
END_TEST

Suite *step_suite(void)
{
    Suite *s = suite_create("step");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_operators_match_cost_model);
    tcase_add_test(tc, test_batch_sums);
    tcase_add_test(tc, test_last_heads_saves_the_last_layer);
    tcase_add_test(tc, test_fmha_exact_cases);
    tcase_add_test(tc, test_fmha_closed_form_error);
    tcase_add_test(tc, test_host_wait);
    suite_add_tcase(s, tc);
    return s;
}
