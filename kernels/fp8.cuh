/* fp8.cuh — FP8 copies written by kernels beside their floatX outputs (the operand of the FP8 product
 * that reads the output next), as kernels/fp8.cu's cast_fp8 would make them from the stored output:
 * the floatX-rounded value times the scale, rounded to nearest even, saturated to the largest
 * finite; max |stored value| folded into a device float. */
#ifndef UNPAD_FP8_CUH
#define UNPAD_FP8_CUH

#include <cuda_fp8.h>

#include "kernels.h"
#include "rowops.cuh"

/* Where a kernel writes its FP8 copy: bytes q (same element offsets as the floatX output), the
 * scale it multiplies by, the maximum it folds into (kernels.h fp8_scales_update's amax). */
typedef struct {
    uint8_t *q;
    const float *scale;
    float *amax;
} fp8_out;

/* Two floats (already scaled) -> two FP8 bytes of format FMT, a in the low byte (the element order
 * in memory): the hardware's cvt.rn.satfinite, round to nearest even, beyond the largest finite
 * value (infinities too) to that value, NaN to NaN. */
template <int FMT>
__device__ __forceinline__ uint16_t fp8_cvt2(float a, float b)
{
    return (uint16_t)__nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE,
                                              FMT == FP8_E4M3 ? __NV_E4M3 : __NV_E5M2);
}

/* Eight floats (rounded here to floatX, as the floatX output stores them) -> eight FP8 bytes of
 * format FMT times s, element 0 in the lowest byte; m = max(m, |rounded|). */
template <int FMT>
__device__ __forceinline__ uint2 fp8_pack8(const float f[8], float s, float &m)
{
    uint32_t w[2] = {0u, 0u};
#pragma unroll
    for (int j = 0; j < 8; j += 2) {
        float a = round1(f[j]), b = round1(f[j + 1]);
        m = fmaxf(m, fmaxf(fabsf(a), fabsf(b)));
        uint32_t h = fp8_cvt2<FMT>(__fmul_rn(a, s), __fmul_rn(b, s));
        w[j / 4] |= h << (8 * (j % 4));
    }
    return make_uint2(w[0], w[1]);
}

/* A kernel's start (F8: it writes an FP8 copy): the scale, and the block's maximum zeroed (ordered
 * before its use by fp8_amax_block's first barrier). */
template <bool F8>
__device__ __forceinline__ float fp8_begin(const float *scale, unsigned *smax)
{
    if (!F8)
        return 0.0f;
    if (threadIdx.x == 0 && threadIdx.y == 0)
        *smax = 0u;
    return *scale;
}

/* The block's maximum of m into *amax: every thread of the block calls it (two barriers); smax is
 * a __shared__ unsigned the caller zeroed before a barrier earlier in the kernel. Non-negative
 * floats order as their bits. */
__device__ __forceinline__ void fp8_amax_block(float m, unsigned *smax, float *amax)
{
    __syncthreads();
    atomicMax(smax, __float_as_uint(m));
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0)
        atomicMax(reinterpret_cast<unsigned *>(amax), *smax);
}

#endif
