/* layernorm.cu — LayerNorm over rows of the unpadded (T, H) bf16 activations: plain (the MLM head
 * transform) and fused with bias + dropout + residual (after the attention output projection and
 * after FFN2), forward and backward. Reference: kernels/ref/layernorm_ref.c.
 *
 * One warp per row, the row in registers (8 columns per 16-byte vector, K vectors per lane), fp32
 * statistics. The fused forward rounds r = dropout(x + bias) + residual to bf16 before normalizing,
 * so the saved ln_in reproduces the forward's x-hat exactly in backward. Backward: dgamma, dbeta,
 * dbias accumulate per warp in shared memory over a grid-stride row loop (registers would cap the
 * occupancy at 8 warps per SM), then per block in warp order, then over the blocks in a fixed
 * order (colsum_finalize): deterministic. */
#include "kernels.h"
#include "dropout.h"
#include "rowops.cuh"

/* Blocks of the backward kernel (at most UNPAD_COLSUM_BLOCKS): two 8-warp blocks per SM (96 KiB
 * of shared accumulators each at H = 1024); fixed, so the reduction order depends only on T. */
#define LN_BWD_BLOCKS 264
#define LN_WARPS 8

/* ---- kernels ------------------------------------------------------------------------------------ */

/* out = LayerNorm(r) * gamma + beta, r = dropout(x + bias) + residual (bias, residual optional;
 * p = 0: no dropout). ln_in (optional) receives r in bf16. */
template <int K>
__global__ void __launch_bounds__(LN_WARPS * 32)
    ln_fwd_kernel(bf16 *out, bf16 *ln_in, float *mean_out, float *rstd_out, const bf16 *x,
                  const bf16 *bias, const bf16 *residual, const bf16 *gamma, const bf16 *beta,
                  int T, int H, float eps, float p, uint64_t seed, uint64_t stream_id)
{
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * LN_WARPS + (threadIdx.x >> 5);
    if (row >= T)
        return;
    int nvec = H / 8;
    size_t base = (size_t)row * H;
    float scale = 1.0f / (1.0f - p);
    float v[K][8];
#pragma unroll
    for (int k = 0; k < K; k++) {
        int vi = lane + 32 * k;
        if (vi >= nvec)
            continue;
        load8(v[k], x + base + vi * 8);
        if (bias) {
            float b[8];
            load8(b, bias + vi * 8);
#pragma unroll
            for (int j = 0; j < 8; j++)
                v[k][j] += b[j];
        }
        if (p > 0.0f) {
#pragma unroll
            for (int j = 0; j < 8; j++)
                v[k][j] = dropout_keep(seed, stream_id, base + vi * 8 + j, p) ? v[k][j] * scale : 0.0f;
        }
        if (residual) {
            float r[8];
            load8(r, residual + base + vi * 8);
#pragma unroll
            for (int j = 0; j < 8; j++)
                v[k][j] += r[j];
        }
        if (ln_in) {
            round8(v[k]);
            store8(ln_in + base + vi * 8, v[k]);
        }
    }
    float mean, rstd;
    warp_row_stats<K>(v, lane, nvec, H, eps, &mean, &rstd);
#pragma unroll
    for (int k = 0; k < K; k++) {
        int vi = lane + 32 * k;
        if (vi >= nvec)
            continue;
        float g[8], b[8], y[8];
        load8(g, gamma + vi * 8);
        load8(b, beta + vi * 8);
#pragma unroll
        for (int j = 0; j < 8; j++)
            y[j] = (v[k][j] - mean) * rstd * g[j] + b[j];
        store8(out + base + vi * 8, y);
    }
    if (lane == 0) {
        mean_out[row] = mean;
        rstd_out[row] = rstd;
    }
}

/* Backward of ln_fwd_kernel. dy = dout (+ dout_add); dr = LayerNorm backward of dy;
 * dresid = dr; dx = dropout(dr). partials: (nparts, gridDim.x, H) block column sums of
 * dy * x-hat (dgamma), dy (dbeta) and, if nparts == 3, dx (dbias), accumulated per warp in
 * shared memory (see warp_acc) over a grid-stride loop of rows. */
