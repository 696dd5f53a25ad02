/* fmha.cu — variable-length fused multi-head attention, head size 64, forward and backward, for
 * sm_90 (see fmha.h for the shapes, the math and the dropout mask). Tensor cores through
 * mma.sync.m16n8k16 (bf16 in, fp32 accumulate), operands from shared memory through ldmatrix,
 * tiles fetched with cp.async (double-buffered) and zero-filled past the end of a sequence.
 *
 * Forward (flash-attention style): one CTA per (query tile of BM rows, head, sequence); each warp
 * owns 16*MT query rows and keeps Q, the output accumulator and the running max / sum in
 * registers while 64-key tiles of K and V stream through shared memory; the score tile becomes
 * the A operand of P V without leaving registers. No [L, L] matrix exists anywhere.
 *
 * Backward (flash-attention 2 style): one CTA per (key tile of BN = 16*NW keys, head, sequence);
 * each warp owns 16 keys, holds their K and V rows and their dK, dV accumulators in registers and
 * walks over all query tiles, recomputing P^T = exp(scale K Q^T - lse) and dP^T = V dO^T in
 * registers. dS^T goes through shared memory once so that the CTA can add dS K into an fp32 dQ
 * accumulator in the workspace (float2 atomics: several key tiles add to the same rows). A small
 * kernel first computes D = rowsum(dout .* out) and zeroes the group's dQ rows and completion
 * counters; a last pass converts dQ to bf16 (the "fused-cvt" shapes instead let the last CTA of
 * each (sequence, head) convert its rows: slower, kept for comparison). Every kernel touches only
 * its group's tokens, so groups may run concurrently on different streams with one workspace. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "dropout.h"
#include "fmha.h"
#include "fmha_launch.cuh"

#ifdef UNPAD_FP32
#error "fmha.cu is the bf16 tensor-core kernel; the fp32 build compiles kernels/fmha_fp32.cu instead"
#endif


typedef __nv_bfloat16 bf16_t;

namespace {

constexpr int HD = 64;           /* head size */
constexpr int LDS = HD + 8;      /* shared row stride in elements: 144-byte rows put the 8 rows
                                    of an ldmatrix 8x8 load in 8 different bank groups */
constexpr int KT = 64;           /* forward: keys per K/V tile */
constexpr float LOG2E = 1.4426950408889634f;
constexpr float SCALE = 0.125f;  /* 1 / sqrt(64) */

