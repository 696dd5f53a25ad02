/* fmha_fp32.cu — the FMHA of fmha.h for the fp32 build (-DUNPAD_FP32): the same functions, math
 * and dropout mask as kernels/fmha.cu (see fmha.h), in plain fp32 arithmetic without tensor cores,
 * so that the fp32 trainer's gradients can be compared with an fp32 PyTorch BERT to about 1e-5.
 * Accuracy first, speed second: 16 sequences of 512 with 12 heads take 0.8 ms forward and 2.4 ms
 * backward on the H200.
 *
 * Every kernel runs one CTA per (tile of BR = 16 rows, head, sequence): 4 warps of 4 rows, each
 * row's 64 columns held 2 per lane. The other side of the score matrix streams through shared
 * memory in tiles of 32 rows, one per lane: a lane computes whole 64-term dot products (the score
 * and dP of its row with each of the warp's rows), then the warp adds the tile's rows into its
 * own, the per-lane weights broadcast by shuffles.
 *   forward   rows = queries, keys streamed: online softmax (m; l without the mask; acc with it),
 *             out = acc / l / (1 - p), lse = m + log l.
 *   backward  a pre-pass writes D = rowsum(dout .* out) (NH, T) into the workspace; then
 *             rows = queries, keys streamed:  dQ = scale sum_j dS_ij k_j;
 *             rows = keys, queries streamed:  dV = sum_i P_ij f_ij dO_i,
 *                                             dK = scale sum_i dS_ij q_i;
 *             P_ij = exp(scale q_i.k_j - lse_i), f_ij = M_ij / (1 - p),
 *             dS_ij = P_ij (f_ij dO_i.v_j - D_i). No atomics: every output element is written
 *             once by one thread, so results are deterministic.
 * Every 64-term dot product is the same sequential fmaf chain (dot64), so a score is bit for bit
 * the same in the three kernels that compute it, and so is dS in the two that need it; D equals
 * dO.v exactly where out = v (a length-1 sequence without dropout), whose dQ and dK then come out
 * exactly zero as in exact arithmetic. Each kernel touches only its group's tokens' rows, so
 * groups may run at once on several streams sharing one workspace. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "dropout.h"
#include "fmha.h"
#include "fmha_launch.cuh"

#ifndef UNPAD_FP32
#error "fmha_fp32.cu is the fp32 build's FMHA; the bf16 build compiles kernels/fmha.cu instead"
#endif


namespace {

constexpr int HD = 64;        /* head size */
constexpr int NW = 4;         /* warps per CTA */
constexpr int RW = 4;         /* rows per warp */
constexpr int BR = NW * RW;   /* rows per CTA: queries (forward, dQ) or keys (dK, dV) */
constexpr int TILE = 32;      /* streamed rows per shared tile, one per lane */
constexpr int LDT = HD + 4;   /* row stride (floats) of a streamed tile: each lane reads its own row
                                 as float4; 68 words put a quarter-warp's 8 rows on 8 bank groups */
constexpr int PREP_ROWS = 128; /* (token, head) rows per CTA of the D pre-pass, one per thread */
constexpr float SCALE = 0.125f; /* 1 / sqrt(64) */
constexpr unsigned FULL = 0xffffffffu;

/* ---- device helpers ------------------------------------------------------------------------- */
/* 1 if the mask keeps (query row t of the batch, head h, key j of its sequence): dropout.h. */
__device__ __forceinline__ bool mask_keep(int t, int h, int j, int NH, float p, uint64_t seed,
                                          uint64_t stream_id)
{
    return fmha_mask_keep(seed, stream_id, (uint64_t)t * (uint64_t)NH + (uint64_t)h, j,
                          fmha_mask_threshold(p));
}

/* sum_d a[d] b[d] over 64 floats (16-byte aligned) as one sequential fmaf chain: the order of every
 * dot product in this file (fmaf(a, b, s) == fmaf(b, a, s), so the operands' roles do not matter). */
