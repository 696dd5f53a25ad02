/* check_cfg.c — the config reader: model and hardware files, and every kind of bad line. */
#include <check.h>
#include <string.h>

#include "model.h"
#include "testutil.h"

START_TEST(test_model_files_load)
{
    char p[512];
    model_cfg m;
    unpad_err e = {0};
    ck_assert_int_eq(model_load(tu_path(p, sizeof p, "models/bert-large.cfg"), &m, &e), UNPAD_OK);
    ck_assert_int_eq(m.layers, 24);
    ck_assert_int_eq(m.hidden, 1024);
    ck_assert_int_eq(m.heads, 16);
    ck_assert_int_eq(m.ffn, 4096);
    ck_assert_int_eq(m.vocab_pad, 30528);
    /* BertForPreTraining (tied decoder): 335,141,888 in the encoder + embeddings (Hugging Face's
     * count for BertModel with pooler) + 1,084,220 in the MLM transform/decoder bias and NSP head. */
    ck_assert_int_eq(model_param_count(&m), 336226108L);
    ck_assert_int_eq(model_load(tu_path(p, sizeof p, "models/bert-base.cfg"), &m, &e), UNPAD_OK);
    ck_assert_int_eq(m.layers, 12);
    ck_assert_int_eq(model_load(tu_path(p, sizeof p, "models/bert-tiny.cfg"), &m, &e), UNPAD_OK);
    hw_spec hw;
    ck_assert_int_eq(hw_load(tu_path(p, sizeof p, "models/hw/h200-sxm.cfg"), &hw, &e), UNPAD_OK);
    ck_assert_int_eq(hw.sms, 132);
    ck_assert_double_eq_tol(hw.peak_bf16_tflops, 989.5, 1e-9);
    ck_assert_int_eq(hw_load(tu_path(p, sizeof p, "models/hw/a100-sxm4-40g.cfg"), &hw, &e), UNPAD_OK);
    ck_assert_int_eq(hw.sms, 108);
}
END_TEST

static const char *GOOD =
    "name = t\nlayers = 2\nhidden = 128\nheads = 2\nffn = 512\nvocab = 100\nmax_position = 512\n";

/* Parses text as a model config; returns the error message. */
static const char *model_error(const char *text, int *code)
{
    static unpad_err e;
    model_cfg m;
    memset(&e, 0, sizeof e);
    *code = cfg_parse("m.cfg", text, strlen(text), model_schema, model_schema_len, &m, &e);
    return e.msg;
}

START_TEST(test_cfg_errors_name_file_line_reason)
{
    int code;
    char buf[1024];
    snprintf(buf, sizeof buf, "%slayers_x = 3\n", GOOD);
    const char *msg = model_error(buf, &code);
    ck_assert_int_eq(code, UNPAD_EINVAL);
    ck_assert_msg(strstr(msg, "m.cfg:8: unknown key 'layers_x'"), "%s", msg);
    ck_assert_msg(strstr(msg, "8 | layers_x = 3"), "%s", msg);

    msg = model_error("name = t\nlayers = two\n", &code);
    ck_assert_msg(strstr(msg, "m.cfg:2: bad number 'two' for key 'layers'"), "%s", msg);

    msg = model_error("name = t\nlayers = 1000\n", &code);
    ck_assert_msg(strstr(msg, "m.cfg:2: layers = 1000 is out of range"), "%s", msg);

    msg = model_error("name = t\nlayers 3\n", &code);
    ck_assert_msg(strstr(msg, "m.cfg:2: expected 'key = value'"), "%s", msg);

    msg = model_error("name = t\nlayers = 3\nlayers = 4\n", &code);
    ck_assert_msg(strstr(msg, "m.cfg:3: key 'layers' given twice (first on line 2)"), "%s", msg);

    msg = model_error("name = t\nlayers = 3\n", &code);
    ck_assert_msg(strstr(msg, "m.cfg: missing required key 'hidden'"), "%s", msg);

    msg = model_error("name = t\nlayers =  # nothing\n", &code);
    ck_assert_msg(strstr(msg, "m.cfg:2: key 'layers' has no value"), "%s", msg);
}
END_TEST

START_TEST(test_model_cross_checks_and_missing_file)
{
    char p[512];
    model_cfg m;
    unpad_err e = {0};
    ck_assert_int_eq(model_load("/nonexistent/model.cfg", &m, &e), UNPAD_EIO);
    ck_assert_msg(strstr(e.msg, "/nonexistent/model.cfg: cannot open"), "%s", e.msg);
    char text[1024];
    snprintf(text, sizeof text, "%s", GOOD);
    char *h = strstr(text, "heads = 2");
    h[8] = '4'; /* 128 / 4 = 32: not the kernels' head size */
    tu_write_tmp(p, sizeof p, ".cfg", text);
    ck_assert_int_eq(model_load(p, &m, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "must be 64"), "%s", e.msg);
    unlink(p);
}
END_TEST

START_TEST(test_cfg_write_roundtrip)
{
    char p[512];
    hw_spec a, b;
    unpad_err e = {0};
    ck_assert_int_eq(hw_load(tu_path(p, sizeof p, "models/hw/h200-sxm.cfg"), &a, &e), UNPAD_OK);
    char out[] = "/tmp/unpad-test-hw-XXXXXX";
    int fd = mkstemp(out);
    close(fd);
    ck_assert_int_eq(cfg_write(out, "roundtrip", hw_schema, hw_schema_len, &a, &e), UNPAD_OK);
    ck_assert_int_eq(hw_load(out, &b, &e), UNPAD_OK);
    ck_assert_double_eq_tol(a.mem_bw_gbs, b.mem_bw_gbs, 1e-9);
    ck_assert_str_eq(a.name, b.name);
    unlink(out);
}
END_TEST

Suite *cfg_suite(void)
{
    Suite *s = suite_create("cfg");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_model_files_load);
    tcase_add_test(tc, test_cfg_errors_name_file_line_reason);
    tcase_add_test(tc, test_model_cross_checks_and_missing_file);
    tcase_add_test(tc, test_cfg_write_roundtrip);
    suite_add_tcase(s, tc);
    return s;
}
