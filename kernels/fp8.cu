/* fp8.cu — bf16 -> FP8 casts with a per-tensor scale, the operands of FP8 GEMMs (E4M3 activations and
 * weights, E5M2 gradients, as NVIDIA's TransformerEngine does): cast_fp8 writes the (rows, cols)
 * copy, cast_transpose_fp8 also the (cols, rows) copy that Hopper's K-major FP8 products need for
 * the data and weight gradients. Both reduce max |x| of the input into a device float.
 * Reference: kernels/ref/fp8_ref.c. Used by the trainer's --fp8 on (the casts no producer kernel
 * makes, the weights' batched cast, the scale update), bench_gemm --fp8 and test_fp8.
 *
 * The conversion is the hardware's cvt.rn.satfinite (two floats per instruction): round to nearest
 * even, anything beyond the largest finite value (infinities too) to that value, NaN to NaN. The
 * input is bf16 in both builds: FP8 GEMMs are a question of the bf16 trainer.
 *
 * amax: each thread keeps fmaxf(|x|) (fmaxf drops NaNs), the block reduces it on the float's bits
 * (for non-negative floats the unsigned order is the float order) and one atomicMax per block folds
 * it into *amax; the grids are bounded (cast_fp8 is persistent) so that the atomics on one address
 * stay few. */
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <limits.h>

#include "fp8.cuh"
#include "kernels.h"
#include "rowops.cuh"

#define FP8_THREADS 256
#define CAST_GROUP 16  /* elements per thread and step of cast_fp8: two 16-byte loads, one store */
#define CAST_UNROLL 2  /* groups per thread in flight */
#define CT_TILE 128    /* cast_transpose: rows and columns of a block's tile */
#define CT_SUB 8       /* each thread: 8 rows x 8 columns of the tile */
#define CT_NX (CT_TILE / CT_SUB) /* 16 threads across the tile's columns, 16 down its rows */

/* Eight bf16 (one 16-byte vector) -> eight FP8 bytes (two words, element 0 in the lowest byte). */
template <int FMT>
__device__ __forceinline__ uint2 cvt8(uint4 v, float s, float &m)
{
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        float2 f = __bfloat1622float2(h[j]);
        m = fmaxf(m, fmaxf(fabsf(f.x), fabsf(f.y)));
        w[j] = fp8_cvt2<FMT>(__fmul_rn(f.x, s), __fmul_rn(f.y, s));
    }
    return make_uint2(w[0] | (w[1] << 16), w[2] | (w[3] << 16));
}

template <int FMT>
__device__ __forceinline__ uint8_t cvt1(float x, float s, float &m)
{
    m = fmaxf(m, fabsf(x));
    return (uint8_t)fp8_cvt2<FMT>(__fmul_rn(x, s), 0.0f);
}

__device__ __forceinline__ float bf16_load1(const bf16 *p)
{
    return __bfloat162float(*reinterpret_cast<const __nv_bfloat16 *>(p));
}

/* The block's max of m into *amax (all threads must call it; amax NULL: nothing). */
__device__ __forceinline__ void amax_fold(float m, float *amax)
{
    __shared__ unsigned warp_m[FP8_THREADS / 32];
    unsigned u = __reduce_max_sync(0xffffffffu, __float_as_uint(m));
    if ((threadIdx.x & 31) == 0)
        warp_m[threadIdx.x >> 5] = u;
    __syncthreads();
    if (threadIdx.x == 0 && amax) {
        for (int w = 1; w < FP8_THREADS / 32; w++)
            u = max(u, warp_m[w]);
        atomicMax(reinterpret_cast<unsigned *>(amax), u);
    }
}

/* ---- cast_fp8: the (rows, cols) tensor as n = rows x cols elements in a row ------------------------ */
/* vec: in and out 16-byte aligned. Group g = elements [16 g, 16 g + 16); the last n % 16 elements,
 * and every element when !vec, one at a time. */
template <int FMT>
__global__ void __launch_bounds__(FP8_THREADS)
    cast_fp8_kernel(uint8_t *out, float *amax, const bf16 *in, const float *scale, size_t n, int vec)
{
    const float s = *scale;
    float m = 0.0f;
    size_t tid = (size_t)blockIdx.x * FP8_THREADS + threadIdx.x, nthreads = (size_t)gridDim.x * FP8_THREADS;
    size_t ngroups = vec ? n / CAST_GROUP : 0;
    for (size_t g0 = tid; g0 < ngroups; g0 += CAST_UNROLL * nthreads) {
        uint4 v[CAST_UNROLL][2];
#pragma unroll
        for (int u = 0; u < CAST_UNROLL; u++) {
            size_t g = g0 + u * nthreads;
            if (g < ngroups) {
                const uint4 *p = reinterpret_cast<const uint4 *>(in + g * CAST_GROUP);
                v[u][0] = p[0];
                v[u][1] = p[1];
            }
        }
#pragma unroll
        for (int u = 0; u < CAST_UNROLL; u++) {
            size_t g = g0 + u * nthreads;
            if (g < ngroups) {
                uint2 a = cvt8<FMT>(v[u][0], s, m), b = cvt8<FMT>(v[u][1], s, m);
                *reinterpret_cast<uint4 *>(out + g * CAST_GROUP) = make_uint4(a.x, a.y, b.x, b.y);
            }
        }
    }
    for (size_t i = ngroups * CAST_GROUP + tid; i < n; i += nthreads)
        out[i] = cvt1<FMT>(bf16_load1(in + i), s, m);
    amax_fold(m, amax);
}

