/* bert.c — BERT pre-training on one GPU, unpadded (see bert.h): the parameter table, the activation
 * arena, forward, backward and the LAMB step, as calls to cuBLASLt (gemm.h), the memory-bound
 * kernels (kernels.h) and the FMHA (fmha.h). Errors follow kernels/common.h: input and memory
 * failures return an unpad_err, CUDA failures stop. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include "fmha.h"
#include "gpu/bert.h"
#include "gpu/devmem.h"
#include "ops.h"

/* Offsets of one encoder layer's tensors in the flat buffers. */
typedef struct {
    int64_t qkv_w, qkv_b;    /* (3H, H), (3H): query, key, value consecutive */
    int64_t o_w, o_b;        /* (H, H), (H) attention output dense */
    int64_t ln1_g, ln1_b;    /* (H) attention output LayerNorm */
    int64_t f1_w, f1_b;      /* (F, H), (F) intermediate dense */
    int64_t f2_w, f2_b;      /* (H, F), (H) output dense */
    int64_t ln2_g, ln2_b;    /* (H) output LayerNorm */
} layer_offsets;

/* Activations one layer keeps for its backward. T rows are used of max_tokens. */
typedef struct {
    floatX *qkv;             /* (T, 3H) */
    floatX *ctx;             /* (T, H) attention output (before the projection) */
    float *lse;              /* (NH, T) */
    floatX *ln1_in;          /* (T, H) dropout(proj + b) + x */
    float *ln1_mean, *ln1_rstd; /* (T) */
    floatX *a;               /* (T, H) attention block output = FFN input */
    floatX *pre;             /* (T, F) FFN1 output before GELU (erf path: without its bias) */
    floatX *h;               /* (T, F) gelu(pre) */
    floatX *ln2_in;          /* (T, H) */
    float *ln2_mean, *ln2_rstd; /* (T) */
} layer_acts;

struct bert {
    model_cfg cfg;
    bert_options opt;
    int Vpad;
    gemm_ctx *gemm;
    bert_hooks hooks;
    /* UNPAD_HOST_SLOW_US=N: every operator whose host part (its launches) took more than N us is
     * named on stderr, with the forward pass it belongs to (a diagnostic of steps the host delays) */
    double slow_us, op_t0;
    long passes;
    long uploads; /* micro-batches uploaded so far: a captured pass belongs to the last one */

    /* parameters */
    bert_tensor *tensors;
    int ntensors, captensors;
    int table_oom;                /* add_tensor ran out of host memory */
    int64_t nparams;
    float *master, *grad, *m, *v; /* (N) fp32 */
    floatX *work;                 /* (N) floatX */
    lamb_tensor *d_lamb;          /* (ntensors) device */
    int lamb_chunks;

    int64_t word, pos, type, emb_g, emb_b;      /* embeddings */
    layer_offsets *lo;                          /* (L) */
    int64_t pool_w, pool_b;                     /* (H, H), (H) */
    int64_t dec_b;                              /* (Vpad) cls.predictions.bias */
    int64_t t_w, t_b, mln_g, mln_b;             /* MLM transform dense (H, H), (H); LN (H) */
    int64_t nsp_w, nsp_b;                       /* (2, H), (2) */

    /* activations (one arena) */
    int grown;                   /* times the arena was made again for a larger micro-batch */
    void *arena;
    size_t arena_bytes;
    floatX **x;                  /* (L + 1) of (T, H): layer inputs; x[L] the encoder output */
    float *emb_mean, *emb_rstd;  /* (T) */
    layer_acts *la;              /* (L) */
    floatX *tmp;                 /* (T, H) GEMM output before bias+dropout+residual+LN */
    floatX *dY, *dA, *dR;        /* (T, H) gradients */
    floatX *dF;                  /* (T, F) */
    floatX *dQKV;                /* (T, 3H) */
    void *fmha_ws;               /* fmha_bwd_workspace_bytes(max_tokens, NH) */
    float *scratch;              /* column-reduction partials */
    /* MLM head, P rows */
    floatX *m_in, *m_pre, *m_h, *m_out; /* (P, H) */
    float *m_mean, *m_rstd;      /* (P) */
    floatX *logits;              /* (P, Vpad); dlogits in place */
    float *m_loss, *m_lse, *m_correct; /* (P) */
    floatX *dm1, *dm2;           /* (P, H) */
    /* the last layer on the heads' rows (opt.last_heads): R = P + n rows */
    floatX *g_ctx;               /* (R, H) the attention output's rows, kept for the backward */
    floatX *g_x;                 /* (R, H) the layer input's rows; in the backward their gradient */
    floatX *g_d;                 /* (R, H) the gradient of g_ctx */
    int32_t *d_head_rows;        /* (R) token rows: the masked positions, then the first tokens */
    /* NSP head, n rows */
    floatX *c_in, *p_pre, *pooled; /* (n, H) */
    floatX *nsp_logits, *nsp_dlogits; /* (n, 2) */
    float *nsp_loss, *nsp_correct; /* (n) */
    floatX *dc1, *dc2;           /* (n, H) */
    float *stats;                /* (BERT_STATS) [0..3] stats_accumulate's sums, [4] LAMB's global norm */
    float *h_stats;              /* (BERT_STATS) pinned host copy */
    /* the uploaded micro-batch */
    int32_t *d_ids, *d_types, *d_cu, *d_mlm_rows, *d_mlm_labels, *d_nsp_labels, *d_cls_rows;
    int32_t *h_stage;            /* pinned staging of the int32 arrays: two halves of stage_words */
    size_t stage_words;
    cudaEvent_t ev_stage[2];     /* the copies out of each half are done */
    int stage_i;                 /* the half the next upload fills */
    int n, T, P, max_len;
    int R;                       /* the heads' rows, when the last layer runs on them; 0: it runs on T */
    int rows;                    /* rows of the encoder operator being enqueued: T, or R */
    uint64_t dseed;              /* dropout seed of the current micro-batch */
    int dropout_on;              /* opt.dropout, unless evaluating */
    int32_t *h_cu;               /* (max_seqs + 1) host copy of the micro-batch's cu_seqlens */
    /* FMHA length groups (grouped attention) and the all-reduce callback */
    bert_fmha_groups groups;
    bert_group_hooks ghooks;
    cudaStream_t side[BERT_MAX_STREAMS]; /* [1..): created on first use; [0] unused */
    cudaEvent_t ev_fork, ev_join[BERT_MAX_STREAMS];
    bert_grads_ready_fn grads_ready;
    void *grads_ready_ctx;
    /* FP8 (opt.fp8): the four Linear layers of each encoder layer (FP8_QKV..FP8_F2) run their forward
     * and data-gradient products in FP8. Tensor slots of the scaling state, per layer: 0..3 the
     * inputs, 4..7 the weights, 8..11 the output gradients (FP8_SLOTS). */
    uint8_t *w8, *w8t;           /* E4M3 weights (out, in) and their transposes (in, out), layer-major */
    int64_t w8_layer;            /* bytes of one layer's four weights */
    uint8_t *q8;                 /* (max_tokens, max(3H, F)): the operand cast for the next product */
    float *f8_amax, *f8_hist, *f8_scale, *f8_inv; /* (n), (n, FP8_HISTORY), (n), (n, 8): kernels.h */
    uint8_t *f8_fmt;             /* (n) FP8_E4M3 / FP8_E5M2 */
    fp8_cast_item *f8_items;     /* (layers x FP8_LINEARS) device: the weights' casts, one launch */
    int f8_tiles;                /* the most 128 x 128 tiles of one weight */
    int f8_n, f8_pos;
    int f8_ready;                /* the scales have seen one forward and backward; before, the products
                                    run in bf16 (their FP8 twins too, for the plans) and only the
                                    maxima are gathered */
    int w8_stale;                /* the working weights changed since the last cast */
    long f8_runs, f8_calib;      /* products run in FP8; run in bf16 while gathering the first maxima */
    size_t f8_bytes;             /* device bytes of all of the above */
    size_t q8_bytes;             /* of which the operand buffer q8 */
    /* With --fp8 on and the tanh GELU (UNPAD_FP8_GELU_OUT=0 turns it off: docs/trainer.md), FFN1's
     * forward writes its GELU's output only in E4M3 (layer_acts.h holds one byte an element); the
     * backward's GELU pass writes the bf16 values FFN2's weight gradient reads over the GELU's input
     * (pre), which it has read by then. cuBLASLt sets max |h| of layer l in f8_amax_d[4 l] (16-byte
     * aligned), folded into the running maximum after each backward. Off: the bf16 output and its
     * cast. */
    int f8_gelu_out;
    float *f8_amax_d;
};

enum { FP8_QKV, FP8_O, FP8_F1, FP8_F2, FP8_LINEARS };
#define FP8_SLOTS (3 * FP8_LINEARS)

#define W(off) (b->work + (off))
#define G(off) (b->grad + (off))
static double host_now_us(void) { return 1e6 * unpad_now_s(); }
static void host_slow_check(bert *b, int op, int layer)
{
    double dt = host_now_us() - b->op_t0;
    if (dt > b->slow_us)
        fprintf(stderr, "host: pass %ld, %s of layer %d: %.0f us to enqueue\n", b->passes, op_name((op_id)op),
                layer, dt);
}
/* Around every operator: an NVTX range of the operator's name (for Nsight Systems; nearly free
 * without a profiler), the tracer's hooks when set, and the host's time under UNPAD_HOST_SLOW_US. */
#define BEGIN(op, layer)                                                                            \
    do {                                                                                            \
        if (b->slow_us > 0)                                                                         \
            b->op_t0 = host_now_us();                                                               \
        nvtxRangePushA(op_name((op_id)(op)));                                                       \
        if (b->hooks.begin)                                                                         \
            b->hooks.begin(b->hooks.ctx, (op), (layer), s);                                         \
    } while (0)
#define END(op, layer)                                                                              \
    do {                                                                                            \
        if (b->hooks.end)                                                                           \
            b->hooks.end(b->hooks.ctx, (op), (layer), s);                                           \
        nvtxRangePop();                                                                             \
        if (b->slow_us > 0)                                                                         \
            host_slow_check(b, (op), (layer));                                                      \
    } while (0)

/* ---- parameter table ------------------------------------------------------------------------- */

