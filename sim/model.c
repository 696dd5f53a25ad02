/* model.c — schemas and loaders for model configs and hardware specs. */
#include "model.h"

#include <stddef.h>
#include <string.h>

#define MF(k, t, f, lo, hi, req, h) {k, t, offsetof(model_cfg, f), lo, hi, req, h}
const cfg_field model_schema[] = {
    MF("name", CFG_NAME, name, 0, 0, CFG_REQUIRED, "model name"),
    MF("layers", CFG_INT, layers, 1, 256, CFG_REQUIRED, "encoder layers"),
    MF("hidden", CFG_INT, hidden, 64, 16384, CFG_REQUIRED, "hidden size, a multiple of 64"),
    MF("heads", CFG_INT, heads, 1, 256, CFG_REQUIRED, "attention heads (hidden / heads = 64)"),
    MF("ffn", CFG_INT, ffn, 64, 65536, CFG_REQUIRED, "FFN intermediate size"),
    MF("vocab", CFG_INT, vocab, 8, 1000000, CFG_REQUIRED, "vocabulary size"),
    MF("max_position", CFG_INT, max_position, 1, 8192, CFG_REQUIRED, "position embeddings"),
    MF("type_vocab", CFG_INT, type_vocab, 1, 16, CFG_OPTIONAL, "token types"),
    MF("max_len", CFG_INT, max_len, 1, 8192, CFG_OPTIONAL, "longest sequence trained"),
    MF("max_predictions", CFG_INT, max_predictions, 1, 8192, CFG_OPTIONAL, "masked positions per sequence"),
    MF("hidden_dropout", CFG_DOUBLE, hidden_dropout, 0, 0.99, CFG_OPTIONAL, "dropout after projections"),
    MF("attn_dropout", CFG_DOUBLE, attn_dropout, 0, 0.99, CFG_OPTIONAL, "dropout on attention probabilities"),
    MF("layernorm_eps", CFG_DOUBLE, layernorm_eps, 1e-12, 1e-2, CFG_OPTIONAL, "LayerNorm epsilon"),
    MF("init_range", CFG_DOUBLE, init_range, 1e-6, 1, CFG_OPTIONAL, "initialisation std"),
};
const size_t model_schema_len = sizeof model_schema / sizeof model_schema[0];

#define HF(k, t, f, lo, hi, req, h) {k, t, offsetof(hw_spec, f), lo, hi, req, h}
const cfg_field hw_schema[] = {
    HF("name", CFG_NAME, name, 0, 0, CFG_REQUIRED, "GPU name"),
    HF("peak_bf16_tflops", CFG_DOUBLE, peak_bf16_tflops, 1, 100000, CFG_REQUIRED, "dense bf16 tensor TFLOP/s"),
    HF("peak_tf32_tflops", CFG_DOUBLE, peak_tf32_tflops, 1, 100000, CFG_REQUIRED, "dense tf32 tensor TFLOP/s"),
    HF("peak_fp32_tflops", CFG_DOUBLE, peak_fp32_tflops, 0.1, 100000, CFG_REQUIRED, "fp32 FMA TFLOP/s"),
    HF("mem_bw_gbs", CFG_DOUBLE, mem_bw_gbs, 1, 1e6, CFG_REQUIRED, "memory bandwidth GB/s"),
    HF("memory_gib", CFG_DOUBLE, memory_gib, 0.1, 1e5, CFG_REQUIRED,
       "device memory a process can allocate, GiB (cudaMemGetInfo total)"),
    HF("context_gib", CFG_DOUBLE, context_gib, 0, 1e3, CFG_REQUIRED,
       "CUDA context and cuBLASLt before any tensor, GiB"),
    HF("nccl_gib", CFG_DOUBLE, nccl_gib, 0, 1e3, CFG_OPTIONAL, "NCCL communicator buffers, GiB"),
    HF("sms", CFG_INT, sms, 1, 4096, CFG_REQUIRED, "multiprocessors"),
    HF("l2_mb", CFG_DOUBLE, l2_mb, 0, 4096, CFG_REQUIRED, "L2 cache MB"),
    HF("smem_per_sm_kb", CFG_DOUBLE, smem_per_sm_kb, 1, 4096, CFG_REQUIRED, "shared memory per SM KiB"),
    HF("launch_us", CFG_DOUBLE, launch_us, 0, 1000, CFG_REQUIRED, "launch overhead us"),
    HF("gpus_per_node", CFG_INT, gpus_per_node, 1, 1024, CFG_REQUIRED, "GPUs in one node (one switch)"),
    HF("link_bw_gbs", CFG_DOUBLE, link_bw_gbs, 0.1, 1e6, CFG_REQUIRED,
       "within a node: all-reduce bus bandwidth per GPU, GB/s"),
    HF("link_lat_us", CFG_DOUBLE, link_lat_us, 0, 1e6, CFG_REQUIRED,
       "within a node: latency of one collective step, us"),
    HF("node_bw_gbs", CFG_DOUBLE, node_bw_gbs, 0.01, 1e6, CFG_REQUIRED,
       "across nodes: network bandwidth per GPU, GB/s"),
    HF("node_lat_us", CFG_DOUBLE, node_lat_us, 0, 1e6, CFG_REQUIRED,
       "across nodes: latency of one collective step, us"),
    HF("clock_ghz", CFG_DOUBLE, clock_ghz, 0.1, 10, CFG_OPTIONAL, "boost clock GHz"),
    HF("peak_fp8_tflops", CFG_DOUBLE, peak_fp8_tflops, 1, 100000, CFG_OPTIONAL,
       "dense FP8 tensor TFLOP/s (absent: no FP8 tensor cores)"),
    HF("device", CFG_STRING, device, 0, 0, CFG_OPTIONAL,
       "the GPU's name as CUDA gives it: unpad-train takes this spec on that GPU unless --hw names one"),
};
const size_t hw_schema_len = sizeof hw_schema / sizeof hw_schema[0];

