/* train_warm.c — after the first step, the GEMM plans the rest of the run will need, each launched
 * once, so that no later step stalls on a cuBLASLt heuristic query or a kernel load when its token
 * count enters a new shape bucket (gemm.h). The range covers the micro-batches at hand with room on both sides: predictions from
 * half the fewest to tokens at 1.5x the most (capped at the buffers' size), and sequence counts. */
#include <time.h>

#include "gpu/trainer.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int trainer_warm(trainer *t, unpad_err *err)
{
    long tmax = 0, pmin = -1;
    int nmin = -1, nmax = 0;
    int sets = t->have_next ? 2 : 1; /* this step's micro-batches and the prefetched ones */
    for (int i = 0; i < sets * t->K; i++) {
        const shard_batch *mb = &t->bufs[(size_t)((t->cur + i / t->K) % 2) * t->K + i % t->K];
        tmax = mb->T > tmax ? mb->T : tmax;
        pmin = pmin < 0 || mb->P < pmin ? mb->P : pmin;
        nmin = nmin < 0 || mb->n < nmin ? mb->n : nmin;
        nmax = mb->n > nmax ? mb->n : nmax;
    }
    double t0 = now_s();
    long hi = tmax + tmax / 2 < t->opt.max_tokens ? tmax + tmax / 2 : t->opt.max_tokens;
    long lo = pmin / 2 > 1 ? pmin / 2 : 1;
    int made = 0, made_n = 0, ran = 0, ran_n = 0, rc;
    if ((rc = bert_gemm_warm(t->b, (int)lo, (int)(hi > lo ? hi : lo), t->s, &made, &ran, err)))
        return rc;
    int n_hi = 2 * nmax < t->seq_cap ? 2 * nmax : t->seq_cap;
    if (nmin / 2 < lo &&
        (rc = bert_gemm_warm(t->b, nmin / 2 > 1 ? nmin / 2 : 1, n_hi, t->s, &made_n, &ran_n, err)))
        return rc;
    printf("  warm-up: %d GEMM plans for %ld..%ld tokens and predictions, %d for %d..%d sequences, "
           "%d of them launched once to load their kernels, in %.2f s\n",
           made, lo, hi, made_n, nmin / 2 > 1 ? nmin / 2 : 1, n_hi, ran + ran_n, now_s() - t0);
    return UNPAD_OK;
}
