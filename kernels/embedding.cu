/* embedding.cu — BERT input embedding on the unpadded batch: word + position + token-type rows,
 * LayerNorm, dropout; and its backward into the three tables and the LayerNorm parameters.
 * Reference: kernels/ref/embedding_ref.c.
 *
 * Rows are held in registers by the row groups of rowops.cuh, whose LayerNorm forward and backward
 * (group_ln_fwd, group_ln_bwd) layernorm.cu shares; persistent grids, dgamma / dbeta in registers.
 * Position ids restart at 0 in every sequence; a row finds its sequence by binary search in
 * cu_seqlens, so the caller passes no position array. Backward recomputes the pre-LayerNorm sum
 * from the tables (nothing but mean and rstd is saved), writes the gradient of that sum (T, H) fp32
 * to scratch, and scatters it:
 *   word table: fp32 atomicAdd (rows repeat, e.g. [MASK], [CLS]; not bitwise deterministic);
 *   position table: each (position, column) sums over the sequences in order (deterministic);
 *   type table, gamma, beta: per-block partials reduced in a fixed order (deterministic). */
#include "kernels.h"
#include "dropout.h"
#include "rowops.cuh"

#define EMB_THREADS 256 /* 8 warps: 2 row groups at H = 1024 (rowops.cuh) */
#define EMB_ROWS(KV) ((KV) > 1 ? 1 : 2) /* rows per group and batch */
#define EMB_BWD_BLOCKS 264 /* row-loop blocks of the backward (<= UNPAD_COLSUM_BLOCKS): 2 per SM */
#define EMB_MAX_TYPES 4    /* token types accumulated in registers by the type-gradient kernel */

/* ---- kernels ------------------------------------------------------------------------------------ */

/* Index s of the sequence holding row t: cu_seqlens[s] <= t < cu_seqlens[s + 1]. */
__device__ __forceinline__ int seq_of_row(const int32_t *cu_seqlens, int n, int t)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (cu_seqlens[mid] <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* The three table rows of token t (0 for t >= T): word[ids[t]], pos[position], type[types[t]]. */
struct emb_rows {
    int w, p, y;
};
__device__ __forceinline__ emb_rows emb_rows_of(int t, int T, const int32_t *ids,
                                                const int32_t *types, const int32_t *cu_seqlens,
                                                int n)
{
    emb_rows e = {0, 0, 0};
    if (t < T) {
        e.w = ids[t];
        e.p = t - cu_seqlens[seq_of_row(cu_seqlens, n, t)];
        e.y = types[t];
    }
    return e;
}

/* Loads rows r0 .. r0 + R - 1 of the embedding sum word + pos + type into registers (zeros where
 * the row or the vector is absent); the R x KV x 3 gathers are issued before any is used. */
template <int RW, int KV, int R>
__device__ __forceinline__ void embed_rows(float v[R][KV][8], const emb_rows e[R], int r0, int T,
                                           int H, int gt, const bf16 *word, const bf16 *pos,
                                           const bf16 *type)
{
    uint4 qw[R][KV], qp[R][KV], qy[R][KV];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int k = 0; k < KV; k++) {
            int vi = gt + 32 * RW * k;
            qw[r][k] = qp[r][k] = qy[r][k] = make_uint4(0u, 0u, 0u, 0u);
            if (r0 + r < T && vi < H / 8) {
                qw[r][k] = *reinterpret_cast<const uint4 *>(word + (size_t)e[r].w * H + vi * 8);
                qp[r][k] = *reinterpret_cast<const uint4 *>(pos + (size_t)e[r].p * H + vi * 8);
                qy[r][k] = *reinterpret_cast<const uint4 *>(type + (size_t)e[r].y * H + vi * 8);
            }
        }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int k = 0; k < KV; k++) {
            float a[8], b[8];
            unpack8(v[r][k], qw[r][k]);
            unpack8(a, qp[r][k]);
            unpack8(b, qy[r][k]);
#pragma unroll
            for (int j = 0; j < 8; j++)
                v[r][k][j] += a[j] + b[j];
        }
}

/* out = dropout(LayerNorm(word + pos + type)). A persistent grid of row groups (rowops.cuh), EMB_ROWS
 * rows per batch; the next batch's ids, positions and types are read before this batch's work. */
