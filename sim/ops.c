/* ops.c — the operator table and the analytic FLOP/byte counts of one training step.
 *
 * Notation (per GPU): T tokens processed (unpadded: sum of lengths; padded: n x pad_len),
 * S2 = sum of len^2 (attention), P masked predictions, n sequences, H hidden, F FFN size,
 * NH heads, V vocabulary padded to 64. A GEMM Y(T,N) = X(T,K) W(N,K)^T costs 2TKN FLOPs forward
 * and 4TKN backward (dX and dW). bf16 activations and weights (2 bytes), fp32 gradients of weights
 * (accumulated: read + write, 8 bytes), fp32 LayerNorm statistics. */
#include "ops.h"

#include <math.h>
#include <string.h>

static const struct { const char *name; op_class cls; int per_layer; } OPS[OP_COUNT] = {
    [OP_EMBED_FWD] = {"embed_fwd", OPC_ELEM, 0},
    [OP_QKV_FWD] = {"qkv_fwd", OPC_GEMM, 1},
    [OP_FMHA_FWD] = {"fmha_fwd", OPC_ATTN, 1},
    [OP_ATTN_OUT_FWD] = {"attn_out_fwd", OPC_GEMM, 1},
    [OP_ATTN_LN_FWD] = {"attn_ln_fwd", OPC_NORM, 1},
    [OP_FFN1_FWD] = {"ffn1_fwd", OPC_GEMM, 1},
    [OP_FFN2_FWD] = {"ffn2_fwd", OPC_GEMM, 1},
    [OP_FFN_LN_FWD] = {"ffn_ln_fwd", OPC_NORM, 1},
    [OP_MLM_HEAD_FWD] = {"mlm_head_fwd", OPC_GEMM, 0},
    [OP_NSP_HEAD_FWD] = {"nsp_head_fwd", OPC_GEMM, 0},
    [OP_LOSS_FWD] = {"loss_fwd", OPC_NORM, 0},
    [OP_LOSS_BWD] = {"loss_bwd", OPC_NORM, 0},
    [OP_NSP_HEAD_BWD] = {"nsp_head_bwd", OPC_GEMM, 0},
    [OP_MLM_HEAD_BWD] = {"mlm_head_bwd", OPC_GEMM, 0},
    [OP_FFN_LN_BWD] = {"ffn_ln_bwd", OPC_NORM, 1},
    [OP_FFN2_BWD] = {"ffn2_bwd", OPC_GEMM, 1},
    [OP_FFN1_BWD] = {"ffn1_bwd", OPC_GEMM, 1},
    [OP_ATTN_LN_BWD] = {"attn_ln_bwd", OPC_NORM, 1},
    [OP_ATTN_OUT_BWD] = {"attn_out_bwd", OPC_GEMM, 1},
    [OP_FMHA_BWD] = {"fmha_bwd", OPC_ATTN, 1},
    [OP_QKV_BWD] = {"qkv_bwd", OPC_GEMM, 1},
    [OP_EMBED_BWD] = {"embed_bwd", OPC_ELEM, 0},
    [OP_LAMB] = {"lamb", OPC_OPTIM, 0},
    [OP_ALLREDUCE] = {"allreduce", OPC_COMM, 0},
    [OP_EXCHANGE] = {"exchange", OPC_COMM, 0},
};

static const char *CLASS_NAMES[OPC_COUNT] = {
    [OPC_GEMM] = "gemm", [OPC_ATTN] = "attention", [OPC_NORM] = "normalization",
    [OPC_ELEM] = "elementwise", [OPC_OPTIM] = "optimizer", [OPC_COMM] = "communication",
};

const char *op_name(op_id op) { return op >= 0 && op < OP_COUNT ? OPS[op].name : "?"; }
op_class op_class_of(op_id op) { return OPS[op].cls; }
const char *op_class_name(op_class c) { return c >= 0 && c < OPC_COUNT ? CLASS_NAMES[c] : "?"; }
int op_is_per_layer(op_id op) { return OPS[op].per_layer; }

int op_from_name(const char *name)
{
    for (int i = 0; i < OP_COUNT; i++)
        if (!strcmp(OPS[i].name, name))
            return i;
    return -1;
}

int ops_predictions(int len, int max_pred)
{
    int p = (int)lrint(0.15 * len); /* round half to even, as BERT's Python and unpad-data do */
    if (p < 1)
        p = 1;
    return p < max_pred ? p : max_pred;
}

