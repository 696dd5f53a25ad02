/* layernorm.cu — LayerNorm over rows of the unpadded (T, H) floatX activations: plain (the MLM head
 * transform) and fused with bias + dropout + residual (after the attention output projection and
 * after FFN2), forward and backward. Reference: kernels/ref/layernorm_ref.c.
 *
 * Rows are held in registers by groups of warps (the row-group helpers in rowops.cuh: one
 * 128-thread group per row at H = 1024, 8 columns per thread), fp32 statistics, 16-byte accesses.
 * Both kernels run a persistent grid in which each group loops over batches of rows and issues
 * the next batch's loads before it works on the current one, so loads stay in flight through the
 * reductions and stores. The fused forward rounds r = dropout(x + bias) + residual to floatX before
 * normalizing, so the saved ln_in reproduces the forward's x-hat exactly in backward. Backward:
 * dgamma, dbeta, dbias accumulate in registers over all the rows a block takes, are added over the
 * block's groups in order, then over the blocks in a fixed order (colsum_finalize, which adds them
 * to the gradients or writes them); the block count is fixed (LN_BWD_BLOCKS), so the sums depend
 * only on the inputs: deterministic. The FP8 trainer's variants also write the E4M3 copy of the
 * forward's output and the E5M2 copy of the backward's dx (fp8.cuh), the next products' operands. */
#include "dropout.h"
#include "fp8.cuh"
#include "kernels.h"
#include "rowops.cuh"

#define LN_THREADS 256 /* 8 warps: 2 row groups at H = 1024 */
/* Rows per group and batch: each thread has LN_*_ROWS x KV loads per input tensor in flight. */
#ifndef LN_FWD_ROWS
#define LN_FWD_ROWS 2
#endif
#ifndef LN_BWD_ROWS
#define LN_BWD_ROWS 2
#endif
/* The fused backward (bias + dropout + residual: one more input and output per row) holds one row
 * per batch: faster than two on the H100 (scripts/trainer-dev.sh ln, docs/kernels.md). */
#ifndef LN_BWD_ROWS_FUSED
#define LN_BWD_ROWS_FUSED 1
#endif
/* Rows wider than 1024 columns (KV > 1 vectors per thread) take one row per batch: registers. */
#define LN_ROWS(rows, KV) ((KV) > 1 ? 1 : (rows))
/* Blocks of the backward (at most UNPAD_COLSUM_BLOCKS): two resident blocks per SM on the H200's
 * 132 SMs; fixed, so the reduction order depends only on T. */
#ifndef LN_BWD_BLOCKS
#define LN_BWD_BLOCKS 264
#endif

/* ---- kernels ------------------------------------------------------------------------------------ */

/* out = LayerNorm(r) * gamma + beta, r = dropout(x + bias) + residual (bias, residual optional;
 * p = 0: no dropout). ln_in (optional) receives r in floatX; F8: f8 the E4M3 copy of out. */
template <int RW, int KV, bool F8>
__global__ void __launch_bounds__(LN_THREADS)
    ln_fwd_kernel(floatX *out, floatX *ln_in, float *mean_out, float *rstd_out, const floatX *x,
                  const floatX *bias, const floatX *residual, const floatX *gamma, const floatX *beta,
                  int T, int H, float eps, float p, uint64_t seed, uint64_t stream_id, fp8_out f8)
{
    constexpr int R = LN_ROWS(LN_FWD_ROWS, KV), GT = 32 * RW, G = LN_THREADS / GT;
    __shared__ float sh[2 * R * (LN_THREADS / 32)];
    __shared__ unsigned smax;
    float s8 = fp8_begin<F8>(f8.scale, &smax), m8 = 0.0f;
    int gt = threadIdx.x % GT, parity = 0;
    int nvec = H / 8;
    const float scale = 1.0f / (1.0f - p);
    const uint64_t key = dropout_key(seed, stream_id);
    const uint32_t thr = dropout_threshold(p);
    float gam[KV][8], bet[KV][8], bia[KV][8];
    group_cols_load<RW, KV>(gam, gamma, H, gt);
    group_cols_load<RW, KV>(bet, beta, H, gt);
    group_cols_load<RW, KV>(bia, bias, H, gt);
    int stride = gridDim.x * G * R;
    int r0 = (blockIdx.x * G + threadIdx.x / GT) * R;
    vec8 qx[R][KV], qr[R][KV];
    group_rows_load<RW, KV, R>(qx, x, r0, T, H, gt);
    group_rows_load<RW, KV, R>(qr, residual, r0, T, H, gt);
    for (; r0 < T; r0 += stride) {
        float v[R][KV][8];
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int k = 0; k < KV; k++) {
                float res[8];
                unpack8(v[r][k], qx[r][k]);
                unpack8(res, qr[r][k]);
                size_t e = (size_t)(r0 + r) * H + (gt + GT * k) * 8;
#pragma unroll
                for (int j = 0; j < 8; j++)
                    v[r][k][j] += bia[k][j];
                if (p > 0.0f)
                    dropout_apply8(v[r][k], key, thr, scale, e);
#pragma unroll
                for (int j = 0; j < 8; j++)
                    v[r][k][j] += res[j];
                if (ln_in) {
                    round8(v[r][k]);
                    if (r0 + r < T && gt + GT * k < nvec)
                        store8(ln_in + e, v[r][k]);
                }
            }
        /* the next batch's loads go out before this batch's reductions and stores */
        group_rows_load<RW, KV, R>(qx, x, r0 + stride, T, H, gt);
        group_rows_load<RW, KV, R>(qr, residual, r0 + stride, T, H, gt);
        float mean[R], rstd[R];
        group_ln_fwd<RW, KV, R>(v, mean, rstd, gam, bet, H, eps, gt, sh, parity);
        group_for_each<RW, KV, R>(r0, T, H, gt, [&](int r, int k, size_t e) {
            store8(out + e, v[r][k]);
            if (F8)
                *reinterpret_cast<uint2 *>(f8.q + e) = fp8_pack8<FP8_E4M3>(v[r][k], s8, m8);
        });
        group_stats_store<R>(mean_out, rstd_out, mean, rstd, r0, T, gt);
    }
    if (F8)
        fp8_amax_block(m8, &smax, f8.amax);
}

