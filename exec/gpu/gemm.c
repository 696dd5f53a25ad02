/* gemm.c — the cuBLASLt wrapper of gemm.h: row-major products as swapped column-major ones, a plan
 * cache per shape and alignment, and the epilogues the BERT layers use. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "gpu/devmem.h"
#include "gpu/gemm.h"
#include "kernels.h"

#define GEMM_CACHE_SIZE 4096 /* open addressing; shapes vary with the token count of each step */

typedef struct {
    gemm_shape s;
    uint8_t align[5]; /* log2 of the alignment (<= 256 bytes) of A, B, D, bias, aux */
    int used;
    void *bias, *aux;  /* the pointers the plan was last run with (gemm_ctx_warm reuses them) */
    const float *sa, *sb; /* FP8 plans: the dequantization scales of A and B, likewise */
    const float *sd;      /* FP8 D: its scale, and where cuBLASLt writes max |D| */
    float *amax_d;
    const void *A, *B; /* the operands and exact shape of its last run (NULL: never run) */
    void *D;
    gemm_shape last;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld; /* cuBLASLt's A (our B), B (our A), D */
    cublasLtMatrixLayout_t lc;         /* C: D's shape and type, bf16 where D is FP8 (C = D in memory) */
    cublasLtMatmulAlgo_t algo;
    /* the algorithm for the exact shapes of the bucket that `algo` does not take (cuBLASLt can
     * refuse an odd K or M an algorithm for the bucket's round size runs): the heuristic's choice
     * for the bucket's odd neighbour, so it depends on the bucket alone. 0 not asked yet, 1 found,
     * -1 none */
    int alt_state;
    cublasLtMatmulAlgo_t alt;
    /* per alignment class of the exact shape (align_class): 0 not run yet, 1 `algo` takes it, 2
     * `algo` refuses it (run `alt`), so a refusal is asked of cuBLASLt once per class, not every step */
    uint8_t takes[64];
    /* where `algo` came from: 0 the heuristic's first choice, 1 timed by gemm_ctx_tune, 2 a preset
     * (gemm_ctx_presets_read) */
    uint8_t tuned;
    float beta; /* of its last run (gemm_ctx_tune times the candidates with it) */
} gemm_plan;

/* An algorithm chosen for a bucket shape and alignment, from a file of gemm_ctx_presets_write. */
typedef struct {
    gemm_shape s;
    uint8_t align[5];
    cublasLtMatmulAlgo_t algo;
} gemm_preset;

struct gemm_ctx {
    cublasLtHandle_t lt;
    void *workspace; /* GEMM_WORKSPACE_BYTES on the device */
    int fp32_exact;
    int nplans;
    int fallbacks;    /* calls whose bucket plan did not take the exact shape */
    int warming;      /* inside gemm_ctx_warm */
    int warmed;       /* gemm_ctx_warm has run */
    int late;         /* plans made, or refusals met, by a step after the warm-up (each a stall) */
    int log;          /* UNPAD_GEMM_LOG set: each of those on stderr */
    int warm_acc;     /* gemm_ctx_warm_accumulation: weight gradients also warmed at beta = 1 */
    double slow_us;   /* UNPAD_HOST_SLOW_US: a product whose host call took longer is named on stderr */
    int evicted;      /* plans replaced because their neighbourhood of the table was full */
    gemm_plan *plans; /* (GEMM_CACHE_SIZE) */
    gemm_preset *presets; /* (npresets): tens of entries, searched in order */
    int npresets;
    int presets_refused; /* plans whose preset cuBLASLt did not accept (they run the heuristic's) */
    const float *sa, *sb; /* the scale pointers of the FP8 product being run or warmed (plans made
                             for it take them; NULL for the others) */
    const float *sd;      /* and of an FP8 D: its scale and its maximum */
    float *amax_d;
};

gemm_ctx *gemm_ctx_create(int fp32_exact, unpad_err *err)
{
    gemm_ctx *g = calloc(1, sizeof *g);
    if (!g || !(g->plans = calloc(GEMM_CACHE_SIZE, sizeof *g->plans))) {
        free(g);
        unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of host memory for the GEMM plan cache");
        return NULL;
    }
    g->fp32_exact = fp32_exact;
    const char *lg = getenv("UNPAD_GEMM_LOG");
    g->log = lg && *lg && strcmp(lg, "0");
    const char *slow = getenv("UNPAD_HOST_SLOW_US");
    g->slow_us = slow && *slow ? atof(slow) : 0;
    if (dev_alloc(&g->workspace, GEMM_WORKSPACE_BYTES, "the cuBLASLt workspace", err)) {
        free(g->plans);
        free(g);
        return NULL;
    }
    cublasCheck(cublasLtCreate(&g->lt));
    return g;
}

static void plan_release(gemm_plan *p)
{
    if (!p->used)
        return;
    cublasLtMatrixLayoutDestroy(p->la);
    cublasLtMatrixLayoutDestroy(p->lb);
    cublasLtMatrixLayoutDestroy(p->ld);
    cublasLtMatrixLayoutDestroy(p->lc);
    cublasLtMatmulDescDestroy(p->desc);
    p->used = 0;
    p->alt_state = 0;
    p->tuned = 0;
    memset(p->takes, 0, sizeof p->takes);
    p->A = p->B = p->D = NULL;
}

void gemm_ctx_free(gemm_ctx *g)
{
    if (!g)
        return;
    for (int i = 0; i < GEMM_CACHE_SIZE; i++)
        plan_release(&g->plans[i]);
    cudaCheck(cudaFree(g->workspace));
    cublasCheck(cublasLtDestroy(g->lt));
    free(g->plans);
    free(g->presets);
    free(g);
}

int gemm_ctx_plans(const gemm_ctx *g) { return g->nplans; }

static int align_log2(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    if (!a)
        return 8;
    int l = 0;
    while (l < 8 && !(a & ((uintptr_t)1 << l)))
        l++;
    return l;
}

static int is_fp8(gemm_dtype t) { return t == GEMM_FP8_E4M3 || t == GEMM_FP8_E5M2; }

/* cuBLASLt's type of operand A (which = 0) or B (1) of a product of ab_type t, or of C/D and bias. */
static cudaDataType_t cuda_type_of(gemm_dtype t, int which)
{
    switch (t) {
    case GEMM_F32: return CUDA_R_32F;
    case GEMM_FP8_E4M3: return CUDA_R_8F_E4M3;
    case GEMM_FP8_E5M2: return which == 0 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
    default: return CUDA_R_16BF;
    }
}
static cudaDataType_t cuda_type(gemm_dtype t) { return cuda_type_of(t, 0); }
static const char *type_name(gemm_dtype t)
{
    static const char *n[] = {"bf16", "fp32", "e4m3 x e4m3", "e5m2 x e4m3"};
    return (unsigned)t < sizeof n / sizeof *n ? n[t] : "?";
}

static const char *epi_name(gemm_epilogue e)
{
    static const char *n[] = {"none", "bias", "gelu+bias", "dgelu", "dgelu+bgrad", "bgradb"};
    return (unsigned)e < sizeof n / sizeof *n ? n[e] : "?";
}

cublasLtEpilogue_t gemm_lt_epilogue(gemm_epilogue e)
{
    switch (e) {
    case GEMM_EPI_BIAS: return CUBLASLT_EPILOGUE_BIAS;
    case GEMM_EPI_GELU_BIAS: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case GEMM_EPI_DGELU: return CUBLASLT_EPILOGUE_DGELU;
    case GEMM_EPI_DGELU_BGRAD: return CUBLASLT_EPILOGUE_DGELU_BGRAD;
    case GEMM_EPI_BGRADB: return CUBLASLT_EPILOGUE_BGRADB;
    default: return CUBLASLT_EPILOGUE_DEFAULT;
    }
}

