/* embedding.cu — BERT input embedding on the unpadded batch: word + position + token-type rows,
 * LayerNorm, dropout; and its backward into the three tables and the LayerNorm parameters.
 * Reference: kernels/ref/embedding_ref.c.
 *
 * Rows are held in registers by the row groups of rowops.cuh, whose LayerNorm forward and backward
 * (group_ln_fwd, group_ln_bwd) layernorm.cu shares; persistent grids in which each group issues the
 * next batch's table gathers before it works on the current batch. Position ids restart at 0 in
 * every sequence; a row finds its sequence by binary search in cu_seqlens, so the caller passes no
 * position array. The dropout mask is dropout.h's (dropout_apply8: two cheap hashes per eight
 * elements).
 *
 * Backward, three launches and no (T, H) intermediate:
 *   order:  the rows in position-major order (position, then sequence), with ids, types and stats;
 *   rows:   each row group takes an equal contiguous range of that order, recomputes the
 *           pre-LayerNorm sum from the tables (only mean and rstd are saved), does the LayerNorm
 *           backward and scatters the gradient of the sum:
 *             word table: 16-byte fp32 atomics (rows repeat, e.g. [MASK]; not bitwise
 *               deterministic);
 *             position table: the rows of one position are consecutive in the group's range, so
 *               their sum stays in registers and is added to dpos by its only owner; a position
 *               whose rows span two or more groups leaves one partial per group in scratch;
 *             type table, gamma, beta: per-block partials in registers;
 *   finish: adds the shared positions' partials in group order and the block partials in block
 *           order (deterministic: both orders depend only on the inputs). */
#include "kernels.h"
#include "dropout.h"
#include "rowops.cuh"

#define EMB_THREADS 256 /* 8 warps: 2 row groups at H = 1024 */
/* Rows per group and batch of the forward (at KV = 1; wider rows take 1) and its resident blocks
 * per SM (a register budget); rows per batch of the backward (its accumulators and prefetched
 * vectors fill 128 registers at one row). */
#ifndef EMB_FWD_ROWS1
#define EMB_FWD_ROWS1 2
#endif
#ifndef EMB_FWD_MIN_BLOCKS
#define EMB_FWD_MIN_BLOCKS 3
#endif
#ifndef EMB_BWD_ROWS
#define EMB_BWD_ROWS 1
#endif
#define EMB_FWD_ROWS(KV) ((KV) > 1 ? 1 : EMB_FWD_ROWS1)
#define EMB_BWD_BLOCKS 264 /* blocks of the backward row kernel: 2 per SM on the H200 */
#define EMB_MAX_TYPES 4    /* token types accumulated in registers by the backward */
#define EMB_FINISH_THREADS 256

/* The row-group shape (rowops.cuh) per width, with at most two vectors per thread: the backward
 * keeps 2 + 1 + types column accumulators of KV x 8 registers, so wide rows take 8 warps. */
#define EMB_ROW_GROUP_DISPATCH(H, ...)                                                            \
    do {                                                                                          \
        int nvec_ = (H) / 8;                                                                      \
        if (nvec_ <= 32) { constexpr int RW = 1, KV = 1; __VA_ARGS__; }                           \
        else if (nvec_ <= 64) { constexpr int RW = 2, KV = 1; __VA_ARGS__; }                      \
        else if (nvec_ <= 128) { constexpr int RW = 4, KV = 1; __VA_ARGS__; }                     \
        else if (nvec_ <= 256) { constexpr int RW = 8, KV = 1; __VA_ARGS__; }                     \
        else { constexpr int RW = 8, KV = 2; __VA_ARGS__; }                                       \
    } while (0)

/* Row groups per block at width H (the dispatch above). */
static int emb_groups_per_block(int H)
{
    int nvec = H / 8;
    int rw = nvec <= 32 ? 1 : nvec <= 64 ? 2 : nvec <= 128 ? 4 : 8;
    return EMB_THREADS / (32 * rw);
}

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

/* Issues the gathers of the word, position and type vectors of the thread for R rows (zeros
 * where the row, flagged by ok[r], or the vector is absent). */