/* Backward of ln_fwd_kernel. dy = dout (+ dout_add); dr = LayerNorm backward of dy;
 * dresid = dr; dx = dropout(dr). partials: (nparts, gridDim.x, H) block column sums of
 * dy * x-hat (dgamma), dy (dbeta) and, if nparts == 3, dx (dbias). F8: f8 the E5M2 copy of dx. */
template <int RW, int KV, int ROWS, bool F8>
__global__ void __launch_bounds__(LN_THREADS, KV > 1 ? 1 : 2)
    ln_bwd_kernel(floatX *dx, floatX *dresid, float *partials, int nparts, const floatX *dout,
                  const floatX *dout_add, const floatX *ln_in, const float *mean, const float *rstd,
                  const floatX *gamma, int T, int H, float p, uint64_t seed, uint64_t stream_id, fp8_out f8)
{
    constexpr int R = LN_ROWS(ROWS, KV), GT = 32 * RW, G = LN_THREADS / GT;
    __shared__ float sh[2 * 2 * R * (LN_THREADS / 32)];
    __shared__ float shacc[8 * LN_THREADS];
    __shared__ unsigned smax;
    float s8 = fp8_begin<F8>(f8.scale, &smax), m8 = 0.0f;
    int gt = threadIdx.x % GT, parity = 0;
    const float scale = 1.0f / (1.0f - p);
    const uint64_t key = dropout_key(seed, stream_id);
    const uint32_t thr = dropout_threshold(p);
    float gam[KV][8], acc[3][KV][8];
    group_cols_load<RW, KV>(gam, gamma, H, gt);
    group_acc_zero<3, KV>(acc);
    int stride = gridDim.x * G * R;
    int g = threadIdx.x / GT, r0 = (blockIdx.x * G + g) * R;
    vec8 qd[R][KV], qa[R][KV], qx[R][KV];
    float mu[R], rs[R];
    auto load_batch = [&](int b0) {
        group_rows_load<RW, KV, R>(qd, dout, b0, T, H, gt);
        group_rows_load<RW, KV, R>(qa, dout_add, b0, T, H, gt);
        group_rows_load<RW, KV, R>(qx, ln_in, b0, T, H, gt);
        group_stats_load<R>(mu, rs, mean, rstd, b0, T);
    };
    load_batch(r0);
    for (; r0 - g * R < T; r0 += stride) { /* the block's trip count: see rowops.cuh */
        float dy[R][KV][8], xh[R][KV][8], m[R], s[R];
        group_unpack_sum<R, KV>(dy, qd, qa);
#pragma unroll
        for (int r = 0; r < R; r++) {
            m[r] = mu[r], s[r] = rs[r];
#pragma unroll
            for (int k = 0; k < KV; k++)
                unpack8(xh[r][k], qx[r][k]);
        }
        /* the next batch's loads go out before this batch's reductions and stores */
        load_batch(r0 + stride);
        group_ln_bwd<RW, KV, R>(dy, xh, m, s, gam, acc[0], acc[1], H, sh, parity);
        group_for_each<RW, KV, R>(r0, T, H, gt, [&](int r, int k, size_t e) {
            if (dresid)
                store8(dresid + e, dy[r][k]);
            if (p > 0.0f)
                dropout_apply8(dy[r][k], key, thr, scale, e);
            if (dx)
                store8(dx + e, dy[r][k]);
            if (F8)
                *reinterpret_cast<uint2 *>(f8.q + e) = fp8_pack8<FP8_E5M2>(dy[r][k], s8, m8);
#pragma unroll
            for (int j = 0; j < 8; j++)
                acc[2][k][j] += dy[r][k][j];
        });
    }
    if (F8)
        fp8_amax_block(m8, &smax, f8.amax);
    size_t ps = (size_t)gridDim.x * H;
    if (nparts == 3)
        group_acc_store<RW, KV, 3>(acc, shacc, partials + (size_t)blockIdx.x * H, ps, H);
    else
        group_acc_store<RW, KV, 2>(acc, shacc, partials + (size_t)blockIdx.x * H, ps, H);
}

