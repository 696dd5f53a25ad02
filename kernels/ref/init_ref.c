/* init_ref.c — reference truncated-normal initialisation and constant fill (kernels/init.cu).
 * The same hash draws as the kernel; the Box-Muller transform in double. */
#include <math.h>
#include <stddef.h>

#include "dropout.h"
#include "ref.h"

/* How close to the truncation bound a draw must come for float rounding to decide it. */
#define INIT_AMBIGUOUS 1e-4

void init_trunc_normal_ref(float *w, int64_t n, float std, uint64_t seed, uint64_t id,
                           unsigned char *ambiguous)
{
    for (int64_t i = 0; i < n; i++) {
        double z = 0.0;
        int near = 0;
        for (uint64_t k = 0; k < INIT_TRUNC_DRAWS; k++) {
            uint64_t h = dropout_hash(seed, id * INIT_TRUNC_DRAWS + k, (uint64_t)i);
            double u1 = ((double)(h >> 41) + 0.5) / 8388608.0;
            double u2 = (double)((h >> 16) & 0xffffff) / 16777216.0;
            z = sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
            near |= fabs(fabs(z) - 2.0) < INIT_AMBIGUOUS;
            if (fabs(z) <= 2.0)
                break;
            z = 0.0;
        }
        w[i] = (float)(std * z);
        if (ambiguous)
            ambiguous[i] = (unsigned char)near;
    }
}

void fill_f32_ref(float *w, int64_t n, float v)
{
    for (int64_t i = 0; i < n; i++)
        w[i] = v;
}