/* ---- cast_transpose_fp8 -------------------------------------------------------------------------- */
/* Byte c of each of four words, packed (word 0's in the lowest byte). */
__device__ __forceinline__ uint32_t gather_byte(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3, int c)
{
    uint32_t sel = (uint32_t)c | (uint32_t)(c + 4) << 4;
    return __byte_perm(__byte_perm(w0, w1, sel), __byte_perm(w2, w3, sel), 0x5410);
}

/* Block: a CT_TILE x CT_TILE tile at (blockIdx.y, blockIdx.x); thread (ty, tx) = (threadIdx.x / 16,
 * threadIdx.x % 16) converts rows 8 ty .. 8 ty + 7 and columns 8 tx .. 8 tx + 7 of it (eight 16-byte
 * loads in flight), stores them row-major to out, transposes its 8 x 8 bytes in registers and puts
 * column j's 8 bytes (rows 8 ty ..) in shared slot tile[j][tx][ty ^ tx]. The XOR spreads the 16
 * threads of a half-warp (one ty, every tx) over all 32 banks; without it they would share one.
 * Then each out_t row (a tile column, 128 bytes: the tile's rows) is one contiguous 128-byte run of
 * shared memory (tile[j][tx][*]), read as 16-byte chunks by 8 threads and stored as 16 bytes each
 * where aligned and whole (ld_t a multiple of 16, rows inside the tensor), else byte by byte.
 * VEC: cols % 8 == 0 and aligned pointers (16-byte loads, 8-byte row-major stores); else elements
 * one at a time (any cols). Elements outside the tensor read as 0 and are not stored. */
template <int FMT, bool VEC>
__device__ __forceinline__ void ct_tile(uint8_t *out, uint8_t *out_t, int ld_t, float *amax, const bf16 *in,
                                        const float *scale, int rows, int cols, int br, int bc)
{
    __shared__ __align__(16) uint2 tile[CT_SUB][CT_NX][CT_NX];
    const int tx = threadIdx.x % CT_NX, ty = threadIdx.x / CT_NX;
    const int r0 = br + CT_SUB * ty, c0 = bc + CT_SUB * tx;
    const float s = *scale;
    float m = 0.0f;
    uint2 q[CT_SUB]; /* row r of the thread's 8 x 8: its 8 bytes */
    if (VEC) {
        uint4 v[CT_SUB];
#pragma unroll
        for (int r = 0; r < CT_SUB; r++)
            v[r] = r0 + r < rows && c0 < cols ? *reinterpret_cast<const uint4 *>(in + (size_t)(r0 + r) * cols + c0)
                                              : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
        for (int r = 0; r < CT_SUB; r++) {
            q[r] = cvt8<FMT>(v[r], s, m);
            if (r0 + r < rows && c0 < cols)
                *reinterpret_cast<uint2 *>(out + (size_t)(r0 + r) * cols + c0) = q[r];
        }
    } else {
#pragma unroll
        for (int r = 0; r < CT_SUB; r++) {
            uint32_t w[2] = {0u, 0u};
#pragma unroll
            for (int j = 0; j < CT_SUB; j++) {
                size_t i = (size_t)(r0 + r) * cols + c0 + j;
                uint8_t b = 0;
                if (r0 + r < rows && c0 + j < cols) {
                    b = cvt1<FMT>(bf16_load1(in + i), s, m);
                    out[i] = b;
                }
                w[j / 4] |= (uint32_t)b << (8 * (j % 4));
            }
            q[r] = make_uint2(w[0], w[1]);
        }
    }
    /* column j of the 8 x 8: bytes j of rows 0..3 (word x) and 4..7 */
#pragma unroll
    for (int j = 0; j < CT_SUB; j++) {
        uint32_t lo, hi;
        if (j < 4) {
            lo = gather_byte(q[0].x, q[1].x, q[2].x, q[3].x, j);
            hi = gather_byte(q[4].x, q[5].x, q[6].x, q[7].x, j);
        } else {
            lo = gather_byte(q[0].y, q[1].y, q[2].y, q[3].y, j - 4);
            hi = gather_byte(q[4].y, q[5].y, q[6].y, q[7].y, j - 4);
        }
        tile[j][tx][ty ^ tx] = make_uint2(lo, hi);
    }
    amax_fold(m, amax); /* its barrier also orders the tile's stores before the reads below */
    for (int k = threadIdx.x; k < CT_TILE * CT_TILE / 16; k += FP8_THREADS) {
        int orow = k / 8, chunk = k % 8; /* out_t row bc + orow; its rows 16 chunk .. 16 chunk + 15 */
        int txs = orow / CT_SUB, j = orow % CT_SUB;
        int col = bc + orow, r = br + 16 * chunk;
        if (col >= cols || r >= rows)
            continue;
        /* ty = 2 chunk and 2 chunk + 1 sit in the slot pair starting at (2 chunk ^ txs) & ~1, swapped
         * when txs is odd */
        uint4 w = *reinterpret_cast<const uint4 *>(&tile[j][txs][(2 * chunk ^ txs) & ~1]);
        if (txs & 1)
            w = make_uint4(w.z, w.w, w.x, w.y);
        uint8_t *p = out_t + (size_t)col * ld_t + r;
        if (r + 16 <= rows && !((uintptr_t)p & 15)) {
            *reinterpret_cast<uint4 *>(p) = w;
        } else {
            const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
            for (int b = 0; b < 16 && r + b < rows; b++)
                p[b] = (uint8_t)(ws[b / 4] >> (8 * (b % 4)));
        }
    }
}

