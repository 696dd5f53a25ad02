/* devmem.c — device allocations that report the sizes on failure (see devmem.h). */
#include <cuda_runtime.h>

#include "gpu/devmem.h"

int dev_alloc(void **p, size_t bytes, const char *what, unpad_err *err)
{
    *p = NULL;
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e == cudaSuccess)
        return UNPAD_OK;
    size_t fr = 0, tot = 0;
    cudaGetLastError(); /* clear the sticky-free error so later calls are not refused */
    cudaMemGetInfo(&fr, &tot);
    *p = NULL;
    return unpad_fail(err, UNPAD_ENOMEM, NULL, 0,
                      "cannot allocate %.3f GiB of device memory for %s (%.2f GiB free of %.2f): %s; use "
                      "a smaller --batch or a smaller model",
                      bytes / 1073741824.0, what, fr / 1073741824.0, tot / 1073741824.0, cudaGetErrorString(e));
}
