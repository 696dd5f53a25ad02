/* check_kernels_ref.c — the kernel references checked on their own: known values, invariants
 * (LayerNorm statistics, gradient sums), finite differences and one LAMB step by hand. The CUDA
 * kernels are then checked against these references by tests/gpu/test_kernels.cu. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dropout.h"
#include "ref/gemm_ref.h"
#include "ref/ref.h"

/* Deterministic uniform numbers in [-1, 1). */
static uint64_t rng_state = 12345;
static float urand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) / 16777216.0 * 2.0 - 1.0);
}
static float *rand_array(size_t n, float scale)
{
    float *a = malloc(n * sizeof *a);
    for (size_t i = 0; i < n; i++)
        a[i] = urand() * scale;
    return a;
}
static double dot(const float *a, const float *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

START_TEST(test_layernorm_rows_have_mean0_var1)
{
    enum { T = 5, H = 64 };
    float *x = rand_array(T * H, 3.0f), out[T * H], mean[T], rstd[T], g[H], b[H];
    for (int c = 0; c < H; c++)
        g[c] = 1.0f, b[c] = 0.0f;
    for (int c = 0; c < H; c++)
        x[c] += 10.0f; /* an offset row */
    layernorm_fwd_ref(out, mean, rstd, x, g, b, T, H, 1e-12f);
    for (int t = 0; t < T; t++) {
        double s = 0, s2 = 0;
        for (int c = 0; c < H; c++)
            s += out[t * H + c];
        for (int c = 0; c < H; c++)
            s2 += (out[t * H + c] - s / H) * (out[t * H + c] - s / H);
        ck_assert_double_eq_tol(s / H, 0.0, 1e-6);
        ck_assert_double_eq_tol(s2 / H, 1.0, 1e-5);
    }
    ck_assert_double_lt(fabs(mean[0] - 10.0), 0.5);
    free(x);
}
END_TEST

/* Loss L = sum(out * w) of the fused forward; its gradients by central differences. */
static double fused_loss(const float *x, const float *bias, const float *res, const float *g,
                         const float *b, const float *w, int T, int H, float p)
{
    float *out = malloc((size_t)T * H * sizeof *out), *r = malloc((size_t)T * H * sizeof *r);
    float mean[16], rstd[16];
    bias_dropout_residual_layernorm_fwd_ref(out, r, mean, rstd, x, bias, res, g, b, T, H, 1e-5f, p,
                                            7, 3);
    double l = dot(out, w, (size_t)T * H);
    free(out);
    free(r);
    return l;
}

START_TEST(test_fused_layernorm_bwd_matches_finite_differences)
{
    enum { T = 3, H = 16 };
    const float p = 0.25f;
    float *x = rand_array(T * H, 1), *bias = rand_array(H, 1), *res = rand_array(T * H, 1);
    float *g = rand_array(H, 1), *b = rand_array(H, 1), *w = rand_array(T * H, 1);
    float out[T * H], r[T * H], mean[T], rstd[T];
    bias_dropout_residual_layernorm_fwd_ref(out, r, mean, rstd, x, bias, res, g, b, T, H, 1e-5f, p,
                                            7, 3);
    /* dout split into two halves that must add up */
    float d1[T * H], d2[T * H], dx[T * H], dres[T * H], dbias[H] = {0}, dg[H] = {0}, db[H] = {0};
    for (int i = 0; i < T * H; i++)
        d1[i] = 0.25f * w[i], d2[i] = 0.75f * w[i];
    bias_dropout_residual_layernorm_bwd_ref(dx, dres, dbias, dg, db, d1, d2, r, mean, rstd, g, T, H,
                                            p, 7, 3);
    const float h = 1e-2f;
    int dropped = 0;
    for (int i = 0; i < T * H; i++) {
        float keep = x[i];
        x[i] = keep + h;
        double lp = fused_loss(x, bias, res, g, b, w, T, H, p);
        x[i] = keep - h;
        double lm = fused_loss(x, bias, res, g, b, w, T, H, p);
        x[i] = keep;
        ck_assert_double_eq_tol(dx[i], (lp - lm) / (2 * h), 2e-3);
        dropped += dx[i] == 0.0f;
        keep = res[i];
        res[i] = keep + h;
        lp = fused_loss(x, bias, res, g, b, w, T, H, p);
        res[i] = keep - h;
        lm = fused_loss(x, bias, res, g, b, w, T, H, p);
        res[i] = keep;
        ck_assert_double_eq_tol(dres[i], (lp - lm) / (2 * h), 2e-3);
    }
    ck_assert_int_gt(dropped, 0); /* p = 0.25 over 48 elements drops some */
    for (int c = 0; c < H; c++) {
        float *params[3] = {bias, g, b}, *grads[3] = {dbias, dg, db};
        for (int k = 0; k < 3; k++) {
            float keep = params[k][c];
            params[k][c] = keep + h;
            double lp = fused_loss(x, bias, res, g, b, w, T, H, p);
            params[k][c] = keep - h;
            double lm = fused_loss(x, bias, res, g, b, w, T, H, p);
            params[k][c] = keep;
            ck_assert_double_eq_tol(grads[k][c], (lp - lm) / (2 * h), 3e-3);
        }
    }
    free(x), free(bias), free(res), free(g), free(b), free(w);
}
END_TEST

START_TEST(test_plain_layernorm_bwd_matches_fused_without_dropout)
{
    enum { T = 4, H = 32 };
    float *x = rand_array(T * H, 2), *g = rand_array(H, 1), *b = rand_array(H, 1);
    float *dout = rand_array(T * H, 1), zero[T * H] = {0};
    float out[T * H], r[T * H], mean[T], rstd[T], dx[T * H], dx2[T * H];
    float dg[H] = {0}, db[H] = {0}, dg2[H] = {0}, db2[H] = {0};
    layernorm_fwd_ref(out, mean, rstd, x, g, b, T, H, 1e-5f);
    layernorm_bwd_ref(dx, dg, db, dout, x, mean, rstd, g, T, H);
    bias_dropout_residual_layernorm_fwd_ref(out, r, mean, rstd, x, NULL, zero, g, b, T, H, 1e-5f,
                                            0.0f, 1, 1);
    bias_dropout_residual_layernorm_bwd_ref(NULL, dx2, NULL, dg2, db2, dout, NULL, r, mean, rstd, g,
                                            T, H, 0.0f, 1, 1);
    for (int i = 0; i < T * H; i++)
        ck_assert_double_eq_tol(dx[i], dx2[i], 1e-6);
    for (int c = 0; c < H; c++) {
        ck_assert_double_eq_tol(dg[c], dg2[c], 1e-6);
        ck_assert_double_eq_tol(db[c], db2[c], 1e-6);
    }
    free(x), free(g), free(b), free(dout);
}
END_TEST

START_TEST(test_gelu_known_points)
{
    ck_assert_double_eq_tol(gelu_erf_ref(0.0), 0.0, 1e-15);
    ck_assert_double_eq_tol(gelu_erf_ref(1.0), 0.8413447460685429, 1e-12);
    ck_assert_double_eq_tol(gelu_erf_ref(-1.0), -0.15865525393145707, 1e-12);
    ck_assert_double_eq_tol(gelu_erf_ref(2.0), 1.9544997361036416, 1e-12);
    ck_assert_double_eq_tol(gelu_erf_grad_ref(0.0), 0.5, 1e-15);
    for (double z = -4; z <= 4; z += 0.37) {
        double fd = (gelu_erf_ref(z + 1e-5) - gelu_erf_ref(z - 1e-5)) / 2e-5;
        ck_assert_double_eq_tol(gelu_erf_grad_ref(z), fd, 1e-8);
    }
    /* bias is added per column before the activation; bwd sums the bias gradient over rows */
    float x[6] = {0, 1, -1, 0.5f, 0, 2}, bias[3] = {1, -1, 0}, out[6], dout[6] = {1, 1, 1, 2, 2, 2};
    float dx[6], dbias[3] = {10, 10, 10};
    bias_gelu_fwd_ref(out, x, bias, 2, 3);
    ck_assert_double_eq_tol(out[0], 0.8413447460685429, 1e-6);
    ck_assert_double_eq_tol(out[1], 0.0, 1e-7);
    ck_assert_double_eq_tol(out[5], 1.9544997361036416, 1e-6);
    bias_gelu_bwd_ref(dx, dbias, dout, x, bias, 2, 3);
    ck_assert_double_eq_tol(dx[1], 0.5, 1e-7);
    ck_assert_double_eq_tol(dbias[1], 10 + dx[1] + dx[4], 1e-6);
    ck_assert_double_eq_tol(dbias[2], 10 + gelu_erf_grad_ref(-1) + 2 * gelu_erf_grad_ref(2), 1e-6);
}
END_TEST

START_TEST(test_tanh_and_bias_bwd)
{
    float x[4] = {0.3f, -0.2f, 1.0f, 0.0f}, bias[2] = {0.1f, 0.2f}, out[4], dx[4], dout[4] = {1, 2, 3, 4};
    float dbias[2] = {0}, db2[2] = {1, 1};
    bias_tanh_fwd_ref(out, x, bias, 2, 2);
    ck_assert_double_eq_tol(out[0], tanh(0.4), 1e-7);
    bias_tanh_bwd_ref(dx, dbias, dout, out, 2, 2);
    ck_assert_double_eq_tol(dx[2], 3 * (1 - tanh(1.1) * tanh(1.1)), 1e-6);
    ck_assert_double_eq_tol(dbias[0], dx[0] + dx[2], 1e-6);
    bias_bwd_ref(db2, dout, 2, 2);
    ck_assert_double_eq_tol(db2[0], 1 + 1 + 3, 1e-7);
    ck_assert_double_eq_tol(db2[1], 1 + 2 + 4, 1e-7);
}
END_TEST

START_TEST(test_xent_loss_gradient_and_padding)
{
    enum { P = 3, V = 13, VP = 16 };
    float *z = rand_array(P * VP, 4), loss[P], lse[P], d[P * VP];
    int32_t labels[P] = {0, 12, -1};
    for (int i = 0; i < P; i++)
        for (int c = V; c < VP; c++)
            z[i * VP + c] = 1e4f; /* padded columns must be ignored */
    mlm_xent_fwd_ref(loss, lse, z, labels, P, V, VP);
    for (int i = 0; i < 2; i++) {
        double mx = -1e30, s = 0;
        for (int c = 0; c < V; c++)
            mx = fmax(mx, z[i * VP + c]);
        for (int c = 0; c < V; c++)
            s += exp(z[i * VP + c] - mx);
        ck_assert_double_eq_tol(loss[i], mx + log(s) - z[i * VP + labels[i]], 1e-5);
        ck_assert_double_gt(loss[i], 0.0);
    }
    ck_assert_double_eq(loss[2], 0.0);
    const float scale = 0.25f;
    mlm_xent_bwd_ref(d, z, lse, labels, scale, P, V, VP);
    for (int i = 0; i < P; i++) {
        double s = 0;
        for (int c = 0; c < VP; c++)
            s += d[i * VP + c];
        ck_assert_double_eq_tol(s, 0.0, 1e-6);
        for (int c = V; c < VP; c++)
            ck_assert_double_eq(d[i * VP + c], 0.0);
    }
    for (int c = 0; c < VP; c++)
        ck_assert_double_eq(d[2 * VP + c], 0.0);
    /* finite differences of scale * loss */
    for (int i = 0; i < 2; i++)
        for (int c = 0; c < V; c++) {
            float keep = z[i * VP + c], lp, lm, l2;
            z[i * VP + c] = keep + 1e-2f;
            mlm_xent_fwd_ref(&lp, &l2, z + i * VP, labels + i, 1, V, VP);
            z[i * VP + c] = keep - 1e-2f;
            mlm_xent_fwd_ref(&lm, &l2, z + i * VP, labels + i, 1, V, VP);
            z[i * VP + c] = keep;
            ck_assert_double_eq_tol(d[i * VP + c], scale * (lp - lm) / 2e-2, 1e-4);
        }
    free(z);
}
END_TEST

START_TEST(test_nsp_loss_known_values)
{
    float z[4] = {0, 0, 2, -1}, loss[2], d[4];
    int32_t labels[2] = {1, 0};
    nsp_xent_fwd_bwd_ref(loss, d, z, labels, 0.5f, 2);
    ck_assert_double_eq_tol(loss[0], log(2.0), 1e-6);
    ck_assert_double_eq_tol(loss[1], log(1 + exp(-3.0)), 1e-6);
    ck_assert_double_eq_tol(d[0], 0.25, 1e-7);
    ck_assert_double_eq_tol(d[1], -0.25, 1e-7);
    ck_assert_double_eq_tol(d[2] + d[3], 0.0, 1e-7);
    ck_assert_double_eq_tol(d[3], 0.5 / (1 + exp(3.0)), 1e-7);
    float s;
    reduce_sum_f32_ref(&s, z, 4);
    ck_assert_double_eq(s, 1.0);
}
END_TEST

START_TEST(test_gather_scatter_rows)
{
    float in[8] = {0, 1, 2, 3, 4, 5, 6, 7}, out[4], dst[8] = {0};
    int32_t rows[2] = {3, 1};
    rows_gather_ref(out, in, rows, 2, 2);
    ck_assert_double_eq(out[0], 6);
    ck_assert_double_eq(out[3], 3);
    rows_scatter_add_ref(dst, out, rows, 2, 2);
    rows_scatter_add_ref(dst, out, rows, 2, 2);
    ck_assert_double_eq(dst[6], 12);
    ck_assert_double_eq(dst[3], 6);
    ck_assert_double_eq(dst[0], 0);
}
END_TEST

START_TEST(test_lamb_one_step_by_hand)
{
    /* One tensor of 2 elements with weight decay, one without; step 1. */
    lamb_tensor t[2] = {{0, 2, 1, 0}, {2, 1, 0, 0}};
    float w[3] = {3.0f, 4.0f, 2.0f}, m[3] = {0}, v[3] = {0}, g[3] = {0.6f, 0.0f, 0.8f}, norm;
    lamb_hparams hp = {.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f,
                       .weight_decay = 0.01f, .max_grad_norm = 0.5f, .step = 1};
    lamb_update_ref(w, m, v, g, t, 2, hp, &norm, NULL, 0);
    ck_assert_double_eq_tol(norm, 1.0, 1e-7); /* sqrt(0.36 + 0.64) */
    /* clip 0.5: g = (0.3, 0, 0.4); m = 0.1 g; v = 0.001 g^2; corrected m/sqrt(v) = sign(g) */
    ck_assert_double_eq_tol(m[0], 0.03, 1e-7);
    ck_assert_double_eq_tol(v[2], 0.001 * 0.16, 1e-8);
    /* tensor 0: u = (0.3/(0.3+1e-6) + 0.03, 0 + 0.04); ratio = 5 / |u| */
    double u0 = 0.3 / (0.3 + 1e-6) + 0.03, u1 = 0.04, un = sqrt(u0 * u0 + u1 * u1);
    ck_assert_double_eq_tol(w[0], 3.0 - 0.1 * (5.0 / un) * u0, 1e-6);
    ck_assert_double_eq_tol(w[1], 4.0 - 0.1 * (5.0 / un) * u1, 1e-6);
    /* tensor 1: no decay, u = 0.4/(0.4+1e-6), ratio = 2 / |u|: w moves by lr * |w| */
    ck_assert_double_eq_tol(w[2], 2.0 - 0.1 * 2.0, 1e-6);
    /* zero weights: ratio 1 */
    lamb_tensor z[1] = {{0, 1, 1, 0}};
    float wz = 0.0f, mz = 0, vz = 0, gz = 0.2f;
    lamb_update_ref(&wz, &mz, &vz, &gz, z, 1, hp, NULL, NULL, 0);
    ck_assert_double_eq_tol(wz, -0.1 * 0.2 / (0.2 + 1e-6), 1e-6);
    /* a non-finite loss (the guard) or gradient: nothing moves */
    float guard[2] = {1.0f, INFINITY}, w2[3] = {3.0f, 4.0f, 2.0f}, m2[3] = {0}, v2[3] = {0};
    lamb_update_ref(w2, m2, v2, g, t, 2, hp, &norm, guard, 2);
    ck_assert(w2[0] == 3.0f && w2[1] == 4.0f && w2[2] == 2.0f && m2[0] == 0 && v2[2] == 0);
    float gn[3] = {0.6f, NAN, 0.8f};
    lamb_update_ref(w2, m2, v2, gn, t, 2, hp, &norm, NULL, 0);
    ck_assert(w2[0] == 3.0f && m2[0] == 0 && isnan(norm));
}
END_TEST

START_TEST(test_embedding_bwd_sums)
{
    enum { n = 3, T = 2 + 5 + 1, H = 16, V = 6, TV = 2, MAXP = 8 };
    int32_t cu[n + 1] = {0, 2, 7, 8}, ids[T] = {1, 5, 1, 1, 0, 2, 3, 4}, types[T] = {0, 1, 0, 0, 1, 1, 1, 0};
    float *word = rand_array(V * H, 1), *pos = rand_array(MAXP * H, 1), *type = rand_array(TV * H, 1);
    float *g = rand_array(H, 1), *b = rand_array(H, 1), *dout = rand_array(T * H, 1);
    float out[T * H], mean[T], rstd[T];
    float dword[V * H] = {0}, dpos[MAXP * H] = {0}, dtype[TV * H] = {0}, dg[H] = {0}, db[H] = {0};
    embedding_fwd_ref(out, mean, rstd, ids, types, cu, n, word, pos, type, g, b, T, H, 1e-12f, 0.1f,
                      5, 0);
    embedding_bwd_ref(dword, dpos, dtype, dg, db, dout, NULL, ids, types, cu, n, MAXP, word, pos,
                      type, g, mean, rstd, T, H, TV, 0.1f, 5, 0);
    /* every token adds the same row to each table, so the three tables' column sums agree */
    for (int c = 0; c < H; c++) {
        double sw = 0, sp = 0, st = 0;
        for (int r = 0; r < V; r++)
            sw += dword[r * H + c];
        for (int r = 0; r < MAXP; r++)
            sp += dpos[r * H + c];
        for (int r = 0; r < TV; r++)
            st += dtype[r * H + c];
        ck_assert_double_eq_tol(sw, sp, 1e-5);
        ck_assert_double_eq_tol(sw, st, 1e-5);
    }
    /* unused rows stay zero: the longest sequence has 5 tokens, so positions 5..7 get nothing */
    for (int c = 0; c < H; c++) {
        ck_assert_double_eq(dpos[5 * H + c], 0.0);
        ck_assert_double_eq(dpos[7 * H + c], 0.0);
    }
    /* finite difference of L = sum(out * dout) in a word row used three times */
    for (int c = 0; c < H; c += 5) {
        float keep = word[1 * H + c], op[T * H], om[T * H];
        word[1 * H + c] = keep + 1e-2f;
        embedding_fwd_ref(op, mean, rstd, ids, types, cu, n, word, pos, type, g, b, T, H, 1e-12f,
                          0.1f, 5, 0);
        word[1 * H + c] = keep - 1e-2f;
        embedding_fwd_ref(om, mean, rstd, ids, types, cu, n, word, pos, type, g, b, T, H, 1e-12f,
                          0.1f, 5, 0);
        word[1 * H + c] = keep;
        double fd = (dot(op, dout, T * H) - dot(om, dout, T * H)) / 2e-2;
        ck_assert_double_eq_tol(dword[1 * H + c], fd, 2e-3);
    }
    free(word), free(pos), free(type), free(g), free(b), free(dout);
}
END_TEST

START_TEST(test_dropout_rate)
{
    const float p = 0.1f;
    long kept = 0, n = 1000000;
    for (long i = 0; i < n; i++)
        kept += dropout_keep(99, 4, (uint64_t)i, p);
    ck_assert_double_eq_tol((double)kept / n, 1.0 - p, 0.0015); /* 5 sigma */
    kept = 0;
    for (long i = 0; i < n; i++)
        kept += dropout_keep(99, 5, (uint64_t)i, 0.0f);
    ck_assert_int_eq(kept, n);
    /* neighbours drop independently: in one hash (1, 2, 3 apart), the next hash (4), one row of
     * 1024 on, and the same element of another mask; p^2 = 0.01 each, 5 sigma */
    const long lag[] = {1, 2, 3, 4, 5, 1024};
    for (size_t k = 0; k < sizeof lag / sizeof *lag + 1; k++) {
        long both = 0;
        for (long i = 0; i < n; i++) {
            int a = dropout_keep(99, 4, (uint64_t)i, p);
            int b = k < sizeof lag / sizeof *lag ? dropout_keep(99, 4, (uint64_t)(i + lag[k]), p)
                                                 : dropout_keep(99, 5, (uint64_t)i, p);
            both += !a && !b;
        }
        ck_assert_msg(fabs((double)both / n - p * p) < 5e-4, "case %zu: both dropped %.5f", k, (double)both / n);
    }
    /* dropout_apply8 is dropout_keep eight times */
    float v[8];
    for (int j = 0; j < 8; j++)
        v[j] = 1.0f + j;
    dropout_apply8(v, dropout_key(7, 3), dropout_threshold(0.5f), 2.0f, 4096);
    for (int j = 0; j < 8; j++)
        ck_assert_float_eq(v[j], dropout_keep(7, 3, 4096 + (uint64_t)j, 0.5f) ? 2.0f * (1.0f + j) : 0.0f);
}
END_TEST

/* ---- every element against a straightforward double-precision computation -------------------
 * The tests above check properties; these compare each reference's whole output, element by
 * element, with the formula written out here a second time (long double sums, no shared code but
 * the dropout mask's definition), on several ragged shapes. Outputs start as NaN, accumulated
 * gradients as random values, so an element left unwritten or not accumulated fails. */

typedef long double ld;

static float *nan_array(size_t n)
{
    float *a = malloc(n * sizeof *a);
    for (size_t i = 0; i < n; i++)
        a[i] = NAN;
    return a;
}

static float *copy_array(const float *src, size_t n)
{
    float *a = malloc(n * sizeof *a);
    memcpy(a, src, n * sizeof *a);
    return a;
}

/* |got - want| <= atol + rtol |want| for every one of the n elements. */
static void expect_all(const char *what, const float *got, const ld *want, size_t n, double atol,
                       double rtol)
{
    for (size_t i = 0; i < n; i++) {
        double g = got[i], w = (double)want[i];
        ck_assert_msg(isfinite(g) && fabs(g - w) <= atol + rtol * fabs(w),
                      "%s[%zu of %zu] = %.9g, expected %.9g", what, i, n, g, w);
    }
}

#define TOL 1e-6, 2e-5

static const int SHAPES[][2] = {{1, 64}, {3, 67}, {7, 5}, {2, 1}, {5, 128}};
#define NSHAPES (int)(sizeof SHAPES / sizeof SHAPES[0])

/* LayerNorm of row r (H) in long double: y, mean, 1/sqrt(var + eps). */
static void ln_oracle(ld *y, ld *mu, ld *rs, const ld *r, const float *g, const float *b, int H,
                      double eps)
{
    ld s = 0, s2 = 0;
    for (int c = 0; c < H; c++)
        s += r[c];
    *mu = s / H;
    for (int c = 0; c < H; c++)
        s2 += (r[c] - *mu) * (r[c] - *mu);
    *rs = 1.0L / sqrtl(s2 / H + eps);
    for (int c = 0; c < H; c++)
        y[c] = (r[c] - *mu) * *rs * g[c] + b[c];
}

/* LayerNorm backward of row x (H) with the given statistics: dx; adds to dg, db. */
static void ln_bwd_oracle(ld *dx, ld *dg, ld *db, const ld *dy, const float *x, float mean,
                          float rstd, const float *g, int H)
{
    ld a = 0, b = 0;
    for (int c = 0; c < H; c++) {
        ld xh = ((ld)x[c] - mean) * rstd;
        a += dy[c] * g[c];
        b += dy[c] * g[c] * xh;
        dg[c] += dy[c] * xh;
        db[c] += dy[c];
    }
    for (int c = 0; c < H; c++) {
        ld xh = ((ld)x[c] - mean) * rstd;
        dx[c] = rstd * (dy[c] * g[c] - a / H - xh * b / H);
    }
}

START_TEST(test_layernorm_every_element)
{
    for (int k = 0; k < NSHAPES; k++) {
        const int T = SHAPES[k][0], H = SHAPES[k][1];
        const size_t n = (size_t)T * H;
        const float eps = 1e-5f, p = 0.3f;
        float *x = rand_array(n, 2), *g = rand_array(H, 1), *b = rand_array(H, 1);
        float *bias = rand_array(H, 1), *res = rand_array(n, 1);
        float *dout = rand_array(n, 1), *dadd = rand_array(n, 1);
        float *out = nan_array(n), *mean = nan_array(T), *rstd = nan_array(T), *lnin = nan_array(n);
        float *dx = nan_array(n), *dres = nan_array(n);
        float *dg0 = rand_array(H, 1), *db0 = rand_array(H, 1), *dbi0 = rand_array(H, 1);
        float *dg = copy_array(dg0, H), *db = copy_array(db0, H), *dbi = copy_array(dbi0, H);
        ld *w = calloc(n, sizeof *w), *wm = calloc(T, sizeof *wm), *wr = calloc(T, sizeof *wr);
        ld *r = calloc(n, sizeof *r), *wdx = calloc(n, sizeof *wdx), *wdr = calloc(n, sizeof *wdr);
        ld *wdg = calloc(H, sizeof *wdg), *wdb = calloc(H, sizeof *wdb), *wdbi = calloc(H, sizeof *wdbi);
        ld *dy = calloc(H, sizeof *dy);

        /* plain LayerNorm forward and backward */
        layernorm_fwd_ref(out, mean, rstd, x, g, b, T, H, eps);
        for (int t = 0; t < T; t++) {
            for (int c = 0; c < H; c++)
                r[(size_t)t * H + c] = x[(size_t)t * H + c];
            ln_oracle(w + (size_t)t * H, wm + t, wr + t, r + (size_t)t * H, g, b, H, eps);
        }
        expect_all("layernorm out", out, w, n, TOL);
        expect_all("layernorm mean", mean, wm, T, TOL);
        expect_all("layernorm rstd", rstd, wr, T, 1e-6, 1e-4);
        layernorm_bwd_ref(dx, dg, db, dout, x, mean, rstd, g, T, H);
        for (int c = 0; c < H; c++)
            wdg[c] = dg0[c], wdb[c] = db0[c];
        for (int t = 0; t < T; t++) {
            for (int c = 0; c < H; c++)
                dy[c] = dout[(size_t)t * H + c];
            ln_bwd_oracle(wdx + (size_t)t * H, wdg, wdb, dy, x + (size_t)t * H, mean[t], rstd[t], g, H);
        }
        expect_all("layernorm dx", dx, wdx, n, 1e-5, 1e-4);
        expect_all("layernorm dgamma", dg, wdg, H, 1e-5, 1e-4);
        expect_all("layernorm dbeta", db, wdb, H, TOL);

        /* fused bias + dropout + residual + LayerNorm */
        for (size_t i = 0; i < n; i++)
            out[i] = NAN, dx[i] = NAN;
        bias_dropout_residual_layernorm_fwd_ref(out, lnin, mean, rstd, x, bias, res, g, b, T, H, eps,
                                                p, 11, 5);
        for (int t = 0; t < T; t++) {
            for (int c = 0; c < H; c++) {
                size_t i = (size_t)t * H + c;
                ld z = (ld)x[i] + bias[c];
                r[i] = (dropout_keep(11, 5, i, p) ? z / (1 - (ld)p) : 0) + res[i];
            }
            ln_oracle(w + (size_t)t * H, wm + t, wr + t, r + (size_t)t * H, g, b, H, eps);
        }
        expect_all("fused ln_in", lnin, r, n, TOL);
        expect_all("fused out", out, w, n, 1e-5, 1e-4);
        expect_all("fused mean", mean, wm, T, TOL);
        expect_all("fused rstd", rstd, wr, T, 1e-6, 1e-4);
        memcpy(dg, dg0, H * sizeof *dg);
        memcpy(db, db0, H * sizeof *db);
        bias_dropout_residual_layernorm_bwd_ref(dx, dres, dbi, dg, db, dout, dadd, lnin, mean, rstd,
                                                g, T, H, p, 11, 5);
        for (int c = 0; c < H; c++)
            wdg[c] = dg0[c], wdb[c] = db0[c], wdbi[c] = dbi0[c];
        for (int t = 0; t < T; t++) {
            for (int c = 0; c < H; c++)
                dy[c] = (ld)dout[(size_t)t * H + c] + dadd[(size_t)t * H + c];
            ln_bwd_oracle(wdr + (size_t)t * H, wdg, wdb, dy, lnin + (size_t)t * H, mean[t], rstd[t],
                          g, H);
            for (int c = 0; c < H; c++) {
                size_t i = (size_t)t * H + c;
                wdx[i] = dropout_keep(11, 5, i, p) ? wdr[i] / (1 - (ld)p) : 0;
                wdbi[c] += wdx[i];
            }
        }
        expect_all("fused dresidual", dres, wdr, n, 1e-5, 1e-4);
        expect_all("fused dx", dx, wdx, n, 1e-5, 1e-4);
        expect_all("fused dbias", dbi, wdbi, H, 1e-5, 1e-4);
        expect_all("fused dgamma", dg, wdg, H, 1e-5, 1e-4);
        expect_all("fused dbeta", db, wdb, H, 1e-5, 1e-4);
        free(x), free(g), free(b), free(bias), free(res), free(dout), free(dadd), free(out);
        free(mean), free(rstd), free(lnin), free(dx), free(dres), free(dg0), free(db0), free(dbi0);
        free(dg), free(db), free(dbi), free(w), free(wm), free(wr), free(r), free(wdx), free(wdr);
        free(wdg), free(wdb), free(wdbi), free(dy);
    }
}
END_TEST

/* GELU (erf form) and its derivative, written with erfc and the normal density. */
static ld gelu_oracle(ld z) { return 0.5L * z * erfcl(-z / sqrtl(2.0L)); }
static ld gelu_grad_oracle(ld z)
{
    const ld pi = 3.14159265358979323846264338327950288L;
    return 0.5L * erfcl(-z / sqrtl(2.0L)) + z * expl(-0.5L * z * z) / sqrtl(2.0L * pi);
}

START_TEST(test_activations_every_element)
{
    for (int k = 0; k < NSHAPES; k++) {
        const int T = SHAPES[k][0], N = SHAPES[k][1];
        const size_t n = (size_t)T * N;
        float *x = rand_array(n, 3), *bias = rand_array(N, 1), *dout = rand_array(n, 1);
        float *out = nan_array(n), *dx = nan_array(n), *db0 = rand_array(N, 1);
        float *db = copy_array(db0, N);
        ld *w = calloc(n, sizeof *w), *wd = calloc(N, sizeof *wd);
        bias_gelu_fwd_ref(out, x, bias, T, N);
        for (size_t i = 0; i < n; i++)
            w[i] = gelu_oracle((ld)x[i] + bias[i % N]);
        expect_all("gelu out", out, w, n, TOL);
        bias_gelu_bwd_ref(dx, db, dout, x, bias, T, N);
        for (int c = 0; c < N; c++)
            wd[c] = db0[c];
        for (size_t i = 0; i < n; i++) {
            w[i] = dout[i] * gelu_grad_oracle((ld)x[i] + bias[i % N]);
            wd[i % N] += w[i];
        }
        expect_all("gelu dx", dx, w, n, TOL);
        expect_all("gelu dbias", db, wd, N, 1e-5, 1e-5);

        for (size_t i = 0; i < n; i++)
            out[i] = NAN, dx[i] = NAN;
        memcpy(db, db0, N * sizeof *db);
        bias_tanh_fwd_ref(out, x, bias, T, N);
        for (size_t i = 0; i < n; i++)
            w[i] = tanhl((ld)x[i] + bias[i % N]);
        expect_all("tanh out", out, w, n, TOL);
        bias_tanh_bwd_ref(dx, db, dout, out, T, N);
        for (int c = 0; c < N; c++)
            wd[c] = db0[c];
        for (size_t i = 0; i < n; i++) {
            w[i] = dout[i] * (1 - (ld)out[i] * out[i]);
            wd[i % N] += w[i];
        }
        expect_all("tanh dx", dx, w, n, TOL);
        expect_all("tanh dbias", db, wd, N, 1e-5, 1e-5);

        memcpy(db, db0, N * sizeof *db);
        bias_bwd_ref(db, dout, T, N);
        for (int c = 0; c < N; c++)
            wd[c] = db0[c];
        for (size_t i = 0; i < n; i++)
            wd[i % N] += dout[i];
        expect_all("bias_bwd dbias", db, wd, N, 1e-5, 1e-5);
        free(x), free(bias), free(dout), free(out), free(dx), free(db0), free(db), free(w), free(wd);
    }
}
END_TEST

START_TEST(test_losses_every_element)
{
    static const int P_[] = {1, 4, 9}, V_[] = {13, 64, 100}, VP_[] = {16, 64, 128};
    for (int k = 0; k < 3; k++) {
        const int P = P_[k], V = V_[k], VP = VP_[k];
        const size_t n = (size_t)P * VP;
        float *z = rand_array(n, 4), *loss = nan_array(P), *lse = nan_array(P), *d = nan_array(n);
        int32_t *labels = malloc((size_t)P * sizeof *labels);
        for (int i = 0; i < P; i++)
            labels[i] = i == 1 ? -1 : (int32_t)((i * 7 + V - 1) % V); /* row 1 ignored */
        labels[P - 1] = V - 1;
        ld *wl = calloc(P, sizeof *wl), *wlse = calloc(P, sizeof *wlse), *wd = calloc(n, sizeof *wd);
        mlm_xent_fwd_ref(loss, lse, z, labels, P, V, VP);
        for (int i = 0; i < P; i++) {
            ld s = 0;
            for (int c = 0; c < V; c++)
                s += expl((ld)z[(size_t)i * VP + c]);
            wlse[i] = logl(s);
            wl[i] = labels[i] < 0 ? 0 : wlse[i] - z[(size_t)i * VP + labels[i]];
        }
        expect_all("mlm lse", lse, wlse, P, TOL);
        expect_all("mlm loss", loss, wl, P, 1e-5, 1e-5);
        const float scale = 0.375f;
        mlm_xent_bwd_ref(d, z, lse, labels, scale, P, V, VP);
        for (int i = 0; i < P; i++)
            for (int c = 0; c < VP; c++)
                wd[(size_t)i * VP + c] =
                    labels[i] < 0 || c >= V
                        ? 0
                        : scale * (expl((ld)z[(size_t)i * VP + c] - wlse[i]) - (c == labels[i]));
        expect_all("mlm dlogits", d, wd, n, TOL);

        /* next sentence: n rows of 2 logits */
        float *nl = nan_array(P), *nd = nan_array(2 * (size_t)P);
        int32_t *nlab = malloc((size_t)P * sizeof *nlab);
        for (int i = 0; i < P; i++)
            nlab[i] = (i + k) % 2;
        nsp_xent_fwd_bwd_ref(nl, nd, z, nlab, scale, P);
        for (int i = 0; i < P; i++) {
            ld l = logl(expl((ld)z[2 * i]) + expl((ld)z[2 * i + 1]));
            wl[i] = l - z[2 * i + nlab[i]];
            for (int c = 0; c < 2; c++)
                wd[2 * i + c] = scale * (expl((ld)z[2 * i + c] - l) - (c == nlab[i]));
        }
        expect_all("nsp loss", nl, wl, P, 1e-5, 1e-5);
        expect_all("nsp dlogits", nd, wd, 2 * (size_t)P, TOL);

        /* the fixed-order sum */
        float sum = NAN;
        reduce_sum_f32_ref(&sum, z, (int)n);
        ld ws = 0;
        for (size_t i = 0; i < n; i++)
            ws += z[i];
        expect_all("reduce_sum", &sum, &ws, 1, 1e-5, 1e-6);
        free(z), free(loss), free(lse), free(d), free(labels), free(wl), free(wlse), free(wd);
        free(nl), free(nd), free(nlab);
    }
}
END_TEST

START_TEST(test_rows_every_element)
{
    enum { R = 9, P = 6, H = 7 };
    float *in = rand_array(R * H, 1), *out = nan_array(P * H), *dst0 = rand_array(R * H, 1);
    float *dst = copy_array(dst0, R * H);
    int32_t rows[P] = {8, 0, 3, 3, 8, 1}; /* repeats add up; the last row is used */
    ld want[R * H];
    rows_gather_ref(out, in, rows, P, H);
    for (int i = 0; i < P; i++)
        for (int c = 0; c < H; c++)
            want[i * H + c] = in[rows[i] * H + c];
    expect_all("gather", out, want, P * H, 0, 0);
    rows_scatter_add_ref(dst, out, rows, P, H);
    for (int i = 0; i < R * H; i++)
        want[i] = dst0[i];
    for (int i = 0; i < P; i++)
        for (int c = 0; c < H; c++)
            want[rows[i] * H + c] += out[i * H + c];
    expect_all("scatter_add", dst, want, R * H, TOL);
    free(in), free(out), free(dst0), free(dst);
}
END_TEST

START_TEST(test_lamb_every_element)
{
    /* three tensors of ragged sizes, decay on the first and last; two steps */
    lamb_tensor t[3] = {{0, 37, 1, 0}, {37, 5, 0, 0}, {42, 64, 1, 0}};
    enum { N = 106 };
    float *w = rand_array(N, 1), *m = rand_array(N, 0.01f), *v = rand_array(N, 0.01f);
    float *g = rand_array(N, 0.5f);
    for (int i = 0; i < N; i++)
        v[i] = fabsf(v[i]);
    for (int step = 1; step <= 2; step++) {
        lamb_hparams hp = {.lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f,
                           .weight_decay = 0.01f, .max_grad_norm = step == 1 ? 1.0f : 100.0f,
                           .step = step};
        ld ww[N], wm[N], wv[N], u[N];
        ld g2 = 0;
        for (int i = 0; i < N; i++)
            g2 += (ld)g[i] * g[i];
        ld norm = sqrtl(g2), clip = norm > hp.max_grad_norm ? hp.max_grad_norm / norm : 1;
        for (int k = 0; k < 3; k++) {
            ld w2 = 0, u2 = 0;
            for (int64_t i = t[k].offset; i < t[k].offset + t[k].size; i++) {
                ld gi = g[i] * clip;
                wm[i] = hp.beta1 * (ld)m[i] + (1 - (ld)hp.beta1) * gi;
                wv[i] = hp.beta2 * (ld)v[i] + (1 - (ld)hp.beta2) * gi * gi;
                /* the reference divides the stored (float) moments */
                ld mf = (float)wm[i], vf = (float)wv[i];
                u[i] = (mf / (1 - powl(hp.beta1, step))) / (sqrtl(vf / (1 - powl(hp.beta2, step))) + hp.eps);
                if (t[k].weight_decay)
                    u[i] += hp.weight_decay * (ld)w[i];
                w2 += (ld)w[i] * w[i];
                u2 += u[i] * u[i];
            }
            ld ratio = w2 > 0 && u2 > 0 ? sqrtl(w2) / sqrtl(u2) : 1;
            for (int64_t i = t[k].offset; i < t[k].offset + t[k].size; i++)
                ww[i] = w[i] - hp.lr * ratio * u[i];
        }
        float gn = NAN;
        lamb_update_ref(w, m, v, g, t, 3, hp, &gn, NULL, 0);
        ck_assert_double_eq_tol(gn, (double)norm, 1e-6 * (double)norm);
        expect_all("lamb m", m, wm, N, 1e-9, 1e-6);
        expect_all("lamb v", v, wv, N, 1e-12, 1e-6);
        expect_all("lamb master", w, ww, N, 1e-6, 1e-6);
    }
    free(w), free(m), free(v), free(g);
}
END_TEST

START_TEST(test_embedding_every_element)
{
    enum { n = 4, T = 3 + 1 + 6 + 2, H = 67, V = 11, TV = 2, MAXP = 8 };
    const int32_t cu[n + 1] = {0, 3, 4, 10, 12};
    int32_t ids[T], types[T];
    for (int t = 0; t < T; t++)
        ids[t] = (t * 5 + 3) % V, types[t] = t % 3 == 0;
    ids[T - 1] = V - 1;
    const float p = 0.2f, eps = 1e-12f;
    float *word = rand_array(V * H, 1), *pos = rand_array(MAXP * H, 1), *type = rand_array(TV * H, 1);
    float *g = rand_array(H, 1), *b = rand_array(H, 1), *dout = rand_array(T * H, 1);
    float *dadd = rand_array(T * H, 1);
    float *out = nan_array(T * H), *mean = nan_array(T), *rstd = nan_array(T);
    float *dw0 = rand_array(V * H, 1), *dp0 = rand_array(MAXP * H, 1), *dt0 = rand_array(TV * H, 1);
    float *dg0 = rand_array(H, 1), *db0 = rand_array(H, 1);
    float *dw = copy_array(dw0, V * H), *dp = copy_array(dp0, MAXP * H), *dt = copy_array(dt0, TV * H);
    float *dg = copy_array(dg0, H), *db = copy_array(db0, H);
    static ld x[T][H], y[T * H], wmu[T], wrs[T], wdw[V * H], wdp[MAXP * H], wdt[TV * H], wdg[H],
        wdb[H], dy[H], dxr[H];
    int position[T];
    for (int s = 0; s < n; s++)
        for (int t = cu[s]; t < cu[s + 1]; t++)
            position[t] = t - cu[s];
    embedding_fwd_ref(out, mean, rstd, ids, types, cu, n, word, pos, type, g, b, T, H, eps, p, 9, 2);
    for (int t = 0; t < T; t++) {
        for (int c = 0; c < H; c++)
            x[t][c] = (ld)word[ids[t] * H + c] + pos[position[t] * H + c] + type[types[t] * H + c];
        ln_oracle(y + t * H, wmu + t, wrs + t, x[t], g, b, H, eps);
        for (int c = 0; c < H; c++)
            y[t * H + c] = dropout_keep(9, 2, (uint64_t)(t * H + c), p) ? y[t * H + c] / (1 - (ld)p) : 0;
    }
    expect_all("embedding out", out, y, T * H, 1e-5, 1e-5);
    expect_all("embedding mean", mean, wmu, T, TOL);
    expect_all("embedding rstd", rstd, wrs, T, 1e-6, 1e-4);
    embedding_bwd_ref(dw, dp, dt, dg, db, dout, dadd, ids, types, cu, n, MAXP, word, pos, type, g,
                      mean, rstd, T, H, TV, p, 9, 2);
    for (int i = 0; i < V * H; i++)
        wdw[i] = dw0[i];
    for (int i = 0; i < MAXP * H; i++)
        wdp[i] = dp0[i];
    for (int i = 0; i < TV * H; i++)
        wdt[i] = dt0[i];
    for (int c = 0; c < H; c++)
        wdg[c] = dg0[c], wdb[c] = db0[c];
    for (int t = 0; t < T; t++) {
        for (int c = 0; c < H; c++) {
            int i = t * H + c;
            dy[c] = dropout_keep(9, 2, (uint64_t)i, p) ? ((ld)dout[i] + dadd[i]) / (1 - (ld)p) : 0;
        }
        /* the backward recomputes x in double from the tables; the statistics are the stored ones */
        ld a = 0, bb = 0;
        for (int c = 0; c < H; c++) {
            ld xh = (x[t][c] - mean[t]) * rstd[t];
            a += dy[c] * g[c];
            bb += dy[c] * g[c] * xh;
            wdg[c] += dy[c] * xh;
            wdb[c] += dy[c];
        }
        for (int c = 0; c < H; c++) {
            ld xh = (x[t][c] - mean[t]) * rstd[t];
            dxr[c] = rstd[t] * (dy[c] * g[c] - a / H - xh * bb / H);
            wdw[ids[t] * H + c] += dxr[c];
            wdp[position[t] * H + c] += dxr[c];
            wdt[types[t] * H + c] += dxr[c];
        }
    }
    expect_all("embedding dword", dw, wdw, V * H, 1e-5, 1e-4);
    expect_all("embedding dpos", dp, wdp, MAXP * H, 1e-5, 1e-4);
    expect_all("embedding dtype", dt, wdt, TV * H, 1e-5, 1e-4);
    expect_all("embedding dgamma", dg, wdg, H, 1e-5, 1e-4);
    expect_all("embedding dbeta", db, wdb, H, 1e-5, 1e-4);
    free(word), free(pos), free(type), free(g), free(b), free(dout), free(dadd), free(out);
    free(mean), free(rstd), free(dw0), free(dp0), free(dt0), free(dg0), free(db0), free(dw);
    free(dp), free(dt), free(dg), free(db);
}
END_TEST

static ld gelu_tanh_oracle(ld x)
{
    return x / (1 + expl(-2 * 0.7978845608028654L * (x + 0.044715L * x * x * x))); /* = 0.5x(1+tanh u) */
}

START_TEST(test_gemm_every_element)
{
    static const int dims[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 9, 33}, {8, 64, 2}};
    for (int k = 0; k < 4; k++)
        for (int ta = 0; ta <= 1; ta++)
            for (int tb = 0; tb <= 1; tb++)
                for (int epi = GEMM_REF_NONE; epi <= GEMM_REF_BGRADB; epi++) {
                    const int M = dims[k][0], N = dims[k][1], K = dims[k][2];
                    const float alpha = 0.75f, beta = epi == GEMM_REF_NONE ? 0.5f : 0.0f;
                    float *A = rand_array((size_t)M * K, 1), *B = rand_array((size_t)K * N, 1);
                    float *D0 = rand_array((size_t)M * N, 1), *D = copy_array(D0, (size_t)M * N);
                    float *aux0 = rand_array((size_t)M * N, 2), *aux = copy_array(aux0, (size_t)M * N);
                    float *bias0 = rand_array(M > N ? M : N, 1), *bias = copy_array(bias0, M > N ? M : N);
                    if (epi == GEMM_REF_GELU_BIAS)
                        for (int i = 0; i < M * N; i++)
                            aux[i] = NAN;
                    if (epi == GEMM_REF_DGELU_BGRAD || epi == GEMM_REF_BGRADB)
                        for (int i = 0; i < (M > N ? M : N); i++)
                            bias[i] = NAN;
                    if (beta == 0)
                        for (int i = 0; i < M * N; i++)
                            D[i] = NAN; /* beta 0: D is output only */
                    gemm_ref(M, N, K, ta, tb, A, B, D, alpha, beta, epi, bias, aux);
                    ld *w = calloc((size_t)M * N, sizeof *w), *wa = calloc((size_t)M * N, sizeof *wa);
                    ld wb[128];
                    for (int i = 0; i < M; i++)
                        for (int j = 0; j < N; j++) {
                            ld acc = 0;
                            for (int q = 0; q < K; q++)
                                acc += (ld)(ta ? A[q * M + i] : A[i * K + q]) *
                                       (tb ? B[j * K + q] : B[q * N + j]);
                            ld v = alpha * acc + beta * (ld)D0[i * N + j];
                            ld h = 1e-4L; /* gelu' by a central difference of the oracle */
                            ld gp = (gelu_tanh_oracle((ld)aux0[i * N + j] + h) -
                                     gelu_tanh_oracle((ld)aux0[i * N + j] - h)) / (2 * h);
                            if (epi == GEMM_REF_BIAS)
                                v += bias0[j];
                            else if (epi == GEMM_REF_GELU_BIAS)
                                wa[i * N + j] = v + bias0[j], v = gelu_tanh_oracle(v + bias0[j]);
                            else if (epi == GEMM_REF_DGELU || epi == GEMM_REF_DGELU_BGRAD)
                                v *= gp;
                            w[i * N + j] = v;
                        }
                    char what[64];
                    snprintf(what, sizeof what, "gemm %dx%dx%d ta %d tb %d epi %d D", M, N, K, ta, tb, epi);
                    expect_all(what, D, w, (size_t)M * N, 1e-5, 1e-5);
                    if (epi == GEMM_REF_GELU_BIAS)
                        expect_all("gemm aux", aux, wa, (size_t)M * N, 1e-5, 1e-5);
                    if (epi == GEMM_REF_DGELU_BGRAD) {
                        for (int j = 0; j < N; j++) {
                            wb[j] = 0;
                            for (int i = 0; i < M; i++)
                                wb[j] += w[i * N + j];
                        }
                        expect_all("gemm dgelu bias", bias, wb, N, 1e-5, 1e-5);
                    }
                    if (epi == GEMM_REF_BGRADB) {
                        for (int i = 0; i < M; i++) {
                            wb[i] = 0;
                            for (int q = 0; q < K; q++)
                                wb[i] += ta ? A[q * M + i] : A[i * K + q];
                        }
                        expect_all("gemm bgradb bias", bias, wb, M, 1e-5, 1e-5);
                    }
                    free(A), free(B), free(D0), free(D), free(aux0), free(aux), free(bias0), free(bias);
                    free(w), free(wa);
                }
}
END_TEST

