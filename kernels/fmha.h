/* fmha.h — variable-length fused multi-head attention (head size 64), forward and backward, on the
 * unpadded layout, launchable per *group* (a sub-range of the batch's sequences) so that several
 * groups can run at once on several CUDA streams.
 *
 * Shapes (T = tokens of the whole batch, NH = heads, H = NH * 64):
 *   qkv   (T, 3, NH, 64) floatX the QKV projection's output [T, 3H]: q in columns [0, H), k in
 *                              [H, 2H), v in [2H, 3H); head h at columns h*64 .. h*64+63 of each
 *   out   (T, NH, 64) floatX   = [T, H], the input of the attention output projection
 *   lse   (NH, T) fp32         natural-log log-sum-exp of each softmax row (before dropout)
 *   dqkv  (T, 3, NH, 64) floatX gradient of qkv, OVERWRITTEN for the group's tokens
 * cu_seqlens (n + 1) int32 on the device; every length 1 .. 512 (a length-0 sequence is skipped).
 *
 * Math, per sequence and head (scale = 1/8):  P = softmax(scale Q K^T) row-wise, lse = log-sum-exp
 * of scale Q K^T, out = (P .* M / (1 - p)) V, where the dropout mask M (p = 0: all ones) is
 *   M[i][j] = fmha_mask_keep(seed, stream_id, t_i * NH + h, j, fmha_mask_threshold(p))  (dropout.h)
 * with t_i = cu_seqlens[s] + i the query's row in the batch and j the key's position (0-based)
 * in its sequence: the same mask bits whatever the grouping, regenerated in backward, never stored
 * (one hash gives the bits of keys 16a + 2c + {0, 1, 8, 9} of a row). No [L, L] matrix is ever stored:
 * forward uses an online softmax over key tiles, backward recomputes P from lse (flash-attention 2
 * style: one CTA per key tile, dQ accumulated in fp32 in the workspace, then converted to bf16).
 * kernels/fmha.cu runs on Hopper's wgmma and bulk tensor copies (sm_90a). The fp32 build
 * (common.h) replaces it by kernels/fmha_fp32.cu: the same functions and math, plain fp32 loops,
 * no tensor cores.
 *
 * Limits (checked by the launchers, which stop with file:line on a violation): 1 <= NH <= 65535,
 * 0 <= seq_begin <= seq_end, seq_end - seq_begin <= 65535, 1 <= max_len <= 512, 0 <= p < 1,
 * qkv/out/dout/dqkv/workspace 16-byte aligned. The kernels trap if a sequence of the group is
 * longer than max_len (the grid is sized from it; the wgmma kernels trap without a message).
 *
 * This header compiles as C11 without the CUDA headers (cudaStream_t declared as driver_types.h
 * declares it; a repeated identical typedef is valid C11 and C++). */
#ifndef UNPAD_FMHA_H
#define UNPAD_FMHA_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

typedef struct CUstream_st *cudaStream_t;

#define FMHA_HEAD_DIM 64
#define FMHA_MAX_LEN 512

/* Bytes of workspace fmha_bwd needs for a batch of T tokens: the fp32 dQ accumulator (NH, T, 64,
 * each row's 8-float chunks permuted by its position, kernels/fmha.cu dq_chunk) and the fp32 row
 * dot products D = rowsum(dout .* out) (NH, T); the fp32 build's kernels/fmha_fp32.cu needs only D.
 * No initial contents needed. Groups running at once on different streams may share one
 * workspace: each touches only its own tokens' rows. */
UNPAD_EXTERN_C
size_t fmha_bwd_workspace_bytes(int T, int NH);

/* Forward over the sequences [seq_begin, seq_end); max_len >= every length in the group.
 * Writes out and lse for the group's tokens only. */
