/* check_dist.c — length distributions: the Wikipedia histogram's statistics, parser errors,
 * reproducible sampling. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "dist.h"
#include "testutil.h"

START_TEST(test_wiki_histogram_stats)
{
    char p[512];
    unpad_dist d;
    unpad_err e = {0};
    ck_assert_int_eq(dist_load(tu_path(p, sizeof p, "models/dists/wiki512.csv"), &d, &e), UNPAD_OK);
    dist_stats s;
    dist_compute_stats(&d, &s);
    ck_assert_double_eq_tol(s.count, 16279552, 0.5);
    ck_assert_double_eq_tol(s.mean, 255.83, 0.005);
    ck_assert_int_eq(s.max, 512);
    ck_assert_double_eq_tol(s.share_at_max, 0.234, 0.0005);
    ck_assert_double_eq_tol(dist_padding_fraction(&d, 512), 0.500, 0.0005);
    ck_assert(s.p50 > 150 && s.p50 < 300);
    ck_assert_int_eq(s.p99, 512);
    dist_free(&d);
}
END_TEST

START_TEST(test_list_and_stats_exact)
{
    char p[512];
    unpad_dist d;
    unpad_err e = {0};
    tu_write_tmp(p, sizeof p, ".txt", "# lengths\n1\n2\n3\n4\n\n10\n");
    ck_assert_int_eq(dist_load(p, &d, &e), UNPAD_OK);
    dist_stats s;
    dist_compute_stats(&d, &s);
    ck_assert_double_eq_tol(s.mean, 4.0, 1e-12);
    ck_assert_int_eq(s.min, 1);
    ck_assert_int_eq(s.max, 10);
    ck_assert_int_eq(s.p50, 3);
    ck_assert_double_eq_tol(s.share_at_max, 0.2, 1e-12);
    /* 20 tokens padded to 5 x 10 = 50 slots. */
    ck_assert_double_eq_tol(dist_padding_fraction(&d, 10), 0.6, 1e-12);
    dist_free(&d);
    unlink(p);
}
END_TEST

/* Fractional counts (weights, probabilities) are kept and shown as given, never rounded to whole
 * sequences; whole counts print without decimals. */
START_TEST(test_fractional_counts)
{
    static const struct { const char *text; double total; const char *shown; int fractional; } cases[] = {
        {"length,count\n100,2.5\n", 2.5, "2.5", 1},
        {"length,count\n100,0.3\n200,0.7\n", 1, "1", 1},
        {"length,count\n100,16279551\n200,1\n", 16279552, "16279552", 0},
        {"length,count\n7,0.125\n", 0.125, "0.125", 1},
        {"\xEF\xBB\xBFlength,count\r\n100,2\r\n", 2, "2", 0}, /* a spreadsheet's: byte-order mark, CRLF */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unpad_dist d;
        unpad_err e = {0};
        ck_assert_msg(dist_parse_csv("t.csv", cases[i].text, strlen(cases[i].text), &d, &e) == UNPAD_OK, "%s",
                      e.msg);
        dist_stats s;
        dist_compute_stats(&d, &s);
        char buf[64];
        ck_assert_double_eq_tol(s.count, cases[i].total, 1e-12);
        ck_assert_str_eq(dist_count_text(s.count, buf, sizeof buf), cases[i].shown);
        ck_assert_int_eq(s.fractional, cases[i].fractional);
        dist_free(&d);
    }
    char buf[64];
    ck_assert_str_eq(dist_count_text(0.3, buf, sizeof buf), "0.3");
    ck_assert_str_eq(dist_count_text(1e15, buf, sizeof buf), "1000000000000000");
}
END_TEST

static const char *load_error(const char *text, int *code)
{
    static unpad_err e;
    char p[512];
    unpad_dist d;
    memset(&e, 0, sizeof e);
    tu_write_tmp(p, sizeof p, ".csv", text);
    *code = dist_load_csv(p, &d, &e);
    if (*code == UNPAD_OK)
        dist_free(&d);
    unlink(p);
    return strchr(e.msg, ':') ? strchr(e.msg, ':') : e.msg; /* drop the temporary name */
}

START_TEST(test_csv_errors)
{
    int code;
    const char *m = load_error("length,count\n1,5\n2,x\n", &code);
    ck_assert_int_eq(code, UNPAD_EINVAL);
    ck_assert_msg(strstr(m, ":3: bad number 'x' in column 'count'"), "%s", m);
    m = load_error("length,count\n1,5\n2\n", &code);
    ck_assert_msg(strstr(m, ":3: missing column"), "%s", m);
    m = load_error("length,count\n1,5\n2,-4\n", &code);
    ck_assert_msg(strstr(m, ":3: negative count -4 for length 2"), "%s", m);
    m = load_error("len,number\n1,5\n", &code);
    ck_assert_msg(strstr(m, ":1: expected the header 'length,count'"), "%s", m);
    m = load_error("length,count\n0,5\n", &code);
    ck_assert_msg(strstr(m, ":2: length 0 out of range"), "%s", m);
    m = load_error("length,count\n3,5\n3,1\n", &code);
    ck_assert_msg(strstr(m, ":3: length 3 appears twice"), "%s", m);
    m = load_error("length,count\n1,0\n", &code);
    ck_assert_msg(strstr(m, "all counts are zero"), "%s", m);
    m = load_error("", &code);
    ck_assert_msg(strstr(m, "empty file"), "%s", m);
    unpad_dist d;
    unpad_err e = {0};
    ck_assert_int_eq(dist_load("/nonexistent/lengths.csv", &d, &e), UNPAD_EIO);
    ck_assert_msg(strstr(e.msg, "/nonexistent/lengths.csv: cannot open"), "%s", e.msg);
}
END_TEST

