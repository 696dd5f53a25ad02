/* memory.c — the trainer's device memory, piece by piece as exec/gpu/bert.c allocates it (memory.h).
 * The sizes of the kernels' scratch buffers mirror the kernels' *_scratch_bytes functions;
 * tests/check_memory.c holds the totals against what unpad-train printed on the H200. */
#include "memory.h"

#include <math.h>
#include <stdio.h>

#define GIB 1073741824.0
#define GEMM_WORKSPACE (32.0 * 1048576)   /* exec/gpu/gemm.h GEMM_WORKSPACE_BYTES */
#define ROW_BLOCKS 264                    /* LayerNorm and embedding backward blocks (2 per SM) */
#define COLSUM_BLOCKS 528                 /* kernels.h UNPAD_COLSUM_BLOCKS */
#define LAMB_CHUNK 16384                  /* kernels.h UNPAD_LAMB_CHUNK */
#define EMB_THREADS 256                   /* kernels/embedding.cu */
#define EMB_MAX_TYPES 4
#define FMHA_DQ_LD 64                     /* kernels/fmha.cu DQ_LD: floats per dQ accumulator row */
#define FP8_HISTORY 16                    /* kernels.h FP8_HISTORY: maxima kept per scaled tensor */
#define FP8_SLOTS 12                      /* scaled tensors per layer: 4 inputs, 4 weights, 4 gradients */
#define FP8_CAST_ITEM 56                  /* sizeof(fp8_cast_item), kernels.h: one per Linear weight */

/* The trainer's parameter table (bert.c build_table): each tensor at a multiple of 64 elements. */
typedef struct {
    long next;     /* next free element */
    long chunks;   /* LAMB chunks */
    int tensors;
} table;

static void tensor(table *t, long rows, long cols)
{
    long off = (t->next + 63) / 64 * 64, size = rows * cols;
    t->next = off + size;
    long c = (size + LAMB_CHUNK - 1) / LAMB_CHUNK;
    t->chunks += c > 0 ? c : 1;
    t->tensors++;
}

static void build_table(const model_cfg *m, table *t)
{
    long H = m->hidden, F = m->ffn, V = (m->vocab + 63) / 64 * 64;
    *t = (table){0};
    tensor(t, V, H);
    tensor(t, m->max_position, H);
    tensor(t, m->type_vocab, H);
    tensor(t, H, 1);
    tensor(t, H, 1);
    for (int l = 0; l < m->layers; l++) {
        for (int k = 0; k < 3; k++) /* query, key, value */
            tensor(t, H, H);
        for (int k = 0; k < 3; k++)
            tensor(t, H, 1);
        tensor(t, H, H); /* attention output dense, bias, LayerNorm */
        tensor(t, H, 1);
        tensor(t, H, 1);
        tensor(t, H, 1);
        tensor(t, F, H); /* intermediate */
        tensor(t, F, 1);
        tensor(t, H, F); /* output dense, bias, LayerNorm */
        tensor(t, H, 1);
        tensor(t, H, 1);
        tensor(t, H, 1);
    }
    tensor(t, H, H); /* pooler */
    tensor(t, H, 1);
    tensor(t, V, 1); /* decoder bias */
    tensor(t, H, H); /* MLM transform, its LayerNorm */
    tensor(t, H, 1);
    tensor(t, H, 1);
    tensor(t, H, 1);
    tensor(t, 2, H); /* NSP */
    tensor(t, 2, 1);
}

/* The activation arena (bert.c layout_acts): pieces aligned to 256 bytes. */
static double carve(double off, double bytes)
{
    return (double)(((long long)off + 255) / 256 * 256) + bytes;
}

static double arena_bytes(const model_cfg *m, const memory_setup *s, long lamb_chunks)
{
    double T = (double)s->tokens, P = (double)s->preds, N = (double)s->seqs;
    double H = m->hidden, F = m->ffn, NH = m->heads, L = m->layers, V = (m->vocab + 63) / 64 * 64;
    double X = s->fp32 ? 4 : 2, a = 0;
    for (int l = 0; l <= L; l++)
        a = carve(a, T * H * X);
    a = carve(a, T * 4);
    a = carve(a, T * 4);
    for (int l = 0; l < L; l++) {
        double per[] = {T * 3 * H * X, T * H * X, NH * T * 4, T * H * X, T * 4, T * 4, T * H * X,
                        T * F * X,     T * F * (s->fp8 == MEMORY_FP8_ON ? 1 : X),
                        T * H * X,     T * 4,     T * 4};
        for (size_t k = 0; k < sizeof per / sizeof per[0]; k++)
            a = carve(a, per[k]);
    }
    double grads[] = {T * H * X, T * H * X, T * H * X, T * H * X, T * F * X, T * 3 * H * X};
    for (size_t k = 0; k < sizeof grads / sizeof grads[0]; k++)
        a = carve(a, grads[k]);
    /* fmha_bwd_workspace_bytes: the bf16 kernels' dQ accumulator (NH, T, FMHA_DQ_LD) and D (NH, T) */
    a = carve(a, (s->fp32 ? 0 : T * NH * FMHA_DQ_LD * 4) + NH * T * 4);
    /* the largest kernel scratch: LayerNorm, bias backward over the widest, embedding, LAMB */
    double widest = V > F ? V : F;
    widest = 3 * H > widest ? 3 * H : widest;
    int nvec = m->hidden / 8, rw = nvec <= 32 ? 1 : nvec <= 64 ? 2 : nvec <= 128 ? 4 : 8;
    double groups = (double)ROW_BLOCKS * (EMB_THREADS / (32 * rw));
    double sc = 3.0 * ROW_BLOCKS * H * 4, bias = COLSUM_BLOCKS * widest * 4;
    double emb = ((2 + EMB_MAX_TYPES) * ROW_BLOCKS * H + groups * 2 * H) * 4 + T * (16 + 8);
    double lamb = (2 + 3.0 * lamb_chunks) * 4;
    sc = bias > sc ? bias : sc;
    sc = emb > sc ? emb : sc;
    sc = lamb > sc ? lamb : sc;
    a = carve(a, sc);
    for (int k = 0; k < 4; k++) /* MLM head */
        a = carve(a, P * H * X);
    a = carve(a, P * 4);
    a = carve(a, P * 4);
    a = carve(a, P * V * X);
    for (int k = 0; k < 3; k++)
        a = carve(a, P * 4);
    a = carve(a, P * H * X);
    a = carve(a, P * H * X);
    for (int k = 0; k < 3; k++) /* NSP head */
        a = carve(a, N * H * X);
    a = carve(a, N * 2 * X);
    a = carve(a, N * 2 * X);
    a = carve(a, N * 4);
    a = carve(a, N * 4);
    a = carve(a, N * H * X);
    a = carve(a, N * H * X);
    a = carve(a, 16);
    double batch[] = {T * 4, T * 4, (N + 1) * 4, P * 4, P * 4, N * 4, N * 4};
    for (size_t k = 0; k < sizeof batch / sizeof batch[0]; k++)
        a = carve(a, batch[k]);
    if (s->last_heads) { /* the last layer on the heads' rows: three (P + n, H) buffers, their rows */
        for (int k = 0; k < 3; k++)
            a = carve(a, (P + N) * H * X);
        a = carve(a, (P + N) * 4);
    }
    return a;
}

