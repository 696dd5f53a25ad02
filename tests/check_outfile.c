/* check_outfile.c — outputs: complete or not at all (a full disk leaves the old file, a failed
 * plot leaves no empty picture), never over an input (library guard and every command), and the
 * what-if CSV read back by its header, field by field. */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cfg.h"
#include "model.h"
#include "outfile.h"
#include "plot.h"
#include "shard.h"
#include "testutil.h"
#include "whatif.h"

/* ---- helpers ---------------------------------------------------------------------------------- */

static char *tmpdir(char *buf, size_t n)
{
    snprintf(buf, n, "/tmp/unpad-test-out-XXXXXX");
    return mkdtemp(buf);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* The whole file as a string (static buffer), or NULL when it does not exist. */
static const char *contents(const char *path)
{
    static char buf[1 << 16];
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Entries of dir other than . and .. */
static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    closedir(d);
    return n;
}

static void rm_rf(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Files may grow to at most `bytes` until restored: writes past it fail with EFBIG, as on a full
 * disk. SIGXFSZ is ignored meanwhile so the failing write returns an error. */
static struct rlimit saved_limit;
static void (*saved_handler)(int);
static void disk_full_at(rlim_t bytes)
{
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &saved_limit), 0);
    struct rlimit r = saved_limit;
    r.rlim_cur = bytes;
    saved_handler = signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &r), 0);
}
static void disk_restored(void)
{
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &saved_limit), 0);
    signal(SIGXFSZ, saved_handler);
}

static void some_rows(whatif_row *r, int n)
{
    memset(r, 0, (size_t)n * sizeof *r);
    for (int i = 0; i < n; i++) {
        /* every number distinct, so that any two columns swapped differ */
        const double b = 1000.0 * (i + 1) + 0.25; /* exact in every format */
        r[i] = (whatif_row){.gpus = 8 << (i % 3), .batch = 16 + i, .accum = 1 + 2 * i, .policy = i % BAL_POLICY_COUNT,
                            .count = i % BAL_COUNT_COUNT, .steps = 100 + i, .step_us = b + 10,
                            .samples_per_s = b + 20, .imbalance_mean = b + 30,
                            .imbalance_p99 = b + 40, .imbalance_max = b + 50, .idle_mean = b + 60,
                            .idle_p99 = b + 70, .token_imbalance_mean = b + 80, .fixed_us = b + 90,
                            .attn_us = b + 100, .attn_grouped_us = b + 110};
        r[i].groups = 2 + i % 3;
        r[i].streams = 1 + i % 4;
        snprintf(r[i].bounds, sizeof r[i].bounds, i % 2 ? "128,384" : "none");
        snprintf(r[i].layout_name, sizeof r[i].layout_name, i % 2 ? "packed:3" : "unpadded");
        r[i].tokens_per_gpu = b + 120;
        r[i].padding = 0.125 + 0.001 * i;
        r[i].allreduce_us = b + 130;
        r[i].net = i % 3;
        r[i].nodes = 1 + i;
        r[i].exchange_us = b + 140;
        r[i].mem_gib = b + 150;
        r[i].mem_budget_gib = b + 160;
        r[i].mem_fits = i % 2;
        r[i].train_hours = b + 170;
        r[i].gpu_hours = b + 180;
        r[i].cost = b + 190;
    }
}

/* ---- complete or nothing ---------------------------------------------------------------------- */

