/* gelu.cu — bias + activation on (T, N) floatX rows, forward and backward with the bias gradient:
 * GELU (exact erf form, as BERT; FFN1 and the MLM head transform), tanh (NSP pooler), and the
 * plain bias gradient (colsum) for GEMMs whose epilogue did not produce it, and the tanh-GELU
 * backward of the MLM head transform.
 * Reference: kernels/ref/gelu_ref.c.
 *
 * Forward: four 16-byte vectors (8 columns each) per thread. Backward: a grid of row blocks x
 * column chunks fixed by the shape; a block is (tx, ty) threads, tx over column vectors, ty over
 * rows, so loads stay coalesced for any N (shapes per activation: see bias_act_bwd); each row
 * block's column sums go to partials, then
 * colsum_finalize adds the row blocks in order: deterministic. */
#include "fp8.cuh"
#include "kernels.h"
#include "rowops.cuh"

#define ACT_BWD_BLOCKS UNPAD_COLSUM_BLOCKS /* most row blocks of a backward (partials) */
#define ACT_BWD_TARGET 2048 /* plain bias gradient: about this many blocks (4096 measured slower) */
#define ACT_BWD_ROWS 4      /* plain bias gradient: rows per thread and step */
#define ACT_FWD_VECS 4      /* 16-byte vectors per thread in the forward */
#define ACT_THREADS 256

enum { ACT_NONE = 0, ACT_GELU = 1, ACT_TANH = 2, ACT_GELU_TANH = 3 };

/* ---- kernels ------------------------------------------------------------------------------------ */

__device__ __forceinline__ float gelu_erf(float z)
{
    return 0.5f * z * (1.0f + erff(z * 0.70710678118654752f));
}

__device__ __forceinline__ float gelu_erf_grad(float z)
{
    return 0.5f * (1.0f + erff(z * 0.70710678118654752f)) +
           z * 0.39894228040143268f * __expf(-0.5f * z * z);
}

/* out = act(x + bias): each thread ACT_FWD_VECS 16-byte vectors (8 columns each), all loaded
 * before any is used; block b takes vectors [b * ACT_FWD_VECS * blockDim.x, ...), coalesced.
 * cvn = N / 8 vectors per row. */
template <int ACT>
__global__ void __launch_bounds__(ACT_THREADS)
    bias_act_fwd_kernel(floatX *out, const floatX *x, const floatX *bias, unsigned nvec, unsigned cvn)
{
    unsigned i0 = blockIdx.x * (ACT_FWD_VECS * ACT_THREADS) + threadIdx.x;
    vec8 q[ACT_FWD_VECS], qb[ACT_FWD_VECS];
#pragma unroll
    for (int u = 0; u < ACT_FWD_VECS; u++) {
        unsigned i = i0 + u * ACT_THREADS;
        if (i < nvec) {
            q[u] = vec8_load(x + (size_t)i * 8);
            qb[u] = vec8_load(bias + (i % cvn) * 8);
        }
    }
#pragma unroll
    for (int u = 0; u < ACT_FWD_VECS; u++) {
        unsigned i = i0 + u * ACT_THREADS;
        if (i >= nvec)
            break;
        float v[8], b[8];
        unpack8(v, q[u]);
        unpack8(b, qb[u]);
#pragma unroll
        for (int j = 0; j < 8; j++)
            v[j] = ACT == ACT_GELU ? gelu_erf(v[j] + b[j]) : tanhf(v[j] + b[j]);
        store8(out + (size_t)i * 8, v);
    }
}

/* gelu_tanh'(v), v the GELU's input (kernels/ref/gelu_ref.c gelu_tanh_bwd_ref), and gelu_tanh(v)
 * itself into *g */
__device__ __forceinline__ float gelu_tanh_grad(float v, float *g)
{
    const float c = 0.7978845608028654f; /* sqrt(2 / pi) */
    float th = tanhf(c * (v + 0.044715f * v * v * v));
    *g = 0.5f * v * (1.0f + th);
    return 0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * c * (1.0f + 3.0f * 0.044715f * v * v);
}

/* Loads VEC floatX (VEC = 8: one vec8; VEC = 1: one element). */
template <int VEC>
__device__ __forceinline__ void loadv(float f[VEC], const floatX *p)
{
    if constexpr (VEC == 8)
        load8(f, p);
    else
        f[0] = load1(p);
}

