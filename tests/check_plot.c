/* check_plot.c — every plot kind renders a non-empty PNG and SVG with gnuplot (skipped, and said
 * so, only when gnuplot is missing); a missing gnuplot is an error that says how to install it. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "plot.h"
#include "testutil.h"
#include "whatif.h"

static int have_gnuplot(void)
{
    char p[4096];
    unpad_err e = {0};
    if (plot_gnuplot_find(p, sizeof p, &e) == UNPAD_OK)
        return 1;
    printf("check_plot: skipped: gnuplot missing (%s)\n", e.msg);
    return 0;
}

/* A fresh folder for one test's pictures. */
static const char *tmpdir(char *buf, size_t n)
{
    snprintf(buf, n, "/tmp/unpad-plot-XXXXXX");
    return mkdtemp(buf);
}

/* <out>.png starts with the PNG signature and <out>.svg holds an <svg element; both non-empty. */
static void check_images(const char *out)
{
    char path[4200];
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    unsigned char head[8] = {0};
    snprintf(path, sizeof path, "%s.png", out);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "no %s", path);
    ck_assert_int_eq(fread(head, 1, 8, f), 8);
    fclose(f);
    ck_assert(!memcmp(head, sig, 8));
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_gt(st.st_size, 2000);
    snprintf(path, sizeof path, "%s.svg", out);
    char *text;
    unpad_err e = {0};
    ck_assert_int_eq(unpad_read_file(path, &text, NULL, &e), UNPAD_OK);
    ck_assert_ptr_nonnull(strstr(text, "<svg"));
    ck_assert_int_gt(strlen(text), 2000);
    free(text);
}

/* A plain CSV: `#` comment lines, then a header and rows, each with as many fields as the header
 * and no blank line; returns the rows (the header excluded) and copies the header and the
 * first row into the buffers. */
static int check_plain_csv(const char *path, char *header, size_t hn, char *first, size_t fn)
{
    char *text;
    unpad_err e = {0};
    ck_assert_msg(unpad_read_file(path, &text, NULL, &e) == UNPAD_OK, "%s", e.msg);
    int rows = -1, fields = 0, in_comments = 1;
    for (char *line = text, *next; *line; line = next) {
        next = strchr(line, '\n');
        ck_assert_msg(next != NULL, "%s: last line without a newline", path);
        *next++ = '\0';
        if (in_comments && line[0] == '#')
            continue;
        in_comments = 0;
        ck_assert_msg(line[0] != '\0' && line[0] != '#', "%s: a blank or comment line among the rows",
                      path);
        int f = 1;
        for (char *c = line; *c; c++)
            f += *c == ',';
        if (rows < 0) {
            fields = f;
            snprintf(header, hn, "%s", line);
        } else {
            ck_assert_msg(f == fields, "%s: %d fields, the header has %d: %s", path, f, fields, line);
            if (rows == 0)
                snprintf(first, fn, "%s", line);
        }
        rows++;
    }
    free(text);
    return rows;
}

