/* lamb.cu — one fused LAMB step over every parameter tensor, held as slices of one flat fp32
 * master buffer (plus floatX working copy, fp32 gradient, m and v with the same offsets), with
 * global gradient-norm clipping. Reference: kernels/ref/lamb_ref.c; the update is stated in
 * kernels.h (lamb_update).
 *
 * Work is cut into chunks of UNPAD_LAMB_CHUNK elements, never straddling two tensors; block b of
 * every kernel takes chunk b and finds its tensor by binary search over chunk_begin. Four kernels:
 *   1. per-chunk sums of grad^2;
 *   2. one block adds them in a fixed order: the global norm and the clipping factor (NaN when the
 *      norm or a guard value is not finite: kernels 3 and 4 then change nothing);
 *   3. moments m, v updated; per-chunk sums of w^2 and u^2;
 *   4. each block adds its tensor's chunk sums in a fixed order (the trust ratio), recomputes u
 *      from the new m, v and applies it; writes master and the floatX working copy.
 * No float atomics: the step is bitwise reproducible. Chunks whose start is a multiple of 4
 * elements use 16-byte accesses; tensor offsets need not be aligned (others fall back to 4 bytes). */
#include <math.h>

#include "kernels.h"
#include "rowops.cuh"

#define LAMB_THREADS 256

/* Device copy of the hyperparameters with the bias corrections folded in. */
typedef struct {
    float lr, beta1, beta2, eps, weight_decay, max_grad_norm;
    float bc1, bc2; /* 1 - beta^step */
} lamb_consts;

/* scratch layout (floats): [0] clip factor, [1] global norm, then the per-chunk partials. */
#define LAMB_CLIP 0
#define LAMB_NORM 1
#define LAMB_G2(nchunks) 2
#define LAMB_WU(nchunks) (2 + (nchunks))

/* ---- kernels ------------------------------------------------------------------------------------ */

/* The tensor of chunk b and the chunk's element range [start, start + len) in the flat buffers. */
__device__ __forceinline__ int lamb_chunk(const lamb_tensor *t, int n, int b, int64_t *start,
                                          int *len)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (t[mid].chunk_begin <= b)
            lo = mid;
        else
            hi = mid - 1;
    }
    int64_t first = (int64_t)(b - t[lo].chunk_begin) * UNPAD_LAMB_CHUNK;
    int64_t left = t[lo].size - first;
    *start = t[lo].offset + first;
    *len = (int)(left < UNPAD_LAMB_CHUNK ? (left > 0 ? left : 0) : UNPAD_LAMB_CHUNK);
    return lo;
}

__device__ __forceinline__ float lamb_u(float m, float v, float w, int decay, const lamb_consts c)
{
    float u = (m / c.bc1) / (sqrtf(v / c.bc2) + c.eps);
    return decay ? u + c.weight_decay * w : u;
}

/* Calls f(j, 4) for 4-element groups of [start, start + len) when the chunk is 16-byte aligned
 * (f then uses float4 accesses at j), and f(j, 1) for the rest, threads striding by LAMB_THREADS. */
template <typename Fn>
__device__ __forceinline__ void lamb_for_each(int64_t start, int len, Fn f)
{
    int i0 = 0;
    if ((start & 3) == 0) {
        int n4 = len >> 2;
#pragma unroll 2
        for (int i = threadIdx.x; i < n4; i += LAMB_THREADS)
            f(start + 4 * (int64_t)i, 4);
        i0 = n4 * 4;
    }
    for (int i = i0 + threadIdx.x; i < len; i += LAMB_THREADS)
        f(start + i, 1);
}

/* Loads / stores n (1 or 4) consecutive floats at p + j. */
__device__ __forceinline__ void ld(float v[4], const float *p, int64_t j, int n)
{
    if (n == 4) {
        float4 t = *reinterpret_cast<const float4 *>(p + j);
        v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
    } else {
        v[0] = p[j];
    }
}
__device__ __forceinline__ void st(float *p, int64_t j, const float v[4], int n)
{
    if (n == 4)
        *reinterpret_cast<float4 *>(p + j) = make_float4(v[0], v[1], v[2], v[3]);
    else
        p[j] = v[0];
}

