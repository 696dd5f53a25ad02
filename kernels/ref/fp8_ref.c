/* fp8_ref.c — reference bf16 -> FP8 casts (kernels/fp8.cu) and the two FP8 formats' encoding in
 * plain C: E4M3 (bias 7, 3 mantissa bits, largest finite 448, no infinities, NaN S.1111.111) and
 * E5M2 (bias 15, 2 mantissa bits, largest finite 57344, infinities and NaNs as IEEE). Rounding is
 * computed in double, where every step here is exact: a float divided by a power of two, rounded
 * to an integer by rint (ties to even in the default rounding mode), multiplied back. */
#include <math.h>
#include <stddef.h>

#include "ref.h"

typedef struct {
    int mbits, bias;
    double max;
    uint8_t max_code, nan_code;
} fp8_fmt_info;

static fp8_fmt_info fmt_info(fp8_format f)
{
    if (f == FP8_E4M3)
        return (fp8_fmt_info){3, 7, 448.0, 0x7e, 0x7f};
    return (fp8_fmt_info){2, 15, 57344.0, 0x7b, 0x7f};
}

uint8_t fp8_from_float_ref(float x, fp8_format fmt)
{
    fp8_fmt_info f = fmt_info(fmt);
    uint8_t sign = signbit(x) ? 0x80 : 0x00;
    if (isnan(x))
        return f.nan_code;
    double a = fabs((double)x);
    if (a > f.max) /* saturated: every such value either rounds to max or beyond it */
        return sign | f.max_code;
    if (a == 0.0)
        return sign;
    const int emin = 1 - f.bias; /* the smallest normal's exponent; below it the spacing stays */
    int e;
    frexp(a, &e);
    e = e - 1 < emin ? emin : e - 1; /* a = m 2^e, m in [1, 2) for normals */
    double q = ldexp(1.0, e - f.mbits); /* the spacing of FP8 values around a */
    double v = rint(a / q) * q;         /* ties to even: the integer's parity is the last mantissa bit's */
    if (v == 0.0)
        return sign;
    int ev;
    frexp(v, &ev);
    ev -= 1; /* rounding may have carried into the next binade: v's own exponent */
    if (ev < emin) /* subnormal: exponent field 0, v = mantissa 2^(emin - mbits) */
        return sign | (uint8_t)(v / ldexp(1.0, emin - f.mbits));
    uint8_t mant = (uint8_t)(v / ldexp(1.0, ev - f.mbits) - (1 << f.mbits));
    return sign | (uint8_t)((ev + f.bias) << f.mbits) | mant;
}

float fp8_to_float_ref(uint8_t q, fp8_format fmt)
{
    fp8_fmt_info f = fmt_info(fmt);
    int ebits = 7 - f.mbits, e = (q >> f.mbits) & ((1 << ebits) - 1), m = q & ((1 << f.mbits) - 1);
    double s = q & 0x80 ? -1.0 : 1.0;
    if (fmt == FP8_E4M3 && e == 15 && m == 7)
        return NAN;
    if (fmt == FP8_E5M2 && e == 31)
        return m ? NAN : (float)(s * INFINITY);
    if (e == 0)
        return (float)(s * ldexp((double)m, 1 - f.bias - f.mbits));
    return (float)(s * ldexp(1.0 + (double)m / (1 << f.mbits), e - f.bias));
}

/* max(*amax, |x|), a NaN x ignored (fmaxf's rule, as the kernels). */
static void amax_add(float *amax, float x)
{
    if (amax && !isnan(x) && fabsf(x) > *amax)
        *amax = fabsf(x);
}

void cast_fp8_ref(uint8_t *out, float *amax, const float *in, const float *scale, int rows, int cols,
                  fp8_format fmt)
{
    for (size_t i = 0; i < (size_t)rows * cols; i++) {
        float v = in[i] * scale[0]; /* rounded to float, as the kernel's fp32 multiply */
        out[i] = fp8_from_float_ref(v, fmt);
        amax_add(amax, in[i]);
    }
}

void cast_transpose_fp8_ref(uint8_t *out, uint8_t *out_t, int ld_t, float *amax, const float *in,
                            const float *scale, int rows, int cols, fp8_format fmt)
{
    cast_fp8_ref(out, amax, in, scale, rows, cols, fmt);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            out_t[(size_t)c * ld_t + r] = out[(size_t)r * cols + c];
}

void fp8_scales_update_ref(float *amax, float *history, float *scale, float *inv, const uint8_t *fmt, int n,
                           int len, int pos, int init)
{
    for (int i = 0; i < n; i++) {
        float a = isfinite(amax[i]) ? amax[i] : 0.0f;
        amax[i] = 0.0f;
        for (int j = 0; j < len; j++)
            if (init || j == pos)
                history[(size_t)i * len + j] = a;
        double m = 0.0;
        for (int j = 0; j < len; j++)
            m = fmax(m, history[(size_t)i * len + j]);
        if (!(m > 0.0))
            continue;
        double fmax_ = fmt_info((fp8_format)fmt[i]).max;
        int k = -126;
        while (k < 126 && ldexp(m, k + 1) <= fmax_)
            k++;
        scale[i] = (float)ldexp(1.0, k);
        inv[8 * i] = (float)ldexp(1.0, -k);
        inv[8 * i + 4] = scale[i];
    }
}