template <int VEC>
__device__ __forceinline__ void storev(floatX *p, const float f[VEC])
{
    if constexpr (VEC == 8)
        store8(p, f);
    else
        store1(p, f[0]);
}

/* d = dout * act'(...): GELU uses aux = x (pre-bias) and bias; tanh uses aux = out; GELU_TANH aux =
 * the GELU's input (bias included); NONE: d = dout.
 * dx (optional) receives d; partials (gridDim.x, N) (optional) receive the block's column sums.
 * F8: dx8 receives E5M2(d as stored in dx, times *scale8) and *amax8 the maximum |d as stored|.
 * act (GELU_TANH, optional): the activation's value gelu_tanh(aux).
 * Block (x, y) of the grid takes rows [x * rows_per_block, ...) and column vectors
 * [y * blockDim.x, (y + 1) * blockDim.x); thread (tx, ty) one column vector, rows ty, ty + blockDim.y, ...
 * A gap (ACT_NONE without F8): the N columns summed are those of rows of ld columns less the gap_len
 * vectors from vector gap_cv on (logical vector cv >= gap_cv reads vector cv + gap_len); elsewhere ld = N
 * and gap_len = 0. Partials are (gridDim.x, N) over the logical columns. */
template <int ACT, int VEC, int ROWS, bool F8> /* F8: VEC 8 only */
__global__ void __launch_bounds__(ACT_THREADS)
    bias_act_bwd_kernel(floatX *dx, float *partials, const floatX *dout, const floatX *aux,
                        const floatX *bias, int T, int N, int rows_per_block, uint8_t *dx8,
                        const float *scale8, float *amax8, floatX *act, int ld, int gap_cv, int gap_len)
{
    __shared__ float sh[ACT_THREADS * VEC];
    __shared__ unsigned smax;
    float s8 = fp8_begin<F8>(scale8, &smax), m8 = 0.0f;
    int tx = blockDim.x, ty = blockDim.y;
    int cvn = N / VEC;
    int r0 = blockIdx.x * rows_per_block, r1 = min(T, r0 + rows_per_block);
    int tid = threadIdx.y * tx + threadIdx.x;
    int cv = blockIdx.y * tx + threadIdx.x;
    int pcv = cv >= gap_cv ? cv + gap_len : cv; /* the vector read */
    float acc[VEC];
#pragma unroll
    for (int j = 0; j < VEC; j++)
        acc[j] = 0.0f;
    if (cv < cvn) {
        float b[VEC];
        if (ACT == ACT_GELU)
            loadv<VEC>(b, bias + cv * VEC);
        /* ROWS rows per thread and step, all loaded before any is used (the dx stores would
         * otherwise keep the compiler from moving the next row's loads above them) */
#pragma unroll(ROWS == 1 ? 4 : 1)
        for (int r = r0 + threadIdx.y; r < r1; r += ROWS * ty) {
            float d[ROWS][VEC], a[ROWS][VEC];
#pragma unroll
            for (int u = 0; u < ROWS; u++) {
                size_t off = (size_t)(r + u * ty) * ld + (size_t)pcv * VEC;
                if (r + u * ty < r1) {
                    loadv<VEC>(d[u], dout + off);
                    if (ACT != ACT_NONE)
                        loadv<VEC>(a[u], aux + off);
                }
            }
#pragma unroll
            for (int u = 0; u < ROWS; u++) {
                if (r + u * ty >= r1)
                    break;
                size_t off = (size_t)(r + u * ty) * ld + (size_t)pcv * VEC;
                float gv[VEC];
#pragma unroll
                for (int j = 0; j < VEC; j++) {
                    if (ACT == ACT_GELU)
                        d[u][j] *= gelu_erf_grad(a[u][j] + b[j]);
                    else if (ACT == ACT_TANH)
                        d[u][j] *= 1.0f - a[u][j] * a[u][j];
                    else if (ACT == ACT_GELU_TANH)
                        d[u][j] *= gelu_tanh_grad(a[u][j], &gv[j]);
                    acc[j] += d[u][j];
                }
                if (dx)
                    storev<VEC>(dx + off, d[u]);
                if (ACT == ACT_GELU_TANH && act)
                    storev<VEC>(act + off, gv);
                if constexpr (F8 && VEC == 8)
                    *reinterpret_cast<uint2 *>(dx8 + off) = fp8_pack8<FP8_E5M2>(d[u], s8, m8);
            }
        }
    }
    if (F8)
        fp8_amax_block(m8, &smax, amax8);
    if (!partials)
        return;
#pragma unroll
    for (int j = 0; j < VEC; j++)
        sh[tid * VEC + j] = acc[j];
    __syncthreads();
    if (threadIdx.y == 0 && cv < cvn) {
        float s[VEC];
#pragma unroll
        for (int j = 0; j < VEC; j++)
            s[j] = 0.0f;
        for (int y = 0; y < ty; y++)
#pragma unroll
            for (int j = 0; j < VEC; j++)
                s[j] += sh[(y * tx + threadIdx.x) * VEC + j];
#pragma unroll
        for (int j = 0; j < VEC; j++)
            partials[(size_t)blockIdx.x * N + (size_t)cv * VEC + j] = s[j];
    }
}

