/* fuzz_cfg.c — `key = value` configs (sim/cfg.c) against the model, hardware and calibration
 * schemas: a file that loads has every number inside its key's range. */
#include "calib.h"
#include "fuzz.h"
#include "model.h"

static void parse(const char *text, size_t size, const cfg_field *schema, size_t n, void *dst)
{
    for (size_t i = 0; i < n; i++) { /* keys the file leaves out keep an in-range value */
        char *p = (char *)dst + schema[i].offset;
        if (schema[i].type == CFG_INT)
            *(int *)p = (int)schema[i].min;
        else if (schema[i].type == CFG_DOUBLE)
            *(double *)p = schema[i].min;
    }
    unpad_err e = {0};
    int rc = cfg_parse(FUZZ_NAME, text, size, schema, n, dst, &e);
    if (rc) {
        fuzz_check_refusal(rc, &e);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const char *p = (const char *)dst + schema[i].offset;
        if (schema[i].type == CFG_INT) {
            int v = *(const int *)p;
            FUZZ_CHECK(v >= schema[i].min && v <= schema[i].max, "%s = %d", schema[i].key, v);
        } else if (schema[i].type == CFG_DOUBLE) {
            double v = *(const double *)p;
            FUZZ_CHECK(v >= schema[i].min && v <= schema[i].max, "%s = %g", schema[i].key, v);
        } else if (schema[i].type == CFG_STRING || schema[i].type == CFG_NAME) {
            FUZZ_CHECK(memchr(p, '\0', CFG_STR_LEN) != NULL, "%s unterminated", schema[i].key);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    model_cfg m;
    hw_spec hw;
    calib_coef c;
    memset(&m, 0, sizeof m);
    memset(&hw, 0, sizeof hw);
    memset(&c, 0, sizeof c);
    parse(text, size, model_schema, model_schema_len, &m);
    parse(text, size, hw_schema, hw_schema_len, &hw);
    parse(text, size, calib_schema, calib_schema_len, &c);
    return 0;
}
