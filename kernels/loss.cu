/* loss.cu — the pre-training losses and the row movement around them: gather of the masked rows
 * (and CLS rows) and the scatter-add of their gradients, masked-LM softmax cross-entropy over the
 * padded vocabulary, the 2-class next-sentence loss, and a fixed-order sum for loss totals.
 * Reference: kernels/ref/loss_ref.c.
 *
 * MLM: one block per masked row; the row's logits (Vpad floatX) are read once by the forward (an
 * online max / sum-of-exp per thread, combined across the block) and once by the backward,
 * which may write dlogits over the logits in place. */
#include <math.h>

#include "kernels.h"
#include "rowops.cuh"

#define XENT_THREADS 256
/* 16-byte loads in flight per thread. Forward: 4 (8, with a base-2 online softmax, measured 15%
 * slower on the H200); backward: 8 (84% of copy bandwidth against 78% with one). */
#define XENT_FWD_UNROLL 4
#define XENT_BWD_UNROLL 8
#define SUM_THREADS 1024
#define ACC_THREADS 256 /* accuracy and loss totals */

/* ---- kernels ------------------------------------------------------------------------------------ */

__global__ void rows_gather_kernel(floatX *out, const floatX *in, const int32_t *rows, unsigned nvec,
                                   unsigned cvn, int H)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nvec)
        return;
    size_t r = i / cvn, cv = i % cvn;
    vec8_store(out + r * H + cv * 8, vec8_load(in + (size_t)rows[r] * H + cv * 8));
}

__global__ void rows_scatter_add_kernel(floatX *dst, const floatX *src, const int32_t *rows,
                                        unsigned nvec, unsigned cvn, int H)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nvec)
        return;
    size_t r = i / cvn, cv = i % cvn;
    floatX *d = dst + (size_t)rows[r] * H + cv * 8;
    float a[8], b[8];
    load8(a, d);
    load8(b, src + r * H + cv * 8);
#pragma unroll
    for (int j = 0; j < 8; j++)
        a[j] += b[j];
    store8(d, a);
}

/* Merges two (max, sum of exp(z - max)) pairs. */
__device__ __forceinline__ void lse_merge(float *m, float *s, float m2, float s2)
{
    float mx = fmaxf(*m, m2);
    if (mx == -INFINITY)
        return;
    *s = *s * expf(*m - mx) + s2 * expf(m2 - mx);
    *m = mx;
}