UNPAD_EXTERN_C
void fmha_fwd(floatX *out,                  /* (T, NH, 64) */
              float *lse,                 /* (NH, T) saved for backward */
              const floatX *qkv,            /* (T, 3, NH, 64) */
              const int32_t *cu_seqlens,  /* (n + 1) device */
              int T, int NH, int seq_begin, int seq_end, int max_len,
              float p_drop, uint64_t seed, uint64_t stream_id, cudaStream_t stream);

/* Backward of fmha_fwd with the same group, lengths and dropout arguments. Writes (not adds) the
 * group's rows of dqkv. workspace: fmha_bwd_workspace_bytes(T, NH) bytes, device. Runs backward
 * shape 0 (fmha_bwd_shape), or the one UNPAD_FMHA_BWD_SHAPE names (bf16 build; a diagnostic). */
UNPAD_EXTERN_C
void fmha_bwd(floatX *dqkv,                 /* (T, 3, NH, 64) */
              void *workspace,            /* fp32 scratch, see fmha_bwd_workspace_bytes */
              const floatX *dout,           /* (T, NH, 64) gradient of out */
              const floatX *out,            /* (T, NH, 64) from fmha_fwd */
              const float *lse,           /* (NH, T) from fmha_fwd */
              const floatX *qkv,            /* (T, 3, NH, 64) */
              const int32_t *cu_seqlens,  /* (n + 1) device */
              int T, int NH, int seq_begin, int seq_end, int max_len,
              float p_drop, uint64_t seed, uint64_t stream_id, cudaStream_t stream);

/* ---- kernel shapes, for tests and benchmarks ---------------------------------------------------
 * fmha_fwd runs forward shape fmha_fwd_default_shape(p_drop) (the faster measured without and with
 * dropout), fmha_bwd backward shape 0. These run one named shape, so a test can check every shape and
 * a benchmark can compare them. */
UNPAD_EXTERN_C
int fmha_fwd_default_shape(float p_drop);
UNPAD_EXTERN_C
int fmha_fwd_shape_count(void);
UNPAD_EXTERN_C
const char *fmha_fwd_shape_name(int shape);
UNPAD_EXTERN_C
int fmha_bwd_shape_count(void);
UNPAD_EXTERN_C
const char *fmha_bwd_shape_name(int shape);
UNPAD_EXTERN_C
void fmha_fwd_shape(int shape, floatX *out, float *lse, const floatX *qkv, const int32_t *cu_seqlens,
                    int T, int NH, int seq_begin, int seq_end, int max_len, float p_drop,
                    uint64_t seed, uint64_t stream_id, cudaStream_t stream);
UNPAD_EXTERN_C
void fmha_bwd_shape(int shape, floatX *dqkv, void *workspace, const floatX *dout, const floatX *out,
                    const float *lse, const floatX *qkv, const int32_t *cu_seqlens, int T, int NH,
                    int seq_begin, int seq_end, int max_len, float p_drop, uint64_t seed,
                    uint64_t stream_id, cudaStream_t stream);

/* The backward's launches, for timing them apart (bench_fmha's "backward by launch" rows): the
 * prep pass (D, the dQ accumulator zeroed), the main kernel, the convert pass (dQ to bf16). Any set
 * but FMHA_BWD_ALL leaves dqkv wrong; fmha_bwd_shape is fmha_bwd_parts(shape, FMHA_BWD_ALL, ...).
 * The fp32 build's backward is one unit: it runs whole when parts has FMHA_BWD_MAIN. */
#define FMHA_BWD_PREP 1u
#define FMHA_BWD_MAIN 2u
#define FMHA_BWD_CONVERT 4u
#define FMHA_BWD_ALL 7u
UNPAD_EXTERN_C
void fmha_bwd_parts(int shape, unsigned parts, floatX *dqkv, void *workspace, const floatX *dout,
                    const floatX *out, const float *lse, const floatX *qkv, const int32_t *cu_seqlens, int T,
                    int NH, int seq_begin, int seq_end, int max_len, float p_drop, uint64_t seed,
                    uint64_t stream_id, cudaStream_t stream);

#endif