template <int RW, int KV>
__global__ void __launch_bounds__(EMB_THREADS)
    embedding_fwd_kernel(bf16 *out, float *mean_out, float *rstd_out, const int32_t *ids,
                         const int32_t *types, const int32_t *cu_seqlens, int n, const bf16 *word,
                         const bf16 *pos, const bf16 *type, const bf16 *gamma, const bf16 *beta,
                         int T, int H, float eps, float p, uint64_t seed, uint64_t stream_id)
{
    constexpr int R = EMB_ROWS(KV), GT = 32 * RW, G = EMB_THREADS / GT;
    __shared__ float sh[2 * R * (EMB_THREADS / 32)];
    int gt = threadIdx.x % GT, parity = 0;
    float scale = 1.0f / (1.0f - p);
    float gam[KV][8], bet[KV][8];
    group_cols_load<RW, KV>(gam, gamma, H, gt);
    group_cols_load<RW, KV>(bet, beta, H, gt);
    int stride = gridDim.x * G * R;
    int r0 = (blockIdx.x * G + threadIdx.x / GT) * R;
    emb_rows e[R];
#pragma unroll
    for (int r = 0; r < R; r++)
        e[r] = emb_rows_of(r0 + r, T, ids, types, cu_seqlens, n);
    for (; r0 < T; r0 += stride) {
        float v[R][KV][8];
        embed_rows<RW, KV, R>(v, e, r0, T, H, gt, word, pos, type);
#pragma unroll
        for (int r = 0; r < R; r++)
            e[r] = emb_rows_of(r0 + stride + r, T, ids, types, cu_seqlens, n);
        float mean[R], rstd[R];
        group_ln_fwd<RW, KV, R>(v, mean, rstd, gam, bet, H, eps, gt, sh, parity);
        group_for_each<RW, KV, R>(r0, T, H, gt, [&](int r, int k, size_t i) {
            if (p > 0.0f)
#pragma unroll
                for (int j = 0; j < 8; j++)
                    v[r][k][j] = dropout_keep(seed, stream_id, i + j, p) ? v[r][k][j] * scale : 0.0f;
            store8(out + i, v[r][k]);
        });
        group_stats_store<R>(mean_out, rstd_out, mean, rstd, r0, T, gt);
    }
}

/* Row pass of the backward: dsum (T, H) fp32 = LayerNorm backward of dropout(dout + dout_add);
 * dword += dsum by atomics; partials (2, gridDim.x, H) of dgamma and dbeta, accumulated in
 * registers over the block's rows (see ln_bwd_kernel in layernorm.cu). */
template <int RW, int KV>
__global__ void __launch_bounds__(EMB_THREADS, KV > 1 ? 1 : 2)
    embedding_bwd_rows_kernel(float *dsum, float *dword, float *partials, const bf16 *dout,
                              const bf16 *dout_add, const int32_t *ids, const int32_t *types,
                              const int32_t *cu_seqlens, int n, const bf16 *word, const bf16 *pos,
                              const bf16 *type, const bf16 *gamma, const float *mean,
                              const float *rstd, int T, int H, float p, uint64_t seed,
                              uint64_t stream_id)
{
    constexpr int R = EMB_ROWS(KV), GT = 32 * RW, G = EMB_THREADS / GT;
    __shared__ float sh[2 * 2 * R * (EMB_THREADS / 32)];
    __shared__ float shacc[8 * EMB_THREADS];
    int gt = threadIdx.x % GT, parity = 0;
    int nvec = H / 8;
    float scale = 1.0f / (1.0f - p);
    float gam[KV][8], acc[2][KV][8];
    group_cols_load<RW, KV>(gam, gamma, H, gt);
    group_acc_zero<2, KV>(acc);
    int stride = gridDim.x * G * R;
    int g = threadIdx.x / GT;
    for (int r0 = (blockIdx.x * G + g) * R; r0 - g * R < T; r0 += stride) { /* see rowops.cuh */
        emb_rows e[R];
        float mu[R], rs[R], x[R][KV][8], dy[R][KV][8];
        uint4 qd[R][KV], qa[R][KV];
        group_rows_load<RW, KV, R>(qd, dout, r0, T, H, gt);
        group_rows_load<RW, KV, R>(qa, dout_add, r0, T, H, gt);
        group_stats_load<R>(mu, rs, mean, rstd, r0, T);
#pragma unroll
        for (int r = 0; r < R; r++)
            e[r] = emb_rows_of(r0 + r, T, ids, types, cu_seqlens, n);
        embed_rows<RW, KV, R>(x, e, r0, T, H, gt, word, pos, type);
        group_unpack_sum<R, KV>(dy, qd, qa);
        if (p > 0.0f)
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int k = 0; k < KV; k++) {
                    size_t base = (size_t)(r0 + r) * H + (gt + GT * k) * 8;
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        dy[r][k][j] = dropout_keep(seed, stream_id, base + j, p) ? dy[r][k][j] * scale : 0.0f;
                }
        group_ln_bwd<RW, KV, R>(dy, x, mu, rs, gam, acc[0], acc[1], H, sh, parity);
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (r0 + r >= T)
                break;
            float *dw = dword + (size_t)e[r].w * H;
#pragma unroll
            for (int k = 0; k < KV; k++) {
                int vi = gt + GT * k;
                if (vi >= nvec)
                    continue;
                const float *d = dy[r][k];
                float4 *ds = reinterpret_cast<float4 *>(dsum + (size_t)(r0 + r) * H + vi * 8);
                ds[0] = make_float4(d[0], d[1], d[2], d[3]);
                ds[1] = make_float4(d[4], d[5], d[6], d[7]);
                /* sm_90 has 16-byte float atomics: two per vector instead of eight */
                float4 *w4 = reinterpret_cast<float4 *>(dw + vi * 8);
                atomicAdd(w4, make_float4(d[0], d[1], d[2], d[3]));
                atomicAdd(w4 + 1, make_float4(d[4], d[5], d[6], d[7]));
            }
        }
    }
    group_acc_store<RW, KV, 2>(acc, shacc, partials + (size_t)blockIdx.x * H, (size_t)gridDim.x * H, H);
}

