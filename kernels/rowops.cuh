/* rowops.cuh — device helpers shared by the memory-bound kernel families (embedding, layernorm,
 * gelu, loss): 16-byte bf16 vectors, warp and block sums, and the fixed-order reduction of
 * per-block column partials that keeps every parameter gradient deterministic. */
#ifndef UNPAD_ROWOPS_CUH
#define UNPAD_ROWOPS_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "common.h"

/* A launcher's limit check: stops with file:line and the violated condition. */
#define UNPAD_REQUIRE(cond)                                                                       \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "%s:%d: launcher limit violated: %s\n", __FILE__, __LINE__, #cond);  \
            exit(EXIT_FAILURE);                                                                   \
        }                                                                                         \
    } while (0)

/* Eight bf16 (16 bytes) <-> eight floats. */
__device__ __forceinline__ void load8(float f[8], const bf16 *p)
{
    uint4 u = *reinterpret_cast<const uint4 *>(p);
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
    for (int j = 0; j < 4; j++) {
        float2 t = __bfloat1622float2(h[j]);
        f[2 * j] = t.x;
        f[2 * j + 1] = t.y;
    }
}

__device__ __forceinline__ void store8(bf16 *p, const float f[8])
{
    uint4 u;
    __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&u);
#pragma unroll
    for (int j = 0; j < 4; j++)
        h[j] = __floats2bfloat162_rn(f[2 * j], f[2 * j + 1]);
    *reinterpret_cast<uint4 *>(p) = u;
}

/* Rounds eight floats to bf16 and back (the value a bf16 store would keep). */
__device__ __forceinline__ void round8(float f[8])
{
#pragma unroll
    for (int j = 0; j < 8; j++)
        f[j] = __bfloat162float(__float2bfloat16_rn(f[j]));
}

__device__ __forceinline__ float bf16_load(const bf16 *p)
{
    return __bfloat162float(*reinterpret_cast<const __nv_bfloat16 *>(p));
}

__device__ __forceinline__ void bf16_store(bf16 *p, float f)
{
    *reinterpret_cast<__nv_bfloat16 *>(p) = __float2bfloat16_rn(f);
}

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum over the block (blockDim.x a multiple of 32, <= 1024) in a fixed order; all threads get it.
 * `sh` holds 32 floats; the function ends with the block synchronised. */
__device__ __forceinline__ float block_sum(float v, float *sh)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads(); /* sh may still be read from a previous call */
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : 0.0f;
    return warp_sum(v);
}

/* A row of H columns held by one warp: lane owns the 8-column vectors lane + 32 k, k < K, those
 * below nvec = H / 8. Mean and 1 / sqrt(var + eps) by two passes over the registers. */
template <int K>
__device__ __forceinline__ void warp_row_stats(const float v[K][8], int lane, int nvec, int H,
                                               float eps, float *mean, float *rstd)
{
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < K; k++)
        if (lane + 32 * k < nvec)
#pragma unroll
            for (int j = 0; j < 8; j++)
                s += v[k][j];
    float mu = warp_sum(s) / H;
    float s2 = 0.0f;
#pragma unroll
    for (int k = 0; k < K; k++)
        if (lane + 32 * k < nvec)
#pragma unroll
            for (int j = 0; j < 8; j++)
                s2 += (v[k][j] - mu) * (v[k][j] - mu);
    *mean = mu;
    *rstd = rsqrtf(warp_sum(s2) / H + eps);
}

/* Per-warp column accumulators in shared memory, for the backward kernels' parameter gradients:
 * `parts` accumulators per warp, each K x 8 x 32 floats, lane-contiguous (slot (k, j) of lane l
 * holds column (l + 32 k) * 8 + j), so every lane updates only its own slots without bank
 * conflicts and without atomics. The block needs blockDim.x / 32 * parts * K * 256 floats. */
template <int K>
__device__ __forceinline__ float *warp_acc(float *sh, int parts, int part)
{
    return sh + ((threadIdx.x >> 5) * parts + part) * (K * 256) + (threadIdx.x & 31);
}
/* The slot of (k, j) in a warp_acc() pointer. */
#define WARP_ACC(p, k, j) (p)[((k) * 8 + (j)) * 32]

