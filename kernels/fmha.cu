/* fmha.cu — variable-length fused multi-head attention, head size 64, forward and backward, for
 * the H100/H200 (sm_90a: see fmha.h for the shapes, the math and the dropout mask).
 *
 * The kernels run on Hopper's own instructions (kernels/sm90.cuh): tiles of 64 rows of one head
 * arrive by bulk tensor copies (TMA, 128-byte swizzle) on mbarriers, two stages deep, and the
 * matrix products are warpgroup MMAs (wgmma, bf16 in, fp32 accumulate) reading their B operand
 * (and A, where it is not in registers) straight from those tiles. One CTA is one warpgroup of
 * 128 threads, two or three CTAs per SM: while one computes its softmax, another's MMAs run.
 * Rows past the end of a sequence are read (they belong to the next sequence, or are zero past
 * the batch) but masked: no padding exists anywhere and no [L, L] matrix is stored.
 *
 * Forward (flash-attention style): one CTA per (query tile of 64 MB rows, head, sequence). Each
 * thread keeps its rows' output accumulator and running max / sum in registers while K and V
 * tiles of BN keys stream through shared memory: S = Q K^T (both operands in shared memory), the
 * online softmax and the dropout mask in registers, then O += P V with P as the register A operand.
 *
 * Backward (flash-attention 2 style): a small kernel computes D = rowsum(dout .* out) and zeroes
 * the fp32 dQ accumulator; then one CTA per (tile of 64 keys, head, sequence) holds K, V and its
 * dK, dV accumulators while 64-query tiles of Q and dO stream through: S^T = K Q^T and
 * dP^T = V dO^T (shared operands), P^T and dS^T in registers, dV += P^T dO and dK += dS^T Q with
 * them as register A operands; dS^T goes to shared memory once for dQ = dS K, whose fp32 tile is
 * added into the workspace by one bulk reduction per tile. A last pass converts dQ to bf16. A
 * second backward kernel (fmha_bwd_wg2) runs two warpgroups over 128 keys that share each Q and
 * dO tile (and, in one variant, sum their dQ before one reduction); it measured no faster and is
 * kept as a shape. Every kernel touches only its group's tokens, so groups may run concurrently
 * on different streams with one workspace.
 *
 * The forward is a template over (MB, BN); the launchers run (1, 128), the fastest measured. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <type_traits>

#include "common.h"
#include "dropout.h"
#include "fmha.h"
#include "fmha_launch.cuh"
#include "sm90.cuh"

#ifdef UNPAD_FP32
#error "fmha.cu is the bf16 tensor-core kernel; the fp32 build compiles kernels/fmha_fp32.cu instead"
#endif

typedef __nv_bfloat16 bf16_t;

namespace {

constexpr int HD = 64;           /* head size */
constexpr int ROWB = HD * 2;     /* bytes of one bf16 row of a head */
constexpr int BOX = 64 * ROWB;   /* bytes of one TMA box: 64 rows of a head */
constexpr float LOG2E = 1.4426950408889634f;
constexpr float SCALE = 0.125f;  /* 1 / sqrt(64) */
constexpr unsigned FULL = 0xffffffffu;

/* ---- device helpers ------------------------------------------------------------------------- */
/* Two floats as a bf16 pair, lo in the low half (the lower column of a fragment). */
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

/* Byte offset of 16-byte chunk c of row r in a 128-byte-swizzled tile (sm90.cuh). */
__device__ __forceinline__ int swz(int r, int c) { return r * ROWB + ((c ^ (r & 7)) << 4); }

__device__ __forceinline__ unsigned char *align1024(unsigned char *p)
{
    return p + ((1024u - (sm90::smem_u32(p) & 1023u)) & 1023u);
}

/* 0x8000 - thr in each half: added to a word of two 15-bit mask fields, it sets each half's sign
 * bit iff that field is kept (dropout.h). */
__device__ __forceinline__ uint32_t mask_bias2(uint32_t thr) { return (0x8000u - thr) * 0x10001u; }

/* The bf16 pair mask of a word of two 15-bit fields (bits 0-14 and 16-30): 0xffff in each half
 * whose field is kept, 0 where it is dropped (prmt replicating the sign of bytes 1 and 3). */
__device__ __forceinline__ uint32_t mask_halves(uint32_t w, uint32_t bias2)
{
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, 0xBB99;" : "=r"(r) : "r"(w + bias2), "r"(0u));
    return r;
}

/* The forward's dropout of one query row's keys 2c, 2c + 1 (pair word lo) and 2c + 8, 2c + 9 (hi),
 * as bf16 pairs: the pairs are ANDed with their masks. quad = fmha_mask_quad_of(2c). */
__device__ __forceinline__ void mask_fwd_quad(uint32_t &pair_lo, uint32_t &pair_hi, uint64_t rk, uint32_t quad,
                                              uint32_t bias2)
{
    const fmha_quad_bits b = fmha_mask_quad(rk, quad);
    pair_lo &= mask_halves(b.lo & 0x7fff7fffu, bias2);
    pair_hi &= mask_halves(b.hi & 0x7fff7fffu, bias2);
}

/* The fragment of a transposed score tile (rows = keys, backward): this lane holds keys k, k + 8
 * (k of parity `odd`, in quad `quad` = fmha_mask_quad_of(k)) and queries q, q + 1 (q even); rk is
 * the row key of query q + odd. Lanes l and l ^ 4 hold the other parity's keys of the same quad:
 * each hashes its own query row once and sends the partner the two fields of its keys.
 * keep[hr][e] for (key k + 8 hr, query q + e). */
__device__ __forceinline__ void mask_transposed(bool (&keep)[2][2], uint64_t rk, uint32_t quad, int odd,
                                                uint32_t thr)
{
    const fmha_quad_bits b = fmha_mask_quad(rk, quad);
    const uint32_t lo = b.lo & 0x7fff7fffu, hi = b.hi & 0x7fff7fffu;
    /* fields of keys k (low half) and k + 8 (high half): the own row's, and the partner's keys' */
    const uint32_t own = __byte_perm(lo, hi, odd ? 0x7632u : 0x5410u);
    const uint32_t send = __byte_perm(lo, hi, odd ? 0x5410u : 0x7632u);
    const uint32_t other = __shfl_xor_sync(FULL, send, 4);
    const uint32_t w0 = odd ? other : own, w1 = odd ? own : other; /* queries q, q + 1 */
    keep[0][0] = (w0 & 0xffffu) >= thr;
    keep[0][1] = (w1 & 0xffffu) >= thr;
    keep[1][0] = w0 >= (thr << 16);
    keep[1][1] = w1 >= (thr << 16);
}

/* ---- forward (wgmma) ------------------------------------------------------------------------ */
/* Grid (ceil(max_len / (64 MB)), NH, sequences of the group), 128 threads. PIPE: S of the next
 * tile is issued right behind this tile's P V, so the tensor cores run both back to back while
 * the warps wait for P V and refill the stage. */
