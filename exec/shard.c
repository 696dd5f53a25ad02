/* shard.c — writing, checking, reading and packing shards of pre-training samples (format in
 * shard.h). Integers are encoded byte by byte, so the files are the same on every host. */
#include "shard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"

/* ---- little-endian helpers -------------------------------------------------------------------- */

static void put16(uint8_t *p, uint32_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

static uint64_t record_bytes(uint32_t token_bytes, uint64_t len, uint64_t n_pred)
{
    return len * (token_bytes + 1) + n_pred * (2 + token_bytes);
}

/* ---- samples ---------------------------------------------------------------------------------- */

int shard_sample_alloc(shard_sample *s, int max_len, int max_pred)
{
    memset(s, 0, sizeof *s);
    s->tokens = malloc((size_t)max_len * sizeof(int32_t));
    s->segments = malloc((size_t)max_len * sizeof(int32_t));
    s->mpos = malloc((size_t)(max_pred > 0 ? max_pred : 1) * sizeof(int32_t));
    s->mlabels = malloc((size_t)(max_pred > 0 ? max_pred : 1) * sizeof(int32_t));
    if (!s->tokens || !s->segments || !s->mpos || !s->mlabels) {
        shard_sample_free(s);
        return UNPAD_ENOMEM;
    }
    return UNPAD_OK;
}

void shard_sample_free(shard_sample *s)
{
    free(s->tokens);
    free(s->segments);
    free(s->mpos);
    free(s->mlabels);
    memset(s, 0, sizeof *s);
}

/* ---- writer ----------------------------------------------------------------------------------- */

struct shard_writer {
    unpad_outfile *o; /* the file being written (under a temporary name until closed) */
    FILE *f;          /* its stream */
    char *path;
    uint32_t token_bytes, max_len, max_pred, vocab_size, flags;
    uint64_t seed, n, n_tokens, n_masked, offset;
    uint8_t *index; /* (n * 16) */
    size_t index_cap;
    uint8_t *rec;   /* one record */
};

int shard_writer_open(const char *path, int max_len, int max_pred, int vocab_size, uint64_t seed,
                      uint32_t flags, shard_writer **out, unpad_err *err)
{
    if (max_len < 1 || max_len > SHARD_MAX_LEN || max_pred < 0 || max_pred > max_len ||
        vocab_size < 1)
        return unpad_fail(err, UNPAD_EINVAL, path, 0,
                          "bad shard parameters: max_len %d (1..%d), max_pred %d (0..max_len), "
                          "vocab size %d (>= 1)",
                          max_len, SHARD_MAX_LEN, max_pred, vocab_size);
    shard_writer *w = calloc(1, sizeof *w);
    if (w) {
        w->path = strdup(path);
        w->token_bytes = vocab_size <= 65536 ? 2 : 4;
        w->rec = malloc(record_bytes(w->token_bytes, (uint64_t)max_len, (uint64_t)max_pred));
    }
    if (!w || !w->path || !w->rec) {
        shard_writer_abort(w);
        return unpad_fail(err, UNPAD_ENOMEM, path, 0, "out of memory");
    }
    w->max_len = (uint32_t)max_len;
    w->max_pred = (uint32_t)max_pred;
    w->vocab_size = (uint32_t)vocab_size;
    w->seed = seed;
    w->flags = flags;
    w->offset = SHARD_HEADER_BYTES;
    int rc = outfile_open(path, &w->o, err);
    if (rc) {
        shard_writer_abort(w);
        return rc;
    }
    w->f = outfile_stream(w->o);
    uint8_t zero[SHARD_HEADER_BYTES] = {0};
    if (fwrite(zero, 1, sizeof zero, w->f) != sizeof zero) {
        unpad_fail(err, UNPAD_EIO, path, 0, "cannot write: %s", strerror(errno));
        shard_writer_abort(w);
        return UNPAD_EIO;
    }
    *out = w;
    return UNPAD_OK;
}

static void put_token(uint8_t *p, uint32_t token_bytes, int32_t id)
{
    if (token_bytes == 2)
        put16(p, (uint32_t)id);
    else
        put32(p, (uint32_t)id);
}

int shard_writer_add(shard_writer *w, const shard_sample *s, unpad_err *err)
{
    uint64_t i = w->n;
    if (s->len < 1 || (uint32_t)s->len > w->max_len || s->n_pred < 0 ||
        (uint32_t)s->n_pred > w->max_pred || s->n_pred > s->len || (s->nsp != 0 && s->nsp != 1))
        return unpad_fail(err, UNPAD_EINVAL, w->path, 0,
                          "sample %" PRIu64 ": length %d (1..%u), %d masked (0..%u), nsp %d (0/1)", i,
                          s->len, w->max_len, s->n_pred, w->max_pred, s->nsp);
    const uint32_t tb = w->token_bytes;
    uint8_t *p = w->rec;
    for (int k = 0; k < s->len; k++, p += tb) {
        if (s->tokens[k] < 0 || (uint32_t)s->tokens[k] >= w->vocab_size)
            return unpad_fail(err, UNPAD_EINVAL, w->path, 0,
                              "sample %" PRIu64 ": token id %d at position %d outside the vocabulary "
                              "(size %u)", i, (int)s->tokens[k], k, w->vocab_size);
        put_token(p, tb, s->tokens[k]);
    }
    for (int k = 0; k < s->len; k++) {
        if (s->segments[k] != 0 && s->segments[k] != 1)
            return unpad_fail(err, UNPAD_EINVAL, w->path, 0,
                              "sample %" PRIu64 ": segment id %d at position %d (expected 0 or 1)", i,
                              (int)s->segments[k], k);
        *p++ = (uint8_t)s->segments[k];
    }
    for (int k = 0; k < s->n_pred; k++, p += 2) {
        if (s->mpos[k] < 0 || s->mpos[k] >= s->len || (k && s->mpos[k] <= s->mpos[k - 1]))
            return unpad_fail(err, UNPAD_EINVAL, w->path, 0,
                              "sample %" PRIu64 ": masked position %d (#%d) not increasing in 0..%d",
                              i, (int)s->mpos[k], k, s->len - 1);
        put16(p, (uint32_t)s->mpos[k]);
    }
    for (int k = 0; k < s->n_pred; k++, p += tb) {
        if (s->mlabels[k] < 0 || (uint32_t)s->mlabels[k] >= w->vocab_size)
            return unpad_fail(err, UNPAD_EINVAL, w->path, 0,
                              "sample %" PRIu64 ": label %d (#%d) outside the vocabulary (size %u)",
                              i, (int)s->mlabels[k], k, w->vocab_size);
        put_token(p, tb, s->mlabels[k]);
    }
    size_t rb = (size_t)(p - w->rec);
    if ((w->n + 1) * SHARD_INDEX_ENTRY_BYTES > w->index_cap) {
        size_t cap = w->index_cap ? w->index_cap * 2 : 4096 * SHARD_INDEX_ENTRY_BYTES;
        uint8_t *nb = realloc(w->index, cap);
        if (!nb)
            return unpad_fail(err, UNPAD_ENOMEM, w->path, 0, "out of memory for the index");
        w->index = nb;
        w->index_cap = cap;
    }
    if (fwrite(w->rec, 1, rb, w->f) != rb)
        return unpad_fail(err, UNPAD_EIO, w->path, 0, "cannot write: %s", strerror(errno));
    uint8_t *e = w->index + w->n * SHARD_INDEX_ENTRY_BYTES;
    put64(e, w->offset);
    put32(e + 8, (uint32_t)s->len);
    put16(e + 12, (uint32_t)s->n_pred);
    e[14] = (uint8_t)s->nsp;
    e[15] = 0;
    w->offset += rb;
    w->n++;
    w->n_tokens += (uint64_t)s->len;
    w->n_masked += (uint64_t)s->n_pred;
    return UNPAD_OK;
}

uint64_t shard_writer_count(const shard_writer *w) { return w->n; }

static void writer_free(shard_writer *w)
{
    free(w->path);
    free(w->index);
    free(w->rec);
    free(w);
}

int shard_writer_close(shard_writer *w, unpad_err *err)
{
    uint8_t h[SHARD_HEADER_BYTES] = {0};
    memcpy(h, SHARD_MAGIC, 8);
    put32(h + 8, SHARD_VERSION);
    put32(h + 12, SHARD_HEADER_BYTES);
    put32(h + 16, w->token_bytes);
    put32(h + 20, w->max_len);
    put32(h + 24, w->max_pred);
    put32(h + 28, w->vocab_size);
    put64(h + 32, w->n);
    put64(h + 40, w->n_tokens);
    put64(h + 48, w->n_masked);
    put64(h + 56, w->offset);
    put64(h + 64, w->seed);
    put32(h + 72, w->flags);
    size_t ib = (size_t)w->n * SHARD_INDEX_ENTRY_BYTES;
    int bad = (ib && fwrite(w->index, 1, ib, w->f) != ib) || fseek(w->f, 0, SEEK_SET) ||
              fwrite(h, 1, sizeof h, w->f) != sizeof h;
    int rc;
    if (bad) {
        rc = unpad_fail(err, UNPAD_EIO, w->path, 0, "cannot write: %s", strerror(errno));
        outfile_abort(w->o);
    } else {
        rc = outfile_commit(w->o, err); /* flush, sync, rename; errors name the file */
    }
    writer_free(w);
    return rc;
}

void shard_writer_abort(shard_writer *w)
{
    if (!w)
        return;
    outfile_abort(w->o);
    writer_free(w);
}

/* ---- reader ----------------------------------------------------------------------------------- */

typedef struct {
    char *path;
    const uint8_t *map; /* (size) the whole file */
    size_t size;
    int mapped;         /* 1: map is our mmap of the file; 0: the caller's memory */
    shard_info h;
    uint64_t index_offset;
    long first;         /* index of its first sample in the set */
} shard_file;

struct shard {
    shard_file *f;
    int nf;
    shard_info info;
    long n;
    int *len;       /* (n) */
    int *npred;     /* (n) */
    uint8_t *nsp;   /* (n) */
    uint64_t *off;  /* (n) record offset within its file */
};

static int file_fail(unpad_err *err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int file_fail(unpad_err *err, const char *path, const char *fmt, ...)
{
    char msg[UNPAD_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return unpad_fail(err, UNPAD_EINVAL, path, 0, "%s", msg);
}

/* Checks the header h (the first min(size, 128) bytes of a file of size bytes) and the size it
 * implies; fills sf's header fields. The index is walked by index_load. */
static int header_check(const char *path, const uint8_t *h, size_t size, shard_file *sf,
                        unpad_err *err)
{
    size_t m = size < 8 ? size : 8;
    if (memcmp(h, SHARD_MAGIC, m) != 0) {
        char shown[40];
        for (size_t i = 0; i < m; i++)
            shown[i] = h[i] >= 32 && h[i] < 127 ? (char)h[i] : '.';
        shown[m] = '\0';
        return file_fail(err, path,
                         "not an unpad shard: bad magic at byte 0: found \"%s\", expected \"%s\" "
                         "(shards are made by unpad-data)", shown, SHARD_MAGIC);
    }
    if (size >= 12 && get32(h + 8) != SHARD_VERSION)
        return file_fail(err, path,
                         "unsupported shard version %u at byte 8: this build reads version %d "
                         "(remake the shard with this unpad-data)", get32(h + 8), SHARD_VERSION);
    if (size < SHARD_HEADER_BYTES)
        return file_fail(err, path, "truncated: the file has %zu bytes, less than the %d-byte header",
                         size, SHARD_HEADER_BYTES);
    shard_info *in = &sf->h;
    in->version = get32(h + 8);
    in->token_bytes = get32(h + 16);
    in->max_len = get32(h + 20);
    in->max_pred = get32(h + 24);
    in->vocab_size = get32(h + 28);
    in->n_samples = get64(h + 32);
    in->n_tokens = get64(h + 40);
    in->n_masked = get64(h + 48);
    sf->index_offset = get64(h + 56);
    in->seed = get64(h + 64);
    in->flags = get32(h + 72);
    in->n_files = 1;
    if (get32(h + 12) != SHARD_HEADER_BYTES)
        return file_fail(err, path, "bad header at byte 12: header size %u, expected %d",
                         get32(h + 12), SHARD_HEADER_BYTES);
    if (in->token_bytes != 2 && in->token_bytes != 4)
        return file_fail(err, path, "bad header at byte 16: token bytes %u, expected 2 or 4",
                         in->token_bytes);
    if (in->max_len < 1 || in->max_len > SHARD_MAX_LEN || in->max_pred > in->max_len)
        return file_fail(err, path,
                         "bad header at byte 20: max_len %u (1..%d), max_pred %u (0..max_len)",
                         in->max_len, SHARD_MAX_LEN, in->max_pred);
    if (in->vocab_size < 1 || (in->token_bytes == 2 && in->vocab_size > 65536) ||
        in->vocab_size > (uint32_t)INT32_MAX)
        return file_fail(err, path, "bad header at byte 28: vocabulary size %u with %u-byte token ids",
                         in->vocab_size, in->token_bytes);
    if (in->flags & ~SHARD_FLAG_SYNTHETIC)
        return file_fail(err, path,
                         "bad header at byte 72: flags 0x%x, only bit 0 (synthetic) is defined",
                         in->flags);
    for (int i = 76; i < SHARD_HEADER_BYTES; i++)
        if (h[i])
            return file_fail(err, path,
                             "bad header at byte %d: reserved bytes 76..127 must be zero, found "
                             "0x%02x", i, h[i]);
    if (in->n_samples > (UINT64_MAX / 2) / SHARD_INDEX_ENTRY_BYTES ||
        sf->index_offset > UINT64_MAX / 2 || sf->index_offset < SHARD_HEADER_BYTES ||
        in->n_samples > (uint64_t)(LONG_MAX / 2))
        return file_fail(err, path,
                         "size mismatch: the header (byte 32) claims %" PRIu64 " samples with the "
                         "index at byte %" PRIu64 ", impossible for a file of %zu bytes",
                         in->n_samples, sf->index_offset, size);
    uint64_t expect = sf->index_offset + in->n_samples * SHARD_INDEX_ENTRY_BYTES;
    if (size < expect) {
        if (size < sf->index_offset)
            return file_fail(err, path,
                             "truncated: the file ends at byte %zu, inside the sample records; its "
                             "header (%" PRIu64 " samples, index at byte %" PRIu64 ") needs %" PRIu64
                             " bytes",
                             size, in->n_samples, sf->index_offset, expect);
        return file_fail(err, path,
                         "truncated: the file ends at byte %zu, inside the index entry of sample "
                         "%" PRIu64 "; its header (%" PRIu64 " samples, index at byte %" PRIu64
                         ") needs %" PRIu64 " bytes",
                         size, (size - sf->index_offset) / SHARD_INDEX_ENTRY_BYTES, in->n_samples,
                         sf->index_offset, expect);
    }
    if (size > expect)
        return file_fail(err, path,
                         "size mismatch: the file has %zu bytes, its header (%" PRIu64 " samples, "
                         "index at byte %" PRIu64 ") says %" PRIu64 ": %" PRIu64 " extra bytes from "
                         "byte %" PRIu64,
                         size, in->n_samples, sf->index_offset, expect, (uint64_t)size - expect,
                         expect);
    return UNPAD_OK;
}

/* Maps and checks one file's header and size. */
static int file_open(const char *path, shard_file *sf, unpad_err *err)
{
    memset(sf, 0, sizeof *sf);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot open shard: %s", strerror(errno));
    struct stat st;
    int bad_stat = fstat(fd, &st) != 0, e = errno;
    if (bad_stat || !S_ISREG(st.st_mode)) {
        close(fd);
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot read shard: %s",
                          bad_stat ? strerror(e) : "not a regular file");
    }
    size_t size = (size_t)st.st_size;
    uint8_t h[SHARD_HEADER_BYTES] = {0};
    size_t want = size < sizeof h ? size : sizeof h;
    if (pread(fd, h, want, 0) != (ssize_t)want) {
        e = errno;
        close(fd);
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot read shard: %s", strerror(e));
    }
    int rc = header_check(path, h, size, sf, err);
    if (rc) {
        close(fd);
        return rc;
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    e = errno;
    close(fd);
    if (map == MAP_FAILED)
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot map shard: %s", strerror(e));
    sf->map = map;
    sf->size = size;
    sf->mapped = 1;
    sf->path = strdup(path);
    if (!sf->path) {
        munmap(map, size);
        sf->map = NULL;
        return unpad_fail(err, UNPAD_ENOMEM, path, 0, "out of memory");
    }
    return UNPAD_OK;
}

static void file_close(shard_file *sf)
{
    if (sf->map && sf->mapped)
        munmap((void *)sf->map, sf->size);
    free(sf->path);
    memset(sf, 0, sizeof *sf);
}

/* Walks sf's index into the set's arrays from position sf->first, checking it against the header. */
static int index_load(shard *s, const shard_file *sf, unpad_err *err)
{
    const shard_info *h = &sf->h;
    uint64_t want = SHARD_HEADER_BYTES, tokens = 0, masked = 0;
    for (uint64_t i = 0; i < h->n_samples; i++) {
        uint64_t at = sf->index_offset + i * SHARD_INDEX_ENTRY_BYTES;
        const uint8_t *e = sf->map + at;
        uint64_t off = get64(e);
        uint32_t len = get32(e + 8), np = get16(e + 12), nsp = e[14];
        if (off != want)
            return file_fail(err, sf->path,
                             "size mismatch at byte %" PRIu64 " (index entry of sample %" PRIu64
                             "): record offset %" PRIu64 ", expected %" PRIu64
                             " after the samples before it",
                             at, i, off, want);
        if (len < 1 || len > h->max_len || np > h->max_pred || np > len || nsp > 1 || e[15])
            return file_fail(err, sf->path,
                             "bad index entry at byte %" PRIu64 " (sample %" PRIu64 "): length %u "
                             "(1..%u), %u masked (0..%u), nsp %u (0/1)",
                             at, i, len, h->max_len, np, h->max_pred, nsp);
        want += record_bytes(h->token_bytes, len, np);
        if (want > sf->index_offset)
            return file_fail(err, sf->path,
                             "size mismatch at byte %" PRIu64 " (index entry of sample %" PRIu64
                             "): its record would end at byte %" PRIu64 ", past the index at byte "
                             "%" PRIu64,
                             at, i, want, sf->index_offset);
        tokens += len;
        masked += np;
        long g = sf->first + (long)i;
        s->len[g] = (int)len;
        s->npred[g] = (int)np;
        s->nsp[g] = (uint8_t)nsp;
        s->off[g] = off;
    }
    if (want != sf->index_offset)
        return file_fail(err, sf->path,
                         "size mismatch: the records of the %" PRIu64 " samples end at byte %" PRIu64
                         ", but the header (byte 56) puts the index at byte %" PRIu64,
                         h->n_samples, want, sf->index_offset);
    if (tokens != h->n_tokens)
        return file_fail(err, sf->path,
                         "size mismatch: the samples hold %" PRIu64 " tokens, the header (byte 40) "
                         "says %" PRIu64, tokens, h->n_tokens);
    if (masked != h->n_masked)
        return file_fail(err, sf->path,
                         "size mismatch: the samples hold %" PRIu64 " masked positions, the header "
                         "(byte 48) says %" PRIu64, masked, h->n_masked);
    return UNPAD_OK;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.bin files of folder dir, sorted, as "dir/name" strings. */
static int list_folder(const char *dir, char ***out, int *n, unpad_err *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return unpad_fail(err, UNPAD_EIO, dir, 0, "cannot open folder: %s", strerror(errno));
    char **names = NULL;
    int cnt = 0, cap = 0, rc = UNPAD_OK;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 4, ".bin") != 0)
            continue;
        if (cnt == cap) {
            cap = cap ? cap * 2 : 16;
            char **nn = realloc(names, (size_t)cap * sizeof *nn);
            if (!nn) {
                rc = UNPAD_ENOMEM;
                break;
            }
            names = nn;
        }
        size_t pl = strlen(dir) + l + 2;
        if (!(names[cnt] = malloc(pl))) {
            rc = UNPAD_ENOMEM;
            break;
        }
        snprintf(names[cnt++], pl, "%s/%s", dir, de->d_name);
    }
    closedir(d);
    if (rc == UNPAD_OK && cnt == 0)
        rc = unpad_fail(err, UNPAD_EINVAL, dir, 0, "no shards (*.bin files) in this folder");
    else if (rc)
        unpad_fail(err, rc, dir, 0, "out of memory");
    if (rc) {
        for (int i = 0; i < cnt; i++)
            free(names[i]);
        free(names);
        return rc;
    }
    qsort(names, (size_t)cnt, sizeof *names, name_cmp);
    *out = names;
    *n = cnt;
    return UNPAD_OK;
}

/* The per-sample arrays of s, from the index of each of its files. */
static int indexes_load(shard *s, const char *path, unpad_err *err)
{
    size_t n = (size_t)s->n ? (size_t)s->n : 1;
    s->len = malloc(n * sizeof *s->len);
    s->npred = malloc(n * sizeof *s->npred);
    s->nsp = malloc(n);
    s->off = malloc(n * sizeof *s->off);
    if (!s->len || !s->npred || !s->nsp || !s->off)
        return unpad_fail(err, UNPAD_ENOMEM, path, 0, "out of memory for the index of %ld samples",
                          s->n);
    for (int i = 0; i < s->nf; i++) {
        int rc = index_load(s, &s->f[i], err);
        if (rc)
            return rc;
    }
    return UNPAD_OK;
}

int shard_open_mem(const char *name, const void *data, size_t size, shard **out, unpad_err *err)
{
    shard *s = calloc(1, sizeof *s);
    int rc;
    if (!s || !(s->f = calloc(1, sizeof *s->f)) || !(s->f[0].path = strdup(name))) {
        shard_close(s);
        return unpad_fail(err, UNPAD_ENOMEM, name, 0, "out of memory");
    }
    s->nf = 1;
    shard_file *sf = &s->f[0];
    if ((rc = header_check(name, data, size, sf, err))) {
        shard_close(s);
        return rc;
    }
    sf->map = data;
    sf->size = size;
    s->info = sf->h;
    s->n = (long)sf->h.n_samples;
    if ((rc = indexes_load(s, name, err))) {
        shard_close(s);
        return rc;
    }
    *out = s;
    return UNPAD_OK;
}

int shard_open(const char *path, shard **out, unpad_err *err)
{
    struct stat st;
    char **names = NULL;
    int nf = 1, rc;
    const char *one[1] = {path};
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        if ((rc = list_folder(path, &names, &nf, err)))
            return rc;
    }
    const char *const *files = names ? (const char *const *)names : one;
    shard *s = calloc(1, sizeof *s);
    if (!s || !(s->f = calloc((size_t)nf, sizeof *s->f))) {
        rc = unpad_fail(err, UNPAD_ENOMEM, path, 0, "out of memory");
        goto done;
    }
    for (int i = 0; i < nf; i++) {
        if ((rc = file_open(files[i], &s->f[i], err)))
            goto done;
        s->nf = i + 1;
        shard_info *a = &s->info, *b = &s->f[i].h;
        s->f[i].first = s->n;
        if (i == 0) {
            *a = *b;
        } else if (a->max_len != b->max_len || a->max_pred != b->max_pred ||
                   a->vocab_size != b->vocab_size) {
            rc = file_fail(err, files[i],
                           "does not match %s of the same folder: max_len %u / %u, max_pred %u / "
                           "%u, vocabulary %u / %u",
                           files[0], b->max_len, a->max_len, b->max_pred, a->max_pred,
                           b->vocab_size, a->vocab_size);
            goto done;
        } else {
            a->n_samples += b->n_samples;
            a->n_tokens += b->n_tokens;
            a->n_masked += b->n_masked;
            a->n_files++;
        }
        s->n += (long)b->n_samples;
    }
    rc = indexes_load(s, path, err);
done:
    if (names) {
        for (int i = 0; i < nf; i++)
            free(names[i]);
        free(names);
    }
    if (rc) {
        shard_close(s);
        return rc;
    }
    *out = s;
    return UNPAD_OK;
}

