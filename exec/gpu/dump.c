/* dump.c — named tensors to a binary file for the peer comparison (see dump.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "common.h"
#include "gpu/dump.h"

int dump_open(dump_file *d, const char *path, unpad_err *err)
{
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "%s", path);
    int rc = outfile_open(path, &d->o, err);
    if (rc)
        return rc;
    d->f = outfile_stream(d->o);
    uint32_t hdr[2] = {1, 0};
    d->failed = fwrite("UNPADDMP", 1, 8, d->f) != 8 || fwrite(hdr, 4, 2, d->f) != 2;
    return UNPAD_OK;
}

void dump_add(dump_file *d, const char *name, int dtype, int ndim, const int64_t *dims, const void *data)
{
    uint32_t nl = (uint32_t)strlen(name), dt = (uint32_t)dtype, nd = (uint32_t)ndim;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= dims[i];
    int ok = fwrite(&nl, 4, 1, d->f) == 1 && fwrite(name, 1, nl, d->f) == nl && fwrite(&dt, 4, 1, d->f) == 1 &&
             fwrite(&nd, 4, 1, d->f) == 1 && fwrite(dims, 8, (size_t)ndim, d->f) == (size_t)ndim &&
             fwrite(data, 4, (size_t)n, d->f) == (size_t)n;
    d->failed |= !ok;
    d->count++;
}

int dump_close(dump_file *d, unpad_err *err)
{
    int ok = !d->failed && fseek(d->f, 12, SEEK_SET) == 0 && fwrite(&d->count, 4, 1, d->f) == 1;
    int e = errno;
    unpad_outfile *o = d->o;
    d->f = NULL;
    d->o = NULL;
    if (ok)
        return outfile_commit(o, err); /* flush, sync, rename; errors name the file */
    outfile_abort(o);
    return unpad_fail(err, UNPAD_EIO, d->path, 0, "write failed (%s)", strerror(e ? e : EIO));
}

int dump_params(dump_file *d, bert *b, int which, unpad_err *err)
{
    int64_t N = bert_param_count(b);
    float *all = malloc((size_t)N * 4);
    if (!all)
        return unpad_fail(err, UNPAD_ENOMEM, d->path, 0, "out of host memory for %lld parameters", (long long)N);
    cudaCheck(cudaDeviceSynchronize());
    if (which >= 1) {
        cudaCheck(cudaMemcpy(all, which == 1 ? bert_grad(b) : bert_master(b), (size_t)N * 4, cudaMemcpyDeviceToHost));
    } else {
        floatX *w = malloc((size_t)N * sizeof *w);
        if (!w) {
            free(all);
            return unpad_fail(err, UNPAD_ENOMEM, d->path, 0, "out of host memory for %lld parameters",
                              (long long)N);
        }
        cudaCheck(cudaMemcpy(w, bert_work(b), (size_t)N * sizeof *w, cudaMemcpyDeviceToHost));
        for (int64_t i = 0; i < N; i++)
            all[i] = floatX_to_float(w[i]);
        free(w);
    }
    for (int i = 0; i < bert_tensor_count(b); i++) {
        const bert_tensor *t = bert_tensor_at(b, i);
        int64_t dims[2] = {t->hf_rows, t->cols};
        dump_add(d, t->name, 0, t->cols > 1 ? 2 : 1, dims, all + t->offset);
    }
    free(all);
    return UNPAD_OK;
}