template <int MB, int BN, bool DROP, bool PIPE>
__global__ void __launch_bounds__(128, 2)
fmha_fwd_wgmma(const __grid_constant__ CUtensorMap tm_qkv, /* qkv as (T, 3 NH 64), 64 x 64 boxes */
               bf16_t *__restrict__ out,                   /* (T, NH, 64) */
               float *__restrict__ lse,                    /* (NH, T) */
               const int32_t *__restrict__ cu_seqlens, int T, int NH, int seq_begin, int max_len,
               float p_drop, uint64_t seed, uint64_t stream_id)
{
    constexpr int BM = 64 * MB, STAGES = 2, KVB = BN * ROWB; /* bytes of one K or V tile */
    constexpr int NS = BN / 8;                                /* n8 tiles of a score row block */
    static_assert(BN == 64 || BN == 128, "key tiles of 64 or 128");
    extern __shared__ unsigned char smem_raw[];
    unsigned char *sQ = align1024(smem_raw);  /* MB boxes; the output staging at the end */
    unsigned char *sK = sQ + MB * BOX;        /* STAGES tiles */
    unsigned char *sV = sK + STAGES * KVB;    /* STAGES tiles */
    uint64_t *bar = reinterpret_cast<uint64_t *>(sV + STAGES * KVB); /* Q, K[STAGES], V[STAGES] */

    const int s = seq_begin + (int)blockIdx.z, h = (int)blockIdx.y, m0 = (int)blockIdx.x * BM;
    const int start = cu_seqlens[s], len = cu_seqlens[s + 1] - start;
    check_len_quiet(len, max_len);
    if (m0 >= len)
        return;
    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t4 = lane & 3; /* fragment row group and column pair */
    const int nk = (len + BN - 1) / BN;
    const int colk = (NH + h) * HD, colv = (2 * NH + h) * HD;

    auto load_kv = [&](int stage, int j) {
        sm90::mbar_arrive_expect_tx(&bar[1 + stage], KVB);
#pragma unroll
        for (int b = 0; b < BN / 64; b++)
            sm90::tma_load_2d(sK + stage * KVB + b * BOX, &tm_qkv, &bar[1 + stage], colk, start + j * BN + b * 64);
        sm90::mbar_arrive_expect_tx(&bar[1 + STAGES + stage], KVB);
#pragma unroll
        for (int b = 0; b < BN / 64; b++)
            sm90::tma_load_2d(sV + stage * KVB + b * BOX, &tm_qkv, &bar[1 + STAGES + stage], colv,
                              start + j * BN + b * 64);
    };
    if (tid == 0) {
        for (int i = 0; i < 1 + 2 * STAGES; i++)
            sm90::mbar_init(&bar[i], 1);
        sm90::mbar_init_fence();
    }
    __syncthreads();
    if (tid == 0) {
        sm90::mbar_arrive_expect_tx(&bar[0], MB * BOX);
#pragma unroll
        for (int mb = 0; mb < MB; mb++)
            sm90::tma_load_2d(sQ + mb * BOX, &tm_qkv, &bar[0], h * HD, start + m0 + mb * 64);
        for (int j = 0; j < STAGES && j < nk; j++)
            load_kv(j, j);
    }

    const float sl2 = SCALE * LOG2E; /* scores in the log2 domain */
    const uint32_t bias2 = mask_bias2(fmha_mask_threshold(p_drop));
    uint64_t rk[MB][2]; /* dropout row keys of the thread's rows */
    float o[MB][32];    /* output accumulator (64 MB, 64) */
    float mx[MB][2], lsum[MB][2]; /* running max (raw score) and partial row sum, rows g, g + 8 */
#pragma unroll
    for (int mb = 0; mb < MB; mb++) {
#pragma unroll
        for (int i = 0; i < 32; i++)
            o[mb][i] = 0.0f;
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            mx[mb][hr] = -INFINITY;
            lsum[mb][hr] = 0.0f;
            const int row = start + m0 + mb * 64 + warp * 16 + g + 8 * hr;
            rk[mb][hr] = DROP ? dropout_hash(seed, stream_id, (uint64_t)row * NH + h) : 0;
        }
    }
    const uint32_t aQ = sm90::smem_u32(sQ), aK = sm90::smem_u32(sK), aV = sm90::smem_u32(sV);
    sm90::mbar_wait(&bar[0], 0);

    /* S = Q K^T of key tile j for the thread's rows, issued (completion: the next wait). */
    float sc[MB][BN / 2];
    auto issue_s = [&](int j) {
        const int st = j % STAGES;
        sm90::mbar_wait(&bar[1 + st], (uint32_t)(j / STAGES) & 1u);
        sm90::wg_fence();
#pragma unroll
        for (int mb = 0; mb < MB; mb++)
#pragma unroll
            for (int kk = 0; kk < 4; kk++) {
                const uint64_t da = sm90::desc_kmajor(aQ + mb * BOX + kk * 32);
                const uint64_t db = sm90::desc_kmajor(aK + st * KVB + kk * 32);
                if constexpr (BN == 64)
                    sm90::mma_n64_ss<0, 0>(sc[mb], da, db, kk);
                else
                    sm90::mma_n128_ss<0, 0>(sc[mb], da, db, kk);
            }
        sm90::wg_commit();
    };
#pragma unroll
    for (int mb = 0; mb < MB; mb++)
        sm90::wg_fence_regs(o[mb]); /* the zeros are written before any wgmma is in flight */
    if (PIPE)
        issue_s(0);

    for (int j = 0; j < nk; j++) {
        const int st = j % STAGES;
        const uint32_t ph = (uint32_t)(j / STAGES) & 1u;
        if (!PIPE)
            issue_s(j);
        sm90::wg_wait<0>();
#pragma unroll
        for (int mb = 0; mb < MB; mb++)
            sm90::wg_fence_regs(sc[mb]);

        /* Online softmax: mask keys past the end, rescale the accumulator to the new max. */
        const int kbase = j * BN;
        const bool partial = kbase + BN > len;
#pragma unroll
        for (int mb = 0; mb < MB; mb++)
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                float m_new = mx[mb][hr];
#pragma unroll
                for (int nt = 0; nt < NS; nt++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        float &x = sc[mb][nt * 4 + 2 * hr + e];
                        if (partial && kbase + nt * 8 + 2 * t4 + e >= len)
                            x = -INFINITY;
                        m_new = fmaxf(m_new, x);
                    }
                m_new = fmaxf(m_new, __shfl_xor_sync(FULL, m_new, 1));
                m_new = fmaxf(m_new, __shfl_xor_sync(FULL, m_new, 2));
                const float corr = ex2((mx[mb][hr] - m_new) * sl2); /* 0 on the first tile */
                mx[mb][hr] = m_new;
                const float mb2 = m_new * sl2;
                float rs = 0.0f;
#pragma unroll
                for (int nt = 0; nt < NS; nt++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        float &x = sc[mb][nt * 4 + 2 * hr + e];
                        x = ex2(fmaf(x, sl2, -mb2));
                        rs += x; /* the sum is of the undropped P: lse is dropout's input */
                    }
                lsum[mb][hr] = lsum[mb][hr] * corr + rs;
#pragma unroll
                for (int nt = 0; nt < 8; nt++) {
                    o[mb][nt * 4 + 2 * hr] *= corr;
                    o[mb][nt * 4 + 2 * hr + 1] *= corr;
                }
            }

        /* O += P V: the score accumulators of two adjacent n8 tiles are the A fragment of k16. */
        uint32_t pf[MB][BN / 16][4];
#pragma unroll
        for (int mb = 0; mb < MB; mb++)
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++) {
                const float *x = &sc[mb][8 * kk];
                pf[mb][kk][0] = pack_bf16(x[0], x[1]);
                pf[mb][kk][1] = pack_bf16(x[2], x[3]);
                pf[mb][kk][2] = pack_bf16(x[4], x[5]);
                pf[mb][kk][3] = pack_bf16(x[6], x[7]);
                /* pf[kk][hr] holds keys 16 kk + 2 t4 + {0, 1} of row g + 8 hr, pf[kk][2 + hr] the same
                 * keys + 8: one quad of the mask */
                if (DROP)
#pragma unroll
                    for (int hr = 0; hr < 2; hr++)
                        mask_fwd_quad(pf[mb][kk][hr], pf[mb][kk][2 + hr], rk[mb][hr],
                                      (uint32_t)(4 * ((kbase >> 4) + kk) + t4), bias2);
            }
        sm90::mbar_wait(&bar[1 + STAGES + st], ph);
#pragma unroll
        for (int mb = 0; mb < MB; mb++)
            sm90::wg_fence_regs(o[mb]);
        sm90::wg_fence();
#pragma unroll
        for (int mb = 0; mb < MB; mb++)
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++)
                sm90::mma_n64_rs<1>(o[mb], pf[mb][kk], sm90::desc_mnmajor(aV + st * KVB + kk * 2048));
        sm90::wg_commit();
        if (PIPE && j + 1 < nk) {
            issue_s(j + 1); /* sc is free: P went into pf */
            sm90::wg_wait<1>(); /* P V done, S of tile j + 1 may still run */
        } else {
            sm90::wg_wait<0>();
        }
#pragma unroll
        for (int mb = 0; mb < MB; mb++)
            sm90::wg_fence_regs(o[mb]);
        __syncthreads(); /* every warp is done with stage st */
        if (tid == 0 && j + STAGES < nk)
            load_kv(st, j + STAGES);
    }
    if (PIPE)
        sm90::wg_wait<0>(); /* nothing is in flight; says so to ptxas, which cannot see it */
    if (tid == 0)
        for (int i = 0; i < 1 + 2 * STAGES; i++)
            sm90::mbar_inval(&bar[i]);

    /* Normalise, write lse, stage the bf16 rows in sQ (swizzled), store 16 B each. */
    sm90::fence_proxy_async();
    const float rkeep = DROP ? 1.0f / (1.0f - p_drop) : 1.0f;
#pragma unroll
    for (int mb = 0; mb < MB; mb++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            float l = lsum[mb][hr];
            l += __shfl_xor_sync(FULL, l, 1);
            l += __shfl_xor_sync(FULL, l, 2);
            const float inv = rkeep / l;
            const int r = warp * 16 + g + 8 * hr, row = m0 + mb * 64 + r;
            if (t4 == 0 && row < len)
                lse[(size_t)h * T + start + row] = mx[mb][hr] * SCALE + logf(l);
#pragma unroll
            for (int nt = 0; nt < 8; nt++)
                *reinterpret_cast<uint32_t *>(sQ + mb * BOX + swz(r, nt) + 4 * t4) =
                    pack_bf16(o[mb][nt * 4 + 2 * hr] * inv, o[mb][nt * 4 + 2 * hr + 1] * inv);
        }
    __syncwarp(); /* each warp stores the 16 rows it staged */
