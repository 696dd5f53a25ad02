/* glue.cu — the trainer's small kernels (see glue.h): the kernels, then their launchers. */
#include <math.h>

#include "dropout.h"
#include "gpu/glue.h"
#include "rowops.cuh"

/* ---- kernels ------------------------------------------------------------------------------- */

__global__ void init_trunc_normal_kernel(float *w, int64_t n, float std, uint64_t seed, uint64_t id)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float z = 0.0f;
        for (uint64_t k = 0; k < 64; k++) { /* redraw outside [-2, 2]: P(accept) = 0.95 */
            uint64_t h = dropout_hash(seed, id * 64 + k, (uint64_t)i);
            float u1 = ((float)(h >> 40) + 0.5f) / 16777216.0f;            /* (0, 1) */
            float u2 = (float)((h >> 16) & 0xffffff) / 16777216.0f;       /* [0, 1) */
            z = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
            if (fabsf(z) <= 2.0f)
                break;
            z = 0.0f;
        }
        w[i] = std * z;
    }
}

__global__ void fill_f32_kernel(float *w, int64_t n, float v)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        w[i] = v;
}

/* one block (256 threads) per row: argmax with the smallest index on ties */
__global__ void mlm_correct_kernel(float *correct, const floatX *logits, const int32_t *labels,
                                   int V, int Vpad)
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
    __shared__ float sv[256];
    __shared__ int si[256];
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

__global__ void nsp_correct_kernel(float *correct, const floatX *logits, const int32_t *labels,
                                   int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    int pred = load1(logits + 2 * i + 1) > load1(logits + 2 * i) ? 1 : 0;
    correct[i] = pred == labels[i] ? 1.0f : 0.0f;
}

__device__ float array_sum(const float *v, int n, float *sh)
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

__global__ void stats_accumulate_kernel(float *acc, const float *ml, const float *mc, int P,
                                        const float *nl, const float *nc, int n)
{
    __shared__ float sh[256];
    float a = array_sum(ml, P, sh), b = array_sum(mc, P, sh), c = array_sum(nl, n, sh),
          d = array_sum(nc, n, sh);
    if (threadIdx.x == 0) {
        acc[0] += a;
        acc[1] += b;
        acc[2] += c;
        acc[3] += d;
    }
}

__global__ void gelu_tanh_bwd_kernel(floatX *dx, const floatX *dout, const floatX *x, int64_t n)
{
    const float c = 0.7978845608028654f;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v = load1(x + i);
        float th = tanhf(c * (v + 0.044715f * v * v * v));
        float g = 0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * c * (1.0f + 3.0f * 0.044715f * v * v);
        store1(dx + i, load1(dout + i) * g);
    }
}

/* ---- launchers ----------------------------------------------------------------------------- */

static int grid_for(int64_t n)
{
    int64_t g = (n + 255) / 256;
    return (int)(g < 1 ? 1 : g > 65536 ? 65536 : g);
}

extern "C" void glue_init_trunc_normal(float *w, int64_t n, float std, uint64_t seed, uint64_t id,
                                       cudaStream_t stream)
{
    if (n <= 0)
        return;
    init_trunc_normal_kernel<<<grid_for(n), 256, 0, stream>>>(w, n, std, seed, id);
    cudaCheck(cudaGetLastError());
}

extern "C" void glue_fill_f32(float *w, int64_t n, float v, cudaStream_t stream)
{
    if (n <= 0)
        return;
    fill_f32_kernel<<<grid_for(n), 256, 0, stream>>>(w, n, v);
    cudaCheck(cudaGetLastError());
}

extern "C" void glue_mlm_correct(float *correct, const floatX *logits, const int32_t *labels, int P, int V,
                                 int Vpad, cudaStream_t stream)
{
    if (P <= 0)
        return;
    mlm_correct_kernel<<<P, 256, 0, stream>>>(correct, logits, labels, V, Vpad);
    cudaCheck(cudaGetLastError());
}

extern "C" void glue_nsp_correct(float *correct, const floatX *logits, const int32_t *labels, int n,
                                 cudaStream_t stream)
{
    if (n <= 0)
        return;
    nsp_correct_kernel<<<(n + 127) / 128, 128, 0, stream>>>(correct, logits, labels, n);
    cudaCheck(cudaGetLastError());
}

extern "C" void glue_stats_accumulate(float *acc, const float *mlm_loss, const float *mlm_correct, int P,
                                      const float *nsp_loss, const float *nsp_correct, int n,
                                      cudaStream_t stream)
{
    stats_accumulate_kernel<<<1, 256, 0, stream>>>(acc, mlm_loss, mlm_correct, P, nsp_loss, nsp_correct, n);
    cudaCheck(cudaGetLastError());
}

extern "C" void glue_gelu_tanh_bwd(floatX *dx, const floatX *dout, const floatX *x, int64_t n,
                                   cudaStream_t stream)
{
    if (n <= 0)
        return;
    gelu_tanh_bwd_kernel<<<grid_for(n), 256, 0, stream>>>(dx, dout, x, n);
    cudaCheck(cudaGetLastError());
}