static int64_t add_tensor(bert *b, int rows, int cols, int wd, int hf_rows, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static int64_t add_tensor(bert *b, int rows, int cols, int wd, int hf_rows, const char *fmt, ...)
{
    if (b->table_oom)
        return 0;
    if (b->ntensors == b->captensors) {
        int cap = b->captensors ? 2 * b->captensors : 64;
        bert_tensor *t = realloc(b->tensors, (size_t)cap * sizeof *t);
        if (!t) {
            b->table_oom = 1; /* build_table's caller reports it */
            return 0;
        }
        b->tensors = t;
        b->captensors = cap;
    }
    bert_tensor *t = &b->tensors[b->ntensors++];
    memset(t, 0, sizeof *t);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    t->offset = (b->nparams + 63) / 64 * 64;
    t->rows = rows;
    t->cols = cols;
    t->size = (int64_t)rows * cols;
    t->weight_decay = wd;
    t->hf_rows = hf_rows;
    b->nparams = t->offset + t->size;
    return t->offset;
}

static void build_table(bert *b)
{
    const model_cfg *c = &b->cfg;
    int H = c->hidden, F = c->ffn, V = c->vocab;
    b->word = add_tensor(b, b->Vpad, H, 1, V, "bert.embeddings.word_embeddings.weight");
    b->pos = add_tensor(b, c->max_position, H, 1, c->max_position, "bert.embeddings.position_embeddings.weight");
    b->type = add_tensor(b, c->type_vocab, H, 1, c->type_vocab, "bert.embeddings.token_type_embeddings.weight");
    b->emb_g = add_tensor(b, H, 1, 0, H, "bert.embeddings.LayerNorm.weight");
    b->emb_b = add_tensor(b, H, 1, 0, H, "bert.embeddings.LayerNorm.bias");
    for (int l = 0; l < c->layers; l++) {
        layer_offsets *o = &b->lo[l];
        const char *pre = "bert.encoder.layer";
        o->qkv_w = add_tensor(b, H, H, 1, H, "%s.%d.attention.self.query.weight", pre, l);
        add_tensor(b, H, H, 1, H, "%s.%d.attention.self.key.weight", pre, l);
        add_tensor(b, H, H, 1, H, "%s.%d.attention.self.value.weight", pre, l);
        o->qkv_b = add_tensor(b, H, 1, 0, H, "%s.%d.attention.self.query.bias", pre, l);
        add_tensor(b, H, 1, 0, H, "%s.%d.attention.self.key.bias", pre, l);
        add_tensor(b, H, 1, 0, H, "%s.%d.attention.self.value.bias", pre, l);
        o->o_w = add_tensor(b, H, H, 1, H, "%s.%d.attention.output.dense.weight", pre, l);
        o->o_b = add_tensor(b, H, 1, 0, H, "%s.%d.attention.output.dense.bias", pre, l);
        o->ln1_g = add_tensor(b, H, 1, 0, H, "%s.%d.attention.output.LayerNorm.weight", pre, l);
        o->ln1_b = add_tensor(b, H, 1, 0, H, "%s.%d.attention.output.LayerNorm.bias", pre, l);
        o->f1_w = add_tensor(b, F, H, 1, F, "%s.%d.intermediate.dense.weight", pre, l);
        o->f1_b = add_tensor(b, F, 1, 0, F, "%s.%d.intermediate.dense.bias", pre, l);
        o->f2_w = add_tensor(b, H, F, 1, H, "%s.%d.output.dense.weight", pre, l);
        o->f2_b = add_tensor(b, H, 1, 0, H, "%s.%d.output.dense.bias", pre, l);
        o->ln2_g = add_tensor(b, H, 1, 0, H, "%s.%d.output.LayerNorm.weight", pre, l);
        o->ln2_b = add_tensor(b, H, 1, 0, H, "%s.%d.output.LayerNorm.bias", pre, l);
    }
    b->pool_w = add_tensor(b, H, H, 1, H, "bert.pooler.dense.weight");
    b->pool_b = add_tensor(b, H, 1, 0, H, "bert.pooler.dense.bias");
    b->dec_b = add_tensor(b, b->Vpad, 1, 0, V, "cls.predictions.bias");
    b->t_w = add_tensor(b, H, H, 1, H, "cls.predictions.transform.dense.weight");
    b->t_b = add_tensor(b, H, 1, 0, H, "cls.predictions.transform.dense.bias");
    b->mln_g = add_tensor(b, H, 1, 0, H, "cls.predictions.transform.LayerNorm.weight");
    b->mln_b = add_tensor(b, H, 1, 0, H, "cls.predictions.transform.LayerNorm.bias");
    b->nsp_w = add_tensor(b, 2, H, 1, 2, "cls.seq_relationship.weight");
    b->nsp_b = add_tensor(b, 2, 1, 0, 2, "cls.seq_relationship.bias");
}

static int is_layernorm(const char *name) { return strstr(name, "LayerNorm") != NULL; }

static void init_params(bert *b, cudaStream_t s)
{
    cudaCheck(cudaMemsetAsync(b->master, 0, (size_t)b->nparams * 4, s));
    for (int i = 0; i < b->ntensors; i++) {
        const bert_tensor *t = &b->tensors[i];
        float *w = b->master + t->offset;
        if (is_layernorm(t->name)) {
            if (strstr(t->name, ".weight"))
                fill_f32(w, t->size, 1.0f, s);
        } else if (t->cols > 1) { /* matrices and embeddings; padded vocab rows stay 0 */
            init_trunc_normal(w, (int64_t)t->hf_rows * t->cols, (float)b->cfg.init_range,
                                   b->opt.seed, (uint64_t)i, s);
        }
    }
    bert_sync_work(b, s);
}

/* ---- arena ------------------------------------------------------------------------------------- */

typedef struct {
    char *base;
    size_t off;
} arena_cursor;

static void *carve(arena_cursor *a, size_t bytes)
{
    size_t o = (a->off + 255) / 256 * 256;
    a->off = o + bytes;
    return a->base ? a->base + o : NULL;
}

/* Lays out every activation; with base == NULL only measures. */
static size_t layout_acts(bert *b, char *base)
{
    const model_cfg *c = &b->cfg;
    size_t Tm = (size_t)b->opt.max_tokens, Pm = (size_t)b->opt.max_preds, Nm = (size_t)b->opt.max_seqs;
    size_t H = c->hidden, F = c->ffn, NH = c->heads, L = c->layers, V = b->Vpad;
    const size_t XB = sizeof(floatX);
    arena_cursor a = {base, 0};
    for (size_t l = 0; l <= L; l++)
        b->x[l] = carve(&a, Tm * H * XB);
    b->emb_mean = carve(&a, Tm * 4);
    b->emb_rstd = carve(&a, Tm * 4);
    for (size_t l = 0; l < L; l++) {
        layer_acts *x = &b->la[l];
        x->qkv = carve(&a, Tm * 3 * H * XB);
        x->ctx = carve(&a, Tm * H * XB);
        x->lse = carve(&a, NH * Tm * 4);
        x->ln1_in = carve(&a, Tm * H * XB);
        x->ln1_mean = carve(&a, Tm * 4);
        x->ln1_rstd = carve(&a, Tm * 4);
        x->a = carve(&a, Tm * H * XB);
        x->pre = carve(&a, Tm * F * XB);
        x->h = carve(&a, Tm * F * (b->f8_gelu_out ? 1 : XB)); /* E4M3 only, or bf16 */
        x->ln2_in = carve(&a, Tm * H * XB);
        x->ln2_mean = carve(&a, Tm * 4);
        x->ln2_rstd = carve(&a, Tm * 4);
    }
    b->tmp = carve(&a, Tm * H * XB);
    b->dY = carve(&a, Tm * H * XB);
    b->dA = carve(&a, Tm * H * XB);
    b->dR = carve(&a, Tm * H * XB);
    b->dF = carve(&a, Tm * F * XB);
    b->dQKV = carve(&a, Tm * 3 * H * XB);
    b->fmha_ws = carve(&a, fmha_bwd_workspace_bytes((int)Tm, (int)NH));
    size_t sc = layernorm_bwd_scratch_bytes((int)H);
    size_t widest = V > F ? V : F;
    if (3 * H > widest)
        widest = 3 * H;
    if (bias_bwd_scratch_bytes((int)widest) > sc)
        sc = bias_bwd_scratch_bytes((int)widest);
    if (embedding_bwd_scratch_bytes((int)Tm, (int)H, c->type_vocab) > sc)
        sc = embedding_bwd_scratch_bytes((int)Tm, (int)H, c->type_vocab);
    if (lamb_scratch_bytes(b->lamb_chunks) > sc)
        sc = lamb_scratch_bytes(b->lamb_chunks);
    b->scratch = carve(&a, sc);
    b->m_in = carve(&a, Pm * H * XB);
    b->m_pre = carve(&a, Pm * H * XB);
    b->m_h = carve(&a, Pm * H * XB);
    b->m_out = carve(&a, Pm * H * XB);
    b->m_mean = carve(&a, Pm * 4);
    b->m_rstd = carve(&a, Pm * 4);
    b->logits = carve(&a, Pm * V * XB);
    b->m_loss = carve(&a, Pm * 4);
    b->m_lse = carve(&a, Pm * 4);
    b->m_correct = carve(&a, Pm * 4);
    b->dm1 = carve(&a, Pm * H * XB);
    b->dm2 = carve(&a, Pm * H * XB);
    b->c_in = carve(&a, Nm * H * XB);
    b->p_pre = carve(&a, Nm * H * XB);
    b->pooled = carve(&a, Nm * H * XB);
    b->nsp_logits = carve(&a, Nm * 2 * XB);
    b->nsp_dlogits = carve(&a, Nm * 2 * XB);
    b->nsp_loss = carve(&a, Nm * 4);
    b->nsp_correct = carve(&a, Nm * 4);
    b->dc1 = carve(&a, Nm * H * XB);
    b->dc2 = carve(&a, Nm * H * XB);
    b->stats = carve(&a, BERT_STATS * 4);
    b->d_ids = carve(&a, Tm * 4);
    b->d_types = carve(&a, Tm * 4);
    b->d_cu = carve(&a, (Nm + 1) * 4);
    b->d_mlm_rows = carve(&a, Pm * 4);
    b->d_mlm_labels = carve(&a, Pm * 4);
    b->d_nsp_labels = carve(&a, Nm * 4);
    b->d_cls_rows = carve(&a, Nm * 4);
    if (b->opt.last_heads) {
        b->g_ctx = carve(&a, (Pm + Nm) * H * XB);
        b->g_x = carve(&a, (Pm + Nm) * H * XB);
        b->g_d = carve(&a, (Pm + Nm) * H * XB);
        b->d_head_rows = carve(&a, (Pm + Nm) * 4);
    }
    return a.off;
}

/* ---- FP8 state --------------------------------------------------------------------------------- */

static void fp8_dims(const bert *b, int k, int *in, int *out)
{
    int H = b->cfg.hidden, F = b->cfg.ffn;
    const int ins[FP8_LINEARS] = {H, H, H, F}, outs[FP8_LINEARS] = {3 * H, H, F, H};
    *in = ins[k];
    *out = outs[k];
}

static int64_t fp8_woff(const bert *b, int l, int k) /* byte offset of layer l's weight k in w8, w8t */
{
    int64_t off = (int64_t)l * b->w8_layer;
    for (int j = 0; j < k; j++) {
        int in, out;
        fp8_dims(b, j, &in, &out);
        off += (int64_t)in * out;
    }
    return off;
}

static int64_t fp8_wparam(const bert *b, int l, int k) /* the weight's offset in the flat buffers */
{
    const layer_offsets *o = &b->lo[l];
    const int64_t w[FP8_LINEARS] = {o->qkv_w, o->o_w, o->f1_w, o->f2_w};
    return w[k];
}

static int fp8_create(bert *b, unpad_err *err)
{
    if (sizeof(floatX) != 2)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "FP8 products need the bf16 build");
    const model_cfg *c = &b->cfg;
    b->w8_layer = fp8_woff(b, 0, FP8_LINEARS);
    int n = b->f8_n = c->layers * FP8_SLOTS;
    size_t wide = 3 * (size_t)c->hidden > (size_t)c->ffn ? 3 * (size_t)c->hidden : (size_t)c->ffn;
    size_t wb = (size_t)c->layers * (size_t)b->w8_layer;
    int nw = c->layers * FP8_LINEARS;
    struct {
        void **p;
        size_t bytes;
        const char *what;
    } buf[] = {{(void **)&b->w8, wb, "FP8 weights"},
               {(void **)&b->w8t, wb, "FP8 weights"},
               {(void **)&b->q8, (size_t)b->opt.max_tokens * wide, "the FP8 operand"},
               {(void **)&b->f8_amax, (size_t)n * 4, "FP8 scaling"},
               {(void **)&b->f8_hist, (size_t)n * 4 * FP8_HISTORY, "FP8 scaling"},
               {(void **)&b->f8_scale, (size_t)n * 4, "FP8 scaling"},
               {(void **)&b->f8_inv, (size_t)n * 32, "FP8 scaling"},
               {(void **)&b->f8_fmt, (size_t)n, "FP8 scaling"},
               {(void **)&b->f8_items, (size_t)nw * sizeof(fp8_cast_item), "FP8 scaling"},
               {(void **)&b->f8_amax_d, (size_t)c->layers * 16, "FP8 scaling"}};
    for (size_t i = 0; i < sizeof buf / sizeof *buf; i++) {
        if (dev_alloc(buf[i].p, buf[i].bytes, buf[i].what, err))
            return err->code;
        b->f8_bytes += buf[i].bytes;
    }
    b->q8_bytes = (size_t)b->opt.max_tokens * wide;
    cudaCheck(cudaMemset(b->f8_amax_d, 0, (size_t)c->layers * 16));
    float *one = malloc((size_t)n * 32);
    uint8_t *fmt = malloc((size_t)n);
    fp8_cast_item *it = malloc((size_t)nw * sizeof *it);
    if (!one || !fmt || !it) {
        free(one);
        free(fmt);
        free(it);
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of host memory");
    }
    for (int l = 0; l < c->layers; l++)
        for (int k = 0; k < FP8_LINEARS; k++) {
            int in, out, i = l * FP8_SLOTS + FP8_LINEARS + k;
            fp8_dims(b, k, &in, &out);
            int64_t o = fp8_woff(b, l, k);
            it[l * FP8_LINEARS + k] = (fp8_cast_item){.out = b->w8 + o,
                                                      .out_t = b->w8t + o,
                                                      .ld_t = out,
                                                      .amax = b->f8_amax + i,
                                                      .in = (const bf16 *)W(fp8_wparam(b, l, k)),
                                                      .scale = b->f8_scale + i,
                                                      .rows = out,
                                                      .cols = in};
            invariantCheck(fp8_cast_item_ok(&it[l * FP8_LINEARS + k]), "FP8 weight cast of layer %d, Linear %d", l, k);
            int tiles = ((out + 127) / 128) * ((in + 127) / 128);
            b->f8_tiles = tiles > b->f8_tiles ? tiles : b->f8_tiles;
        }
    cudaCheck(cudaMemcpy(b->f8_items, it, (size_t)nw * sizeof *it, cudaMemcpyHostToDevice));
    free(it);
    for (int i = 0; i < 8 * n; i++)
        one[i] = 1.0f;
    for (int i = 0; i < n; i++)
        fmt[i] = i % FP8_SLOTS >= 2 * FP8_LINEARS ? FP8_E5M2 : FP8_E4M3;
    cudaCheck(cudaMemcpy(b->f8_scale, one, (size_t)n * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(b->f8_inv, one, (size_t)n * 32, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(b->f8_fmt, fmt, (size_t)n, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemset(b->f8_amax, 0, (size_t)n * 4));
    cudaCheck(cudaMemset(b->f8_hist, 0, (size_t)n * 4 * FP8_HISTORY));
    free(one);
    free(fmt);
    b->w8_stale = 1;
    return UNPAD_OK;
}

/* ---- buffers sized by the micro-batch's tokens -------------------------------------------------- */

/* The activation arena (laid out by layout_acts) and the pinned staging of the batch upload, for
 * opt.max_tokens tokens; frees what it had first, so a regrown arena never needs both at once. */
static int token_buffers_alloc(bert *b, unpad_err *err)
{
    const bert_options *o = &b->opt;
    cudaFree(b->arena);
    b->arena = NULL;
    if (b->h_stage)
        cudaFreeHost(b->h_stage);
    b->h_stage = NULL;
    b->arena_bytes = layout_acts(b, NULL);
    char what[200];
    snprintf(what, sizeof what, "the activations of a micro-batch of %d tokens, %d sequences (%.2f GiB with the "
             "parameters and optimizer)", o->max_tokens, o->max_seqs,
             (b->arena_bytes + (double)b->nparams * (4 * sizeof(float) + sizeof(floatX)) + b->f8_bytes) /
                 1073741824.0);
    if (dev_alloc(&b->arena, b->arena_bytes, what, err))
        return err->code;
    layout_acts(b, b->arena);
    b->stage_words = 2 * (size_t)o->max_tokens + 4 * (size_t)o->max_seqs + 1 + 3 * (size_t)o->max_preds;
    if (cudaMallocHost((void **)&b->h_stage, 2 * b->stage_words * 4) != cudaSuccess) {
        cudaGetLastError();
        b->h_stage = NULL;
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0,
                          "cannot allocate %.1f MiB of pinned host memory for the batch upload",
                          2.0 * b->stage_words * 4 / 1048576.0);
    }
    return UNPAD_OK;
}

/* Makes the token-sized buffers again for a micro-batch of T tokens: max(T, 1.25 x the capacity),
 * in steps of 256, at most opt.grow_tokens. Nothing in the arena outlives a micro-batch but the
 * loss sums, which are carried over; the FP8 operand buffer grows with it. */
static int arena_grow(bert *b, int T, unpad_err *err)
{
    long cap = (long)b->opt.max_tokens + b->opt.max_tokens / 4;
    cap = cap > T ? cap : T;
    cap = (cap + 255) / 256 * 256;
    if (cap > b->opt.grow_tokens)
        cap = b->opt.grow_tokens;
    float stats[BERT_STATS];
    cudaCheck(cudaDeviceSynchronize()); /* no kernel or copy may still use the old buffers */
    cudaCheck(cudaMemcpy(stats, b->stats, sizeof stats, cudaMemcpyDeviceToHost));
    b->opt.max_tokens = (int)cap;
    int rc = token_buffers_alloc(b, err);
    if (rc)
        return rc;
    cudaCheck(cudaMemcpy(b->stats, stats, sizeof stats, cudaMemcpyHostToDevice));
    if (b->q8) {
        size_t wide = 3 * (size_t)b->cfg.hidden > (size_t)b->cfg.ffn ? 3 * (size_t)b->cfg.hidden : (size_t)b->cfg.ffn;
        size_t old = b->q8_bytes;
        cudaFree(b->q8);
        b->q8 = NULL;
        b->q8_bytes = (size_t)cap * wide;
        if ((rc = dev_alloc((void **)&b->q8, b->q8_bytes, "the FP8 operand", err)))
            return rc;
        b->f8_bytes += b->q8_bytes - old;
    }
    b->grown++;
    return UNPAD_OK;
}

void bert_activations(const bert *b, long *tokens, int *grown)
{
    *tokens = b->opt.max_tokens;
    *grown = b->grown;
}

/* ---- create / free ----------------------------------------------------------------------------- */

bert *bert_create(const model_cfg *cfg, const bert_options *opt, unpad_err *err)
{
    if (cfg->hidden != cfg->heads * FMHA_HEAD_DIM || cfg->hidden % 64 || cfg->ffn % 64) {
        unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                   "model %s: hidden %d must be heads x %d and hidden, ffn multiples of 64", cfg->name,
                   cfg->hidden, FMHA_HEAD_DIM);
        return NULL;
    }
    if (opt->max_tokens < 1 || opt->max_seqs < 1 || opt->max_preds < 1) {
        unpad_fail(err, UNPAD_EINVAL, NULL, 0, "activation sizes must be positive");
        return NULL;
    }
    bert *b = calloc(1, sizeof *b);
    if (!b) {
        unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of host memory");
        return NULL;
    }
    const char *slow = getenv("UNPAD_HOST_SLOW_US");
    b->slow_us = slow && *slow ? atof(slow) : 0;
    b->cfg = *cfg;
    b->opt = *opt;
    b->Vpad = (cfg->vocab + 63) / 64 * 64;
    b->dropout_on = opt->dropout;
    b->lo = calloc((size_t)cfg->layers, sizeof *b->lo);
    b->la = calloc((size_t)cfg->layers, sizeof *b->la);
    b->x = calloc((size_t)cfg->layers + 1, sizeof *b->x);
    if (b->lo && b->la && b->x)
        build_table(b);
    if (!b->lo || !b->la || !b->x || b->table_oom) {
        unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of host memory for the parameter table");
        bert_free(b);
        return NULL;
    }
    /* the fused QKV GEMM reads query, key, value (and their biases) as one matrix */
    for (int l = 0; l < cfg->layers; l++) {
        int64_t H = cfg->hidden;
        const bert_tensor *t = b->tensors;
        int i = 5 + l * 16;
        if (t[i + 1].offset != t[i].offset + H * H || t[i + 2].offset != t[i].offset + 2 * H * H ||
            t[i + 4].offset != t[i + 3].offset + H || t[i + 5].offset != t[i + 3].offset + 2 * H) {
            unpad_fail(err, UNPAD_EINVAL, __FILE__, __LINE__, "query/key/value not contiguous");
            bert_free(b);
            return NULL;
        }
    }

    lamb_tensor *lt = calloc((size_t)b->ntensors, sizeof *lt);
    if (!lt) {
        unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of host memory for the LAMB tensor table");
        bert_free(b);
        return NULL;
    }
    for (int i = 0; i < b->ntensors; i++) {
        lt[i].offset = b->tensors[i].offset;
        lt[i].size = b->tensors[i].size;
        lt[i].weight_decay = b->tensors[i].weight_decay;
    }
    b->lamb_chunks = lamb_tensors_chunk(lt, b->ntensors);

    size_t N = (size_t)b->nparams;
    if (dev_alloc((void **)&b->master, N * 4, "fp32 master weights", err) ||
        dev_alloc((void **)&b->grad, N * 4, "fp32 gradients", err) ||
        dev_alloc((void **)&b->m, N * 4, "LAMB m", err) || dev_alloc((void **)&b->v, N * 4, "LAMB v", err) ||
        dev_alloc((void **)&b->work, N * sizeof(floatX), UNPAD_PRECISION " weights", err) ||
        dev_alloc((void **)&b->d_lamb, (size_t)b->ntensors * sizeof *lt, "tensor table", err)) {
        free(lt);
        bert_free(b);
        return NULL;
    }
    cudaCheck(cudaMemcpy(b->d_lamb, lt, (size_t)b->ntensors * sizeof *lt, cudaMemcpyHostToDevice));
    free(lt);

    const char *go = getenv("UNPAD_FP8_GELU_OUT"); /* before the layout: h's bytes depend on it */
    if (go && *go && strcmp(go, "0") && strcmp(go, "1")) {
        unpad_fail(err, UNPAD_EINVAL, NULL, 0, "UNPAD_FP8_GELU_OUT='%s': expected 0 or 1", go);
        bert_free(b);
        return NULL;
    }
    b->f8_gelu_out = opt->fp8 && !opt->gelu_erf && !(go && !strcmp(go, "0"));
    if (token_buffers_alloc(b, err)) {
        bert_free(b);
        return NULL;
    }
    b->h_cu = calloc((size_t)opt->max_seqs + 1, sizeof *b->h_cu);
    if (!b->h_cu) {
        unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of host memory");
        bert_free(b);
        return NULL;
    }
    cudaCheck(cudaEventCreateWithFlags(&b->ev_fork, cudaEventDisableTiming));
    for (int k = 0; k < BERT_MAX_STREAMS; k++)
        cudaCheck(cudaEventCreateWithFlags(&b->ev_join[k], cudaEventDisableTiming));
    if (cudaMallocHost((void **)&b->h_stats, BERT_STATS * sizeof *b->h_stats) != cudaSuccess) {
        cudaGetLastError();
        unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of pinned host memory");
        bert_free(b);
        return NULL;
    }
    for (int k = 0; k < 2; k++)
        cudaCheck(cudaEventCreateWithFlags(&b->ev_stage[k], cudaEventDisableTiming));
    b->gemm = gemm_ctx_create(1, err); /* the fp32 build's products are true fp32, never TF32 */
    if (!b->gemm || (opt->fp8 && fp8_create(b, err))) {
        bert_free(b);
        return NULL;
    }
    cudaCheck(cudaMemset(b->m, 0, N * 4));
    cudaCheck(cudaMemset(b->v, 0, N * 4));
    cudaCheck(cudaMemset(b->grad, 0, N * 4));
    cudaCheck(cudaMemset(b->stats, 0, BERT_STATS * 4));
    init_params(b, 0);
    cudaCheck(cudaDeviceSynchronize());
    return b;
}

void bert_free(bert *b)
{
    if (!b)
        return;
    cudaFree(b->master);
    cudaFree(b->grad);
    cudaFree(b->m);
    cudaFree(b->v);
    cudaFree(b->work);
    cudaFree(b->d_lamb);
    cudaFree(b->arena);
    cudaFree(b->w8);
    cudaFree(b->w8t);
    cudaFree(b->q8);
    cudaFree(b->f8_amax);
    cudaFree(b->f8_hist);
    cudaFree(b->f8_scale);
    cudaFree(b->f8_inv);
    cudaFree(b->f8_fmt);
    cudaFree(b->f8_items);
    cudaFree(b->f8_amax_d);
    if (b->h_stage)
        cudaFreeHost(b->h_stage);
    if (b->h_stats)
        cudaFreeHost(b->h_stats);
    gemm_ctx_free(b->gemm);
    for (int k = 0; k < BERT_MAX_STREAMS; k++) {
        if (b->side[k])
            cudaStreamDestroy(b->side[k]);
        if (b->ev_join[k])
            cudaEventDestroy(b->ev_join[k]);
    }
    if (b->ev_fork)
        cudaEventDestroy(b->ev_fork);
    for (int k = 0; k < 2; k++)
        if (b->ev_stage[k])
            cudaEventDestroy(b->ev_stage[k]);
    free(b->h_cu);
    free(b->tensors);
    free(b->lo);
    free(b->la);
    free(b->x);
    free(b);
}

const model_cfg *bert_cfg(const bert *b) { return &b->cfg; }
int bert_tensor_count(const bert *b) { return b->ntensors; }
const bert_tensor *bert_tensor_at(const bert *b, int i) { return &b->tensors[i]; }
int64_t bert_param_count(const bert *b) { return b->nparams; }
size_t bert_device_bytes(const bert *b)
{
    /* master, gradient, m, v (fp32) and the working copy, per parameter */
    return (size_t)b->nparams * (4 * sizeof(float) + sizeof(floatX)) + b->arena_bytes + b->f8_bytes;
}
float *bert_master(bert *b) { return b->master; }
float *bert_grad(bert *b) { return b->grad; }
floatX *bert_work(bert *b)
{
    b->w8_stale = 1; /* the caller may write the weights */
    return b->work;
}
/* The model's feature sizes: the GEMM dimensions that do not vary with the batch. */
#define GEMM_FIXED(b) {(b)->cfg.hidden, 3 * (b)->cfg.hidden, (b)->cfg.ffn, (b)->cfg.vocab, (b)->Vpad, 2}

int bert_gemm_warm(bert *b, int lo, int hi, cudaStream_t s, int *made, int *ran, unpad_err *err)
{
    const int fixed[] = GEMM_FIXED(b);
    return gemm_ctx_warm(b->gemm, lo, hi, fixed, (int)(sizeof fixed / sizeof *fixed), s, made, ran, err);
}

int bert_gemm_tune(bert *b, int lo, int hi, const gemm_tune_opts *o, cudaStream_t s, gemm_tune_stats *st,
                   unpad_err *err)
{
    const int fixed[] = GEMM_FIXED(b);
    return gemm_ctx_tune(b->gemm, lo, hi, fixed, (int)(sizeof fixed / sizeof *fixed), o, s, st, err);
}

gemm_ctx *bert_gemm(bert *b) { return b->gemm; }

void bert_fp8_counts(const bert *b, long *fp8, long *calib)
{
    *fp8 = b->f8_runs;
    *calib = b->f8_calib;
}

void bert_gemm_counts(const bert *b, int *plans, int *fallbacks, int *late, int *evicted)
{
    *late = gemm_ctx_late(b->gemm);
    *evicted = gemm_ctx_evicted(b->gemm);
    *plans = gemm_ctx_plans(b->gemm);
    *fallbacks = gemm_ctx_fallbacks(b->gemm);
}

void bert_set_dropout(bert *b, int on) { b->dropout_on = on && b->opt.dropout; }
float *bert_lamb_m(bert *b) { return b->m; }
float *bert_lamb_v(bert *b) { return b->v; }
void bert_set_hooks(bert *b, const bert_hooks *h)
{
    if (h)
        b->hooks = *h;
    else
        memset(&b->hooks, 0, sizeof b->hooks);
}

void bert_set_group_hooks(bert *b, const bert_group_hooks *h)
{
    if (h)
        b->ghooks = *h;
    else
        memset(&b->ghooks, 0, sizeof b->ghooks);
}

void bert_set_grads_ready(bert *b, bert_grads_ready_fn fn, void *ctx)
{
    b->grads_ready = fn;
    b->grads_ready_ctx = ctx;
}

int bert_set_fmha_groups(bert *b, const bert_fmha_groups *g, unpad_err *err)
{
    b->groups.ngroups = 0;
    if (!g || g->ngroups <= 1)
        return UNPAD_OK;
    if (g->ngroups > BERT_MAX_GROUPS)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "%d FMHA groups (at most %d)", g->ngroups,
                          BERT_MAX_GROUPS);
    int next = 0;
    for (int i = 0; i < g->ngroups; i++) {
        if (g->seq_begin[i] != next || g->seq_end[i] <= g->seq_begin[i] || g->seq_end[i] > b->n)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                              "FMHA group %d holds sequences [%d, %d): the groups must partition the "
                              "micro-batch's %d sequences in order",
                              i, g->seq_begin[i], g->seq_end[i], b->n);
        if (g->stream[i] < 0 || g->stream[i] >= BERT_MAX_STREAMS)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "FMHA group %d: stream %d (0..%d allowed)", i,
                              g->stream[i], BERT_MAX_STREAMS - 1);
        if (g->max_len[i] < 1 || g->max_len[i] > FMHA_MAX_LEN)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "FMHA group %d: max_len %d (1..%d allowed)", i,
                              g->max_len[i], FMHA_MAX_LEN);
        for (int q = g->seq_begin[i]; q < g->seq_end[i]; q++)
            if (b->h_cu[q + 1] - b->h_cu[q] > g->max_len[i])
                return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                                  "FMHA group %d: sequence %d has length %d > the group's max_len %d", i,
                                  q, b->h_cu[q + 1] - b->h_cu[q], g->max_len[i]);
        next = g->seq_end[i];
    }
    if (next != b->n)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "FMHA groups cover %d of %d sequences", next, b->n);
    for (int i = 0; i < g->ngroups; i++)
        if (g->stream[i] > 0 && !b->side[g->stream[i]])
            cudaCheck(cudaStreamCreateWithFlags(&b->side[g->stream[i]], cudaStreamNonBlocking));
    b->groups = *g;
    return UNPAD_OK;
}

