/* check_kernels_ref.c — the kernel references checked on their own: known values, invariants
 * (LayerNorm statistics, gradient sums), finite differences and one LAMB step by hand. The CUDA
 * kernels are then checked against these references by tests/gpu/test_kernels.cu. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dropout.h"
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
}
END_TEST

START_TEST(test_attention_mask_rate_and_pairs)
{
    /* The FMHA mask (dropout.h): keep rate 1 - floor(65536 p) / 65536 over 2000 rows of 512 keys,
     * the two keys of one hash and keys of neighbouring rows independent (joint rate q^2, 5 sigma
     * bounds), and p = 0 keeps everything. */
    const float p = 0.1f;
    const uint32_t thr = fmha_mask_threshold(p);
    const double q = 1.0 - thr / 65536.0;
    long kept = 0, pair = 0, rows = 0, n = 0;
    for (uint64_t r = 0; r < 2000; r++)
        for (int j = 0; j < 512; j++) {
            const int a = fmha_mask_keep(99, 6, r, j, thr);
            kept += a;
            pair += a && (j % 2 == 0) && fmha_mask_keep(99, 6, r, j + 1, thr);
            rows += a && fmha_mask_keep(99, 6, r + 1, j, thr);
            n++;
        }
    ck_assert_double_eq_tol((double)kept / n, q, 5 * sqrt(q * (1 - q) / n));
    ck_assert_double_eq_tol((double)pair / (n / 2), q * q, 5 * sqrt(q * q * (1 - q * q) / (n / 2)));
    ck_assert_double_eq_tol((double)rows / n, q * q, 5 * sqrt(q * q * (1 - q * q) / n));
    ck_assert_uint_eq(thr, 6553u);
    for (int j = 0; j < 512; j++)
        ck_assert_int_eq(fmha_mask_keep(99, 7, 3, j, fmha_mask_threshold(0.0f)), 1);
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
    tcase_add_test(tc, test_attention_mask_rate_and_pairs);
    suite_add_tcase(s, tc);
    return s;
}
