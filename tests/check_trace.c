/* check_trace.c — trace rows: the step's operator order, predicted rows read back, and every
 * malformed line refused. */
#include <check.h>
#include <string.h>

#include "cost.h"
#include "testutil.h"
#include "trace.h"

START_TEST(test_predicted_roundtrip)
{
    char p[512];
    model_cfg m;
    hw_spec hw;
    calib_coef c;
    ck_assert_int_eq(model_load(tu_path(p, sizeof p, "models/bert-tiny.cfg"), &m, NULL), UNPAD_OK);
    ck_assert_int_eq(hw_load(tu_path(p, sizeof p, "models/hw/h200-sxm.cfg"), &hw, NULL), UNPAD_OK);
    calib_default(&hw, &c);
    int len[] = {5, 77, 512};
    op_batch b = {.len = len, .n = 3, .fused = 1, .gpus = 2, .dropout = 1};
    cost_step st;
    ck_assert_int_eq(cost_predict_step(&m, &hw, &c, &b, &st, NULL), UNPAD_OK);
    char out[] = "/tmp/unpad-test-trace-XXXXXX";
    int fd = mkstemp(out);
    FILE *f = fdopen(fd, "w");
    trace_write_header(f);
    double end = trace_emit_predicted(f, hw.name, m.name, 2, 1, 7, m.layers, &st, 0);
    fclose(f);
    trace_set set = {0};
    unpad_err e = {0};
    ck_assert_int_eq(trace_read(out, &set, &e), UNPAD_OK);
    /* 2 layers x 14 encoder operators + 11 others (exchange and all-reduce on 2 GPUs). */
    ck_assert_int_eq(set.n, 2 * 14 + 11);
    double sum = 0;
    for (size_t i = 0; i < set.n; i++) {
        ck_assert_int_eq(set.rows[i].rank, 1);
        ck_assert_int_eq(set.rows[i].step, 7);
        sum += set.rows[i].dur_us;
    }
    ck_assert_double_eq_tol(sum, end, 0.05);
    ck_assert_str_eq(op_name((op_id)set.rows[2].op), "qkv_fwd");
    ck_assert_int_eq(set.rows[2].tokens, 5 + 77 + 512);
    trace_set_free(&set);
    unlink(out);
}
END_TEST

/* The step's operator order: every operator once per layer or once per step, forward layers up,
 * backward layers down, the collectives only on several GPUs. */
START_TEST(test_step_order)
{
    for (int gpus = 1; gpus <= 4; gpus += 3) {
        int L = 3, n = 0, seen[OP_COUNT] = {0}, last_layer = -1;
        op_id op, first = OP_COUNT, prev = OP_COUNT, before = OP_COUNT;
        int layer;
        trace_step_iter it;
        trace_step_begin(&it, L, gpus);
        while (trace_step_next(&it, &op, &layer)) {
            if (n == 0)
                first = op;
            ck_assert_int_eq(layer >= 0, op_is_per_layer(op));
            if (op == OP_QKV_FWD) { /* forward layers ascend */
                ck_assert_int_eq(layer, last_layer + 1);
                last_layer = layer;
            }
            if (op == OP_FFN_LN_BWD) /* backward layers descend, after the heads */
                ck_assert_int_eq(layer, L - 1 - seen[op]);
            seen[op]++;
            before = prev;
            prev = op;
            n++;
        }
        ck_assert_int_eq(trace_step_next(&it, &op, &layer), 0); /* stays at the end */
        ck_assert_int_eq(n, 14 * L + (gpus > 1 ? 11 : 9));
        for (int o = 0; o < OP_COUNT; o++)
            ck_assert_int_eq(seen[o], op_is_per_layer((op_id)o) ? L
                                      : o == OP_EXCHANGE || o == OP_ALLREDUCE ? gpus > 1 : 1);
        ck_assert_int_eq(first, gpus > 1 ? OP_EXCHANGE : OP_EMBED_FWD);
        ck_assert_int_eq(prev, OP_LAMB);
        ck_assert_int_eq(before, gpus > 1 ? OP_ALLREDUCE : OP_EMBED_BWD);
    }
}
END_TEST