START_TEST(test_attention_mask_rate_and_pairs)
{
    /* The FMHA mask (dropout.h): keep rate 1 - floor(32768 p) / 32768 over 2000 rows of 512 keys;
     * the four keys of one hash (16 a + 2 c + {0, 1, 8, 9}: pairs j, j + 1 and j, j + 8), keys of
     * neighbouring quads (j, j + 2) and of neighbouring rows independent (joint rate q^2, 5 sigma
     * bounds); p = 0 keeps everything. */
    const float p = 0.1f;
    const uint32_t thr = fmha_mask_threshold(p);
    const double q = 1.0 - thr / 32768.0;
    long kept = 0, pair = 0, far = 0, quads = 0, rows = 0, n = 0, npair = 0, nfar = 0;
    for (uint64_t r = 0; r < 2000; r++)
        for (int j = 0; j < 512; j++) {
            const int a = fmha_mask_keep(99, 6, r, j, thr);
            kept += a;
            if (j % 2 == 0) {
                pair += a && fmha_mask_keep(99, 6, r, j + 1, thr);
                npair++;
            }
            if (j % 16 < 8) {
                far += a && fmha_mask_keep(99, 6, r, j + 8, thr);
                nfar++;
            }
            if (j + 2 < 512)
                quads += a && fmha_mask_keep(99, 6, r, j + 2, thr);
            rows += a && fmha_mask_keep(99, 6, r + 1, j, thr);
            n++;
        }
    const long nq = 2000L * 510;
    ck_assert_double_eq_tol((double)kept / n, q, 5 * sqrt(q * (1 - q) / n));
    ck_assert_double_eq_tol((double)pair / npair, q * q, 5 * sqrt(q * q * (1 - q * q) / npair));
    ck_assert_double_eq_tol((double)far / nfar, q * q, 5 * sqrt(q * q * (1 - q * q) / nfar));
    ck_assert_double_eq_tol((double)quads / nq, q * q, 5 * sqrt(q * q * (1 - q * q) / nq));
    ck_assert_double_eq_tol((double)rows / n, q * q, 5 * sqrt(q * q * (1 - q * q) / n));
    ck_assert_uint_eq(thr, 3276u);
    for (int j = 0; j < 512; j++)
        ck_assert_int_eq(fmha_mask_keep(99, 7, 3, j, fmha_mask_threshold(0.0f)), 1);
    /* the quad and field of a key, as the kernels' register layouts assume */
    ck_assert_uint_eq(fmha_mask_quad_of(16 * 5 + 2 * 3 + 9), 4 * 5 + 3);
    ck_assert_int_eq(fmha_mask_field_of(16 * 5 + 2 * 3 + 9), 3);
    ck_assert_int_eq(fmha_mask_field_of(16 * 5 + 2 * 3), 0);
}
END_TEST