template <int K>
__device__ __forceinline__ void warp_acc_zero(float *sh, int parts)
{
    float *a = warp_acc<K>(sh, parts, 0);
    for (int i = 0; i < parts * K * 8; i++)
        a[i * 32] = 0.0f;
}

/* After a __syncthreads(): dst[part * part_stride + c] = the sum over the block's warps, in warp
 * order, of accumulator `part` at column c (c < 8 nvec). */
template <int K>
__device__ __forceinline__ void block_acc_store(const float *sh, int parts, float *dst,
                                                size_t part_stride, int nvec)
{
    int nw = blockDim.x >> 5, per = K * 256;
    for (int idx = threadIdx.x; idx < parts * per; idx += blockDim.x) {
        int part = idx / per, rem = idx % per;
        int k = rem >> 8, j = (rem >> 5) & 7, l = rem & 31;
        int vi = l + 32 * k;
        if (vi >= nvec)
            continue;
        float s = 0.0f;
        for (int w = 0; w < nw; w++)
            s += sh[(w * parts + part) * per + rem];
        dst[part * part_stride + vi * 8 + j] = s;
    }
}

/* Warps per block of a backward kernel holding `parts` (<= 3) shared accumulators of a row with K
 * vectors per lane: 8 while they fit in 96 KiB, fewer for very wide rows (correct, not tuned). */
#define UNPAD_ACC_WARPS(K) ((K) <= 4 ? 8 : (K) == 8 ? 2 : 1)

/* Runs the statement(s) given with constexpr K = vectors per lane for a row of H (H % 8 == 0, H <= 4096). */
#define UNPAD_ROW_DISPATCH(H, ...)                                                                \
    do {                                                                                          \
        int per_lane_ = ((H) / 8 + 31) / 32;                                                      \
        if (per_lane_ <= 1) { constexpr int K = 1; __VA_ARGS__; }                                 \
        else if (per_lane_ <= 2) { constexpr int K = 2; __VA_ARGS__; }                            \
        else if (per_lane_ <= 4) { constexpr int K = 4; __VA_ARGS__; }                            \
        else if (per_lane_ <= 8) { constexpr int K = 8; __VA_ARGS__; }                            \
        else { constexpr int K = 16; __VA_ARGS__; }                                               \
    } while (0)

/* dst[c] += sum over b < nblocks of partials[b * stride + c]: the second half of every
 * deterministic column reduction. A block (32 x 32) takes 32 columns; thread row y sums the
 * partials b = y, y + 32, ... in order, then the 32 sums are added in a fixed tree. */
static __global__ void colsum_finalize_kernel(float *dst, const float *partials, int nblocks,
                                              size_t stride, int width)
{
    __shared__ float sh[32][33];
    int c = blockIdx.x * 32 + threadIdx.x;
    float s = 0.0f;
    if (c < width) {
#pragma unroll 4
        for (int b = threadIdx.y; b < nblocks; b += 32)
            s += partials[(size_t)b * stride + c];
    }
    sh[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    for (int half = 16; half > 0; half >>= 1) {
        if (threadIdx.y < half)
            sh[threadIdx.y][threadIdx.x] += sh[threadIdx.y + half][threadIdx.x];
        __syncthreads();
    }
    if (threadIdx.y == 0 && c < width)
        dst[c] += sh[0][threadIdx.x];
}

/* Launches colsum_finalize_kernel: partials of block b start at partials + b * stride. */
static inline void colsum_finalize_strided(float *dst, const float *partials, int nblocks,
                                           size_t stride, int width, cudaStream_t stream)
{
    colsum_finalize_kernel<<<(width + 31) / 32, dim3(32, 32), 0, stream>>>(dst, partials, nblocks,
                                                                           stride, width);
    cudaCheck(cudaGetLastError());
}

/* The common case: partials (nblocks, width) contiguous. */
static inline void colsum_finalize(float *dst, const float *partials, int nblocks, int width,
                                   cudaStream_t stream)
{
    colsum_finalize_strided(dst, partials, nblocks, (size_t)width, width, stream);
}

#endif
