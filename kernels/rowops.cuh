/* rowops.cuh — device helpers shared by the memory-bound kernel families (embedding, layernorm,
 * gelu, loss): vectors of eight floatX, warp and block sums, and the fixed-order reduction of
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

/* vec8: eight floatX in registers, the unit every row kernel loads and stores: one 16-byte vector
 * of bf16, or two of fp32 in the fp32 build (common.h). Element offsets stay multiples of 8, so a
 * vec8 is always 16-byte aligned. */
#ifdef UNPAD_FP32
struct vec8 {
    float4 lo, hi;
};

__device__ __forceinline__ vec8 vec8_zero()
{
    return vec8{make_float4(0.f, 0.f, 0.f, 0.f), make_float4(0.f, 0.f, 0.f, 0.f)};
}

__device__ __forceinline__ vec8 vec8_load(const floatX *p)
{
    const float4 *q = reinterpret_cast<const float4 *>(p);
    return vec8{q[0], q[1]};
}

__device__ __forceinline__ void vec8_store(floatX *p, vec8 v)
{
    float4 *q = reinterpret_cast<float4 *>(p);
    q[0] = v.lo;
    q[1] = v.hi;
}

__device__ __forceinline__ void unpack8(float f[8], vec8 u)
{
    f[0] = u.lo.x, f[1] = u.lo.y, f[2] = u.lo.z, f[3] = u.lo.w;
    f[4] = u.hi.x, f[5] = u.hi.y, f[6] = u.hi.z, f[7] = u.hi.w;
}

__device__ __forceinline__ vec8 pack8(const float f[8])
{
    return vec8{make_float4(f[0], f[1], f[2], f[3]), make_float4(f[4], f[5], f[6], f[7])};
}

/* The value a floatX store keeps: fp32 keeps everything. */
__device__ __forceinline__ void round8(float f[8]) {}
__device__ __forceinline__ float round1(float f) { return f; }

__device__ __forceinline__ float load1(const floatX *p) { return *p; }
__device__ __forceinline__ void store1(floatX *p, float f) { *p = f; }
#else
typedef uint4 vec8;

__device__ __forceinline__ vec8 vec8_zero() { return make_uint4(0u, 0u, 0u, 0u); }
__device__ __forceinline__ vec8 vec8_load(const floatX *p) { return *reinterpret_cast<const uint4 *>(p); }
__device__ __forceinline__ void vec8_store(floatX *p, vec8 v) { *reinterpret_cast<uint4 *>(p) = v; }

__device__ __forceinline__ void unpack8(float f[8], vec8 u)
{
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
    for (int j = 0; j < 4; j++) {
        float2 t = __bfloat1622float2(h[j]);
        f[2 * j] = t.x;
        f[2 * j + 1] = t.y;
    }
}

__device__ __forceinline__ vec8 pack8(const float f[8])
{
    uint4 u;
    __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&u);
#pragma unroll
    for (int j = 0; j < 4; j++)
        h[j] = __floats2bfloat162_rn(f[2 * j], f[2 * j + 1]);
    return u;
}

/* Rounds floats to bf16 and back (the value a bf16 store would keep). */
__device__ __forceinline__ void round8(float f[8])
{
#pragma unroll
    for (int j = 0; j < 8; j++)
        f[j] = __bfloat162float(__float2bfloat16_rn(f[j]));
}
__device__ __forceinline__ float round1(float f) { return __bfloat162float(__float2bfloat16_rn(f)); }

__device__ __forceinline__ float load1(const floatX *p)
{
    return __bfloat162float(*reinterpret_cast<const __nv_bfloat16 *>(p));
}

__device__ __forceinline__ void store1(floatX *p, float f)
{
    *reinterpret_cast<__nv_bfloat16 *>(p) = __float2bfloat16_rn(f);
}
#endif

/* Eight floatX <-> eight floats. */
__device__ __forceinline__ void load8(float f[8], const floatX *p) { unpack8(f, vec8_load(p)); }
__device__ __forceinline__ void store8(floatX *p, const float f[8]) { vec8_store(p, pack8(f)); }

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