static int epi_has_bias(gemm_epilogue e) { return e != GEMM_EPI_NONE && e != GEMM_EPI_DGELU; }
static int epi_has_aux(gemm_epilogue e)
{
    return e == GEMM_EPI_GELU_BIAS || e == GEMM_EPI_DGELU || e == GEMM_EPI_DGELU_BGRAD;
}

/* log2 of the alignment of a product's pointers (those its epilogue does not use count as NULL). */
static void operand_align(const gemm_shape *s, const void *A, const void *B, const void *D, const void *bias,
                          const void *aux, uint8_t align[5])
{
    align[0] = (uint8_t)align_log2(A);
    align[1] = (uint8_t)align_log2(B);
    align[2] = (uint8_t)align_log2(D);
    align[3] = (uint8_t)align_log2(epi_has_bias(s->epi) ? bias : NULL);
    align[4] = (uint8_t)align_log2(epi_has_aux(s->epi) ? aux : NULL);
}

/* A product the wrapper was asked for and cuBLASLt cannot run: the caller's shapes are the model's,
 * checked once by test_gemm, so this is an invariant (stops, naming the whole shape). */
static void shape_fail(const gemm_shape *s, const char *why)
{
    invariantCheck(0, "cuBLASLt: %s for D (%d, %d) = op(A) (%d, %d) op(B) (%d, %d), trans_a %d trans_b %d, "
                   "A/B %s, D %s, epilogue %s",
                   why, s->M, s->N, s->M, s->K, s->K, s->N, s->trans_a, s->trans_b,
                   type_name(s->ab_type), type_name(s->d_type),
                   epi_name(s->epi));
}

static uint64_t plan_hash(const gemm_shape *s, const uint8_t align[5])
{
    uint64_t h = 1469598103934665603ull;
    const int v[] = {s->M, s->N, s->K, s->trans_a, s->trans_b, s->ab_type, s->d_type, s->epi,
                     s->bias_type, align[0], align[1], align[2], align[3], align[4]};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        h = (h ^ (uint64_t)(uint32_t)v[i]) * 1099511628211ull;
    /* The table index is the low bits, and the low bits of those products depend only on the low
     * bits of the values: bucketed sizes of 4096 and up (multiples of 512 and more) would all share
     * one neighbourhood and evict each other every step. A finalizer (splitmix64's) mixes the high
     * bits down. */
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h;
}

static int plan_matches(const gemm_plan *p, const gemm_shape *s, const uint8_t align[5])
{
    return p->used && p->s.M == s->M && p->s.N == s->N && p->s.K == s->K &&
           p->s.trans_a == s->trans_a && p->s.trans_b == s->trans_b && p->s.ab_type == s->ab_type &&
           p->s.d_type == s->d_type && p->s.epi == s->epi && p->s.bias_type == s->bias_type &&
           !memcmp(p->align, align, 5);
}

/* An FP8 plan's descriptor reads its scales through these pointers (set before every run, as bias
 * and aux: plans are shared by the layers, whose scales differ). */
static void set_scales(gemm_plan *p, const float *sa, const float *sb, const float *sd, float *amax_d)
{
    if (!is_fp8(p->s.ab_type))
        return;
    p->sa = sa;
    p->sb = sb;
    /* cuBLASLt's A is our B */
    cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sb, sizeof sb));
    cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sa, sizeof sa));
    if (is_fp8(p->s.d_type)) {
        p->sd = sd;
        p->amax_d = amax_d;
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, &sd, sizeof sd));
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, &amax_d,
                                                   sizeof amax_d));
    }
}

/* C of D = alpha A B + beta C: D itself (in place), except for an FP8 D, whose C (bf16) cuBLASLt
 * accepts only as no matrix at all (beta is 0 there) */
static void *c_of(const gemm_plan *p, void *D) { return is_fp8(p->s.d_type) ? NULL : D; }

static void set_pointers(gemm_plan *p, void *bias, void *aux)
{
    p->bias = bias;
    p->aux = aux;
    if (epi_has_bias(p->s.epi))
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                   sizeof bias));
    if (epi_has_aux(p->s.epi))
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                   &aux, sizeof aux));
}

/* The heuristic's first n algorithms for plan p's descriptors (at its alignment), best first. */
static cublasStatus_t plan_heuristic(gemm_ctx *g, const gemm_plan *p, int n, cublasLtMatmulHeuristicResult_t *res,
                                     int *found)
{
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = GEMM_WORKSPACE_BYTES;
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &ws, sizeof ws));
    /* cuBLASLt's A is our B and its B our A */
    uint32_t a_a = 1u << p->align[1], a_b = 1u << p->align[0], a_d = 1u << p->align[2];
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                     &a_a, sizeof a_a));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                     &a_b, sizeof a_b));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                     &a_d, sizeof a_d));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                     &a_d, sizeof a_d));
    *found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(g->lt, p->desc, p->la, p->lb, p->lc, p->ld, pref, n, res,
                                                       found);
    cublasLtMatmulPreferenceDestroy(pref);
    return st;
}

static const gemm_preset *preset_find(const gemm_ctx *g, const gemm_shape *s, const uint8_t align[5])
{
    for (int i = 0; i < g->npresets; i++) {
        const gemm_shape *q = &g->presets[i].s;
        if (q->M == s->M && q->N == s->N && q->K == s->K && q->trans_a == s->trans_a &&
            q->trans_b == s->trans_b && q->ab_type == s->ab_type && q->d_type == s->d_type && q->epi == s->epi &&
            q->bias_type == s->bias_type && !memcmp(g->presets[i].align, align, 5))
            return &g->presets[i];
    }
    return NULL;
}

/* Plan p takes the preset's algorithm when cuBLASLt accepts it for p's shape (1), else keeps its own. */
static int plan_take_preset(gemm_ctx *g, gemm_plan *p, const gemm_preset *pr)
{
    cublasLtMatmulHeuristicResult_t chk;
    if (cublasLtMatmulAlgoCheck(g->lt, p->desc, p->la, p->lb, p->lc, p->ld, &pr->algo, &chk) !=
            CUBLAS_STATUS_SUCCESS ||
        chk.workspaceSize > GEMM_WORKSPACE_BYTES)
        return 0;
    p->algo = pr->algo;
    p->tuned = 2;
    memset(p->takes, 0, sizeof p->takes);
    return 1;
}

/* A preset cuBLASLt no longer accepts for its shape: the plan keeps the heuristic's choice. */
static void preset_refused(gemm_ctx *g, const gemm_plan *p)
{
    g->presets_refused++;
    if (g->log)
        fprintf(stderr, "gemm: preset refused for M %d N %d K %d trans %d%d epi %s: the heuristic's choice runs\n",
                p->s.M, p->s.N, p->s.K, p->s.trans_a, p->s.trans_b, epi_name(p->s.epi));
}

/* Makes the plan of shape s; 0, or -1 with the reason in why when no algorithm supports it. With
 * presets, a bucket plan (plan_lookup) takes its preset's algorithm where one is given. */