/* Parses len bytes of text (may hold NUL bytes) as a distribution named "d.csv"; the message. */
static const char *parse_error(const char *text, size_t len, int *code)
{
    static unpad_err e;
    unpad_dist d;
    memset(&e, 0, sizeof e);
    *code = dist_parse("d.csv", text, len, &d, &e);
    if (*code == UNPAD_OK)
        dist_free(&d);
    return e.msg;
}

/* A NUL byte once ended the file there silently: "2,\0" read as the last row. */
START_TEST(test_nul_byte_refused_with_offset)
{
    static const char text[] = "length,count\n1,5\n2,3\0 9\n3,4\n";
    int code;
    const char *m = parse_error(text, sizeof text - 1, &code);
    ck_assert_int_eq(code, UNPAD_EINVAL);
    ck_assert_msg(strstr(m, "d.csv:3: a NUL byte (byte offset 20)"), "%s", m);
    static const char list[] = "1\n\0\n2\n";
    m = parse_error(list, sizeof list - 1, &code);
    ck_assert_msg(strstr(m, "d.csv:2: a NUL byte (byte offset 2)"), "%s", m);
    /* the same through the file reader */
    char p[512];
    tu_write_tmp(p, sizeof p, ".csv", "");
    FILE *f = fopen(p, "wb");
    fwrite(text, 1, sizeof text - 1, f);
    fclose(f);
    unpad_dist d;
    unpad_err e = {0};
    ck_assert_int_eq(dist_load(p, &d, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, p) && strstr(e.msg, ":3: a NUL byte"), "%s", e.msg);
    unlink(p);
}
END_TEST

/* A line was once copied into 512 bytes: a count of 600 digits lost its last ones and read as 0
 * (here 5 becomes 0 and the file was refused for the wrong reason, or read with a wrong total). */
