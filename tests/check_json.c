/* check_json.c — the JSON writer: escaping, numbers that read back exactly, null for what is not
 * finite, misuse refused; every document parses with the tests' reader. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "jsonread.h"

/* Runs the writes of fn into memory; returns the text (caller frees) and the status. */
static char *capture(void (*fn)(json_w *), int pretty, int *rc, unpad_err *e)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    json_w w;
    json_init(&w, f, pretty);
    fn(&w);
    *rc = json_finish(&w, e);
    fclose(f);
    return buf;
}

static void doc(json_w *w)
{
    json_obj(w, NULL);
    json_str(w, "name", "a \"quoted\" \\ back\nslash\t\x01 é");
    json_num(w, "third", 1.0 / 3);
    json_num(w, "big", 1e300);
    json_num(w, "tiny", -4.9e-324);
    json_num(w, "nan", NAN);
    json_num(w, "inf", -INFINITY);
    json_int(w, "count", -9007199254740993LL);
    json_bool(w, "yes", 1);
    json_null(w, "nothing");
    json_str(w, "null_str", NULL);
    json_arr(w, "rows");
    for (int i = 0; i < 3; i++) {
        json_obj(w, NULL);
        json_int(w, "i", i);
        json_num(w, "x", i * 0.1);
        json_end(w);
    }
    json_end(w);
    json_arr(w, "empty");
    json_end(w);
    json_obj(w, "empty_obj");
    json_end(w);
    json_end(w);
}

START_TEST(test_document_round_trip)
{
    for (int pretty = 0; pretty < 2; pretty++) {
        int rc;
        unpad_err e = {0};
        char *text = capture(doc, pretty, &rc, &e);
        ck_assert_msg(rc == UNPAD_OK, "%s", e.msg);
        char why[160];
        jr_node *v = jr_parse(text, why, sizeof why);
        ck_assert_msg(v != NULL, "%s in:\n%s", why, text);
        ck_assert_str_eq(jr_get(v, "name")->str, "a \"quoted\" \\ back\nslash\t\x01 é");
        ck_assert(jr_get(v, "third")->num == 1.0 / 3);
        ck_assert(jr_get(v, "big")->num == 1e300);
        ck_assert(jr_get(v, "tiny")->num == -4.9e-324);
        ck_assert_int_eq(jr_get(v, "nan")->t, JR_NULL);
        ck_assert_int_eq(jr_get(v, "inf")->t, JR_NULL);
        ck_assert(jr_get(v, "count")->is_int);
        ck_assert_int_eq(jr_get(v, "yes")->t, JR_BOOL);
        ck_assert_int_eq(jr_get(v, "nothing")->t, JR_NULL);
        ck_assert_int_eq(jr_get(v, "null_str")->t, JR_NULL);
        const jr_node *rows = jr_get(v, "rows");
        ck_assert_int_eq(rows->n, 3);
        ck_assert(jr_get(rows->kids[2], "x")->num == 2 * 0.1);
        ck_assert(!jr_get(rows->kids[2], "x")->is_int);
        ck_assert_int_eq(jr_get(v, "empty")->n, 0);
        ck_assert_int_eq(jr_get(v, "empty_obj")->t, JR_OBJ);
        /* one line when not pretty (JSON lines), always a final newline */
        size_t len = strlen(text), lines = 0;
        for (size_t i = 0; i < len; i++)
            lines += text[i] == '\n';
        ck_assert_int_eq(text[len - 1], '\n');
        if (!pretty)
            ck_assert_int_eq(lines, 1);
        else
            ck_assert_int_gt(lines, 20);
        jr_free(v);
        free(text);
    }
}
END_TEST

START_TEST(test_numbers_shortest)
{
    char b[40];
    json_format_num(0.1, b, sizeof b);
    ck_assert_str_eq(b, "0.1");
    json_format_num(77712.5, b, sizeof b);
    ck_assert_str_eq(b, "77712.5");
    json_format_num(1.0 / 3, b, sizeof b);
    ck_assert_str_eq(b, "0.3333333333333333");
    json_format_num(NAN, b, sizeof b);
    ck_assert_str_eq(b, "null");
    /* every double of a spread reads back exactly */
    for (double x = 1e-20; x < 1e20; x *= 3.7) {
        json_format_num(x * 1.000000001, b, sizeof b);
        ck_assert(strtod(b, NULL) == x * 1.000000001);
    }
}
END_TEST

/* JSON_LINE: spaced for people, one record a line; json_break puts what follows on a new line. */
static void records(json_w *w)
{
    json_obj(w, NULL);
    json_str(w, "kind", "step");
    json_num_sig(w, "loss", 7.2512345678, 5);
    json_num_fixed(w, "ts", 990, 3);
    json_num_fixed(w, "dur", NAN, 3);
    json_arr(w, "events");
    for (int i = 0; i < 2; i++) {
        json_break(w);
        json_obj(w, NULL);
        json_int(w, "i", i);
        json_end(w);
    }
    json_break(w);
    json_end(w);
    json_end(w);
}

START_TEST(test_line_layout)
{
    int rc;
    unpad_err e = {0};
    char *text = capture(records, JSON_LINE, &rc, &e);
    ck_assert_msg(rc == UNPAD_OK, "%s", e.msg);
    ck_assert_str_eq(text, "{\"kind\": \"step\", \"loss\": 7.2512, \"ts\": 990.000, \"dur\": null, \"events\": [\n"
                           "{\"i\": 0},\n{\"i\": 1}\n]}\n");
    jr_node *v = jr_parse(text, NULL, 0);
    ck_assert_ptr_nonnull(v);
    jr_free(v);
    free(text);
}
END_TEST

static void missing_key(json_w *w) { json_obj(w, NULL); json_int(w, NULL, 1); json_end(w); }
static void key_in_array(json_w *w) { json_arr(w, NULL); json_int(w, "k", 1); json_end(w); }
static void left_open(json_w *w) { json_obj(w, NULL); json_arr(w, "a"); }
static void two_docs(json_w *w) { json_int(w, NULL, 1); json_int(w, NULL, 2); }
static void extra_end(json_w *w) { json_obj(w, NULL); json_end(w); json_end(w); }
static void nothing(json_w *w) { (void)w; }

START_TEST(test_misuse_refused)
{
    struct { void (*fn)(json_w *); const char *why; } cases[] = {
        {missing_key, "without a key"}, {key_in_array, "inside an array"},
        {left_open, "2 levels left open"}, {two_docs, "second top-level"},
        {extra_end, "nothing open"}, {nothing, "no value"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc;
        unpad_err e = {0};
        free(capture(cases[i].fn, 1, &rc, &e));
        ck_assert_int_eq(rc, UNPAD_EINVAL);
        ck_assert_msg(strstr(e.msg, cases[i].why) != NULL, "%s", e.msg);
    }
}
END_TEST

START_TEST(test_reader_refuses_bad_json)
{
    const char *bad[] = {"{\"a\":1,}", "[1 2]", "{a:1}", "\"x\ty\"", "01", "[1] x", "{\"a\"}",
                         "nul", "[", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        jr_node *v = jr_parse(bad[i], NULL, 0);
        ck_assert_msg(v == NULL, "accepted %s", bad[i]);
    }
}
END_TEST

Suite *json_suite(void)
{
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_document_round_trip);
    tcase_add_test(tc, test_numbers_shortest);
    tcase_add_test(tc, test_line_layout);
    tcase_add_test(tc, test_misuse_refused);
    tcase_add_test(tc, test_reader_refuses_bad_json);
    suite_add_tcase(s, tc);
    return s;
}
