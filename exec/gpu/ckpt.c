/* ckpt.c — atomic, versioned, checked training checkpoints (see ckpt.h).
 *
 * File: a 256-byte header, the payload (master, m, v: 3 x N fp32), a 16-byte trailer.
 *   header: magic[8] "UNPADCKP", u32 version, u32 header bytes, i32 layers, hidden, heads, ffn,
 *           vocab, vocab_pad, max_position, type_vocab, i64 params N, i64 tensors, i64 step,
 *           i64 data_pos, u64 seed, i32 batch, i32 ranks, u64 tensor-name hash, zeros
 *   trailer: u64 payload checksum, char[8] "UNPADEND" */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "common.h"
#include "gpu/ckpt.h"

#define HDR_BYTES 256
#define CHUNK (16u << 20) /* floats per transfer */

typedef struct {
    char magic[8];
    uint32_t version, header_bytes;
    int32_t layers, hidden, heads, ffn, vocab, vocab_pad, max_position, type_vocab;
    int64_t params, tensors, step, data_pos;
    uint64_t seed;
    int32_t batch, ranks;
    uint64_t names_hash;
} ckpt_header;

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

/* word-wise mixing: fast enough for gigabytes */
static uint64_t checksum_add(uint64_t h, const float *v, size_t n)
{
    const uint32_t *w = (const uint32_t *)v;
    for (size_t i = 0; i < n; i++)
        h = (h ^ w[i]) * 0x100000001B3ull + (h >> 29);
    return h;
}

static void fill_header(ckpt_header *h, const bert *b, const ckpt_state *st)
{
    const model_cfg *c = bert_cfg(b);
    memset(h, 0, sizeof *h);
    memcpy(h->magic, CKPT_MAGIC, 8);
    h->version = CKPT_VERSION;
    h->header_bytes = HDR_BYTES;
    h->layers = c->layers;
    h->hidden = c->hidden;
    h->heads = c->heads;
    h->ffn = c->ffn;
    h->vocab = c->vocab;
    h->vocab_pad = c->vocab_pad;
    h->max_position = c->max_position;
    h->type_vocab = c->type_vocab;
    h->params = bert_param_count(b);
    h->tensors = bert_tensor_count(b);
    h->names_hash = names_hash(b);
    if (st) {
        h->step = st->step;
        h->data_pos = st->data_pos;
        h->seed = st->seed;
        h->batch = st->batch;
        h->ranks = st->ranks;
    }
}

int ckpt_save(const char *dir, bert *b, const ckpt_state *st, unpad_err *err)
{
    char path[4096], tmp[4200];
    if (mkdir(dir, 0755) && errno != EEXIST)
        return unpad_fail(err, UNPAD_EIO, dir, 0, "cannot create the checkpoint folder: %s", strerror(errno));
    snprintf(path, sizeof path, "%s/ckpt.bin", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return unpad_fail(err, UNPAD_EIO, tmp, 0, "cannot write: %s", strerror(errno));
    unsigned char hb[HDR_BYTES] = {0};
    ckpt_header h;
    fill_header(&h, b, st);
    memcpy(hb, &h, sizeof h);
    int ok = fwrite(hb, 1, HDR_BYTES, f) == HDR_BYTES;
    size_t N = (size_t)bert_param_count(b);
    float *host;
    cudaCheck(cudaMallocHost((void **)&host, (size_t)CHUNK * 4));
    float *parts[3] = {bert_master(b), bert_lamb_m(b), bert_lamb_v(b)};
    uint64_t sum = 1469598103934665603ull;
    cudaCheck(cudaDeviceSynchronize());
    for (int p = 0; p < 3 && ok; p++)
        for (size_t o = 0; o < N && ok; o += CHUNK) {
            size_t n = N - o < CHUNK ? N - o : CHUNK;
            cudaCheck(cudaMemcpy(host, parts[p] + o, n * 4, cudaMemcpyDeviceToHost));
            sum = checksum_add(sum, host, n);
            ok = fwrite(host, 4, n, f) == n;
        }
    cudaCheck(cudaFreeHost(host));
    char trailer[16];
    memcpy(trailer, &sum, 8);
    memcpy(trailer + 8, "UNPADEND", 8);
    ok = ok && fwrite(trailer, 1, 16, f) == 16;
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int cerr = fclose(f);
    if (!ok || cerr) {
        int e = errno;
        unlink(tmp);
        return unpad_fail(err, UNPAD_EIO, tmp, 0, "write failed (%s); the previous checkpoint is kept",
                          strerror(e));
    }
    if (rename(tmp, path)) {
        int e = errno;
        unlink(tmp);
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot rename the new checkpoint into place: %s",
                          strerror(e));
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) { /* make the rename itself durable */
        fsync(dfd);
        close(dfd);
    }
    return UNPAD_OK;
}