void bert_sync_work(bert *b, cudaStream_t s)
{
    convert_f32_to_floatX(b->work, b->master, b->nparams, s);
    b->w8_stale = 1;
}

void bert_grad_zero(bert *b, cudaStream_t s)
{
    cudaCheck(cudaMemsetAsync(b->grad, 0, (size_t)b->nparams * 4, s));
}

void bert_grad_poison(bert *b, cudaStream_t s)
{
    cudaCheck(cudaMemsetAsync(b->grad, 0xff, (size_t)b->nparams * 4, s)); /* every float a NaN */
}

void bert_stats_reset(bert *b, cudaStream_t s) { cudaCheck(cudaMemsetAsync(b->stats, 0, 16, s)); }

float *bert_stats_sums(bert *b) { return b->stats; }

void bert_stats_read(bert *b, bert_stats *out, cudaStream_t s)
{
    /* one copy of the sums and the norm into pinned memory: the step's only synchronisation */
    cudaCheck(cudaMemcpyAsync(b->h_stats, b->stats, BERT_STATS * sizeof *b->h_stats, cudaMemcpyDeviceToHost, s));
    cudaCheck(cudaStreamSynchronize(s));
    out->mlm_loss_sum = b->h_stats[0];
    out->mlm_correct = b->h_stats[1];
    out->nsp_loss_sum = b->h_stats[2];
    out->nsp_correct = b->h_stats[3];
    out->grad_norm = b->h_stats[4];
}