template <int K>
__global__ void __launch_bounds__(UNPAD_ACC_WARPS(K) * 32)
    ln_bwd_kernel(bf16 *dx, bf16 *dresid, float *partials, int nparts, const bf16 *dout,
                  const bf16 *dout_add, const bf16 *ln_in, const float *mean, const float *rstd,
                  const bf16 *gamma, int T, int H, float p, uint64_t seed, uint64_t stream_id)
{
    extern __shared__ float sh[]; /* (warps, 3, K, 8, 32) */
    constexpr int W = UNPAD_ACC_WARPS(K);
    int lane = threadIdx.x & 31;
    int nvec = H / 8;
    float scale = 1.0f / (1.0f - p);
    warp_acc_zero<K>(sh, 3);
    float *acc_g = warp_acc<K>(sh, 3, 0), *acc_b = warp_acc<K>(sh, 3, 1), *acc_bias = warp_acc<K>(sh, 3, 2);

    for (int row = blockIdx.x * W + (threadIdx.x >> 5); row < T; row += gridDim.x * W) {
        size_t base = (size_t)row * H;
        float mu = mean[row], rs = rstd[row];
        float xh[K][8], dyg[K][8];
        float a = 0.0f, b = 0.0f; /* sums of dy * gamma and dy * gamma * x-hat */
#pragma unroll
        for (int k = 0; k < K; k++) {
            int vi = lane + 32 * k;
            if (vi >= nvec)
                continue;
            float dy[8], g[8], t[8];
            load8(dy, dout + base + vi * 8);
            if (dout_add) {
                load8(t, dout_add + base + vi * 8);
#pragma unroll
                for (int j = 0; j < 8; j++)
                    dy[j] += t[j];
            }
            load8(xh[k], ln_in + base + vi * 8);
            load8(g, gamma + vi * 8);
#pragma unroll
            for (int j = 0; j < 8; j++) {
                xh[k][j] = (xh[k][j] - mu) * rs;
                WARP_ACC(acc_b, k, j) += dy[j];
                WARP_ACC(acc_g, k, j) += dy[j] * xh[k][j];
                dyg[k][j] = dy[j] * g[j];
                a += dyg[k][j];
                b += dyg[k][j] * xh[k][j];
            }
        }
        a = warp_sum(a) / H;
        b = warp_sum(b) / H;
#pragma unroll
        for (int k = 0; k < K; k++) {
            int vi = lane + 32 * k;
            if (vi >= nvec)
                continue;
            float dr[8];
#pragma unroll
            for (int j = 0; j < 8; j++)
                dr[j] = rs * (dyg[k][j] - a - xh[k][j] * b);
            if (dresid)
                store8(dresid + base + vi * 8, dr);
            if (p > 0.0f) {
#pragma unroll
                for (int j = 0; j < 8; j++)
                    dr[j] = dropout_keep(seed, stream_id, base + vi * 8 + j, p) ? dr[j] * scale : 0.0f;
            }
            if (dx)
                store8(dx + base + vi * 8, dr);
            if (nparts == 3)
#pragma unroll
                for (int j = 0; j < 8; j++)
                    WARP_ACC(acc_bias, k, j) += dr[j];
        }
    }
    __syncthreads();
    block_acc_store<K>(sh, 3 /* layout */, partials + (size_t)blockIdx.x * H, (size_t)gridDim.x * H,
                       nvec);
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

static void ln_fwd_launch(bf16 *out, bf16 *ln_in, float *mean, float *rstd, const bf16 *x,
                          const bf16 *bias, const bf16 *residual, const bf16 *gamma,
                          const bf16 *beta, int T, int H, float eps, float p, uint64_t seed,
                          uint64_t stream_id, cudaStream_t stream)
{
    check_row_shape(T, H);
    UNPAD_REQUIRE(p >= 0.0f && p < 1.0f);
    if (T == 0)
        return;
    int grid = (T + LN_WARPS - 1) / LN_WARPS;
    UNPAD_ROW_DISPATCH(H, (ln_fwd_kernel<K><<<grid, LN_WARPS * 32, 0, stream>>>(
                              out, ln_in, mean, rstd, x, bias, residual, gamma, beta, T, H, eps, p,
                              seed, stream_id)));
    cudaCheck(cudaGetLastError());
}

static void ln_bwd_launch(bf16 *dx, bf16 *dresid, float *dbias, float *dgamma, float *dbeta,
                          const bf16 *dout, const bf16 *dout_add, const bf16 *ln_in,
                          const float *mean, const float *rstd, const bf16 *gamma, int T, int H,
                          float p, uint64_t seed, uint64_t stream_id, float *scratch,
                          cudaStream_t stream)
{
    check_row_shape(T, H);
    UNPAD_REQUIRE(p >= 0.0f && p < 1.0f);
    UNPAD_REQUIRE(scratch != NULL);
    if (T == 0)
        return;
    int nparts = dbias ? 3 : 2;
    int grid = 0;
    UNPAD_ROW_DISPATCH(H, {
        constexpr int W = UNPAD_ACC_WARPS(K);
        int smem = W * 3 * K * 256 * (int)sizeof(float);
        cudaCheck(cudaFuncSetAttribute(ln_bwd_kernel<K>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        grid = (T + W - 1) / W;
        if (grid > LN_BWD_BLOCKS)
            grid = LN_BWD_BLOCKS;
        ln_bwd_kernel<K><<<grid, W * 32, smem, stream>>>(dx, dresid, scratch, nparts, dout, dout_add,
                                                         ln_in, mean, rstd, gamma, T, H, p, seed,
                                                         stream_id);
    });
    cudaCheck(cudaGetLastError());
    size_t stride = (size_t)grid * H;
    colsum_finalize(dgamma, scratch, grid, H, stream);
    colsum_finalize(dbeta, scratch + stride, grid, H, stream);
    if (dbias)
        colsum_finalize(dbias, scratch + 2 * stride, grid, H, stream);
}

void layernorm_fwd(bf16 *out, float *mean, float *rstd, const bf16 *x, const bf16 *gamma,
                   const bf16 *beta, int T, int H, float eps, cudaStream_t stream)
{
    ln_fwd_launch(out, NULL, mean, rstd, x, NULL, NULL, gamma, beta, T, H, eps, 0.0f, 0, 0, stream);
}

void layernorm_bwd(bf16 *dx, float *dgamma, float *dbeta, const bf16 *dout, const bf16 *x,
                   const float *mean, const float *rstd, const bf16 *gamma, int T, int H,
                   float *scratch, cudaStream_t stream)
{
    ln_bwd_launch(NULL, dx, NULL, dgamma, dbeta, dout, NULL, x, mean, rstd, gamma, T, H, 0.0f, 0,
                  0, scratch, stream);
}

void bias_dropout_residual_layernorm_fwd(bf16 *out, bf16 *ln_in, float *mean, float *rstd,
                                         const bf16 *x, const bf16 *bias, const bf16 *residual,
                                         const bf16 *gamma, const bf16 *beta, int T, int H,
                                         float eps, float p_drop, uint64_t seed,
                                         uint64_t stream_id, cudaStream_t stream)
{
    UNPAD_REQUIRE(ln_in != NULL && residual != NULL);
    ln_fwd_launch(out, ln_in, mean, rstd, x, bias, residual, gamma, beta, T, H, eps, p_drop, seed,
                  stream_id, stream);
}

void bias_dropout_residual_layernorm_bwd(bf16 *dx, bf16 *dresidual, float *dbias, float *dgamma,
                                         float *dbeta, const bf16 *dout, const bf16 *dout_add,
                                         const bf16 *ln_in, const float *mean, const float *rstd,
                                         const bf16 *gamma, int T, int H, float p_drop,
                                         uint64_t seed, uint64_t stream_id, float *scratch,
                                         cudaStream_t stream)
{
    ln_bwd_launch(dx, dresidual, dbias, dgamma, dbeta, dout, dout_add, ln_in, mean, rstd, gamma, T,
                  H, p_drop, seed, stream_id, scratch, stream);
}