template <int RW, int KV, int R>
__device__ __forceinline__ void emb_gather(vec8 q[R][KV][3], const emb_rows e[R], const bool ok[R],
                                           int H, int gt, const floatX *word, const floatX *pos,
                                           const floatX *type)
{
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int k = 0; k < KV; k++) {
            int vi = gt + 32 * RW * k;
            q[r][k][0] = q[r][k][1] = q[r][k][2] = vec8_zero();
            if (ok[r] && vi < H / 8) {
                q[r][k][0] = vec8_load(word + (size_t)e[r].w * H + vi * 8);
                q[r][k][1] = vec8_load(pos + (size_t)e[r].p * H + vi * 8);
                q[r][k][2] = vec8_load(type + (size_t)e[r].y * H + vi * 8);
            }
        }
}

/* v = word + pos + type from the gathered raw vectors. */
template <int KV, int R>
__device__ __forceinline__ void emb_sum(float v[R][KV][8], const vec8 q[R][KV][3])
{
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int k = 0; k < KV; k++) {
            float a[8], b[8];
            unpack8(v[r][k], q[r][k][0]);
            unpack8(a, q[r][k][1]);
            unpack8(b, q[r][k][2]);
#pragma unroll
            for (int j = 0; j < 8; j++)
                v[r][k][j] += a[j] + b[j];
        }
}

/* out = dropout(LayerNorm(word + pos + type)). A persistent grid of row groups, R rows per batch;
 * the next batch's gathers and the indices of the batch after it are in flight while a batch is
 * normalised, masked and stored. */
template <int RW, int KV>
__global__ void __launch_bounds__(EMB_THREADS, KV > 1 ? 2 : EMB_FWD_MIN_BLOCKS)
    embedding_fwd_kernel(floatX *out, float *mean_out, float *rstd_out, const int32_t *ids,
                         const int32_t *types, const int32_t *cu_seqlens, int n, const floatX *word,
                         const floatX *pos, const floatX *type, const floatX *gamma, const floatX *beta,
                         int T, int H, float eps, float p, uint64_t seed, uint64_t stream_id)
{
    constexpr int R = EMB_FWD_ROWS(KV), GT = 32 * RW, G = EMB_THREADS / GT;
    __shared__ float sh[2 * R * (EMB_THREADS / 32)];
    int gt = threadIdx.x % GT, parity = 0;
    float scale = 1.0f / (1.0f - p);
    const uint64_t key = dropout_key(seed, stream_id);
    const uint32_t thr = dropout_threshold(p);
    float gam[KV][8], bet[KV][8];
    group_cols_load<RW, KV>(gam, gamma, H, gt);
    group_cols_load<RW, KV>(bet, beta, H, gt);
    int stride = gridDim.x * G * R;
    int r0 = (blockIdx.x * G + threadIdx.x / GT) * R;
    emb_rows e[R];
    bool ok[R];
    vec8 q[R][KV][3];
#pragma unroll
    for (int r = 0; r < R; r++)
        e[r] = emb_rows_of(r0 + r, T, ids, types, cu_seqlens, n), ok[r] = r0 + r < T;
    emb_gather<RW, KV, R>(q, e, ok, H, gt, word, pos, type);
#pragma unroll
    for (int r = 0; r < R; r++)
        e[r] = emb_rows_of(r0 + stride + r, T, ids, types, cu_seqlens, n);
    for (; r0 < T; r0 += stride) {
        float v[R][KV][8];
        emb_sum<KV, R>(v, q);
#pragma unroll
        for (int r = 0; r < R; r++)
            ok[r] = r0 + stride + r < T;
        emb_gather<RW, KV, R>(q, e, ok, H, gt, word, pos, type);
#pragma unroll
        for (int r = 0; r < R; r++)
            e[r] = emb_rows_of(r0 + 2 * stride + r, T, ids, types, cu_seqlens, n);
        float mean[R], rstd[R];
        group_ln_fwd<RW, KV, R>(v, mean, rstd, gam, bet, H, eps, gt, sh, parity);
        group_for_each<RW, KV, R>(r0, T, H, gt, [&](int r, int k, size_t i) {
            if (p > 0.0f)
                dropout_apply8(v[r][k], key, thr, scale, i);
            store8(out + i, v[r][k]);
        });
        group_stats_store<R>(mean_out, rstd_out, mean, rstd, r0, T, gt);
    }
}

/* items[k] = (row t, position, ids[t], types[t]) and stats[k] = (mean[t], rstd[t]) for the rows
 * in position-major order: k = (rows of all sequences at positions < p) + (sequences before s
 * longer than p) = sum over s' of min(len_s', p) + #{s' < s : len_s' > p}. One thread per row. */