/* ---- row groups: the LayerNorm row loop shared by embedding.cu and layernorm.cu ----------------
 * A row of H columns (nvec = H / 8 vectors of 8) is held by a group of RW warps (GT = 32 RW
 * threads); thread gt of the group owns the vectors gt + GT k, k < KV, those below nvec. A group
 * takes R rows at a time, so each thread has R * KV 16-byte loads in flight and the cross-warp
 * sums of the R rows share one barrier. Column accumulators (the parameter gradients) then need
 * only KV * 8 registers per thread and accumulator. Rows or vectors out of range hold zeros.
 * A persistent kernel that shares shared memory across groups (the backward's group_acc_store)
 * runs every group of a block for the block's number of batches (a group whose rows have run out
 * works on absent rows), so all groups pass the same number of named barriers:
 * with unequal counts compute-sanitizer racecheck reported hazards between the __syncthreads-
 * ordered stores and loads of group_acc_store (H200, 2026-12-03), while every check passed. */

/* Runs the statement(s) given with constexpr RW (warps per row) and KV (vectors per thread) for a
 * row of H columns (H % 8 == 0, H <= 4096). */
#define UNPAD_ROW_GROUP_DISPATCH(H, ...)                                                          \
    do {                                                                                          \
        int nvec_ = (H) / 8;                                                                      \
        if (nvec_ <= 32) { constexpr int RW = 1, KV = 1; __VA_ARGS__; }                           \
        else if (nvec_ <= 64) { constexpr int RW = 2, KV = 1; __VA_ARGS__; }                      \
        else if (nvec_ <= 128) { constexpr int RW = 4, KV = 1; __VA_ARGS__; }                     \
        else if (nvec_ <= 256) { constexpr int RW = 4, KV = 2; __VA_ARGS__; }                     \
        else { constexpr int RW = 4, KV = 4; __VA_ARGS__; }                                       \
    } while (0)

/* The raw vectors of rows r0 .. r0 + R - 1 of a (T, H) floatX tensor owned by thread gt
 * (zeros where the row, the vector or the tensor p is absent). Issued together: R * KV loads in
 * flight before the first use. */
template <int RW, int KV, int R>
__device__ __forceinline__ void group_rows_load(vec8 q[R][KV], const floatX *p, int r0, int T, int H,
                                                int gt)
{
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int k = 0; k < KV; k++) {
            int vi = gt + 32 * RW * k;
            q[r][k] = vec8_zero();
            if (p && r0 + r < T && vi < H / 8)
                q[r][k] = vec8_load(p + (size_t)(r0 + r) * H + vi * 8);
        }
}

/* A row-independent vector (gamma, beta) of the thread's columns, as floats (zeros past H or if
 * p is NULL). */
template <int RW, int KV>
__device__ __forceinline__ void group_cols_load(float f[KV][8], const floatX *p, int H, int gt)
{
#pragma unroll
    for (int k = 0; k < KV; k++) {
        int vi = gt + 32 * RW * k;
        if (p && vi < H / 8)
            load8(f[k], p + vi * 8);
        else
#pragma unroll
            for (int j = 0; j < 8; j++)
                f[k][j] = 0.0f;
    }
}

/* Calls f(r, k, e) for each present (row r0 + r, vector gt + 32 RW k) of a batch, e the flat
 * index of the vector's first element in the (T, H) tensor. */
template <int RW, int KV, int R, typename Fn>
__device__ __forceinline__ void group_for_each(int r0, int T, int H, int gt, Fn f)
{
#pragma unroll
    for (int r = 0; r < R; r++) {
        if (r0 + r >= T)
            break;
#pragma unroll
        for (int k = 0; k < KV; k++) {
            int vi = gt + 32 * RW * k;
            if (vi < H / 8)
                f(r, k, (size_t)(r0 + r) * H + vi * 8);
        }
    }
}