/* dx = dout * gelu_tanh'(x), element-wise: the MLM head transform's backward in the tanh-GELU
 * build (the encoder's tanh GELU runs in the GEMM epilogues). */
__global__ void gelu_tanh_bwd_kernel(floatX *dx, const floatX *dout, const floatX *x, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
    {
        float g;
        store1(dx + i, load1(dout + i) * gelu_tanh_grad(load1(x + i), &g));
    }
}

/* ---- launchers ---------------------------------------------------------------------------------- */

size_t bias_bwd_scratch_bytes(int N)
{
    return (size_t)ACT_BWD_BLOCKS * N * sizeof(float);
}

template <int ACT>
static void bias_act_fwd(floatX *out, const floatX *x, const floatX *bias, int T, int N,
                         cudaStream_t stream)
{
    UNPAD_REQUIRE(T >= 0 && N > 0 && N % 8 == 0);
    size_t nvec = (size_t)T * N / 8;
    UNPAD_REQUIRE(nvec < 0xffffffffu);
    if (nvec == 0)
        return;
    unsigned grid = (unsigned)((nvec + ACT_FWD_VECS * ACT_THREADS - 1) / (ACT_FWD_VECS * ACT_THREADS));
    bias_act_fwd_kernel<ACT><<<grid, ACT_THREADS, 0, stream>>>(out, x, bias, (unsigned)nvec, N / 8);
    cudaCheck(cudaGetLastError());
}

/* Block shape and grid of the backward; then the optional bias-gradient finalize. The split
 * depends only on (T, N). Measured on the H200 (bench_kernels, 2026-12-03):
 *   plain bias gradient (ACT_NONE): column chunks of 32 vectors (one per lane, 8 row phases per
 *     block), ACT_BWD_ROWS rows per thread and step, as many row blocks (at most ACT_BWD_BLOCKS)
 *     as make about ACT_BWD_TARGET blocks: 63% of copy bandwidth against 51-58% before;
 *   GELU / tanh: column chunks of at most ACT_THREADS vectors, ACT_BWD_BLOCKS / chunks row
 *     blocks, one row per thread and step: 67%, against 53% with the plain gradient's shape
 *     (GELU's derivative needs more registers: 4 rows per step halve the occupancy). */
/* The kernel alone (T > 0): partials (blocks, N) into scratch when with_partials; returns the row
 * blocks. ld, gap_at, gap_len: see bias_act_bwd_kernel, in columns. */