void bert_force_nonfinite(bert *b, cudaStream_t s)
{
    /* all bits set is a NaN in fp32: the first gradient element and the MLM loss sum */
    cudaCheck(cudaMemsetAsync(b->grad, 0xff, sizeof(float), s));
    cudaCheck(cudaMemsetAsync(b->stats, 0xff, sizeof(float), s));
}

/* ---- batch ------------------------------------------------------------------------------------- */

static int batch_upload(bert *b, const bert_batch *mb, cudaStream_t s, unpad_err *err);
static void fp8_cast_weights(bert *b, cudaStream_t s);

int bert_batch_upload(bert *b, const bert_batch *mb, cudaStream_t s, unpad_err *err)
{
    double t0 = b->slow_us > 0 ? host_now_us() : 0;
    int rc = batch_upload(b, mb, s, err);
    if (b->slow_us > 0 && host_now_us() - t0 > b->slow_us)
        fprintf(stderr, "host: upload of %d sequences, %d tokens, %d predictions: %.0f us\n", mb->n, mb->T, mb->P,
                host_now_us() - t0);
    return rc;
}

static int batch_upload(bert *b, const bert_batch *mb, cudaStream_t s, unpad_err *err)
{
    if (mb->T > b->opt.max_tokens && mb->T <= b->opt.grow_tokens && mb->n >= 1 && mb->n <= b->opt.max_seqs) {
        int rc = arena_grow(b, mb->T, err);
        if (rc)
            return rc;
    }
    if (mb->n < 1 || mb->n > b->opt.max_seqs || mb->T > b->opt.max_tokens || mb->P > b->opt.max_preds ||
        mb->P < 0)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "micro-batch of %d sequences, %d tokens, %d predictions exceeds the sizes "
                          "allowed (%d, %d, %d)",
                          mb->n, mb->T, mb->P, b->opt.max_seqs,
                          b->opt.grow_tokens > b->opt.max_tokens ? b->opt.grow_tokens : b->opt.max_tokens,
                          b->opt.max_preds);
    if (mb->cu_seqlens[0] != 0 || mb->cu_seqlens[mb->n] != mb->T)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "cu_seqlens must run from 0 to T = %d", mb->T);
    int max_len = 0;
    for (int i = 0; i < mb->n; i++) {
        int len = mb->cu_seqlens[i + 1] - mb->cu_seqlens[i];
        if (len < 1 || len > b->cfg.max_position || len > FMHA_MAX_LEN)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "sequence %d has length %d (1..%d allowed)", i,
                              len, b->cfg.max_position < FMHA_MAX_LEN ? b->cfg.max_position : FMHA_MAX_LEN);
        if (len > max_len)
            max_len = len;
    }
    for (int i = 0; i < mb->T; i++)
        if (mb->ids[i] < 0 || mb->ids[i] >= b->cfg.vocab || mb->types[i] < 0 ||
            mb->types[i] >= b->cfg.type_vocab)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "token %d: id %d or segment %d out of range", i,
                              mb->ids[i], mb->types[i]);
    for (int i = 0; i < mb->P; i++)
        if (mb->mlm_rows[i] < 0 || mb->mlm_rows[i] >= mb->T || mb->mlm_labels[i] >= b->cfg.vocab)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "masked position %d: row %d, label %d out of range",
                              i, mb->mlm_rows[i], mb->mlm_labels[i]);
    /* Two staging halves: this upload waits only for the copies out of its half, two uploads ago,
     * so the host prepares micro-batch r (and plans its FMHA groups) while r - 1 computes. */
    cudaCheck(cudaEventSynchronize(b->ev_stage[b->stage_i]));
    int32_t *h = b->h_stage + (size_t)b->stage_i * b->stage_words;
    size_t o = 0;