static int plan_make_from(gemm_ctx *g, gemm_plan *p, const gemm_shape *s, const uint8_t align[5],
                          void *bias, void *aux, int presets, char *why, size_t nwhy)
{
    p->s = *s;
    memcpy(p->align, align, 5);
    cublasComputeType_t ct = CUBLAS_COMPUTE_32F;
    if (s->ab_type == GEMM_F32 && !g->fp32_exact)
        ct = CUBLAS_COMPUTE_32F_FAST_TF32;
    cublasCheck(cublasLtMatmulDescCreate(&p->desc, ct, CUDA_R_32F));
    /* column-major view: D^T (N, M) = op(B)^T (N, K) op(A)^T (K, M) */
    cublasOperation_t ta = s->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = s->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    cublasLtEpilogue_t epi = gemm_lt_epilogue(s->epi);
    cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (epi_has_bias(s->epi)) {
        int32_t bt = cuda_type(s->bias_type);
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt,
                                                   sizeof bt));
    }
    if (epi_has_aux(s->epi)) {
        int64_t ld = s->N; /* aux is (M, N) row-major: N rows of the column-major D */
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld,
                                                   sizeof ld));
        if (is_fp8(s->ab_type)) { /* in FP8 products aux has a type of its own (by default D's): the bias's */
            int32_t at = cuda_type(s->bias_type);
            cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &at,
                                                       sizeof at));
        }
    }
    if (is_fp8(s->ab_type)) {
        int8_t fast = s->ab_type == GEMM_FP8_E4M3;
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
    }
    set_pointers(p, bias, aux);
    set_scales(p, g->sa, g->sb, g->sd, g->amax_d);

    /* our B is cuBLASLt's A */
    cudaDataType_t ta_ = cuda_type_of(s->ab_type, 1), tb_ = cuda_type_of(s->ab_type, 0), td = cuda_type(s->d_type);
    /* stored shapes, column-major: our B is (K, N) row-major = (N, K) col-major, or its transpose */
    if (s->trans_b)
        cublasCheck(cublasLtMatrixLayoutCreate(&p->la, ta_, s->K, s->N, s->K));
    else
        cublasCheck(cublasLtMatrixLayoutCreate(&p->la, ta_, s->N, s->K, s->N));
    if (s->trans_a)
        cublasCheck(cublasLtMatrixLayoutCreate(&p->lb, tb_, s->M, s->K, s->M));
    else
        cublasCheck(cublasLtMatrixLayoutCreate(&p->lb, tb_, s->K, s->M, s->K));
    cublasCheck(cublasLtMatrixLayoutCreate(&p->ld, td, s->N, s->M, s->N));
    cublasCheck(cublasLtMatrixLayoutCreate(&p->lc, is_fp8(s->d_type) ? CUDA_R_16BF : td, s->N, s->M, s->N));

    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    cublasStatus_t st = plan_heuristic(g, p, 1, &res, &found);
    p->used = 1;
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
        snprintf(why, nwhy, "no algorithm (heuristic status %d: %s)", (int)st, cublasGetStatusString(st));
        plan_release(p);
        return -1;
    }
    p->algo = res.algo;
    p->tuned = 0;
    p->beta = 0.0f;
    g->nplans++;
    const gemm_preset *pr = presets ? preset_find(g, s, align) : NULL;
    if (pr && !plan_take_preset(g, p, pr))
        preset_refused(g, p);
    return 0;
}

static int plan_make(gemm_ctx *g, gemm_plan *p, const gemm_shape *s, const uint8_t align[5], void *bias,
                     void *aux, char *why, size_t nwhy)
{
    return plan_make_from(g, p, s, align, bias, aux, 0, why, nwhy);
}

int gemm_supported(gemm_ctx *g, const gemm_shape *s, const void *A, const void *B, const void *D,
                   const void *bias, const void *aux)
{
    uint8_t align[5];
    operand_align(s, A, B, D, bias, aux, align);
    gemm_plan p = {0};
    char why[160];
    if (plan_make(g, &p, s, align, (void *)bias, (void *)aux, why, sizeof why))
        return 0;
    plan_release(&p);
    g->nplans--;
    return 1;
}



/* Dimensions are bucketed for the plan cache (8 buckets per octave above 64), so the token count
 * changing every step does not ask the heuristic again every step: the algorithm is chosen for
 * the bucket's largest shape and runs on the exact one. The choice depends on the bucket only,
 * never on which shapes came first, so a run and its resumed continuation compute alike. */
static int bucket(int x)
{
    if (x <= 64)
        return x;
    int l = 0;
    while ((2 << l) <= x)
        l++;
    int gran = 1 << (l - 3);
    return (x + gran - 1) / gran * gran;
}

static gemm_shape bucket_shape(const gemm_shape *s)
{
    gemm_shape sb = *s;
    sb.M = bucket(s->M);
    sb.N = bucket(s->N);
    sb.K = bucket(s->K);
    return sb;
}

static void layout_dims(cublasLtMatrixLayout_t lay, uint64_t rows, uint64_t cols, int64_t ldim)
{
    cublasCheck(cublasLtMatrixLayoutSetAttribute(lay, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof rows));
    cublasCheck(cublasLtMatrixLayoutSetAttribute(lay, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof cols));
    cublasCheck(cublasLtMatrixLayoutSetAttribute(lay, CUBLASLT_MATRIX_LAYOUT_LD, &ldim, sizeof ldim));
}

/* Points a plan made for a bucket at the exact shape s (same formulas as plan_make). */
static void plan_set_shape(gemm_plan *p, const gemm_shape *s)
{
    if (s->trans_b)
        layout_dims(p->la, s->K, s->N, s->K);
    else
        layout_dims(p->la, s->N, s->K, s->N);
    if (s->trans_a)
        layout_dims(p->lb, s->M, s->K, s->M);
    else
        layout_dims(p->lb, s->K, s->M, s->K);
    layout_dims(p->ld, s->N, s->M, s->N);
    layout_dims(p->lc, s->N, s->M, s->N);
    if (epi_has_aux(s->epi)) {
        int64_t ld = s->N;
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld,
                                                   sizeof ld));
    }
}

/* A step after the warm-up met a shape the warm-up did not prepare: counted, and named on stderr
 * under UNPAD_GEMM_LOG. */
static void late_event(gemm_ctx *g, const char *what, const gemm_shape *s, const uint8_t align[5])
{
    if (!g->warmed || g->warming)
        return;
    g->late++;
    if (g->log)
        fprintf(stderr, "gemm: %s after the warm-up: M %d N %d K %d trans %d%d epi %d types %d/%d, "
                        "operand alignment 2^(%d %d %d %d %d)\n", what, s->M, s->N, s->K, s->trans_a,
                s->trans_b, (int)s->epi, (int)s->ab_type, (int)s->d_type, align[0], align[1], align[2],
                align[3], align[4]);
}

/* The cached plan of bucket shape sb, made when new (NULL with the reason in why when no algorithm
 * runs it). */
static gemm_plan *plan_lookup(gemm_ctx *g, const gemm_shape *sb, const uint8_t align[5], void *bias, void *aux,
                              char *why, size_t nwhy)
{
    uint64_t h = plan_hash(sb, align);
    gemm_plan *p = NULL;
    for (int probe = 0; probe < 16; probe++) {
        gemm_plan *q = &g->plans[(h + (uint64_t)probe) % GEMM_CACHE_SIZE];
        if (plan_matches(q, sb, align) || !q->used) {
            p = q;
            break;
        }
    }
    if (!p) { /* a crowded neighbourhood: replace the home slot */
        p = &g->plans[h % GEMM_CACHE_SIZE];
        plan_release(p);
        g->nplans--;
        g->evicted++;
    }
    if (!p->used) {
        late_event(g, "plan made", sb, align);
        return plan_make_from(g, p, sb, align, bias, aux, 1, why, nwhy) ? NULL : p;
    }
    set_pointers(p, bias, aux);
    set_scales(p, g->sa, g->sb, g->sd, g->amax_d);
    return p;
}

/* p->alt: the heuristic's algorithm for the bucket shape with its bucketed M and K made odd (the
 * shapes an algorithm for round sizes refuses). */
