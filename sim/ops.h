/* ops.h — the operators of one BERT training step (the shared vocabulary of sim and exec) and their
 * analytic FLOP and byte counts for one GPU's batch of sequence lengths.
 *
 * Bytes are what must cross device memory: inputs read once, outputs written once. A fused variant
 * keeps its intermediates on chip (bias+dropout+residual+LayerNorm in one pass, GELU in the GEMM
 * epilogue, flash-style attention, dropout masks regenerated from a seed); the unfused variant
 * writes every intermediate back and reads it again. */
#ifndef UNPAD_OPS_H
#define UNPAD_OPS_H

#include "model.h"

typedef enum {
    OP_EMBED_FWD,    /* word + position + type gather, sum, LayerNorm */
    OP_QKV_FWD,      /* QKV projection GEMM + bias */
    OP_FMHA_FWD,     /* fused multi-head attention */
    OP_ATTN_OUT_FWD, /* attention output projection GEMM + bias */
    OP_ATTN_LN_FWD,  /* dropout + residual + LayerNorm after attention */
    OP_FFN1_FWD,     /* FFN1 GEMM + bias + GELU */
    OP_FFN2_FWD,     /* FFN2 GEMM + bias */
    OP_FFN_LN_FWD,   /* dropout + residual + LayerNorm after the FFN */
    OP_MLM_HEAD_FWD, /* gather masked rows, transform (dense+GELU+LN), decoder over the vocabulary */
    OP_NSP_HEAD_FWD, /* pooler (dense+tanh on the first token) + 2-way classifier */
    OP_LOSS_FWD,     /* MLM softmax cross-entropy + NSP loss */
    OP_LOSS_BWD,
    OP_NSP_HEAD_BWD,
    OP_MLM_HEAD_BWD,
    OP_FFN_LN_BWD,
    OP_FFN2_BWD,
    OP_FFN1_BWD,
    OP_ATTN_LN_BWD,
    OP_ATTN_OUT_BWD,
    OP_FMHA_BWD,
    OP_QKV_BWD,
    OP_EMBED_BWD,
    OP_LAMB,         /* optimizer step over all parameters */
    OP_ALLREDUCE,    /* gradient all-reduce across GPUs */
    OP_EXCHANGE,     /* balanced sample exchange across GPUs */
    OP_COUNT
} op_id;

/* Operator classes of the data-movement report. */
typedef enum {
    OPC_GEMM,     /* tensor contractions: GEMMs */
    OPC_ATTN,     /* tensor contractions: attention */
    OPC_NORM,     /* statistical normalizations: LayerNorm, softmax/loss */
    OPC_ELEM,     /* element-wise: gathers, bias, dropout, residual */
    OPC_OPTIM,    /* optimizer */
    OPC_COMM,     /* collectives */
    OPC_COUNT
} op_class;

const char *op_name(op_id op);            /* "qkv_fwd", ... as in trace rows */
int op_from_name(const char *name);       /* op_id, or -1 */
op_class op_class_of(op_id op);
const char *op_class_name(op_class c);    /* "gemm", "attention", "normalization", ... */
int op_is_per_layer(op_id op);            /* 1 for encoder-layer operators */

/* One GPU's batch as the cost model sees it. */
typedef struct {
    const int *len;   /* (n) sequence lengths */
    int n;
    int padded;       /* 1: every sequence padded to pad_len (attention over the padding too) */
    int pad_len;
    int fused;        /* 1: fused kernels; 0: every intermediate through memory */
    int gpus;         /* data-parallel GPUs (all-reduce and exchange); 1: none */
    int dropout;      /* 1: training with dropout (masks cost bytes when unfused) */
    int last_heads;   /* 1: the last layer after its attention on the heads' rows (ops_shape) */
} op_batch;

/* Operator counts of one step on one GPU. */
typedef struct {
    op_id op;
    int instances;        /* times per step: the layer count for encoder operators, else 1 */
    int launches;         /* kernel launches per instance */
    double flops;         /* per instance */
    double tensor_flops;  /* the part of flops on tensor cores (GEMMs, attention matmuls) */
    double bytes;         /* per instance, of the chosen variant */
    double bytes_fused, bytes_unfused; /* per instance, both variants */
    double rows;          /* GEMM M (tokens or predictions) for size-dependent efficiency */
    double width;         /* the model's hidden size (width-dependent efficiency) */
    long seqs, tokens;    /* batch description, for traces */
    double sum_len2;
    int max_len;
} op_cost;

/* One GPU's batch as counts: everything an operator's FLOPs and bytes depend on. Unpadded, the
 * token and attention fields are the same sums of the lengths; a layout (layout.h) sets them apart:
 * padded layouts run GEMMs and attention on padded lengths, packed rows run GEMMs on rows x max_len
 * tokens but attention on each sequence's own length. */
typedef struct {
    double seqs;         /* n: sequences (NSP rows; the exchange's per-sample records) */
    double tokens;       /* T: rows of the GEMMs, LayerNorms and the embedding, padding included */
    double attn_tokens;  /* tokens the attention reads and writes (sum of attention lengths) */
    double sum_len2;     /* S2: sum of squared attention lengths */
    double preds;        /* P: masked predictions (of the real tokens) */
    double real_tokens;  /* tokens before any padding: what the sample exchange moves */
    int max_len;         /* longest attention length (trace rows) */
    /* The last layer after its attention (output projection, FFN, both LayerNorms) on head_rows
     * rows only, when last_heads is 1: the rows the heads read (the masked positions and each
     * sequence's first token, P + n), as unpad-train computes it by default. Those operators'
     * counts are then the mean over the layers, (L - 1) x T + head_rows over L rows an instance. */
    int last_heads;
    double head_rows;
} ops_shape;

/* Fills out[0..OP_COUNT) from a shape (counts may be any non-negative values: the counts are
 * affine in them, which the step model, step.h, relies on). gpus: data-parallel GPUs for the
 * all-reduce and exchange volumes. */
void ops_count(const model_cfg *m, const ops_shape *s, int fused, int gpus, int dropout,
               op_cost out[OP_COUNT]);

/* The encoder operators the last layer runs on the heads' rows only (ops_shape.last_heads). */
int ops_on_head_rows(op_id op);

/* The heads' rows of a batch: P + n, at most its T (unpad-train computes the whole layer when the
 * heads would read every row). */
double ops_head_rows(double tokens, double preds, double seqs);

/* Masked positions of a sequence of length len: 15% rounded half to even (as unpad-data and
 * BERT's create_pretraining_data do), at least 1, at most max_pred. */
int ops_predictions(int len, int max_pred);

/* Fills out[0..OP_COUNT) for one training step. Returns UNPAD_EINVAL on an empty or bad batch. */
int ops_step(const model_cfg *m, const op_batch *b, op_cost out[OP_COUNT], unpad_err *err);

/* Model FLOPs of one step over the batch (useful work only: unpadded tokens), for TFLOP/s. */
double ops_model_flops(const model_cfg *m, const int *len, int n);

#endif