template <int FMT, bool VEC>
__global__ void __launch_bounds__(FP8_THREADS)
    cast_transpose_fp8_kernel(uint8_t *out, uint8_t *out_t, int ld_t, float *amax, const bf16 *in,
                              const float *scale, int rows, int cols)
{
    ct_tile<FMT, VEC>(out, out_t, ld_t, amax, in, scale, rows, cols, blockIdx.y * CT_TILE, blockIdx.x * CT_TILE);
}

/* Tensor blockIdx.y of the table, its tile blockIdx.x in row-major tile order (none past its last
 * tile: the whole block returns). */
template <int FMT>
__global__ void __launch_bounds__(FP8_THREADS) cast_transpose_fp8_batch_kernel(const fp8_cast_item *items)
{
    const fp8_cast_item it = items[blockIdx.y];
    int tiles_x = (it.cols + CT_TILE - 1) / CT_TILE;
    int br = (int)(blockIdx.x / tiles_x) * CT_TILE, bc = (int)(blockIdx.x % tiles_x) * CT_TILE;
    if (br >= it.rows)
        return;
    ct_tile<FMT, true>(it.out, it.out_t, it.ld_t, it.amax, it.in, it.scale, it.rows, it.cols, br, bc);
}

/* ---- launchers ----------------------------------------------------------------------------------- */
void cast_fp8(uint8_t *out, float *amax, const bf16 *in, const float *scale, int rows, int cols, fp8_format fmt,
              cudaStream_t stream)
{
    UNPAD_REQUIRE(rows >= 1 && cols >= 1 && (fmt == FP8_E4M3 || fmt == FP8_E5M2));
    size_t n = (size_t)rows * cols;
    int vec = !((uintptr_t)in & 15) && !((uintptr_t)out & 15);
    /* threads wanted: one per CAST_UNROLL groups (one per element without vectors) */
    size_t work = vec ? (n / CAST_GROUP + CAST_UNROLL - 1) / CAST_UNROLL : n;
    size_t blocks = (work + FP8_THREADS - 1) / FP8_THREADS;
    int want = blocks > (size_t)INT_MAX ? INT_MAX : (int)blocks;
    if (fmt == FP8_E4M3) {
        int grid = persistent_grid((const void *)cast_fp8_kernel<FP8_E4M3>, FP8_THREADS, want);
        cast_fp8_kernel<FP8_E4M3><<<grid, FP8_THREADS, 0, stream>>>(out, amax, in, scale, n, vec);
    } else {
        int grid = persistent_grid((const void *)cast_fp8_kernel<FP8_E5M2>, FP8_THREADS, want);
        cast_fp8_kernel<FP8_E5M2><<<grid, FP8_THREADS, 0, stream>>>(out, amax, in, scale, n, vec);
    }
    cudaCheck(cudaGetLastError());
}