__global__ void __launch_bounds__(XENT_THREADS)
    mlm_xent_fwd_kernel(float *loss, float *lse_out, const floatX *logits, const int32_t *labels,
                        int V, int Vpad)
{
    __shared__ float shm[32], shs[32];
    int row = blockIdx.x;
    const floatX *z = logits + (size_t)row * Vpad;
    float m = -INFINITY, s = 0.0f;
    /* XENT_FWD_UNROLL vectors loaded before any is used, so several loads are in flight per thread */
    for (int cv0 = threadIdx.x; cv0 * 8 < V; cv0 += XENT_FWD_UNROLL * blockDim.x) {
        float v[XENT_FWD_UNROLL][8];
#pragma unroll
        for (int u = 0; u < XENT_FWD_UNROLL; u++) {
            int cv = cv0 + u * blockDim.x;
            if (cv * 8 < V)
                load8(v[u], z + cv * 8);
        }
#pragma unroll
        for (int u = 0; u < XENT_FWD_UNROLL; u++) {
            int cv = cv0 + u * blockDim.x;
            if (cv * 8 >= V)
                break;
            float vm = -INFINITY;
#pragma unroll
            for (int j = 0; j < 8; j++)
                if (cv * 8 + j < V)
                    vm = fmaxf(vm, v[u][j]);
            if (vm > m) {
                s *= __expf(m - vm);
                m = vm;
            }
#pragma unroll
            for (int j = 0; j < 8; j++)
                if (cv * 8 + j < V)
                    s += __expf(v[u][j] - m);
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        lse_merge(&m, &s, m2, s2);
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0)
        shm[warp] = m, shs[warp] = s;
    __syncthreads();
    if (warp == 0) {
        int nw = blockDim.x >> 5;
        m = lane < nw ? shm[lane] : -INFINITY;
        s = lane < nw ? shs[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
            lse_merge(&m, &s, m2, s2);
        }
        if (lane == 0) {
            float l = m + logf(s);
            int y = labels[row];
            lse_out[row] = l;
            loss[row] = y < 0 ? 0.0f : l - load1(z + y);
        }
    }
}

/* dlogits may alias logits: each thread reads its XENT_BWD_UNROLL vectors, then overwrites the same
 * vectors (all loads of a round are issued before its first store). */
__global__ void __launch_bounds__(XENT_THREADS)
    mlm_xent_bwd_kernel(floatX *dlogits, const floatX *logits, const float *lse,
                        const int32_t *labels, float scale, int V, int Vpad)
{
    int row = blockIdx.x;
    int y = labels[row];
    float l = lse[row];
    size_t base = (size_t)row * Vpad;
    int nv = Vpad / 8;
    for (int cv0 = threadIdx.x; cv0 < nv; cv0 += XENT_BWD_UNROLL * XENT_THREADS) {
        vec8 q[XENT_BWD_UNROLL];
#pragma unroll
        for (int u = 0; u < XENT_BWD_UNROLL; u++) {
            int cv = cv0 + u * XENT_THREADS;
            if (cv < nv)
                q[u] = vec8_load(logits + base + (size_t)cv * 8);
        }
#pragma unroll
        for (int u = 0; u < XENT_BWD_UNROLL; u++) {
            int cv = cv0 + u * XENT_THREADS;
            if (cv >= nv)
                break;
            float v[8];
            unpack8(v, q[u]);
#pragma unroll
            for (int j = 0; j < 8; j++) {
                int c = cv * 8 + j;
                v[j] = (y < 0 || c >= V) ? 0.0f : scale * (__expf(v[j] - l) - (c == y ? 1.0f : 0.0f));
            }
            store8(dlogits + base + (size_t)cv * 8, v);
        }
    }
}

__global__ void nsp_xent_kernel(float *loss, floatX *dlogits, const floatX *logits,
                                const int32_t *labels, float scale, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float z0 = load1(logits + 2 * i), z1 = load1(logits + 2 * i + 1);
    float mx = fmaxf(z0, z1);
    float l = mx + logf(expf(z0 - mx) + expf(z1 - mx));
    int y = labels[i];
    loss[i] = l - (y == 0 ? z0 : z1);
    if (dlogits) {
        store1(dlogits + 2 * i, scale * (expf(z0 - l) - (y == 0 ? 1.0f : 0.0f)));
        store1(dlogits + 2 * i + 1, scale * (expf(z1 - l) - (y == 1 ? 1.0f : 0.0f)));
    }
}

__global__ void __launch_bounds__(SUM_THREADS) reduce_sum_kernel(float *out, const float *in, int n)
{
    __shared__ float sh[32];
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        s += in[i];
    s = block_sum(s, sh);
    if (threadIdx.x == 0)
        out[0] = s;
}

/* One block (ACC_THREADS) per masked row: argmax over the first V columns, the smallest index on
 * ties. */
__global__ void __launch_bounds__(ACC_THREADS)
    mlm_correct_kernel(float *correct, const floatX *logits, const int32_t *labels, int V, int Vpad)
{
    const floatX *row = logits + (size_t)blockIdx.x * Vpad;
    float best = -INFINITY;
    int arg = 0x7fffffff;
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        float v = load1(row + j);
        if (v > best) {
            best = v;
            arg = j;
        }
    }
    __shared__ float sv[ACC_THREADS];
    __shared__ int si[ACC_THREADS];
    sv[threadIdx.x] = best;
    si[threadIdx.x] = arg;
    __syncthreads();
    for (int o = blockDim.x / 2; o > 0; o >>= 1) {
        if (threadIdx.x < o) {
            float v2 = sv[threadIdx.x + o];
            int i2 = si[threadIdx.x + o];
            if (v2 > sv[threadIdx.x] || (v2 == sv[threadIdx.x] && i2 < si[threadIdx.x])) {
                sv[threadIdx.x] = v2;
                si[threadIdx.x] = i2;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0)
        correct[blockIdx.x] = (labels[blockIdx.x] >= 0 && si[0] == labels[blockIdx.x]) ? 1.0f : 0.0f;
}

__global__ void nsp_correct_kernel(float *correct, const floatX *logits, const int32_t *labels, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    int pred = load1(logits + 2 * i + 1) > load1(logits + 2 * i) ? 1 : 0;
    correct[i] = pred == labels[i] ? 1.0f : 0.0f;
}

/* The sum of v[0..n) by one block in a fixed order. */
__device__ float acc_block_sum(const float *v, int n, float *sh)
{
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        s += v[i];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int o = blockDim.x / 2; o > 0; o >>= 1) {
        if (threadIdx.x < o)
            sh[threadIdx.x] += sh[threadIdx.x + o];
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

__global__ void __launch_bounds__(ACC_THREADS)
    stats_accumulate_kernel(float *acc, const float *ml, const float *mc, int P, const float *nl,
                            const float *nc, int n)
{
    __shared__ float sh[ACC_THREADS];
    float a = acc_block_sum(ml, P, sh), b = acc_block_sum(mc, P, sh), c = acc_block_sum(nl, n, sh),
          d = acc_block_sum(nc, n, sh);
    if (threadIdx.x == 0) {
        acc[0] += a;
        acc[1] += b;
        acc[2] += c;
        acc[3] += d;
    }
}

/* ---- launchers ---------------------------------------------------------------------------------- */

void rows_gather(floatX *out, const floatX *in, const int32_t *rows, int P, int H, cudaStream_t stream)
{
    UNPAD_REQUIRE(P >= 0 && H > 0 && H % 8 == 0);
    size_t nvec = (size_t)P * (H / 8);
    UNPAD_REQUIRE(nvec < 0xffffffffu);
    if (nvec == 0)
        return;
    rows_gather_kernel<<<(unsigned)((nvec + 255) / 256), 256, 0, stream>>>(out, in, rows, (unsigned)nvec,
                                                                            H / 8, H);
    cudaCheck(cudaGetLastError());
}

void rows_scatter_add(floatX *dst, const floatX *src, const int32_t *rows, int P, int H,
                      cudaStream_t stream)
{
    UNPAD_REQUIRE(P >= 0 && H > 0 && H % 8 == 0);
    size_t nvec = (size_t)P * (H / 8);
    UNPAD_REQUIRE(nvec < 0xffffffffu);
    if (nvec == 0)
        return;
    rows_scatter_add_kernel<<<(unsigned)((nvec + 255) / 256), 256, 0, stream>>>(dst, src, rows,
                                                                                 (unsigned)nvec, H / 8, H);
    cudaCheck(cudaGetLastError());
}

void mlm_xent_fwd(float *loss, float *lse, const floatX *logits, const int32_t *labels, int P, int V,
                  int Vpad, cudaStream_t stream)
{
    UNPAD_REQUIRE(P >= 0 && V >= 1 && V <= Vpad && Vpad % 8 == 0);
    if (P == 0)
        return;
    mlm_xent_fwd_kernel<<<P, XENT_THREADS, 0, stream>>>(loss, lse, logits, labels, V, Vpad);
    cudaCheck(cudaGetLastError());
}

void mlm_xent_bwd(floatX *dlogits, const floatX *logits, const float *lse, const int32_t *labels,
                  float scale, int P, int V, int Vpad, cudaStream_t stream)
{
    UNPAD_REQUIRE(P >= 0 && V >= 1 && V <= Vpad && Vpad % 8 == 0);
    if (P == 0)
        return;
    mlm_xent_bwd_kernel<<<P, XENT_THREADS, 0, stream>>>(dlogits, logits, lse, labels, scale, V,
                                                        Vpad);
    cudaCheck(cudaGetLastError());
}

void nsp_xent_fwd_bwd(float *loss, floatX *dlogits, const floatX *logits, const int32_t *labels,
                      float scale, int n, cudaStream_t stream)
{
    UNPAD_REQUIRE(n >= 0);
    if (n == 0)
        return;
    nsp_xent_kernel<<<(n + 127) / 128, 128, 0, stream>>>(loss, dlogits, logits, labels, scale, n);
    cudaCheck(cudaGetLastError());
}

void reduce_sum_f32(float *out, const float *in, int n, cudaStream_t stream)
{
    UNPAD_REQUIRE(n >= 0);
    reduce_sum_kernel<<<1, SUM_THREADS, 0, stream>>>(out, in, n);
    cudaCheck(cudaGetLastError());
}

void mlm_correct(float *correct, const floatX *logits, const int32_t *labels, int P, int V, int Vpad,
                 cudaStream_t stream)
{
    UNPAD_REQUIRE(P >= 0 && V >= 1 && V <= Vpad);
    if (P == 0)
        return;
    mlm_correct_kernel<<<P, ACC_THREADS, 0, stream>>>(correct, logits, labels, V, Vpad);
    cudaCheck(cudaGetLastError());
}

void nsp_correct(float *correct, const floatX *logits, const int32_t *labels, int n, cudaStream_t stream)
{
    UNPAD_REQUIRE(n >= 0);
    if (n == 0)
        return;
    nsp_correct_kernel<<<(n + 127) / 128, 128, 0, stream>>>(correct, logits, labels, n);
    cudaCheck(cudaGetLastError());
}

void stats_accumulate(float *acc, const float *mlm_loss, const float *mlm_correct, int P,
                      const float *nsp_loss, const float *nsp_correct, int n, cudaStream_t stream)
{
    UNPAD_REQUIRE(P >= 0 && n >= 0);
    stats_accumulate_kernel<<<1, ACC_THREADS, 0, stream>>>(acc, mlm_loss, mlm_correct, P, nsp_loss,
                                                           nsp_correct, n);
    cudaCheck(cudaGetLastError());
}
