/* gemm.h — the trainer's matrix products, one thin layer over cuBLASLt.
 *
 * Everything here is row-major, as the activations are: D (M, N) = alpha op(A) op(B) + beta D,
 * with op(A) (M, K) and op(B) (K, N); trans_a / trans_b say the stored matrix is the transpose.
 * cuBLASLt is column-major, so a row-major product is run as the column-major product
 * D^T = op(B)^T op(A)^T (operands swapped, m = N, n = M): no copies, only swapped arguments.
 *
 * Weights are stored (out, in) like PyTorch's Linear, so a layer is Y = X W^T + b:
 *   forward        Y (T, out)  = X (T, in) W^T            gemm_linear_fwd   (+bias, +GELU with aux)
 *   backward data  dX (T, in)  = dY (T, out) W             gemm_linear_bwd_data (+DGELU from aux)
 *   backward wgt   dW (out, in) += dY^T X    (fp32 D)      gemm_linear_bwd_weight
 * A and B are floatX (bf16, or fp32 in the fp32 build), accumulation is fp32
 * (CUBLAS_COMPUTE_32F), C/D is floatX or fp32 (fp32 with beta = 1 to accumulate weight gradients
 * over micro-batches).
 *
 * Plans (descriptors, layouts, the heuristic's algorithm, or a timed or preset one: see
 * gemm_ctx_tune) are cached per shape bucket (8 per octave: the token count changes every step)
 * and pointer alignment; one 32 MiB workspace serves every call on the context's streams one at a
 * time (callers using several streams at once give each stream its own context). */
#ifndef UNPAD_GEMM_H
#define UNPAD_GEMM_H

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "common.h"
#include "unpad.h"

#define cublasCheck(call)                                                                         \
    do {                                                                                          \
        cublasStatus_t s_ = (call);                                                               \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                        \
            fprintf(stderr, "%s:%d: cuBLAS error %d: %s\n", __FILE__, __LINE__, (int)s_,          \
                    cublasGetStatusString(s_));                                                   \
            exit(EXIT_FAILURE);                                                                   \
        }                                                                                         \
    } while (0)

#define GEMM_WORKSPACE_BYTES (32u << 20)

