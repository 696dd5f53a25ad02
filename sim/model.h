/* model.h — BERT model configs (models/NAME.cfg) and GPU hardware specs (models/hw/NAME.cfg). */
#ifndef UNPAD_MODEL_H
#define UNPAD_MODEL_H

#include "cfg.h"

typedef struct {
    char name[CFG_STR_LEN];
    int layers;          /* L: encoder layers */
    int hidden;          /* H: hidden size */
    int heads;           /* NH: attention heads; head size = H / NH */
    int ffn;             /* F: intermediate (FFN) size */
    int vocab;           /* V: vocabulary size (30522 for BERT uncased) */
    int vocab_pad;       /* V rounded up to a multiple of 64 (derived, not read) */
    int max_position;    /* learned position embeddings */
    int type_vocab;      /* token types (segments) */
    int max_len;         /* longest sequence trained */
    int max_predictions; /* masked positions per sequence, at most */
    double hidden_dropout;
    double attn_dropout;
    double layernorm_eps;
    double init_range;   /* std of the truncated-normal initialisation */
} model_cfg;

typedef struct {
    char name[CFG_STR_LEN];
    double peak_bf16_tflops;   /* dense tensor-core bf16/fp16 rate */
    double peak_tf32_tflops;   /* dense tensor-core tf32 rate */
    double peak_fp32_tflops;   /* plain fp32 FMA rate */
    double mem_bw_gbs;         /* device memory bandwidth, GB/s (1e9) */
    double memory_gib;         /* device memory a process can allocate in all (cudaMemGetInfo total), GiB */
    double context_gib;        /* what the CUDA context and cuBLASLt take of it before any tensor, GiB */
    double nccl_gib;           /* NCCL's communicator buffers, with more than one process, GiB */
    int sms;                   /* multiprocessors */
    double l2_mb;              /* L2 cache, MB */
    double smem_per_sm_kb;     /* shared memory per multiprocessor, KiB */
    double launch_us;          /* per-kernel launch overhead when back to back */
    /* The network (net.h): GPUs in a node share a switch (NVLink/NVSwitch), nodes a fabric
     * (InfiniBand), one network port per GPU. */
    int gpus_per_node;
    double link_bw_gbs;        /* within a node: per-GPU all-reduce bus bandwidth, GB/s */
    double link_lat_us;        /* within a node: latency of one step of a collective */
    double node_bw_gbs;        /* across nodes: per-GPU network bandwidth, GB/s (one port per GPU) */
    double node_lat_us;        /* across nodes: latency of one step of a collective */
    double clock_ghz;          /* boost clock */
    double peak_fp8_tflops;    /* dense FP8 tensor TFLOP/s; 0: no FP8 tensor cores (no --fp8 on) */
    char device[CFG_STR_LEN];  /* the GPU's name as CUDA gives it (cudaDeviceProp.name), which the trainer
                                * matches to pick this spec when no --hw is given; "": none */
} hw_spec;

int model_load(const char *path, model_cfg *m, unpad_err *err);
int hw_load(const char *path, hw_spec *hw, unpad_err *err);

/* Number of trainable parameters (for the optimizer and all-reduce). */
long model_param_count(const model_cfg *m);

/* The schemas, for writers and tests. */
extern const cfg_field model_schema[];
extern const size_t model_schema_len;
extern const cfg_field hw_schema[];
extern const size_t hw_schema_len;

#endif