static void plan_alt(gemm_ctx *g, gemm_plan *p)
{
    if (p->alt_state)
        return;
    gemm_shape odd = p->s;
    if (odd.M > 64 && odd.M % 2 == 0)
        odd.M--;
    if (odd.K > 64 && odd.K % 2 == 0)
        odd.K--;
    gemm_plan q = {0};
    char why[160];
    p->alt_state = -1;
    if (plan_make(g, &q, &odd, p->align, p->bias, p->aux, why, sizeof why) == 0) {
        p->alt = q.algo;
        p->alt_state = 1;
        plan_release(&q);
        g->nplans--;
    }
}

static int refused(cublasStatus_t st) { return st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE; }

/* Whether an algorithm takes a shape depends on how its leading dimensions are aligned: the class
 * of M, N and K each as a multiple of 8, of 4, of 2, or odd (0..63). */
static int align_of(int x) { return x % 8 == 0 ? 0 : x % 4 == 0 ? 1 : x % 2 == 0 ? 2 : 3; }
static int align_class(const gemm_shape *s) { return align_of(s->M) * 16 + align_of(s->N) * 4 + align_of(s->K); }

/* Runs plan p, already set to the exact shape s: on `algo`, the bucket's own algorithm, and on
 * `alt` where cuBLASLt refuses `algo` for this alignment class. The algorithm depends on the shape
 * alone, so a run and its resumed continuation compute alike. `algo` stays first: the heuristic's
 * choice for an odd shape is a slow kernel (measured on the H200: 6-10x for BERT's products at an
 * odd token count), so `alt` serves only the shapes `algo` refuses. A refused cublasLtMatmul costs
 * milliseconds of host time, so each class is asked once per plan (gemm_ctx_warm asks every
 * class ahead). */
static cublasStatus_t plan_exec(gemm_ctx *g, gemm_plan *p, const gemm_shape *s, const void *A, const void *B,
                                void *D, float alpha, float beta, cudaStream_t stream)
{
    int c = align_class(s);
    cublasStatus_t st = CUBLAS_STATUS_NOT_SUPPORTED;
    if (p->takes[c] != 2) {
        st = cublasLtMatmul(g->lt, p->desc, &alpha, B, p->la, A, p->lb, &beta, c_of(p, D), p->lc, D, p->ld,
                            &p->algo, g->workspace, GEMM_WORKSPACE_BYTES, stream);
        if (st == CUBLAS_STATUS_SUCCESS)
            p->takes[c] = 1;
        else if (refused(st)) {
            p->takes[c] = 2;
            late_event(g, "refusal", s, p->align);
        }
    }
    if (p->takes[c] == 2) {
        plan_alt(g, p); /* made once per bucket (gemm_ctx_warm makes it ahead) */
        if (p->alt_state == 1 && memcmp(&p->alt, &p->algo, sizeof p->alt))
            st = cublasLtMatmul(g->lt, p->desc, &alpha, B, p->la, A, p->lb, &beta, c_of(p, D), p->lc, D, p->ld,
                                &p->alt, g->workspace, GEMM_WORKSPACE_BYTES, stream);
    }
    return st;
}

static void run_product(gemm_ctx *g, const gemm_shape *s, const void *A, const void *B, void *D, float alpha,
                        float beta, void *bias, void *aux, cudaStream_t stream)
{
    if (s->M <= 0 || s->N <= 0 || s->K <= 0)
        shape_fail(s, "empty or negative dimension");
    if (epi_has_bias(s->epi) && !bias)
        shape_fail(s, "epilogue needs a bias pointer");
    if (epi_has_aux(s->epi) && (!aux || s->N % 8))
        shape_fail(s, "epilogue needs an aux pointer and N a multiple of 8");
    uint8_t align[5];
    operand_align(s, A, B, D, bias, aux, align);
    gemm_shape sb = bucket_shape(s);
    char why[160];
    double t0 = g->slow_us > 0 ? unpad_now_s() : 0;
    gemm_plan *p = plan_lookup(g, &sb, align, bias, aux, why, sizeof why);
    if (!p)
        shape_fail(&sb, why);
    plan_set_shape(p, s);
    double t1 = g->slow_us > 0 ? unpad_now_s() : 0;
    cublasStatus_t st = plan_exec(g, p, s, A, B, D, alpha, beta, stream);
    double t2 = g->slow_us > 0 ? unpad_now_s() : 0;
    if (g->slow_us > 0 && !g->warming && 1e6 * (t2 - t0) > g->slow_us) {
        int id = 0, tile = 0, c = align_class(s);
        size_t wr = 0;
        const cublasLtMatmulAlgo_t *al = p->takes[c] == 2 ? &p->alt : &p->algo;
        cublasLtMatmulAlgoConfigGetAttribute(al, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &wr);
        cublasLtMatmulAlgoConfigGetAttribute(al, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &wr);
        fprintf(stderr, "gemm: host call of %.0f us (plan %.0f us, cuBLASLt %.0f us): M %d N %d K %d trans %d%d epi %d "
                        "types %d/%d beta %g, class %d on %s (algorithm %d, tile %d)\n", 1e6 * (t2 - t0),
                1e6 * (t1 - t0), 1e6 * (t2 - t1), s->M, s->N, s->K, s->trans_a, s->trans_b, (int)s->epi,
                (int)s->ab_type, (int)s->d_type, beta, c, p->takes[c] == 2 ? "alt" : "algo", id, tile);
    }
    if (refused(st)) {
        /* neither algorithm takes this exact shape: a plan of its own, not cached */
        gemm_plan q = {0};
        if (plan_make(g, &q, s, align, bias, aux, why, sizeof why))
            shape_fail(s, why);
        st = cublasLtMatmul(g->lt, q.desc, &alpha, B, q.la, A, q.lb, &beta, c_of(&q, D), q.lc, D, q.ld, &q.algo,
                            g->workspace, GEMM_WORKSPACE_BYTES, stream);
        plan_release(&q);
        g->nplans--;
        g->fallbacks++;
    }
    if (st != CUBLAS_STATUS_SUCCESS) {
        snprintf(why, sizeof why, "matmul failed (status %d: %s)", (int)st, cublasGetStatusString(st));
        shape_fail(s, why);
    }
    p->A = A;
    p->B = B;
    p->D = D;
    p->last = *s;
    p->beta = beta;
}

void gemm_run(gemm_ctx *g, const gemm_shape *s, const void *A, const void *B, void *D, float alpha,
              float beta, void *bias, void *aux, cudaStream_t stream)
{
    if (is_fp8(s->ab_type))
        shape_fail(s, "FP8 operands without scales (gemm_run_fp8 runs them)");
    g->sa = g->sb = NULL;
    run_product(g, s, A, B, D, alpha, beta, bias, aux, stream);
}

void gemm_run_fp8(gemm_ctx *g, const gemm_shape *s, const void *A, const void *B, void *D, float alpha,
                  float beta, void *bias, void *aux, const float *sa, const float *sb, cudaStream_t stream)
{
    gemm_run_fp8_out(g, s, A, B, D, alpha, beta, bias, aux, sa, sb, NULL, NULL, stream);
}