#pragma unroll
    for (int mb = 0; mb < MB; mb++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int c = i * 32 + lane, r = warp * 16 + (c >> 3), ch = c & 7;
            const int row = m0 + mb * 64 + r;
            if (row < len)
                *reinterpret_cast<uint4 *>(out + ((size_t)(start + row) * NH + h) * HD + ch * 8) =
                    *reinterpret_cast<const uint4 *>(sQ + mb * BOX + swz(r, ch));
        }
}

/* ---- backward: D and dQ --------------------------------------------------------------------- */
constexpr int PREP_TOKENS = 8;  /* tokens per CTA of the prep and convert kernels */
constexpr int PREP_UNROLL = 4;  /* rows (prep) or chunks (convert) per thread whose loads are in flight at once */
constexpr int BWD2_STAGES = 3;  /* Q / dO stages of the two-warpgroup backward */

constexpr int DQ_LD = 64; /* fp32 row stride of the dQ accumulator (NH, T, DQ_LD) and of its shared
                             staging tile: a query tile's rows of one head are one contiguous block
                             that a single bulk reduction adds (sim/memory.c FMHA_DQ_LD mirrors it) */

/* Where column chunk ch (8 floats) of a dQ row lives, in the staging tile and in the accumulator
 * alike: chunks XOR the row's position in its sequence mod 4, so that the four rows a half-warp
 * stages at once fall on four different groups of 8 banks (a plain 64-float row stride would put
 * them on the same 8). The position's low bits are the same in every CTA that adds to the row
 * (query tiles start at multiples of 64), and the convert pass undoes the XOR. */
__device__ __forceinline__ int dq_chunk(int pos, int ch) { return ch ^ (pos & 3); }

/* D[h][t] = sum_d dout[t][h][d] * out[t][h][d]; dq_acc rows of the group zeroed (a query range
 * of one head is one contiguous block, written by coalesced 16-byte stores). Grid
 * (ceil(max_len / PREP_TOKENS), 1, sequences), 256 threads; for D, 8 lanes per (token, head) row,
 * PREP_UNROLL passes of 32 rows loaded before any is reduced (a few bytes in flight per thread
 * would leave the kernel waiting on latency). */
__global__ void __launch_bounds__(256)
fmha_bwd_prep_kernel(float *__restrict__ dq_acc,       /* (NH, T, DQ_LD) */
                     float *__restrict__ Dvec,         /* (NH, T) */
                     const bf16_t *__restrict__ dout,  /* (T, NH, 64) */
                     const bf16_t *__restrict__ out,   /* (T, NH, 64) */
                     const int32_t *__restrict__ cu_seqlens, int T, int NH, int seq_begin)
{
    const int s = seq_begin + (int)blockIdx.z;
    const int start = cu_seqlens[s], len = cu_seqlens[s + 1] - start;
    const int t0 = (int)blockIdx.x * PREP_TOKENS;
    if (t0 >= len)
        return;
    const int ntok = min(PREP_TOKENS, len - t0), rows = ntok * NH;
    const int sub = (int)threadIdx.x & 7;
    { /* zeros: per head, ntok rows of DQ_LD floats from row start + t0 */
        constexpr int V = DQ_LD / 4; /* float4 per row */
        const int per_head = ntok * V;
        for (int i = (int)threadIdx.x; i < NH * per_head; i += 256) {
            const int h = i / per_head, k = i - h * per_head;
            reinterpret_cast<float4 *>(dq_acc + ((size_t)h * T + start + t0) * DQ_LD)[k] =
                make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    }
    /* The loop bound is uniform, so every shuffle sees all 32 lanes; lanes past the last row
     * compute with zeros and store nothing. */
    for (int rb = 0; rb < rows; rb += 32 * PREP_UNROLL) {
        uint4 a[PREP_UNROLL], b[PREP_UNROLL];
#pragma unroll
        for (int u = 0; u < PREP_UNROLL; u++) {
            const int r = rb + 32 * u + ((int)threadIdx.x >> 3);
            a[u] = b[u] = make_uint4(0u, 0u, 0u, 0u);
            if (r < rows) { /* row r: token t0 + r / NH, head r % NH; 16 KB contiguous per CTA */
                const size_t base = ((size_t)(start + t0) * NH + r) * HD + sub * 8;
                a[u] = *reinterpret_cast<const uint4 *>(dout + base);
                b[u] = *reinterpret_cast<const uint4 *>(out + base);
            }
        }
#pragma unroll
        for (int u = 0; u < PREP_UNROLL; u++) {
            const int r = rb + 32 * u + ((int)threadIdx.x >> 3);
            const __nv_bfloat162 *a2 = reinterpret_cast<const __nv_bfloat162 *>(&a[u]);
            const __nv_bfloat162 *b2 = reinterpret_cast<const __nv_bfloat162 *>(&b[u]);
            float d = 0.0f;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float2 x = __bfloat1622float2(a2[k]), y = __bfloat1622float2(b2[k]);
                d = fmaf(x.x, y.x, d);
                d = fmaf(x.y, y.y, d);
            }
            d += __shfl_xor_sync(FULL, d, 1);
            d += __shfl_xor_sync(FULL, d, 2);
            d += __shfl_xor_sync(FULL, d, 4);
            if (r < rows && sub == 0)
                Dvec[(size_t)(r % NH) * T + start + t0 + r / NH] = d;
        }
    }
}

/* dqkv's q part = bf16(scale * dq_acc). Grid as the prep kernel's; PREP_UNROLL chunks of 8 values
 * per thread loaded before any is stored. */
__global__ void __launch_bounds__(256)
fmha_bwd_convert_kernel(bf16_t *__restrict__ dqkv,        /* (T, 3, NH, 64) */
                        const float *__restrict__ dq_acc, /* (NH, T, DQ_LD) */
                        const int32_t *__restrict__ cu_seqlens, int T, int NH, int seq_begin)
{
    const int s = seq_begin + (int)blockIdx.z;
    const int start = cu_seqlens[s], len = cu_seqlens[s + 1] - start;
    const int t0 = (int)blockIdx.x * PREP_TOKENS;
    if (t0 >= len)
        return;
    const int chunks = min(PREP_TOKENS, len - t0) * NH * 8;
    for (int cb = (int)threadIdx.x; cb < chunks; cb += 256 * PREP_UNROLL) {
        float4 x[PREP_UNROLL], y[PREP_UNROLL];
#pragma unroll
        for (int u = 0; u < PREP_UNROLL; u++) {
            const int c = cb + 256 * u, r = c >> 3, ch = c & 7;
            if (c < chunks) {
                const float4 *src = reinterpret_cast<const float4 *>(
                    dq_acc + ((size_t)(r % NH) * T + start + t0 + r / NH) * DQ_LD + dq_chunk(t0 + r / NH, ch) * 8);
                x[u] = __ldcs(src);
                y[u] = __ldcs(src + 1);
            }
        }
#pragma unroll
        for (int u = 0; u < PREP_UNROLL; u++) {
            const int c = cb + 256 * u, r = c >> 3, ch = c & 7;
            if (c < chunks) {
                uint4 v;
                v.x = pack_bf16(x[u].x * SCALE, x[u].y * SCALE);
                v.y = pack_bf16(x[u].z * SCALE, x[u].w * SCALE);
                v.z = pack_bf16(y[u].x * SCALE, y[u].y * SCALE);
                v.w = pack_bf16(y[u].z * SCALE, y[u].w * SCALE);
                *reinterpret_cast<uint4 *>(dqkv + (size_t)(start + t0 + r / NH) * 3 * NH * HD + (size_t)(r % NH) * HD +
                                           ch * 8) = v;
            }
        }
    }
}

/* ---- backward (wgmma) ----------------------------------------------------------------------- */

/* One warpgroup's part of a query tile, for both backward kernels. The thread holds key rows
 * kl, kl + 8 of its warpgroup's 64 keys (kl = 16 (warp % 4) + lane / 4) and queries
 * 8 nt + 2 t4 + {0, 1} of the 64-query tile (t4 = lane % 4). */

/* The per-query values of query tile q0, for the 128 threads of a warpgroup (wt = the thread in
 * it): lse and D loaded raw by threads 0..63 (from a row of the sequence, so that nothing waits
 * on them until bwd_put_stats), the dropout row keys hashed by 64..127. */
