/* embedding.cu — BERT input embedding on the unpadded batch: word + position + token-type rows,
 * LayerNorm, dropout; and its backward into the three tables and the LayerNorm parameters.
 * Reference: kernels/ref/embedding_ref.c.
 *
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

#define EMB_WARPS 8
#define EMB_BWD_BLOCKS 264 /* row-loop blocks of the backward (<= UNPAD_COLSUM_BLOCKS) */
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

/* Loads row t's embedding sum word[id] + pos[position] + type[tt] into registers. */
template <int K>
__device__ __forceinline__ void embed_row(float v[K][8], int lane, int nvec, int t,
                                          const int32_t *ids, const int32_t *types,
                                          const int32_t *cu_seqlens, int n, const bf16 *word,
                                          const bf16 *pos, const bf16 *type, int H)
{
    int position = t - cu_seqlens[seq_of_row(cu_seqlens, n, t)];
    const bf16 *w = word + (size_t)ids[t] * H;
    const bf16 *p = pos + (size_t)position * H;
    const bf16 *y = type + (size_t)types[t] * H;
#pragma unroll
    for (int k = 0; k < K; k++) {
        int vi = lane + 32 * k;
        if (vi >= nvec)
            continue;
        float a[8], b[8];
        load8(v[k], w + vi * 8);
        load8(a, p + vi * 8);
        load8(b, y + vi * 8);
#pragma unroll
        for (int j = 0; j < 8; j++)
            v[k][j] += a[j] + b[j];
    }
}

template <int K>
__global__ void __launch_bounds__(EMB_WARPS * 32)
    embedding_fwd_kernel(bf16 *out, float *mean_out, float *rstd_out, const int32_t *ids,
                         const int32_t *types, const int32_t *cu_seqlens, int n, const bf16 *word,
                         const bf16 *pos, const bf16 *type, const bf16 *gamma, const bf16 *beta,
                         int T, int H, float eps, float p, uint64_t seed, uint64_t stream_id)
{
    int lane = threadIdx.x & 31;
    int t = blockIdx.x * EMB_WARPS + (threadIdx.x >> 5);
    if (t >= T)
        return;
    int nvec = H / 8;
    float v[K][8];
    embed_row<K>(v, lane, nvec, t, ids, types, cu_seqlens, n, word, pos, type, H);
    float mean, rstd;
    warp_row_stats<K>(v, lane, nvec, H, eps, &mean, &rstd);
    size_t base = (size_t)t * H;
    float scale = 1.0f / (1.0f - p);
#pragma unroll
    for (int k = 0; k < K; k++) {
        int vi = lane + 32 * k;
        if (vi >= nvec)
            continue;
        float g[8], b[8], y[8];
        load8(g, gamma + vi * 8);
        load8(b, beta + vi * 8);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            y[j] = (v[k][j] - mean) * rstd * g[j] + b[j];
            if (p > 0.0f)
                y[j] = dropout_keep(seed, stream_id, base + vi * 8 + j, p) ? y[j] * scale : 0.0f;
        }
        store8(out + base + vi * 8, y);
    }
    if (lane == 0) {
        mean_out[t] = mean;
        rstd_out[t] = rstd;
    }
}

/* Row pass of the backward: dsum (T, H) fp32 = LayerNorm backward of dropout(dout + dout_add);
 * dword += dsum by atomics; partials (2, gridDim.x, H) of dgamma and dbeta. */