void gemm_run_fp8_out(gemm_ctx *g, const gemm_shape *s, const void *A, const void *B, void *D, float alpha,
                      float beta, void *bias, void *aux, const float *sa, const float *sb, const float *sd,
                      float *amax_d, cudaStream_t stream)
{
    int d8 = s->d_type == GEMM_FP8_E4M3;
    if (!is_fp8(s->ab_type) || (s->d_type != GEMM_BF16 && !d8) || s->trans_a || !s->trans_b || s->K % 16)
        shape_fail(s, "FP8 products take FP8 A and B, K-major (trans_a 0, trans_b 1), K % 16 == 0 and a bf16 or "
                      "E4M3 D");
    /* cuBLASLt's heuristic accepts other scale pointers, and then refuses every matmul */
    if (!sa || !sb || (((uintptr_t)sa | (uintptr_t)sb | (uintptr_t)sd) & 15))
        shape_fail(s, "FP8 scale pointers must be 16-byte aligned");
    if (d8 && (!sd || !amax_d || beta != 0.0f || s->bias_type != GEMM_BF16))
        shape_fail(s, "an E4M3 D takes its scale and maximum pointers, beta 0 and bf16 bias and aux");
    g->sa = sa;
    g->sb = sb;
    g->sd = d8 ? sd : NULL;
    g->amax_d = d8 ? amax_d : NULL;
    run_product(g, s, A, B, D, alpha, beta, bias, aux, stream);
    g->sa = g->sb = g->sd = NULL;
    g->amax_d = NULL;
}

void gemm_ctx_warm_accumulation(gemm_ctx *g, int on) { g->warm_acc = on; }
int gemm_ctx_fallbacks(const gemm_ctx *g) { return g->fallbacks; }
int gemm_ctx_late(const gemm_ctx *g) { return g->late; }
int gemm_ctx_evicted(const gemm_ctx *g) { return g->evicted; }
int gemm_ctx_presets_refused(const gemm_ctx *g) { return g->presets_refused; }

static int *shape_dim(gemm_shape *s, int d) { return d == 0 ? &s->M : d == 1 ? &s->N : &s->K; }

/* Runs plan p (new, bucket value x in dimension d) once on the operands of the template run t,
 * with dimension d cut to min(x, its size in t's run): every operand is stored tight, so a smaller
 * dimension stays inside t's buffers. cuBLASLt loads an algorithm's kernel at its first launch
 * (several ms, the host waiting for the GPU to go idle); this moves that launch here. It loads a
 * kernel for beta = 0 and another for beta != 0 (the source matrix read or not), so a product
 * that accumulates is launched at both: the template's run had beta != 0 (FFN1's data gradient
 * into the residual's), or it is a weight gradient (trans_a) and a step runs several micro-batches
 * (gemm_ctx_warm_accumulation). Otherwise the first step to meet each of its buckets stalls
 * (measured on an H100: 2.2-2.7 ms of the host's time, once per bucket). The outputs
 * are scratch: the caller runs this between steps on the step's stream, and every buffer a
 * product writes is rewritten by the next step. Returns 1 when a launch was accepted. */
static int plan_run_once(gemm_ctx *g, gemm_plan *p, const gemm_plan *t, int d, int x, cudaStream_t stream)
{
    gemm_shape s = t->last;
    int *dim = shape_dim(&s, d);
    *dim = x < *dim ? x : *dim;
    set_pointers(p, t->bias, t->aux);
    set_scales(p, t->sa, t->sb, t->sd, t->amax_d);
    float alpha = 1.0f, beta = 0.0f;
    int ran = 0, top = *dim;
    /* every alignment class of this dimension (a multiple of 8, of 4, of 2, odd), each at the
     * largest size of that class not above the cut: a step can meet any of them, and a class met
     * first inside a step costs that step a refused call (plan_exec) */
    for (int c = 0; c < 4; c++) {
        int y = top;
        while (y > 64 && align_of(y) != c)
            y--;
        if (y < 1 || (y > 64 && align_of(y) != c) || (y <= 64 && c > 0))
            continue;
        *dim = y;
        plan_set_shape(p, &s);
        if (plan_exec(g, p, &s, t->A, t->B, t->D, alpha, beta, stream) != CUBLAS_STATUS_SUCCESS)
            continue;
        ran++;
        /* the accumulating kernel, on the algorithm this class runs; an FP8 D has no source of
         * its type (its products never accumulate); a refusal here changes nothing */
        const cublasLtMatmulAlgo_t *al = p->takes[align_class(&s)] == 2 ? &p->alt : &p->algo;
        float one = 1.0f;
        if (!is_fp8(p->s.d_type) && (t->beta != 0.0f || (g->warm_acc && p->s.trans_a)))
            cublasLtMatmul(g->lt, p->desc, &alpha, t->B, p->la, t->A, p->lb, &one, t->D, p->lc, t->D, p->ld, al,
                           g->workspace, GEMM_WORKSPACE_BYTES, stream);
    }
    return ran > 0;
}

int gemm_ctx_warm(gemm_ctx *g, int lo, int hi, const int *fixed, int nfixed, cudaStream_t stream, int *made,
                  int *ran, unpad_err *err)
{
    *made = *ran = 0;
    if (lo < 1 || hi < lo)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "GEMM warm-up range [%d, %d] is empty", lo, hi);
    /* the templates: the plans cached so far, copied, since warming adds to the same table */
    int n = 0;
    gemm_plan *tpl = malloc((size_t)(g->nplans > 0 ? g->nplans : 1) * sizeof *tpl);
    if (!tpl)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of host memory for the GEMM warm-up");
    for (int i = 0; i < GEMM_CACHE_SIZE && n < g->nplans; i++)
        if (g->plans[i].used)
            tpl[n++] = g->plans[i];
    int before = g->nplans, blo = bucket(lo), bhi = bucket(hi);
    g->warming = 1;
    for (int i = 0; i < n; i++) {
        /* A dimension equal to one of the model's (fixed) is taken for the model's, unless all
         * three are: then the count that varies (tokens, predictions) happened to fall into the
         * bucket of a model dimension in the template's step, and every dimension is varied. */
        int looks_fixed[3], nlooks = 0;
        for (int d = 0; d < 3; d++) {
            gemm_shape v = tpl[i].s;
            looks_fixed[d] = 0;
            for (int f = 0; f < nfixed; f++)
                looks_fixed[d] |= *shape_dim(&v, d) == bucket(fixed[f]);
            nlooks += looks_fixed[d];
        }
        for (int d = 0; d < 3; d++) {
            gemm_shape v = tpl[i].s;
            int *dim = shape_dim(&v, d);
            if (*dim < blo || *dim > bhi || (looks_fixed[d] && nlooks < 3))
                continue;
            for (int x = blo; x <= bhi && g->nplans < GEMM_CACHE_SIZE / 2; x = bucket(x + 1)) {
                char why[160];
                *dim = x;
                int had = g->nplans;
                g->sa = tpl[i].sa;
                g->sb = tpl[i].sb;
                g->sd = tpl[i].sd;
                g->amax_d = tpl[i].amax_d;
                /* a bucket no algorithm runs is left to gemm_run, which names it if a step needs it */
                gemm_plan *p = plan_lookup(g, &v, tpl[i].align, tpl[i].bias, tpl[i].aux, why, sizeof why);
                if (!p)
                    continue;
                plan_alt(g, p);
                if (g->nplans > had)
                    p->beta = tpl[i].beta; /* the template's product: gemm_ctx_tune times with it */
                if (g->nplans > had && tpl[i].A)
                    *ran += plan_run_once(g, p, &tpl[i], d, x, stream);
            }
        }
    }
    free(tpl);
    g->sa = g->sb = g->sd = NULL;
    g->amax_d = NULL;
    g->warming = 0;
    g->warmed = 1;
    *made = g->nplans - before;
    cudaCheck(cudaStreamSynchronize(stream));
    return UNPAD_OK;
}