#define STAGE(dst, src, cnt)                                                                        \
    do {                                                                                            \
        memcpy(h + o, (src), (size_t)(cnt) * 4);                                                    \
        cudaCheck(cudaMemcpyAsync((dst), h + o, (size_t)(cnt) * 4, cudaMemcpyHostToDevice, s));     \
        o += (size_t)(cnt);                                                                         \
    } while (0)
    STAGE(b->d_ids, mb->ids, mb->T);
    STAGE(b->d_types, mb->types, mb->T);
    STAGE(b->d_cu, mb->cu_seqlens, mb->n + 1);
    STAGE(b->d_mlm_rows, mb->mlm_rows, mb->P);
    STAGE(b->d_mlm_labels, mb->mlm_labels, mb->P);
    STAGE(b->d_nsp_labels, mb->nsp_labels, mb->n);
    STAGE(b->d_cls_rows, mb->cu_seqlens, mb->n); /* the first token of each sequence */
    int R = b->opt.last_heads && mb->P + mb->n < mb->T ? mb->P + mb->n : 0;
    if (R) { /* the heads' rows in the order the heads read them from the last layer's output */
        memcpy(h + o, mb->mlm_rows, (size_t)mb->P * 4);
        memcpy(h + o + mb->P, mb->cu_seqlens, (size_t)mb->n * 4);
        cudaCheck(cudaMemcpyAsync(b->d_head_rows, h + o, (size_t)R * 4, cudaMemcpyHostToDevice, s));
        o += (size_t)R;
    }
#undef STAGE
    cudaCheck(cudaEventRecord(b->ev_stage[b->stage_i], s));
    b->stage_i ^= 1;
    memcpy(b->h_cu, mb->cu_seqlens, ((size_t)mb->n + 1) * sizeof *b->h_cu);
    b->groups.ngroups = 0;
    b->n = mb->n;
    b->T = mb->T;
    b->P = mb->P;
    b->R = R;
    b->rows = mb->T;
    b->max_len = max_len;
    b->uploads++;
    return UNPAD_OK;
}

long bert_uploads(const bert *b) { return b->uploads; }

void bert_marks_get(const bert *b, bert_marks *m)
{
    m->passes = b->passes;
    m->f8_runs = b->f8_runs;
    m->f8_calib = b->f8_calib;
    m->f8_ready = b->f8_ready;
}

void bert_marks_undo(bert *b, const bert_marks *before, const bert_marks *after)
{
    b->passes -= after->passes - before->passes;
    b->f8_runs -= after->f8_runs - before->f8_runs;
    b->f8_calib -= after->f8_calib - before->f8_calib;
    if (after->f8_ready && !before->f8_ready)
        b->f8_ready = 0;
}

void bert_forward_prepare(bert *b, cudaStream_t s) { fp8_cast_weights(b, s); }

/* ---- forward ----------------------------------------------------------------------------------- */

static uint64_t drop_stream(int layer, int site) { return 1 + (uint64_t)layer * 4 + (uint64_t)site; }

/* ---- grouped attention ---------------------------------------------------------------------------
 * One launch over the micro-batch, or one per length group on the group's stream: side streams
 * wait for everything enqueued on s so far (the QKV projection), and s waits for every side stream
 * before the next operator. */

static cudaStream_t group_stream(bert *b, int g, cudaStream_t s)
{
    int k = b->groups.stream[g];
    return k == 0 ? s : b->side[k];
}

static void groups_fork(bert *b, cudaStream_t s)
{
    unsigned used = 0;
    cudaCheck(cudaEventRecord(b->ev_fork, s));
    for (int g = 0; g < b->groups.ngroups; g++) {
        int k = b->groups.stream[g];
        if (k > 0 && !(used >> k & 1)) {
            cudaCheck(cudaStreamWaitEvent(b->side[k], b->ev_fork, 0));
            used |= 1u << k;
        }
    }
}

static void groups_join(bert *b, cudaStream_t s)
{
    unsigned used = 0;
    for (int g = 0; g < b->groups.ngroups; g++) {
        int k = b->groups.stream[g];
        if (k > 0 && !(used >> k & 1)) {
            cudaCheck(cudaEventRecord(b->ev_join[k], b->side[k]));
            cudaCheck(cudaStreamWaitEvent(s, b->ev_join[k], 0));
            used |= 1u << k;
        }
    }
}

#define GBEGIN(op, layer, g, gs)                                                                   \
    do {                                                                                           \
        nvtxRangePushA(op_name((op_id)(op)));                                                      \
        if (b->ghooks.begin)                                                                       \
            b->ghooks.begin(b->ghooks.ctx, (op), (layer), (g), b->groups.stream[g],                \
                            b->groups.seq_begin[g], b->groups.seq_end[g], (gs));                   \
    } while (0)
#define GEND(op, layer, g, gs)                                                                     \
    do {                                                                                           \
        if (b->ghooks.end)                                                                         \
            b->ghooks.end(b->ghooks.ctx, (op), (layer), (g), (gs));                                \
        nvtxRangePop();                                                                            \
    } while (0)