START_TEST(test_long_lines_read_whole_or_refused)
{
    static char text[16384];
    int code;
    /* 600 digits: within a line's limit, so read whole, exactly */
    int n = snprintf(text, sizeof text, "length,count\n1,3\n2,");
    memset(text + n, '0', 599);
    snprintf(text + n + 599, sizeof text - (size_t)n - 599, "5\n");
    unpad_dist d;
    unpad_err e = {0};
    ck_assert_msg(dist_parse("d.csv", text, strlen(text), &d, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_double_eq(d.count[2], 5.0);
    ck_assert_double_eq(d.total, 8.0);
    dist_free(&d);
    /* over the limit: refused, naming the line, never cut */
    n = snprintf(text, sizeof text, "length,count\n1,3\n2,");
    memset(text + n, '0', UNPAD_LINE_MAX);
    snprintf(text + n + UNPAD_LINE_MAX, sizeof text - (size_t)n - UNPAD_LINE_MAX, "5\n");
    const char *m = parse_error(text, strlen(text), &code);
    ck_assert_int_eq(code, UNPAD_EINVAL);
    ck_assert_msg(strstr(m, "d.csv:3: line of 4099 characters, longer than the 4096"), "%s", m);
}
END_TEST

/* Counts that overflowed to infinity once gave inf/nan statistics with exit 0. */
START_TEST(test_overflowing_counts_refused)
{
    int code;
    const char *t = "length,count\n1,1e308\n2,1e308\n";
    const char *m = parse_error(t, strlen(t), &code);
    ck_assert_int_eq(code, UNPAD_EINVAL);
    ck_assert_msg(strstr(m, "d.csv:2: count 1e+308 for length 1 out of range (expected a count in "
                            "0..1e+15)"), "%s", m);
    t = "length,count\n1,1e999\n";
    m = parse_error(t, strlen(t), &code);
    ck_assert_msg(strstr(m, "d.csv:2: bad number '1e999' in column 'count'"), "%s", m);
    /* the largest counts give finite statistics */
    static char big[65536 * 24];
    size_t k = (size_t)snprintf(big, sizeof big, "length,count\n");
    for (int l = 1; l <= 65536; l++)
        k += (size_t)snprintf(big + k, sizeof big - k, "%d,1e15\n", l);
    unpad_dist d;
    unpad_err e = {0};
    ck_assert_msg(dist_parse("d.csv", big, k, &d, &e) == UNPAD_OK, "%s", e.msg);
    dist_stats s;
    dist_compute_stats(&d, &s);
    ck_assert(isfinite(s.mean) && isfinite(s.stddev) && isfinite(s.sum_len2_mean));
    ck_assert_double_eq_tol(s.mean, 32768.5, 1e-6);
    ck_assert(isfinite(dist_padding_fraction(&d, 65536)));
    dist_free(&d);
}
END_TEST

/* The header was once checked as a prefix ("lengthX" passed), and a length given twice was
 * accepted when its first count was 0. */
START_TEST(test_exact_header_and_duplicates)
{
    int code;
    const char *t = "lengthX,count\n1,5\n";
    const char *m = parse_error(t, strlen(t), &code);
    ck_assert_int_eq(code, UNPAD_EINVAL);
    ck_assert_msg(strstr(m, "d.csv:1: expected the header 'length,count'"), "%s", m);
    t = "length,count,x\n1,5\n";
    m = parse_error(t, strlen(t), &code);
    ck_assert_msg(strstr(m, "d.csv:1: expected the header"), "%s", m);
    t = "length,count\n1,0\n2,4\n1,5\n";
    m = parse_error(t, strlen(t), &code);
    ck_assert_int_eq(code, UNPAD_EINVAL);
    ck_assert_msg(strstr(m, "d.csv:4: length 1 appears twice (first on line 2)"), "%s", m);
    /* blanks around the header's names are fine */
    t = " length , count \r\n1,5\n";
    unpad_dist d;
    unpad_err e = {0};
    ck_assert_msg(dist_parse("d.csv", t, strlen(t), &d, &e) == UNPAD_OK, "%s", e.msg);
    dist_free(&d);
}
END_TEST

/* A device once grew the memory without bound; a huge file was read whole. */
START_TEST(test_devices_and_huge_files_refused)
{
    unpad_dist d;
    unpad_err e = {0};
    ck_assert_int_eq(dist_load("/dev/zero", &d, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "/dev/zero: more than 67108864 bytes from a device or pipe"), "%s",
                  e.msg);
    char p[512];
    tu_write_tmp(p, sizeof p, ".csv", "length,count\n1,5\n");
    ck_assert_int_eq(truncate(p, UNPAD_READ_MAX + 1), 0); /* sparse: no disk used */
    ck_assert_int_eq(dist_load(p, &d, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "1073741825 bytes, more than the 1073741824 this reader takes"), "%s",
                  e.msg);
    unlink(p);
    char *buf;
    ck_assert_int_eq(unpad_read_file("/tmp", &buf, NULL, &e), UNPAD_EIO);
    ck_assert_msg(strstr(e.msg, "/tmp: a folder, not a file"), "%s", e.msg);
}
END_TEST

START_TEST(test_sampling_reproducible_and_faithful)
{
    char p[512];
    unpad_dist d;
    unpad_err e = {0};
    ck_assert_int_eq(dist_load(tu_path(p, sizeof p, "models/dists/wiki512.csv"), &d, &e), UNPAD_OK);
    dist_sampler *a, *b, *c;
    ck_assert_int_eq(dist_sampler_alloc(&d, 42, &a, &e), UNPAD_OK);
    ck_assert_int_eq(dist_sampler_alloc(&d, 42, &b, &e), UNPAD_OK);
    ck_assert_int_eq(dist_sampler_alloc(&d, 43, &c, &e), UNPAD_OK);
    enum { N = 200000 };
    static int x[N], y[N], z[N];
    dist_sample(a, x, N);
    dist_sample(b, y, N);
    dist_sample(c, z, N);
    ck_assert_int_eq(memcmp(x, y, sizeof x), 0);
    ck_assert_int_ne(memcmp(x, z, sizeof x), 0);
    double sum = 0;
    int at_max = 0;
    for (int i = 0; i < N; i++) {
        ck_assert(x[i] >= 1 && x[i] <= 512);
        sum += x[i];
        at_max += x[i] == 512;
    }
    /* Sample mean within 4 standard errors (std ~ 160). */
    ck_assert_double_eq_tol(sum / N, 255.83, 4 * 160 / 447.0);
    ck_assert_double_eq_tol((double)at_max / N, 0.234, 0.004);
    /* Reseeding restarts the same stream as a fresh sampler. */
    dist_sampler_seed(c, 42);
    dist_sample(c, z, 1000);
    ck_assert_int_eq(memcmp(x, z, sizeof(int) * 1000), 0);
    dist_sampler_free(a);
    dist_sampler_free(b);
    dist_sampler_free(c);
    dist_free(&d);
}
END_TEST

Suite *dist_suite(void)
{
    Suite *s = suite_create("dist");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_wiki_histogram_stats);
    tcase_add_test(tc, test_list_and_stats_exact);
    tcase_add_test(tc, test_fractional_counts);
    tcase_add_test(tc, test_csv_errors);
    tcase_add_test(tc, test_sampling_reproducible_and_faithful);
    tcase_add_test(tc, test_nul_byte_refused_with_offset);
    tcase_add_test(tc, test_long_lines_read_whole_or_refused);
    tcase_add_test(tc, test_overflowing_counts_refused);
    tcase_add_test(tc, test_exact_header_and_duplicates);
    tcase_add_test(tc, test_devices_and_huge_files_refused);
    suite_add_tcase(s, tc);
    return s;
}