struct BwdStats {
    float l, d;
    uint64_t r;
};
template <bool DROP>
__device__ __forceinline__ BwdStats bwd_load_stats(int wt, int q0, int len, const float *lse_h, const float *D_h,
                                                   uint64_t seed, uint64_t stream_id, int start, int NH, int h)
{
    const int q = min(q0 + (wt & 63), len - 1);
    BwdStats x{lse_h[q], D_h[q], 0};
    if (DROP && wt >= 64)
        x.r = dropout_hash(seed, stream_id, (uint64_t)(start + q0 + (wt & 63)) * NH + h);
    return x;
}

/* Into one buffer of 64 each: lse * log2 e (+inf past the end: P = 0 there), D (0 past the end),
 * the row keys. */
__device__ __forceinline__ void bwd_put_stats(int wt, int q0, int len, const BwdStats &x, float *sL, float *sD,
                                              uint64_t *sR)
{
    if (wt < 64) {
        const bool ok = q0 + wt < len;
        sL[wt] = ok ? x.l * LOG2E : INFINITY;
        sD[wt] = ok ? x.d : 0.0f;
    } else {
        sR[wt - 64] = x.r;
    }
}

/* S^T = K Q^T and dP^T = V dO^T of a query tile, issued as one wgmma group (completion: the next
 * wait): aK, aV the warpgroup's K and V boxes, aQ, adO the tile's stage. */
__device__ __forceinline__ void bwd_issue_sdp(float (&sc)[32], float (&dp)[32], uint32_t aK, uint32_t aV, uint32_t aQ,
                                              uint32_t adO)
{
    sm90::wg_fence();
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
        sm90::mma_n64_ss<0, 0>(sc, sm90::desc_kmajor(aK + kk * 32), sm90::desc_kmajor(aQ + kk * 32), kk);
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
        sm90::mma_n64_ss<0, 0>(dp, sm90::desc_kmajor(aV + kk * 32), sm90::desc_kmajor(adO + kk * 32), kk);
    sm90::wg_commit();
}

/* From the scores sc = S^T and dp = dP^T (both overwritten): P^T (dropped, without 1 / (1 - p):
 * dV is scaled at the end) and dS^T = P^T .* (dP^T .* mask / (1 - p) - D), as the bf16 A
 * fragments pa, sa of the next products (k = the tile's queries). l_s, d_s, r_s: the tile's
 * staged values; kval: rows kl, kl + 8 are keys of the sequence; quad, odd: row kl's mask quad and
 * parity (mask_transposed). */
template <bool DROP>
__device__ __forceinline__ void bwd_grads(float (&sc)[32], float (&dp)[32], uint32_t (&pa)[4][4], uint32_t (&sa)[4][4],
                                          const float *l_s, const float *d_s, const uint64_t *r_s,
                                          const bool (&kval)[2], uint32_t quad, int odd, int t4, uint32_t thr,
                                          float rkeep)
{
    const float sl2 = SCALE * LOG2E;
#pragma unroll
    for (int nt = 0; nt < 8; nt++) {
        const float2 lq = *reinterpret_cast<const float2 *>(l_s + nt * 8 + 2 * t4);
        const float2 dq = *reinterpret_cast<const float2 *>(d_s + nt * 8 + 2 * t4);
        bool keep[2][2] = {{true, true}, {true, true}};
        if (DROP)
            mask_transposed(keep, r_s[nt * 8 + 2 * t4 + odd], quad, odd, thr);
#pragma unroll
        for (int hr = 0; hr < 2; hr++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int x = nt * 4 + 2 * hr + e;
                float p = ex2(fmaf(sc[x], sl2, -(e ? lq.y : lq.x)));
                p = kval[hr] ? p : 0.0f;
                const float d = e ? dq.y : dq.x;
                if (DROP) {
                    sc[x] = keep[hr][e] ? p : 0.0f;
                    dp[x] = p * (keep[hr][e] ? fmaf(dp[x], rkeep, -d) : -d);
                } else {
                    sc[x] = p;
                    dp[x] = p * (dp[x] - d);
                }
            }
    }
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
#pragma unroll
        for (int r = 0; r < 4; r++) {
            pa[kk][r] = pack_bf16(sc[8 * kk + 2 * r], sc[8 * kk + 2 * r + 1]);
            sa[kk][r] = pack_bf16(dp[8 * kk + 2 * r], dp[8 * kk + 2 * r + 1]);
        }
}

/* dV += P^T dO and dK += dS^T Q (dK scaled at the end), issued as one wgmma group; aQ, adO the
 * tile's stage. */
__device__ __forceinline__ void bwd_issue_dvdk(float (&dv)[32], float (&dk)[32], const uint32_t (&pa)[4][4],
                                               const uint32_t (&sa)[4][4], uint32_t aQ, uint32_t adO)
{
    sm90::wg_fence_regs(dv);
    sm90::wg_fence_regs(dk);
    sm90::wg_fence();
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
        sm90::mma_n64_rs<1>(dv, pa[kk], sm90::desc_mnmajor(adO + kk * 2048));
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
        sm90::mma_n64_rs<1>(dk, sa[kk], sm90::desc_mnmajor(aQ + kk * 2048));
    sm90::wg_commit();
}

/* The thread's dS^T fragment (bf16) to rows kl, kl + 8 of a swizzled (keys, queries) box. */
__device__ __forceinline__ void bwd_store_ds(unsigned char *sdS, int kl, int t4, const uint32_t (&sa)[4][4])
{
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int row = kl + 8 * hr;
            *reinterpret_cast<uint32_t *>(sdS + swz(row, 2 * kk) + 4 * t4) = sa[kk][hr];
            *reinterpret_cast<uint32_t *>(sdS + swz(row, 2 * kk + 1) + 4 * t4) = sa[kk][2 + hr];
        }
}

/* The thread's fp32 dQ fragment of NT n8 tiles to rows kl, kl + 8 of a staging tile (row stride
 * DQ_LD, sdq at its first column, a multiple of 32 floats; chunks placed by dq_chunk). */
template <int NT>
__device__ __forceinline__ void bwd_stage_dq(float *sdq, int kl, int t4, const float (&dq)[4 * NT])
{
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++)
            *reinterpret_cast<float2 *>(sdq + (kl + 8 * hr) * DQ_LD + dq_chunk(kl + 8 * hr, nt) * 8 + 2 * t4) =
                make_float2(dq[nt * 4 + 2 * hr], dq[nt * 4 + 2 * hr + 1]);
}

/* dK (scaled) and dV (times rkeep) to the warp's own 16 rows of the K and V boxes sK, sV
 * (swizzled), then 16-byte stores of those rows whose keys (key0 + row) are below len into the k
 * and v parts of dqkv; w4 = the warp in its warpgroup. */
__device__ __forceinline__ void bwd_write_dkdv(const float (&dk)[32], const float (&dv)[32], unsigned char *sK,
                                               unsigned char *sV, int w4, int lane, float rkeep, int key0, int len,
                                               bf16_t *dqkv, int start, int NH, int h)
{
    const int kl = w4 * 16 + (lane >> 2), t4 = lane & 3;
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        const int r = kl + 8 * hr;
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
            *reinterpret_cast<uint32_t *>(sK + swz(r, nt) + 4 * t4) =
                pack_bf16(dk[nt * 4 + 2 * hr] * SCALE, dk[nt * 4 + 2 * hr + 1] * SCALE);
            *reinterpret_cast<uint32_t *>(sV + swz(r, nt) + 4 * t4) =
                pack_bf16(dv[nt * 4 + 2 * hr] * rkeep, dv[nt * 4 + 2 * hr + 1] * rkeep);
        }
    }
    __syncwarp();
    const int H = NH * HD;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int c = i * 32 + lane, r = w4 * 16 + (c >> 3), ch = c & 7;
        if (key0 + r < len) {
            bf16_t *dst = dqkv + (size_t)(start + key0 + r) * 3 * H + (size_t)h * HD + ch * 8;
            *reinterpret_cast<uint4 *>(dst + H) = *reinterpret_cast<const uint4 *>(sK + swz(r, ch));
            *reinterpret_cast<uint4 *>(dst + 2 * H) = *reinterpret_cast<const uint4 *>(sV + swz(r, ch));
        }
    }
}

/* Grid (ceil(max_len / 64), NH, sequences of the group), 128 threads; 64 keys per CTA, query
 * tiles of 64. PIPE: S^T and dP^T of the next tile are issued right behind this tile's dQ, so the
 * tensor cores run them while the warps stage and reduce dQ. */