static void attention_fwd(bert *b, int l, float pa, cudaStream_t s)
{
    layer_acts *a = &b->la[l];
    int NH = b->cfg.heads;
    if (b->groups.ngroups <= 1) {
        BEGIN(OP_FMHA_FWD, l);
        fmha_fwd(a->ctx, a->lse, a->qkv, b->d_cu, b->T, NH, 0, b->n, b->max_len, pa, b->dseed,
                 drop_stream(l, 0), s);
        END(OP_FMHA_FWD, l);
        return;
    }
    groups_fork(b, s);
    for (int g = 0; g < b->groups.ngroups; g++) {
        cudaStream_t gs = group_stream(b, g, s);
        GBEGIN(OP_FMHA_FWD, l, g, gs);
        fmha_fwd(a->ctx, a->lse, a->qkv, b->d_cu, b->T, NH, b->groups.seq_begin[g], b->groups.seq_end[g],
                 b->groups.max_len[g], pa, b->dseed, drop_stream(l, 0), gs);
        GEND(OP_FMHA_FWD, l, g, gs);
    }
    groups_join(b, s);
}

static void attention_bwd(bert *b, int l, float pa, cudaStream_t s)
{
    layer_acts *a = &b->la[l];
    int NH = b->cfg.heads;
    if (b->groups.ngroups <= 1) {
        BEGIN(OP_FMHA_BWD, l);
        fmha_bwd(b->dQKV, b->fmha_ws, b->dR, a->ctx, a->lse, a->qkv, b->d_cu, b->T, NH, 0, b->n, b->max_len,
                 pa, b->dseed, drop_stream(l, 0), s);
        END(OP_FMHA_BWD, l);
        return;
    }
    groups_fork(b, s);
    for (int g = 0; g < b->groups.ngroups; g++) {
        cudaStream_t gs = group_stream(b, g, s);
        GBEGIN(OP_FMHA_BWD, l, g, gs);
        /* groups share the workspace: each touches only its own tokens' rows */
        fmha_bwd(b->dQKV, b->fmha_ws, b->dR, a->ctx, a->lse, a->qkv, b->d_cu, b->T, NH,
                 b->groups.seq_begin[g], b->groups.seq_end[g], b->groups.max_len[g], pa, b->dseed,
                 drop_stream(l, 0), gs);
        GEND(OP_FMHA_BWD, l, g, gs);
    }
    groups_join(b, s);
}

static void grads_ready(bert *b, int64_t begin, int64_t end, cudaStream_t s)
{
    if (b->grads_ready && end > begin)
        b->grads_ready(b->grads_ready_ctx, begin, end, s);
}

/* ---- FP8 products ------------------------------------------------------------------------------ */

static const float *f8_inv(const bert *b, int i) { return b->f8_inv + 8 * (size_t)i; }
/* the scale of slot i, 16-byte aligned (a product's FP8 output) */
static const float *f8_scale16(const bert *b, int i) { return b->f8_inv + 8 * (size_t)i + 4; }

/* The encoder's Linear weights in E4M3, row-major and transposed, when the working copy changed. */
static void fp8_cast_weights(bert *b, cudaStream_t s)
{
    if (!b->opt.fp8 || !b->w8_stale)
        return;
    cast_transpose_fp8_batch(b->f8_items, b->cfg.layers * FP8_LINEARS, b->f8_tiles, FP8_E4M3, s);
    b->w8_stale = 0;
}

/* Once a step (init: after the first forward and backward, every history slot): the scales from
 * the maxima gathered since the last update. */
static void fp8_update(bert *b, int init, cudaStream_t s)
{
    fp8_scales_update(b->f8_amax, b->f8_hist, b->f8_scale, b->f8_inv, b->f8_fmt, b->f8_n, FP8_HISTORY, b->f8_pos,
                      init, s);
    if (!init)
        b->f8_pos = (b->f8_pos + 1) % FP8_HISTORY;
    b->w8_stale = 1;
}

/* Y (T, out) = X W^T (+ bias, + GELU with aux) of layer l's Linear k: the bf16 product, or with
 * opt.fp8 X cast to E4M3 into b->q8 (its maximum gathered; x8 != NULL: the kernel that wrote X left
 * its E4M3 copy there) and the FP8 product; while the scales are not known yet (the first forward)
 * the bf16 product follows it and its values count. */
static void linear_fwd(bert *b, int l, int k, const floatX *X, const floatX *bias, floatX *Y, floatX *aux, int gelu,
                       const uint8_t *x8, cudaStream_t s)
{
    int in, out, T = b->rows;
    fp8_dims(b, k, &in, &out);
    const floatX *Wb = W(fp8_wparam(b, l, k));
    if (!b->opt.fp8) {
        gemm_linear_fwd(b->gemm, GEMM_X, T, in, out, X, Wb, bias, Y, aux, gelu, s);
        return;
    }
    int xi = l * FP8_SLOTS + k, wi = xi + FP8_LINEARS;
    if (!x8)
        cast_fp8(b->q8, b->f8_amax + xi, (const bf16 *)X, b->f8_scale + xi, T, in, FP8_E4M3, s);
    gemm_linear_fwd_fp8(b->gemm, T, in, out, x8 ? x8 : b->q8, b->w8 + fp8_woff(b, l, k), f8_inv(b, xi), f8_inv(b, wi),
                        bias, Y, aux, gelu, s);
    if (!b->f8_ready)
        gemm_linear_fwd(b->gemm, GEMM_X, T, in, out, X, Wb, bias, Y, aux, gelu, s);
    b->f8_runs += b->f8_ready;
    b->f8_calib += !b->f8_ready;
}

/* dX (T, in) = dY W + beta dX of layer l's Linear k (aux: times gelu'(aux), bf16 products only),
 * in FP8 as linear_fwd: dY cast to E5M2 (unless cast: b->q8 holds it already), the weight's
 * transposed copy. While the scales are not known the FP8 twin writes scratch (b->tmp, free in the
 * backward, where beta is 1) and the bf16 product counts. */
static void linear_bwd_data(bert *b, int l, int k, const floatX *dY, floatX *dX, float beta, const floatX *aux,
                            int cast, cudaStream_t s)
{
    int in, out, T = b->rows;
    fp8_dims(b, k, &in, &out);
    const floatX *Wb = W(fp8_wparam(b, l, k));
    if (!b->opt.fp8) {
        gemm_linear_bwd_data(b->gemm, GEMM_X, T, in, out, dY, Wb, dX, beta, aux, NULL, s);
        return;
    }
    invariantCheck(!aux, "FP8 data gradients run their GELU derivative as a pass of their own");
    int gi = l * FP8_SLOTS + 2 * FP8_LINEARS + k, wi = l * FP8_SLOTS + FP8_LINEARS + k;
    if (!cast)
        cast_fp8(b->q8, b->f8_amax + gi, (const bf16 *)dY, b->f8_scale + gi, T, out, FP8_E5M2, s);
    const uint8_t *wt = b->w8t + fp8_woff(b, l, k);
    if (b->f8_ready) {
        gemm_linear_bwd_data_fp8(b->gemm, T, in, out, b->q8, wt, f8_inv(b, gi), f8_inv(b, wi), dX, beta, s);
        b->f8_runs++;
        return;
    }
    b->f8_calib++;
    gemm_linear_bwd_data_fp8(b->gemm, T, in, out, b->q8, wt, f8_inv(b, gi), f8_inv(b, wi), beta == 0.0f ? dX : b->tmp,
                             beta, s);
    gemm_linear_bwd_data(b->gemm, GEMM_X, T, in, out, dY, Wb, dX, beta, NULL, NULL, s);
}

/* The encoder's bias + dropout + residual + LayerNorm (site 1 after the attention, 2 after the FFN) of
 * the current micro-batch; slot >= 0: with the FP8 copy of the output (forward, E4M3) or of dx
 * (backward, E5M2) in b->q8, its maximum into FP8 slot `slot` (the next product's operand). */
static void ln_fwd(bert *b, floatX *out, floatX *ln_in, float *mean, float *rstd, const floatX *bias,
                   const floatX *residual, const floatX *gamma, const floatX *beta, float pd, int l, int site, int slot,
                   cudaStream_t s)
{
    int T = b->rows, H = b->cfg.hidden;
    float eps = (float)b->cfg.layernorm_eps;
    if (slot >= 0)
        bias_dropout_residual_layernorm_fwd_fp8(out, ln_in, mean, rstd, b->tmp, bias, residual, gamma, beta, T, H, eps,
                                                pd, b->dseed, drop_stream(l, site), b->q8, b->f8_amax + slot,
                                                b->f8_scale + slot, s);
    else
        bias_dropout_residual_layernorm_fwd(out, ln_in, mean, rstd, b->tmp, bias, residual, gamma, beta, T, H, eps,
                                            pd, b->dseed, drop_stream(l, site), s);
}

static void ln_bwd(bert *b, floatX *dx, floatX *dresid, float *dbias, float *dgamma, float *dbeta, const floatX *dout,
                   const floatX *ln_in, const float *mean, const float *rstd, const floatX *gamma, float pd, int l,
                   int site, int acc, int slot, cudaStream_t s)
{
    int T = b->rows, H = b->cfg.hidden;
    if (slot >= 0)
        bias_dropout_residual_layernorm_bwd_fp8(dx, dresid, dbias, dgamma, dbeta, dout, NULL, ln_in, mean, rstd, gamma,
                                                T, H, pd, b->dseed, drop_stream(l, site), b->scratch, acc, b->q8,
                                                b->f8_amax + slot, b->f8_scale + slot, s);
    else
        bias_dropout_residual_layernorm_bwd(dx, dresid, dbias, dgamma, dbeta, dout, NULL, ln_in, mean, rstd, gamma, T,
                                            H, pd, b->dseed, drop_stream(l, site), b->scratch, acc, s);
}