/* ---- device helpers ------------------------------------------------------------------------- */
__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/* 16-byte global -> shared copy; valid == false writes 16 zero bytes (src is not read). */
__device__ __forceinline__ void cp_async16(void *dst, const void *src, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
                 "r"(valid ? 16 : 0)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

/* Four 8x8 bf16 matrices; lane i gives the address of row i % 8 of matrix i / 8. */
__device__ __forceinline__ void ldsm_x4(uint32_t r[4], const bf16_t *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t r[4], const bf16_t *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

/* c (16x8 fp32) += a (16x16 bf16, row) * b (16x8 bf16, col). */
__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Two floats as a bf16 pair, lo in the low half (the lower column of an mma fragment). */
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}

__device__ __forceinline__ float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* Lane offsets into a tile for ldmatrix x4 (row, column of the 8x8 matrix this lane addresses):
 *  A operand 16x16 at (r, c), row-major storage:           row r + a_row, column c + a_col
 *  B operand, two n8 x k16 blocks, storage [n][k]:         row n + b_row, column k + b_col
 *  B operand via .trans, two k16 x n8 blocks, storage [k][n]: row k + a_row, column n + a_col
 *  A operand via .trans from storage [k][m]:                row k + b_row, column m + b_col   */
struct LaneOffsets {
    int a_row, a_col, b_row, b_col;
    __device__ explicit LaneOffsets(int lane)
        : a_row((lane & 7) + (((lane >> 3) & 1) << 3)), a_col((lane >> 4) << 3),
          b_row((lane & 7) + ((lane >> 4) << 3)), b_col(((lane >> 3) & 1) << 3)
    {
    }
};

/* Rows [r0, r0 + ROWS) of a (len, 64) bf16 matrix with rows `ld` elements apart -> (ROWS, LDS)
 * shared tile, asynchronously; rows at or past len are zero-filled. */
template <int ROWS, int NT>
__device__ __forceinline__ void load_tile(bf16_t *dst, const bf16_t *src, size_t ld, int r0, int len)
{
    static_assert((ROWS * 8) % NT == 0, "tile chunks must divide among the threads");
#pragma unroll
    for (int i = 0; i < ROWS * 8 / NT; i++) {
        const int c = i * NT + (int)threadIdx.x, r = c >> 3, ch = c & 7;
        const bool ok = r0 + r < len;
        cp_async16(dst + r * LDS + ch * 8, src + (size_t)(ok ? r0 + r : 0) * ld + ch * 8, ok);
    }
}

/* ---- forward -------------------------------------------------------------------------------- */
/* Grid (ceil(max_len / BM), NH, sequences of the group); NW warps of 16*MT query rows each. */
template <int NW, int MT, bool DROP>
__global__ void __launch_bounds__(NW * 32)
fmha_fwd_kernel(bf16_t *__restrict__ out,            /* (T, NH, 64) */
                float *__restrict__ lse,             /* (NH, T) */
                const bf16_t *__restrict__ qkv,      /* (T, 3, NH, 64) */
                const int32_t *__restrict__ cu_seqlens, int T, int NH, int seq_begin, int max_len,
                float p_drop, uint64_t seed, uint64_t stream_id)
{
    constexpr int BM = NW * 16 * MT; /* query rows of the CTA */
    constexpr int NT = NW * 32;
    extern __shared__ __align__(16) unsigned char smem[];
    bf16_t *sQ = reinterpret_cast<bf16_t *>(smem); /* (BM, LDS); later the output staging */
    bf16_t *sK = sQ + BM * LDS;                    /* (2, KT, LDS) */
    bf16_t *sV = sK + 2 * KT * LDS;                /* (2, KT, LDS) */

    const int s = seq_begin + (int)blockIdx.z, h = (int)blockIdx.y, m0 = (int)blockIdx.x * BM;
    const int start = cu_seqlens[s], len = cu_seqlens[s + 1] - start;
    check_len(len, max_len, s);
    if (m0 >= len)
        return;
    const int H = NH * HD;
    const size_t ld = 3 * (size_t)H;
    const bf16_t *gQ = qkv + (size_t)start * ld + (size_t)h * HD;
    const bf16_t *gK = gQ + H, *gV = gQ + 2 * H;
    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t4 = lane & 3; /* mma fragment row group and column pair */
    const LaneOffsets lo(lane);

    load_tile<BM, NT>(sQ, gQ, ld, m0, len);
    load_tile<KT, NT>(sK, gK, ld, 0, len);
    load_tile<KT, NT>(sV, gV, ld, 0, len);
    cp_async_commit();

    const float sl2 = SCALE * LOG2E; /* scores in the log2 domain */
    const float rkeep = 1.0f / (1.0f - p_drop);
    uint32_t qf[MT][4][4];           /* Q rows of the warp as A fragments, per 16-wide k step */
    float o[MT][8][4];               /* output accumulator (16*MT, 64) */
    float mx[MT][2], lsum[MT][2];    /* running max (raw score) and partial row sum, rows g, g+8 */
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                o[mt][nt][e] = 0.0f;
        mx[mt][0] = mx[mt][1] = -INFINITY;
        lsum[mt][0] = lsum[mt][1] = 0.0f;
    }

    const int nk = (len + KT - 1) / KT;
    for (int j = 0; j < nk; j++) {
        cp_async_wait_all();
        __syncthreads(); /* tile j visible to all; everyone is done with tile j - 1's buffer */
        const bf16_t *k_s = sK + (j & 1) * KT * LDS, *v_s = sV + (j & 1) * KT * LDS;
        if (j == 0) {
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int kk = 0; kk < 4; kk++)
                    ldsm_x4(qf[mt][kk], sQ + ((warp * MT + mt) * 16 + lo.a_row) * LDS + kk * 16 + lo.a_col);
        }
        if (j + 1 < nk) {
            load_tile<KT, NT>(sK + ((j + 1) & 1) * KT * LDS, gK, ld, (j + 1) * KT, len);
            load_tile<KT, NT>(sV + ((j + 1) & 1) * KT * LDS, gV, ld, (j + 1) * KT, len);
            cp_async_commit();
        }

        /* S = Q K^T for the warp's rows and the tile's 64 keys. */
        float sc[MT][KT / 8][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < KT / 8; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    sc[mt][nt][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
#pragma unroll
            for (int np = 0; np < KT / 16; np++) {
                uint32_t b[4];
                ldsm_x4(b, k_s + (np * 16 + lo.b_row) * LDS + kk * 16 + lo.b_col);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    mma16816(sc[mt][2 * np], qf[mt][kk], b[0], b[1]);
                    mma16816(sc[mt][2 * np + 1], qf[mt][kk], b[2], b[3]);
                }
            }

        /* Online softmax: mask keys past the end, rescale the accumulator to the new max. */
        const int kbase = j * KT;
        const bool partial = kbase + KT > len;
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                float m_new = mx[mt][hr];
#pragma unroll
                for (int nt = 0; nt < KT / 8; nt++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        if (partial && kbase + nt * 8 + 2 * t4 + e >= len)
                            sc[mt][nt][2 * hr + e] = -INFINITY;
                        m_new = fmaxf(m_new, sc[mt][nt][2 * hr + e]);
                    }
                m_new = fmaxf(m_new, __shfl_xor_sync(0xffffffffu, m_new, 1));
                m_new = fmaxf(m_new, __shfl_xor_sync(0xffffffffu, m_new, 2));
                const float corr = ex2((mx[mt][hr] - m_new) * sl2); /* 0 on the first tile */
                mx[mt][hr] = m_new;
                const float mb = m_new * sl2;
                float rs = 0.0f;
#pragma unroll
                for (int nt = 0; nt < KT / 8; nt++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const float p = ex2(fmaf(sc[mt][nt][2 * hr + e], sl2, -mb));
                        rs += p;
                        sc[mt][nt][2 * hr + e] = p;
                    }
                lsum[mt][hr] = lsum[mt][hr] * corr + rs;
#pragma unroll
                for (int nt = 0; nt < 8; nt++) {
                    o[mt][nt][2 * hr] *= corr;
                    o[mt][nt][2 * hr + 1] *= corr;
                }
            }
        if (DROP) { /* the sum above is of the undropped P: lse is dropout's input */
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int hr = 0; hr < 2; hr++) {
                    const int row = m0 + (warp * MT + mt) * 16 + g + 8 * hr;
                    const uint64_t base = ((uint64_t)(start + row) * NH + h) * 512u + kbase;
#pragma unroll
                    for (int nt = 0; nt < KT / 8; nt++)
#pragma unroll
                        for (int e = 0; e < 2; e++) {
                            const int col = nt * 8 + 2 * t4 + e;
                            const bool keep = dropout_keep(seed, stream_id, base + col, p_drop);
                            sc[mt][nt][2 * hr + e] = keep ? sc[mt][nt][2 * hr + e] * rkeep : 0.0f;
                        }
                }
        }

        /* O += P V: the score accumulators of two adjacent n8 tiles are the A fragment of k16. */
