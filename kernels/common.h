/* common.h — what every kernel file, launcher and host caller shares: the storage type of
 * activations and working weights seen from C (floatX: bf16, or fp32 in the fp32 build), one
 * check macro per library and one for invariants (they print file:line and the reason and stop the
 * program; only the trainer and GPU tests use them, never the CPU library).
 *
 * Error policy of the trainer (exec/, exec/gpu/, kernels/): the library's (sim/unpad.h), with the
 * GPU's check macros and a formatted invariant check:
 * - Input and environment errors RETURN: a bad flag, file, shard, plan, checkpoint or batch, a
 *   folder that cannot be written, a full disk, host or device memory that cannot be had, a
 *   missing GPU. The function fills an unpad_err ("file:line: reason", with what to do where it
 *   helps) and returns its status (UNPAD_EINVAL, UNPAD_EIO, UNPAD_ENOMEM, ...) up to main(),
 *   which prints it, closes what it opened (the trace, the metrics file) and exits non-zero.
 * - Invariant violations STOP at once: a state the code itself must never reach (a launcher's
 *   limit, a gradient range out of order, a trace end without its begin) goes through
 *   invariantCheck / UNPAD_REQUIRE, which print file:line and the condition and exit.
 * - CUDA, cuBLAS, NCCL and MPI failures STOP at once through cudaCheck, cublasCheck, ncclCheck and
 *   mpiCheck, printing file:line and the library's own message; every kernel launch is followed by
 *   cudaCheck(cudaGetLastError()). The one exception: an allocation of device memory whose failure
 *   a person can act on (a smaller batch) returns ENOMEM with the sizes (exec/gpu/devmem.h).
 * Every host allocation is checked; a failure is an environment error (ENOMEM).
 * Open Chrome traces are closed on every exit, stop or not (exec/chrome_trace.h).
 *
 * Layout of the unpadded batch everywhere: the tokens of all sequences packed one after another,
 * activations (T, H) row-major, `cu_seqlens` (n + 1) int32 prefix sums of the lengths on the device. */
#ifndef UNPAD_KERNELS_COMMON_H
#define UNPAD_KERNELS_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* bf16 storage as seen from C host code; kernels reinterpret it as __nv_bfloat16. */
typedef uint16_t bf16;

#ifdef __cplusplus
#define UNPAD_EXTERN_C extern "C"
#else
#define UNPAD_EXTERN_C
#endif

/* Host-side bf16 <-> float (round to nearest even), for references and tests. */
static inline float bf16_to_float(bf16 h)
{
    union { uint32_t u; float f; } v;
    v.u = (uint32_t)h << 16;
    return v.f;
}
static inline bf16 float_to_bf16(float f)
{
    union { uint32_t u; float f; } v;
    v.f = f;
    if ((v.u & 0x7f800000u) == 0x7f800000u && (v.u & 0x7fffffu)) /* NaN stays NaN */
        return (bf16)((v.u >> 16) | 0x40);
    uint32_t round = 0x7fffu + ((v.u >> 16) & 1u);
    return (bf16)((v.u + round) >> 16);
}

/* floatX: the storage type of activations, activation gradients and the working copy of the
 * weights. The normal build stores them in bf16 (fp32 accumulation and statistics, fp32 master
 * weights, gradients and optimizer state). The fp32 build (-DUNPAD_FP32, binaries named *-fp32)
 * stores them in fp32 and runs the GEMMs in full fp32 (no TF32): the same kernels and the same
 * model code, for a tight comparison with an fp32 peer. Device code reinterprets bf16 storage as
 * __nv_bfloat16. */
#ifdef UNPAD_FP32
typedef float floatX;
#define UNPAD_PRECISION "fp32"
static inline float floatX_to_float(floatX x) { return x; }
static inline floatX float_to_floatX(float f) { return f; }
#else
typedef bf16 floatX;
#define UNPAD_PRECISION "bf16"
static inline float floatX_to_float(floatX x) { return bf16_to_float(x); }
static inline floatX float_to_floatX(float f) { return float_to_bf16(f); }
#endif

#ifdef __CUDACC__
#include <cuda_runtime.h>
#elif defined(UNPAD_WITH_CUDA_HEADERS)
#include <cuda_runtime.h>
#endif

/* An invariant of the code itself (never the user's input): stops with file:line and the reason. */
#define invariantCheck(cond, ...)                                                                 \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "%s:%d: internal error (%s): ", __FILE__, __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fputc('\n', stderr);                                                                  \
            exit(EXIT_FAILURE);                                                                   \
        }                                                                                         \
    } while (0)

#if defined(__CUDACC__) || defined(UNPAD_WITH_CUDA_HEADERS) || defined(CUDART_VERSION)
#define cudaCheck(call)                                                                           \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "%s:%d: CUDA error %s: %s\n", __FILE__, __LINE__, cudaGetErrorName(e_), \
                    cudaGetErrorString(e_));                                                      \
            exit(EXIT_FAILURE);                                                                   \
        }                                                                                         \
    } while (0)
#endif

#endif