void bert_forward(bert *b, uint64_t dseed, cudaStream_t s)
{
    b->passes++;
    const model_cfg *c = &b->cfg;
    int T = b->T, H = c->hidden, F = c->ffn, L = c->layers, P = b->P, n = b->n;
    float eps = (float)c->layernorm_eps;
    float pd = b->dropout_on ? (float)c->hidden_dropout : 0.0f;
    float pa = b->dropout_on ? (float)c->attn_dropout : 0.0f;
    gemm_ctx *g = b->gemm;
    b->dseed = dseed;
    fp8_cast_weights(b, s);

    BEGIN(OP_EMBED_FWD, -1);
    embedding_fwd(b->x[0], b->emb_mean, b->emb_rstd, b->d_ids, b->d_types, b->d_cu, n, W(b->word),
                  W(b->pos), W(b->type), W(b->emb_g), W(b->emb_b), T, H, eps, pd, dseed, 0, s);
    END(OP_EMBED_FWD, -1);
    for (int l = 0; l < L; l++) {
        const layer_offsets *o = &b->lo[l];
        layer_acts *a = &b->la[l];
        BEGIN(OP_QKV_FWD, l);
        linear_fwd(b, l, FP8_QKV, b->x[l], W(o->qkv_b), a->qkv, NULL, 0, l > 0 && b->opt.fp8 ? b->q8 : NULL, s);
        END(OP_QKV_FWD, l);
        attention_fwd(b, l, pa, s);
        /* the last layer on the heads' rows: from here on R rows, gathered from the attention's
         * output and the layer's input (its residual) */
        int last = b->R && l == L - 1;
        const floatX *ctx = last ? b->g_ctx : a->ctx, *resid = last ? b->g_x : b->x[l];
        BEGIN(OP_ATTN_OUT_FWD, l);
        if (last) {
            rows_gather(b->g_ctx, a->ctx, b->d_head_rows, b->R, H, s);
            rows_gather(b->g_x, b->x[l], b->d_head_rows, b->R, H, s);
            b->rows = b->R;
        }
        int Tl = b->rows;
        linear_fwd(b, l, FP8_O, ctx, NULL, b->tmp, NULL, 0, NULL, s);
        END(OP_ATTN_OUT_FWD, l);
        BEGIN(OP_ATTN_LN_FWD, l);
        /* with FP8, the E4M3 copy of its output: FFN1's operand */
        ln_fwd(b, a->a, a->ln1_in, a->ln1_mean, a->ln1_rstd, W(o->o_b), resid, W(o->ln1_g), W(o->ln1_b), pd, l, 1,
               b->opt.fp8 ? l * FP8_SLOTS + FP8_F1 : -1, s);
        END(OP_ATTN_LN_FWD, l);
        BEGIN(OP_FFN1_FWD, l);
        if (b->opt.gelu_erf) {
            linear_fwd(b, l, FP8_F1, a->a, NULL, a->pre, NULL, 0, b->opt.fp8 ? b->q8 : NULL, s);
            bias_gelu_fwd(a->h, a->pre, W(o->f1_b), Tl, F, s);
        } else if (!b->f8_gelu_out) {
            linear_fwd(b, l, FP8_F1, a->a, W(o->f1_b), a->h, a->pre, 1, b->opt.fp8 ? b->q8 : NULL, s);
        } else { /* FP8, its E4M3 output into h (while calibrating, the bf16 product after it, its h in dF,
                  * free until the backward) */
            int xi = l * FP8_SLOTS + FP8_F1;
            gemm_linear_fwd_fp8_out(g, Tl, H, F, b->q8, b->w8 + fp8_woff(b, l, FP8_F1), f8_inv(b, xi),
                                    f8_inv(b, xi + FP8_LINEARS), W(o->f1_b), (uint8_t *)a->h, a->pre, 1,
                                    f8_scale16(b, l * FP8_SLOTS + FP8_F2), b->f8_amax_d + 4 * l, s);
            if (b->f8_ready)
                b->f8_runs++;
            else
                linear_fwd(b, l, FP8_F1, a->a, W(o->f1_b), b->dF, a->pre, 1, b->q8, s);
        }
        END(OP_FFN1_FWD, l);
        BEGIN(OP_FFN2_FWD, l);
        if (!b->f8_gelu_out)
            linear_fwd(b, l, FP8_F2, a->h, NULL, b->tmp, NULL, 0, NULL, s);
        else
            linear_fwd(b, l, FP8_F2, b->dF, NULL, b->tmp, NULL, 0, b->f8_ready ? (const uint8_t *)a->h : NULL, s);
        END(OP_FFN2_FWD, l);
        BEGIN(OP_FFN_LN_FWD, l);
        /* with FP8 (but the last layer's), the E4M3 copy of its output: the next QKV's operand */
        ln_fwd(b, b->x[l + 1], a->ln2_in, a->ln2_mean, a->ln2_rstd, W(o->f2_b), a->a, W(o->ln2_g), W(o->ln2_b), pd, l,
               2, b->opt.fp8 && l + 1 < L ? (l + 1) * FP8_SLOTS + FP8_QKV : -1, s);
        END(OP_FFN_LN_FWD, l);
        b->rows = T;
    }

    /* the heads' input rows: gathered from the encoder's output, or (the last layer on the heads'
     * rows) its first P and next n rows */
    const floatX *m_in = b->R ? b->x[L] : b->m_in, *c_in = b->R ? b->x[L] + (size_t)P * H : b->c_in;
    BEGIN(OP_MLM_HEAD_FWD, -1);
    if (P > 0) {
        if (!b->R)
            rows_gather(b->m_in, b->x[L], b->d_mlm_rows, P, H, s);
        if (b->opt.gelu_erf) {
            gemm_linear_fwd(g, GEMM_X, P, H, H, m_in, W(b->t_w), NULL, b->m_pre, NULL, 0, s);
            bias_gelu_fwd(b->m_h, b->m_pre, W(b->t_b), P, H, s);
        } else {
            gemm_linear_fwd(g, GEMM_X, P, H, H, m_in, W(b->t_w), W(b->t_b), b->m_h, b->m_pre, 1, s);
        }
        layernorm_fwd(b->m_out, b->m_mean, b->m_rstd, b->m_h, W(b->mln_g), W(b->mln_b), P, H, eps, s);
        gemm_linear_fwd(g, GEMM_X, P, H, b->Vpad, b->m_out, W(b->word), W(b->dec_b), b->logits, NULL, 0, s);
    }
    END(OP_MLM_HEAD_FWD, -1);
    BEGIN(OP_NSP_HEAD_FWD, -1);
    if (!b->R)
        rows_gather(b->c_in, b->x[L], b->d_cls_rows, n, H, s);
    gemm_linear_fwd(g, GEMM_X, n, H, H, c_in, W(b->pool_w), NULL, b->p_pre, NULL, 0, s);
    bias_tanh_fwd(b->pooled, b->p_pre, W(b->pool_b), n, H, s);
    gemm_linear_fwd(g, GEMM_X, n, H, 2, b->pooled, W(b->nsp_w), W(b->nsp_b), b->nsp_logits, NULL, 0, s);
    END(OP_NSP_HEAD_FWD, -1);
    BEGIN(OP_LOSS_FWD, -1);
    if (P > 0) {
        mlm_xent_fwd(b->m_loss, b->m_lse, b->logits, b->d_mlm_labels, P, c->vocab, b->Vpad, s);
        mlm_correct(b->m_correct, b->logits, b->d_mlm_labels, P, c->vocab, b->Vpad, s);
    }
    nsp_xent_fwd_bwd(b->nsp_loss, NULL, b->nsp_logits, b->d_nsp_labels, 1.0f, n, s);
    nsp_correct(b->nsp_correct, b->nsp_logits, b->d_nsp_labels, n, s);
    stats_accumulate(b->stats, b->m_loss, b->m_correct, P, b->nsp_loss, b->nsp_correct, n, s);
    END(OP_LOSS_FWD, -1);
}

/* ---- backward ---------------------------------------------------------------------------------- */

/* dst[head row i] += src[i] over the R heads' rows: in two calls, the masked positions' and the
 * first tokens', each of distinct rows */
static void heads_scatter_add(bert *b, floatX *dst, const floatX *src, cudaStream_t s)
{
    int H = b->cfg.hidden;
    rows_scatter_add(dst, src, b->d_head_rows, b->P, H, s);
    rows_scatter_add(dst, src + (size_t)b->P * H, b->d_head_rows + b->P, b->n, H, s);
}

/* The gradients the MLM head's backward writes when it has predictions: the word embedding (the
 * tied decoder; the embedding's backward then adds its rows), and the decoder bias, transform
 * dense and LayerNorm, which lie back to back in the table. */
static void mlm_head_grads_zero(bert *b, cudaStream_t s)
{
    cudaCheck(cudaMemsetAsync(G(b->word), 0, (size_t)b->Vpad * b->cfg.hidden * sizeof(float), s));
    cudaCheck(cudaMemsetAsync(G(b->dec_b), 0, (size_t)(b->mln_b + b->cfg.hidden - b->dec_b) * sizeof(float), s));
}

