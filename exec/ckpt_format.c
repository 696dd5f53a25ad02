/* ckpt_format.c — the checkpoint file: header, payload, checks (see ckpt_format.h). */
#include "ckpt_format.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK ((size_t)4 << 20) /* floats per transfer */
#define HASH0 1469598103934665603ull

uint64_t ckpt_file_bytes(int64_t n) { return CKPT_HEADER_BYTES + 12 * (uint64_t)n + CKPT_TRAILER_BYTES; }

/* word-wise mixing: fast enough for gigabytes */
static uint64_t checksum_add(uint64_t h, const float *v, size_t n)
{
    const uint32_t *w = (const uint32_t *)v;
    for (size_t i = 0; i < n; i++)
        h = (h ^ w[i]) * 0x100000001B3ull + (h >> 29);
    return h;
}

static void put32(unsigned char *b, uint32_t v) { memcpy(b, &v, 4); }
static void put64(unsigned char *b, uint64_t v) { memcpy(b, &v, 8); }
static uint32_t get32(const unsigned char *b) { uint32_t v; memcpy(&v, b, 4); return v; }
static uint64_t get64(const unsigned char *b) { uint64_t v; memcpy(&v, b, 8); return v; }

static void header_pack(unsigned char *h, const ckpt_model *m, const ckpt_state *st)
{
    memset(h, 0, CKPT_HEADER_BYTES);
    memcpy(h, CKPT_MAGIC, 8);
    put32(h + 8, CKPT_VERSION);
    put32(h + 12, CKPT_HEADER_BYTES);
    const int32_t dims[8] = {m->layers, m->hidden, m->heads, m->ffn, m->vocab, m->vocab_pad, m->max_position,
                             m->type_vocab};
    for (int i = 0; i < 8; i++)
        put32(h + 16 + 4 * i, (uint32_t)dims[i]);
    put64(h + 48, (uint64_t)m->params);
    put64(h + 56, (uint64_t)m->tensors);
    put64(h + 64, (uint64_t)st->step);
    put64(h + 72, (uint64_t)st->data_pos);
    put64(h + 80, st->seed);
    put32(h + 88, (uint32_t)st->batch);
    put32(h + 92, (uint32_t)st->ranks);
    put64(h + 96, m->names_hash);
}

static void header_unpack(const unsigned char *h, ckpt_model *m, ckpt_state *st)
{
    int32_t *dims[8] = {&m->layers, &m->hidden, &m->heads, &m->ffn, &m->vocab, &m->vocab_pad, &m->max_position,
                        &m->type_vocab};
    for (int i = 0; i < 8; i++)
        *dims[i] = (int32_t)get32(h + 16 + 4 * i);
    m->params = (int64_t)get64(h + 48);
    m->tensors = (int64_t)get64(h + 56);
    st->step = (int64_t)get64(h + 64);
    st->data_pos = (int64_t)get64(h + 72);
    st->seed = get64(h + 80);
    st->batch = (int32_t)get32(h + 88);
    st->ranks = (int32_t)get32(h + 92);
    m->names_hash = get64(h + 96);
}

int ckpt_file_write(const char *path, const ckpt_model *m, const ckpt_state *st, ckpt_chunk_fn get, void *ctx,
                    unpad_err *err)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot write: %s", strerror(errno));
    unsigned char h[CKPT_HEADER_BYTES];
    header_pack(h, m, st);
    float *buf = malloc(CHUNK * sizeof *buf);
    int rc = buf ? UNPAD_OK : unpad_fail(err, UNPAD_ENOMEM, path, 0, "out of host memory");
    int ok = rc == UNPAD_OK && fwrite(h, 1, sizeof h, f) == sizeof h;
    uint64_t sum = HASH0;
    size_t N = (size_t)m->params;
    for (int p = 0; p < 3 && ok; p++)
        for (size_t o = 0; o < N && ok; o += CHUNK) {
            size_t n = N - o < CHUNK ? N - o : CHUNK;
            if ((rc = get(ctx, p, o, buf, n, err)))
                ok = 0;
            else {
                sum = checksum_add(sum, buf, n);
                ok = fwrite(buf, sizeof *buf, n, f) == n;
            }
        }
    free(buf);
    unsigned char t[CKPT_TRAILER_BYTES];
    put64(t, sum);
    memcpy(t + 8, CKPT_END, 8);
    ok = ok && fwrite(t, 1, sizeof t, f) == sizeof t;
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int e = errno;
    ok = (fclose(f) == 0) && ok;
    if (ok)
        return UNPAD_OK;
    remove(path);
    if (rc)
        return rc;
    return unpad_fail(err, UNPAD_EIO, path, 0, "write failed: %s", strerror(e ? e : EIO));
}