#pragma unroll
        for (int kk = 0; kk < KT / 16; kk++) {
            uint32_t a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                a[mt][0] = pack_bf16(sc[mt][2 * kk][0], sc[mt][2 * kk][1]);
                a[mt][1] = pack_bf16(sc[mt][2 * kk][2], sc[mt][2 * kk][3]);
                a[mt][2] = pack_bf16(sc[mt][2 * kk + 1][0], sc[mt][2 * kk + 1][1]);
                a[mt][3] = pack_bf16(sc[mt][2 * kk + 1][2], sc[mt][2 * kk + 1][3]);
            }
#pragma unroll
            for (int np = 0; np < 4; np++) {
                uint32_t b[4];
                ldsm_x4_t(b, v_s + (kk * 16 + lo.a_row) * LDS + np * 16 + lo.a_col);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    mma16816(o[mt][2 * np], a[mt], b[0], b[1]);
                    mma16816(o[mt][2 * np + 1], a[mt], b[2], b[3]);
                }
            }
        }
    }

    /* Normalise, write lse, stage the bf16 rows in the warp's own rows of sQ, store 16 B each. */
    bf16_t *so = sQ + warp * MT * 16 * LDS;
    __syncwarp(); /* the warp's ldmatrix reads of these Q rows are complete */
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            float l = lsum[mt][hr];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            const float inv = 1.0f / l;
            const int r = mt * 16 + g + 8 * hr, row = m0 + warp * MT * 16 + r;
            if (t4 == 0 && row < len)
                lse[(size_t)h * T + start + row] = mx[mt][hr] * SCALE + logf(l);
#pragma unroll
            for (int nt = 0; nt < 8; nt++)
                *reinterpret_cast<uint32_t *>(so + r * LDS + nt * 8 + 2 * t4) =
                    pack_bf16(o[mt][nt][2 * hr] * inv, o[mt][nt][2 * hr + 1] * inv);
        }
    __syncwarp();
#pragma unroll
    for (int i = 0; i < MT * 16 * 8 / 32; i++) {
        const int c = i * 32 + lane, r = c >> 3, ch = c & 7;
        const int row = m0 + warp * MT * 16 + r;
        if (row < len)
            *reinterpret_cast<uint4 *>(out + ((size_t)(start + row) * NH + h) * HD + ch * 8) =
                *reinterpret_cast<const uint4 *>(so + r * LDS + ch * 8);
    }
}

/* ---- backward ------------------------------------------------------------------------------- */
constexpr int PREP_TOKENS = 32; /* tokens per CTA of the prep and convert kernels */

/* D[h][t] = sum_d dout[t][h][d] * out[t][h][d]; dq_acc rows of the group zeroed.
 * Grid (ceil(max_len / 32), 1, sequences), 256 threads; 8 lanes per (token, head) row. */
