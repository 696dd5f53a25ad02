/* dump.h — named tensors to a simple binary file for the peer comparison (tests/gpu/compare_hf.py):
 *   magic "UNPADDMP", u32 version 1, u32 count, then per tensor
 *   u32 name bytes, name (no NUL), u32 dtype (0 fp32, 1 int32), u32 ndim, i64 dims[ndim], data.
 * Parameters are written in Hugging Face's shapes (the padded vocabulary rows left out). */
#ifndef UNPAD_DUMP_H
#define UNPAD_DUMP_H

#include <stdint.h>
#include <stdio.h>

#include "gpu/bert.h"
#include "outfile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A dump is a whole file: written under a temporary name (sim/outfile.h) and renamed into place by
 * dump_close, so a failed or killed run leaves no partial dump under the final name. */
typedef struct {
    unpad_outfile *o;
    FILE *f;           /* o's stream; NULL: not open */
    uint32_t count;
    int failed;        /* a write failed: dump_close reports it */
    char path[4096];
} dump_file;

int dump_open(dump_file *d, const char *path, unpad_err *err);
/* Appends one tensor; a failed write is remembered and reported by dump_close. */
void dump_add(dump_file *d, const char *name, int dtype, int ndim, const int64_t *dims, const void *data);
/* Writes the count, closes and renames into place; EIO if any write failed (nothing is left). */
int dump_close(dump_file *d, unpad_err *err);

/* Every parameter tensor of b: the floatX working copy (what the forward used) as fp32 (which = 0),
 * the fp32 gradient (which = 1) or the fp32 master weights (which = 2). ENOMEM without the host
 * memory for a copy. */
int dump_params(dump_file *d, bert *b, int which, unpad_err *err);

#ifdef __cplusplus
}
#endif

#endif
