/* fit_transfer.c — a calibration carried to other hardware (an estimate, see fit.h). */
#include "fit.h"

#include <stdio.h>

void fit_transfer(const calib_coef *src, const hw_spec *from, const hw_spec *to, calib_coef *out)
{
    *out = *src;
    snprintf(out->hw, sizeof out->hw, "%s", to->name);
    out->transferred = 1;
    if (from->sms > 0)
        out->gemm_m_half = src->gemm_m_half * to->sms / from->sms;
    if (to->clock_ghz > 0)
    {
        out->attn_cta_us = src->attn_cta_us * from->clock_ghz / to->clock_ghz;
        out->attn_bwd_cta_us = src->attn_bwd_cta_us * from->clock_ghz / to->clock_ghz;
    }
    if (from->launch_us > 0) {
        out->launch_us = src->launch_us * to->launch_us / from->launch_us;
        out->graph_launch_us = src->graph_launch_us * to->launch_us / from->launch_us;
    }
}