static void cleanup(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

typedef struct {
    unpad_dist d;
    model_cfg m;
    hw_spec hw;
    calib_coef c;
    char plots[512];
} inputs;

static void load_inputs(inputs *in)
{
    char p[512];
    unpad_err e = {0};
    ck_assert_int_eq(dist_load(tu_path(p, sizeof p, "models/dists/wiki512.csv"), &in->d, &e), 0);
    ck_assert_int_eq(model_load(tu_path(p, sizeof p, "models/bert-large.cfg"), &in->m, &e), 0);
    ck_assert_int_eq(hw_load(tu_path(p, sizeof p, "models/hw/h200-sxm.cfg"), &in->hw, &e), 0);
    calib_default(&in->hw, &in->c);
    tu_path(in->plots, sizeof in->plots, "plots");
}

START_TEST(test_every_kind)
{
    if (!have_gnuplot())
        return;
    inputs in;
    load_inputs(&in);
    char dir[64], out[256], csv[256];
    ck_assert_ptr_nonnull(tmpdir(dir, sizeof dir));
    unpad_err e = {0};

    snprintf(out, sizeof out, "%s/hist", dir);
    ck_assert_msg(plot_hist(in.plots, &in.d, "# test\n", out, &e) == UNPAD_OK, "%s", e.msg);
    check_images(out);
    char header[1024], first[1024];
    snprintf(csv, sizeof csv, "%s/hist.csv", dir);
    ck_assert_int_eq(check_plain_csv(csv, header, sizeof header, first, sizeof first), 512);
    ck_assert_str_eq(header, "length,count,percent");

    snprintf(out, sizeof out, "%s/load", dir);
    plot_load_setup ls = {&in.d, &in.m, &in.hw, &in.c, 8, 16, BAL_EQUAL, 1, 0, NULL, NULL, 1};
    ck_assert_msg(plot_load(in.plots, &ls, out, &e) == UNPAD_OK, "%s", e.msg);
    check_images(out);
    snprintf(csv, sizeof csv, "%s/load.csv", dir);
    ck_assert_int_eq(check_plain_csv(csv, header, sizeof header, first, sizeof first),
                     BAL_POLICY_COUNT);
    ck_assert_str_eq(header, "policy,step_ms,mean_ms,min_ms,p25_ms,median_ms,p75_ms,imbalance,"
                             "idle_percent");
    /* none's row: the step is its slowest GPU, idle = 1 - mean / step */
    double v[8];
    ck_assert_int_eq(sscanf(first, "none,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf", &v[0], &v[1], &v[2],
                            &v[3], &v[4], &v[5], &v[6], &v[7]), 8);
    ck_assert(v[0] >= v[5] && v[5] >= v[4] && v[4] >= v[3] && v[3] >= v[2] && v[2] > 0);
    ck_assert_double_eq_tol(v[6], v[0] / v[1], 1e-5);
    ck_assert_double_eq_tol(v[7], 100 * (1 - v[1] / v[0]), 1e-3);
    snprintf(csv, sizeof csv, "%s/load-gpus.csv", dir);
    ck_assert_int_eq(check_plain_csv(csv, header, sizeof header, first, sizeof first),
                     8 * BAL_POLICY_COUNT);
    ck_assert_str_eq(header, "policy_index,policy,gpu,ms");
    /* beyond 16 GPUs the script draws boxes instead of dots */
    snprintf(out, sizeof out, "%s/load32", dir);
    ls.gpus = 32;
    ls.batch = 4;
    ck_assert_msg(plot_load(in.plots, &ls, out, &e) == UNPAD_OK, "%s", e.msg);
    check_images(out);

    whatif_setup s;
    whatif_setup_default(&s);
    whatif_setup_inputs(&s, &in.d, &in.m, &in.hw, &in.c);
    s.steps = 30;
    s.attn_steps = 2;
    whatif_row rows[12];
    int n = 0;
    const int gs[] = {4, 8, 16}, bs[] = {8, 16};
    for (int g = 0; g < 3; g++)
        for (int b = 0; b < 2; b++)
            for (int p = BAL_NONE; p <= BAL_KK; p += BAL_KK)
                rows[n++] = (whatif_row){.gpus = gs[g], .batch = bs[b], .policy = p, .count = BAL_EQUAL};
    ck_assert_int_eq(whatif_run(&s, rows, n, &e), UNPAD_OK);
    snprintf(csv, sizeof csv, "%s/whatif.csv", dir);
    ck_assert_int_eq(whatif_write_csv(csv, rows, n, &e), UNPAD_OK);
    snprintf(out, sizeof out, "%s/imbalance", dir);
    ck_assert_msg(plot_imbalance(in.plots, csv, 0, 0, NULL, 0, NULL, out, &e) == UNPAD_OK, "%s", e.msg);
    check_images(out);
    /* x = gpus at batch 16 (the busiest: every batch has 3 GPU counts; ties to the first) */
    snprintf(csv, sizeof csv, "%s/imbalance-gpus.csv", dir);
    ck_assert_int_eq(check_plain_csv(csv, header, sizeof header, first, sizeof first), 3);
    ck_assert_str_eq(header, "gpus,none/equal mean,none/equal p99,kk/equal mean,kk/equal p99");
    ck_assert_int_eq(strncmp(first, "4,", 2), 0);
    snprintf(csv, sizeof csv, "%s/imbalance-batch.csv", dir);
    ck_assert_int_eq(check_plain_csv(csv, header, sizeof header, first, sizeof first), 2);

    snprintf(out, sizeof out, "%s/groups", dir);
    int len[] = {512, 512, 511, 400, 300, 200, 128, 100, 64, 30, 12, 512, 256};
    plot_groups_setup gs2 = {&in.m, &in.hw, &in.c, len, 13, 3, 1, "test lengths", NULL, NULL};
    ck_assert_msg(plot_groups(in.plots, &gs2, out, &e) == UNPAD_OK, "%s", e.msg);
    check_images(out);
    snprintf(csv, sizeof csv, "%s/groups.csv", dir);
    ck_assert_int_ge(check_plain_csv(csv, header, sizeof header, first, sizeof first), 3);
    ck_assert_str_eq(header, "row,option,stream,start_us,end_us,min_len,max_len,sequences");
    /* the first row: one launch of all 13 (option 1, stream 1, from 0), lengths 12..512 */
    ck_assert_int_eq(strncmp(first, "0,1,1,0,", 8), 0);
    ck_assert_ptr_nonnull(strstr(first, ",12,512,13"));
    cleanup(dir);
    dist_free(&in.d);
}
END_TEST

START_TEST(test_errors)
{
    inputs in;
    load_inputs(&in);
    char dir[64], out[256], bad[512];
    ck_assert_ptr_nonnull(tmpdir(dir, sizeof dir));
    snprintf(out, sizeof out, "%s/hist", dir);
    unpad_err e = {0};
    /* gnuplot missing: an error with the install command, and no pictures. */
    setenv("UNPAD_GNUPLOT", "/nonexistent/gnuplot", 1);
    ck_assert_int_eq(plot_hist(in.plots, &in.d, "# test\n", out, &e), UNPAD_EIO);
    ck_assert_ptr_nonnull(strstr(e.msg, "apt-get install gnuplot-nox"));
    unsetenv("UNPAD_GNUPLOT");
    char png[300];
    snprintf(png, sizeof png, "%s.png", out);
    struct stat st;
    ck_assert_int_ne(stat(png, &st), 0);
    /* A what-if CSV without the columns, and one with a bad row: file, line, reason. */
    tu_write_tmp(bad, sizeof bad, ".csv", "gpus,batch,policy\n8,56,kk\n");
    ck_assert_int_eq(plot_imbalance(in.plots, bad, 0, 0, NULL, 0, NULL, out, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, ":1: header has no column 'count'"));
    unlink(bad);
    tu_write_tmp(bad, sizeof bad, ".csv",
                 "gpus,batch,policy,count,imbalance_mean,imbalance_p99\n8,56,kk,equal,1.0,1.0\n"
                 "8,x,kk,equal,1,1\n");
    ck_assert_int_eq(plot_imbalance(in.plots, bad, 0, 0, NULL, 0, NULL, out, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, ":3: bad what-if row"));
    unlink(bad);
    /* rows of two layouts or two accumulations: one of each is chosen, or the plot is refused */
    tu_write_tmp(bad, sizeof bad, ".csv",
                 "gpus,batch,accum,policy,count,imbalance_mean,imbalance_p99,layout\n"
                 "8,56,1,kk,equal,1.01,1.02,unpadded\n8,56,1,kk,equal,1.0,1.0,padded\n"
                 "8,56,4,kk,equal,1.001,1.002,unpadded\n");
    ck_assert_int_eq(plot_imbalance(in.plots, bad, 0, 0, NULL, 0, NULL, out, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "rows of 2 length layouts (unpadded, padded): choose one with --layout"), "%s",
                  e.msg);
    ck_assert_int_eq(plot_imbalance(in.plots, bad, 0, 0, "unpadded", 0, NULL, out, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "rows of 2 accumulations (1, 4): choose one with --accum"), "%s", e.msg);
    ck_assert_int_eq(plot_imbalance(in.plots, bad, 0, 0, "packed:3", 1, NULL, out, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "no rows of layout packed:3"), "%s", e.msg);
    if (plot_imbalance(in.plots, bad, 0, 0, "unpadded", 4, NULL, out, &e) != UNPAD_OK)
        ck_assert_msg(strstr(e.msg, "gnuplot"), "%s", e.msg); /* chosen: only a missing gnuplot may stop it */
    unlink(bad);
    char q[64];
    plot_quote("it's", q, sizeof q);
    ck_assert_str_eq(q, "'it''s'");
    cleanup(dir);
    dist_free(&in.d);
}
END_TEST

/* An image's format is its extension's: .png, .svg, .pdf (PDF only where gnuplot has pdfcairo);
 * any other, or none, is refused naming the flag and the file. */
START_TEST(test_image_format)
{
    static const struct { const char *path, *fmt; } cases[] = {
        {"v.png", "png"}, {"v.svg", "svg"}, {"dir/v.pdf", "pdf"}, {"V.SVG", "svg"}, {"a.b/v.Png", "png"},
        {"v.jpg", NULL},  {"v", NULL},      {"a.svg/v", NULL},    {"v.svg.gz", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *f = plot_image_format(cases[i].path);
        ck_assert_msg(cases[i].fmt ? f && !strcmp(f, cases[i].fmt) : !f, "%s: %s", cases[i].path, f ? f : "none");
    }
    unpad_err e = {0};
    const char *fmt;
    ck_assert_int_eq(plot_image_check("--plot", "v.jpg", &fmt, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "--plot v.jpg: the extension gives the image's format: .png, .svg or .pdf"), "%s",
                  e.msg);
    ck_assert_int_eq(plot_image_check("--plot", "v.svg", &fmt, &e), UNPAD_OK);
    ck_assert_str_eq(fmt, "svg");
    /* .pdf asks gnuplot for pdfcairo: a gnuplot without it (a stand-in that says no) is refused */
    char gp[512];
    tu_write_tmp(gp, sizeof gp, ".sh", "#!/bin/sh\nexit 3\n");
    ck_assert_int_eq(chmod(gp, 0755), 0);
    setenv("UNPAD_GNUPLOT", gp, 1);
    ck_assert_int_eq(plot_image_check("--plot", "v.pdf", &fmt, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "--plot v.pdf: this gnuplot") && strstr(e.msg, "no pdfcairo"), "%s", e.msg);
    ck_assert_int_eq(plot_image_check("--plot", "v.png", &fmt, &e), UNPAD_OK); /* no gnuplot asked */
    unsetenv("UNPAD_GNUPLOT");
    unlink(gp);
}
END_TEST

Suite *plot_suite(void)
{
    Suite *s = suite_create("plot");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_every_kind);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_image_format);
    suite_add_tcase(s, tc);
    return s;
}