int model_load(const char *path, model_cfg *m, unpad_err *err)
{
    memset(m, 0, sizeof *m);
    m->type_vocab = 2;
    m->max_len = 512;
    m->max_predictions = 76;
    m->hidden_dropout = 0.1;
    m->attn_dropout = 0.1;
    m->layernorm_eps = 1e-12;
    m->init_range = 0.02;
    int rc = cfg_load(path, model_schema, model_schema_len, m, err);
    if (rc)
        return rc;
    if (m->hidden % 64)
        return unpad_fail(err, UNPAD_EINVAL, path, 0, "hidden = %d must be a multiple of 64",
                          m->hidden);
    if (m->hidden % m->heads || m->hidden / m->heads != 64)
        return unpad_fail(err, UNPAD_EINVAL, path, 0,
                          "hidden / heads = %d / %d must be 64 (the FMHA kernels' head size)",
                          m->hidden, m->heads);
    if (m->max_len > m->max_position)
        return unpad_fail(err, UNPAD_EINVAL, path, 0,
                          "max_len = %d exceeds max_position = %d", m->max_len, m->max_position);
    if (m->max_predictions > m->max_len)
        return unpad_fail(err, UNPAD_EINVAL, path, 0,
                          "max_predictions = %d exceeds max_len = %d", m->max_predictions, m->max_len);
    m->vocab_pad = (m->vocab + 63) / 64 * 64;
    return UNPAD_OK;
}

int hw_load(const char *path, hw_spec *hw, unpad_err *err)
{
    memset(hw, 0, sizeof *hw);
    hw->clock_ghz = 1.5;
    hw->nccl_gib = 0.5;
    return cfg_load(path, hw_schema, hw_schema_len, hw, err);
}

long model_param_count(const model_cfg *m)
{
    long H = m->hidden, F = m->ffn, L = m->layers;
    long emb = (long)m->vocab * H + (long)m->max_position * H + (long)m->type_vocab * H + 2 * H;
    long layer = (3 * H * H + 3 * H) + (H * H + H) + 2 * H + (H * F + F) + (F * H + H) + 2 * H;
    long mlm = H * H + H + 2 * H + m->vocab; /* transform + LN + decoder bias (decoder tied) */
    long nsp = H * H + H + 2 * H + 2;        /* pooler + classifier */
    return emb + L * layer + mlm + nsp;
}