START_TEST(test_fp8_known_values)
{
    /* E4M3: 1 = 0.0111.000, the largest finite 448 = 0.1111.110, the smallest subnormal 2^-9 */
    const struct {
        float x;
        fp8_format f;
        uint8_t q;
    } known[] = {
        {1.0f, FP8_E4M3, 0x38},   {-1.0f, FP8_E4M3, 0xb8},     {448.0f, FP8_E4M3, 0x7e},
        {449.0f, FP8_E4M3, 0x7e}, {1e30f, FP8_E4M3, 0x7e},     {-INFINITY, FP8_E4M3, 0xfe},
        {0x1p-9f, FP8_E4M3, 0x01}, {0x1p-10f, FP8_E4M3, 0x00}, /* half the smallest: a tie, to even 0 */
        {0x1.8p-10f, FP8_E4M3, 0x01}, {-0x1p-12f, FP8_E4M3, 0x80}, {-0.0f, FP8_E4M3, 0x80},
        {0x1.cp-7f, FP8_E4M3, 0x07}, /* the largest subnormal 7 x 2^-9 */
        {0x1.ep-7f, FP8_E4M3, 0x08}, /* halfway to the smallest normal 2^-6: rounds to it (even) */
        {17.0f, FP8_E4M3, 0x58},  /* between 16 (mantissa 000) and 18 (001): to 16 */
        {19.0f, FP8_E4M3, 0x5a},  /* between 18 and 20: to 20 (mantissa 010) */
        {15.5f, FP8_E4M3, 0x58},  /* between 15 (0.1010.111) and 16: to 16, carried into the binade */
        {1.0f, FP8_E5M2, 0x3c},   {57344.0f, FP8_E5M2, 0x7b},  {INFINITY, FP8_E5M2, 0x7b},
        {-1e9f, FP8_E5M2, 0xfb},  {0x1p-16f, FP8_E5M2, 0x01},  {0x1p-17f, FP8_E5M2, 0x00},
        {0x1.8p-17f, FP8_E5M2, 0x01}, {1.125f, FP8_E5M2, 0x3c}, {1.375f, FP8_E5M2, 0x3e},
    };
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        ck_assert_msg(fp8_from_float_ref(known[i].x, known[i].f) == known[i].q, "%a -> 0x%02x, want 0x%02x",
                      (double)known[i].x, fp8_from_float_ref(known[i].x, known[i].f), known[i].q);
    ck_assert(isnan(fp8_to_float_ref(fp8_from_float_ref(NAN, FP8_E4M3), FP8_E4M3)));
    ck_assert(isnan(fp8_to_float_ref(fp8_from_float_ref(NAN, FP8_E5M2), FP8_E5M2)));
    ck_assert(isinf(fp8_to_float_ref(0x7c, FP8_E5M2)));
    ck_assert_float_eq(fp8_to_float_ref(0x7e, FP8_E4M3), 448.0f);
    ck_assert_float_eq(fp8_to_float_ref(0x01, FP8_E5M2), 0x1p-16f);
    /* the casts: scale applied in float, amax of the input, the transpose's padding left alone */
    const float in[6] = {1.0f, -3.0f, 0.25f, 200.0f, -0.0f, 2.0f}, scale = 4.0f;
    uint8_t out[6], out_t[3 * 4];
    memset(out_t, 0xab, sizeof out_t);
    float amax = 0.0f;
    cast_transpose_fp8_ref(out, out_t, 4, &amax, in, &scale, 2, 3, FP8_E4M3);
    const uint8_t want[6] = {0x48, 0xd4, 0x38, 0x7e, 0x80, 0x50}; /* 4, -12, 1, 448 (800 saturated), -0, 8 */
    for (int i = 0; i < 6; i++)
        ck_assert_uint_eq(out[i], want[i]);
    for (int c = 0; c < 3; c++) {
        ck_assert_uint_eq(out_t[c * 4 + 0], want[c]);
        ck_assert_uint_eq(out_t[c * 4 + 1], want[3 + c]);
        ck_assert_uint_eq(out_t[c * 4 + 2], 0xab);
        ck_assert_uint_eq(out_t[c * 4 + 3], 0xab);
    }
    ck_assert_float_eq(amax, 200.0f);
}
END_TEST