void bert_backward(bert *b, float mlm_scale, float nsp_scale, int accumulate, cudaStream_t s)
{
    const model_cfg *c = &b->cfg;
    int T = b->T, H = c->hidden, F = c->ffn, L = c->layers, P = b->P, n = b->n;
    int V = b->Vpad;
    float pd = b->dropout_on ? (float)c->hidden_dropout : 0.0f;
    float pa = b->dropout_on ? (float)c->attn_dropout : 0.0f;
    uint64_t dseed = b->dseed;
    gemm_ctx *g = b->gemm;
    /* the first micro-batch of a step writes the parameter gradients, later ones add to them */
    const int acc = accumulate;
    const float wb = accumulate ? 1.0f : 0.0f; /* beta of the weight-gradient products */
    /* the last layer on the heads' rows: the heads read its output's first P and next n rows, and
     * their input gradients are those rows of dY; else gathered rows, scattered into dY */
    const floatX *m_in = b->R ? b->x[L] : b->m_in, *c_in = b->R ? b->x[L] + (size_t)P * H : b->c_in;
    floatX *m_dx = b->R ? b->dY : b->dm1, *c_dx = b->R ? b->dY + (size_t)P * H : b->dc2;

    BEGIN(OP_LOSS_BWD, -1);
    if (P > 0)
        mlm_xent_bwd(b->logits, b->logits, b->m_lse, b->d_mlm_labels, mlm_scale, P, c->vocab, V, s);
    nsp_xent_fwd_bwd(b->nsp_loss, b->nsp_dlogits, b->nsp_logits, b->d_nsp_labels, nsp_scale, n, s);
    END(OP_LOSS_BWD, -1);

    BEGIN(OP_NSP_HEAD_BWD, -1);
    gemm_linear_bwd_weight(g, GEMM_X, n, H, 2, b->nsp_dlogits, b->pooled, G(b->nsp_w), wb, s);
    bias_bwd(G(b->nsp_b), b->nsp_dlogits, n, 2, b->scratch, acc, s);
    gemm_linear_bwd_data(g, GEMM_X, n, H, 2, b->nsp_dlogits, W(b->nsp_w), b->dc1, 0.0f, NULL, NULL, s);
    bias_tanh_bwd(b->dc1, G(b->pool_b), b->dc1, b->pooled, n, H, b->scratch, acc, s);
    gemm_linear_bwd_weight(g, GEMM_X, n, H, H, b->dc1, c_in, G(b->pool_w), wb, s);
    gemm_linear_bwd_data(g, GEMM_X, n, H, H, b->dc1, W(b->pool_w), c_dx, 0.0f, NULL, NULL, s);
    END(OP_NSP_HEAD_BWD, -1);

    BEGIN(OP_MLM_HEAD_BWD, -1);
    if (P > 0) {
        /* the decoder's weight is the word embedding: this product writes (or adds to) the whole
         * (Vpad, H) gradient, and the embedding's backward adds its rows to it */
        gemm_linear_bwd_weight(g, GEMM_X, P, H, V, b->logits, b->m_out, G(b->word), wb, s);
        bias_bwd(G(b->dec_b), b->logits, P, V, b->scratch, acc, s);
        gemm_linear_bwd_data(g, GEMM_X, P, H, V, b->logits, W(b->word), b->dm1, 0.0f, NULL, NULL, s);
        layernorm_bwd(b->dm2, G(b->mln_g), G(b->mln_b), b->dm1, b->m_h, b->m_mean, b->m_rstd, W(b->mln_g),
                      P, H, b->scratch, acc, s);
        if (b->opt.gelu_erf) {
            bias_gelu_bwd(b->dm2, G(b->t_b), b->dm2, b->m_pre, W(b->t_b), P, H, b->scratch, acc, s);
        } else {
            gelu_tanh_bwd(b->dm2, b->dm2, b->m_pre, (int64_t)P * H, s);
            bias_bwd(G(b->t_b), b->dm2, P, H, b->scratch, acc, s);
        }
        gemm_linear_bwd_weight(g, GEMM_X, P, H, H, b->dm2, m_in, G(b->t_w), wb, s);
        gemm_linear_bwd_data(g, GEMM_X, P, H, H, b->dm2, W(b->t_w), m_dx, 0.0f, NULL, NULL, s);
    } else if (!accumulate) {
        /* no predictions: nothing wrote the MLM head's gradients (the word embedding's included) */
        mlm_head_grads_zero(b, s);
    }
    if (!b->R) {
        cudaCheck(cudaMemsetAsync(b->dY, 0, (size_t)T * H * sizeof(floatX), s));
        if (P > 0)
            rows_scatter_add(b->dY, b->dm1, b->d_mlm_rows, P, H, s);
        rows_scatter_add(b->dY, b->dc2, b->d_cls_rows, n, H, s);
    }
    END(OP_MLM_HEAD_BWD, -1);
    grads_ready(b, b->pool_w, b->nparams, s); /* pooler, MLM transform, decoder bias, NSP */

    for (int l = L - 1; l >= 0; l--) {
        const layer_offsets *o = &b->lo[l];
        layer_acts *a = &b->la[l];
        int last = b->R && l == L - 1;
        if (last)
            b->rows = b->R;
        int Tl = b->rows;
        /* dY: gradient of the layer's output x[l + 1] */
        BEGIN(OP_FFN_LN_BWD, l);
        /* with FP8, the E5M2 copy of dA: FFN2's data-gradient operand */
        ln_bwd(b, b->dA, b->dR, G(o->f2_b), G(o->ln2_g), G(o->ln2_b), b->dY, a->ln2_in, a->ln2_mean, a->ln2_rstd,
               W(o->ln2_g), pd, l, 2, acc, b->opt.fp8 ? l * FP8_SLOTS + 2 * FP8_LINEARS + FP8_F2 : -1, s);
        END(OP_FFN_LN_BWD, l);
        /* With FFN1's output kept only in E4M3, FFN2's weight gradient waits for the GELU pass that
         * writes h again, over pre: traced under ffn1_bwd. */
        int h_later = b->f8_gelu_out;
        BEGIN(OP_FFN2_BWD, l);
        if (!h_later)
            gemm_linear_bwd_weight(g, GEMM_X, Tl, F, H, b->dA, a->h, G(o->f2_w), wb, s);
        /* the tanh GELU's derivative: the product's epilogue in bf16, a pass of its own in FP8 (whose
         * DGELU epilogue runs 3x slower than the bf16 one, docs/kernels.md) */
        linear_bwd_data(b, l, FP8_F2, b->dA, b->dF, 0.0f, b->opt.gelu_erf || b->opt.fp8 ? NULL : a->pre, b->opt.fp8,
                        s);
        END(OP_FFN2_BWD, l);
        BEGIN(OP_FFN1_BWD, l);
        int f1_cast = 0; /* b->q8 holds dF in E5M2 (FP8, tanh GELU: made by the GELU's backward) */
        if (b->opt.gelu_erf) {
            bias_gelu_bwd(b->dF, G(o->f1_b), b->dF, a->pre, W(o->f1_b), Tl, F, b->scratch, acc, s);
        } else if (b->opt.fp8) {
            int gi = l * FP8_SLOTS + 2 * FP8_LINEARS + FP8_F1;
            bias_gelu_tanh_bwd(b->dF, G(o->f1_b), b->q8, b->f8_amax + gi, b->f8_scale + gi, h_later ? a->pre : NULL,
                               b->dF, a->pre, Tl, F, b->scratch, acc, s);
            f1_cast = 1;
            if (h_later)
                gemm_linear_bwd_weight(g, GEMM_X, Tl, F, H, b->dA, a->pre, G(o->f2_w), wb, s);
        } else {
            bias_bwd(G(o->f1_b), b->dF, Tl, F, b->scratch, acc, s);
        }
        gemm_linear_bwd_weight(g, GEMM_X, Tl, H, F, b->dF, a->a, G(o->f1_w), wb, s);
        linear_bwd_data(b, l, FP8_F1, b->dF, b->dR, 1.0f, NULL, f1_cast, s);
        END(OP_FFN1_BWD, l);
        /* dR: gradient of a (residual + FFN input) */
        BEGIN(OP_ATTN_LN_BWD, l);
        /* with FP8, the E5M2 copy of dA: the attention output's data-gradient operand */
        ln_bwd(b, b->dA, last ? b->g_x : b->dY, G(o->o_b), G(o->ln1_g), G(o->ln1_b), b->dR, a->ln1_in, a->ln1_mean,
               a->ln1_rstd, W(o->ln1_g), pd, l, 1, acc, b->opt.fp8 ? l * FP8_SLOTS + 2 * FP8_LINEARS + FP8_O : -1, s);
        END(OP_ATTN_LN_BWD, l);
        BEGIN(OP_ATTN_OUT_BWD, l);
        gemm_linear_bwd_weight(g, GEMM_X, Tl, H, H, b->dA, last ? b->g_ctx : a->ctx, G(o->o_w), wb, s);
        linear_bwd_data(b, l, FP8_O, b->dA, last ? b->g_d : b->dR, 0.0f, NULL, b->opt.fp8, s);
        if (last) { /* the gradients of the attention's output and of the layer's input, every row */
            cudaCheck(cudaMemsetAsync(b->dR, 0, (size_t)T * H * sizeof(floatX), s));
            cudaCheck(cudaMemsetAsync(b->dY, 0, (size_t)T * H * sizeof(floatX), s));
            heads_scatter_add(b, b->dR, b->g_d, s);
            heads_scatter_add(b, b->dY, b->g_x, s);
            b->rows = T;
        }
        END(OP_ATTN_OUT_BWD, l);
        attention_bwd(b, l, pa, s);
        BEGIN(OP_QKV_BWD, l);
        gemm_linear_bwd_weight(g, GEMM_X, T, H, 3 * H, b->dQKV, b->x[l], G(o->qkv_w), wb, s);
        /* the query and value biases' gradients (the key bias's is zero), and with FP8 dQKV's E5M2
         * copy in the same read */
        int gi = l * FP8_SLOTS + 2 * FP8_LINEARS + FP8_QKV;
        bias_bwd_qkv(G(o->qkv_b), b->opt.fp8 ? b->q8 : NULL, b->opt.fp8 ? b->f8_amax + gi : NULL,
                     b->opt.fp8 ? b->f8_scale + gi : NULL, b->dQKV, T, H, b->scratch, acc, s);
        linear_bwd_data(b, l, FP8_QKV, b->dQKV, b->dY, 1.0f, NULL, b->opt.fp8, s);
        END(OP_QKV_BWD, l);
        /* layer l's tensors: from its QKV weight to the next layer's (or the pooler) */
        grads_ready(b, o->qkv_w, l + 1 < L ? b->lo[l + 1].qkv_w : b->pool_w, s);
    }
    BEGIN(OP_EMBED_BWD, -1);
    if (!accumulate) /* the position and type tables, gamma and beta: embedding_bwd adds */
        cudaCheck(cudaMemsetAsync(G(b->pos), 0, (size_t)(b->emb_b + c->hidden - b->pos) * sizeof(float), s));
    embedding_bwd(G(b->word), G(b->pos), G(b->type), G(b->emb_g), G(b->emb_b), b->dY, NULL, b->d_ids,
                  b->d_types, b->d_cu, n, b->max_len, W(b->word), W(b->pos), W(b->type), W(b->emb_g),
                  b->emb_mean, b->emb_rstd, T, H, c->type_vocab, pd, dseed, 0, b->scratch, s);
    END(OP_EMBED_BWD, -1);
    grads_ready(b, 0, b->lo[0].qkv_w, s); /* embeddings, with the tied decoder's share */
    if (b->f8_gelu_out) /* the maxima of FFN1's E4M3 outputs */
        fp8_amax_fold(b->f8_amax, FP8_SLOTS, FP8_F2, b->f8_amax_d, 4, L, s);
    if (b->opt.fp8 && !b->f8_ready) { /* the first maxima: every product from now on in FP8 */
        fp8_update(b, 1, s);
        b->f8_ready = 1;
    }
}

/* ---- optimizer --------------------------------------------------------------------------------- */

void bert_lamb_step(bert *b, const bert_lamb_hparams *hp, cudaStream_t s)
{
    lamb_hparams h = {.lr = (float)hp->lr, .beta1 = (float)hp->beta1, .beta2 = (float)hp->beta2,
                      .eps = (float)hp->eps, .weight_decay = (float)hp->weight_decay,
                      .max_grad_norm = (float)hp->max_grad_norm, .step = hp->step};
    /* the norm lands beside the loss sums (one read-back); a non-finite loss sum skips the step */
    lamb_update(b->master, b->work, b->m, b->v, b->grad, b->d_lamb, b->ntensors, b->lamb_chunks, h,
                b->stats + 4, b->stats, 4, b->scratch, s);
    if (b->opt.fp8 && b->f8_ready)
        fp8_update(b, 0, s); /* also marks the weights for their cast before the next forward */
}
