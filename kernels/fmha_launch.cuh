/* fmha_launch.cuh — what the two implementations of fmha.h share: kernels/fmha.cu (bf16, tensor
 * cores) and kernels/fmha_fp32.cu (the fp32 build). The launchers' argument record and the limit
 * checks fmha.h promises, which stop the program with file:line and the violated limit (and, in
 * the kernels, the trap on a sequence longer than max_len). */
#ifndef UNPAD_FMHA_LAUNCH_CUH
#define UNPAD_FMHA_LAUNCH_CUH

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fmha.h"

#define FMHA_REQUIRE(cond, ...)                                                                   \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "%s:%d: fmha: ", __FILE__, __LINE__);                                 \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fprintf(stderr, "\n");                                                                \
            exit(EXIT_FAILURE);                                                                   \
        }                                                                                         \
    } while (0)

namespace {

struct Args {
    int T, NH, seq_begin, seq_end, max_len;
    float p_drop;
    uint64_t seed, stream_id;
};

inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* The limits of fmha.h and the shape index, for the launcher named `who`; returns the record. */
inline Args check_args(const char *who, int shape, int n_shapes, int T, int NH, int seq_begin,
                       int seq_end, int max_len, float p_drop, uint64_t seed, uint64_t stream_id)
{
    FMHA_REQUIRE(NH >= 1 && NH <= 65535, "%s: NH = %d, expected 1 .. 65535", who, NH);
    FMHA_REQUIRE(T >= 0, "%s: T = %d < 0", who, T);
    FMHA_REQUIRE(seq_begin >= 0 && seq_end >= seq_begin && seq_end - seq_begin <= 65535,
                 "%s: sequence range [%d, %d) invalid (at most 65535 sequences per group)", who,
                 seq_begin, seq_end);
    FMHA_REQUIRE(max_len >= 1 && max_len <= FMHA_MAX_LEN, "%s: max_len = %d, expected 1 .. %d", who,
                 max_len, FMHA_MAX_LEN);
    FMHA_REQUIRE(p_drop >= 0.0f && p_drop < 1.0f, "%s: dropout p = %g, expected 0 <= p < 1", who,
                 (double)p_drop);
    FMHA_REQUIRE((size_t)NH * FMHA_HEAD_DIM * 3 * (size_t)T < ((size_t)1 << 40), "%s: T * NH too large",
                 who);
    FMHA_REQUIRE(shape >= 0 && shape < n_shapes, "%s: shape %d, expected 0 .. %d", who, shape,
                 n_shapes - 1);
    return Args{T, NH, seq_begin, seq_end, max_len, p_drop, seed, stream_id};
}

inline void check_fwd_pointers(const void *out, const float *lse, const void *qkv, const int32_t *cu)
{
    FMHA_REQUIRE(out && lse && qkv && cu, "fmha_fwd: NULL pointer");
    FMHA_REQUIRE(aligned16(out) && aligned16(qkv), "fmha_fwd: out and qkv must be 16-byte aligned");
}

inline void check_bwd_pointers(const void *dqkv, const void *workspace, const void *dout,
                               const void *out, const float *lse, const void *qkv, const int32_t *cu)
{
    FMHA_REQUIRE(dqkv && workspace && dout && out && lse && qkv && cu, "fmha_bwd: NULL pointer");
    FMHA_REQUIRE(aligned16(dqkv) && aligned16(workspace) && aligned16(dout) && aligned16(out) &&
                     aligned16(qkv),
                 "fmha_bwd: dqkv, workspace, dout, out and qkv must be 16-byte aligned");
}

/* In a kernel: a sequence longer than the max_len the grid was sized for stops the kernel. */
__device__ __forceinline__ void check_len(int len, int max_len, int s)
{
    if (len > max_len) {
        if (threadIdx.x == 0)
            printf("fmha: sequence %d has length %d > max_len %d given to the launcher\n", s, len,
                   max_len);
        __trap();
    }
}

/* The same check without the message, for kernels issuing wgmma: any call (printf's) in them would
 * make ptxas serialize their wgmma pipelines. The trap surfaces at the next checked CUDA call. */
__device__ __forceinline__ void check_len_quiet(int len, int max_len)
{
    if (len > max_len)
        __trap();
}

} /* namespace */

/* fmha.h's fmha_bwd_shape, the same in both: all of the backward's launches (each build compiles
 * one of the two files, so this is defined once). */
extern "C" void fmha_bwd_shape(int shape, floatX *dqkv, void *workspace, const floatX *dout, const floatX *out,
                               const float *lse, const floatX *qkv, const int32_t *cu_seqlens, int T, int NH,
                               int seq_begin, int seq_end, int max_len, float p_drop, uint64_t seed,
                               uint64_t stream_id, cudaStream_t stream)
{
    fmha_bwd_parts(shape, FMHA_BWD_ALL, dqkv, workspace, dout, out, lse, qkv, cu_seqlens, T, NH, seq_begin,
                   seq_end, max_len, p_drop, seed, stream_id, stream);
}

#endif