template <int ACT, int VEC>
static int bias_act_bwd_launch(floatX *dx, int with_partials, const floatX *dout, const floatX *aux,
                               const floatX *bias, int T, int N, float *scratch, cudaStream_t stream,
                               uint8_t *dx8, const float *scale8, float *amax8, floatX *act, int ld,
                               int gap_at, int gap_len)
{
    UNPAD_REQUIRE(T > 0 && N > 0 && N % VEC == 0 && gap_at % VEC == 0 && gap_len % VEC == 0);
    UNPAD_REQUIRE(gap_len == 0 || (ACT == ACT_NONE && dx == NULL && dx8 == NULL && ld >= N + gap_len));
    int cvn = N / VEC, tx, col_chunks, blocks;
    if (ACT == ACT_NONE) {
        tx = cvn < 32 ? cvn : 32; /* a warp reads 32 consecutive vectors of a row */
        col_chunks = (cvn + tx - 1) / tx;
        blocks = (ACT_BWD_TARGET + col_chunks - 1) / col_chunks;
        if (blocks > ACT_BWD_BLOCKS)
            blocks = ACT_BWD_BLOCKS;
    } else {
        col_chunks = (cvn + ACT_THREADS - 1) / ACT_THREADS;
        tx = (cvn + col_chunks - 1) / col_chunks;
        if (tx > 32)
            tx = (tx + 31) / 32 * 32;
        blocks = ACT_BWD_BLOCKS / col_chunks;
        if (blocks < 1)
            blocks = 1;
    }
    int ty = ACT_THREADS / tx;
    if (blocks > T)
        blocks = T;
    int rows_per_block = (T + blocks - 1) / blocks;
    blocks = (T + rows_per_block - 1) / rows_per_block;
    float *partials = with_partials ? scratch : NULL;
    constexpr int rows = ACT == ACT_NONE ? ACT_BWD_ROWS : 1;
    dim3 grid(blocks, col_chunks), block(tx, ty);
    int gcv = gap_len ? gap_at / VEC : cvn, glen = gap_len / VEC;
    if constexpr (VEC == 8) {
        if (dx8)
            bias_act_bwd_kernel<ACT, VEC, rows, true><<<grid, block, 0, stream>>>(
                dx, partials, dout, aux, bias, T, N, rows_per_block, dx8, scale8, amax8, act, ld, gcv, glen);
        else
            bias_act_bwd_kernel<ACT, VEC, rows, false><<<grid, block, 0, stream>>>(
                dx, partials, dout, aux, bias, T, N, rows_per_block, NULL, NULL, NULL, act, ld, gcv, glen);
    } else {
        UNPAD_REQUIRE(dx8 == NULL && act == NULL);
        bias_act_bwd_kernel<ACT, VEC, rows, false><<<grid, block, 0, stream>>>(
            dx, partials, dout, aux, bias, T, N, rows_per_block, NULL, NULL, NULL, NULL, ld, gcv, glen);
    }
    cudaCheck(cudaGetLastError());
    return blocks;
}

template <int ACT, int VEC>
static void bias_act_bwd(floatX *dx, float *dbias, const floatX *dout, const floatX *aux,
                         const floatX *bias, int T, int N, float *scratch, int accumulate,
                         cudaStream_t stream, uint8_t *dx8 = NULL, const float *scale8 = NULL,
                         float *amax8 = NULL, floatX *act = NULL)
{
    UNPAD_REQUIRE(T >= 0 && N > 0 && N % VEC == 0);
    UNPAD_REQUIRE(dbias == NULL || scratch != NULL);
    if (T == 0) { /* no rows: a written bias gradient is zero */
        if (dbias && !accumulate)
            cudaCheck(cudaMemsetAsync(dbias, 0, (size_t)N * sizeof(float), stream));
        return;
    }
    int blocks = bias_act_bwd_launch<ACT, VEC>(dx, dbias != NULL, dout, aux, bias, T, N, scratch, stream, dx8,
                                               scale8, amax8, act, N, 0, 0);
    if (dbias)
        colsum_finalize(dbias, scratch, blocks, N, accumulate, stream);
}

void bias_gelu_fwd(floatX *out, const floatX *x, const floatX *bias, int T, int N, cudaStream_t stream)
{
    bias_act_fwd<ACT_GELU>(out, x, bias, T, N, stream);
}

void bias_gelu_bwd(floatX *dx, float *dbias, const floatX *dout, const floatX *x, const floatX *bias,
                   int T, int N, float *scratch, int accumulate, cudaStream_t stream)
{
    UNPAD_REQUIRE(dx != NULL);
    bias_act_bwd<ACT_GELU, 8>(dx, dbias, dout, x, bias, T, N, scratch, accumulate, stream);
}