__device__ __forceinline__ float dot64(const float *a, const float *b)
{
    float s = 0.0f;
#pragma unroll
    for (int d = 0; d < HD; d += 4) {
        const float4 x = *reinterpret_cast<const float4 *>(a + d);
        const float4 y = *reinterpret_cast<const float4 *>(b + d);
        s = fmaf(x.x, y.x, s);
        s = fmaf(x.y, y.y, s);
        s = fmaf(x.z, y.z, s);
        s = fmaf(x.w, y.w, s);
    }
    return s;
}

/* dot[r] = dot64(rows + r * HD, x) for the warp's RW rows (shared, the same for every lane) and the
 * lane's own row x (shared), x read once. */
__device__ __forceinline__ void dot64_rows(float dot[RW], const float *rows, const float *x)
{
#pragma unroll
    for (int r = 0; r < RW; r++)
        dot[r] = 0.0f;
#pragma unroll
    for (int d = 0; d < HD; d += 4) {
        const float4 y = *reinterpret_cast<const float4 *>(x + d);
#pragma unroll
        for (int r = 0; r < RW; r++) {
            const float4 a = *reinterpret_cast<const float4 *>(rows + r * HD + d);
            dot[r] = fmaf(a.x, y.x, dot[r]);
            dot[r] = fmaf(a.y, y.y, dot[r]);
            dot[r] = fmaf(a.z, y.z, dot[r]);
            dot[r] = fmaf(a.w, y.w, dot[r]);
        }
    }
}

/* dS = P (f dP - D), one rounding inside the parentheses; shared by the dQ and dK/dV kernels. */
__device__ __forceinline__ float dscore(float P, float dP, float f, float D)
{
    return P * fmaf(dP, f, -D);
}

__device__ __forceinline__ float warp_max(float x)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        x = fmaxf(x, __shfl_xor_sync(FULL, x, o));
    return x;
}

/* Butterfly sum: every lane ends with the same bits. */
__device__ __forceinline__ float warp_sum(float x)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        x += __shfl_xor_sync(FULL, x, o);
    return x;
}

/* Rows [r0, r0 + ROWS) of a (len, 64) matrix whose rows lie `ld` floats apart -> shared (ROWS, LDS);
 * rows at or past len become zeros. Every thread of the CTA takes part. */
template <int ROWS, int LDS>
__device__ __forceinline__ void load_rows(float *dst, const float *src, size_t ld, int r0, int len)
{
    for (int c = (int)threadIdx.x; c < ROWS * HD / 4; c += NW * 32) {
        const int r = c / (HD / 4), ch = c % (HD / 4);
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (r0 + r < len)
            v = *reinterpret_cast<const float4 *>(src + (size_t)(r0 + r) * ld + ch * 4);
        *reinterpret_cast<float4 *>(dst + r * LDS + ch * 4) = v;
    }
}