void cast_transpose_fp8(uint8_t *out, uint8_t *out_t, int ld_t, float *amax, const bf16 *in, const float *scale,
                        int rows, int cols, fp8_format fmt, cudaStream_t stream)
{
    UNPAD_REQUIRE(rows >= 1 && cols >= 1 && ld_t >= rows && (fmt == FP8_E4M3 || fmt == FP8_E5M2));
    UNPAD_REQUIRE((rows + CT_TILE - 1) / CT_TILE <= 65535); /* the grid's y */
    dim3 grid((cols + CT_TILE - 1) / CT_TILE, (rows + CT_TILE - 1) / CT_TILE);
    bool vec = cols % 8 == 0 && !((uintptr_t)in & 15) && !((uintptr_t)out & 7);
#define CT_LAUNCH(F, V)                                                                           \
    cast_transpose_fp8_kernel<F, V><<<grid, FP8_THREADS, 0, stream>>>(out, out_t, ld_t, amax, in, scale, rows, cols)
    if (fmt == FP8_E4M3) {
        if (vec)
            CT_LAUNCH(FP8_E4M3, true);
        else
            CT_LAUNCH(FP8_E4M3, false);
    } else {
        if (vec)
            CT_LAUNCH(FP8_E5M2, true);
        else
            CT_LAUNCH(FP8_E5M2, false);
    }
#undef CT_LAUNCH
    cudaCheck(cudaGetLastError());
}

/* ---- delayed scaling ------------------------------------------------------------------------------ */
__global__ void fp8_scales_update_kernel(float *amax, float *history, float *scale, float *inv, const uint8_t *fmt,
                                         int n, int len, int pos, int init)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float a = amax[i];
    a = isfinite(a) ? a : 0.0f;
    amax[i] = 0.0f;
    float *h = history + (size_t)i * len, m = 0.0f;
    for (int j = 0; j < len; j++) {
        if (init || j == pos)
            h[j] = a;
        m = fmaxf(m, h[j]);
    }
    if (!(m > 0.0f))
        return;
    /* the largest k with m 2^k <= fmax: m = fm 2^em, fmax = ff 2^ef (fm, ff in [0.5, 1)) */
    int em, ef;
    float fm = frexpf(m, &em), ff = frexpf(fmt[i] == FP8_E4M3 ? 448.0f : 57344.0f, &ef);
    int k = ef - em - (fm > ff ? 1 : 0);
    k = k < -126 ? -126 : k > 126 ? 126 : k;
    scale[i] = ldexpf(1.0f, k);
    inv[8 * i] = ldexpf(1.0f, -k);
    inv[8 * i + 4] = scale[i];
}

void fp8_scales_update(float *amax, float *history, float *scale, float *inv, const uint8_t *fmt, int n, int len,
                       int pos, int init, cudaStream_t stream)
{
    UNPAD_REQUIRE(n >= 1 && len >= 1 && pos >= 0 && pos < len);
    fp8_scales_update_kernel<<<(n + 127) / 128, 128, 0, stream>>>(amax, history, scale, inv, fmt, n, len, pos, init);
    cudaCheck(cudaGetLastError());
}

void cast_transpose_fp8_batch(const fp8_cast_item *items, int n, int max_tiles, fp8_format fmt, cudaStream_t stream)
{
    UNPAD_REQUIRE(n >= 1 && n <= 65535 && max_tiles >= 1 && (fmt == FP8_E4M3 || fmt == FP8_E5M2));
    dim3 grid((unsigned)max_tiles, (unsigned)n);
    if (fmt == FP8_E4M3)
        cast_transpose_fp8_batch_kernel<FP8_E4M3><<<grid, FP8_THREADS, 0, stream>>>(items);
    else
        cast_transpose_fp8_batch_kernel<FP8_E5M2><<<grid, FP8_THREADS, 0, stream>>>(items);
    cudaCheck(cudaGetLastError());
}

int fp8_cast_item_ok(const fp8_cast_item *it)
{
    return it->rows >= 1 && it->cols >= 1 && it->cols % 8 == 0 && it->ld_t >= it->rows && it->ld_t % 16 == 0 &&
           !((uintptr_t)it->in & 15) && !((uintptr_t)it->out & 7) && !((uintptr_t)it->out_t & 15);
}

__global__ void fp8_amax_fold_kernel(float *amax, int stride, int offset, float *src, int src_stride, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float *a = amax + (size_t)i * stride + offset, *m = src + (size_t)i * src_stride;
    *a = fmaxf(*a, *m);
    *m = 0.0f;
}

void fp8_amax_fold(float *amax, int stride, int offset, float *src, int src_stride, int n, cudaStream_t stream)
{
    UNPAD_REQUIRE(n >= 1 && stride >= 1 && offset >= 0 && src_stride >= 1);
    fp8_amax_fold_kernel<<<(n + 127) / 128, 128, 0, stream>>>(amax, stride, offset, src, src_stride, n);
    cudaCheck(cudaGetLastError());
}
