/* check_cfg.c — the config reader: model and hardware files, and every kind of bad line. */
#include <check.h>
#include <stddef.h>
#include <string.h>

#include "model.h"
#include "plan.h"
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

/* Model and GPU names go into trace rows (CSV) and name files under models/: a comma, a space or a
 * name longer than a trace row's column once went into `predict --csv` rows no reader took back. */
START_TEST(test_names_are_words)
{
    int code;
    char buf[1024];
    static const char *bad[] = {"a,b", "bert large", "\"bert\"", "../x", "a;b"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(buf, sizeof buf, "%s", GOOD);
        char text[1200];
        snprintf(text, sizeof text, "name = %s\n%s", bad[i], strchr(buf, '\n') + 1);
        const char *msg = model_error(text, &code);
        ck_assert_int_eq(code, UNPAD_EINVAL);
        ck_assert_msg(strstr(msg, "m.cfg:1: bad name"), "%s: %s", bad[i], msg);
    }
    snprintf(buf, sizeof buf, "name = %064d\n%s", 0, strchr(GOOD, '\n') + 1);
    ck_assert_msg(strstr(model_error(buf, &code), "m.cfg:1: bad name"), "64 characters");
    snprintf(buf, sizeof buf, "name = %063d\n%s", 0, strchr(GOOD, '\n') + 1);
    ck_assert_str_eq(model_error(buf, &code), "");
    ck_assert_str_eq(model_error("name = Bert_v2.1+x\nlayers = 2\nhidden = 128\nheads = 2\nffn = 512\n"
                                 "vocab = 100\nmax_position = 512\n", &code), "");
    hw_spec hw;
    unpad_err e = {0};
    ck_assert_int_eq(cfg_parse("h.cfg", "name = a b\n", 11, hw_schema, hw_schema_len, &hw, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "h.cfg:1: bad name 'a b' for key 'name'"), "%s", e.msg);
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

/* A NUL byte once ended a config there: the keys after it were silently left at their defaults. */
START_TEST(test_nul_byte_refused)
{
    static const char text[] = "name = t\nlayers = 2\0\nhidden = 128\n";
    model_cfg m;
    unpad_err e = {0};
    int code = cfg_parse("m.cfg", text, sizeof text - 1, model_schema, model_schema_len, &m, &e);
    ck_assert_int_eq(code, UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "m.cfg:2: a NUL byte (byte offset 19)"), "%s", e.msg);
    /* plans, through the same reader */
    static const char plan[] = "policy = kk\ncount = equal\0\ngpus = 2\nbatch = 4\n";
    unpad_plan p;
    code = plan_parse("p.cfg", plan, sizeof plan - 1, &p, &e);
    ck_assert_int_eq(code, UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "p.cfg:2: a NUL byte (byte offset 25)"), "%s", e.msg);
    /* and from a file */
    char path[512];
    tu_write_tmp(path, sizeof path, ".cfg", "");
    FILE *f = fopen(path, "wb");
    fwrite(text, 1, sizeof text - 1, f);
    fclose(f);
    ck_assert_int_eq(model_load(path, &m, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, path) && strstr(e.msg, ":2: a NUL byte"), "%s", e.msg);
    unlink(path);
}
END_TEST

/* Lines are read whole up to UNPAD_LINE_MAX characters and refused beyond, naming the line. */
START_TEST(test_long_lines)
{
    static char text[16384];
    int n = snprintf(text, sizeof text, "%shidden_dropout = ", GOOD);
    memset(text + n, '0', 2000); /* 2000 leading zeros: once past a 1024-byte buffer */
    snprintf(text + n + 2000, sizeof text - (size_t)n - 2000, "0.25\n");
    model_cfg m;
    unpad_err e = {0};
    ck_assert_msg(cfg_parse("m.cfg", text, strlen(text), model_schema, model_schema_len, &m, &e) ==
                      UNPAD_OK, "%s", e.msg);
    ck_assert_double_eq(m.hidden_dropout, 0.25);
    n = snprintf(text, sizeof text, "name = t\n# ");
    memset(text + n, 'x', UNPAD_LINE_MAX);
    snprintf(text + n + UNPAD_LINE_MAX, sizeof text - (size_t)n - UNPAD_LINE_MAX, "\nlayers = 2\n");
    int code = cfg_parse("m.cfg", text, strlen(text), model_schema, model_schema_len, &m, &e);
    ck_assert_int_eq(code, UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "m.cfg:2: line of 4098 characters, longer than the 4096"), "%s",
                  e.msg);
}
END_TEST

/* An integer key whose schema range goes past an int once wrapped when stored. */
typedef struct {
    int big;
} wide_cfg;

START_TEST(test_int_keys_never_wrap)
{
    static const cfg_field schema[] = {
        {"big", CFG_INT, offsetof(wide_cfg, big), 0, 1e12, CFG_REQUIRED, "a wide range"}};
    wide_cfg w = {0};
    unpad_err e = {0};
    const char *t = "big = 4294967301\n"; /* 2^32 + 5: once stored as 5 */
    int code = cfg_parse("w.cfg", t, strlen(t), schema, 1, &w, &e);
    ck_assert_int_eq(code, UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "w.cfg:1: big = 4294967301 is out of range"), "%s", e.msg);
    ck_assert_int_eq(w.big, 0);
    t = "big = 2147483647\n";
    ck_assert_int_eq(cfg_parse("w.cfg", t, strlen(t), schema, 1, &w, &e), UNPAD_OK);
    ck_assert_int_eq(w.big, 2147483647);
    /* plans: seed is an int in the file */
    unpad_plan p;
    t = "policy = kk\ncount = equal\ngpus = 2\nbatch = 4\nweights = tokens\nseed = 4294967297\n";
    ck_assert_int_eq(plan_parse("p.cfg", t, strlen(t), &p, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "p.cfg:6: seed = 4294967297 is out of range"), "%s", e.msg);
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
    ck_assert_str_eq(a.device, b.device);
    unlink(out);
}
END_TEST

Suite *cfg_suite(void)
{
    Suite *s = suite_create("cfg");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_model_files_load);
    tcase_add_test(tc, test_cfg_errors_name_file_line_reason);
    tcase_add_test(tc, test_names_are_words);
    tcase_add_test(tc, test_model_cross_checks_and_missing_file);
    tcase_add_test(tc, test_cfg_write_roundtrip);
    tcase_add_test(tc, test_nul_byte_refused);
    tcase_add_test(tc, test_long_lines);
    tcase_add_test(tc, test_int_keys_never_wrap);
    suite_add_tcase(s, tc);
    return s;
}