/* ---- forward -------------------------------------------------------------------------------- */
/* Grid (ceil(max_len / BR), NH, sequences of the group), NW * 32 threads. */
template <bool DROP>
__global__ void __launch_bounds__(NW * 32)
fmha_fwd_kernel(float *__restrict__ out,              /* (T, NH, 64) */
                float *__restrict__ lse,              /* (NH, T) */
                const float *__restrict__ qkv,        /* (T, 3, NH, 64) */
                const int32_t *__restrict__ cu_seqlens, int T, int NH, int seq_begin, int max_len,
                float p_drop, uint64_t seed, uint64_t stream_id)
{
    __shared__ __align__(16) float sQ[BR * HD];   /* the CTA's query rows */
    __shared__ __align__(16) float sK[TILE * LDT]; /* a key tile, one row per lane */
    __shared__ __align__(16) float sV[TILE * HD];  /* its value rows, read row by row */

    const int s = seq_begin + (int)blockIdx.z, h = (int)blockIdx.y, m0 = (int)blockIdx.x * BR;
    const int start = cu_seqlens[s], len = cu_seqlens[s + 1] - start;
    check_len(len, max_len, s);
    if (m0 >= len)
        return;
    const int H = NH * HD;
    const size_t ld = 3 * (size_t)H;
    const float *gQ = qkv + (size_t)start * ld + (size_t)h * HD, *gK = gQ + H, *gV = gQ + 2 * H;
    const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
    const int row0 = m0 + warp * RW; /* the warp's first query row in the sequence */
    const float *wQ = sQ + warp * RW * HD;

    load_rows<BR, HD>(sQ, gQ, ld, m0, len);
    float m[RW], l[RW], acc[RW][2];
#pragma unroll
    for (int r = 0; r < RW; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
        acc[r][0] = acc[r][1] = 0.0f;
    }
    for (int k0 = 0; k0 < len; k0 += TILE) {
        __syncthreads(); /* the previous tile has been read */
        load_rows<TILE, LDT>(sK, gK, ld, k0, len);
        load_rows<TILE, HD>(sV, gV, ld, k0, len);
        __syncthreads();
        const int j = k0 + lane;
        float sc[RW], pk[RW]; /* the lane's key: score, then its kept weight */
        dot64_rows(sc, wQ, sK + lane * LDT);
#pragma unroll
        for (int r = 0; r < RW; r++) {
            const float x = j < len ? sc[r] * SCALE : -INFINITY;
            const float mn = fmaxf(m[r], warp_max(x)); /* finite: key 0 is in the first tile */
            const float alpha = expf(m[r] - mn);
            const float pr = expf(x - mn);
            l[r] = l[r] * alpha + warp_sum(pr);
            acc[r][0] *= alpha;
            acc[r][1] *= alpha;
            m[r] = mn;
            pk[r] = pr;
            if (DROP && !mask_keep(start + row0 + r, h, j, NH, p_drop, seed, stream_id))
                pk[r] = 0.0f;
        }
        /* keys past the end have zero weight and zero value rows */
#pragma unroll 8
        for (int jj = 0; jj < TILE; jj++) {
            const float v0 = sV[jj * HD + lane], v1 = sV[jj * HD + 32 + lane];
#pragma unroll
            for (int r = 0; r < RW; r++) {
                const float pj = __shfl_sync(FULL, pk[r], jj);
                acc[r][0] = fmaf(pj, v0, acc[r][0]);
                acc[r][1] = fmaf(pj, v1, acc[r][1]);
            }
        }
    }
    const float inv_keep = 1.0f / (1.0f - p_drop);
#pragma unroll
    for (int r = 0; r < RW; r++) {
        if (row0 + r >= len)
            break;
        const size_t t = (size_t)start + row0 + r;
        float o0 = acc[r][0] / l[r], o1 = acc[r][1] / l[r];
        if (DROP) {
            o0 *= inv_keep;
            o1 *= inv_keep;
        }
        float *dst = out + (t * NH + h) * HD;
        dst[lane] = o0;
        dst[32 + lane] = o1;
        if (lane == 0)
            lse[(size_t)h * T + t] = m[r] + logf(l[r]);
    }
}

/* ---- backward ------------------------------------------------------------------------------- */
/* D[h][t] = dot64(dout[t][h], out[t][h]) for the group's tokens. Grid (ceil(max_len * NH /
 * PREP_ROWS), 1, sequences of the group); one thread per (token, head) row. */
__global__ void __launch_bounds__(PREP_ROWS)
fmha_bwd_prep_kernel(float *__restrict__ Dvec,        /* (NH, T) */
                     const float *__restrict__ dout,  /* (T, NH, 64) */
                     const float *__restrict__ out,   /* (T, NH, 64) */
                     const int32_t *__restrict__ cu_seqlens, int T, int NH, int seq_begin,
                     int max_len)
{
    const int s = seq_begin + (int)blockIdx.z;
    const int start = cu_seqlens[s], len = cu_seqlens[s + 1] - start;
    check_len(len, max_len, s);
    const int r = (int)blockIdx.x * PREP_ROWS + (int)threadIdx.x; /* row of the sequence's (len, NH) */
    if (r >= len * NH)
        return;
    const int t = start + r / NH, h = r % NH;
    const size_t base = ((size_t)t * NH + h) * HD;
    Dvec[(size_t)h * T + t] = dot64(dout + base, out + base);
}