START_TEST(test_fp8_every_code_round_trips_and_ties_go_to_even)
{
    /* Every finite code decodes to a value that encodes back to it; between two neighbouring
     * positive values the midpoint goes to the one with the even code (mantissa's last bit 0), a
     * hair off the midpoint to the nearer one. */
    const fp8_format fmts[2] = {FP8_E4M3, FP8_E5M2};
    for (int k = 0; k < 2; k++) {
        fp8_format f = fmts[k];
        uint8_t last = f == FP8_E4M3 ? 0x7e : 0x7b;
        for (int q = 0; q < 256; q++) {
            float v = fp8_to_float_ref((uint8_t)q, f);
            if (isnan(v) || isinf(v))
                continue;
            ck_assert_msg(fp8_from_float_ref(v, f) == q, "fmt %d code 0x%02x (%a) -> 0x%02x", k, q, (double)v,
                          fp8_from_float_ref(v, f));
        }
        for (int q = 0; q < last; q++) {
            double lo = fp8_to_float_ref((uint8_t)q, f), hi = fp8_to_float_ref((uint8_t)(q + 1), f);
            ck_assert(hi > lo);
            float mid = (float)(0.5 * (lo + hi)), eps = (float)((hi - lo) * 1e-3);
            uint8_t even = q % 2 == 0 ? (uint8_t)q : (uint8_t)(q + 1);
            ck_assert_msg(fp8_from_float_ref(mid, f) == even, "fmt %d midpoint of 0x%02x", k, q);
            ck_assert_uint_eq(fp8_from_float_ref(mid - eps, f), q);
            ck_assert_uint_eq(fp8_from_float_ref(mid + eps, f), q + 1);
            ck_assert_uint_eq(fp8_from_float_ref(-(mid + eps), f), 0x80 | (q + 1));
        }
    }
}
END_TEST

