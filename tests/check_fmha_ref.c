/* check_fmha_ref.c — the FMHA reference (kernels/ref/fmha_ref.c) against independent naive
 * computations on tiny inputs: closed forms, a direct softmax without the max shift, and central
 * finite differences of L = sum(dout .* out) for the gradients (with and without dropout). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dropout.h"
#include "ref/fmha_ref.h"

enum { HD = 64 }; /* head size */

static float urand(unsigned *state, float lo, float hi)
{
    *state = *state * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)(*state >> 8) / 16777216.0f;
}

/* Naive forward in double on double inputs: out (T, NH, 64), lse (NH, T); written from the
 * definition, exp without the max shift (inputs are small), the mask index spelled out. */
static void naive_fwd(double *out, double *lse, const double *qkv, const int32_t *cu, int n, int T,
                      int NH, float p, uint64_t seed, uint64_t sid)
{
    const int ld = 3 * NH * HD;
    for (int s = 0; s < n; s++)
        for (int h = 0; h < NH; h++)
            for (int i = cu[s]; i < cu[s + 1]; i++) {
                double e[16], sum = 0;
                for (int j = cu[s]; j < cu[s + 1]; j++) {
                    double dot = 0;
                    for (int d = 0; d < HD; d++)
                        dot += qkv[i * ld + h * HD + d] * qkv[j * ld + (NH + h) * HD + d];
                    e[j - cu[s]] = exp(dot / 8.0);
                    sum += e[j - cu[s]];
                }
                lse[h * T + i] = log(sum);
                for (int d = 0; d < HD; d++) {
                    double o = 0;
                    for (int j = cu[s]; j < cu[s + 1]; j++) {
                        /* dropout.h: one hash of the row key per quad of keys 16 a + 2 c +
                         * {0, 1, 8, 9}, 15 of 16 bits each */
                        const uint64_t rk = dropout_hash(seed, sid, (uint64_t)i * NH + h);
                        const int jj = j - cu[s];
                        const fmha_quad_bits b = fmha_mask_quad(rk, (uint32_t)(jj / 16 * 4 + jj / 2 % 4));
                        const uint32_t w = jj % 16 < 8 ? b.lo : b.hi;
                        const uint32_t r15 = (jj % 2 ? w >> 16 : w) & 0x7fffu;
                        double m = p > 0 ? (r15 >= (uint32_t)(p * 32768.0f) ? 1.0 / (1.0 - p) : 0.0) : 1.0;
                        o += e[j - cu[s]] / sum * m * qkv[j * ld + (2 * NH + h) * HD + d];
                    }
                    out[(i * NH + h) * HD + d] = o;
                }
            }
}

START_TEST(test_single_token_closed_form)
{
    /* One token: softmax of one score is 1, so out = v and lse = q.k / 8. */
    const int NH = 2, T = 1;
    int32_t cu[2] = {0, 1};
    float qkv[3 * 2 * HD], out[2 * HD], lse[2];
    unsigned st = 7;
    for (int i = 0; i < 3 * NH * HD; i++)
        qkv[i] = urand(&st, -1, 1);
    fmha_fwd_ref(out, lse, qkv, cu, T, NH, 0, 1, 1, 0.0f, 0, 0);
    for (int h = 0; h < NH; h++) {
        double dot = 0;
        for (int d = 0; d < HD; d++) {
            ck_assert_float_eq_tol(out[h * HD + d], qkv[(2 * NH + h) * HD + d], 1e-7);
            dot += (double)qkv[h * HD + d] * qkv[(NH + h) * HD + d];
        }
        ck_assert_double_eq_tol(lse[h], dot / 8.0, 1e-6);
    }
}
END_TEST