/* ---- launchers ---------------------------------------------------------------------------------- */

static void check_row_shape(int T, int H)
{
    UNPAD_REQUIRE(T >= 0);
    UNPAD_REQUIRE(H > 0 && H % 8 == 0 && H <= 4096);
}

size_t layernorm_bwd_scratch_bytes(int H)
{
    return (size_t)3 * LN_BWD_BLOCKS * H * sizeof(float);
}

/* f8.q != NULL: the FP8 copy (16-byte aligned; the caller checks) */
static void ln_fwd_launch(floatX *out, floatX *ln_in, float *mean, float *rstd, const floatX *x,
                          const floatX *bias, const floatX *residual, const floatX *gamma,
                          const floatX *beta, int T, int H, float eps, float p, uint64_t seed,
                          uint64_t stream_id, fp8_out f8, cudaStream_t stream)
{
    check_row_shape(T, H);
    UNPAD_REQUIRE(p >= 0.0f && p < 1.0f);
    if (T == 0)
        return;
#define LN_FWD_LAUNCH(F8)                                                                              \
    UNPAD_ROW_GROUP_DISPATCH(H, {                                                                      \
        constexpr int rows_per_block = LN_THREADS / (32 * RW) * LN_ROWS(LN_FWD_ROWS, KV);              \
        int grid = persistent_grid((const void *)ln_fwd_kernel<RW, KV, F8>, LN_THREADS,                \
                                   (T + rows_per_block - 1) / rows_per_block);                         \
        ln_fwd_kernel<RW, KV, F8><<<grid, LN_THREADS, 0, stream>>>(out, ln_in, mean, rstd, x, bias,    \
                                                                   residual, gamma, beta, T, H, eps, p, \
                                                                   seed, stream_id, f8);               \
    })
    if (f8.q)
        LN_FWD_LAUNCH(true);
    else
        LN_FWD_LAUNCH(false);
#undef LN_FWD_LAUNCH
    cudaCheck(cudaGetLastError());
}

static void ln_bwd_launch(floatX *dx, floatX *dresid, float *dbias, float *dgamma, float *dbeta,
                          const floatX *dout, const floatX *dout_add, const floatX *ln_in,
                          const float *mean, const float *rstd, const floatX *gamma, int T, int H,
                          float p, uint64_t seed, uint64_t stream_id, float *scratch, int accumulate,
                          fp8_out f8, cudaStream_t stream)
{
    check_row_shape(T, H);
    UNPAD_REQUIRE(p >= 0.0f && p < 1.0f);
    UNPAD_REQUIRE(scratch != NULL);
    if (T == 0) { /* no rows: the written gradients are zero */
        float *d[3] = {dgamma, dbeta, dbias};
        for (int k = 0; k < 3 && !accumulate; k++)
            if (d[k])
                cudaCheck(cudaMemsetAsync(d[k], 0, (size_t)H * sizeof(float), stream));
        return;
    }
    int nparts = dbias ? 3 : 2;
    int grid = 0;
    /* the fused kernel (bias, dropout, a second incoming gradient) and the plain one take their
     * own rows per batch */
#define LN_BWD_LAUNCH(ROWS, F8)                                                                       \
    UNPAD_ROW_GROUP_DISPATCH(H, {                                                                     \
        constexpr int rows_per_block = LN_THREADS / (32 * RW) * LN_ROWS(ROWS, KV);                    \
        grid = (T + rows_per_block - 1) / rows_per_block;                                             \
        if (grid > LN_BWD_BLOCKS)                                                                     \
            grid = LN_BWD_BLOCKS;                                                                     \
        ln_bwd_kernel<RW, KV, ROWS, F8><<<grid, LN_THREADS, 0, stream>>>(dx, dresid, scratch, nparts,   \
                                                                         dout, dout_add, ln_in, mean,  \
                                                                         rstd, gamma, T, H, p, seed,   \
                                                                         stream_id, f8);               \
    })
    if (f8.q)
        LN_BWD_LAUNCH(LN_BWD_ROWS_FUSED, true);
    else if (dx || dbias || dout_add)
        LN_BWD_LAUNCH(LN_BWD_ROWS_FUSED, false);
    else
        LN_BWD_LAUNCH(LN_BWD_ROWS, false);
#undef LN_BWD_LAUNCH
    cudaCheck(cudaGetLastError());
    colsum_finalize3(dgamma, dbeta, dbias, scratch, grid, (size_t)grid * H, H, accumulate, stream);
}