int ops_on_head_rows(op_id op)
{
    switch (op) {
    case OP_ATTN_OUT_FWD: case OP_ATTN_LN_FWD: case OP_FFN1_FWD: case OP_FFN2_FWD: case OP_FFN_LN_FWD:
    case OP_FFN_LN_BWD: case OP_FFN2_BWD: case OP_FFN1_BWD: case OP_ATTN_LN_BWD: case OP_ATTN_OUT_BWD:
        return 1;
    default:
        return 0;
    }
}

double ops_head_rows(double tokens, double preds, double seqs)
{
    return preds + seqs < tokens ? preds + seqs : tokens;
}

static void set(op_cost *o, int launches, double flops, double tensor, double fused,
                double unfused, double rows)
{
    o->launches = launches;
    o->flops = flops;
    o->tensor_flops = tensor;
    o->bytes_fused = fused;
    o->bytes_unfused = unfused;
    o->rows = rows;
}

/* A linear layer Y(M,N) = X(M,K) W(N,K)^T + b: forward and backward counts. */
static void linear_fwd(op_cost *o, double M, double K, double N)
{
    double gemm = 2 * M * K * N;
    double io = M * K * 2 + N * K * 2 + M * N * 2 + N * 2;
    set(o, 1, gemm + M * N, gemm, io, io + 2 * M * N * 2, M);
    o->launches = 1;
}

static void linear_bwd(op_cost *o, double M, double K, double N)
{
    double gemm = 4 * M * K * N;
    /* dY read by both GEMMs, W and X read, dX written, dW and db accumulated in fp32. */
    double io = 2 * M * N * 2 + N * K * 2 + M * K * 2 + M * K * 2 + N * K * 8 + N * 8;
    set(o, 2, gemm + M * N, gemm, io, io + M * N * 2, M);
}

int ops_step(const model_cfg *m, const op_batch *b, op_cost out[OP_COUNT], unpad_err *err)
{
    if (!b || b->n <= 0 || !b->len)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "empty batch");
    if (b->padded && b->pad_len <= 0)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "padded batch needs pad_len > 0");
    ops_shape sh = {.seqs = b->n};
    for (int i = 0; i < b->n; i++) {
        int l = b->len[i];
        if (l < 1 || l > m->max_len || (b->padded && l > b->pad_len))
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                              "sequence %d has length %d (expected 1..%d)", i, l,
                              b->padded && b->pad_len < m->max_len ? b->pad_len : m->max_len);
        int eff = b->padded ? b->pad_len : l;
        sh.tokens += eff;
        sh.sum_len2 += (double)eff * eff;
        sh.preds += ops_predictions(l, m->max_predictions);
        sh.real_tokens += l;
        if (eff > sh.max_len)
            sh.max_len = eff;
    }
    sh.attn_tokens = sh.tokens;
    sh.last_heads = b->last_heads;
    sh.head_rows = ops_head_rows(sh.tokens, sh.preds, sh.seqs);
    ops_count(m, &sh, b->fused, b->gpus, b->dropout, out);
    return UNPAD_OK;
}