static const char *read_error(const char *body)
{
    static unpad_err e;
    char p[512], text[4096];
    snprintf(text, sizeof text, "%s\n%s", TRACE_HEADER, body);
    tu_write_tmp(p, sizeof p, ".csv", text);
    trace_set set = {0};
    memset(&e, 0, sizeof e);
    int rc = trace_read(p, &set, &e);
    ck_assert_int_ne(rc, UNPAD_OK);
    ck_assert_int_eq(set.n, 0); /* nothing half-read is kept */
    trace_set_free(&set);
    unlink(p);
    return strchr(e.msg, ':');
}

START_TEST(test_bad_rows)
{
    const char *ok = "h200,bert,1,0,0,qkv_fwd,0,-1,-1,2,400,100000,300,1e9,1e6,0,12.5\n";
    char buf[1024];
    snprintf(buf, sizeof buf, "%sh200,bert,1,0,0,qkv_fwd,0,-1,-1,2,400,100000,300,1e9,1e6,0\n", ok);
    const char *m = read_error(buf);
    ck_assert_msg(strstr(m, ":3: expected 17 columns, found 16"), "%s", m);
    m = read_error("h200,bert,1,0,0,qkv_fwdx,0,-1,-1,2,400,100000,300,1e9,1e6,0,1\n");
    ck_assert_msg(strstr(m, ":2: unknown operator 'qkv_fwdx'"), "%s", m);
    m = read_error("h200,bert,1,0,0,qkv_fwd,0,-1,-1,2,400,100000,300,1e9,1e6,0,-3\n");
    ck_assert_msg(strstr(m, ":2: bad value '-3' in column 'dur_us'"), "%s", m);
    m = read_error("h200,bert,2,2,0,qkv_fwd,0,-1,-1,2,400,100000,300,1e9,1e6,0,3\n");
    ck_assert_msg(strstr(m, ":2: rank 2 is not below gpus 2"), "%s", m);
    m = read_error("h200,bert,1,0,zero,qkv_fwd,0,-1,-1,2,400,100000,300,1e9,1e6,0,3\n");
    ck_assert_msg(strstr(m, ":2: bad value 'zero' in column 'step'"), "%s", m);
    /* sum_len2 between tokens^2 / seqs (80,000) and tokens x longest (120,000) */
    m = read_error("h200,bert,1,0,0,qkv_fwd,0,-1,-1,2,400,70000,300,1e9,1e6,0,3\n");
    ck_assert_msg(strstr(m, ":2: sum_len2 70000 cannot come from 2 sequences of 400 tokens, the longest 300 "
                            "(expected 80000..120000)"), "%s", m);
    m = read_error("h200,bert,1,0,0,qkv_fwd,0,-1,-1,2,400,120001,300,1e9,1e6,0,3\n");
    ck_assert_msg(strstr(m, ":2: sum_len2 120001"), "%s", m);
    /* FMHA groups and streams within the trainer's */
    m = read_error("h200,bert,1,0,0,fmha_fwd,0,64,0,2,400,100000,300,1e9,1e6,0,3\n");
    ck_assert_msg(strstr(m, ":2: bad value '64' in column 'group'"), "%s", m);
    m = read_error("h200,bert,1,0,0,fmha_fwd,0,0,8,2,400,100000,300,1e9,1e6,0,3\n");
    ck_assert_msg(strstr(m, ":2: bad value '8' in column 'stream'"), "%s", m);
    char p[512];
    tu_write_tmp(p, sizeof p, ".csv", "a,b,c\n1,2,3\n");
    trace_set set = {0};
    unpad_err e = {0};
    ck_assert_int_eq(trace_read(p, &set, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, ":1: not a trace"), "%s", e.msg);
    unlink(p);
}
END_TEST