void shard_close(shard *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->nf; i++)
        file_close(&s->f[i]);
    free(s->f);
    free(s->len);
    free(s->npred);
    free(s->nsp);
    free(s->off);
    free(s);
}

const shard_info *shard_get_info(const shard *s) { return &s->info; }
long shard_count(const shard *s) { return s->n; }
const int *shard_lengths(const shard *s) { return s->len; }
const int *shard_npred(const shard *s) { return s->npred; }

static const shard_file *file_of(const shard *s, long i)
{
    int lo = 0, hi = s->nf - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (s->f[mid].first <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    return &s->f[lo];
}

static int32_t get_token(const uint8_t *p, uint32_t token_bytes)
{
    return (int32_t)(token_bytes == 2 ? get16(p) : get32(p));
}

/* Decodes sample i into the arrays, checking its content; positions are within the sample. */
static int decode(const shard *s, long i, int32_t *tok, int32_t *seg, int32_t *mpos, int32_t *mlab,
                  unpad_err *err)
{
    const shard_file *sf = file_of(s, i);
    const uint32_t tb = sf->h.token_bytes, vocab = sf->h.vocab_size;
    const int len = s->len[i], np = s->npred[i];
    const uint64_t at = s->off[i];
    const long local = i - sf->first;
    const uint8_t *p = sf->map + at;
    for (int k = 0; k < len; k++, p += tb) {
        tok[k] = get_token(p, tb);
        if ((uint32_t)tok[k] >= vocab)
            return file_fail(err, sf->path,
                             "sample %ld (record at byte %" PRIu64 "): token id %u at position %d is "
                             "not below the vocabulary size %u",
                             local, at, (uint32_t)tok[k], k, vocab);
    }
    for (int k = 0; k < len; k++, p++) {
        seg[k] = *p;
        if (*p > 1)
            return file_fail(err, sf->path,
                             "sample %ld (record at byte %" PRIu64 "): segment id %u at position %d "
                             "(expected 0 or 1)", local, at, *p, k);
    }
    for (int k = 0; k < np; k++, p += 2) {
        mpos[k] = (int32_t)get16(p);
        if (mpos[k] >= len || (k && mpos[k] <= mpos[k - 1]))
            return file_fail(err, sf->path,
                             "sample %ld (record at byte %" PRIu64 "): masked position %d (#%d) not "
                             "increasing within 0..%d", local, at, (int)mpos[k], k, len - 1);
    }
    for (int k = 0; k < np; k++, p += tb) {
        mlab[k] = get_token(p, tb);
        if ((uint32_t)mlab[k] >= vocab)
            return file_fail(err, sf->path,
                             "sample %ld (record at byte %" PRIu64 "): label %u (#%d) is not below "
                             "the vocabulary size %u", local, at, (uint32_t)mlab[k], k, vocab);
    }
    return UNPAD_OK;
}

int shard_read(const shard *s, long i, shard_sample *out, unpad_err *err)
{
    if (i < 0 || i >= s->n)
        return unpad_fail(err, UNPAD_ERANGE, s->nf ? s->f[0].path : NULL, 0,
                          "sample %ld out of range: the shard holds %ld samples", i, s->n);
    out->len = s->len[i];
    out->n_pred = s->npred[i];
    out->nsp = s->nsp[i];
    return decode(s, i, out->tokens, out->segments, out->mpos, out->mlabels, err);
}

/* ---- packed batches --------------------------------------------------------------------------- */

int shard_batch_alloc(shard_batch *b, int cap_seqs, long cap_tokens, long cap_masked)
{
    memset(b, 0, sizeof *b);
    size_t t = (size_t)(cap_tokens > 0 ? cap_tokens : 1), m = (size_t)(cap_masked > 0 ? cap_masked : 1);
    size_t q = (size_t)(cap_seqs > 0 ? cap_seqs : 1);
    b->tokens = malloc(t * sizeof(int32_t));
    b->segments = malloc(t * sizeof(int32_t));
    b->positions = malloc(t * sizeof(int32_t));
    b->cu_seqlens = malloc((q + 1) * sizeof(int32_t));
    b->mpos = malloc(m * sizeof(int32_t));
    b->mlabels = malloc(m * sizeof(int32_t));
    b->mseq = malloc(m * sizeof(int32_t));
    b->nsp = malloc(q * sizeof(int32_t));
    if (!b->tokens || !b->segments || !b->positions || !b->cu_seqlens || !b->mpos || !b->mlabels ||
        !b->mseq || !b->nsp) {
        shard_batch_free(b);
        return UNPAD_ENOMEM;
    }
    b->cap_seqs = cap_seqs;
    b->cap_tokens = cap_tokens;
    b->cap_masked = cap_masked;
    return UNPAD_OK;
}

void shard_batch_free(shard_batch *b)
{
    free(b->tokens);
    free(b->segments);
    free(b->positions);
    free(b->cu_seqlens);
    free(b->mpos);
    free(b->mlabels);
    free(b->mseq);
    free(b->nsp);
    memset(b, 0, sizeof *b);
}

int shard_pack_batch(const shard *s, const long *idx, int n, shard_batch *b, unpad_err *err)
{
    const char *name = s->nf ? s->f[0].path : NULL;
    b->n = 0;
    b->T = b->P = 0;
    b->max_seqlen = 0;
    long T = 0, P = 0;
    for (int k = 0; k < n; k++) {
        if (idx[k] < 0 || idx[k] >= s->n)
            return unpad_fail(err, UNPAD_ERANGE, name, 0,
                              "batch entry %d: sample %ld out of range: the shard holds %ld samples",
                              k, idx[k], s->n);
        T += s->len[idx[k]];
        P += s->npred[idx[k]];
    }
    if (n > b->cap_seqs || T > b->cap_tokens || P > b->cap_masked || T > INT32_MAX)
        return unpad_fail(err, UNPAD_ERANGE, name, 0,
                          "batch of %d samples needs %ld tokens and %ld masked positions; room for "
                          "%d samples, %ld tokens, %ld masked",
                          n, T, P, b->cap_seqs, b->cap_tokens, b->cap_masked);
    long t = 0, p = 0;
    int maxl = 0;
    b->cu_seqlens[0] = 0;
    for (int k = 0; k < n; k++) {
        long i = idx[k];
        int len = s->len[i], np = s->npred[i];
        int rc = decode(s, i, b->tokens + t, b->segments + t, b->mpos + p, b->mlabels + p, err);
        if (rc)
            return rc;
        for (int j = 0; j < len; j++)
            b->positions[t + j] = j;
        for (int j = 0; j < np; j++) {
            b->mpos[p + j] += (int32_t)t;
            b->mseq[p + j] = k;
        }
        b->nsp[k] = s->nsp[i];
        t += len;
        p += np;
        b->cu_seqlens[k + 1] = (int32_t)t;
        if (len > maxl)
            maxl = len;
    }
    b->n = n;
    b->T = T;
    b->P = P;
    b->max_seqlen = maxl;
    return UNPAD_OK;
}