__global__ void embedding_bwd_order_kernel(int4 *items, float2 *stats, const int32_t *ids,
                                           const int32_t *types, const int32_t *cu_seqlens, int n,
                                           const float *mean, const float *rstd, int T)
{
    __shared__ int lens[EMB_FINISH_THREADS];
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int s = 0, p = 0, k = 0;
    if (t < T) {
        s = seq_of_row(cu_seqlens, n, t);
        p = t - cu_seqlens[s];
    }
    for (int b0 = 0; b0 < n; b0 += blockDim.x) {
        __syncthreads();
        if (b0 + (int)threadIdx.x < n)
            lens[threadIdx.x] = cu_seqlens[b0 + threadIdx.x + 1] - cu_seqlens[b0 + threadIdx.x];
        __syncthreads();
        int m = min((int)blockDim.x, n - b0);
        for (int i = 0; i < m; i++) {
            int len = lens[i];
            k += min(len, p) + (b0 + i < s && len > p);
        }
    }
    if (t < T) {
        items[k] = make_int4(t, p, ids[t], types[t]);
        stats[k] = make_float2(mean[t], rstd[t]);
    }
}

/* The range [k0, k1) of the position-major order that row group gi of ng takes. */
__device__ __forceinline__ void emb_group_range(int gi, int ng, int T, int &k0, int &k1)
{
    k0 = (int)((long long)gi * T / ng);
    k1 = (int)((long long)(gi + 1) * T / ng);
}

/* Where group gi puts its sum for position q of its range [k0, k1) (k0 < k1): -1 straight into
 * dpos (the group holds all of q's rows), else its partial slot 0 (q is its first position and
 * shared) or 1 (q is its last position, shared with the groups after it). */
__device__ __forceinline__ int emb_pos_slot(const int4 *items, int T, int k0, int k1, int q)
{
    int pf = items[k0].y, pl = items[k1 - 1].y;
    bool split_start = k0 > 0 && items[k0 - 1].y == pf;
    bool split_end = k1 < T && items[k1].y == pl;
    if (q == pf && (split_start || (pf == pl && split_end)))
        return 0;
    if (q == pl && split_end)
        return 1;
    return -1;
}

/* a[k] += b[k] over the thread's vectors. */
template <int KV>
__device__ __forceinline__ void emb_acc_add(float a[KV][8], const float b[KV][8])
{
#pragma unroll
    for (int k = 0; k < KV; k++)
#pragma unroll
        for (int j = 0; j < 8; j++)
            a[k][j] += b[k][j];
}

/* dst[col] (+)= the thread's vectors (fp32 rows of width H). */
template <int RW, int KV, bool ADD>
__device__ __forceinline__ void emb_row_write(float *dst, const float a[KV][8], int H, int gt)
{
#pragma unroll
    for (int k = 0; k < KV; k++) {
        int vi = gt + 32 * RW * k;
        if (vi >= H / 8)
            continue;
        float4 *o = reinterpret_cast<float4 *>(dst + vi * 8);
        float4 x0 = make_float4(a[k][0], a[k][1], a[k][2], a[k][3]);
        float4 x1 = make_float4(a[k][4], a[k][5], a[k][6], a[k][7]);
        if (ADD) {
            float4 c0 = o[0], c1 = o[1];
            x0.x += c0.x, x0.y += c0.y, x0.z += c0.z, x0.w += c0.w;
            x1.x += c1.x, x1.y += c1.y, x1.z += c1.z, x1.w += c1.w;
        }
        o[0] = x0;
        o[1] = x1;
    }
}

/* Row pass of the backward over the position-major order (see the file header). NTY: type
 * accumulators (>= type_vocab). partials (2 + NTY, gridDim.x, H): dgamma, dbeta, dtype[y] block
 * sums; slots (groups, 2, H): the partial sums of shared positions (emb_pos_slot). */