START_TEST(test_fp8_delayed_scaling)
{
    /* scale = the largest power of two that keeps the history's maximum finite in the format:
     * E4M3 (448): amax 1 -> 256, 448 -> 1, 449 -> 1/2, 3.5 -> 64 (3.5 x 128 = 448 fits exactly);
     * E5M2 (57344 = 1.75 x 2^15): amax 1 -> 2^15, 1.75 -> 2^15, 1.76 -> 2^14 */
    enum { n = 7, len = 4 };
    const uint8_t fmt[n] = {FP8_E4M3, FP8_E4M3, FP8_E4M3, FP8_E4M3, FP8_E5M2, FP8_E5M2, FP8_E5M2};
    float amax[n] = {1.0f, 448.0f, 449.0f, 3.5f, 1.0f, 1.75f, 1.76f}, hist[n * len], scale[n], inv[8 * n];
    const float want[n] = {256.0f, 1.0f, 0.5f, 128.0f, 0x1p15f, 0x1p15f, 0x1p14f};
    for (int i = 0; i < n; i++)
        scale[i] = inv[8 * i] = inv[8 * i + 4] = -1.0f;
    fp8_scales_update_ref(amax, hist, scale, inv, fmt, n, len, 0, 1);
    for (int i = 0; i < n; i++) {
        ck_assert_msg(scale[i] == want[i], "tensor %d: scale %g, want %g", i, (double)scale[i], (double)want[i]);
        ck_assert_float_eq(inv[8 * i], 1.0f / want[i]);
        ck_assert_float_eq(inv[8 * i + 4], want[i]);
        ck_assert_float_eq(amax[i], 0.0f);
        for (int j = 0; j < len; j++) /* init: every slot */
            ck_assert(hist[i * len + j] > 0.0f);
    }
    /* the maximum over the history: a smaller amax leaves the scale; once the larger value has left
     * every slot, the scale grows */
    float h1[len] = {0}, s1 = 1.0f, i1[8] = {1.0f}, a1;
    const uint8_t f1 = FP8_E4M3;
    a1 = 100.0f;
    fp8_scales_update_ref(&a1, h1, &s1, i1, &f1, 1, len, 0, 1); /* 100 x 4 = 400 */
    ck_assert_float_eq(s1, 4.0f);
    for (int step = 0; step < len; step++) {
        a1 = 1.0f;
        fp8_scales_update_ref(&a1, h1, &s1, i1, &f1, 1, len, step, 0);
        ck_assert_float_eq(s1, step < len - 1 ? 4.0f : 256.0f);
    }
    /* nothing finite and positive seen: the scale stays; an infinite amax counts as 0 */
    float h2[len] = {0}, s2 = 8.0f, i2[8] = {0.125f}, a2 = INFINITY;
    fp8_scales_update_ref(&a2, h2, &s2, i2, &f1, 1, len, 0, 0);
    ck_assert_float_eq(s2, 8.0f);
    ck_assert_float_eq(i2[0], 0.125f);
    ck_assert_float_eq(h2[0], 0.0f);
    a2 = NAN;
    fp8_scales_update_ref(&a2, h2, &s2, i2, &f1, 1, len, 1, 0);
    ck_assert_float_eq(s2, 8.0f);
}
END_TEST