START_TEST(test_commit_and_abort)
{
    char dir[64], path[128];
    ck_assert_ptr_nonnull(tmpdir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/out.csv", dir);
    write_text(path, "old\n");
    unpad_err e = {0};
    unpad_outfile *o;
    ck_assert_int_eq(outfile_open(path, &o, &e), UNPAD_OK);
    fprintf(outfile_stream(o), "new\n");
    ck_assert_str_eq(contents(path), "old\n"); /* the final name is untouched until the commit */
    ck_assert_int_eq(entries(dir), 2);
    ck_assert_int_eq(outfile_commit(o, &e), UNPAD_OK);
    ck_assert_str_eq(contents(path), "new\n");
    ck_assert_int_eq(entries(dir), 1);
    struct stat st;
    mode_t mask = umask(0);
    umask(mask);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0666 & ~mask);
    ck_assert_int_eq(outfile_open(path, &o, &e), UNPAD_OK);
    fprintf(outfile_stream(o), "dropped\n");
    outfile_abort(o);
    ck_assert_str_eq(contents(path), "new\n");
    ck_assert_int_eq(entries(dir), 1);
    ck_assert_int_eq(outfile_open("/nonexistent/dir/x.csv", &o, &e), UNPAD_EIO);
    ck_assert_msg(strstr(e.msg, "/nonexistent/dir/x.csv: cannot write: No such file"), "%s", e.msg);
    ck_assert_int_eq(outfile_open(dir, &o, &e), UNPAD_EIO);
    ck_assert_msg(strstr(e.msg, "cannot write: a folder, not a file"), "%s", e.msg);
    /* a device is written directly (it cannot be replaced whole), its errors named */
    ck_assert_int_eq(outfile_open("/dev/null", &o, &e), UNPAD_OK);
    fprintf(outfile_stream(o), "gone\n");
    ck_assert_int_eq(outfile_commit(o, &e), UNPAD_OK);
    ck_assert_int_eq(stat("/dev/null", &st), 0);
    ck_assert(S_ISCHR(st.st_mode)); /* not replaced by a regular file */
    ck_assert_int_eq(outfile_open("/dev/full", &o, &e), UNPAD_OK);
    fprintf(outfile_stream(o), "no room\n");
    ck_assert_int_eq(outfile_commit(o, &e), UNPAD_EIO);
    ck_assert_msg(strstr(e.msg, "/dev/full: cannot write: No space left on device"), "%s", e.msg);
    rm_rf(dir);
}
END_TEST

/* On a full disk an output was once left truncated under its final name (and a later `plot`
 * read it with exit 0). Now the write fails naming the file, and the old file stays whole. */
START_TEST(test_full_disk_keeps_the_old_file)
{
    char dir[64], csv[128], cfg[128], bin[128];
    ck_assert_ptr_nonnull(tmpdir(dir, sizeof dir));
    snprintf(csv, sizeof csv, "%s/whatif.csv", dir);
    snprintf(cfg, sizeof cfg, "%s/hw.cfg", dir);
    snprintf(bin, sizeof bin, "%s/s.bin", dir);
    write_text(csv, "the old what-if\n");
    whatif_row rows[64];
    some_rows(rows, 64);
    unpad_err e = {0};
    disk_full_at(2000);
    int rc = whatif_write_csv(csv, rows, 64, &e);
    disk_restored();
    ck_assert_int_eq(rc, UNPAD_EIO);
    ck_assert_msg(strstr(e.msg, csv) && strstr(e.msg, "cannot write: File too large"), "%s", e.msg);
    ck_assert_str_eq(contents(csv), "the old what-if\n");
    ck_assert_int_eq(entries(dir), 1); /* no temporary left either */
    /* configs (plans, calibrations) */
    hw_spec hw;
    char p[512];
    ck_assert_int_eq(hw_load(tu_path(p, sizeof p, "models/hw/h200-sxm.cfg"), &hw, &e), UNPAD_OK);
    disk_full_at(300);
    rc = cfg_write(cfg, "a header", hw_schema, hw_schema_len, &hw, &e);
    disk_restored();
    ck_assert_int_eq(rc, UNPAD_EIO);
    ck_assert_msg(strstr(e.msg, cfg) && strstr(e.msg, "File too large"), "%s", e.msg);
    ck_assert_ptr_null(contents(cfg));
    /* shards */
    shard_writer *w;
    shard_sample s;
    ck_assert_int_eq(shard_sample_alloc(&s, 64, 4), UNPAD_OK);
    s.len = 64, s.n_pred = 0, s.nsp = 0;
    for (int k = 0; k < 64; k++)
        s.tokens[k] = k, s.segments[k] = 0;
    disk_full_at(1000);
    rc = shard_writer_open(bin, 64, 4, 100, 1, 0, &w, &e);
    for (int i = 0; i < 20 && !rc; i++)
        rc = shard_writer_add(w, &s, &e);
    if (!rc)
        rc = shard_writer_close(w, &e);
    else
        shard_writer_abort(w);
    disk_restored();
    shard_sample_free(&s);
    ck_assert_int_eq(rc, UNPAD_EIO);
    ck_assert_msg(strstr(e.msg, bin), "%s", e.msg);
    ck_assert_ptr_null(contents(bin));
    ck_assert_int_eq(entries(dir), 1);
    rm_rf(dir);
}
END_TEST