void gemm_linear_fwd(gemm_ctx *g, gemm_dtype t, int T, int in, int out, const void *X, const void *W,
                     const void *bias, void *Y, void *aux, int gelu, cudaStream_t stream)
{
    gemm_shape s = {.M = T, .N = out, .K = in, .trans_a = 0, .trans_b = 1, .ab_type = t, .d_type = t,
                    .epi = gelu ? GEMM_EPI_GELU_BIAS : bias ? GEMM_EPI_BIAS : GEMM_EPI_NONE,
                    .bias_type = t};
    gemm_run(g, &s, X, W, Y, 1.0f, 0.0f, (void *)bias, aux, stream);
}

void gemm_linear_bwd_data(gemm_ctx *g, gemm_dtype t, int T, int in, int out, const void *dY,
                          const void *W, void *dX, float beta, const void *aux, void *dbias,
                          cudaStream_t stream)
{
    gemm_shape s = {.M = T, .N = in, .K = out, .trans_a = 0, .trans_b = 0, .ab_type = t, .d_type = t,
                    .epi = aux ? (dbias ? GEMM_EPI_DGELU_BGRAD : GEMM_EPI_DGELU) : GEMM_EPI_NONE,
                    .bias_type = t};
    gemm_run(g, &s, dY, W, dX, 1.0f, beta, dbias, (void *)aux, stream);
}

void gemm_linear_fwd_fp8(gemm_ctx *g, int T, int in, int out, const uint8_t *X8, const uint8_t *W8,
                         const float *sx, const float *sw, const void *bias, void *Y, void *aux, int gelu,
                         cudaStream_t stream)
{
    gemm_shape s = {.M = T, .N = out, .K = in, .trans_a = 0, .trans_b = 1, .ab_type = GEMM_FP8_E4M3,
                    .d_type = GEMM_BF16, .epi = gelu ? GEMM_EPI_GELU_BIAS : bias ? GEMM_EPI_BIAS : GEMM_EPI_NONE,
                    .bias_type = GEMM_BF16};
    gemm_run_fp8(g, &s, X8, W8, Y, 1.0f, 0.0f, (void *)bias, aux, sx, sw, stream);
}

void gemm_linear_fwd_fp8_out(gemm_ctx *g, int T, int in, int out, const uint8_t *X8, const uint8_t *W8,
                             const float *sx, const float *sw, const void *bias, uint8_t *Y8, void *aux, int gelu,
                             const float *sy, float *amax_y, cudaStream_t stream)
{
    gemm_shape s = {.M = T, .N = out, .K = in, .trans_a = 0, .trans_b = 1, .ab_type = GEMM_FP8_E4M3,
                    .d_type = GEMM_FP8_E4M3, .epi = gelu ? GEMM_EPI_GELU_BIAS : bias ? GEMM_EPI_BIAS : GEMM_EPI_NONE,
                    .bias_type = GEMM_BF16};
    gemm_run_fp8_out(g, &s, X8, W8, Y8, 1.0f, 0.0f, (void *)bias, aux, sx, sw, sy, amax_y, stream);
}

void gemm_linear_bwd_data_fp8(gemm_ctx *g, int T, int in, int out, const uint8_t *dY8, const uint8_t *Wt8,
                              const float *sg, const float *sw, void *dX, float beta, cudaStream_t stream)
{
    gemm_shape s = {.M = T, .N = in, .K = out, .trans_a = 0, .trans_b = 1, .ab_type = GEMM_FP8_E5M2,
                    .d_type = GEMM_BF16, .epi = GEMM_EPI_NONE, .bias_type = GEMM_BF16};
    gemm_run_fp8(g, &s, dY8, Wt8, dX, 1.0f, beta, NULL, NULL, sg, sw, stream);
}

void gemm_linear_bwd_weight(gemm_ctx *g, gemm_dtype t, int T, int in, int out, const void *dY,
                            const void *X, float *dW, float beta, cudaStream_t stream)
{
    gemm_shape s = {.M = out, .N = in, .K = T, .trans_a = 1, .trans_b = 0, .ab_type = t,
                    .d_type = GEMM_F32, .epi = GEMM_EPI_NONE, .bias_type = GEMM_F32};
    gemm_run(g, &s, dY, X, dW, 1.0f, beta, NULL, NULL, stream);
}

/* ---- algorithm tuning ----------------------------------------------------------------------------
 * The heuristic's first choice is not always the fastest kernel on the GPU at hand; gemm_ctx_tune
 * times the heuristic's first candidates on a plan's bucket shape and keeps the fastest. */

#define TUNE_MAX_CANDS 32
#define TUNE_MAX_REPS 16

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Times algos[0..n) on plan p, already set to its run's shape and pointers: one launch each (the
 * kernel's load), then reps rounds of one launch of each, back to back between events; us[i] the
 * median of candidate i in microseconds, or -1 when cuBLASLt refuses it. Returns the candidates
 * that ran. */
static int time_algos(gemm_ctx *g, gemm_plan *p, const cublasLtMatmulAlgo_t *algos, int n, const void *A,
                      const void *B, void *D, float beta, int reps, cudaStream_t stream, float *us)
{
    float alpha = 1.0f;
    int ok[TUNE_MAX_CANDS], nok = 0;
    for (int i = 0; i < n; i++) {
        cublasStatus_t st = cublasLtMatmul(g->lt, p->desc, &alpha, B, p->la, A, p->lb, &beta, c_of(p, D), p->lc,
                                           D, p->ld, &algos[i], g->workspace, GEMM_WORKSPACE_BYTES, stream);
        us[i] = -1.0f; /* a candidate that does not run is left out, whatever the status */
        if (st == CUBLAS_STATUS_SUCCESS)
            ok[nok++] = i;
    }
    if (nok == 0)
        return 0;
    int nev = nok * reps + 1;
    cudaEvent_t *ev = malloc((size_t)nev * sizeof *ev);
    float *t = malloc((size_t)nok * reps * sizeof *t);
    if (!ev || !t) {
        free(ev);
        free(t);
        return 0;
    }
    for (int e = 0; e < nev; e++)
        cudaCheck(cudaEventCreate(&ev[e]));
    cudaCheck(cudaEventRecord(ev[0], stream));
    for (int r = 0, e = 1; r < reps; r++)
        for (int j = 0; j < nok; j++, e++) {
            cublasCheck(cublasLtMatmul(g->lt, p->desc, &alpha, B, p->la, A, p->lb, &beta, c_of(p, D), p->lc, D,
                                       p->ld, &algos[ok[j]], g->workspace, GEMM_WORKSPACE_BYTES, stream));
            cudaCheck(cudaEventRecord(ev[e], stream));
        }
    cudaCheck(cudaEventSynchronize(ev[nev - 1]));
    for (int j = 0; j < nok; j++) {
        for (int r = 0; r < reps; r++) {
            int e = 1 + r * nok + j;
            cudaCheck(cudaEventElapsedTime(&t[j * reps + r], ev[e - 1], ev[e]));
        }
        qsort(t + j * reps, (size_t)reps, sizeof *t, cmp_float);
        const float *tj = t + j * reps;
        us[ok[j]] = 1e3f * (reps % 2 ? tj[reps / 2] : 0.5f * (tj[reps / 2 - 1] + tj[reps / 2]));
    }
    for (int e = 0; e < nev; e++)
        cudaCheck(cudaEventDestroy(ev[e]));
    free(ev);
    free(t);
    return nok;
}

/* The heuristic's first n candidates of plan p (at most TUNE_MAX_CANDS); the count. */
static int plan_candidates(gemm_ctx *g, const gemm_plan *p, int n, cublasLtMatmulAlgo_t *algos)
{
    cublasLtMatmulHeuristicResult_t res[TUNE_MAX_CANDS];
    int found = 0;
    n = n < 1 ? 1 : n > TUNE_MAX_CANDS ? TUNE_MAX_CANDS : n;
    if (plan_heuristic(g, p, n, res, &found) != CUBLAS_STATUS_SUCCESS)
        return 0;
    for (int i = 0; i < found; i++)
        algos[i] = res[i].algo;
    return found;
}