/* Zeroes NA column accumulators of KV x 8 registers. */
template <int NA, int KV>
__device__ __forceinline__ void group_acc_zero(float acc[NA][KV][8])
{
#pragma unroll
    for (int a = 0; a < NA; a++)
#pragma unroll
        for (int k = 0; k < KV; k++)
#pragma unroll
            for (int j = 0; j < 8; j++)
                acc[a][k][j] = 0.0f;
}

/* out = a + b, element-wise, from raw vectors (e.g. dy = dout + dout_add). */
template <int R, int KV>
__device__ __forceinline__ void group_unpack_sum(float out[R][KV][8], const vec8 a[R][KV],
                                                 const vec8 b[R][KV])
{
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int k = 0; k < KV; k++) {
            float t[8];
            unpack8(out[r][k], a[r][k]);
            unpack8(t, b[r][k]);
#pragma unroll
            for (int j = 0; j < 8; j++)
                out[r][k][j] += t[j];
        }
}

/* The saved mean and rstd of rows r0 .. r0 + R - 1 (0 past T). */
template <int R>
__device__ __forceinline__ void group_stats_load(float mu[R], float rs[R], const float *mean,
                                                 const float *rstd, int r0, int T)
{
#pragma unroll
    for (int r = 0; r < R; r++) {
        mu[r] = r0 + r < T ? mean[r0 + r] : 0.0f;
        rs[r] = r0 + r < T ? rstd[r0 + r] : 0.0f;
    }
}

/* Thread 0 of the group stores the mean and rstd of rows r0 .. r0 + R - 1 (those below T). */
template <int R>
__device__ __forceinline__ void group_stats_store(float *mean_out, float *rstd_out,
                                                  const float mean[R], const float rstd[R], int r0,
                                                  int T, int gt)
{
#pragma unroll
    for (int r = 0; r < R; r++)
        if (gt == 0 && r0 + r < T) {
            mean_out[r0 + r] = mean[r];
            rstd_out[r0 + r] = rstd[r];
        }
}

/* Sums NV values per thread over its row group, in a fixed order; every thread of the group gets
 * the sums. sh: 2 * NV floats per warp of the block; `parity` alternates the two halves, so one
 * barrier per call suffices (a half is rewritten only after the next call's barrier). */
template <int RW, int NV>
__device__ __forceinline__ void group_sum(float v[NV], float *sh, int &parity)
{
#pragma unroll
    for (int i = 0; i < NV; i++)
        v[i] = warp_sum(v[i]);
    if (RW == 1)
        return;
    int warp = threadIdx.x >> 5, nw = blockDim.x >> 5, g = warp / RW;
    float *buf = sh + parity * nw * NV;
    parity ^= 1;
    if ((threadIdx.x & 31) == 0)
#pragma unroll
        for (int i = 0; i < NV; i++)
            buf[warp * NV + i] = v[i];
    /* named barrier of the group's RW warps (id 0 is __syncthreads) */
    asm volatile("bar.sync %0, %1;" ::"r"(1 + g), "r"(32 * RW) : "memory");
#pragma unroll
    for (int i = 0; i < NV; i++) {
        float s = 0.0f;
#pragma unroll
        for (int w = 0; w < RW; w++)
            s += buf[(g * RW + w) * NV + i];
        v[i] = s;
    }
}

/* LayerNorm forward of R rows held by a group: mean and 1 / sqrt(var + eps) of each row by two
 * passes over the registers, then v = (v - mean) * rstd * gamma + beta in place. */