/* A fake gnuplot: a script that creates the file named by out=, writes `bytes` bytes into it and
 * exits with code. */
static void fake_gnuplot(const char *path, int bytes, int code)
{
    char text[512];
    snprintf(text, sizeof text,
             "#!/bin/sh\n"
             "out=$(printf '%%s' \"$2\" | sed -n \"s/.*out='\\([^']*\\)'.*/\\1/p\")\n"
             ": > \"$out\"\n"
             "[ %d -gt 0 ] && head -c %d /dev/zero > \"$out\"\n"
             "exit %d\n", bytes, bytes, code);
    write_text(path, text);
    ck_assert_int_eq(chmod(path, 0755), 0);
}

/* Plots once left empty or partial pictures when gnuplot failed or wrote nothing. */
START_TEST(test_failed_plot_leaves_no_picture)
{
    char dir[64], gp[128], script[128], out[128], png[140], svg[140];
    ck_assert_ptr_nonnull(tmpdir(dir, sizeof dir));
    snprintf(gp, sizeof gp, "%s/gnuplot", dir);
    snprintf(script, sizeof script, "%s/k.gp", dir);
    snprintf(out, sizeof out, "%s/pic", dir);
    snprintf(png, sizeof png, "%s.png", out);
    snprintf(svg, sizeof svg, "%s.svg", out);
    write_text(script, "# unused by the fake\n");
    setenv("UNPAD_GNUPLOT", gp, 1);
    unpad_err e = {0};
    fake_gnuplot(gp, 0, 0); /* succeeds, leaves an empty picture */
    ck_assert_int_eq(plot_render(dir, "k", "", out, &e), UNPAD_EIO);
    ck_assert_msg(strstr(e.msg, "gnuplot wrote no") && strstr(e.msg, png), "%s", e.msg);
    ck_assert_ptr_null(contents(png));
    fake_gnuplot(gp, 100, 0); /* draws: both pictures */
    ck_assert_msg(plot_render(dir, "k", "", out, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_int_eq(strlen(contents(png)), 0); /* 100 zero bytes: the string is empty */
    struct stat st;
    ck_assert_int_eq(stat(svg, &st), 0);
    ck_assert_int_eq(st.st_size, 100);
    fake_gnuplot(gp, 7, 3); /* draws part of it, then fails: the old pictures stay */
    ck_assert_int_eq(plot_render(dir, "k", "", out, &e), UNPAD_EIO);
    ck_assert_msg(strstr(e.msg, "gnuplot failed"), "%s", e.msg);
    ck_assert_int_eq(stat(png, &st), 0);
    ck_assert_int_eq(st.st_size, 100);
    ck_assert_int_eq(entries(dir), 4); /* gnuplot, k.gp, pic.png, pic.svg: no temporaries */
    unsetenv("UNPAD_GNUPLOT");
    rm_rf(dir);
}
END_TEST

/* ---- outputs are not inputs ------------------------------------------------------------------- */

START_TEST(test_output_guard)
{
    char dir[64], a[128], b[128], soft[128], hard[128], same[160], fresh[128], fresh2[160];
    ck_assert_ptr_nonnull(tmpdir(dir, sizeof dir));
    snprintf(a, sizeof a, "%s/a.csv", dir);
    snprintf(b, sizeof b, "%s/b.csv", dir);
    snprintf(soft, sizeof soft, "%s/soft.csv", dir);
    snprintf(hard, sizeof hard, "%s/hard.csv", dir);
    snprintf(same, sizeof same, "%s/./../%s/a.csv", dir, strrchr(dir, '/') + 1);
    snprintf(fresh, sizeof fresh, "%s/new.csv", dir);
    snprintf(fresh2, sizeof fresh2, "%s//./new.csv", dir);
    write_text(a, "a\n");
    write_text(b, "b\n");
    ck_assert_int_eq(symlink(a, soft), 0);
    ck_assert_int_eq(link(a, hard), 0);
    const char *in[3] = {NULL, b, a};
    unpad_err e = {0};
    const char *outs[1];
    const char *cases[4] = {a, same, soft, hard};
    for (int i = 0; i < 4; i++) {
        outs[0] = cases[i];
        ck_assert_int_eq(outfile_check_all(outs, 1, in, 3, &e), UNPAD_EINVAL);
        ck_assert_msg(strstr(e.msg, "this output is also an input of the run") && strstr(e.msg, a),
                      "%s", e.msg);
    }
    outs[0] = fresh;
    ck_assert_int_eq(outfile_check_all(outs, 1, in, 3, &e), UNPAD_OK);
    const char *two[3] = {fresh, NULL, fresh2};
    ck_assert_int_eq(outfile_check_all(two, 3, in, 3, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "two outputs of the run are the same file"), "%s", e.msg);
    ck_assert_str_eq(contents(a), "a\n");
    rm_rf(dir);
}
END_TEST

/* Runs cmd through the shell; its exit status. */
static int run(const char *cmd)
{
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* An output path equal to an input path once overwrote the input with exit 0, for predict,
 * validate, calibrate, plot and unpad-data. Each command now refuses before any work. The
 * commands are run when built (make test builds them first). */
START_TEST(test_commands_refuse_to_overwrite_inputs)
{
    char u[600], d[600], p[512];
    snprintf(u, sizeof u, "%s", tu_path(p, sizeof p, "bin/unpad"));
    snprintf(d, sizeof d, "%s", tu_path(p, sizeof p, "bin/unpad-data"));
    if (access(u, X_OK) || access(d, X_OK)) {
        fprintf(stderr, "check_outfile: %s or %s not built: the commands are not run\n", u, d);
        return;
    }
    char dir[64], cmd[10240], dist[128], trace[128], txt[128], model[128], vocab_path[128];
    char src_trace[512], src_model[512];
    ck_assert_ptr_nonnull(tmpdir(dir, sizeof dir));
    snprintf(dist, sizeof dist, "%s/lengths.csv", dir);
    snprintf(trace, sizeof trace, "%s/trace.csv", dir);
    snprintf(txt, sizeof txt, "%s/text.txt", dir);
    snprintf(model, sizeof model, "%s/model.cfg", dir);
    write_text(dist, "length,count\n10,5\n100,3\n");
    write_text(txt, "the cat sat\n");
    snprintf(vocab_path, sizeof vocab_path, "%s/vocab.txt", dir);
    write_text(vocab_path, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\nsat\n");
    tu_path(src_trace, sizeof src_trace, "tests/data/synthetic-heldout-bert-base.csv");
    tu_path(src_model, sizeof src_model, "models/bert-base.cfg");
    snprintf(cmd, sizeof cmd, "cp %s %s && cp %s %s", src_trace, trace, src_model, model);
    ck_assert_int_eq(run(cmd), 0);
    char prefix[128]; /* plot hist writes PREFIX.png, PREFIX.svg and PREFIX.csv: the input */
    snprintf(prefix, sizeof prefix, "%.*s", (int)(strlen(dist) - 4), dist);
    enum { NC = 9 };
    char cmds[NC][1024];
    const char *victim[NC] = {dist, dist, dist, trace, trace, model, dist, dist, txt};
    snprintf(cmds[0], sizeof cmds[0], "%s predict --dist %s --csv %s", u, dist, dist);
    snprintf(cmds[1], sizeof cmds[1], "%s whatif --dist %s --steps 2 --csv %s", u, dist, dist);
    snprintf(cmds[2], sizeof cmds[2], "%s plan --dist %s --steps 2 --out %s", u, dist, dist);
    snprintf(cmds[3], sizeof cmds[3], "%s validate --traces %s --csv %s", u, trace, trace);
    snprintf(cmds[4], sizeof cmds[4], "%s calibrate --traces %s --residuals %s", u, trace, trace);
    snprintf(cmds[5], sizeof cmds[5], "%s calibrate --traces %s --model %s --out %s", u, trace,
             model, model);
    snprintf(cmds[6], sizeof cmds[6], "%s plot hist --dist %s --out %s", u, dist, prefix);
    snprintf(cmds[7], sizeof cmds[7], "%s --synthetic --dist %s --samples 3 --out %s", d, dist, dist);
    snprintf(cmds[8], sizeof cmds[8], "%s --vocab %s --input %s --out %s", d, vocab_path, txt, txt);
    for (int i = 0; i < NC; i++) {
        char *before, *after, errf[128];
        size_t nb, na;
        unpad_err e = {0};
        ck_assert_int_eq(unpad_read_file(victim[i], &before, &nb, &e), UNPAD_OK);
        snprintf(errf, sizeof errf, "%s/err", dir);
        snprintf(cmd, sizeof cmd, "%s >/dev/null 2>%s", cmds[i], errf);
        ck_assert_msg(run(cmd) == 1, "exit status of: %s", cmds[i]);
        ck_assert_msg(strstr(contents(errf), "this output is also an input of the run"), "%s: %s",
                      cmds[i], contents(errf));
        ck_assert_int_eq(unpad_read_file(victim[i], &after, &na, &e), UNPAD_OK);
        ck_assert_msg(na == nb && !memcmp(before, after, nb), "changed its input: %s", cmds[i]);
        free(before);
        free(after);
    }
    rm_rf(dir);
}
END_TEST

/* ---- the what-if CSV, read back by name ------------------------------------------------------- */

/* Once, two columns of the what-if CSV could be swapped without a test failing. The file is read
 * back here by its header's names and every field compared with the row it came from. */
START_TEST(test_whatif_csv_fields_by_name)
{
    enum { N = 7 };
    whatif_row rows[N];
    some_rows(rows, N);
    char path[512];
    tu_write_tmp(path, sizeof path, ".csv", "");
    unpad_err e = {0};
    ck_assert_int_eq(whatif_write_csv(path, rows, N, &e), UNPAD_OK);
    char *text;
    ck_assert_int_eq(unpad_read_file(path, &text, NULL, &e), UNPAD_OK);
    unlink(path);
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    char *names[40];
    int nc = 0;
    for (char *s2 = NULL, *t = strtok_r(line, ",", &s2); t; t = strtok_r(NULL, ",", &s2))
        names[nc++] = t;
    ck_assert_int_eq(nc, 33);
    int r = 0;
    for (line = strtok_r(NULL, "\n", &save); line; line = strtok_r(NULL, "\n", &save), r++) {
        ck_assert_int_lt(r, N);
        const whatif_row *w = &rows[r];
        char *vals[40];
        int nv = 0;
        for (char *s2 = NULL, *t = strtok_r(line, ",", &s2); t; t = strtok_r(NULL, ",", &s2))
            vals[nv++] = t;
        ck_assert_int_eq(nv, nc);
        int seen = 0;
        for (int k = 0; k < nc; k++) {
            const char *n = names[k], *v = vals[k];
            double x = atof(v);
#define NUM(name, field, tol)                                                                      \
    if (!strcmp(n, name)) {                                                                        \
        ck_assert_msg(fabs(x - (double)(field)) <= (tol), "row %d %s: %s, expected %g", r, n, v,   \
                      (double)(field));                                                            \
        seen++;                                                                                    \
        continue;                                                                                  \
    }
            NUM("gpus", w->gpus, 0) NUM("batch", w->batch, 0) NUM("accum", w->accum, 0)
            NUM("steps", w->steps, 0)
            NUM("step_us", w->step_us, 5e-4) NUM("samples_per_s", w->samples_per_s, 5e-3)
            NUM("imbalance_mean", w->imbalance_mean, 5e-7) NUM("imbalance_p99", w->imbalance_p99, 5e-7)
            NUM("imbalance_max", w->imbalance_max, 5e-7) NUM("idle_mean", w->idle_mean, 5e-7)
            NUM("idle_p99", w->idle_p99, 5e-7)
            NUM("token_imbalance_mean", w->token_imbalance_mean, 5e-7)
            NUM("fixed_us", w->fixed_us, 5e-4) NUM("attn_us", w->attn_us, 5e-4)
            NUM("attn_grouped_us", w->attn_grouped_us, 5e-4) NUM("groups", w->groups, 0)
            NUM("streams", w->streams, 0) NUM("tokens_per_gpu", w->tokens_per_gpu, 0.0501)
            NUM("padding", w->padding, 5e-7) NUM("allreduce_us", w->allreduce_us, 5e-4)
            NUM("nodes", w->nodes, 0) NUM("exchange_us", w->exchange_us, 5e-4)
            NUM("mem_gib", w->mem_gib, 5e-4) NUM("mem_budget_gib", w->mem_budget_gib, 5e-4)
            NUM("mem_fits", w->mem_fits, 0) NUM("train_hours", w->train_hours, 5e-5)
            NUM("gpu_hours", w->gpu_hours, 5e-5) NUM("cost", w->cost, 5e-3)
#undef NUM
            if (!strcmp(n, "policy")) {
                ck_assert_str_eq(v, balance_policy_name(w->policy));
            } else if (!strcmp(n, "count")) {
                ck_assert_str_eq(v, balance_count_name(w->count));
            } else if (!strcmp(n, "layout")) {
                ck_assert_str_eq(v, w->layout_name);
            } else if (!strcmp(n, "net")) {
                ck_assert_str_eq(v, net_algo_name(w->net));
            } else if (!strcmp(n, "bounds")) {
                char want[128];
                snprintf(want, sizeof want, "%s", w->bounds);
                for (char *q = want; *q; q++)
                    *q = *q == ',' ? '/' : *q;
                ck_assert_str_eq(v, want);
            } else {
                ck_abort_msg("unknown column '%s'", n);
            }
            seen++;
        }
        ck_assert_int_eq(seen, 33);
    }
    ck_assert_int_eq(r, N);
    free(text);
    /* time to train not asked: empty cells, not numbers */
    rows[0].train_hours = rows[0].gpu_hours = rows[0].cost = NAN;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    whatif_csv_row(f, &rows[0]);
    fclose(f);
    ck_assert_msg(len > 4 && !strcmp(buf + len - 4, ",,,\n"), "%s", buf);
    free(buf);
}
END_TEST

Suite *outfile_suite(void)
{
    Suite *s = suite_create("outfile");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_commit_and_abort);
    tcase_add_test(tc, test_full_disk_keeps_the_old_file);
    tcase_add_test(tc, test_failed_plot_leaves_no_picture);
    tcase_add_test(tc, test_output_guard);
    tcase_add_test(tc, test_commands_refuse_to_overwrite_inputs);
    tcase_add_test(tc, test_whatif_csv_fields_by_name);
    suite_add_tcase(s, tc);
    return s;
}