/* The first field of got that differs from want, or NULL. */
static const char *model_differs(const ckpt_model *a, const ckpt_model *b)
{
    if (a->layers != b->layers) return "layers";
    if (a->hidden != b->hidden) return "hidden";
    if (a->heads != b->heads) return "heads";
    if (a->ffn != b->ffn) return "ffn";
    if (a->vocab != b->vocab) return "vocab";
    if (a->vocab_pad != b->vocab_pad) return "vocab_pad";
    if (a->max_position != b->max_position) return "max_position";
    if (a->type_vocab != b->type_vocab) return "type_vocab";
    if (a->params != b->params) return "parameter count";
    if (a->tensors != b->tensors) return "tensor count";
    if (a->names_hash != b->names_hash) return "tensor names";
    return NULL;
}

/* Opens path and checks its header (see ckpt_format.h); the open file is left after the header. */
static int file_open_check(const char *path, const ckpt_model *want, ckpt_model *m, ckpt_state *st, FILE **out,
                           unpad_err *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot open: %s", strerror(errno));
    unsigned char h[CKPT_HEADER_BYTES];
    int rc = UNPAD_OK;
    if (fread(h, 1, sizeof h, f) != sizeof h)
        rc = unpad_fail(err, UNPAD_EINVAL, path, 0, "truncated header (not a checkpoint)");
    else if (memcmp(h, CKPT_MAGIC, 8))
        rc = unpad_fail(err, UNPAD_EINVAL, path, 0, "not an unpad checkpoint (bad magic)");
    else if (get32(h + 8) != CKPT_VERSION)
        rc = unpad_fail(err, UNPAD_EINVAL, path, 0, "checkpoint version %u, this trainer reads %d", get32(h + 8),
                        CKPT_VERSION);
    else if (get32(h + 12) != CKPT_HEADER_BYTES)
        rc = unpad_fail(err, UNPAD_EINVAL, path, 0, "header of %u bytes, expected %d", get32(h + 12),
                        CKPT_HEADER_BYTES);
    for (int i = 104; rc == UNPAD_OK && i < CKPT_HEADER_BYTES; i++)
        if (h[i])
            rc = unpad_fail(err, UNPAD_EINVAL, path, 0, "reserved header byte %d is %d, not 0: corrupt", i, h[i]);
    ckpt_model got;
    ckpt_state gs;
    header_unpack(h, &got, &gs);
    if (rc == UNPAD_OK && (got.params < 1 || got.tensors < 1 || gs.step < 0 || gs.data_pos < 0 || gs.batch < 1 ||
                           gs.ranks < 1))
        rc = unpad_fail(err, UNPAD_EINVAL, path, 0,
                        "header out of range (%lld parameters, %lld tensors, step %lld, data position %lld, batch "
                        "%d, ranks %d): corrupt",
                        (long long)got.params, (long long)got.tensors, (long long)gs.step, (long long)gs.data_pos,
                        gs.batch, gs.ranks);
    const char *field = rc == UNPAD_OK && want ? model_differs(&got, want) : NULL;
    if (field)
        rc = unpad_fail(err, UNPAD_EINVAL, path, 0,
                        "checkpoint is of another model (its %s differs): layers %d hidden %d heads %d ffn %d vocab "
                        "%d (%lld parameters); the model given has layers %d hidden %d heads %d ffn %d vocab %d "
                        "(%lld); pass the --model it was trained with",
                        field, got.layers, got.hidden, got.heads, got.ffn, got.vocab, (long long)got.params,
                        want->layers, want->hidden, want->heads, want->ffn, want->vocab, (long long)want->params);
    struct stat sb;
    if (rc == UNPAD_OK && fstat(fileno(f), &sb) == 0 && (uint64_t)sb.st_size != ckpt_file_bytes(got.params))
        rc = unpad_fail(err, UNPAD_EINVAL, path, 0, "size %lld bytes, expected %llu for %lld parameters: "
                        "truncated or corrupt", (long long)sb.st_size,
                        (unsigned long long)ckpt_file_bytes(got.params), (long long)got.params);
    if (rc) {
        fclose(f);
        return rc;
    }
    if (m)
        *m = got;
    if (st)
        *st = gs;
    *out = f;
    return UNPAD_OK;
}