/* Parses header + body (len bytes, may hold NUL) as "t.csv"; returns the status, message in e. */
static int parse(const char *body, size_t len, trace_set *set, unpad_err *e)
{
    static char text[65536];
    size_t h = strlen(TRACE_HEADER) + 1;
    ck_assert_uint_lt(h + len, sizeof text);
    memcpy(text, TRACE_HEADER "\n", h);
    memcpy(text + h, body, len);
    memset(e, 0, sizeof *e);
    return trace_parse("t.csv", text, h + len, set, e);
}

/* A NUL byte once ended the trace there: the rows after it were dropped with exit 0. */
START_TEST(test_nul_byte_refused)
{
    static const char body[] = "h200,bert,1,0,0,qkv_fwd,0,-1,-1,2,400,100000,300,1e9,1e6,0,12.5\n"
                               "h200,bert,1,0,1,qkv_fwd,0,-1,-1,2,400,100000,300,1e9,1e6,0,1\0\n"
                               "h200,bert,1,0,2,qkv_fwd,0,-1,-1,2,400,100000,300,1e9,1e6,0,13\n";
    trace_set set = {0};
    unpad_err e;
    ck_assert_int_eq(parse(body, sizeof body - 1, &set, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "t.csv:3: a NUL byte (byte offset 227)"), "%s", e.msg);
    ck_assert_int_eq(set.n, 0);
    trace_set_free(&set);
}
END_TEST

/* A row was once copied into 1024 bytes: a duration written with many digits was cut and read as
 * another number (here 12.5 written with 1100 leading zeros read as 0). */