template <bool DROP, bool PIPE>
__global__ void __launch_bounds__(128, 2)
fmha_bwd_wgmma(const __grid_constant__ CUtensorMap tm_qkv, /* qkv as (T, 3 NH 64) */
               const __grid_constant__ CUtensorMap tm_do,  /* dout as (T, NH 64) */
               bf16_t *__restrict__ dqkv,                  /* (T, 3, NH, 64): k and v parts written */
               float *__restrict__ dq_acc,                 /* (NH, T, DQ_LD) += dS K (unscaled) */
               const float *__restrict__ Dvec,             /* (NH, T) */
               const float *__restrict__ lse,              /* (NH, T) */
               const int32_t *__restrict__ cu_seqlens, int T, int NH, int seq_begin, int max_len,
               float p_drop, uint64_t seed, uint64_t stream_id)
{
    constexpr int BN = 64, BM = 64;
    extern __shared__ unsigned char smem_raw[];
    unsigned char *sK = align1024(smem_raw);  /* K tile; dK staging at the end */
    unsigned char *sV = sK + BOX;             /* V tile; dV staging at the end */
    unsigned char *sQ = sV + BOX;             /* 2 stages */
    unsigned char *sdO = sQ + 2 * BOX;        /* 2 stages */
    unsigned char *sdS = sdO + 2 * BOX;       /* dS^T (keys, queries) bf16, swizzled */
    float *sDQ = reinterpret_cast<float *>(sdS + BOX);   /* 2 x (64, DQ_LD) dQ tiles */
    float *sL = sDQ + 2 * BM * DQ_LD;                    /* (2, 64) lse * log2 e, +inf past end */
    float *sD = sL + 2 * BM;                              /* (2, 64) D, 0 past the end */
    uint64_t *sR = reinterpret_cast<uint64_t *>(sD + 2 * BM); /* (2, 64) dropout row keys */
    uint64_t *bar = sR + 2 * BM;                          /* K and V; Q and dO [2] */

    const int s = seq_begin + (int)blockIdx.z, h = (int)blockIdx.y, n0 = (int)blockIdx.x * BN;
    const int start = cu_seqlens[s], len = cu_seqlens[s + 1] - start;
    check_len_quiet(len, max_len);
    if (n0 >= len)
        return;
    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t4 = lane & 3, odd = g & 1;
    const int nq = (len + BM - 1) / BM;
    const float *lse_h = lse + (size_t)h * T + start;
    const float *D_h = Dvec + (size_t)h * T + start;

    auto tile_stats = [&](int q0) {
        return bwd_load_stats<DROP>(tid, q0, len, lse_h, D_h, seed, stream_id, start, NH, h);
    };
    auto put_stats = [&](int buf, int q0, const BwdStats &x) {
        bwd_put_stats(tid, q0, len, x, sL + buf * BM, sD + buf * BM, sR + buf * BM);
    };
    auto load_qdo = [&](int stage, int i) {
        sm90::mbar_arrive_expect_tx(&bar[1 + stage], 2 * BOX);
        sm90::tma_load_2d(sQ + stage * BOX, &tm_qkv, &bar[1 + stage], h * HD, start + i * BM);
        sm90::tma_load_2d(sdO + stage * BOX, &tm_do, &bar[1 + stage], h * HD, start + i * BM);
    };
    if (tid == 0) {
        for (int i = 0; i < 3; i++)
            sm90::mbar_init(&bar[i], 1);
        sm90::mbar_init_fence();
    }
    __syncthreads();
    if (tid == 0) {
        sm90::mbar_arrive_expect_tx(&bar[0], 2 * BOX);
        sm90::tma_load_2d(sK, &tm_qkv, &bar[0], (NH + h) * HD, start + n0);
        sm90::tma_load_2d(sV, &tm_qkv, &bar[0], (2 * NH + h) * HD, start + n0);
        for (int i = 0; i < 2 && i < nq; i++)
            load_qdo(i, i);
    }
    /* the first tile's statistics, while its tiles are on their way; after the barriers' set-up,
     * so no thread writes shared memory while thread 0 initialises them */
    put_stats(0, 0, tile_stats(0));
    __syncthreads();

    const float rkeep = DROP ? 1.0f / (1.0f - p_drop) : 1.0f;
    const uint32_t thr = fmha_mask_threshold(p_drop);
    const int kl = warp * 16 + g; /* this thread's key rows kl, kl + 8 of the tile */
    const bool kval[2] = {n0 + kl < len, n0 + kl + 8 < len};
    const uint32_t quad = fmha_mask_quad_of(n0 + kl); /* the mask quad of rows kl and kl + 8 */
    float dk[32], dv[32];                          /* (64 keys, 64) accumulators */
#pragma unroll
    for (int i = 0; i < 32; i++)
        dk[i] = dv[i] = 0.0f;
    const uint32_t aK = sm90::smem_u32(sK), aV = sm90::smem_u32(sV), aQ = sm90::smem_u32(sQ);
    const uint32_t adO = sm90::smem_u32(sdO), adS = sm90::smem_u32(sdS);
    sm90::mbar_wait(&bar[0], 0);

    /* S^T = K Q^T and dP^T = V dO^T of query tile i, issued (completion: the next wait). */
    float sc[32], dp[32];
    auto issue_sdp = [&](int i) {
        const int st = i & 1;
        sm90::mbar_wait(&bar[1 + st], (uint32_t)(i >> 1) & 1u);
        bwd_issue_sdp(sc, dp, aK, aV, aQ + st * BOX, adO + st * BOX);
    };
    sm90::wg_fence_regs(dk); /* the zeros are written before any wgmma is in flight */
    sm90::wg_fence_regs(dv);
    /* One query tile; next: std::true_type to issue the next tile's S^T, dP^T behind its dQ. The
     * pipelined loop runs all tiles but the last one this way and the last one apart, so that no
     * branch decides whether a wgmma group is in flight (ptxas would then serialize them all). */
    auto tile = [&](int i, auto next) {
        const int st = i & 1, q0 = i * BM;
        const BwdStats next_stats = tile_stats(q0 + BM); /* unused past the last tile */
        if (!PIPE)
            issue_sdp(i);
        sm90::wg_wait<0>();
        sm90::wg_fence_regs(sc);
        sm90::wg_fence_regs(dp);

        uint32_t pa[4][4], sa[4][4]; /* A fragments of P^T and dS^T, k = the tile's queries */
        bwd_grads<DROP>(sc, dp, pa, sa, sL + st * BM, sD + st * BM, sR + st * BM, kval, quad, odd, t4, thr, rkeep);
        bwd_issue_dvdk(dv, dk, pa, sa, aQ + st * BOX, adO + st * BOX);
        bwd_store_ds(sdS, kl, t4, sa); /* rows = keys, for dQ = dS K */
        sm90::fence_proxy_async();
        if (tid == 0)
            sm90::bulk_wait_read<1>(); /* the reduction of two tiles ago has read this dQ buffer */
        __syncthreads();                /* dS^T complete; dQ buffer st free */
        if (i + 1 < nq)
            put_stats(st ^ 1, q0 + BM, next_stats);

        float dq[32];
        sm90::wg_fence();
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
            sm90::mma_n64_ss<1, 1>(dq, sm90::desc_mnmajor(adS + kk * 2048), sm90::desc_mnmajor(aK + kk * 2048),
                                   kk);
        sm90::wg_commit();
        if constexpr (decltype(next)::value) {
            issue_sdp(i + 1); /* sc, dp are free: P^T and dS^T went into pa, sa */
            sm90::wg_wait<1>(); /* dV, dK, dQ done; the next S^T, dP^T may still run */
        } else {
            sm90::wg_wait<0>();
            sm90::wg_fence_regs(dq);
            sm90::wg_fence_regs(dv);
            sm90::wg_fence_regs(dk);
        }

        float *sdq = sDQ + st * BM * DQ_LD;
        bwd_stage_dq<8>(sdq, kl, t4, dq);
        sm90::fence_proxy_async();
        __syncthreads(); /* dQ tile staged; every warp is done with stage st and sdS */
        if (tid == 0) { /* the tile's rows of the sequence as one block */
            sm90::bulk_reduce_add_f32(dq_acc + ((size_t)h * T + start + q0) * DQ_LD, sdq,
                                      (uint32_t)min(BM, len - q0) * DQ_LD * sizeof(float));
            sm90::bulk_commit();
            if (i + 2 < nq)
                load_qdo(st, i + 2);
        }
    };
    if (PIPE) {
        issue_sdp(0);
        for (int i = 0; i + 1 < nq; i++)
            tile(i, std::true_type{});
        tile(nq - 1, std::false_type{});
    } else {
        for (int i = 0; i < nq; i++)
            tile(i, std::false_type{});
    }
    if (tid == 0) {
        sm90::bulk_wait_read<0>();
        for (int i = 0; i < 3; i++)
            sm90::mbar_inval(&bar[i]);
    }

    bwd_write_dkdv(dk, dv, sK, sV, warp, lane, rkeep, n0, len, dqkv, start, NH, h);
}