__global__ void __launch_bounds__(LAMB_THREADS)
    lamb_grad_sq_kernel(float *scratch, const float *grad, const lamb_tensor *t, int n)
{
    __shared__ float sh[32];
    int64_t start;
    int len;
    lamb_chunk(t, n, blockIdx.x, &start, &len);
    float s = 0.0f;
    lamb_for_each(start, len, [&](int64_t j, int cnt) {
        float g[4];
        ld(g, grad, j, cnt);
        for (int q = 0; q < cnt; q++)
            s += g[q] * g[q];
    });
    s = block_sum(s, sh);
    if (threadIdx.x == 0)
        scratch[LAMB_G2(gridDim.x) + blockIdx.x] = s;
}

__global__ void __launch_bounds__(1024)
    lamb_clip_kernel(float *scratch, float *grad_norm, int nchunks, float max_grad_norm, const float *guard,
                     int n_guard)
{
    __shared__ float sh[32];
    float s = 0.0f;
    for (int i = threadIdx.x; i < nchunks; i += blockDim.x)
        s += scratch[LAMB_G2(nchunks) + i];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) {
        float norm = sqrtf(s);
        scratch[LAMB_NORM] = norm;
        int skip = !isfinite(norm);
        for (int i = 0; i < n_guard; i++)
            skip |= !isfinite(guard[i]);
        /* a NaN clip factor tells the next two kernels to leave everything as it is */
        scratch[LAMB_CLIP] = skip ? NAN : norm > max_grad_norm ? max_grad_norm / norm : 1.0f;
        if (grad_norm)
            *grad_norm = norm;
    }
}

__global__ void __launch_bounds__(LAMB_THREADS)
    lamb_moments_kernel(float *m, float *v, float *scratch, const float *master, const float *grad,
                        const lamb_tensor *t, int n, lamb_consts c)
{
    __shared__ float sh[32];
    int64_t start;
    int len;
    int k = lamb_chunk(t, n, blockIdx.x, &start, &len);
    int decay = t[k].weight_decay;
    float clip = scratch[LAMB_CLIP];
    if (!isfinite(clip))
        return;
    float w2 = 0.0f, u2 = 0.0f;
    lamb_for_each(start, len, [&](int64_t j, int cnt) {
        float g[4], w[4], mj[4], vj[4];
        ld(g, grad, j, cnt);
        ld(w, master, j, cnt);
        ld(mj, m, j, cnt);
        ld(vj, v, j, cnt);
        for (int q = 0; q < cnt; q++) {
            float gq = g[q] * clip;
            mj[q] = c.beta1 * mj[q] + (1.0f - c.beta1) * gq;
            vj[q] = c.beta2 * vj[q] + (1.0f - c.beta2) * gq * gq;
            float u = lamb_u(mj[q], vj[q], w[q], decay, c);
            w2 += w[q] * w[q];
            u2 += u * u;
        }
        st(m, j, mj, cnt);
        st(v, j, vj, cnt);
    });
    w2 = block_sum(w2, sh);
    u2 = block_sum(u2, sh);
    if (threadIdx.x == 0) {
        scratch[LAMB_WU(gridDim.x) + 2 * blockIdx.x] = w2;
        scratch[LAMB_WU(gridDim.x) + 2 * blockIdx.x + 1] = u2;
    }
}