template <int RW, int KV, int NTY>
__global__ void __launch_bounds__(EMB_THREADS, 2)
    embedding_bwd_rows_kernel(float *dword, float *dpos, float *slots, float *partials,
                              const int4 *items, const float2 *stats, const floatX *dout,
                              const floatX *dout_add, const floatX *word, const floatX *pos,
                              const floatX *type, const floatX *gamma, int T, int H, float p,
                              uint64_t seed, uint64_t stream_id)
{
    constexpr int R = EMB_BWD_ROWS, GT = 32 * RW, G = EMB_THREADS / GT, NA = 2 + NTY;
    __shared__ float sh[2 * 2 * R * (EMB_THREADS / 32)];
    __shared__ float shacc[8 * EMB_THREADS];
    int gt = threadIdx.x % GT, parity = 0;
    float scale = 1.0f / (1.0f - p);
    const uint64_t key = dropout_key(seed, stream_id);
    const uint32_t thr = dropout_threshold(p);
    float gam[KV][8], acc[NA][KV][8], pacc[KV][8];
    group_cols_load<RW, KV>(gam, gamma, H, gt);
    group_acc_zero<NA, KV>(acc);
    group_acc_zero<1, KV>(&pacc);
    int ng = gridDim.x * G, gi = blockIdx.x * G + threadIdx.x / GT, k0, k1;
    emb_group_range(gi, ng, T, k0, k1);
    int batches = ((T + ng - 1) / ng + R - 1) / R; /* the same for every group: see rowops.cuh */
    int cur = k0 < k1 ? items[k0].y : -1; /* the position pacc sums */

    /* batch b: rows k0 + b R + r; `it` holds the next batch's items, `nx` the one after */
    int4 it[R], nx[R];
    float2 st[R];
    vec8 qd[R][KV], qa[R][KV], qt[R][KV][3];
    auto items_load = [&](int4 dst[R], int kb) {
#pragma unroll
        for (int r = 0; r < R; r++)
            dst[r] = kb + r < k1 ? items[kb + r] : make_int4(-1, 0, 0, 0);
    };
    auto rows_load = [&](int kb) {
        emb_rows e[R];
        bool ok[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            e[r].w = it[r].z, e[r].p = it[r].y, e[r].y = it[r].w;
            ok[r] = it[r].x >= 0;
            st[r] = ok[r] ? stats[kb + r] : make_float2(0.0f, 0.0f);
#pragma unroll
            for (int k = 0; k < KV; k++) {
                int vi = gt + GT * k;
                qd[r][k] = qa[r][k] = vec8_zero();
                if (ok[r] && vi < H / 8) {
                    size_t i = (size_t)it[r].x * H + vi * 8;
                    qd[r][k] = vec8_load(dout + i);
                    if (dout_add)
                        qa[r][k] = vec8_load(dout_add + i);
                }
            }
        }
        emb_gather<RW, KV, R>(qt, e, ok, H, gt, word, pos, type);
    };
    items_load(it, k0);
    rows_load(k0);
    items_load(nx, k0 + R);
    for (int b = 0, kb = k0; b < batches; b++, kb += R) {
        float x[R][KV][8], dy[R][KV][8], mu[R], rs[R];
        int4 cu[R];
        emb_sum<KV, R>(x, qt);
        group_unpack_sum<R, KV>(dy, qd, qa);
#pragma unroll
        for (int r = 0; r < R; r++) {
            mu[r] = st[r].x, rs[r] = st[r].y;
            cu[r] = it[r], it[r] = nx[r];
        }
        rows_load(kb + R);
        items_load(nx, kb + 2 * R);
        if (p > 0.0f)
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int k = 0; k < KV; k++)
                    if (cu[r].x >= 0)
                        dropout_apply8(dy[r][k], key, thr, scale, (size_t)cu[r].x * H + (gt + GT * k) * 8);
        group_ln_bwd<RW, KV, R>(dy, x, mu, rs, gam, acc[0], acc[1], H, sh, parity);
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (cu[r].x < 0)
                break;
            float *dw = dword + (size_t)cu[r].z * H;
#pragma unroll
            for (int k = 0; k < KV; k++) {
                int vi = gt + GT * k;
                if (vi < H / 8) {
                    const float *d = dy[r][k];
                    float4 *w4 = reinterpret_cast<float4 *>(dw + vi * 8);
                    atomicAdd(w4, make_float4(d[0], d[1], d[2], d[3]));
                    atomicAdd(w4 + 1, make_float4(d[4], d[5], d[6], d[7]));
                }
            }
            int y = cu[r].w; /* the same for the whole group: no divergence */
            if (y == 0)
                emb_acc_add<KV>(acc[2], dy[r]);
            else if (y == 1 && NTY > 1)
                emb_acc_add<KV>(acc[NTY > 1 ? 3 : 2], dy[r]);
            else if (y == 2 && NTY > 2)
                emb_acc_add<KV>(acc[NTY > 2 ? 4 : 2], dy[r]);
            else if (NTY > 3)
                emb_acc_add<KV>(acc[NTY > 3 ? 5 : 2], dy[r]);
            if (cu[r].y != cur) { /* a new position: the previous one is complete */
                int slot = emb_pos_slot(items, T, k0, k1, cur);
                if (slot < 0)
                    emb_row_write<RW, KV, true>(dpos + (size_t)cur * H, pacc, H, gt);
                else
                    emb_row_write<RW, KV, false>(slots + ((size_t)gi * 2 + slot) * H, pacc, H, gt);
                group_acc_zero<1, KV>(&pacc);
                cur = cu[r].y;
            }
            emb_acc_add<KV>(pacc, dy[r]);
        }
    }
    if (k0 < k1) {
        int slot = emb_pos_slot(items, T, k0, k1, cur);
        if (slot < 0)
            emb_row_write<RW, KV, true>(dpos + (size_t)cur * H, pacc, H, gt);
        else
            emb_row_write<RW, KV, false>(slots + ((size_t)gi * 2 + slot) * H, pacc, H, gt);
    }
    group_acc_store<RW, KV, NA>(acc, shacc, partials + (size_t)blockIdx.x * H, (size_t)gridDim.x * H, H);
}