void bias_gelu_tanh_bwd(floatX *dx, float *dbias, uint8_t *dx8, float *amax8, const float *scale8, floatX *h,
                        const floatX *dout, const floatX *x, int T, int N, float *scratch, int accumulate,
                        cudaStream_t stream)
{
    UNPAD_REQUIRE(dx != NULL && N % 8 == 0 && (dx8 == NULL || (scale8 != NULL && amax8 != NULL)));
    UNPAD_REQUIRE(dx8 == NULL || !((uintptr_t)dx8 & 7));
    bias_act_bwd<ACT_GELU_TANH, 8>(dx, dbias, dout, x, NULL, T, N, scratch, accumulate, stream, dx8, scale8, amax8, h);
}

void bias_tanh_fwd(floatX *out, const floatX *x, const floatX *bias, int T, int N, cudaStream_t stream)
{
    bias_act_fwd<ACT_TANH>(out, x, bias, T, N, stream);
}

void bias_tanh_bwd(floatX *dx, float *dbias, const floatX *dout, const floatX *out, int T, int N,
                   float *scratch, int accumulate, cudaStream_t stream)
{
    UNPAD_REQUIRE(dx != NULL);
    bias_act_bwd<ACT_TANH, 8>(dx, dbias, dout, out, NULL, T, N, scratch, accumulate, stream);
}

void bias_bwd(float *dbias, const floatX *dout, int T, int N, float *scratch, int accumulate,
              cudaStream_t stream)
{
    UNPAD_REQUIRE(dbias != NULL);
    if (N % 8 == 0)
        bias_act_bwd<ACT_NONE, 8>(NULL, dbias, dout, NULL, NULL, T, N, scratch, accumulate, stream);
    else
        bias_act_bwd<ACT_NONE, 1>(NULL, dbias, dout, NULL, NULL, T, N, scratch, accumulate, stream);
}

void bias_bwd_qkv(float *dbias, uint8_t *dout8, float *amax8, const float *scale8, const floatX *dout, int T,
                  int H, float *scratch, int accumulate, cudaStream_t stream)
{
    UNPAD_REQUIRE(dbias != NULL && scratch != NULL && H > 0 && H % 8 == 0);
    UNPAD_REQUIRE(dout8 == NULL || (scale8 != NULL && amax8 != NULL && !((uintptr_t)dout8 & 7)));
    if (T == 0) {
        if (!accumulate)
            cudaCheck(cudaMemsetAsync(dbias, 0, (size_t)3 * H * sizeof(float), stream));
        return;
    }
    /* FP8 reads every column for the E5M2 copy and sums them all (partials (blocks, 3H)); bf16 reads
     * and sums the query and value columns alone (partials (blocks, 2H)) */
    int width = dout8 ? 3 * H : 2 * H;
    int blocks = dout8 ? bias_act_bwd_launch<ACT_NONE, 8>(NULL, 1, dout, NULL, NULL, T, 3 * H, scratch, stream,
                                                          dout8, scale8, amax8, NULL, 3 * H, 0, 0)
                       : bias_act_bwd_launch<ACT_NONE, 8>(NULL, 1, dout, NULL, NULL, T, 2 * H, scratch, stream,
                                                          NULL, NULL, NULL, NULL, 3 * H, H, H);
    /* the query's sums into dbias[0, H), the value's (at column width - H of each block's
     * partials) into dbias[2H, 3H), in one launch */
    colsum_finalize_kernel<<<dim3((H + 31) / 32, 2), dim3(32, 32), 0, stream>>>(
        dbias, dbias + 2 * H, NULL, scratch, blocks, (size_t)width, (size_t)(width - H), H, accumulate);
    cudaCheck(cudaGetLastError());
    if (!accumulate)
        cudaCheck(cudaMemsetAsync(dbias + H, 0, (size_t)H * sizeof(float), stream));
}

void gelu_tanh_bwd(floatX *dx, const floatX *dout, const floatX *x, int64_t n, cudaStream_t stream)
{
    UNPAD_REQUIRE(n >= 0);
    if (n == 0)
        return;
    int64_t g = (n + ACT_THREADS - 1) / ACT_THREADS;
    gelu_tanh_bwd_kernel<<<(unsigned)(g > 65536 ? 65536 : g), ACT_THREADS, 0, stream>>>(dx, dout, x, n);
    cudaCheck(cudaGetLastError());
}