void layernorm_fwd(floatX *out, float *mean, float *rstd, const floatX *x, const floatX *gamma,
                   const floatX *beta, int T, int H, float eps, cudaStream_t stream)
{
    ln_fwd_launch(out, NULL, mean, rstd, x, NULL, NULL, gamma, beta, T, H, eps, 0.0f, 0, 0, fp8_out{}, stream);
}

void layernorm_bwd(floatX *dx, float *dgamma, float *dbeta, const floatX *dout, const floatX *x,
                   const float *mean, const float *rstd, const floatX *gamma, int T, int H,
                   float *scratch, int accumulate, cudaStream_t stream)
{
    ln_bwd_launch(NULL, dx, NULL, dgamma, dbeta, dout, NULL, x, mean, rstd, gamma, T, H, 0.0f, 0,
                  0, scratch, accumulate, fp8_out{}, stream);
}

void bias_dropout_residual_layernorm_fwd(floatX *out, floatX *ln_in, float *mean, float *rstd,
                                         const floatX *x, const floatX *bias, const floatX *residual,
                                         const floatX *gamma, const floatX *beta, int T, int H,
                                         float eps, float p_drop, uint64_t seed,
                                         uint64_t stream_id, cudaStream_t stream)
{
    UNPAD_REQUIRE(ln_in != NULL && residual != NULL);
    ln_fwd_launch(out, ln_in, mean, rstd, x, bias, residual, gamma, beta, T, H, eps, p_drop, seed,
                  stream_id, fp8_out{}, stream);
}

void bias_dropout_residual_layernorm_fwd_fp8(floatX *out, floatX *ln_in, float *mean, float *rstd,
                                             const floatX *x, const floatX *bias, const floatX *residual,
                                             const floatX *gamma, const floatX *beta, int T, int H, float eps,
                                             float p_drop, uint64_t seed, uint64_t stream_id, uint8_t *out8,
                                             float *amax8, const float *scale8, cudaStream_t stream)
{
    UNPAD_REQUIRE(ln_in != NULL && residual != NULL && out8 != NULL && amax8 != NULL && scale8 != NULL);
    UNPAD_REQUIRE(!((uintptr_t)out8 & 7));
    ln_fwd_launch(out, ln_in, mean, rstd, x, bias, residual, gamma, beta, T, H, eps, p_drop, seed,
                  stream_id, fp8_out{out8, scale8, amax8}, stream);
}

void bias_dropout_residual_layernorm_bwd(floatX *dx, floatX *dresidual, float *dbias, float *dgamma,
                                         float *dbeta, const floatX *dout, const floatX *dout_add,
                                         const floatX *ln_in, const float *mean, const float *rstd,
                                         const floatX *gamma, int T, int H, float p_drop,
                                         uint64_t seed, uint64_t stream_id, float *scratch,
                                         int accumulate, cudaStream_t stream)
{
    ln_bwd_launch(dx, dresidual, dbias, dgamma, dbeta, dout, dout_add, ln_in, mean, rstd, gamma, T,
                  H, p_drop, seed, stream_id, scratch, accumulate, fp8_out{}, stream);
}

void bias_dropout_residual_layernorm_bwd_fp8(floatX *dx, floatX *dresidual, float *dbias, float *dgamma,
                                             float *dbeta, const floatX *dout, const floatX *dout_add,
                                             const floatX *ln_in, const float *mean, const float *rstd,
                                             const floatX *gamma, int T, int H, float p_drop, uint64_t seed,
                                             uint64_t stream_id, float *scratch, int accumulate, uint8_t *dx8,
                                             float *amax8, const float *scale8, cudaStream_t stream)
{
    UNPAD_REQUIRE(dx8 != NULL && amax8 != NULL && scale8 != NULL && !((uintptr_t)dx8 & 7));
    ln_bwd_launch(dx, dresidual, dbias, dgamma, dbeta, dout, dout_add, ln_in, mean, rstd, gamma, T,
                  H, p_drop, seed, stream_id, scratch, accumulate, fp8_out{dx8, scale8, amax8}, stream);
}
