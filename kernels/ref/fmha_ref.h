/* fmha_ref.h — plain-C reference of the FMHA launchers in kernels/fmha.h: the same names plus _ref,
 * the same arguments in the same order less the workspace and the stream, float where the launcher
 * has bf16, cu_seqlens on the host. Everything accumulates in double; they define what the CUDA
 * kernels must compute (mask index, lse, D = rowsum(dout .* out) from the given out and lse). */
#ifndef UNPAD_FMHA_REF_H
#define UNPAD_FMHA_REF_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* qkv (T, 3, NH, 64), out (T, NH, 64), lse (NH, T); only the group's tokens are written. */
void fmha_fwd_ref(float *out, float *lse, const float *qkv, const int32_t *cu_seqlens, int T,
                  int NH, int seq_begin, int seq_end, int max_len, float p_drop, uint64_t seed,
                  uint64_t stream_id);

/* dqkv (T, 3, NH, 64) overwritten for the group's tokens; dout, out (T, NH, 64); lse (NH, T). */
void fmha_bwd_ref(float *dqkv, const float *dout, const float *out, const float *lse,
                  const float *qkv, const int32_t *cu_seqlens, int T, int NH, int seq_begin,
                  int seq_end, int max_len, float p_drop, uint64_t seed, uint64_t stream_id);

/* The row of the attention-dropout mask of (query row t of the batch, head h): the mask keeps key j
 * iff fmha_mask_keep(seed, stream_id, fmha_dropout_row(t, h, NH), j, fmha_mask_threshold(p))
 * (dropout.h). */
static inline uint64_t fmha_dropout_row(int t, int h, int NH)
{
    return (uint64_t)t * (uint64_t)NH + (uint64_t)h;
}

#ifdef __cplusplus
}
#endif

#endif