Suite *kernels_ref_suite(void)
{
    Suite *s = suite_create("kernels_ref");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_layernorm_rows_have_mean0_var1);
    tcase_add_test(tc, test_fused_layernorm_bwd_matches_finite_differences);
    tcase_add_test(tc, test_plain_layernorm_bwd_matches_fused_without_dropout);
    tcase_add_test(tc, test_gelu_known_points);
    tcase_add_test(tc, test_tanh_and_bias_bwd);
    tcase_add_test(tc, test_xent_loss_gradient_and_padding);
    tcase_add_test(tc, test_nsp_loss_known_values);
    tcase_add_test(tc, test_gather_scatter_rows);
    tcase_add_test(tc, test_lamb_one_step_by_hand);
    tcase_add_test(tc, test_embedding_bwd_sums);
    tcase_add_test(tc, test_dropout_rate);
    tcase_add_test(tc, test_layernorm_every_element);
    tcase_add_test(tc, test_activations_every_element);
    tcase_add_test(tc, test_losses_every_element);
    tcase_add_test(tc, test_rows_every_element);
    tcase_add_test(tc, test_lamb_every_element);
    tcase_add_test(tc, test_embedding_every_element);
    tcase_add_test(tc, test_gemm_every_element);
    tcase_add_test(tc, test_attention_mask_rate_and_pairs);
    tcase_add_test(tc, test_fp8_known_values);
    tcase_add_test(tc, test_fp8_every_code_round_trips_and_ties_go_to_even);
    tcase_add_test(tc, test_fp8_delayed_scaling);
    suite_add_tcase(s, tc);
    return s;
}