/* dpos[p, c] += sum over sequences s (in order) longer than p of dsum[cu_seqlens[s] + p, c].
 * Grid (max_len, ceil(H / 4 / blockDim.x)); one float4 of columns per thread. */
__global__ void embedding_bwd_pos_kernel(float *dpos, const float *dsum, const int32_t *cu_seqlens,
                                         int n, int H)
{
    int p = blockIdx.x;
    int c4 = blockIdx.y * blockDim.x + threadIdx.x;
    if (c4 * 4 >= H)
        return;
    float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int q = 0; q < n; q++) {
        int start = cu_seqlens[q];
        if (start + p < cu_seqlens[q + 1]) {
            float4 d = *reinterpret_cast<const float4 *>(dsum + (size_t)(start + p) * H + c4 * 4);
            s.x += d.x, s.y += d.y, s.z += d.z, s.w += d.w;
        }
    }
    float4 *o = reinterpret_cast<float4 *>(dpos + (size_t)p * H + c4 * 4);
    float4 cur = *o;
    cur.x += s.x, cur.y += s.y, cur.z += s.z, cur.w += s.w;
    *o = cur;
}

/* partials (gridDim.x, type_vocab, H): block b sums dsum over its row range per token type.
 * Thread per float4 of columns (blockDim.x * 4 >= H), rows in order. */
__global__ void embedding_bwd_type_kernel(float *partials, const float *dsum, const int32_t *types,
                                          int T, int H, int type_vocab)
{
    int c4 = threadIdx.x;
    int rows = (T + gridDim.x - 1) / gridDim.x;
    int r0 = blockIdx.x * rows, r1 = min(T, r0 + rows);
    float4 acc[EMB_MAX_TYPES];
#pragma unroll
    for (int y = 0; y < EMB_MAX_TYPES; y++)
        acc[y] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (c4 * 4 < H) {
        for (int t = r0; t < r1; t++) {
            float4 d = *reinterpret_cast<const float4 *>(dsum + (size_t)t * H + c4 * 4);
            int y = types[t];
#pragma unroll
            for (int k = 0; k < EMB_MAX_TYPES; k++)
                if (k == y)
                    acc[k].x += d.x, acc[k].y += d.y, acc[k].z += d.z, acc[k].w += d.w;
        }
        for (int y = 0; y < type_vocab; y++) {
            float4 a = y == 0 ? acc[0] : y == 1 ? acc[1] : y == 2 ? acc[2] : acc[3];
            *reinterpret_cast<float4 *>(partials + ((size_t)blockIdx.x * type_vocab + y) * H + c4 * 4) = a;
        }
    }
}

/* ---- launchers ---------------------------------------------------------------------------------- */

size_t embedding_bwd_scratch_bytes(int T, int H, int type_vocab)
{
    size_t parts = (size_t)EMB_BWD_BLOCKS * H * (type_vocab > 2 ? type_vocab : 2);
    return ((size_t)T * H + parts) * sizeof(float);
}

