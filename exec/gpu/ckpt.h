/* ckpt.h — training checkpoints: fp32 master weights, LAMB m and v, the step, the data position and
 * the seed, in one versioned file DIR/ckpt.bin. A checkpoint is written to DIR/ckpt.bin.tmp, synced,
 * and renamed over the previous one, so DIR/ckpt.bin is always a whole checkpoint (the old or the
 * new); it ends with a completion marker and a checksum of the payload, both checked on load, and
 * its model shape must match the model it is loaded into. */
#ifndef UNPAD_CKPT_H
#define UNPAD_CKPT_H

#include <stdint.h>

#include "gpu/bert.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CKPT_MAGIC "UNPADCKP"
#define CKPT_VERSION 1

typedef struct {
    int64_t step;       /* steps completed */
    int64_t data_pos;   /* samples of the stream consumed */
    uint64_t seed;
    int32_t batch;      /* sequences per rank */
    int32_t ranks;      /* virtual ranks x GPUs */
} ckpt_state;

int ckpt_save(const char *dir, bert *b, const ckpt_state *st, unpad_err *err);
/* Loads DIR/ckpt.bin into b (master, m, v; the working copy is refreshed) and st. */
int ckpt_load(const char *dir, bert *b, ckpt_state *st, unpad_err *err);

#ifdef __cplusplus
}
#endif

#endif
