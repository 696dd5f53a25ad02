/* ckpt_dir.h — the checkpoint folder of a run: one step-numbered folder per checkpoint,
 *   DIR/step-000300/ckpt.bin    the file of ckpt_format.h
 *   DIR/step-000300/COMPLETE    the completion marker, written last ("step = 300")
 * A checkpoint is written into DIR/step-000300.tmp/, the file and the marker synced, the folder
 * renamed into place and DIR synced: a folder with the final name is whole. A write that fails
 * (a full disk) removes its .tmp folder and touches nothing else, so it never replaces or deletes
 * a good checkpoint; only after a successful save are folders beyond --keep-last removed.
 * Resuming takes the latest complete checkpoint that can resume the run: the highest step whose
 * folder has the marker and whose file passes the header checks and is of the same model, seed,
 * batch and ranks; others are skipped with a note saying why. A folder of the
 * old layout (DIR/ckpt.bin, no step folders) still resumes. */
#ifndef UNPAD_CKPT_DIR_H
#define UNPAD_CKPT_DIR_H

#include <stddef.h>
#include <stdio.h>

#include "ckpt_format.h"

#define CKPT_DIR_MARKER "COMPLETE"

/* DIR/step-NNNNNN (six digits at least). */
int ckpt_dir_step_path(const char *root, int64_t step, char *out, size_t n, unpad_err *err);

/* Writes the checkpoint of st->step under root (created if missing), then keeps only the
 * keep_last newest complete checkpoints (0: all). saved (n bytes) receives the folder written. */
int ckpt_dir_save(const char *root, const ckpt_model *m, const ckpt_state *st, ckpt_chunk_fn get, void *ctx,
                  int keep_last, char *saved, size_t n, unpad_err *err);

/* A file of the run's beside the checkpoint file (the trainer's GEMM algorithms): `name` in the
 * step folder, its contents written by write(ctx, f, err) (UNPAD_OK or a status with err filled). */
typedef struct {
    const char *name;
    int (*write)(void *ctx, FILE *f, unpad_err *err);
    void *ctx;
} ckpt_extra;

/* ckpt_dir_save with an extra file (NULL: none), written and synced before the completion marker,
 * so a complete folder has it whole; a failed write leaves no folder, like a failed checkpoint. */
int ckpt_dir_save_with(const char *root, const ckpt_model *m, const ckpt_state *st, ckpt_chunk_fn get,
                       void *ctx, const ckpt_extra *extra, int keep_last, char *saved, size_t n, unpad_err *err);

/* Removes all but the keep_last newest complete step folders (keep_last >= 1), and leftover .tmp
 * folders of failed writes. */
int ckpt_dir_rotate(const char *root, int keep_last, unpad_err *err);

/* The file to resume from, into path: root may be a run's folder (its latest complete checkpoint
 * that can resume the run, or an old-style root/ckpt.bin), one step folder, or a ckpt.bin file.
 * want is the model it must be of, run the state it must match (seed, batch, ranks:
 * ckpt_state_check); NULL: not checked. notes (nn bytes, may be NULL) receives one line per
 * checkpoint skipped and why. When there is none: EIO, "no complete checkpoint to resume from"
 * (none is complete) or "no checkpoint in ROOT can resume this run:" (every complete one refused),
 * with the notes in the message. */
int ckpt_dir_latest(const char *root, const ckpt_model *want, const ckpt_state *run, char *path, size_t n,
                    char *notes, size_t nn, unpad_err *err);

#endif