__global__ void __launch_bounds__(256)
fmha_bwd_prep_kernel(float *__restrict__ dq_acc,       /* (T, NH, 64) */
                     float *__restrict__ Dvec,         /* (NH, T) */
                     int *__restrict__ done,           /* (NH, T): at each sequence's first token */
                     const bf16_t *__restrict__ dout,  /* (T, NH, 64) */
                     const bf16_t *__restrict__ out,   /* (T, NH, 64) */
                     const int32_t *__restrict__ cu_seqlens, int T, int NH, int seq_begin)
{
    const int s = seq_begin + (int)blockIdx.z;
    const int start = cu_seqlens[s], len = cu_seqlens[s + 1] - start;
    const int t0 = (int)blockIdx.x * PREP_TOKENS;
    if (t0 >= len)
        return;
    if (t0 == 0)
        for (int h = (int)threadIdx.x; h < NH; h += 256)
            done[(size_t)h * T + start] = 0;
    const int rows = min(PREP_TOKENS, len - t0) * NH;
    const int sub = (int)threadIdx.x & 7;
    /* The loop bound is uniform per warp (4 rows per warp and pass), so every shuffle sees all
     * 32 lanes; lanes past the last row compute with zeros and store nothing. */
    for (int rb = ((int)threadIdx.x >> 5) * 4; rb < rows; rb += 32) {
        const int r = rb + (((int)threadIdx.x >> 3) & 3);
        const bool ok = r < rows;
        const int tok = start + t0 + (ok ? r : 0) / NH, h = (ok ? r : 0) % NH;
        const size_t base = ((size_t)tok * NH + h) * HD + sub * 8;
        float d = 0.0f;
        if (ok) {
            const uint4 a = *reinterpret_cast<const uint4 *>(dout + base);
            const uint4 b = *reinterpret_cast<const uint4 *>(out + base);
            const __nv_bfloat162 *a2 = reinterpret_cast<const __nv_bfloat162 *>(&a);
            const __nv_bfloat162 *b2 = reinterpret_cast<const __nv_bfloat162 *>(&b);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float2 x = __bfloat1622float2(a2[k]), y = __bfloat1622float2(b2[k]);
                d = fmaf(x.x, y.x, d);
                d = fmaf(x.y, y.y, d);
            }
        }
        d += __shfl_xor_sync(0xffffffffu, d, 1);
        d += __shfl_xor_sync(0xffffffffu, d, 2);
        d += __shfl_xor_sync(0xffffffffu, d, 4);
        if (ok) {
            if (sub == 0)
                Dvec[(size_t)h * T + tok] = d;
            float4 *z = reinterpret_cast<float4 *>(dq_acc + base);
            z[0] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            z[1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    }
}

/* dqkv's q part = bf16(scale * dq_acc). Grid as the prep kernel's. */
__global__ void __launch_bounds__(256)
fmha_bwd_convert_kernel(bf16_t *__restrict__ dqkv,        /* (T, 3, NH, 64) */
                        const float *__restrict__ dq_acc, /* (T, NH, 64) */
                        const int32_t *__restrict__ cu_seqlens, int NH, int seq_begin)
{
    const int s = seq_begin + (int)blockIdx.z;
    const int start = cu_seqlens[s], len = cu_seqlens[s + 1] - start;
    const int t0 = (int)blockIdx.x * PREP_TOKENS;
    if (t0 >= len)
        return;
    const int chunks = min(PREP_TOKENS, len - t0) * NH * 8;
    for (int c = (int)threadIdx.x; c < chunks; c += 256) {
        const int r = c >> 3, ch = c & 7;
        const int tok = start + t0 + r / NH, h = r % NH;
        const float4 *src = reinterpret_cast<const float4 *>(dq_acc + ((size_t)tok * NH + h) * HD + ch * 8);
        const float4 x = src[0], y = src[1];
        uint4 v;
        v.x = pack_bf16(x.x * SCALE, x.y * SCALE);
        v.y = pack_bf16(x.z * SCALE, x.w * SCALE);
        v.z = pack_bf16(y.x * SCALE, y.y * SCALE);
        v.w = pack_bf16(y.z * SCALE, y.w * SCALE);
        *reinterpret_cast<uint4 *>(dqkv + (size_t)tok * 3 * NH * HD + (size_t)h * HD + ch * 8) = v;
    }
}

/* Grid (ceil(max_len / BN), NH, sequences of the group), BN = 16 * NW keys; query tiles of BM. */
/* FUSE: the last CTA of each (sequence, head) to finish (a counter in `done`) converts that
 * sequence's dQ rows to bf16, so no separate conversion pass runs after the kernel. */
template <int NW, int BM, bool DROP, bool FUSE>
__global__ void __launch_bounds__(NW * 32)
fmha_bwd_kernel(bf16_t *__restrict__ dqkv,           /* (T, 3, NH, 64): k and v parts written */
                float *__restrict__ dq_acc,          /* (T, NH, 64) += dS K (unscaled) */
                int *__restrict__ done,              /* (NH, T) finished CTAs per (sequence, head) */
                const float *__restrict__ Dvec,      /* (NH, T) */
                const bf16_t *__restrict__ dout,     /* (T, NH, 64) */
                const float *__restrict__ lse,       /* (NH, T) */
                const bf16_t *__restrict__ qkv,      /* (T, 3, NH, 64) */
                const int32_t *__restrict__ cu_seqlens, int T, int NH, int seq_begin, int max_len,
                float p_drop, uint64_t seed, uint64_t stream_id)
{
    constexpr int BN = NW * 16; /* keys of the CTA, 16 per warp */
    constexpr int NT = NW * 32;
    constexpr int LDD = BM + 8; /* dS^T row stride */
    /* dQ tile (BM, 64) = BM/16 m16 tiles x 8 n8 tiles, split over the warps. */
    constexpr int MTILES = BM / 16;
    constexpr int NSPLIT = NW >= MTILES ? NW / MTILES : 1;
    constexpr int MPW = NW >= MTILES ? 1 : MTILES / NW;
    constexpr int NPW = 8 / NSPLIT;
    static_assert(NW % MTILES == 0 || MTILES % NW == 0, "dQ tiles must divide among the warps");
    static_assert(NPW >= 2 && NPW % 2 == 0, "dQ: at least one n16 block per warp");
    static_assert(BM <= NT, "one thread per query row loads lse and D");

    extern __shared__ __align__(16) unsigned char smem[];
    bf16_t *sK = reinterpret_cast<bf16_t *>(smem); /* (BN, LDS); dK staging at the end */
    bf16_t *sV = sK + BN * LDS;                    /* (BN, LDS); dV staging at the end */
    bf16_t *sQ = sV + BN * LDS;                    /* (2, BM, LDS) */
    bf16_t *sdO = sQ + 2 * BM * LDS;               /* (2, BM, LDS) */
    bf16_t *sdS = sdO + 2 * BM * LDS;              /* (BN, LDD) dS^T of one query tile */
    float *sL = reinterpret_cast<float *>(sdS + BN * LDD); /* (2, BM) lse * log2 e, +inf past end */
    float *sD = sL + 2 * BM;                               /* (2, BM) D, 0 past the end */

    const int s = seq_begin + (int)blockIdx.z, h = (int)blockIdx.y, n0 = (int)blockIdx.x * BN;
    const int start = cu_seqlens[s], len = cu_seqlens[s + 1] - start;
    check_len(len, max_len, s);
    if (n0 >= len)
        return;
    const int H = NH * HD;
    const size_t ld = 3 * (size_t)H;
    const bf16_t *gQ = qkv + (size_t)start * ld + (size_t)h * HD;
    const bf16_t *gK = gQ + H, *gV = gQ + 2 * H;
    const bf16_t *gdO = dout + (size_t)start * H + (size_t)h * HD;
    const float *lse_h = lse + (size_t)h * T + start;
    const float *D_h = Dvec + (size_t)h * T + start;
    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t4 = lane & 3;
    const LaneOffsets lo(lane);

    load_tile<BN, NT>(sK, gK, ld, n0, len);
    load_tile<BN, NT>(sV, gV, ld, n0, len);
    load_tile<BM, NT>(sQ, gQ, ld, 0, len);
    load_tile<BM, NT>(sdO, gdO, H, 0, len);
    cp_async_commit();
    if (tid < BM) {
        sL[tid] = tid < len ? lse_h[tid] * LOG2E : INFINITY;
        sD[tid] = tid < len ? D_h[tid] : 0.0f;
    }

    const float sl2 = SCALE * LOG2E;
    const float rkeep = 1.0f / (1.0f - p_drop);
    const int key0 = n0 + warp * 16 + g; /* this thread's key rows key0, key0 + 8 */
    const bool kval[2] = {key0 < len, key0 + 8 < len};
    uint32_t kf[4][4], vf[4][4]; /* the warp's 16 K and V rows as A fragments */
    float dk[8][4], dv[8][4];    /* (16, 64) accumulators */
#pragma unroll
    for (int nt = 0; nt < 8; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            dk[nt][e] = dv[nt][e] = 0.0f;

    const int nq = (len + BM - 1) / BM;
    for (int i = 0; i < nq; i++) {
        const int buf = i & 1, q0 = i * BM;
        cp_async_wait_all();
        __syncthreads(); /* tile i visible; all done with buffer buf ^ 1 and with sdS */
        if (i == 0) {
#pragma unroll
            for (int kk = 0; kk < 4; kk++) {
                ldsm_x4(kf[kk], sK + (warp * 16 + lo.a_row) * LDS + kk * 16 + lo.a_col);
                ldsm_x4(vf[kk], sV + (warp * 16 + lo.a_row) * LDS + kk * 16 + lo.a_col);
            }
        }
        const bool more = i + 1 < nq;
        float next_l = INFINITY, next_d = 0.0f;
        if (more) {
            load_tile<BM, NT>(sQ + (buf ^ 1) * BM * LDS, gQ, ld, q0 + BM, len);
            load_tile<BM, NT>(sdO + (buf ^ 1) * BM * LDS, gdO, H, q0 + BM, len);
            cp_async_commit();
            if (tid < BM && q0 + BM + tid < len) {
                next_l = lse_h[q0 + BM + tid] * LOG2E;
                next_d = D_h[q0 + BM + tid];
            }
        }
        const bf16_t *q_s = sQ + buf * BM * LDS, *do_s = sdO + buf * BM * LDS;
        const float *l_s = sL + buf * BM, *d_s = sD + buf * BM;

        /* S^T = K Q^T and dP^T = V dO^T for the warp's 16 keys and the tile's BM queries. */
        float st[BM / 8][4], dpt[BM / 8][4];
#pragma unroll
        for (int nt = 0; nt < BM / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                st[nt][e] = dpt[nt][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
#pragma unroll
            for (int np = 0; np < BM / 16; np++) {
                uint32_t b[4];
                ldsm_x4(b, q_s + (np * 16 + lo.b_row) * LDS + kk * 16 + lo.b_col);
                mma16816(st[2 * np], kf[kk], b[0], b[1]);
                mma16816(st[2 * np + 1], kf[kk], b[2], b[3]);
                ldsm_x4(b, do_s + (np * 16 + lo.b_row) * LDS + kk * 16 + lo.b_col);
                mma16816(dpt[2 * np], vf[kk], b[0], b[1]);
                mma16816(dpt[2 * np + 1], vf[kk], b[2], b[3]);
            }

        /* P^T (dropped, for dV) into st; dS^T = P^T .* (dP^T .* mask / (1 - p) - D) into dpt. */
#pragma unroll
        for (int nt = 0; nt < BM / 8; nt++) {
            const float2 lq = *reinterpret_cast<const float2 *>(l_s + nt * 8 + 2 * t4);
            const float2 dq = *reinterpret_cast<const float2 *>(d_s + nt * 8 + 2 * t4);
#pragma unroll
            for (int hr = 0; hr < 2; hr++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float p = ex2(fmaf(st[nt][2 * hr + e], sl2, -(e ? lq.y : lq.x)));
                    p = kval[hr] ? p : 0.0f;
                    float dp = dpt[nt][2 * hr + e], pd = p;
                    if (DROP) {
                        const int q = q0 + nt * 8 + 2 * t4 + e, key = key0 + 8 * hr;
                        const bool keep = dropout_keep(
                            seed, stream_id, ((uint64_t)(start + q) * NH + h) * 512u + key, p_drop);
                        pd = keep ? p * rkeep : 0.0f;
                        dp = keep ? dp * rkeep : 0.0f;
                    }
                    st[nt][2 * hr + e] = pd;
                    dpt[nt][2 * hr + e] = p * (dp - (e ? dq.y : dq.x));
                }
        }

        /* dV += P^T dO and dK += dS^T Q (scaled at the end): k = the tile's queries. */
#pragma unroll
        for (int kk = 0; kk < BM / 16; kk++) {
            uint32_t ap[4], as[4];
            ap[0] = pack_bf16(st[2 * kk][0], st[2 * kk][1]);
            ap[1] = pack_bf16(st[2 * kk][2], st[2 * kk][3]);
            ap[2] = pack_bf16(st[2 * kk + 1][0], st[2 * kk + 1][1]);
            ap[3] = pack_bf16(st[2 * kk + 1][2], st[2 * kk + 1][3]);
            as[0] = pack_bf16(dpt[2 * kk][0], dpt[2 * kk][1]);
            as[1] = pack_bf16(dpt[2 * kk][2], dpt[2 * kk][3]);
            as[2] = pack_bf16(dpt[2 * kk + 1][0], dpt[2 * kk + 1][1]);
            as[3] = pack_bf16(dpt[2 * kk + 1][2], dpt[2 * kk + 1][3]);
#pragma unroll
            for (int np = 0; np < 4; np++) {
                uint32_t b[4];
                ldsm_x4_t(b, do_s + (kk * 16 + lo.a_row) * LDS + np * 16 + lo.a_col);
                mma16816(dv[2 * np], ap, b[0], b[1]);
                mma16816(dv[2 * np + 1], ap, b[2], b[3]);
                ldsm_x4_t(b, q_s + (kk * 16 + lo.a_row) * LDS + np * 16 + lo.a_col);
                mma16816(dk[2 * np], as, b[0], b[1]);
                mma16816(dk[2 * np + 1], as, b[2], b[3]);
            }
            /* dS^T (bf16) to shared for dQ. */
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                bf16_t *row = sdS + (warp * 16 + g + 8 * hr) * LDD + kk * 16 + 2 * t4;
                *reinterpret_cast<uint32_t *>(row) = as[hr];
                *reinterpret_cast<uint32_t *>(row + 8) = as[2 + hr];
            }
        }
        __syncthreads(); /* dS^T of all warps visible */

        /* dQ[q0 .. q0 + BM) += dS K over the CTA's BN keys: A = dS from dS^T (.trans), B = K. */
        const int wm = warp / NSPLIT, wn = warp % NSPLIT;
#pragma unroll
        for (int mi = 0; mi < MPW; mi++) {
            const int mt = wm * MPW + mi;
            float acc[NPW][4];
#pragma unroll
            for (int nt = 0; nt < NPW; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    acc[nt][e] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++) {
                uint32_t a[4];
                ldsm_x4_t(a, sdS + (kk * 16 + lo.b_row) * LDD + mt * 16 + lo.b_col);
#pragma unroll
                for (int np = 0; np < NPW / 2; np++) {
                    uint32_t b[4];
                    ldsm_x4_t(b, sK + (kk * 16 + lo.a_row) * LDS + (wn * NPW / 2 + np) * 16 + lo.a_col);
                    mma16816(acc[2 * np], a, b[0], b[1]);
                    mma16816(acc[2 * np + 1], a, b[2], b[3]);
                }
            }
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                const int q = q0 + mt * 16 + g + 8 * hr;
                if (q < len) {
                    float *dst = dq_acc + ((size_t)(start + q) * NH + h) * HD + wn * NPW * 8 + 2 * t4;
#pragma unroll
                    for (int nt = 0; nt < NPW; nt++)
                        atomicAdd(reinterpret_cast<float2 *>(dst + nt * 8),
                                  make_float2(acc[nt][2 * hr], acc[nt][2 * hr + 1]));
                }
            }
        }
        if (more && tid < BM) {
            sL[(buf ^ 1) * BM + tid] = next_l;
            sD[(buf ^ 1) * BM + tid] = next_d;
        }
    }

    if constexpr (FUSE) { /* the CUDA threadFenceReduction pattern: fence, count, last one reads all */
        __shared__ int s_last;
        __threadfence(); /* this thread's dQ atomics are visible before the count */
        __syncthreads();
        if (tid == 0) {
            const int ntiles = (len + BN - 1) / BN;
            s_last = atomicAdd(&done[(size_t)h * T + start], 1) == ntiles - 1;
        }
        __syncthreads();
        if (s_last) {
            __threadfence();
            for (int c = tid; c < len * 8; c += NT) {
                const int r = c >> 3, ch = c & 7;
                const float4 *src =
                    reinterpret_cast<const float4 *>(dq_acc + ((size_t)(start + r) * NH + h) * HD + ch * 8);
                const float4 x = __ldcg(src), y = __ldcg(src + 1);
                uint4 v;
                v.x = pack_bf16(x.x * SCALE, x.y * SCALE);
                v.y = pack_bf16(x.z * SCALE, x.w * SCALE);
                v.z = pack_bf16(y.x * SCALE, y.y * SCALE);
                v.w = pack_bf16(y.z * SCALE, y.w * SCALE);
                *reinterpret_cast<uint4 *>(dqkv + (size_t)(start + r) * ld + (size_t)h * HD + ch * 8) = v;
            }
        }
    }

    /* dK (scaled) and dV to the warp's own rows of sK, sV, then 16-byte stores. */
    __syncthreads(); /* every warp is done reading sK */
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        const int r = warp * 16 + g + 8 * hr;
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
            *reinterpret_cast<uint32_t *>(sK + r * LDS + nt * 8 + 2 * t4) =
                pack_bf16(dk[nt][2 * hr] * SCALE, dk[nt][2 * hr + 1] * SCALE);
            *reinterpret_cast<uint32_t *>(sV + r * LDS + nt * 8 + 2 * t4) =
                pack_bf16(dv[nt][2 * hr], dv[nt][2 * hr + 1]);
        }
    }
    __syncwarp();
#pragma unroll
    for (int i = 0; i < 16 * 8 / 32; i++) {
        const int c = i * 32 + lane, r = warp * 16 + (c >> 3), ch = c & 7;
        const int key = n0 + r;
        if (key < len) {
            bf16_t *dst = dqkv + (size_t)(start + key) * ld + (size_t)h * HD + ch * 8;
            *reinterpret_cast<uint4 *>(dst + H) = *reinterpret_cast<const uint4 *>(sK + r * LDS + ch * 8);
            *reinterpret_cast<uint4 *>(dst + 2 * H) = *reinterpret_cast<const uint4 *>(sV + r * LDS + ch * 8);
        }
    }
}