int gemm_time_candidates(gemm_ctx *g, const gemm_shape *s, const void *A, const void *B, void *D, float beta,
                         void *bias, void *aux, int n, int reps, cudaStream_t stream, float *us)
{
    uint8_t align[5];
    operand_align(s, A, B, D, bias, aux, align);
    gemm_shape sb = bucket_shape(s);
    gemm_plan p = {0};
    char why[160];
    if (plan_make(g, &p, &sb, align, bias, aux, why, sizeof why))
        return 0;
    g->nplans--;
    cublasLtMatmulAlgo_t algos[TUNE_MAX_CANDS];
    int found = plan_candidates(g, &p, n, algos);
    plan_set_shape(&p, s);
    reps = reps < 1 ? 1 : reps > TUNE_MAX_REPS ? TUNE_MAX_REPS : reps;
    time_algos(g, &p, algos, found, A, B, D, beta, reps, stream, us);
    plan_release(&p);
    return found;
}

static size_t dtype_bytes(gemm_dtype t) { return t == GEMM_F32 ? 4 : 2; }

/* Element counts of a product's operands at shape s: A, B, D, aux, bias. */
static void operand_sizes(const gemm_shape *s, size_t n[5])
{
    n[0] = (size_t)s->M * s->K;
    n[1] = (size_t)s->K * s->N;
    n[2] = (size_t)s->M * s->N;
    n[3] = epi_has_aux(s->epi) ? (size_t)s->M * s->N : 0;
    n[4] = epi_has_bias(s->epi) ? (size_t)(s->epi == GEMM_EPI_BGRADB ? s->M : s->N) : 0;
}

/* Random values of type t (small normals: never zeros, which run faster) in n elements at p. */
static void fill_random(void *p, size_t n, gemm_dtype t, float *tmp, size_t ntmp, uint64_t seed, cudaStream_t stream)
{
    for (size_t off = 0, k = 0; off < n; off += ntmp, k++) {
        size_t c = n - off < ntmp ? n - off : ntmp;
        if (t == GEMM_F32) {
            init_trunc_normal((float *)p + off, (int64_t)c, 0.5f, seed, k, stream);
        } else {
            init_trunc_normal(tmp, (int64_t)c, 0.5f, seed, k, stream);
            convert_f32_to_floatX((floatX *)p + off, tmp, (int64_t)c, stream);
        }
    }
}

typedef struct {
    gemm_plan *p;
    double flop;
} tune_item;

static int cmp_item(const void *a, const void *b)
{
    const tune_item *x = a, *y = b;
    if (x->flop != y->flop)
        return x->flop < y->flop ? 1 : -1;
    return (x->p > y->p) - (x->p < y->p);
}

/* Whether one of plan p's dimensions that is not a model size has its bucket in [blo, bhi] (the
 * rule of gemm_ctx_warm: all three looking like model sizes means the count fell into one). */
static int plan_in_range(const gemm_plan *p, int blo, int bhi, const int *fixed, int nfixed)
{
    int looks[3], nlooks = 0;
    for (int d = 0; d < 3; d++) {
        gemm_shape v = p->s;
        looks[d] = 0;
        for (int f = 0; f < nfixed; f++)
            looks[d] |= *shape_dim(&v, d) == bucket(fixed[f]);
        nlooks += looks[d];
    }
    for (int d = 0; d < 3; d++) {
        gemm_shape v = p->s;
        int x = *shape_dim(&v, d);
        if (x >= blo && x <= bhi && !(looks[d] && nlooks < 3))
            return 1;
    }
    return 0;
}

/* Runs plan p once (beta 0, scratch operands) at its bucket shape with each dimension in turn cut
 * to each alignment class, so that its `takes` (and `alt`) are known before a step meets them. */
static void plan_probe_classes(gemm_ctx *g, gemm_plan *p, void *const ops[5], cudaStream_t stream)
{
    for (int d = 0; d < 3; d++)
        for (int c = 0; c < 4; c++) {
            gemm_shape v = p->s;
            int *dim = shape_dim(&v, d), y = *dim;
            while (y > 64 && align_of(y) != c)
                y--;
            if (y < 1 || (y > 64 && align_of(y) != c) || (y <= 64 && c > 0))
                continue;
            *dim = y;
            plan_set_shape(p, &v);
            plan_exec(g, p, &v, ops[0], ops[1], ops[2], 1.0f, 0.0f, stream);
        }
    plan_set_shape(p, &p->s);
}