START_TEST(test_equal_keys_average_values)
{
    /* All keys equal: uniform attention, out = mean of v, lse = q.k/8 + log(len). */
    const int NH = 1, len = 5;
    int32_t cu[2] = {0, len};
    float qkv[5 * 3 * HD], out[5 * HD], lse[5];
    unsigned st = 11;
    for (int t = 0; t < len; t++)
        for (int d = 0; d < HD; d++) {
            qkv[t * 3 * HD + d] = urand(&st, -1, 1);
            qkv[t * 3 * HD + HD + d] = (float)(d % 7) * 0.125f - 0.25f;
            qkv[t * 3 * HD + 2 * HD + d] = urand(&st, -1, 1);
        }
    fmha_fwd_ref(out, lse, qkv, cu, len, NH, 0, 1, len, 0.0f, 0, 0);
    for (int i = 0; i < len; i++) {
        double dot = 0;
        for (int d = 0; d < HD; d++) {
            double mean = 0;
            for (int j = 0; j < len; j++)
                mean += qkv[j * 3 * HD + 2 * HD + d] / len;
            ck_assert_double_eq_tol(out[i * HD + d], mean, 1e-6);
            dot += (double)qkv[i * 3 * HD + d] * qkv[i * 3 * HD + HD + d];
        }
        ck_assert_double_eq_tol(lse[i], dot / 8.0 + log((double)len), 1e-5);
    }
}
END_TEST

/* A tiny ragged batch: lengths 2, 1, 4 (T = 7), NH = 2, inputs in [-1.5, 1.5]. */
enum { TN = 3, TT = 7, TNH = 2, TQKV = TT * 3 * TNH * HD, TO = TT * TNH * HD };
static const int32_t tiny_cu[TN + 1] = {0, 2, 3, 7};

static void tiny_inputs(float *qkv, float *dout, unsigned seed)
{
    unsigned st = seed;
    for (int i = 0; i < TQKV; i++)
        qkv[i] = urand(&st, -1.5f, 1.5f);
    for (int i = 0; i < TO; i++)
        dout[i] = urand(&st, -1, 1);
}

static void check_fwd_against_naive(float p)
{
    static float qkv[TQKV], dout[TO], out[TO], lse[TNH * TT];
    static double qd[TQKV], on[TO], ln[TNH * TT];
    tiny_inputs(qkv, dout, 3);
    for (int i = 0; i < TQKV; i++)
        qd[i] = qkv[i];
    fmha_fwd_ref(out, lse, qkv, tiny_cu, TT, TNH, 0, TN, 4, p, 42, 5);
    naive_fwd(on, ln, qd, tiny_cu, TN, TT, TNH, p, 42, 5);
    for (int i = 0; i < TO; i++)
        ck_assert_double_eq_tol(out[i], on[i], 1e-5 + 1e-5 * fabs(on[i]));
    for (int i = 0; i < TNH * TT; i++)
        ck_assert_double_eq_tol(lse[i], ln[i], 1e-5);
}

START_TEST(test_fwd_matches_naive)
{
    check_fwd_against_naive(0.0f);
}
END_TEST

START_TEST(test_fwd_dropout_matches_naive)
{
    check_fwd_against_naive(0.3f);
    /* The mask really drops something at p = 0.3: the outputs differ from p = 0. */
    static float qkv[TQKV], dout[TO], o0[TO], o1[TO], lse[TNH * TT];
    tiny_inputs(qkv, dout, 3);
    fmha_fwd_ref(o0, lse, qkv, tiny_cu, TT, TNH, 0, TN, 4, 0.0f, 42, 5);
    fmha_fwd_ref(o1, lse, qkv, tiny_cu, TT, TNH, 0, TN, 4, 0.3f, 42, 5);
    int differ = 0;
    for (int i = 0; i < TO; i++)
        differ += fabsf(o0[i] - o1[i]) > 1e-3f;
    ck_assert_int_gt(differ, TO / 4);
}
END_TEST