long memory_arena_tokens(int n, int max_len, double mean, double sd)
{
    double most = (double)n * max_len, t = n * mean + 5 * sqrt((double)n) * sd;
    t = ceil(t / 256) * 256;
    return (long)(t < most ? t : most);
}

long memory_dist_tokens(int n, int lo, int hi, const unpad_dist *d)
{
    double c = 0, s1 = 0, s2 = 0;
    for (int l = 1; l <= d->max_len; l++) {
        double x = l < lo ? lo : l > hi ? hi : l;
        c += d->count[l];
        s1 += d->count[l] * x;
        s2 += d->count[l] * x * x;
    }
    /* no micro-batch is longer than n x its longest length: the distribution's, clamped */
    int top = d->max_len < hi ? d->max_len : hi;
    top = top > lo ? top : lo;
    double mean = c > 0 ? s1 / c : top, var = c > 0 ? s2 / c - mean * mean : 0;
    return memory_arena_tokens(n, top, mean, var > 0 ? sqrt(var) : 0);
}

void memory_trainer_setup(const model_cfg *m, int batch, long tokens, int seq_cap, int nccl, memory_setup *out)
{
    if (seq_cap < batch)
        seq_cap = batch;
    *out = (memory_setup){.tokens = tokens, .seqs = seq_cap,
                          .preds = (long)batch * m->max_predictions + (seq_cap - batch), .nccl = nccl};
}

/* bert.c fp8_create: two E4M3 copies of the four Linear weights of each layer (as is and
 * transposed), the operand buffer, and per scaled tensor its maximum (4 B), history (16 x 4 B), scale
 * (4 B), inverse slot (32 B) and format (1 B); the weight casts' table; 16 B a layer of maxima of
 * the products' own E4M3 outputs. */
static double fp8_bytes(const model_cfg *m, const memory_setup *s)
{
    if (s->fp8 == MEMORY_FP8_OFF)
        return 0;
    double H = m->hidden, F = m->ffn, L = m->layers, wide = 3 * H > F ? 3 * H : F;
    double weights = L * (3 * H * H + H * H + F * H + H * F);
    double scaled = L * FP8_SLOTS * (4 + 4 * FP8_HISTORY + 4 + 32 + 1);
    return 2 * weights + (double)s->tokens * wide + scaled + L * 4 * FP8_CAST_ITEM + L * 16;
}

void memory_predict(const model_cfg *m, const hw_spec *hw, const memory_setup *s, memory_use *out)
{
    table t;
    build_table(m, &t);
    double N = (double)t.next, X = s->fp32 ? 4 : 2;
    out->params = t.next;
    out->master_gib = N * 4 / GIB;
    out->work_gib = N * X / GIB;
    out->grad_gib = N * 4 / GIB;
    out->optim_gib = 2 * N * 4 / GIB;
    out->acts_gib = arena_bytes(m, s, t.chunks) / GIB;
    out->fp8_gib = fp8_bytes(m, s) / GIB;
    /* cuBLASLt's workspace, the LAMB tensor table, the sample exchange's small buffers */
    out->workspace_gib = (GEMM_WORKSPACE + t.tensors * 32.0 + 8.0 * s->seqs * 4) / GIB;
    out->context_gib = hw->context_gib + (s->nccl ? hw->nccl_gib : 0);
    out->trainer_gib =
        out->master_gib + out->work_gib + out->grad_gib + out->optim_gib + out->acts_gib + out->fp8_gib;
    out->total_gib = out->trainer_gib + out->workspace_gib + out->context_gib;
}

int memory_tight(const memory_use *u, const hw_spec *hw)
{
    return u->total_gib <= hw->memory_gib && u->total_gib > (1 - MEMORY_TIGHT) * hw->memory_gib;
}

int memory_fits(const memory_use *u, const hw_spec *hw, char *why, size_t n)
{
    int ok = u->total_gib <= hw->memory_gib;
    if (why)
        snprintf(why, n, "needs %.1f GiB of %.1f GiB (%s)", u->total_gib, hw->memory_gib, hw->name);
    return ok;
}