int ckpt_load(const char *dir, bert *b, ckpt_state *st, unpad_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/ckpt.bin", dir);
    FILE *f = fopen(path, "rb");
    if (!f)
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot open: %s (no checkpoint to resume from)",
                          strerror(errno));
    unsigned char hb[HDR_BYTES];
    ckpt_header h, want;
    size_t N = (size_t)bert_param_count(b);
    if (fread(hb, 1, HDR_BYTES, f) != HDR_BYTES) {
        fclose(f);
        return unpad_fail(err, UNPAD_EINVAL, path, 0, "truncated header (not a checkpoint)");
    }
    memcpy(&h, hb, sizeof h);
    fill_header(&want, b, NULL);
    if (memcmp(h.magic, CKPT_MAGIC, 8) || h.header_bytes != HDR_BYTES) {
        fclose(f);
        return unpad_fail(err, UNPAD_EINVAL, path, 0, "not an unpad checkpoint (bad magic)");
    }
    if (h.version != CKPT_VERSION) {
        fclose(f);
        return unpad_fail(err, UNPAD_EINVAL, path, 0, "checkpoint version %u, this trainer reads %d",
                          h.version, CKPT_VERSION);
    }
    if (h.layers != want.layers || h.hidden != want.hidden || h.heads != want.heads || h.ffn != want.ffn ||
        h.vocab != want.vocab || h.vocab_pad != want.vocab_pad || h.max_position != want.max_position ||
        h.type_vocab != want.type_vocab || h.params != want.params || h.tensors != want.tensors ||
        h.names_hash != want.names_hash) {
        fclose(f);
        return unpad_fail(err, UNPAD_EINVAL, path, 0,
                          "checkpoint is of another model: layers %d hidden %d heads %d ffn %d vocab %d "
                          "(%lld parameters); the model given has layers %d hidden %d heads %d ffn %d "
                          "vocab %d (%lld); pass the --model it was trained with",
                          h.layers, h.hidden, h.heads, h.ffn, h.vocab, (long long)h.params, want.layers,
                          want.hidden, want.heads, want.ffn, want.vocab, (long long)want.params);
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && (uint64_t)sb.st_size != HDR_BYTES + 12 * (uint64_t)N + 16) {
        fclose(f);
        return unpad_fail(err, UNPAD_EINVAL, path, 0, "size %lld bytes, expected %llu: truncated or corrupt",
                          (long long)sb.st_size, (unsigned long long)(HDR_BYTES + 12 * (uint64_t)N + 16));
    }
    float *host;
    cudaCheck(cudaMallocHost((void **)&host, (size_t)CHUNK * 4));
    float *parts[3] = {bert_master(b), bert_lamb_m(b), bert_lamb_v(b)};
    uint64_t sum = 1469598103934665603ull;
    int ok = 1;
    for (int p = 0; p < 3 && ok; p++)
        for (size_t o = 0; o < N && ok; o += CHUNK) {
            size_t n = N - o < CHUNK ? N - o : CHUNK;
            ok = fread(host, 4, n, f) == n;
            if (ok) {
                sum = checksum_add(sum, host, n);
                cudaCheck(cudaMemcpy(parts[p] + o, host, n * 4, cudaMemcpyHostToDevice));
            }
        }
    cudaCheck(cudaFreeHost(host));
    char trailer[16];
    ok = ok && fread(trailer, 1, 16, f) == 16;
    fclose(f);
    if (!ok || memcmp(trailer + 8, "UNPADEND", 8))
        return unpad_fail(err, UNPAD_EINVAL, path, 0, "truncated checkpoint (no completion marker)");
    uint64_t want_sum;
    memcpy(&want_sum, trailer, 8);
    if (want_sum != sum)
        return unpad_fail(err, UNPAD_EINVAL, path, 0, "checksum mismatch: the checkpoint is corrupt");
    bert_sync_work(b, 0);
    cudaCheck(cudaDeviceSynchronize());
    st->step = h.step;
    st->data_pos = h.data_pos;
    st->seed = h.seed;
    st->batch = h.batch;
    st->ranks = h.ranks;
    return UNPAD_OK;
}