/* ---- backward, two warpgroups (wgmma) -------------------------------------------------------- */

/* Grid (ceil(max_len / 128), NH, sequences of the group), 256 threads: warpgroup w holds keys
 * n0 + 64 w .. n0 + 64 w + 63 (its K and V boxes and their dK, dV accumulators). Both read the
 * same 64-query tiles of Q and dO, in a ring of BWD2_STAGES stages that thread 0 fills (bulk
 * tensor copies on full[st]); each warpgroup stages its own copy of the tiles' lse, D and row keys,
 * one tile ahead, and per tile computes S^T, dP^T, P^T, dS^T of its keys and adds into dV, dK as
 * the single-warpgroup kernel does, its next tile's S^T and dP^T issued behind its dQ.
 * DQS = false: each warpgroup computes dQ = dS K over its 64 keys and adds it into the workspace
 * by its own bulk reduction; the two meet only at the ring: their 8 warps hand a stage back on
 * empty[st], and thread 0 refills the stage of the tile before the one it has just finished.
 * DQS = true: both write dS^T into one (128 keys, 64 queries) tile, meet at a named barrier, and
 * warpgroup w computes columns 32 w .. 32 w + 31 of dQ = dS K over all 128 keys; the two halves
 * meet in one staging tile that a single bulk reduction adds (half the reductions per key), and
 * thread 0 refills the stage just finished. */
template <bool DROP, bool DQS>
__global__ void __launch_bounds__(256, 1)
fmha_bwd_wg2(const __grid_constant__ CUtensorMap tm_qkv, /* qkv as (T, 3 NH 64) */
             const __grid_constant__ CUtensorMap tm_do,  /* dout as (T, NH 64) */
             bf16_t *__restrict__ dqkv,                  /* (T, 3, NH, 64): k and v parts written */
             float *__restrict__ dq_acc,                 /* (NH, T, DQ_LD) += dS K (unscaled) */
             const float *__restrict__ Dvec,             /* (NH, T) */
             const float *__restrict__ lse,              /* (NH, T) */
             const int32_t *__restrict__ cu_seqlens, int T, int NH, int seq_begin, int max_len,
             float p_drop, uint64_t seed, uint64_t stream_id)
{
    constexpr int BN = 128, BM = 64, ST = BWD2_STAGES, NDQ = DQS ? 2 : 4;
    extern __shared__ unsigned char smem_raw[];
    unsigned char *sK = align1024(smem_raw);  /* 2 boxes: keys 0..63, 64..127; dK staging at the end */
    unsigned char *sV = sK + 2 * BOX;         /* 2 boxes; dV staging at the end */
    unsigned char *sQ = sV + 2 * BOX;         /* ST stages */
    unsigned char *sdO = sQ + ST * BOX;       /* ST stages */
    unsigned char *sdS = sdO + ST * BOX;      /* dS^T (128 keys, 64 queries): warpgroup w's rows in box w */
    float *sDQ = reinterpret_cast<float *>(sdS + 2 * BOX); /* NDQ x (64, DQ_LD): DQS 2 buffers, else 2 per warpgroup */
    float *sL = sDQ + NDQ * BM * DQ_LD;                     /* (warpgroup, 2, 64) lse * log2 e, +inf past the end */
    float *sD = sL + 4 * BM;                                /* (warpgroup, 2, 64) D, 0 past the end */
    uint64_t *sR = reinterpret_cast<uint64_t *>(sD + 4 * BM); /* (warpgroup, 2, 64) dropout row keys */
    uint64_t *bar = sR + 4 * BM;                            /* K and V; full[ST]; empty[ST] */
    uint64_t *full = bar + 1, *empty = bar + 1 + ST;

    const int s = seq_begin + (int)blockIdx.z, h = (int)blockIdx.y, n0 = (int)blockIdx.x * BN;
    const int start = cu_seqlens[s], len = cu_seqlens[s + 1] - start;
    check_len_quiet(len, max_len);
    if (n0 >= len)
        return;
    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int w = warp >> 2, wt = tid & 127;
    const int g = lane >> 2, t4 = lane & 3, odd = g & 1;
    const int nq = (len + BM - 1) / BM;
    /* warpgroups with keys: with DQS both always run (the second on masked keys past the end) */
    const int nwg = (DQS || n0 + 64 < len) ? 2 : 1;
    const float *lse_h = lse + (size_t)h * T + start;
    const float *D_h = Dvec + (size_t)h * T + start;
    float *sLw = sL + w * 2 * BM, *sDw = sD + w * 2 * BM;
    uint64_t *sRw = sR + w * 2 * BM;

    auto tile_stats = [&](int q0) {
        return bwd_load_stats<DROP>(wt, q0, len, lse_h, D_h, seed, stream_id, start, NH, h);
    };
    auto put_stats = [&](int buf, int q0, const BwdStats &x) {
        bwd_put_stats(wt, q0, len, x, sLw + buf * BM, sDw + buf * BM, sRw + buf * BM);
    };
    auto load_qdo = [&](int stage, int i) {
        sm90::mbar_arrive_expect_tx(&full[stage], 2 * BOX);
        sm90::tma_load_2d(sQ + stage * BOX, &tm_qkv, &full[stage], h * HD, start + i * BM);
        sm90::tma_load_2d(sdO + stage * BOX, &tm_do, &full[stage], h * HD, start + i * BM);
    };
    if (tid == 0) {
        sm90::mbar_init(&bar[0], 1);
        for (int i = 0; i < ST; i++) {
            sm90::mbar_init(&full[i], 1);
            sm90::mbar_init(&empty[i], 4 * nwg);
        }
        sm90::mbar_init_fence();
    }
    __syncthreads();
    if (tid == 0) {
        sm90::mbar_arrive_expect_tx(&bar[0], 4 * BOX);
        for (int b = 0; b < 2; b++) {
            sm90::tma_load_2d(sK + b * BOX, &tm_qkv, &bar[0], (NH + h) * HD, start + n0 + 64 * b);
            sm90::tma_load_2d(sV + b * BOX, &tm_qkv, &bar[0], (2 * NH + h) * HD, start + n0 + 64 * b);
        }
        for (int i = 0; i < ST && i < nq; i++)
            load_qdo(i, i);
    }
    put_stats(0, 0, tile_stats(0)); /* the first tile's statistics; after the barriers' set-up */
    __syncthreads();
    if (w >= nwg)
        goto done;
    {
        const float rkeep = DROP ? 1.0f / (1.0f - p_drop) : 1.0f;
        const uint32_t thr = fmha_mask_threshold(p_drop);
        const int kl = (warp & 3) * 16 + g; /* this thread's key rows kl, kl + 8 of its warpgroup */
        const int nw0 = n0 + 64 * w;         /* the warpgroup's first key */
        const bool kval[2] = {nw0 + kl < len, nw0 + kl + 8 < len};
        const uint32_t quad = fmha_mask_quad_of(nw0 + kl);
        float dk[32], dv[32];
#pragma unroll
        for (int i = 0; i < 32; i++)
            dk[i] = dv[i] = 0.0f;
        unsigned char *sKw = sK + w * BOX, *sVw = sV + w * BOX, *sdSw = sdS + w * BOX;
        const uint32_t aK = sm90::smem_u32(sK), aKw = sm90::smem_u32(sKw), aVw = sm90::smem_u32(sVw);
        const uint32_t aQ = sm90::smem_u32(sQ), adO = sm90::smem_u32(sdO);
        const uint32_t adS = sm90::smem_u32(sdS), adSw = sm90::smem_u32(sdSw);
        /* the thread that issues the reductions: tid 0 (DQS), else thread 0 of each warpgroup */
        const bool reducer = DQS ? tid == 0 : wt == 0;
        sm90::mbar_wait(&bar[0], 0);

        float sc[32], dp[32];
        auto issue_sdp = [&](int i) {
            const int st = i % ST;
            sm90::mbar_wait(&full[st], (uint32_t)(i / ST) & 1u);
            bwd_issue_sdp(sc, dp, aKw, aVw, aQ + st * BOX, adO + st * BOX);
        };
        sm90::wg_fence_regs(dk);
        sm90::wg_fence_regs(dv);
        auto tile = [&](int i, auto next) {
            const int st = i % ST, q0 = i * BM, buf = i & 1;
            const BwdStats next_stats = tile_stats(q0 + BM); /* unused past the last tile */
            sm90::wg_wait<0>();
            sm90::wg_fence_regs(sc);
            sm90::wg_fence_regs(dp);

            uint32_t pa[4][4], sa[4][4];
            bwd_grads<DROP>(sc, dp, pa, sa, sLw + buf * BM, sDw + buf * BM, sRw + buf * BM, kval, quad, odd, t4, thr,
                            rkeep);
            bwd_issue_dvdk(dv, dk, pa, sa, aQ + st * BOX, adO + st * BOX);
            bwd_store_ds(sdSw, kl, t4, sa); /* the warpgroup's rows of the shared tile */
            sm90::fence_proxy_async();
            if (reducer)
                sm90::bulk_wait_read<1>(); /* the reduction of two tiles ago has read this buffer */
            if (DQS)
                sm90::named_sync(1, 256); /* both halves of dS^T; the dQ buffer free */
            else
                sm90::named_sync(1 + w, 128);
            if (i + 1 < nq)
                put_stats(buf ^ 1, q0 + BM, next_stats);

            float dq[DQS ? 16 : 32];
            sm90::wg_fence();
            if constexpr (DQS) {
#pragma unroll
                for (int kk = 0; kk < 8; kk++)
                    sm90::mma_n32_ss<1, 1>(dq, sm90::desc_mnmajor(adS + kk * 2048),
                                           sm90::desc_mnmajor(aK + kk * 2048 + 64 * w), kk);
            } else {
#pragma unroll
                for (int kk = 0; kk < 4; kk++)
                    sm90::mma_n64_ss<1, 1>(dq, sm90::desc_mnmajor(adSw + kk * 2048),
                                           sm90::desc_mnmajor(aKw + kk * 2048), kk);
            }
            sm90::wg_commit();
            if constexpr (decltype(next)::value) {
                issue_sdp(i + 1);
                sm90::wg_wait<1>();
            } else {
                sm90::wg_wait<0>();
                sm90::wg_fence_regs(dq);
                sm90::wg_fence_regs(dv);
                sm90::wg_fence_regs(dk);
            }
            if (!DQS) {
                __syncwarp();
                if (lane == 0)
                    sm90::mbar_arrive(&empty[st]); /* this warp is done with stage st */
            }

            float *sdq = sDQ + (DQS ? buf : 2 * w + buf) * BM * DQ_LD;
            bwd_stage_dq<DQS ? 4 : 8>(sdq + (DQS ? 32 * w : 0), kl, t4, dq);
            sm90::fence_proxy_async();
            if (DQS)
                sm90::named_sync(2, 256); /* dQ tile staged; both warpgroups done with stage st */
            else
                sm90::named_sync(1 + w, 128);
            if (reducer) {
                sm90::bulk_reduce_add_f32(dq_acc + ((size_t)h * T + start + q0) * DQ_LD, sdq,
                                          (uint32_t)min(BM, len - q0) * DQ_LD * sizeof(float));
                sm90::bulk_commit();
            }
            if (tid == 0) {
                if (DQS) {
                    if (i + ST < nq)
                        load_qdo(st, i + ST);
                } else if (i >= 1 && i - 1 + ST < nq) { /* the stage of tile i - 1, once both gave it back */
                    const int j = i - 1;
                    sm90::mbar_wait(&empty[j % ST], (uint32_t)(j / ST) & 1u);
                    load_qdo(j % ST, j + ST);
                }
            }
        };
        issue_sdp(0);
        for (int i = 0; i + 1 < nq; i++)
            tile(i, std::true_type{});
        tile(nq - 1, std::false_type{});
        if (reducer)
            sm90::bulk_wait_read<0>();

        /* dK, dV out through the warpgroup's own K and V boxes. With DQS the other warpgroup's last
         * dQ read sK: both passed barrier 2 after it. */
        bwd_write_dkdv(dk, dv, sKw, sVw, warp & 3, lane, rkeep, nw0, len, dqkv, start, NH, h);
    }
done:
    __syncthreads(); /* every barrier's last wait is behind */
    if (tid == 0)
        for (int i = 0; i < 1 + 2 * ST; i++)
            sm90::mbar_inval(&bar[i]);
}

