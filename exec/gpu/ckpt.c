/* ckpt.c — checkpoints of a bert between the device and exec/ckpt_dir.h's folders (see ckpt.h). */
#include <string.h>

#include <cuda_runtime.h>

#include "common.h"
#include "gpu/ckpt.h"

static uint64_t names_hash(const bert *b)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < bert_tensor_count(b); i++) {
        const bert_tensor *t = bert_tensor_at(b, i);
        for (const char *p = t->name; *p; p++)
            h = (h ^ (uint8_t)*p) * 1099511628211ull;
        h = (h ^ (uint64_t)t->offset) * 1099511628211ull;
    }
    return h;
}

void ckpt_model_of(const bert *b, ckpt_model *m)
{
    const model_cfg *c = bert_cfg(b);
    memset(m, 0, sizeof *m);
    m->layers = c->layers;
    m->hidden = c->hidden;
    m->heads = c->heads;
    m->ffn = c->ffn;
    m->vocab = c->vocab;
    m->vocab_pad = c->vocab_pad;
    m->max_position = c->max_position;
    m->type_vocab = c->type_vocab;
    m->params = bert_param_count(b);
    m->tensors = bert_tensor_count(b);
    m->names_hash = names_hash(b);
}

static float *part_of(bert *b, int part)
{
    return part == 0 ? bert_master(b) : part == 1 ? bert_lamb_m(b) : bert_lamb_v(b);
}

static int get_chunk(void *ctx, int part, size_t off, float *buf, size_t cnt, unpad_err *err)
{
    cudaCheck(cudaMemcpy(buf, part_of(ctx, part) + off, cnt * sizeof *buf, cudaMemcpyDeviceToHost));
    return UNPAD_OK;
}

static int put_chunk(void *ctx, int part, size_t off, float *buf, size_t cnt, unpad_err *err)
{
    cudaCheck(cudaMemcpy(part_of(ctx, part) + off, buf, cnt * sizeof *buf, cudaMemcpyHostToDevice));
    return UNPAD_OK;
}

static int write_algos(void *ctx, FILE *f, unpad_err *err)
{
    gemm_ctx_presets_write(bert_gemm(ctx), f);
    return ferror(f) ? unpad_fail(err, UNPAD_EIO, CKPT_GEMM_FILE, 0, "write failed") : UNPAD_OK;
}

int ckpt_save(const char *root, bert *b, const ckpt_state *st, int keep_last, char *saved, size_t n,
              unpad_err *err)
{
    ckpt_model m;
    ckpt_model_of(b, &m);
    cudaCheck(cudaDeviceSynchronize()); /* the step's update is done */
    ckpt_extra algos = {CKPT_GEMM_FILE, write_algos, b};
    return ckpt_dir_save_with(root, &m, st, get_chunk, b, &algos, keep_last, saved, n, err);
}

int ckpt_load(const char *path, bert *b, ckpt_state *st, unpad_err *err)
{
    ckpt_model m;
    ckpt_model_of(b, &m);
    int rc = ckpt_file_read(path, &m, st, put_chunk, b, err);
    if (rc)
        return rc;
    bert_sync_work(b, 0);
    cudaCheck(cudaDeviceSynchronize());
    return UNPAD_OK;
}
