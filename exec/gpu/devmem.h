/* devmem.h — device allocations whose failure is the environment's (too little GPU memory for the
 * batch or the model), returned as UNPAD_ENOMEM with the sizes asked and free, so a person can
 * choose a smaller --batch; see the error policy in kernels/common.h. */
#ifndef UNPAD_DEVMEM_H
#define UNPAD_DEVMEM_H

#include <stddef.h>

#include "unpad.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cudaMalloc of `bytes` for `what` (named in the message). */
int dev_alloc(void **p, size_t bytes, const char *what, unpad_err *err);

#ifdef __cplusplus
}
#endif

#endif