__global__ void __launch_bounds__(LAMB_THREADS)
    lamb_apply_kernel(float *master, floatX *work, const float *m, const float *v,
                      const float *scratch, const lamb_tensor *t, int n, lamb_consts c)
{
    __shared__ float sh[32];
    int64_t start;
    int len;
    int k = lamb_chunk(t, n, blockIdx.x, &start, &len);
    int first = t[k].chunk_begin;
    int last = k + 1 < n ? t[k + 1].chunk_begin : gridDim.x;
    if (!isfinite(scratch[LAMB_CLIP]))
        return;
    const float *wu = scratch + LAMB_WU(gridDim.x);
    float w2 = 0.0f, u2 = 0.0f;
    for (int b = first + threadIdx.x; b < last; b += LAMB_THREADS) {
        w2 += wu[2 * b];
        u2 += wu[2 * b + 1];
    }
    w2 = block_sum(w2, sh);
    u2 = block_sum(u2, sh);
    float ratio = (w2 > 0.0f && u2 > 0.0f) ? sqrtf(w2) / sqrtf(u2) : 1.0f;
    float step = c.lr * ratio;
    int decay = t[k].weight_decay;
    lamb_for_each(start, len, [&](int64_t j, int cnt) {
        float w[4], mj[4], vj[4];
        ld(w, master, j, cnt);
        ld(mj, m, j, cnt);
        ld(vj, v, j, cnt);
        for (int q = 0; q < cnt; q++)
            w[q] -= step * lamb_u(mj[q], vj[q], w[q], decay, c);
        st(master, j, w, cnt);
        if (cnt == 4) {
#ifdef UNPAD_FP32
            *reinterpret_cast<float4 *>(work + j) = make_float4(w[0], w[1], w[2], w[3]);
#else
            __nv_bfloat162 lo = __floats2bfloat162_rn(w[0], w[1]), hi = __floats2bfloat162_rn(w[2], w[3]);
            uint2 u;
            u.x = *reinterpret_cast<uint32_t *>(&lo);
            u.y = *reinterpret_cast<uint32_t *>(&hi);
            *reinterpret_cast<uint2 *>(work + j) = u;
#endif
        } else {
            store1(work + j, w[0]);
        }
    });
}

__global__ void convert_f32_to_floatX_kernel(floatX *out, const float *in, int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        store1(out + i, in[i]);
}

/* ---- launchers ---------------------------------------------------------------------------------- */

int lamb_tensors_chunk(lamb_tensor *t, int n)
{
    int64_t chunks = 0;
    for (int i = 0; i < n; i++) {
        t[i].chunk_begin = (int32_t)chunks;
        int64_t c = (t[i].size + UNPAD_LAMB_CHUNK - 1) / UNPAD_LAMB_CHUNK;
        chunks += c > 0 ? c : 1;
    }
    return (int)chunks;
}

size_t lamb_scratch_bytes(int n_chunks)
{
    return (size_t)(2 + 3 * (size_t)n_chunks) * sizeof(float);
}

void lamb_update(float *master, floatX *work, float *m, float *v, const float *grad,
                 const lamb_tensor *tensors, int n_tensors, int n_chunks, lamb_hparams hp,
                 float *grad_norm, const float *guard, int n_guard, float *scratch, cudaStream_t stream)
{
    UNPAD_REQUIRE(n_tensors >= 1 && n_chunks >= n_tensors);
    UNPAD_REQUIRE(n_guard >= 0 && (n_guard == 0 || guard != NULL));
    UNPAD_REQUIRE(hp.step >= 1 && hp.beta1 >= 0.0f && hp.beta1 < 1.0f && hp.beta2 >= 0.0f &&
                  hp.beta2 < 1.0f && hp.max_grad_norm > 0.0f);
    UNPAD_REQUIRE(scratch != NULL);
    lamb_consts c = {hp.lr, hp.beta1, hp.beta2, hp.eps, hp.weight_decay, hp.max_grad_norm,
                     (float)(1.0 - pow(hp.beta1, hp.step)), (float)(1.0 - pow(hp.beta2, hp.step))};
    lamb_grad_sq_kernel<<<n_chunks, LAMB_THREADS, 0, stream>>>(scratch, grad, tensors, n_tensors);
    cudaCheck(cudaGetLastError());
    lamb_clip_kernel<<<1, 1024, 0, stream>>>(scratch, grad_norm, n_chunks, hp.max_grad_norm, guard, n_guard);
    cudaCheck(cudaGetLastError());
    lamb_moments_kernel<<<n_chunks, LAMB_THREADS, 0, stream>>>(m, v, scratch, master, grad, tensors,
                                                               n_tensors, c);
    cudaCheck(cudaGetLastError());
    lamb_apply_kernel<<<n_chunks, LAMB_THREADS, 0, stream>>>(master, work, m, v, scratch, tensors,
                                                             n_tensors, c);
    cudaCheck(cudaGetLastError());
}

void convert_f32_to_floatX(floatX *out, const float *in, int64_t n, cudaStream_t stream)
{
    UNPAD_REQUIRE(n >= 0);
    if (n == 0)
        return;
    int64_t blocks = (n + 255) / 256;
    convert_f32_to_floatX_kernel<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, stream>>>(
        out, in, n);
    cudaCheck(cudaGetLastError());
}