void ops_count(const model_cfg *m, const ops_shape *sh, int fused, int gpus, int dropout,
               op_cost out[OP_COUNT])
{
    double T = sh->tokens, TA = sh->attn_tokens, S2 = sh->sum_len2, P = sh->preds, n = sh->seqs;
    double H = m->hidden, F = m->ffn, NH = m->heads, V = m->vocab_pad;
    /* rows an instance of the operators after the attention: T, or the mean over the layers when
     * the last one runs on the heads' rows (affine in T, P and n, as the step model needs) */
    double L = m->layers > 0 ? m->layers : 1;
    double TL = sh->last_heads ? ((L - 1) * T + sh->head_rows) / L : T;
    double drop = dropout ? 1 : 0;
    memset(out, 0, sizeof(op_cost) * OP_COUNT);
    for (int i = 0; i < OP_COUNT; i++) {
        out[i].op = (op_id)i;
        out[i].instances = OPS[i].per_layer ? m->layers : 1;
        out[i].seqs = (long)llround(n);
        out[i].tokens = (long)llround(T);
        out[i].sum_len2 = S2;
        out[i].max_len = sh->max_len;
        out[i].width = m->hidden;
    }
    /* Embedding: three gathers, sum, LayerNorm. Unfused: the sum goes through memory. */
    set(&out[OP_EMBED_FWD], 1, 8 * T * H, 0, T * (12 + 8 * H + 8), T * (12 + 12 * H + 8), T);
    out[OP_EMBED_FWD].launches = 1;
    set(&out[OP_EMBED_BWD], 2, 8 * T * H, 0,
        T * H * 2 * 3 + T * H * 8 + 2.0 * (m->max_position + m->type_vocab) * H * 8 + T * 8,
        T * H * 2 * 5 + T * H * 8 + 2.0 * (m->max_position + m->type_vocab) * H * 8 + T * 8, T);

    linear_fwd(&out[OP_QKV_FWD], T, H, 3 * H);
    linear_bwd(&out[OP_QKV_BWD], T, H, 3 * H);
    linear_fwd(&out[OP_ATTN_OUT_FWD], TL, H, H);
    linear_bwd(&out[OP_ATTN_OUT_BWD], TL, H, H);
    linear_fwd(&out[OP_FFN2_FWD], TL, F, H);
    linear_bwd(&out[OP_FFN2_BWD], TL, F, H);

    /* FFN1 with GELU in the epilogue: the pre-activation is kept (aux) for backward. */
    {
        double gemm = 2 * TL * H * F;
        double io = TL * H * 2 + F * H * 2 + F * 2 + 2 * TL * F * 2;
        set(&out[OP_FFN1_FWD], 1, gemm + 8 * TL * F, gemm, io, io + 2 * TL * F * 2, TL);
        out[OP_FFN1_FWD].launches = 1;
        linear_bwd(&out[OP_FFN1_BWD], TL, H, F);
        /* dGELU: read the pre-activation in the epilogue; unfused, a separate pass. */
        out[OP_FFN1_BWD].flops += 8 * TL * F;
        out[OP_FFN1_BWD].bytes_fused += TL * F * 2;
        out[OP_FFN1_BWD].bytes_unfused += TL * F * 2 + 3 * TL * F * 2;
    }

    /* Attention: 2 matmuls forward (QK^T, PV), 5 backward (recomputed QK^T, dP, dV, dQ, dK). */
    {
        double mm = 4 * S2 * H;
        double soft = 5 * NH * S2;
        double fwd_io = TA * 3 * H * 2 + TA * H * 2 + NH * TA * 4;
        /* Unfused: scores written, softmax read+write, mask written and applied, P read by PV. */
        double mat_f = NH * S2 * (2 + 2 * 2 + 2) + drop * NH * S2 * (1 + 2 * 2);
        set(&out[OP_FMHA_FWD], 1, mm + soft, mm, fwd_io, fwd_io + mat_f, TA);
        out[OP_FMHA_FWD].launches = 1;
        double bwd_io = TA * 3 * H * 2 + 2 * TA * H * 2 + 2 * NH * TA * 4 + TA * 3 * H * 2 + TA * H * 4 * 2;
        double mat_b = NH * S2 * (2 * 2 + 2 * 2 + 2 * 2) + drop * NH * S2;
        set(&out[OP_FMHA_BWD], 3, 2.5 * mm + 2 * soft, 2.5 * mm, bwd_io, bwd_io + mat_b, TA);
    }

    /* Dropout + residual + LayerNorm (the bias is in the GEMM epilogue). */
    {
        double ff = TL * H * 2 * 3 + TL * 8;
        double fu = TL * H * (2 + 2 + 2 + 2 + 2 + 2 + 2) + drop * TL * H * 1 * 2 + TL * 8;
        set(&out[OP_ATTN_LN_FWD], 1, 10 * TL * H, 0, ff, fu, TL);
        out[OP_ATTN_LN_FWD].launches = 1;
        double bf = TL * H * 2 * 4 + TL * 8;
        double bu = TL * H * 2 * 8 + drop * TL * H + TL * 8;
        set(&out[OP_ATTN_LN_BWD], 2, 12 * TL * H, 0, bf, bu, TL);
        out[OP_FFN_LN_FWD] = out[OP_ATTN_LN_FWD];
        out[OP_FFN_LN_FWD].op = OP_FFN_LN_FWD;
        out[OP_FFN_LN_BWD] = out[OP_ATTN_LN_BWD];
        out[OP_FFN_LN_BWD].op = OP_FFN_LN_BWD;
        if (!fused) {
            out[OP_ATTN_LN_FWD].launches = out[OP_FFN_LN_FWD].launches = 3;
            out[OP_ATTN_LN_BWD].launches = out[OP_FFN_LN_BWD].launches = 4;
        }
    }

    /* MLM head on the P masked rows only: gather, dense + GELU, LayerNorm, decoder over V. */
    {
        double tensor = 2 * P * H * H + 2 * P * H * V;
        double ff = P * H * 2 * 2 + H * H * 2 + P * H * 2 * 2 + P * H * 2 * 2 + V * H * 2 + V * 2 +
                    P * V * 2;
        double fu = ff + 2 * P * H * 2 + 2 * P * V * 2;
        set(&out[OP_MLM_HEAD_FWD], 4, tensor + 20 * P * H, tensor, ff, fu, P);
        double bt = 4 * P * H * V + 4 * P * H * H;
        double bfused = 2 * P * V * 2 + V * H * 2 + V * H * 8 + P * H * 2 * 6 + H * H * 2 + H * H * 8 +
                        P * H * 2 * 2;
        set(&out[OP_MLM_HEAD_BWD], 6, bt + 20 * P * H, bt, bfused, bfused + 2 * P * H * 2 * 2, P);
    }
    /* NSP: pooler (dense + tanh) on each sequence's first token, 2-way classifier. */
    {
        double t = 2 * n * H * H + 2 * n * H * 2;
        double io = H * H * 2 + n * H * 2 * 2 + 2 * H * 2;
        set(&out[OP_NSP_HEAD_FWD], 2, t + 4 * n * H, t, io, io + n * H * 2 * 2, n);
        set(&out[OP_NSP_HEAD_BWD], 3, 2 * t, 2 * t, 2 * io + H * H * 8, 2 * io + H * H * 8 + n * H * 4, n);
    }
    /* Loss: softmax cross-entropy over the vocabulary. Fused, the forward kernel also writes the
     * logits' gradient (read once); unfused, probabilities go through memory. */
    set(&out[OP_LOSS_FWD], 1, 5 * P * V, 0, P * V * 2 + P * 8, P * V * 2 + P * V * 2 + P * 8, P);
    set(&out[OP_LOSS_BWD], 1, 3 * P * V, 0, P * V * 2, P * V * 2 * 2, P);

    /* LAMB over all parameters: fused two-phase kernel (update and norms, then trust-ratio apply)
     * reads g, m, v, p and writes m, v, p and the bf16 copy. Unfused adds a gradient-norm pass and
     * an update tensor through memory, and launches per tensor. */
    {
        double np = (double)model_param_count(m);
        int tensors = 5 + 12 * m->layers + 9;
        set(&out[OP_LAMB], 3, 20 * np, 0, np * 42, np * 54, np);
        if (!fused)
            out[OP_LAMB].launches = 4 * tensors;
        double g = gpus > 1 ? (double)gpus : 1;
        /* fp32 gradients; ring all-reduce moves 2(N-1)/N of them through each GPU's link. */
        set(&out[OP_ALLREDUCE], gpus > 1 ? 1 : 0, (g - 1) / g * np, 0,
            gpus > 1 ? 2 * (g - 1) / g * np * 4 : 0, gpus > 1 ? 2 * (g - 1) / g * np * 4 : 0, np);
        /* Exchange: token, segment and position ids (12 B/token) and predictions (8 B) move to
         * their GPU; on average (N-1)/N of them come from another rank. */
        double ex = gpus > 1 ? (g - 1) / g * (sh->real_tokens * 12 + P * 8 + n * 8) : 0;
        set(&out[OP_EXCHANGE], gpus > 1 ? 1 : 0, 0, 0, ex, ex, n);
    }
    if (!fused) {
        out[OP_EMBED_FWD].launches = 2;
        out[OP_QKV_FWD].launches = out[OP_ATTN_OUT_FWD].launches = out[OP_FFN2_FWD].launches = 2;
        out[OP_FFN1_FWD].launches = 2;
        out[OP_FFN1_BWD].launches = 3;
        out[OP_FMHA_FWD].launches = 4;
        out[OP_FMHA_BWD].launches = 6;
        out[OP_MLM_HEAD_FWD].launches = 6;
        out[OP_LOSS_FWD].launches = out[OP_LOSS_BWD].launches = 2;
    }
    for (int i = 0; i < OP_COUNT; i++)
        out[i].bytes = fused ? out[i].bytes_fused : out[i].bytes_unfused;
}

double ops_model_flops(const model_cfg *m, const int *len, int n)
{
    op_batch b = {.len = len, .n = n, .fused = 1, .gpus = 1, .dropout = 1};
    op_cost c[OP_COUNT];
    if (ops_step(m, &b, c, NULL))
        return 0;
    double f = 0;
    for (int i = 0; i < OP_COUNT; i++)
        if (i != OP_LAMB && i != OP_ALLREDUCE && i != OP_EXCHANGE)
            f += c[i].instances * c[i].tensor_flops;
    return f;
}
