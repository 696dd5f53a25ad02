/* shard.h — the binary shard format of BERT pre-training samples: writer, reader, batch packer.
 *
 * A shard is one file; a folder of shards (every *.bin in it, by name) reads as one set.
 * All integers are little-endian. Version 1:
 *
 *   header, 128 bytes
 *     0  char[8] magic "UNPADSHD"
 *     8  u32 version (1)
 *    12  u32 header bytes (128)
 *    16  u32 token bytes: 2 (u16 ids, vocab <= 65536) or 4 (i32 ids)
 *    20  u32 max_len        longest sample allowed, in tokens (<= 65535)
 *    24  u32 max_pred       most masked positions per sample
 *    28  u32 vocab size     every token id and label is below it
 *    32  u64 samples        n
 *    40  u64 tokens         sum of the sample lengths
 *    48  u64 masked         sum of the masked counts
 *    56  u64 index offset   where the index starts = where the records end
 *    64  u64 seed           the seed that made the shard
 *    72  u32 flags          bit 0: synthetic tokens; the other bits zero
 *    76  52 bytes of zeros (reserved; a reader refuses any other value)
 *   records, one per sample, back to back from byte 128, each
 *     tokens[len]           token ids (token bytes each), [CLS] A [SEP] B [SEP], masked ones replaced
 *     segments[len]         u8, 0 for [CLS] A [SEP], 1 for B [SEP]
 *     mpos[n_pred]          u16 masked positions within the sample, increasing
 *     mlabels[n_pred]       original token ids at mpos (token bytes each)
 *   index at the index offset, 16 bytes per sample
 *     u64 record offset, u32 len, u16 n_pred, u8 nsp (1 = B is a random sentence), u8 zero
 *   The file ends right after the index: size = index offset + 16 n.
 *
 * Opening a shard reads the header and the index only and checks every size against the header
 * (record offsets follow from the lengths, their sums match the header's totals, the file size is
 * exact); reading a sample checks its ids and positions. Each refusal names the file and the
 * byte offset or the sample. A shard is written under a temporary name and renamed when complete,
 * so a file with the final name is whole. The reader memory-maps the files: do not truncate or
 * rewrite a shard while a reader has it open (replace it by renaming, as the writer does). */
#ifndef UNPAD_SHARD_H
#define UNPAD_SHARD_H

#include <stdint.h>

#include "unpad.h"

#define SHARD_MAGIC "UNPADSHD"
#define SHARD_VERSION 1
#define SHARD_HEADER_BYTES 128
#define SHARD_INDEX_ENTRY_BYTES 16
#define SHARD_MAX_LEN 65535
#define SHARD_FLAG_SYNTHETIC 1u

/* The header's fields; for a folder of shards, the totals over its files. */
typedef struct {
    uint32_t version, token_bytes, max_len, max_pred, vocab_size, flags;
    uint64_t n_samples, n_tokens, n_masked, seed;
    int n_files;
} shard_info;

/* One sample in caller buffers (the reader fills len, n_pred, nsp and the arrays; the writer
 * reads them). */
typedef struct {
    int len;           /* tokens */
    int n_pred;        /* masked positions */
    int nsp;           /* 1: B is a random sentence from elsewhere; 0: B follows A */
    int32_t *tokens;   /* (max_len) */
    int32_t *segments; /* (max_len) 0 or 1 */
    int32_t *mpos;     /* (max_pred) positions within the sample, increasing */
    int32_t *mlabels;  /* (max_pred) original ids at mpos */
} shard_sample;

/* Buffers for one sample of up to max_len tokens and max_pred masks; free with shard_sample_free. */
int shard_sample_alloc(shard_sample *s, int max_len, int max_pred);
void shard_sample_free(shard_sample *s);

/* ---- writing ---- */
typedef struct shard_writer shard_writer;

/* Starts path (written under a temporary name until shard_writer_close renames it, outfile.h).
 * Ids are stored as u16 when vocab_size <= 65536. */
int shard_writer_open(const char *path, int max_len, int max_pred, int vocab_size, uint64_t seed,
                      uint32_t flags, shard_writer **out, unpad_err *err);
/* Appends one sample after checking it (lengths, ids, positions). */
int shard_writer_add(shard_writer *w, const shard_sample *s, unpad_err *err);
uint64_t shard_writer_count(const shard_writer *w);
/* Writes the index and the header, syncs and renames to the final name; frees w either way. */
int shard_writer_close(shard_writer *w, unpad_err *err);
/* Drops the partial file and frees w. */
void shard_writer_abort(shard_writer *w);

/* ---- reading ---- */
typedef struct shard shard;

/* Opens a shard file or a folder of *.bin shards (read-only, memory-mapped; regular files only). */
int shard_open(const char *path, shard **out, unpad_err *err);
/* The same checks on one shard held in memory (data[0..size), which must outlive the shard);
 * name stands for the file in messages. */
int shard_open_mem(const char *name, const void *data, size_t size, shard **out, unpad_err *err);
void shard_close(shard *s);
const shard_info *shard_get_info(const shard *s);
long shard_count(const shard *s);
/* (n) length of every sample, from the index; cheap, for the planner. */
const int *shard_lengths(const shard *s);
/* (n) masked count of every sample. */
const int *shard_npred(const shard *s);
/* Reads sample i into out's buffers (sized max_len / max_pred of the shard). Safe to call from
 * several threads at once. */
int shard_read(const shard *s, long i, shard_sample *out, unpad_err *err);

/* ---- packed batches ----
 * A batch of n samples without padding: sample k's tokens are [cu_seqlens[k], cu_seqlens[k+1]).
 * The caller sets the pointers and capacities (e.g. to pinned memory) or uses shard_batch_alloc. */
typedef struct {
    int cap_seqs;        /* capacities of the arrays below */
    long cap_tokens, cap_masked;
    int n;               /* sequences in the batch */
    long T, P;           /* tokens, masked positions */
    int max_seqlen;
    int32_t *tokens;     /* (T) token ids */
    int32_t *segments;   /* (T) 0 / 1 */
    int32_t *positions;  /* (T) position within its sequence, 0..len-1 */
    int32_t *cu_seqlens; /* (n + 1) prefix sums of the lengths, cu_seqlens[0] = 0 */
    int32_t *mpos;       /* (P) masked positions as indices into the T packed tokens, increasing */
    int32_t *mlabels;    /* (P) their labels */
    int32_t *mseq;       /* (P) the sequence each masked position belongs to */
    int32_t *nsp;        /* (n) next-sentence labels */
} shard_batch;

int shard_batch_alloc(shard_batch *b, int cap_seqs, long cap_tokens, long cap_masked);
void shard_batch_free(shard_batch *b);
/* Packs samples idx[0..n) (any order, repeats allowed) into b. UNPAD_ERANGE when they need more
 * room than b's capacities (b is left empty); index errors and bad samples as shard_read. */
int shard_pack_batch(const shard *s, const long *idx, int n, shard_batch *b, unpad_err *err);

#endif