int ckpt_file_check(const char *path, const ckpt_model *want, ckpt_model *m, ckpt_state *st, unpad_err *err)
{
    FILE *f;
    int rc = file_open_check(path, want, m, st, &f, err);
    if (rc)
        return rc;
    unsigned char t[CKPT_TRAILER_BYTES];
    int ok = fseek(f, -(long)CKPT_TRAILER_BYTES, SEEK_END) == 0 && fread(t, 1, sizeof t, f) == sizeof t &&
             !memcmp(t + 8, CKPT_END, 8);
    fclose(f);
    return ok ? UNPAD_OK : unpad_fail(err, UNPAD_EINVAL, path, 0, "no completion marker at the end: truncated");
}

int ckpt_file_read(const char *path, const ckpt_model *want, ckpt_state *st, ckpt_chunk_fn put, void *ctx,
                   unpad_err *err)
{
    FILE *f;
    ckpt_model m;
    int rc = file_open_check(path, want, &m, st, &f, err);
    if (rc)
        return rc;
    float *buf = malloc(CHUNK * sizeof *buf);
    if (!buf) {
        fclose(f);
        return unpad_fail(err, UNPAD_ENOMEM, path, 0, "out of host memory");
    }
    uint64_t sum = HASH0;
    size_t N = (size_t)m.params;
    for (int p = 0; p < 3 && !rc; p++)
        for (size_t o = 0; o < N && !rc; o += CHUNK) {
            size_t n = N - o < CHUNK ? N - o : CHUNK;
            if (fread(buf, sizeof *buf, n, f) != n)
                rc = unpad_fail(err, UNPAD_EINVAL, path, 0, "truncated payload");
            else {
                sum = checksum_add(sum, buf, n);
                rc = put(ctx, p, o, buf, n, err);
            }
        }
    free(buf);
    unsigned char t[CKPT_TRAILER_BYTES];
    if (!rc && (fread(t, 1, sizeof t, f) != sizeof t || memcmp(t + 8, CKPT_END, 8)))
        rc = unpad_fail(err, UNPAD_EINVAL, path, 0, "truncated checkpoint (no completion marker)");
    if (!rc && get64(t) != sum)
        rc = unpad_fail(err, UNPAD_EINVAL, path, 0, "checksum mismatch: the checkpoint is corrupt");
    fclose(f);
    return rc;
}

int ckpt_state_check(const char *path, const ckpt_state *got, const ckpt_state *want, unpad_err *err)
{
    char why[512] = "";
    size_t k = 0;
    if (got->seed != want->seed)
        k += (size_t)snprintf(why + k, sizeof why - k, "%s--seed %llu (now %llu)", k ? ", " : "",
                              (unsigned long long)got->seed, (unsigned long long)want->seed);
    if (got->batch != want->batch && k < sizeof why)
        k += (size_t)snprintf(why + k, sizeof why - k, "%s--batch %d (now %d)", k ? ", " : "", got->batch,
                              want->batch);
    if (got->ranks != want->ranks && k < sizeof why)
        k += (size_t)snprintf(why + k, sizeof why - k, "%s%d ranks in all (now %d)", k ? ", " : "", got->ranks,
                              want->ranks);
    if (!k)
        return UNPAD_OK;
    return unpad_fail(err, UNPAD_EINVAL, path, 0,
                      "made with %s; resume with the same seed, batch and ranks (processes x --virtual-ranks) to "
                      "continue exactly",
                      why);
}
