/* ckpt_format.h — the checkpoint file, CPU side: header, payload streaming, checks. The trainer's
 * exec/gpu/ckpt.c moves the payload between this file and the device; everything about the bytes
 * on disk is here, so the Check suites test it without a GPU.
 *
 * File ckpt.bin: a 256-byte header, the payload (fp32 master weights, LAMB m and v: 3 x N floats),
 * a 16-byte trailer. All integers little-endian.
 *   header: 0 char[8] "UNPADCKP", 8 u32 version (1), 12 u32 header bytes (256),
 *           16 i32 layers, hidden, heads, ffn, vocab, vocab_pad, max_position, type_vocab,
 *           48 i64 params N, 56 i64 tensors, 64 i64 step, 72 i64 data_pos, 80 u64 seed,
 *           88 i32 batch, 92 i32 ranks, 96 u64 tensor-name hash, 104..255 zeros (reserved)
 *   trailer: u64 payload checksum, char[8] "UNPADEND"
 * The reader checks every header field against the model it loads into, that the reserved bytes
 * are zero, that the file size is exactly 256 + 12 N + 16, the trailer marker and the checksum. */
#ifndef UNPAD_CKPT_FORMAT_H
#define UNPAD_CKPT_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "unpad.h"

#define CKPT_MAGIC "UNPADCKP"
#define CKPT_END "UNPADEND"
#define CKPT_VERSION 1
#define CKPT_HEADER_BYTES 256
#define CKPT_TRAILER_BYTES 16
#define CKPT_FILE "ckpt.bin"

/* What a checkpoint is of (the model shape) and where the run was (the state). */
typedef struct {
    int32_t layers, hidden, heads, ffn, vocab, vocab_pad, max_position, type_vocab;
    int64_t params, tensors;
    uint64_t names_hash;    /* of the tensor table's names and offsets */
} ckpt_model;

typedef struct {
    int64_t step;       /* steps completed */
    int64_t data_pos;   /* samples of the stream consumed */
    uint64_t seed;
    int32_t batch;      /* sequences per rank */
    int32_t ranks;      /* virtual ranks x GPUs */
} ckpt_state;

/* Bytes of a whole file of n parameters. */
uint64_t ckpt_file_bytes(int64_t n);

/* The payload in parts (0 master, 1 m, 2 v), each of n floats, moved in chunks: the writer asks
 * `get` for [off, off + cnt) of part into buf; the reader hands `put` each chunk it read.
 * A non-zero return stops the transfer with that status (err filled by the callback). */
typedef int (*ckpt_chunk_fn)(void *ctx, int part, size_t off, float *buf, size_t cnt, unpad_err *err);

/* Writes the whole file at path (created or truncated), syncs it to disk (fsync). On any failure
 * the file is removed and the status returned (EIO names the path and errno: a full disk). */
int ckpt_file_write(const char *path, const ckpt_model *m, const ckpt_state *st, ckpt_chunk_fn get, void *ctx,
                    unpad_err *err);

/* Reads the header of path and checks it: magic, version, header size, reserved bytes, the file
 * size against the header's parameter count. want (NULL: not checked) is the model it must be
 * of; every field must match. Fills m and st (may be NULL). */
int ckpt_file_check(const char *path, const ckpt_model *want, ckpt_model *m, ckpt_state *st, unpad_err *err);

/* ckpt_file_check, then the payload through `put`, then the trailer marker and the checksum. */
int ckpt_file_read(const char *path, const ckpt_model *want, ckpt_state *st, ckpt_chunk_fn put, void *ctx,
                   unpad_err *err);

/* EINVAL naming each field of `got` that differs from `want` (seed, batch, ranks), with how to
 * continue; the step and data position are not compared. */
int ckpt_state_check(const char *path, const ckpt_state *got, const ckpt_state *want, unpad_err *err);

#endif