template <int K>
__global__ void __launch_bounds__(UNPAD_ACC_WARPS(K) * 32)
    embedding_bwd_rows_kernel(float *dsum, float *dword, float *partials, const bf16 *dout,
                              const bf16 *dout_add, const int32_t *ids, const int32_t *types,
                              const int32_t *cu_seqlens, int n, const bf16 *word, const bf16 *pos,
                              const bf16 *type, const bf16 *gamma, const float *mean,
                              const float *rstd, int T, int H, float p, uint64_t seed,
                              uint64_t stream_id)
{
    extern __shared__ float sh[]; /* (warps, 2, K, 8, 32): see warp_acc */
    constexpr int W = UNPAD_ACC_WARPS(K);
    int lane = threadIdx.x & 31;
    int nvec = H / 8;
    float scale = 1.0f / (1.0f - p);
    warp_acc_zero<K>(sh, 2);
    float *acc_g = warp_acc<K>(sh, 2, 0), *acc_b = warp_acc<K>(sh, 2, 1);

    for (int t = blockIdx.x * W + (threadIdx.x >> 5); t < T; t += gridDim.x * W) {
        size_t base = (size_t)t * H;
        float mu = mean[t], rs = rstd[t];
        float xh[K][8], dyg[K][8];
        embed_row<K>(xh, lane, nvec, t, ids, types, cu_seqlens, n, word, pos, type, H);
        float a = 0.0f, b = 0.0f;
#pragma unroll
        for (int k = 0; k < K; k++) {
            int vi = lane + 32 * k;
            if (vi >= nvec)
                continue;
            float dy[8], g[8], u[8];
            load8(dy, dout + base + vi * 8);
            if (dout_add) {
                load8(u, dout_add + base + vi * 8);
#pragma unroll
                for (int j = 0; j < 8; j++)
                    dy[j] += u[j];
            }
            load8(g, gamma + vi * 8);
#pragma unroll
            for (int j = 0; j < 8; j++) {
                if (p > 0.0f)
                    dy[j] = dropout_keep(seed, stream_id, base + vi * 8 + j, p) ? dy[j] * scale : 0.0f;
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
        float *dw = dword + (size_t)ids[t] * H;
#pragma unroll
        for (int k = 0; k < K; k++) {
            int vi = lane + 32 * k;
            if (vi >= nvec)
                continue;
            float d[8];
#pragma unroll
            for (int j = 0; j < 8; j++)
                d[j] = rs * (dyg[k][j] - a - xh[k][j] * b);
            float4 *ds = reinterpret_cast<float4 *>(dsum + base + vi * 8);
            ds[0] = make_float4(d[0], d[1], d[2], d[3]);
            ds[1] = make_float4(d[4], d[5], d[6], d[7]);
            /* sm_90 has 16-byte float atomics: two per vector instead of eight */
            float4 *w4 = reinterpret_cast<float4 *>(dw + vi * 8);
            atomicAdd(w4, make_float4(d[0], d[1], d[2], d[3]));
            atomicAdd(w4 + 1, make_float4(d[4], d[5], d[6], d[7]));
        }
    }
    __syncthreads();
    block_acc_store<K>(sh, 2, partials + (size_t)blockIdx.x * H, (size_t)gridDim.x * H, nvec);
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
    int grid = (T + EMB_WARPS - 1) / EMB_WARPS;
    UNPAD_ROW_DISPATCH(H, (embedding_fwd_kernel<K><<<grid, EMB_WARPS * 32, 0, stream>>>(
                              out, mean, rstd, ids, types, cu_seqlens, n, word, pos, type, gamma,
                              beta, T, H, eps, p_drop, seed, stream_id)));
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
    UNPAD_ROW_DISPATCH(H, {
        constexpr int W = UNPAD_ACC_WARPS(K);
        int smem = W * 2 * K * 256 * (int)sizeof(float);
        cudaCheck(cudaFuncSetAttribute(embedding_bwd_rows_kernel<K>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        grid = (T + W - 1) / W;
        if (grid > EMB_BWD_BLOCKS)
            grid = EMB_BWD_BLOCKS;
        embedding_bwd_rows_kernel<K><<<grid, W * 32, smem, stream>>>(
            dsum, dword, partials, dout, dout_add, ids, types, cu_seqlens, n, word, pos, type, gamma,
            mean, rstd, T, H, p_drop, seed, stream_id);
    });
    cudaCheck(cudaGetLastError());
    colsum_finalize(dgamma, partials, grid, H, stream);
    colsum_finalize(dbeta, partials + (size_t)grid * H, grid, H, stream);

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