/* ---- launchers ------------------------------------------------------------------------------ */
template <int NW, int MT, bool DROP>
void launch_fwd_kernel(bf16 *out, float *lse, const bf16 *qkv, const int32_t *cu, const Args &a,
                       cudaStream_t stream)
{
    constexpr int BM = NW * 16 * MT;
    constexpr size_t smem = (size_t)(BM + 4 * KT) * LDS * sizeof(bf16_t);
    static bool attr_set = false; /* once per kernel: the launch is otherwise host-cheap */
    if (!attr_set) {
        cudaCheck(cudaFuncSetAttribute(fmha_fwd_kernel<NW, MT, DROP>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        attr_set = true;
    }
    const dim3 grid((a.max_len + BM - 1) / BM, a.NH, a.seq_end - a.seq_begin);
    fmha_fwd_kernel<NW, MT, DROP><<<grid, NW * 32, smem, stream>>>(
        reinterpret_cast<bf16_t *>(out), lse, reinterpret_cast<const bf16_t *>(qkv), cu, a.T, a.NH,
        a.seq_begin, a.max_len, a.p_drop, a.seed, a.stream_id);
    cudaCheck(cudaGetLastError());
}

/* Dropout is a template parameter: without it the kernels keep fewer registers live. */
template <int NW, int MT>
void launch_fwd(bf16 *out, float *lse, const bf16 *qkv, const int32_t *cu, const Args &a,
                cudaStream_t stream)
{
    if (a.p_drop > 0.0f)
        launch_fwd_kernel<NW, MT, true>(out, lse, qkv, cu, a, stream);
    else
        launch_fwd_kernel<NW, MT, false>(out, lse, qkv, cu, a, stream);
}

template <int NW, int BM, bool DROP, bool FUSE>
void launch_bwd_kernel(bf16 *dqkv, float *dq_acc, int *done, const float *Dvec, const bf16 *dout,
                       const float *lse, const bf16 *qkv, const int32_t *cu, const Args &a,
                       cudaStream_t stream)
{
    constexpr int BN = NW * 16;
    constexpr size_t smem = (size_t)(2 * BN + 4 * BM) * LDS * sizeof(bf16_t) +
                            (size_t)BN * (BM + 8) * sizeof(bf16_t) + 4 * BM * sizeof(float);
    static bool attr_set = false;
    if (!attr_set) {
        cudaCheck(cudaFuncSetAttribute(fmha_bwd_kernel<NW, BM, DROP, FUSE>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        attr_set = true;
    }
    const dim3 grid((a.max_len + BN - 1) / BN, a.NH, a.seq_end - a.seq_begin);
    fmha_bwd_kernel<NW, BM, DROP, FUSE><<<grid, NW * 32, smem, stream>>>(
        reinterpret_cast<bf16_t *>(dqkv), dq_acc, done, Dvec, reinterpret_cast<const bf16_t *>(dout), lse,
        reinterpret_cast<const bf16_t *>(qkv), cu, a.T, a.NH, a.seq_begin, a.max_len, a.p_drop,
        a.seed, a.stream_id);
    cudaCheck(cudaGetLastError());
}

template <int NW, int BM, bool FUSE>
void launch_bwd_main(bf16 *dqkv, float *dq_acc, int *done, const float *Dvec, const bf16 *dout,
                     const float *lse, const bf16 *qkv, const int32_t *cu, const Args &a,
                     cudaStream_t stream)
{
    if (a.p_drop > 0.0f)
        launch_bwd_kernel<NW, BM, true, FUSE>(dqkv, dq_acc, done, Dvec, dout, lse, qkv, cu, a, stream);
    else
        launch_bwd_kernel<NW, BM, false, FUSE>(dqkv, dq_acc, done, Dvec, dout, lse, qkv, cu, a, stream);
}

typedef void (*FwdFn)(bf16 *, float *, const bf16 *, const int32_t *, const Args &, cudaStream_t);
typedef void (*BwdFn)(bf16 *, float *, int *, const float *, const bf16 *, const float *,
                      const bf16 *, const int32_t *, const Args &, cudaStream_t);

/* Measured on the H200 (bench_fmha, 56 Wikipedia-distributed lengths, 16 heads): forward shape 0
 * is fastest without dropout (0.131 ms); with dropout its 8-warp CTAs hold too many registers for
 * two per SM, so the launcher uses shape 1 then. Backward shape 0 is fastest (0.403 ms). The
 * "fused-cvt" shapes (last CTA per (sequence, head) converts dQ) measured 25-50% slower: the
 * conversion runs latency-bound in one CTA; they stay for comparison. Names: query rows (q) /
 * keys (k) per CTA, warps (w). */
const struct {
    FwdFn fn;
    const char *name;
} fwd_shapes[] = {
    {launch_fwd<8, 1>, "fwd q128 w8"},
    {launch_fwd<4, 1>, "fwd q64 w4"},
    {launch_fwd<4, 2>, "fwd q128 w4"},
};
constexpr int FWD_SHAPE_DROPOUT = 1;
const struct {
    BwdFn fn;
    const char *name;
    bool fused;
} bwd_shapes[] = {
    {launch_bwd_main<4, 32, false>, "bwd k64 q32 w4", false},
    {launch_bwd_main<8, 64, false>, "bwd k128 q64 w8", false},
    {launch_bwd_main<4, 64, false>, "bwd k64 q64 w4", false},
    {launch_bwd_main<4, 32, true>, "bwd k64 q32 w4 fused-cvt", true},
    {launch_bwd_main<4, 64, true>, "bwd k64 q64 w4 fused-cvt", true},
    {launch_bwd_main<8, 64, true>, "bwd k128 q64 w8 fused-cvt", true},
};
constexpr int N_FWD = (int)(sizeof fwd_shapes / sizeof fwd_shapes[0]);
constexpr int N_BWD = (int)(sizeof bwd_shapes / sizeof bwd_shapes[0]);

} /* namespace */

extern "C" size_t fmha_bwd_workspace_bytes(int T, int NH)
{
    return (size_t)T * NH * HD * sizeof(float) + (size_t)NH * T * (sizeof(float) + sizeof(int));
}

extern "C" int fmha_fwd_shape_count(void) { return N_FWD; }
extern "C" int fmha_bwd_shape_count(void) { return N_BWD; }
extern "C" const char *fmha_fwd_shape_name(int shape)
{
    return shape >= 0 && shape < N_FWD ? fwd_shapes[shape].name : "?";
}
extern "C" const char *fmha_bwd_shape_name(int shape)
{
    return shape >= 0 && shape < N_BWD ? bwd_shapes[shape].name : "?";
}

extern "C" void fmha_fwd_shape(int shape, bf16 *out, float *lse, const bf16 *qkv,
                               const int32_t *cu_seqlens, int T, int NH, int seq_begin, int seq_end,
                               int max_len, float p_drop, uint64_t seed, uint64_t stream_id,
                               cudaStream_t stream)
{
    const Args a = check_args("fmha_fwd", shape, N_FWD, T, NH, seq_begin, seq_end, max_len, p_drop,
                              seed, stream_id);
    check_fwd_pointers(out, lse, qkv, cu_seqlens);
    if (seq_end == seq_begin)
        return;
    fwd_shapes[shape].fn(out, lse, qkv, cu_seqlens, a, stream);
}

extern "C" void fmha_bwd_shape(int shape, bf16 *dqkv, void *workspace, const bf16 *dout,
                               const bf16 *out, const float *lse, const bf16 *qkv,
                               const int32_t *cu_seqlens, int T, int NH, int seq_begin,
                               int seq_end, int max_len, float p_drop, uint64_t seed,
                               uint64_t stream_id, cudaStream_t stream)
{
    const Args a = check_args("fmha_bwd", shape, N_BWD, T, NH, seq_begin, seq_end, max_len, p_drop,
                              seed, stream_id);
    check_bwd_pointers(dqkv, workspace, dout, out, lse, qkv, cu_seqlens);
    if (seq_end == seq_begin)
        return;
    float *dq_acc = static_cast<float *>(workspace);   /* (T, NH, 64) */
    float *Dvec = dq_acc + (size_t)T * NH * HD;        /* (NH, T) */
    int *done = reinterpret_cast<int *>(Dvec + (size_t)NH * T); /* (NH, T) */
    const dim3 grid_rows((max_len + PREP_TOKENS - 1) / PREP_TOKENS, 1, seq_end - seq_begin);
    fmha_bwd_prep_kernel<<<grid_rows, 256, 0, stream>>>(dq_acc, Dvec, done,
                                                        reinterpret_cast<const bf16_t *>(dout),
                                                        reinterpret_cast<const bf16_t *>(out),
                                                        cu_seqlens, T, NH, seq_begin);
    cudaCheck(cudaGetLastError());
    bwd_shapes[shape].fn(dqkv, dq_acc, done, Dvec, dout, lse, qkv, cu_seqlens, a, stream);
    if (bwd_shapes[shape].fused)
        return;
    fmha_bwd_convert_kernel<<<grid_rows, 256, 0, stream>>>(reinterpret_cast<bf16_t *>(dqkv), dq_acc,
                                                           cu_seqlens, NH, seq_begin);
    cudaCheck(cudaGetLastError());
}

extern "C" void fmha_fwd(bf16 *out, float *lse, const bf16 *qkv, const int32_t *cu_seqlens, int T,
                         int NH, int seq_begin, int seq_end, int max_len, float p_drop,
                         uint64_t seed, uint64_t stream_id, cudaStream_t stream)
{
    fmha_fwd_shape(p_drop > 0.0f ? FWD_SHAPE_DROPOUT : 0, out, lse, qkv, cu_seqlens, T, NH,
                   seq_begin, seq_end, max_len, p_drop, seed, stream_id, stream);
}

extern "C" void fmha_bwd(bf16 *dqkv, void *workspace, const bf16 *dout, const bf16 *out,
                         const float *lse, const bf16 *qkv, const int32_t *cu_seqlens, int T,
                         int NH, int seq_begin, int seq_end, int max_len, float p_drop,
                         uint64_t seed, uint64_t stream_id, cudaStream_t stream)
{
    fmha_bwd_shape(0, dqkv, workspace, dout, out, lse, qkv, cu_seqlens, T, NH, seq_begin, seq_end,
                   max_len, p_drop, seed, stream_id, stream);
}