/* ---- launchers ------------------------------------------------------------------------------ */
typedef CUresult (*EncodeTiledFn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                  const cuuint64_t *, const cuuint32_t *, const cuuint32_t *,
                                  CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                  CUtensorMapFloatOOBfill);

/* The driver's cuTensorMapEncodeTiled through the runtime (no -lcuda). */
EncodeTiledFn encode_tiled()
{
    static EncodeTiledFn fn = nullptr;
    if (!fn) {
        void *p = nullptr;
        cudaDriverEntryPointQueryResult q;
        cudaCheck(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
        FMHA_REQUIRE(q == cudaDriverEntryPointSuccess && p, "the driver has no cuTensorMapEncodeTiled");
        fn = reinterpret_cast<EncodeTiledFn>(p);
    }
    return fn;
}

/* A (rows, cols) bf16 matrix with rows ld elements apart, read in 64 x 64 boxes in the 128-byte
 * swizzle; rows past the end read as zeros. */
CUtensorMap tile_map(const void *base, int rows, int cols, size_t ld)
{
    CUtensorMap m;
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)(ld * sizeof(bf16))};
    const cuuint32_t box[2] = {64, 64}, estr[2] = {1, 1};
    const CUresult r = encode_tiled()(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void *>(base), dims,
                                      strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    FMHA_REQUIRE(r == CUDA_SUCCESS, "cuTensorMapEncodeTiled failed (%d)", (int)r);
    return m;
}

template <typename K>
void set_smem(K kernel, size_t bytes, bool &done)
{
    if (!done) { /* once per kernel: the launch is otherwise host-cheap */
        cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
        done = true;
    }
}

template <int MB, int BN, bool DROP, bool PIPE>
void launch_fwd_wgmma_kernel(bf16 *out, float *lse, const bf16 *qkv, const int32_t *cu, const Args &a,
                             cudaStream_t stream)
{
    constexpr size_t smem = 1024 + (size_t)MB * BOX + 4 * (size_t)BN * ROWB + 8 * 5;
    static bool attr = false;
    set_smem(fmha_fwd_wgmma<MB, BN, DROP, PIPE>, smem, attr);
    const CUtensorMap tm = tile_map(qkv, a.T, 3 * a.NH * HD, 3 * (size_t)a.NH * HD);
    const dim3 grid((a.max_len + 64 * MB - 1) / (64 * MB), a.NH, a.seq_end - a.seq_begin);
    fmha_fwd_wgmma<MB, BN, DROP, PIPE><<<grid, 128, smem, stream>>>(tm, reinterpret_cast<bf16_t *>(out), lse, cu, a.T,
                                                             a.NH, a.seq_begin, a.max_len, a.p_drop, a.seed,
                                                             a.stream_id);
    cudaCheck(cudaGetLastError());
}

/* Dropout is a template parameter: without it the kernels keep fewer registers live. */
template <int MB, int BN, bool PIPE>
void launch_fwd_wgmma(bf16 *out, float *lse, const bf16 *qkv, const int32_t *cu, const Args &a,
                      cudaStream_t stream)
{
    if (a.p_drop > 0.0f)
        launch_fwd_wgmma_kernel<MB, BN, true, PIPE>(out, lse, qkv, cu, a, stream);
    else
        launch_fwd_wgmma_kernel<MB, BN, false, PIPE>(out, lse, qkv, cu, a, stream);
}

/* The backward's main kernel, between the prep and convert passes. */
typedef void (*BwdMainFn)(bf16 *dqkv, float *dq_acc, const float *Dvec, const bf16 *dout,
                          const float *lse, const bf16 *qkv, const int32_t *cu, const Args &a,
                          cudaStream_t stream);

template <bool DROP, bool PIPE>
void launch_bwd_wgmma_kernel(bf16 *dqkv, float *dq_acc, const float *Dvec, const bf16 *dout,
                             const float *lse, const bf16 *qkv, const int32_t *cu, const Args &a,
                             cudaStream_t stream)
{
    constexpr size_t smem = 1024 + 7 * (size_t)BOX + 2 * 64 * DQ_LD * sizeof(float) +
                            4 * 64 * sizeof(float) + 2 * 64 * sizeof(uint64_t) + 3 * 8;
    static bool attr = false;
    set_smem(fmha_bwd_wgmma<DROP, PIPE>, smem, attr);
    const CUtensorMap tq = tile_map(qkv, a.T, 3 * a.NH * HD, 3 * (size_t)a.NH * HD);
    const CUtensorMap td = tile_map(dout, a.T, a.NH * HD, (size_t)a.NH * HD);
    const dim3 grid((a.max_len + 63) / 64, a.NH, a.seq_end - a.seq_begin);
    fmha_bwd_wgmma<DROP, PIPE><<<grid, 128, smem, stream>>>(tq, td, reinterpret_cast<bf16_t *>(dqkv), dq_acc, Dvec, lse,
                                                     cu, a.T, a.NH, a.seq_begin, a.max_len, a.p_drop, a.seed,
                                                     a.stream_id);
    cudaCheck(cudaGetLastError());
}