START_TEST(test_long_rows_read_whole_or_refused)
{
    static char body[16384];
    int n = snprintf(body, sizeof body, "h200,bert,1,0,0,qkv_fwd,0,-1,-1,2,400,100000,300,1e9,1e6,0,");
    memset(body + n, '0', 1100);
    snprintf(body + n + 1100, sizeof body - (size_t)n - 1100, "12.5\n");
    trace_set set = {0};
    unpad_err e;
    ck_assert_msg(parse(body, strlen(body), &set, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_int_eq(set.n, 1);
    ck_assert_double_eq(set.rows[0].dur_us, 12.5);
    trace_set_free(&set);
    memset(body + n, '0', UNPAD_LINE_MAX);
    snprintf(body + n + UNPAD_LINE_MAX, sizeof body - (size_t)n - UNPAD_LINE_MAX, "12.5\n");
    ck_assert_int_eq(parse(body, strlen(body), &set, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "t.csv:2: line of 4159 characters, longer than the 4096"), "%s", e.msg);
    ck_assert_int_eq(set.n, 0);
}
END_TEST

/* step was accepted up to 2^40 and stored in an int: 2^32 + 7 became step 7. Numbers without an
 * end (1e300 microseconds) made sums overflow downstream. */
START_TEST(test_ranges_fit_their_types)
{
    trace_set set = {0};
    unpad_err e;
    const char *b = "h200,bert,1,0,4294967303,qkv_fwd,0,-1,-1,2,400,100000,300,1e9,1e6,0,3\n";
    ck_assert_int_eq(parse(b, strlen(b), &set, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "t.csv:2: bad value '4294967303' in column 'step' (expected an "
                                "integer in [0, 2147483647])"), "%s", e.msg);
    b = "h200,bert,1,0,2147483647,qkv_fwd,0,-1,-1,2,400,100000,300,1e9,1e6,0,3\n";
    ck_assert_msg(parse(b, strlen(b), &set, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_int_eq(set.rows[0].step, 2147483647);
    trace_set_free(&set);
    b = "h200,bert,1,0,0,qkv_fwd,0,-1,-1,2,400,100000,300,1e9,1e6,0,1e300\n";
    ck_assert_int_eq(parse(b, strlen(b), &set, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "t.csv:2: bad value '1e300' in column 'dur_us' (expected a number "
                                "in [0, 1e+15])"), "%s", e.msg);
    b = "h200,bert,1,0,0,qkv_fwd,0,-1,-1,2,400,100000,300,1e31,1e6,0,1\n";
    ck_assert_int_eq(parse(b, strlen(b), &set, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "column 'flops'"), "%s", e.msg);
    /* the header exactly, not a prefix */
    char text[512];
    snprintf(text, sizeof text, "%s,extra\n", TRACE_HEADER);
    ck_assert_int_eq(trace_parse("t.csv", text, strlen(text), &set, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "t.csv:1: not a trace"), "%s", e.msg);
}
END_TEST

/* The trainer's products line: read into the set, written and read back, refused when it names
 * something else or contradicts the rows already read. */
START_TEST(test_products_line)
{
    const char *row = "h200,bert,1,0,0,qkv_fwd,0,-1,-1,2,400,100000,300,1e9,1e6,0,3\n";
    char text[1024];
    trace_set set = {0};
    unpad_err e;
    snprintf(text, sizeof text, "%s\n%s", TRACE_HEADER, row); /* none: bf16 */
    ck_assert_msg(trace_parse("t.csv", text, strlen(text), &set, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_int_eq(set.products, TRACE_BF16);
    ck_assert_int_eq(set.products_line, 0);
    trace_set_free(&set);
    memset(&set, 0, sizeof set);
    snprintf(text, sizeof text, "# a comment\n# products: fp8\n%s\n%s", TRACE_HEADER, row);
    ck_assert_msg(trace_parse("t.csv", text, strlen(text), &set, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_int_eq(set.products, TRACE_FP8);
    ck_assert_int_eq(set.products_line, 2);
    ck_assert_int_eq(set.n, 1);
    /* a second file of other products into the same set: refused, the set as it was */
    snprintf(text, sizeof text, "# products: bf16\n%s\n%s", TRACE_HEADER, row);
    ck_assert_int_eq(trace_parse("u.csv", text, strlen(text), &set, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "u.csv:1: products bf16, where the rows before were measured with fp8"), "%s", e.msg);
    ck_assert_int_eq(set.products, TRACE_FP8);
    ck_assert_int_eq(set.products_line, 2);
    ck_assert_int_eq(set.n, 1);
    trace_set_free(&set);
    const char *bad[] = {"# products: int8", "# products: fp8 fp32", "# products:", "# products: FP8"};
    for (int i = 0; i < 4; i++) {
        memset(&set, 0, sizeof set);
        snprintf(text, sizeof text, "%s\n%s\n%s", bad[i], TRACE_HEADER, row);
        ck_assert_int_eq(trace_parse("t.csv", text, strlen(text), &set, &e), UNPAD_EINVAL);
        ck_assert_msg(strstr(e.msg, "t.csv:1: '") && strstr(e.msg, "expected '# products: bf16'"), "%s", e.msg);
        ck_assert_int_eq(set.products_line, 0);
    }
    /* written as the trainer writes it, read back */
    char out[] = "/tmp/unpad-test-products-XXXXXX";
    int fd = mkstemp(out);
    FILE *f = fdopen(fd, "w");
    trace_write_products(f, TRACE_FP32);
    trace_write_header(f);
    fputs(row, f);
    fclose(f);
    memset(&set, 0, sizeof set);
    ck_assert_msg(trace_read(out, &set, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_int_eq(set.products, TRACE_FP32);
    ck_assert_str_eq(trace_products_name(set.products), "fp32");
    trace_set_free(&set);
    unlink(out);
}
END_TEST

Suite *trace_suite(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_predicted_roundtrip);
    tcase_add_test(tc, test_step_order);
    tcase_add_test(tc, test_bad_rows);
    tcase_add_test(tc, test_nul_byte_refused);
    tcase_add_test(tc, test_long_rows_read_whole_or_refused);
    tcase_add_test(tc, test_ranges_fit_their_types);
    tcase_add_test(tc, test_products_line);
    suite_add_tcase(s, tc);
    return s;
}