#ifdef __cplusplus
extern "C" {
#endif

/* The FP8 types name both operands of a product (the gemm_run_fp8 products below): GEMM_FP8_E4M3 A and
 * B E4M3 (a forward), GEMM_FP8_E5M2 A E5M2 and B E4M3 (a data gradient: cuBLASLt has no E5M2 x E5M2). */
typedef enum { GEMM_BF16 = 0, GEMM_F32 = 1, GEMM_FP8_E4M3 = 2, GEMM_FP8_E5M2 = 3 } gemm_dtype;

/* The type of floatX (common.h): the trainer's activations and working weights. */
#ifdef UNPAD_FP32
#define GEMM_X GEMM_F32
#else
#define GEMM_X GEMM_BF16
#endif

typedef enum {
    GEMM_EPI_NONE = 0,
    GEMM_EPI_BIAS,          /* D = AB + bias (bias (N), per output column, type of D)          */
    GEMM_EPI_GELU_BIAS,     /* D = gelu(AB + bias), aux (M, N) = AB + bias (the GELU input)    */
    GEMM_EPI_DGELU,         /* D = (AB) * gelu'(aux), aux (M, N) the forward GELU input        */
    GEMM_EPI_DGELU_BGRAD,   /* as DGELU, and bias (N) = column sums of D (sums over the M rows) */
    GEMM_EPI_BGRADB,        /* D = AB, and bias (M) = row sums of op(A) over K: with op(A) = dY^T
                               in a weight-gradient product, the bias gradient sum_t dY[t, :]    */
} gemm_epilogue;

typedef struct {
    int M, N, K;            /* row-major D (M, N) = op(A) (M, K) op(B) (K, N) */
    int trans_a, trans_b;   /* 1: A is stored (K, M) / B is stored (N, K) */
    gemm_dtype ab_type;     /* A and B */
    gemm_dtype d_type;      /* C = D */
    gemm_epilogue epi;
    gemm_dtype bias_type;   /* bias or bias gradient vector (epilogues with a bias) */
} gemm_shape;

typedef struct gemm_ctx gemm_ctx;

/* One cuBLASLt handle, a 32 MiB workspace on the device and an empty plan cache.
 * fp32_exact: fp32 products use true fp32 (1) or may use TF32 tensor cores (0).
 * NULL with the reason in err when host or device memory cannot be had. */
gemm_ctx *gemm_ctx_create(int fp32_exact, unpad_err *err);
void gemm_ctx_free(gemm_ctx *g);

/* cuBLASLt's epilogue for e (CUBLASLT_EPILOGUE_DEFAULT for GEMM_EPI_NONE); gemm_fp8.c shares it. */
cublasLtEpilogue_t gemm_lt_epilogue(gemm_epilogue e);

/* D = alpha op(A) op(B) + beta D (+ epilogue), on stream. bias / aux as the epilogue needs them
 * (NULL otherwise); a shape no algorithm supports stops the program naming the shape. */
void gemm_run(gemm_ctx *g, const gemm_shape *s, const void *A, const void *B, void *D, float alpha,
              float beta, void *bias, void *aux, cudaStream_t stream);

/* FP8 products (ab_type GEMM_FP8_E4M3 or _E5M2, bf16 D, bias and aux): as gemm_run, the product
 * scaled by *sa * *sb (device floats, 16-byte aligned: the dequantization scales, 1 / the scale each
 * operand was cast with). Hopper runs FP8 only with both operands K-major: trans_a 0 and trans_b 1
 * (D (M, N) = A (M, K) B (N, K)^T), K a multiple of 16. E4M3 x E4M3 products accumulate with
 * CUBLASLT_MATMUL_DESC_FAST_ACCUM (TransformerEngine's choice for the forward), the others promote
 * every partial sum. The plans share gemm_run's cache, buckets and warm-up. */
void gemm_run_fp8(gemm_ctx *g, const gemm_shape *s, const void *A, const void *B, void *D, float alpha,
                  float beta, void *bias, void *aux, const float *sa, const float *sb, cudaStream_t stream);

/* The same with d_type GEMM_FP8_E4M3: D = E4M3(*sd x (the product and its epilogue)), beta 0, and
 * cuBLASLt sets *amax_d to max |the product and its epilogue| (before the scale: overwritten, not
 * folded into). sd 16-byte aligned; bias and aux bf16. */
void gemm_run_fp8_out(gemm_ctx *g, const gemm_shape *s, const void *A, const void *B, void *D, float alpha,
                      float beta, void *bias, void *aux, const float *sa, const float *sb, const float *sd,
                      float *amax_d, cudaStream_t stream);

/* 1 if some algorithm runs shape s with pointers of these alignments (an optional epilogue). */
int gemm_supported(gemm_ctx *g, const gemm_shape *s, const void *A, const void *B, const void *D,
                   const void *bias, const void *aux);

/* Y (T, out) = X (T, in) W^T (+ bias; with GELU: aux (T, out) receives the pre-GELU values). */
void gemm_linear_fwd(gemm_ctx *g, gemm_dtype t, int T, int in, int out, const void *X, const void *W,
                     const void *bias, void *Y, void *aux, int gelu, cudaStream_t stream);

/* dX (T, in) = dY (T, out) W + beta dX; with aux != NULL the product is multiplied by gelu'(aux)
 * (aux (T, in), the forward GELU input of the layer before) and, with dbias != NULL, dbias (in)
 * receives its column sums (type of dX). */
void gemm_linear_bwd_data(gemm_ctx *g, gemm_dtype t, int T, int in, int out, const void *dY,
                          const void *W, void *dX, float beta, const void *aux, void *dbias,
                          cudaStream_t stream);

/* The FP8 forward and data gradient of a Linear layer (gemm_run_fp8): Y = sx sw X8 W8^T (+ bias; with
 * GELU and aux as gemm_linear_fwd), X8 (T, in) and W8 (out, in) E4M3; dX = sg sw dY8 Wt8^T + beta dX,
 * dY8 (T, out) E5M2 and Wt8 (in, out) E4M3, the weight's transposed copy. Y, dX, bias, aux bf16. */
void gemm_linear_fwd_fp8(gemm_ctx *g, int T, int in, int out, const uint8_t *X8, const uint8_t *W8,
                         const float *sx, const float *sw, const void *bias, void *Y, void *aux, int gelu,
                         cudaStream_t stream);
/* The forward with its output in E4M3 (gemm_run_fp8_out): Y8 = E4M3(*sy x (X W^T + bias, GELU with
 * aux as gemm_linear_fwd)), *amax_y = max |Y| (set). */
void gemm_linear_fwd_fp8_out(gemm_ctx *g, int T, int in, int out, const uint8_t *X8, const uint8_t *W8,
                             const float *sx, const float *sw, const void *bias, uint8_t *Y8, void *aux, int gelu,
                             const float *sy, float *amax_y, cudaStream_t stream);
void gemm_linear_bwd_data_fp8(gemm_ctx *g, int T, int in, int out, const uint8_t *dY8, const uint8_t *Wt8,
                              const float *sg, const float *sw, void *dX, float beta, cudaStream_t stream);

/* dW (out, in) fp32 = dY^T (out, T) X (T, in) + beta dW. */
void gemm_linear_bwd_weight(gemm_ctx *g, gemm_dtype t, int T, int in, int out, const void *dY,
                            const void *X, float *dW, float beta, cudaStream_t stream);

/* Makes now the plans that steps of other token counts would make when they first meet them: a
 * cuBLASLt heuristic query each, about 0.1 ms on the H200 (600 plans in 0.06-0.09 s), which a step
 * meeting a new shape bucket would otherwise spend per product while the GPU waits. Every plan
 * cached so far is a template: each of its dimensions whose bucket lies in [bucket(lo),
 * bucket(hi)] and is none of the `fixed` sizes (the model's feature sizes; when all three look
 * fixed, the step's count fell into a model size's bucket and all three are varied) takes every
 * bucket value of that range, and each alignment class of it (a multiple of 8, of 4, of 2, odd),
 * one dimension at a time, with the template's alignment and pointers, so the
 * plans are the ones gemm_run would make (the same choice for a bucket whatever came first). Stops
 * at half the cache; the plans made in *made.
 * Each new plan is also launched once on `stream`, on its template's last operands with the varied
 * dimension cut to fit them, because cuBLASLt loads an algorithm's kernel at its first launch:
 * without this, the first step to meet a new bucket stalls several ms per product. Those launches
 * write scratch results into the templates' output buffers, so call it between steps on the step's
 * stream (returns after the stream is idle); the launches accepted in *ran. */
int gemm_ctx_warm(gemm_ctx *g, int lo, int hi, const int *fixed, int nfixed, cudaStream_t stream, int *made,
                  int *ran, unpad_err *err);
/* Whether gemm_ctx_warm also launches the weight gradients' plans at beta = 1 (cuBLASLt loads
 * another kernel for it): on where a step runs several micro-batches, whose later ones add to the
 * gradients. Products whose warm-up template ran at beta != 0 are always launched at both. */
void gemm_ctx_warm_accumulation(gemm_ctx *g, int on);

/* Algorithm tuning. cuBLASLt's heuristic ranks its algorithms by a model of the GPU; its first
 * choice is not always the fastest. gemm_ctx_tune takes the cached plans whose varying dimension
 * (as gemm_ctx_warm decides it: not one of the `fixed` model sizes) has its bucket in
 * [bucket(lo), bucket(hi)] and that do at least min_flop (2 M N K at the bucket shape), largest
 * first, and for each times the heuristic's first `candidates` algorithms at the bucket shape on
 * scratch operands (random values, one device allocation for the session, freed before it
 * returns; none taken when it cannot be had: no_memory), with the beta of the plan's last run,
 * `reps` launches each (median), interleaved. The fastest replaces the first choice when it is
 * at least 1% faster; the plan is then run once in each alignment class of each dimension so that
 * later steps meet no refusal. Stops starting plans after budget_s seconds. Plans of fp32
 * operands (the exact fp32 build) are left alone. The outputs of the plans' last runs are not
 * touched. The choices depend on timings, so a run that must compute as an earlier one did reads
 * that run's choices instead (presets below). */
typedef struct {
    int candidates;  /* the heuristic's first N algorithms timed per plan (2..32) */
    int reps;        /* timed launches per candidate (1..16; the median counts) */
    double budget_s; /* no plan is started after this many seconds */
    double min_flop; /* smaller products keep the heuristic's choice */
} gemm_tune_opts;

typedef struct {
    int considered;     /* plans in range and large enough */
    int tuned;          /* of them, timed */
    int changed;        /* of those, now on another algorithm than the heuristic's first */
    int over_budget;    /* left untimed when the budget ran out */
    double top1_us, best_us; /* the timed plans' bucket shapes: summed first-choice and chosen times */
    double seconds;
    int no_memory;      /* the scratch operands could not be allocated: nothing tuned */
    size_t scratch_bytes;
} gemm_tune_stats;

int gemm_ctx_tune(gemm_ctx *g, int lo, int hi, const int *fixed, int nfixed, const gemm_tune_opts *o,
                  cudaStream_t stream, gemm_tune_stats *st, unpad_err *err);

/* The bench's view of the same: the heuristic's first n algorithms for the bucket of shape s (with
 * the alignment of these pointers, as gemm_run would ask), each run `reps` times on these operands
 * at the exact shape s; us[i] the median of candidate i in microseconds (-1: refused). Returns the
 * candidates found (us[0] is the heuristic's first choice, the one gemm_run runs untuned). The
 * products overwrite D (and with beta != 0 add to it, reps + 1 times each). */
int gemm_time_candidates(gemm_ctx *g, const gemm_shape *s, const void *A, const void *B, void *D, float beta,
                         void *bias, void *aux, int n, int reps, cudaStream_t stream, float *us);

/* Presets: the algorithms gemm_ctx_tune chose (and presets in use), one text line per bucket plan
 * (shape, operand alignment, the 64 bytes of cublasLtMatmulAlgo_t), under a header naming the
 * cuBLASLt version. gemm_ctx_presets_write returns the lines written. gemm_ctx_presets_read loads
 * such a file: every bucket plan made afterwards (and any already cached) of a listed shape and
 * alignment takes the listed algorithm when cuBLASLt accepts it for the shape; *n the presets
 * read, or -1 when the file is of another cuBLASLt version (then none is used). EIO / EINVAL
 * (naming the file and line) when it cannot be read. */
int gemm_ctx_presets_write(const gemm_ctx *g, FILE *f);
int gemm_ctx_presets_read(gemm_ctx *g, const char *path, int *n, unpad_err *err);
/* Plans whose preset cuBLASLt refused for the shape (they run the heuristic's choice; 0 when the
 * file comes from this build and GPU). */
int gemm_ctx_presets_refused(const gemm_ctx *g);

/* Plans made so far, and calls that needed an uncached plan of their exact shape (tests). */
int gemm_ctx_plans(const gemm_ctx *g);
int gemm_ctx_fallbacks(const gemm_ctx *g);
/* Plans made and refusals met by products after the first gemm_ctx_warm: each cost its step a
 * heuristic query or a kernel load (a stall). UNPAD_GEMM_LOG=1 names each on stderr. */
int gemm_ctx_late(const gemm_ctx *g);
/* Plans replaced because the 16 slots after their hash were taken (each is made again when next
 * needed: 0 in a healthy table). */
int gemm_ctx_evicted(const gemm_ctx *g);

#ifdef __cplusplus
}
#endif

#endif
