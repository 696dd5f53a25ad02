/* ckpt.h — training checkpoints of a bert: the fp32 master weights, LAMB m and v, the step, the
 * data position and the seed, in step-numbered folders (exec/ckpt_dir.h) holding one versioned,
 * checked file each (exec/ckpt_format.h). This file moves the payload between the device and the
 * file; the bytes on disk, the folder protocol and every check live in those two. */
#ifndef UNPAD_CKPT_H
#define UNPAD_CKPT_H

#include <stdint.h>

#include "ckpt_dir.h"
#include "gpu/bert.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The model description a checkpoint of b must carry. */
void ckpt_model_of(const bert *b, ckpt_model *m);

/* The GEMM algorithms of the run (gemm.h: gemm_ctx_presets_write), beside ckpt.bin in every step
 * folder, so that a resumed run computes with the algorithms the interrupted one had tuned. */
#define CKPT_GEMM_FILE "gemm-algos.txt"

/* Saves under root (ckpt_dir_save: root/step-NNNNNN, with CKPT_GEMM_FILE), keeping the keep_last
 * newest (0: all); saved receives the folder. */
int ckpt_save(const char *root, bert *b, const ckpt_state *st, int keep_last, char *saved, size_t n,
              unpad_err *err);
/* Loads the checkpoint file `path` (from ckpt_dir_latest) into b (master, m, v; the working copy is
 * refreshed) and st, after checking it is of b's model. */
int ckpt_load(const char *path, bert *b, ckpt_state *st, unpad_err *err);

#ifdef __cplusplus
}
#endif

#endif