template <bool DROP, bool DQS>
void launch_bwd_wg2_kernel(bf16 *dqkv, float *dq_acc, const float *Dvec, const bf16 *dout, const float *lse,
                           const bf16 *qkv, const int32_t *cu, const Args &a, cudaStream_t stream)
{
    constexpr int ST = BWD2_STAGES;
    constexpr size_t smem = 1024 + (6 + 2 * (size_t)ST) * BOX + (DQS ? 2 : 4) * 64 * DQ_LD * sizeof(float) +
                            4 * 64 * (2 * sizeof(float) + sizeof(uint64_t)) + (1 + 2 * ST) * 8;
    static bool attr = false;
    set_smem(fmha_bwd_wg2<DROP, DQS>, smem, attr);
    const CUtensorMap tq = tile_map(qkv, a.T, 3 * a.NH * HD, 3 * (size_t)a.NH * HD);
    const CUtensorMap td = tile_map(dout, a.T, a.NH * HD, (size_t)a.NH * HD);
    const dim3 grid((a.max_len + 127) / 128, a.NH, a.seq_end - a.seq_begin);
    fmha_bwd_wg2<DROP, DQS><<<grid, 256, smem, stream>>>(tq, td, reinterpret_cast<bf16_t *>(dqkv), dq_acc, Dvec,
                                                        lse, cu, a.T, a.NH, a.seq_begin, a.max_len, a.p_drop,
                                                        a.seed, a.stream_id);
    cudaCheck(cudaGetLastError());
}

template <bool DQS>
void launch_bwd_wg2(bf16 *dqkv, float *dq_acc, const float *Dvec, const bf16 *dout, const float *lse,
                    const bf16 *qkv, const int32_t *cu, const Args &a, cudaStream_t stream)
{
    if (a.p_drop > 0.0f)
        launch_bwd_wg2_kernel<true, DQS>(dqkv, dq_acc, Dvec, dout, lse, qkv, cu, a, stream);
    else
        launch_bwd_wg2_kernel<false, DQS>(dqkv, dq_acc, Dvec, dout, lse, qkv, cu, a, stream);
}

template <bool PIPE>
void launch_bwd_wgmma(bf16 *dqkv, float *dq_acc, const float *Dvec, const bf16 *dout, const float *lse,
                      const bf16 *qkv, const int32_t *cu, const Args &a, cudaStream_t stream)
{
    if (a.p_drop > 0.0f)
        launch_bwd_wgmma_kernel<true, PIPE>(dqkv, dq_acc, Dvec, dout, lse, qkv, cu, a, stream);
    else
        launch_bwd_wgmma_kernel<false, PIPE>(dqkv, dq_acc, Dvec, dout, lse, qkv, cu, a, stream);
}

typedef void (*FwdFn)(bf16 *, float *, const bf16 *, const int32_t *, const Args &, cudaStream_t);

/* Names: query rows (q) / keys (k) per CTA. The launchers run the forward shape
 * fmha_fwd_default_shape picks and backward shape 0 (56 Wikipedia lengths, 16 heads; docs/kernels.md
 * has the numbers). */
const struct {
    FwdFn fn;
    const char *name;
} fwd_shapes[] = {
    {launch_fwd_wgmma<1, 128, true>, "fwd wgmma q64 k128 pipe"},
    {launch_fwd_wgmma<1, 128, false>, "fwd wgmma q64 k128"},
};
const struct {
    BwdMainFn fn;
    const char *name;
} bwd_shapes[] = {
    {launch_bwd_wgmma<false>, "bwd wgmma k64 q64"},
    {launch_bwd_wgmma<true>, "bwd wgmma k64 q64 pipe"},
    {launch_bwd_wg2<false>, "bwd wgmma 2wg k128 q64"},
    {launch_bwd_wg2<true>, "bwd wgmma 2wg k128 q64 dq-shared"},
};
constexpr int N_FWD = (int)(sizeof fwd_shapes / sizeof fwd_shapes[0]);
constexpr int N_BWD = (int)(sizeof bwd_shapes / sizeof bwd_shapes[0]);

} /* namespace */

extern "C" size_t fmha_bwd_workspace_bytes(int T, int NH)
{
    return (size_t)T * NH * DQ_LD * sizeof(float) + (size_t)NH * T * sizeof(float);
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
    if (seq_end == seq_begin || T == 0)
        return;
    fwd_shapes[shape].fn(out, lse, qkv, cu_seqlens, a, stream);
}

extern "C" void fmha_bwd_parts(int shape, unsigned parts, bf16 *dqkv, void *workspace, const bf16 *dout,
                               const bf16 *out, const float *lse, const bf16 *qkv,
                               const int32_t *cu_seqlens, int T, int NH, int seq_begin,
                               int seq_end, int max_len, float p_drop, uint64_t seed,
                               uint64_t stream_id, cudaStream_t stream)
{
    const Args a = check_args("fmha_bwd", shape, N_BWD, T, NH, seq_begin, seq_end, max_len, p_drop,
                              seed, stream_id);
    check_bwd_pointers(dqkv, workspace, dout, out, lse, qkv, cu_seqlens);
    if (seq_end == seq_begin || T == 0)
        return;
    float *dq_acc = static_cast<float *>(workspace); /* (NH, T, DQ_LD) */
    float *Dvec = dq_acc + (size_t)T * NH * DQ_LD;   /* (NH, T) */
    const dim3 grid_rows((max_len + PREP_TOKENS - 1) / PREP_TOKENS, 1, seq_end - seq_begin);
    if (parts & FMHA_BWD_PREP) {
        fmha_bwd_prep_kernel<<<grid_rows, 256, 0, stream>>>(dq_acc, Dvec, reinterpret_cast<const bf16_t *>(dout),
                                                            reinterpret_cast<const bf16_t *>(out), cu_seqlens, T,
                                                            NH, seq_begin);
        cudaCheck(cudaGetLastError());
    }
    if (parts & FMHA_BWD_MAIN)
        bwd_shapes[shape].fn(dqkv, dq_acc, Dvec, dout, lse, qkv, cu_seqlens, a, stream);
    if (parts & FMHA_BWD_CONVERT) {
        fmha_bwd_convert_kernel<<<grid_rows, 256, 0, stream>>>(reinterpret_cast<bf16_t *>(dqkv), dq_acc,
                                                               cu_seqlens, T, NH, seq_begin);
        cudaCheck(cudaGetLastError());
    }
}

/* Without dropout the pipelined forward (shape 0) is the faster; with it, whose softmax phase is
 * bound by instruction issue under the mask's hash, the one without the pipelining (shape 1): 1-4%
 * on each of five H100 starts (docs/kernels.md). */
extern "C" int fmha_fwd_default_shape(float p_drop)
{
    return p_drop > 0.0f ? 1 : 0;
}

extern "C" void fmha_fwd(bf16 *out, float *lse, const bf16 *qkv, const int32_t *cu_seqlens, int T,
                         int NH, int seq_begin, int seq_end, int max_len, float p_drop,
                         uint64_t seed, uint64_t stream_id, cudaStream_t stream)
{
    fmha_fwd_shape(fmha_fwd_default_shape(p_drop), out, lse, qkv, cu_seqlens, T, NH, seq_begin, seq_end,
                   max_len, p_drop, seed, stream_id, stream);
}

/* The backward fmha_bwd runs: shape 0, or UNPAD_FMHA_BWD_SHAPE (an index of bwd_shapes: another
 * shape timed inside the trainer), read once. */
static int bwd_default_shape()
{
    static int shape = -1;
    if (shape < 0) {
        const char *e = getenv("UNPAD_FMHA_BWD_SHAPE");
        char *end = nullptr;
        const long v = e && *e ? strtol(e, &end, 10) : 0;
        FMHA_REQUIRE(!e || !*e || (*end == '\0' && v >= 0 && v < N_BWD),
                     "UNPAD_FMHA_BWD_SHAPE=%s: expected a backward shape 0..%d", e, N_BWD - 1);
        shape = (int)v;
    }
    return shape;
}

extern "C" void fmha_bwd(bf16 *dqkv, void *workspace, const bf16 *dout, const bf16 *out,
                         const float *lse, const bf16 *qkv, const int32_t *cu_seqlens, int T,
                         int NH, int seq_begin, int seq_end, int max_len, float p_drop,
                         uint64_t seed, uint64_t stream_id, cudaStream_t stream)
{
    fmha_bwd_shape(bwd_default_shape(), dqkv, workspace, dout, out, lse, qkv, cu_seqlens, T, NH, seq_begin,
                   seq_end, max_len, p_drop, seed, stream_id, stream);
}