void embedding_fwd(bf16 *out, float *mean, float *rstd, const int32_t *ids, const int32_t *types,
                   const int32_t *cu_seqlens, int n, const bf16 *word, const bf16 *pos,
                   const bf16 *type, const bf16 *gamma, const bf16 *beta, int T, int H, float eps,
                   float p_drop, uint64_t seed, uint64_t stream_id, cudaStream_t stream)
{
    UNPAD_REQUIRE(H > 0 && H % 8 == 0 && H <= 4096);
    UNPAD_REQUIRE(n >= 1 && T >= 0);
    UNPAD_REQUIRE(p_drop >= 0.0f && p_drop < 1.0f);
    if (T == 0)
        return;
    UNPAD_ROW_GROUP_DISPATCH(H, {
        constexpr int rows_per_block = EMB_THREADS / (32 * RW) * EMB_ROWS(KV);
        int grid = persistent_grid((const void *)embedding_fwd_kernel<RW, KV>, EMB_THREADS,
                                   (T + rows_per_block - 1) / rows_per_block);
        embedding_fwd_kernel<RW, KV><<<grid, EMB_THREADS, 0, stream>>>(
            out, mean, rstd, ids, types, cu_seqlens, n, word, pos, type, gamma, beta, T, H, eps,
            p_drop, seed, stream_id);
    });
    cudaCheck(cudaGetLastError());
}

void embedding_bwd(float *dword, float *dpos, float *dtype, float *dgamma, float *dbeta,
                   const bf16 *dout, const bf16 *dout_add, const int32_t *ids,
                   const int32_t *types, const int32_t *cu_seqlens, int n, int max_len,
                   const bf16 *word, const bf16 *pos, const bf16 *type, const bf16 *gamma,
                   const float *mean, const float *rstd, int T, int H, int type_vocab,
                   float p_drop, uint64_t seed, uint64_t stream_id, float *scratch,
                   cudaStream_t stream)
{
    UNPAD_REQUIRE(H > 0 && H % 8 == 0 && H <= 4096);
    UNPAD_REQUIRE(n >= 1 && T >= 0 && max_len >= 1);
    UNPAD_REQUIRE(type_vocab >= 1 && type_vocab <= EMB_MAX_TYPES);
    UNPAD_REQUIRE(p_drop >= 0.0f && p_drop < 1.0f);
    UNPAD_REQUIRE(scratch != NULL);
    if (T == 0)
        return;
    float *dsum = scratch;                       /* (T, H) */
    float *partials = scratch + (size_t)T * H;   /* (2 or type_vocab, blocks, H) */
    int grid = 0;
    UNPAD_ROW_GROUP_DISPATCH(H, {
        constexpr int rows_per_block = EMB_THREADS / (32 * RW) * EMB_ROWS(KV);
        grid = (T + rows_per_block - 1) / rows_per_block;
        if (grid > EMB_BWD_BLOCKS)
            grid = EMB_BWD_BLOCKS;
        embedding_bwd_rows_kernel<RW, KV><<<grid, EMB_THREADS, 0, stream>>>(
            dsum, dword, partials, dout, dout_add, ids, types, cu_seqlens, n, word, pos, type, gamma,
            mean, rstd, T, H, p_drop, seed, stream_id);
    });
    cudaCheck(cudaGetLastError());
    colsum_finalize3(dgamma, dbeta, NULL, partials, grid, (size_t)grid * H, H, stream);

    int threads = 128;
    dim3 pgrid(max_len, (H / 4 + threads - 1) / threads);
    embedding_bwd_pos_kernel<<<pgrid, threads, 0, stream>>>(dpos, dsum, cu_seqlens, n, H);
    cudaCheck(cudaGetLastError());

    int tgrid = (T + 63) / 64; /* at least 64 rows per block */
    if (tgrid > EMB_BWD_BLOCKS)
        tgrid = EMB_BWD_BLOCKS;
    int tthreads = ((H / 4 + 31) / 32) * 32;
    embedding_bwd_type_kernel<<<tgrid, tthreads, 0, stream>>>(partials, dsum, types, T, H, type_vocab);
    cudaCheck(cudaGetLastError());
    for (int y = 0; y < type_vocab; y++) {
        /* partials of type y: rows (b * type_vocab + y) — strided, so reduce per block in order */
        colsum_finalize_strided(dtype + (size_t)y * H, partials + (size_t)y * H, tgrid,
                                (size_t)type_vocab * H, H, stream);
    }
}