/* The end of the backward, one launch. Blocks [0, ng): block g adds, for each shared position
 * whose first rows group g holds, g's slot and the slot 0 of the groups after it that start in
 * that position, in group order, to dpos. Blocks [ng, ...): (2 + type_vocab) x ceil(H / 8)
 * column sums of the rows kernel's partials, blocks in order, into dgamma, dbeta, dtype. */
__global__ void __launch_bounds__(EMB_FINISH_THREADS)
    embedding_bwd_finish_kernel(float *dpos, float *dgamma, float *dbeta, float *dtype,
                                const float *slots, const int4 *items, const float *partials,
                                int ng, int nblocks, int T, int H)
{
    if ((int)blockIdx.x < ng) {
        int g = blockIdx.x, k0, k1;
        emb_group_range(g, ng, T, k0, k1);
        if (k0 >= k1)
            return;
        int pf = items[k0].y, pl = items[k1 - 1].y;
        for (int slot = 0; slot < 2; slot++) {
            int q = slot == 0 ? pf : pl;
            if (emb_pos_slot(items, T, k0, k1, q) != slot || (slot == 0 && k0 > 0 && items[k0 - 1].y == q))
                continue; /* not shared, or started by an earlier group */
            for (int c4 = threadIdx.x; c4 < H / 4; c4 += blockDim.x) {
                float4 s = reinterpret_cast<const float4 *>(slots + ((size_t)g * 2 + slot) * H)[c4];
                for (int g2 = g + 1; g2 < ng; g2++) {
                    int a0, a1;
                    emb_group_range(g2, ng, T, a0, a1);
                    if (a0 >= a1)
                        continue;
                    if (items[a0].y != q)
                        break;
                    float4 d = reinterpret_cast<const float4 *>(slots + (size_t)g2 * 2 * H)[c4];
                    s.x += d.x, s.y += d.y, s.z += d.z, s.w += d.w;
                }
                float4 *o = reinterpret_cast<float4 *>(dpos + (size_t)q * H) + c4;
                float4 cur = *o;
                cur.x += s.x, cur.y += s.y, cur.z += s.z, cur.w += s.w;
                *o = cur;
            }
        }
        return;
    }
    /* 8 columns x 32 rows of blocks (thread row y adds blocks y, y + 32, ...), then a fixed tree */
    __shared__ float sh[32][9];
    int cb = (H + 7) / 8, id = blockIdx.x - ng;
    int a = id / cb, x = threadIdx.x % 8, y = threadIdx.x / 8, c = (id % cb) * 8 + x;
    const float *part = partials + (size_t)a * nblocks * H;
    float s = 0.0f;
    if (c < H) {
#pragma unroll 4
        for (int b = y; b < nblocks; b += 32)
            s += part[(size_t)b * H + c];
    }
    sh[y][x] = s;
    __syncthreads();
    for (int half = 16; half > 0; half >>= 1) {
        if (y < half)
            sh[y][x] += sh[y + half][x];
        __syncthreads();
    }
    if (y == 0 && c < H) {
        float *dst = a == 0 ? dgamma : a == 1 ? dbeta : dtype + (size_t)(a - 2) * H;
        dst[c] += sh[0][x];
    }
}

/* ---- launchers ---------------------------------------------------------------------------------- */

