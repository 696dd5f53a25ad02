/* init.cu — parameter initialisation on the device: a truncated normal that is a pure function of
 * (seed, tensor id, element), and a constant fill (LayerNorm gamma). Reference:
 * kernels/ref/init_ref.c. */
#include <math.h>

#include "dropout.h"
#include "kernels.h"
#include "rowops.cuh"

#define INIT_THREADS 256
#define INIT_MAX_BLOCKS 65536 /* grid-stride beyond this */

/* ---- kernels ------------------------------------------------------------------------------------ */

__global__ void init_trunc_normal_kernel(float *w, int64_t n, float std, uint64_t seed, uint64_t id)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float z = 0.0f;
        for (uint64_t k = 0; k < INIT_TRUNC_DRAWS; k++) { /* redraw outside [-2, 2]: P(accept) = 0.95 */
            uint64_t h = dropout_hash(seed, id * INIT_TRUNC_DRAWS + k, (uint64_t)i);
            float u1 = ((float)(h >> 41) + 0.5f) / 8388608.0f; /* (0, 1), exact: 23 bits + 0.5 fit a float */
            float u2 = (float)((h >> 16) & 0xffffff) / 16777216.0f; /* [0, 1) */
            z = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
            if (fabsf(z) <= 2.0f)
                break;
            z = 0.0f;
        }
        w[i] = std * z;
    }
}

/* One thread that returns once the GPU's global timer has advanced ns nanoseconds. */
__global__ void hold_stream_kernel(uint64_t ns)
{
    uint64_t t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

__global__ void fill_f32_kernel(float *w, int64_t n, float v)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        w[i] = v;
}

/* ---- launchers ---------------------------------------------------------------------------------- */

static unsigned init_grid(int64_t n)
{
    int64_t g = (n + INIT_THREADS - 1) / INIT_THREADS;
    return (unsigned)(g < 1 ? 1 : g > INIT_MAX_BLOCKS ? INIT_MAX_BLOCKS : g);
}

void init_trunc_normal(float *w, int64_t n, float std, uint64_t seed, uint64_t id, cudaStream_t stream)
{
    UNPAD_REQUIRE(n >= 0 && std >= 0.0f);
    if (n == 0)
        return;
    init_trunc_normal_kernel<<<init_grid(n), INIT_THREADS, 0, stream>>>(w, n, std, seed, id);
    cudaCheck(cudaGetLastError());
}

void hold_stream(uint64_t ns, cudaStream_t stream)
{
    hold_stream_kernel<<<1, 1, 0, stream>>>(ns);
    cudaCheck(cudaGetLastError());
}

void fill_f32(float *w, int64_t n, float v, cudaStream_t stream)
{
    UNPAD_REQUIRE(n >= 0);
    if (n == 0)
        return;
    fill_f32_kernel<<<init_grid(n), INIT_THREADS, 0, stream>>>(w, n, v);
    cudaCheck(cudaGetLastError());
}