int gemm_ctx_tune(gemm_ctx *g, int lo, int hi, const int *fixed, int nfixed, const gemm_tune_opts *o,
                  cudaStream_t stream, gemm_tune_stats *st, unpad_err *err)
{
    memset(st, 0, sizeof *st);
    double t0 = unpad_now_s();
    if (lo < 1 || hi < lo)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "GEMM tuning range [%d, %d] is empty", lo, hi);
    int blo = bucket(lo), bhi = bucket(hi);
    tune_item *items = malloc((size_t)(g->nplans > 0 ? g->nplans : 1) * sizeof *items);
    if (!items)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of host memory for the GEMM tuning");
    int n = 0;
    size_t need[5] = {0};
    for (int i = 0; i < GEMM_CACHE_SIZE; i++) {
        gemm_plan *p = &g->plans[i];
        /* tensor-core products only: fp32 operands are the exact build's, left to the heuristic
         * (whose floatX is fp32: the scratch fill below writes bf16 through floatX) */
        if (!p->used || p->tuned || p->s.ab_type != GEMM_BF16 || sizeof(floatX) != 2 ||
            !plan_in_range(p, blo, bhi, fixed, nfixed))
            continue;
        double flop = 2.0 * p->s.M * p->s.N * p->s.K;
        if (flop < o->min_flop)
            continue;
        items[n].p = p;
        items[n++].flop = flop;
        size_t sz[5];
        operand_sizes(&p->s, sz);
        const gemm_dtype ty[5] = {p->s.ab_type, p->s.ab_type, p->s.d_type, p->s.ab_type, p->s.bias_type};
        for (int k = 0; k < 5; k++)
            need[k] = sz[k] * dtype_bytes(ty[k]) > need[k] ? sz[k] * dtype_bytes(ty[k]) : need[k];
    }
    st->considered = n;
    if (n == 0) {
        free(items);
        st->seconds = unpad_now_s() - t0;
        return UNPAD_OK;
    }
    qsort(items, (size_t)n, sizeof *items, cmp_item);
    /* scratch operands: one allocation for the largest of each, freed at the end */
    size_t off[6] = {0};
    for (int k = 0; k < 5; k++)
        off[k + 1] = off[k] + (need[k] + 255) / 256 * 256;
    const size_t ntmp = (size_t)1 << 24;
    char *buf = NULL;
    float *tmp = NULL;
    if (cudaMalloc((void **)&buf, off[5] + ntmp * sizeof(float)) != cudaSuccess) {
        cudaGetLastError();
        st->no_memory = 1;
        st->scratch_bytes = off[5] + ntmp * sizeof(float);
        free(items);
        st->seconds = unpad_now_s() - t0;
        return UNPAD_OK;
    }
    tmp = (float *)(buf + off[5]);
    void *ops[5];
    for (int k = 0; k < 5; k++)
        ops[k] = buf + off[k];
    fill_random(ops[0], need[0] / 2, GEMM_BF16, tmp, ntmp, 11, stream);
    fill_random(ops[1], need[1] / 2, GEMM_BF16, tmp, ntmp, 12, stream);
    cudaCheck(cudaMemsetAsync(ops[2], 0, need[2], stream));
    fill_random(ops[3], need[3] / 2, GEMM_BF16, tmp, ntmp, 13, stream);
    /* bf16 values: read as fp32 (an fp32 bias), pairs of them are sane numbers too */
    fill_random(ops[4], need[4] / 2, GEMM_BF16, tmp, ntmp, 14, stream);
    g->warming = 1;
    int reps = o->reps < 1 ? 1 : o->reps > TUNE_MAX_REPS ? TUNE_MAX_REPS : o->reps;
    for (int i = 0; i < n; i++) {
        gemm_plan *p = items[i].p;
        if (unpad_now_s() - t0 > o->budget_s) {
            st->over_budget = n - i;
            break;
        }
        void *keep_bias = p->bias, *keep_aux = p->aux;
        cublasLtMatmulAlgo_t algos[TUNE_MAX_CANDS];
        float us[TUNE_MAX_CANDS];
        int nc = plan_candidates(g, p, o->candidates, algos);
        set_pointers(p, ops[4], ops[3]);
        plan_set_shape(p, &p->s);
        if (nc < 2 || time_algos(g, p, algos, nc, ops[0], ops[1], ops[2], p->beta, reps, stream, us) < 1 ||
            us[0] < 0) {
            set_pointers(p, keep_bias, keep_aux);
            continue;
        }
        int best = 0;
        for (int c = 1; c < nc; c++)
            if (us[c] >= 0 && us[c] < us[best])
                best = c;
        /* a candidate replaces the first choice only when clearly faster (not by timing noise) */
        if (us[best] > 0.99f * us[0])
            best = 0;
        st->tuned++;
        st->top1_us += us[0];
        st->best_us += us[best];
        p->tuned = 1;
        if (memcmp(&algos[best], &p->algo, sizeof p->algo)) {
            p->algo = algos[best];
            memset(p->takes, 0, sizeof p->takes);
            st->changed++;
            plan_probe_classes(g, p, ops, stream);
        }
        if (g->log)
            fprintf(stderr, "gemm tune: M %d N %d K %d trans %d%d epi %s D %s beta %g: first %.1f us, best "
                            "#%d of %d %.1f us\n", p->s.M, p->s.N, p->s.K, p->s.trans_a, p->s.trans_b,
                    epi_name(p->s.epi), p->s.d_type == GEMM_F32 ? "fp32" : "bf16", p->beta, us[0], best, nc,
                    us[best]);
        set_pointers(p, keep_bias, keep_aux);
    }
    g->warming = 0;
    cudaCheck(cudaStreamSynchronize(stream));
    cudaCheck(cudaFree(buf));
    free(items);
    st->seconds = unpad_now_s() - t0;
    return UNPAD_OK;
}

/* ---- presets: the tuned choices, saved with a checkpoint and read back on resume ---------------- */

#define PRESET_MAGIC "unpad-gemm-algos 1"

int gemm_ctx_presets_write(const gemm_ctx *g, FILE *f)
{
    int n = 0;
    fprintf(f, "%s cublasLt %zu\n", PRESET_MAGIC, cublasLtGetVersion());
    fprintf(f, "# M N K trans_a trans_b ab_type d_type epilogue bias_type align(A B D bias aux) algorithm(8 words)\n");
    for (int i = 0; i < GEMM_CACHE_SIZE; i++) {
        const gemm_plan *p = &g->plans[i];
        if (!p->used || !p->tuned)
            continue;
        const gemm_shape *s = &p->s;
        fprintf(f, "%d %d %d %d %d %d %d %d %d %d %d %d %d %d", s->M, s->N, s->K, s->trans_a, s->trans_b,
                (int)s->ab_type, (int)s->d_type, (int)s->epi, (int)s->bias_type, p->align[0], p->align[1],
                p->align[2], p->align[3], p->align[4]);
        for (int w = 0; w < 8; w++)
            fprintf(f, " %llx", (unsigned long long)p->algo.data[w]);
        fprintf(f, "\n");
        n++;
    }
    return n;
}

int gemm_ctx_presets_read(gemm_ctx *g, const char *path, int *n, unpad_err *err)
{
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot open: %s", strerror(errno));
    char line[512];
    size_t version = 0;
    int lineno = 1, rc = UNPAD_OK;
    if (!fgets(line, sizeof line, f) || sscanf(line, PRESET_MAGIC " cublasLt %zu", &version) != 1) {
        fclose(f);
        return unpad_fail(err, UNPAD_EINVAL, path, 1, "not a GEMM algorithm file (expected '%s cublasLt N')",
                          PRESET_MAGIC);
    }
    if (version != cublasLtGetVersion()) { /* another library's algorithms: not used */
        fclose(f);
        *n = -1;
        return UNPAD_OK;
    }
    free(g->presets);
    g->presets = NULL;
    g->npresets = 0;
    int cap = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        gemm_preset pr;
        memset(&pr, 0, sizeof pr);
        int v[14];
        unsigned long long w[8];
        int k = sscanf(line, "%d %d %d %d %d %d %d %d %d %d %d %d %d %d %llx %llx %llx %llx %llx %llx %llx %llx",
                       &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11],
                       &v[12], &v[13], &w[0], &w[1], &w[2], &w[3], &w[4], &w[5], &w[6], &w[7]);
        int bad = k != 22 || v[0] < 1 || v[1] < 1 || v[2] < 1 || (unsigned)v[3] > 1 || (unsigned)v[4] > 1 ||
                  (unsigned)v[5] > 1 || (unsigned)v[6] > 1 || (unsigned)v[7] > GEMM_EPI_BGRADB ||
                  (unsigned)v[8] > 1;
        for (int a = 9; a < 14 && !bad; a++)
            bad = (unsigned)v[a] > 8;
        if (bad) {
            rc = unpad_fail(err, UNPAD_EINVAL, path, lineno, "expected 14 integers and 8 hexadecimal words");
            break;
        }
        pr.s = (gemm_shape){.M = v[0], .N = v[1], .K = v[2], .trans_a = v[3], .trans_b = v[4],
                            .ab_type = (gemm_dtype)v[5], .d_type = (gemm_dtype)v[6], .epi = (gemm_epilogue)v[7],
                            .bias_type = (gemm_dtype)v[8]};
        for (int a = 0; a < 5; a++)
            pr.align[a] = (uint8_t)v[9 + a];
        for (int a = 0; a < 8; a++)
            pr.algo.data[a] = (uint64_t)w[a];
        if (g->npresets == cap) {
            cap = cap ? 2 * cap : 64;
            gemm_preset *q = realloc(g->presets, (size_t)cap * sizeof *q);
            if (!q) {
                rc = unpad_fail(err, UNPAD_ENOMEM, path, lineno, "out of host memory");
                break;
            }
            g->presets = q;
        }
        g->presets[g->npresets++] = pr;
    }
    fclose(f);
    if (rc) {
        free(g->presets);
        g->presets = NULL;
        g->npresets = 0;
        return rc;
    }
    /* plans made before (none in a resumed run, which reads these before its first step) */
    for (int i = 0; i < GEMM_CACHE_SIZE; i++) {
        gemm_plan *p = &g->plans[i];
        const gemm_preset *pr = p->used ? preset_find(g, &p->s, p->align) : NULL;
        if (pr && !plan_take_preset(g, p, pr))
            preset_refused(g, p);
    }
    *n = g->npresets;
    return UNPAD_OK;
}