/* dqkv's q part for the CTA's BR query rows. Grid as the forward's. */
template <bool DROP>
__global__ void __launch_bounds__(NW * 32)
fmha_bwd_dq_kernel(float *__restrict__ dqkv,          /* (T, 3, NH, 64): q part written */
                   const float *__restrict__ Dvec,    /* (NH, T) */
                   const float *__restrict__ dout,    /* (T, NH, 64) */
                   const float *__restrict__ lse,     /* (NH, T) */
                   const float *__restrict__ qkv,     /* (T, 3, NH, 64) */
                   const int32_t *__restrict__ cu_seqlens, int T, int NH, int seq_begin, int max_len,
                   float p_drop, uint64_t seed, uint64_t stream_id)
{
    __shared__ __align__(16) float sQ[BR * HD];    /* the CTA's query rows */
    __shared__ __align__(16) float sdO[BR * HD];   /* their output gradients */
    __shared__ __align__(16) float sK[TILE * LDT]; /* a key tile, one row per lane */
    __shared__ __align__(16) float sV[TILE * LDT]; /* its value rows, one per lane */

    const int s = seq_begin + (int)blockIdx.z, h = (int)blockIdx.y, m0 = (int)blockIdx.x * BR;
    const int start = cu_seqlens[s], len = cu_seqlens[s + 1] - start;
    check_len(len, max_len, s);
    if (m0 >= len)
        return;
    const int H = NH * HD;
    const size_t ld = 3 * (size_t)H;
    const float *gQ = qkv + (size_t)start * ld + (size_t)h * HD, *gK = gQ + H, *gV = gQ + 2 * H;
    const float *gdO = dout + ((size_t)start * NH + h) * HD;
    const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
    const int row0 = m0 + warp * RW;
    const float *wQ = sQ + warp * RW * HD, *wdO = sdO + warp * RW * HD;

    load_rows<BR, HD>(sQ, gQ, ld, m0, len);
    load_rows<BR, HD>(sdO, gdO, (size_t)H, m0, len);
    float L[RW], D[RW], dq[RW][2];
#pragma unroll
    for (int r = 0; r < RW; r++) {
        const bool ok = row0 + r < len;
        L[r] = ok ? lse[(size_t)h * T + start + row0 + r] : 0.0f;
        D[r] = ok ? Dvec[(size_t)h * T + start + row0 + r] : 0.0f;
        dq[r][0] = dq[r][1] = 0.0f;
    }
    const float inv_keep = 1.0f / (1.0f - p_drop);
    for (int k0 = 0; k0 < len; k0 += TILE) {
        __syncthreads();
        load_rows<TILE, LDT>(sK, gK, ld, k0, len);
        load_rows<TILE, LDT>(sV, gV, ld, k0, len);
        __syncthreads();
        const int j = k0 + lane;
        float sc[RW], dp[RW], ds[RW];
        dot64_rows(sc, wQ, sK + lane * LDT);
        dot64_rows(dp, wdO, sV + lane * LDT);
#pragma unroll
        for (int r = 0; r < RW; r++) {
            const float P = j < len ? expf(sc[r] * SCALE - L[r]) : 0.0f;
            float f = 1.0f;
            if (DROP)
                f = mask_keep(start + row0 + r, h, j, NH, p_drop, seed, stream_id) ? inv_keep : 0.0f;
            ds[r] = dscore(P, dp[r], f, D[r]);
        }
#pragma unroll 8
        for (int jj = 0; jj < TILE; jj++) {
            const float k0v = sK[jj * LDT + lane], k1v = sK[jj * LDT + 32 + lane];
#pragma unroll
            for (int r = 0; r < RW; r++) {
                const float dsj = __shfl_sync(FULL, ds[r], jj);
                dq[r][0] = fmaf(dsj, k0v, dq[r][0]);
                dq[r][1] = fmaf(dsj, k1v, dq[r][1]);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < RW; r++) {
        if (row0 + r >= len)
            break;
        float *dst = dqkv + ((size_t)start + row0 + r) * ld + (size_t)h * HD;
        dst[lane] = dq[r][0] * SCALE;
        dst[32 + lane] = dq[r][1] * SCALE;
    }
}

/* dqkv's k and v parts for the CTA's BR key rows. Grid as the forward's (tiles of keys). */
template <bool DROP>
__global__ void __launch_bounds__(NW * 32)
fmha_bwd_dkv_kernel(float *__restrict__ dqkv,         /* (T, 3, NH, 64): k and v parts written */
                    const float *__restrict__ Dvec,   /* (NH, T) */
                    const float *__restrict__ dout,   /* (T, NH, 64) */
                    const float *__restrict__ lse,    /* (NH, T) */
                    const float *__restrict__ qkv,    /* (T, 3, NH, 64) */
                    const int32_t *__restrict__ cu_seqlens, int T, int NH, int seq_begin,
                    int max_len, float p_drop, uint64_t seed, uint64_t stream_id)
{
    __shared__ __align__(16) float sK[BR * HD];     /* the CTA's key rows */
    __shared__ __align__(16) float sV[BR * HD];     /* their value rows */
    __shared__ __align__(16) float sQ[TILE * LDT];  /* a query tile, one row per lane */
    __shared__ __align__(16) float sdO[TILE * LDT]; /* its output gradients, one row per lane */
    __shared__ float sL[TILE], sD[TILE];            /* its lse and D */

    const int s = seq_begin + (int)blockIdx.z, h = (int)blockIdx.y, n0 = (int)blockIdx.x * BR;
    const int start = cu_seqlens[s], len = cu_seqlens[s + 1] - start;
    check_len(len, max_len, s);
    if (n0 >= len)
        return;
    const int H = NH * HD;
    const size_t ld = 3 * (size_t)H;
    const float *gQ = qkv + (size_t)start * ld + (size_t)h * HD, *gK = gQ + H, *gV = gQ + 2 * H;
    const float *gdO = dout + ((size_t)start * NH + h) * HD;
    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int key0 = n0 + warp * RW; /* the warp's first key row in the sequence */
    const float *wK = sK + warp * RW * HD, *wV = sV + warp * RW * HD;

    load_rows<BR, HD>(sK, gK, ld, n0, len);
    load_rows<BR, HD>(sV, gV, ld, n0, len);
    float dk[RW][2], dv[RW][2];
#pragma unroll
    for (int r = 0; r < RW; r++)
        dk[r][0] = dk[r][1] = dv[r][0] = dv[r][1] = 0.0f;
    const float inv_keep = 1.0f / (1.0f - p_drop);
    for (int q0 = 0; q0 < len; q0 += TILE) {
        __syncthreads();
        load_rows<TILE, LDT>(sQ, gQ, ld, q0, len);
        load_rows<TILE, LDT>(sdO, gdO, (size_t)H, q0, len);
        if (tid < TILE) {
            const bool ok = q0 + tid < len;
            sL[tid] = ok ? lse[(size_t)h * T + start + q0 + tid] : 0.0f;
            sD[tid] = ok ? Dvec[(size_t)h * T + start + q0 + tid] : 0.0f;
        }
        __syncthreads();
        const int i = q0 + lane; /* the lane's query */
        const float Li = sL[lane], Di = sD[lane];
        float sc[RW], dp[RW], pf[RW], ds[RW];
        dot64_rows(sc, wK, sQ + lane * LDT);
        dot64_rows(dp, wV, sdO + lane * LDT);
#pragma unroll
        for (int r = 0; r < RW; r++) {
            const float P = i < len ? expf(sc[r] * SCALE - Li) : 0.0f;
            float f = 1.0f;
            if (DROP)
                f = mask_keep(start + i, h, key0 + r, NH, p_drop, seed, stream_id) ? inv_keep : 0.0f;
            pf[r] = P * f;
            ds[r] = dscore(P, dp[r], f, Di);
        }
        /* queries past the end have zero weights and zero rows */
#pragma unroll 8
        for (int ii = 0; ii < TILE; ii++) {
            const float q0v = sQ[ii * LDT + lane], q1v = sQ[ii * LDT + 32 + lane];
            const float o0 = sdO[ii * LDT + lane], o1 = sdO[ii * LDT + 32 + lane];
#pragma unroll
            for (int r = 0; r < RW; r++) {
                const float pj = __shfl_sync(FULL, pf[r], ii), dsj = __shfl_sync(FULL, ds[r], ii);
                dv[r][0] = fmaf(pj, o0, dv[r][0]);
                dv[r][1] = fmaf(pj, o1, dv[r][1]);
                dk[r][0] = fmaf(dsj, q0v, dk[r][0]);
                dk[r][1] = fmaf(dsj, q1v, dk[r][1]);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < RW; r++) {
        if (key0 + r >= len)
            break;
        float *dst = dqkv + ((size_t)start + key0 + r) * ld + (size_t)h * HD;
        dst[H + lane] = dk[r][0] * SCALE;
        dst[H + 32 + lane] = dk[r][1] * SCALE;
        dst[2 * H + lane] = dv[r][0];
        dst[2 * H + 32 + lane] = dv[r][1];
    }
}

/* ---- launchers ------------------------------------------------------------------------------ */
/* Dropout is a template parameter: without it the kernels skip the mask hash entirely. */
void launch_fwd(float *out, float *lse, const float *qkv, const int32_t *cu, const Args &a,
                cudaStream_t stream)
{
    const dim3 grid((a.max_len + BR - 1) / BR, a.NH, a.seq_end - a.seq_begin);
    if (a.p_drop > 0.0f)
        fmha_fwd_kernel<true><<<grid, NW * 32, 0, stream>>>(out, lse, qkv, cu, a.T, a.NH, a.seq_begin,
                                                            a.max_len, a.p_drop, a.seed, a.stream_id);
    else
        fmha_fwd_kernel<false><<<grid, NW * 32, 0, stream>>>(out, lse, qkv, cu, a.T, a.NH, a.seq_begin,
                                                             a.max_len, a.p_drop, a.seed, a.stream_id);
    cudaCheck(cudaGetLastError());
}

void launch_bwd(float *dqkv, float *Dvec, const float *dout, const float *out, const float *lse,
                const float *qkv, const int32_t *cu, const Args &a, cudaStream_t stream)
{
    const int nseq = a.seq_end - a.seq_begin;
    const dim3 grid_prep((a.max_len * a.NH + PREP_ROWS - 1) / PREP_ROWS, 1, nseq);
    fmha_bwd_prep_kernel<<<grid_prep, PREP_ROWS, 0, stream>>>(Dvec, dout, out, cu, a.T, a.NH,
                                                              a.seq_begin, a.max_len);
    cudaCheck(cudaGetLastError());
    const dim3 grid((a.max_len + BR - 1) / BR, a.NH, nseq);
    if (a.p_drop > 0.0f) {
        fmha_bwd_dq_kernel<true><<<grid, NW * 32, 0, stream>>>(dqkv, Dvec, dout, lse, qkv, cu, a.T,
                                                               a.NH, a.seq_begin, a.max_len,
                                                               a.p_drop, a.seed, a.stream_id);
        cudaCheck(cudaGetLastError());
        fmha_bwd_dkv_kernel<true><<<grid, NW * 32, 0, stream>>>(dqkv, Dvec, dout, lse, qkv, cu, a.T,
                                                                a.NH, a.seq_begin, a.max_len,
                                                                a.p_drop, a.seed, a.stream_id);
        cudaCheck(cudaGetLastError());
    } else {
        fmha_bwd_dq_kernel<false><<<grid, NW * 32, 0, stream>>>(dqkv, Dvec, dout, lse, qkv, cu, a.T,
                                                                a.NH, a.seq_begin, a.max_len,
                                                                a.p_drop, a.seed, a.stream_id);
        cudaCheck(cudaGetLastError());
        fmha_bwd_dkv_kernel<false><<<grid, NW * 32, 0, stream>>>(dqkv, Dvec, dout, lse, qkv, cu, a.T,
                                                                 a.NH, a.seq_begin, a.max_len,
                                                                 a.p_drop, a.seed, a.stream_id);
        cudaCheck(cudaGetLastError());
    }
}

/* One shape each: the fp32 build is for accuracy, there is nothing to choose between. */
const char *const FWD_NAME = "fwd fp32 q16 w4";
const char *const BWD_NAME = "bwd fp32 q16/k16 w4";

} /* namespace */

/* The workspace holds only D = rowsum(dout .* out), (NH, T) fp32: no dQ accumulator (dQ has its
 * own kernel) and no counters. */
extern "C" size_t fmha_bwd_workspace_bytes(int T, int NH)
{
    return (size_t)NH * T * sizeof(float);
}

extern "C" int fmha_fwd_shape_count(void) { return 1; }
extern "C" int fmha_fwd_default_shape(float p_drop) { return 0; }
extern "C" int fmha_bwd_shape_count(void) { return 1; }
extern "C" const char *fmha_fwd_shape_name(int shape) { return shape == 0 ? FWD_NAME : "?"; }
extern "C" const char *fmha_bwd_shape_name(int shape) { return shape == 0 ? BWD_NAME : "?"; }

extern "C" void fmha_fwd_shape(int shape, floatX *out, float *lse, const floatX *qkv,
                               const int32_t *cu_seqlens, int T, int NH, int seq_begin, int seq_end,
                               int max_len, float p_drop, uint64_t seed, uint64_t stream_id,
                               cudaStream_t stream)
{
    const Args a = check_args("fmha_fwd", shape, 1, T, NH, seq_begin, seq_end, max_len, p_drop,
                              seed, stream_id);
    check_fwd_pointers(out, lse, qkv, cu_seqlens);
    if (seq_end == seq_begin)
        return;
    launch_fwd(out, lse, qkv, cu_seqlens, a, stream);
}

/* One unit here: the whole backward runs when parts has FMHA_BWD_MAIN (fmha.h). */
extern "C" void fmha_bwd_parts(int shape, unsigned parts, floatX *dqkv, void *workspace, const floatX *dout,
                               const floatX *out, const float *lse, const floatX *qkv,
                               const int32_t *cu_seqlens, int T, int NH, int seq_begin,
                               int seq_end, int max_len, float p_drop, uint64_t seed,
                               uint64_t stream_id, cudaStream_t stream)
{
    const Args a = check_args("fmha_bwd", shape, 1, T, NH, seq_begin, seq_end, max_len, p_drop,
                              seed, stream_id);
    check_bwd_pointers(dqkv, workspace, dout, out, lse, qkv, cu_seqlens);
    if (seq_end == seq_begin || !(parts & FMHA_BWD_MAIN))
        return;
    launch_bwd(dqkv, static_cast<float *>(workspace), dout, out, lse, qkv, cu_seqlens, a, stream);
}

extern "C" void fmha_fwd(floatX *out, float *lse, const floatX *qkv, const int32_t *cu_seqlens, int T,
                         int NH, int seq_begin, int seq_end, int max_len, float p_drop,
                         uint64_t seed, uint64_t stream_id, cudaStream_t stream)
{
    fmha_fwd_shape(0, out, lse, qkv, cu_seqlens, T, NH, seq_begin, seq_end, max_len, p_drop, seed,
                   stream_id, stream);
}

extern "C" void fmha_bwd(floatX *dqkv, void *workspace, const floatX *dout, const floatX *out,
                         const float *lse, const floatX *qkv, const int32_t *cu_seqlens, int T,
                         int NH, int seq_begin, int seq_end, int max_len, float p_drop,
                         uint64_t seed, uint64_t stream_id, cudaStream_t stream)
{
    fmha_bwd_shape(0, dqkv, workspace, dout, out, lse, qkv, cu_seqlens, T, NH, seq_begin, seq_end,
                   max_len, p_drop, seed, stream_id, stream);
}