/* Gradients against central differences of L = sum(dout .* naive_fwd(qkv)). */
static void check_bwd_against_fd(float p)
{
    static float qkv[TQKV], dout[TO], out[TO], lse[TNH * TT], dqkv[TQKV];
    static double qd[TQKV], on[TO], ln[TNH * TT];
    tiny_inputs(qkv, dout, 9);
    fmha_fwd_ref(out, lse, qkv, tiny_cu, TT, TNH, 0, TN, 4, p, 77, 1);
    fmha_bwd_ref(dqkv, dout, out, lse, qkv, tiny_cu, TT, TNH, 0, TN, 4, p, 77, 1);
    for (int i = 0; i < TQKV; i++)
        qd[i] = qkv[i];
    const double eps = 1e-4;
    for (int x = 0; x < TQKV; x++) {
        double L[2];
        for (int side = 0; side < 2; side++) {
            qd[x] = qkv[x] + (side ? -eps : eps);
            naive_fwd(on, ln, qd, tiny_cu, TN, TT, TNH, p, 77, 1);
            L[side] = 0;
            for (int i = 0; i < TO; i++)
                L[side] += dout[i] * on[i];
        }
        qd[x] = qkv[x];
        const double g = (L[0] - L[1]) / (2 * eps);
        ck_assert_msg(fabs(dqkv[x] - g) <= 2e-5 + 1e-4 * fabs(g),
                      "dqkv[%d] = %.8g, finite difference %.8g (p = %g)", x, dqkv[x], g, p);
    }
}

START_TEST(test_bwd_matches_finite_differences)
{
    check_bwd_against_fd(0.0f);
}
END_TEST

START_TEST(test_bwd_dropout_matches_finite_differences)
{
    check_bwd_against_fd(0.25f);
}
END_TEST

START_TEST(test_group_writes_only_its_tokens)
{
    /* Group [1, 3) of the tiny batch: tokens 2..6 written, tokens 0..1 left alone; the values
     * equal the whole-batch run's (the mask does not depend on the grouping). */
    static float qkv[TQKV], dout[TO], out[TO], lse[TNH * TT], dq[TQKV];
    static float ref_out[TO], ref_lse[TNH * TT], ref_dq[TQKV];
    tiny_inputs(qkv, dout, 5);
    fmha_fwd_ref(ref_out, ref_lse, qkv, tiny_cu, TT, TNH, 0, TN, 4, 0.2f, 3, 2);
    fmha_bwd_ref(ref_dq, dout, ref_out, ref_lse, qkv, tiny_cu, TT, TNH, 0, TN, 4, 0.2f, 3, 2);
    for (int i = 0; i < TO; i++)
        out[i] = 1234.0f;
    for (int i = 0; i < TNH * TT; i++)
        lse[i] = 1234.0f;
    for (int i = 0; i < TQKV; i++)
        dq[i] = 1234.0f;
    fmha_fwd_ref(out, lse, qkv, tiny_cu, TT, TNH, 1, 3, 4, 0.2f, 3, 2);
    fmha_bwd_ref(dq, dout, ref_out, ref_lse, qkv, tiny_cu, TT, TNH, 1, 3, 4, 0.2f, 3, 2);
    for (int t = 0; t < TT; t++) {
        const int in_group = t >= 2;
        for (int e = 0; e < TNH * HD; e++)
            ck_assert_float_eq(out[t * TNH * HD + e], in_group ? ref_out[t * TNH * HD + e] : 1234.0f);
        for (int e = 0; e < 3 * TNH * HD; e++)
            ck_assert_float_eq(dq[t * 3 * TNH * HD + e], in_group ? ref_dq[t * 3 * TNH * HD + e] : 1234.0f);
        for (int h = 0; h < TNH; h++)
            ck_assert_float_eq(lse[h * TT + t], in_group ? ref_lse[h * TT + t] : 1234.0f);
    }
}
END_TEST

Suite *fmha_ref_suite(void)
{
    Suite *s = suite_create("fmha_ref");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_single_token_closed_form);
    tcase_add_test(tc, test_equal_keys_average_values);
    tcase_add_test(tc, test_fwd_matches_naive);
    tcase_add_test(tc, test_fwd_dropout_matches_naive);
    tcase_add_test(tc, test_bwd_matches_finite_differences);
    tcase_add_test(tc, test_bwd_dropout_matches_finite_differences);
    tcase_add_test(tc, test_group_writes_only_its_tokens);
    suite_add_tcase(s, tc);
    return s;
}