template <int RW, int KV, int R>
__device__ __forceinline__ void group_ln_fwd(float v[R][KV][8], float mean[R], float rstd[R],
                                             const float g[KV][8], const float b[KV][8], int H,
                                             float eps, int gt, float *sh, int &parity)
{
    float s[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        s[r] = 0.0f;
#pragma unroll
        for (int k = 0; k < KV; k++)
#pragma unroll
            for (int j = 0; j < 8; j++)
                s[r] += v[r][k][j];
    }
    group_sum<RW, R>(s, sh, parity);
#pragma unroll
    for (int r = 0; r < R; r++) {
        mean[r] = s[r] / H;
        s[r] = 0.0f;
#pragma unroll
        for (int k = 0; k < KV; k++)
            if (gt + 32 * RW * k < H / 8) /* absent vectors hold 0, not the mean */
#pragma unroll
                for (int j = 0; j < 8; j++)
                    s[r] += (v[r][k][j] - mean[r]) * (v[r][k][j] - mean[r]);
    }
    group_sum<RW, R>(s, sh, parity);
#pragma unroll
    for (int r = 0; r < R; r++) {
        rstd[r] = rsqrtf(s[r] / H + eps);
#pragma unroll
        for (int k = 0; k < KV; k++)
#pragma unroll
            for (int j = 0; j < 8; j++)
                v[r][k][j] = (v[r][k][j] - mean[r]) * rstd[r] * g[k][j] + b[k][j];
    }
}

/* LayerNorm backward of R rows held by a group. In: dy (zeros where absent), x the LayerNorm
 * input, the saved mean / rstd. Out: dy becomes dr, the gradient of the LayerNorm input; x
 * becomes x-hat; acc_g += dy * x-hat and acc_b += dy (the dgamma / dbeta column sums). */
template <int RW, int KV, int R>
__device__ __forceinline__ void group_ln_bwd(float dy[R][KV][8], float x[R][KV][8],
                                             const float mean[R], const float rstd[R],
                                             const float g[KV][8], float acc_g[KV][8],
                                             float acc_b[KV][8], int H, float *sh, int &parity)
{
    float ab[2 * R]; /* per row: sums of dy * gamma and dy * gamma * x-hat */
#pragma unroll
    for (int r = 0; r < R; r++) {
        ab[2 * r] = ab[2 * r + 1] = 0.0f;
#pragma unroll
        for (int k = 0; k < KV; k++)
#pragma unroll
            for (int j = 0; j < 8; j++) {
                x[r][k][j] = (x[r][k][j] - mean[r]) * rstd[r];
                acc_b[k][j] += dy[r][k][j];
                acc_g[k][j] += dy[r][k][j] * x[r][k][j];
                float dg = dy[r][k][j] * g[k][j];
                ab[2 * r] += dg;
                ab[2 * r + 1] += dg * x[r][k][j];
            }
    }
    group_sum<RW, 2 * R>(ab, sh, parity);
#pragma unroll
    for (int r = 0; r < R; r++) {
        float a = ab[2 * r] / H, b = ab[2 * r + 1] / H;
#pragma unroll
        for (int k = 0; k < KV; k++)
#pragma unroll
            for (int j = 0; j < 8; j++)
                dy[r][k][j] = rstd[r] * (dy[r][k][j] * g[k][j] - a - x[r][k][j] * b);
    }
}

/* Writes per-thread column accumulators acc (NA of them, KV x 8 each) as one block partial:
 * dst[a * part_stride + c] = the sum over the block's row groups, in group order, of accumulator a
 * at column c (c < H). sh: blockDim.x * 8 floats. Ends with the block synchronised. */
template <int RW, int KV, int NA>
__device__ __forceinline__ void group_acc_store(float acc[NA][KV][8], float *sh, float *dst,
                                                size_t part_stride, int H)
{
    constexpr int GT = 32 * RW;
    int gt = threadIdx.x % GT, g = threadIdx.x / GT, G = blockDim.x / GT;
#pragma unroll
    for (int a = 0; a < NA; a++)
#pragma unroll
        for (int k = 0; k < KV; k++) {
            __syncthreads();
#pragma unroll
            for (int j = 0; j < 8; j++) /* [j][thread]: conflict-free */
                sh[j * blockDim.x + threadIdx.x] = acc[a][k][j];
            __syncthreads();
            int vi = gt + GT * k;
            if (g == 0 && vi < H / 8) {
                float s[8];
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    s[j] = 0.0f;
                    for (int q = 0; q < G; q++)
                        s[j] += sh[j * blockDim.x + q * GT + gt];
                }
                float4 *o = reinterpret_cast<float4 *>(dst + a * part_stride + vi * 8);
                o[0] = make_float4(s[0], s[1], s[2], s[3]);
                o[1] = make_float4(s[4], s[5], s[6], s[7]);
            }
        }
    __syncthreads();
}