/* scratch: partials (2 + EMB_MAX_TYPES, EMB_BWD_BLOCKS, H), slots (groups, 2, H) fp32, then the
 * order's items (T) int4 and stats (T) float2. */
size_t embedding_bwd_scratch_bytes(int T, int H, int type_vocab)
{
    size_t groups = (size_t)EMB_BWD_BLOCKS * emb_groups_per_block(H);
    size_t floats = (size_t)(2 + EMB_MAX_TYPES) * EMB_BWD_BLOCKS * H + groups * 2 * H;
    return floats * sizeof(float) + (size_t)T * (sizeof(int4) + sizeof(float2));
}

void embedding_fwd(floatX *out, float *mean, float *rstd, const int32_t *ids, const int32_t *types,
                   const int32_t *cu_seqlens, int n, const floatX *word, const floatX *pos,
                   const floatX *type, const floatX *gamma, const floatX *beta, int T, int H, float eps,
                   float p_drop, uint64_t seed, uint64_t stream_id, cudaStream_t stream)
{
    UNPAD_REQUIRE(H > 0 && H % 8 == 0 && H <= 4096);
    UNPAD_REQUIRE(n >= 1 && T >= 0);
    UNPAD_REQUIRE(p_drop >= 0.0f && p_drop < 1.0f);
    if (T == 0)
        return;
    EMB_ROW_GROUP_DISPATCH(H, {
        constexpr int rows_per_block = EMB_THREADS / (32 * RW) * EMB_FWD_ROWS(KV);
        int grid = persistent_grid((const void *)embedding_fwd_kernel<RW, KV>, EMB_THREADS,
                                   (T + rows_per_block - 1) / rows_per_block);
        embedding_fwd_kernel<RW, KV><<<grid, EMB_THREADS, 0, stream>>>(
            out, mean, rstd, ids, types, cu_seqlens, n, word, pos, type, gamma, beta, T, H, eps,
            p_drop, seed, stream_id);
    });
    cudaCheck(cudaGetLastError());
}

void embedding_bwd(float *dword, float *dpos, float *dtype, float *dgamma, float *dbeta,
                   const floatX *dout, const floatX *dout_add, const int32_t *ids,
                   const int32_t *types, const int32_t *cu_seqlens, int n, int max_len,
                   const floatX *word, const floatX *pos, const floatX *type, const floatX *gamma,
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
    int G = emb_groups_per_block(H);
    int grid = (T + G * EMB_BWD_ROWS - 1) / (G * EMB_BWD_ROWS); /* depends only on T and H */
    if (grid > EMB_BWD_BLOCKS)
        grid = EMB_BWD_BLOCKS;
    int ng = grid * G;
    float *partials = scratch;                                         /* (2 + types, grid, H) */
    float *slots = partials + (size_t)(2 + EMB_MAX_TYPES) * EMB_BWD_BLOCKS * H; /* (ng, 2, H) */
    int4 *items = reinterpret_cast<int4 *>(slots + (size_t)EMB_BWD_BLOCKS * G * 2 * H); /* (T) */
    float2 *stats = reinterpret_cast<float2 *>(items + T);                         /* (T) */

    embedding_bwd_order_kernel<<<(T + EMB_FINISH_THREADS - 1) / EMB_FINISH_THREADS,
                                 EMB_FINISH_THREADS, 0, stream>>>(items, stats, ids, types,
                                                                  cu_seqlens, n, mean, rstd, T);
    cudaCheck(cudaGetLastError());
    EMB_ROW_GROUP_DISPATCH(H, {
        if (type_vocab <= 2)
            embedding_bwd_rows_kernel<RW, KV, 2><<<grid, EMB_THREADS, 0, stream>>>(
                dword, dpos, slots, partials, items, stats, dout, dout_add, word, pos, type, gamma,
                T, H, p_drop, seed, stream_id);
        else
            embedding_bwd_rows_kernel<RW, KV, EMB_MAX_TYPES><<<grid, EMB_THREADS, 0, stream>>>(
                dword, dpos, slots, partials, items, stats, dout, dout_add, word, pos, type, gamma,
                T, H, p_drop, seed, stream_id);
    });
    cudaCheck(cudaGetLastError());
    int fin = ng + (2 + type_vocab) * ((H + 7) / 8);
    embedding_bwd_finish_kernel<<<fin, EMB_FINISH_THREADS, 0, stream>>>(
        dpos, dgamma, dbeta, dtype, slots, items, partials, ng, grid, T, H);
    cudaCheck(cudaGetLastError());
}