/* dst[c] (+)= sum over b < nblocks of partials[b * stride + c]: the second half of every
 * deterministic column reduction; accumulate 0 writes dst (the first micro-batch of a step), 1 adds
 * to it. A block (32 x 32) takes 32 columns; thread row y sums the
 * partials b = y, y + 32, ... in order, then the 32 sums are added in a fixed tree. blockIdx.y
 * picks one of up to three (dst, partials + blockIdx.y * part_stride) pairs, so the parameter
 * gradients of one backward finish in one launch. */
static __global__ void colsum_finalize_kernel(float *dst0, float *dst1, float *dst2,
                                              const float *partials, int nblocks, size_t stride,
                                              size_t part_stride, int width, int accumulate)
{
    __shared__ float sh[32][33];
    float *dst = blockIdx.y == 0 ? dst0 : blockIdx.y == 1 ? dst1 : dst2;
    partials += blockIdx.y * part_stride;
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
        dst[c] = accumulate ? dst[c] + sh[0][threadIdx.x] : sh[0][threadIdx.x];
}

/* Launches colsum_finalize_kernel: partials of block b start at partials + b * stride. */
static inline void colsum_finalize_strided(float *dst, const float *partials, int nblocks,
                                           size_t stride, int width, int accumulate,
                                           cudaStream_t stream)
{
    colsum_finalize_kernel<<<(width + 31) / 32, dim3(32, 32), 0, stream>>>(
        dst, NULL, NULL, partials, nblocks, stride, 0, width, accumulate);
    cudaCheck(cudaGetLastError());
}

/* The common case: partials (nblocks, width) contiguous. */
static inline void colsum_finalize(float *dst, const float *partials, int nblocks, int width,
                                   int accumulate, cudaStream_t stream)
{
    colsum_finalize_strided(dst, partials, nblocks, (size_t)width, width, accumulate, stream);
}

/* Two or three reductions in one launch: partials (nparts, nblocks, width) with part a at
 * partials + a * part_stride into d0, d1 and d2 (d2 NULL: two parts). */
static inline void colsum_finalize3(float *d0, float *d1, float *d2, const float *partials,
                                    int nblocks, size_t part_stride, int width, int accumulate,
                                    cudaStream_t stream)
{
    dim3 grid((width + 31) / 32, d2 ? 3 : 2);
    colsum_finalize_kernel<<<grid, dim3(32, 32), 0, stream>>>(d0, d1, d2, partials, nblocks,
                                                              (size_t)width, part_stride, width,
                                                              accumulate);
    cudaCheck(cudaGetLastError());
}

/* Blocks of a persistent grid: as many as are resident at once on this device (occupancy x SMs,
 * asked once per kernel), at most `want`. Only for kernels whose results do not depend on the
 * block count. Not thread-safe against a first call from two threads at once (the trainer
 * launches from one thread). */
static inline int persistent_grid(const void *kernel, int threads, int want)
{
    static int sms = 0;
    if (!sms) {
        int dev;
        cudaCheck(cudaGetDevice(&dev));
        cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    }
    static const void *seen[32];
    static int seen_threads[32], seen_per_sm[32], nseen = 0;
    int per_sm = 0;
    for (int i = 0; i < nseen; i++)
        if (seen[i] == kernel && seen_threads[i] == threads)
            per_sm = seen_per_sm[i];
    if (!per_sm) {
        cudaCheck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
        if (per_sm < 1)
            per_sm = 1;
        if (nseen < 32) {
            seen[nseen] = kernel, seen_threads[nseen] = threads, seen_per_sm[nseen] = per_sm;
            nseen++;
        }
    }
    int grid = per_sm * sms;
    return want < grid ? (want > 0 ? want : 1) : grid;
}

#endif
