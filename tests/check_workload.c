/* check_workload.c — the measured-workload table: parsing and its messages, the trainer's batches
 * reproduced (predict) against a direct computation, the what-if and the memory beside them. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dist.h"
#include "fit.h"
#include "memory.h"
#include "step.h"
#include "testutil.h"
#include "trace.h"
#include "workload.h"

#define HEAD "workload,model,batch,vranks,policy,dist,steps,step_ms_median,step_ms_mean,mem_gib,trace\n"

static void refused(const char *text, const char *want)
{
    char path[512];
    unpad_err e = {0};
    workload_row *w = NULL;
    int n = 0;
    tu_write_tmp(path, sizeof path, ".csv", text);
    ck_assert_int_eq(workload_load(path, &w, &n, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, path) && strstr(e.msg, want), "expected '%s' in: %s", want, e.msg);
    unlink(path);
}

START_TEST(test_parse)
{
    char path[512];
    unpad_err e = {0};
    workload_row *w = NULL;
    int n = 0;
    tu_write_tmp(path, sizeof path, ".csv",
                 HEAD "a,bert-base,24,1,none,short,12,7.3,9.5,6.28,a.csv\n"
                      "b,bert-large,32,4,kk,uniform,12,171.75,170.8,18.95,b.csv\n");
    ck_assert_int_eq(workload_load(path, &w, &n, &e), UNPAD_OK);
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(w[1].model, "bert-large");
    ck_assert_int_eq(w[1].vranks, 4);
    ck_assert_double_eq(w[1].meas_ms, 170.8); /* the mean; the median beside it */
    ck_assert_double_eq(w[1].meas_median_ms, 171.75);
    free(w);
    unlink(path);
    refused("workload,model\n", "expected the header");
    refused(HEAD "a,bert-base,24,1,none,short,12,7.3,9.5,6.28\n", ":2: expected 11 columns");
    refused(HEAD "a,bert-base,0,1,none,short,12,7.3,9.5,6.28,a.csv\n", ":2: expected batch 1..65536");
    refused(HEAD "a,../x,24,1,none,short,12,7.3,9.5,6.28,a.csv\n", "plain model");
    refused(HEAD "a,bert-base,24,1,none,short,12,-1,9.5,6.28,a.csv\n", "positive step_ms_median");
    refused(HEAD "a,bert-base,24,1,pack,short,12,7.3,9.5,6.28,a.csv\n", "'pack'");
    refused(HEAD, "no workloads");
    /* the optional act_tokens column: the activations the trainer ended with */
#define HEAD12 "workload,model,batch,vranks,policy,dist,steps,step_ms_median,step_ms_mean,mem_gib,trace,act_tokens\n"
    tu_write_tmp(path, sizeof path, ".csv", HEAD12 "a,bert-base,24,1,none,short,12,7.3,9.5,6.28,a.csv,4096\n");
    ck_assert_int_eq(workload_load(path, &w, &n, &e), UNPAD_OK);
    ck_assert_int_eq(w[0].act_tokens, 4096);
    free(w);
    unlink(path);
    refused(HEAD12 "a,bert-base,24,1,none,short,12,7.3,9.5,6.28,a.csv\n", ":2: expected 12 columns");
    refused(HEAD12 "a,bert-base,24,1,none,short,12,7.3,9.5,6.28,a.csv,0\n", ":2: expected act_tokens 1..2^30");
    refused("workload,model,batch,vranks,policy,dist,steps,step_ms_median,step_ms_mean,mem_gib,trace,x\n",
            ":1: expected the header");
}
END_TEST

/* A table of one row (its text after the header), loaded. */
static workload_row *one_row(const char *row)
{
    char path[512], text[512];
    unpad_err e = {0};
    workload_row *w = NULL;
    int n = 0;
    snprintf(text, sizeof text, HEAD "%s\n", row);
    tu_write_tmp(path, sizeof path, ".csv", text);
    ck_assert_int_eq(workload_load(path, &w, &n, &e), UNPAD_OK);
    ck_assert_int_eq(n, 1);
    unlink(path);
    return w;
}

/* The inputs of the reproduced runs: the H200, BERT-Base, the short-heavy lengths, the defaults. */
static void load_inputs(hw_spec *hw, model_cfg *m, unpad_dist *d, calib_coef *c)
{
    char home[512];
    unpad_err e = {0};
    ck_assert_int_eq(hw_load(tu_path(home, sizeof home, "models/hw/h200-sxm.cfg"), hw, &e), 0);
    ck_assert_int_eq(model_load(tu_path(home, sizeof home, "models/bert-base.cfg"), m, &e), 0);
    ck_assert_int_eq(dist_load(tu_path(home, sizeof home, "models/dists/short.csv"), d, &e), 0);
    calib_default(hw, c);
}

/* The step model's time (us, with the optimizer, without the step overhead) of the trainer's step
 * st at batch 8: seeds 21 x 1000003 + position + 1, one draw each, clamped to [8, longest]. */
static double trainer_step_us(const step_model *sm, dist_sampler *ds, int maxl, int st)
{
    int len[8];
    unpad_err e = {0};
    for (int k = 0; k < 8; k++) {
        uint64_t p = (uint64_t)(st - 1) * 8 + (uint64_t)k;
        dist_sampler_seed(ds, 21 * 1000003ull + p + 1);
        dist_sample(ds, &len[k], 1);
        len[k] = len[k] < 8 ? 8 : len[k] > maxl ? maxl : len[k];
    }
    step_batch b;
    ck_assert_int_eq(step_batch_of(sm, len, 8, &b, &e), 0);
    return step_batch_us(sm, &b) + sm->lamb_us;
}

START_TEST(test_predict)
{
    unpad_err e = {0};
    int n = 1;
    workload_row *w = one_row("a,bert-base,8,1,none,short,3,5,5,4,a.csv");
    hw_spec hw;
    calib_coef c;
    model_cfg m;
    unpad_dist d;
    load_inputs(&hw, &m, &d, &c);
    /* the trainer's steps 9, 10, 11, timed directly: their mean */
    step_model sm;
    ck_assert_int_eq(step_model_init(&sm, &m, &hw, &c, 1, &e), 0);
    dist_sampler *ds;
    ck_assert_int_eq(dist_sampler_alloc(&d, 1, &ds, &e), 0);
    double t[3];
    int maxl = d.max_len < m.max_len ? d.max_len : m.max_len;
    for (int st = 9; st <= 11; st++)
        t[st - 9] = (trainer_step_us(&sm, ds, maxl, st) + sm.overhead_us) / 1e3;
    /* the trainer's log of those steps: 10% slower, 2% faster and a stall (1.5x) than predicted */
    char logs[512], logp[600];
    snprintf(logs, sizeof logs, "/tmp/unpad-test-logs-%d", (int)getpid());
    ck_assert_int_eq(mkdir(logs, 0700), 0);
    snprintf(logp, sizeof logp, "%s/a.log", logs);
    FILE *lf = fopen(logp, "w");
    ck_assert_ptr_nonnull(lf);
    const double slow[3] = {1.10, 0.98, 1.50};
    fprintf(lf, "step      8/11 | loss 11.1 | 100.0 samples/s | 1.0 ms/step | ETA 0s\n");
    for (int st = 9; st <= 11; st++)
        fprintf(lf, "step %6d/11 | loss 11.1 (mlm 10.4 nsp 0.7) | lr 1e-4 | 100.0 samples/s | "
                    "%.6f ms/step | grad norm 1 | ETA 0s\n", st, t[st - 9] * slow[st - 9]);
    fclose(lf);
    const char *h = getenv("UNPAD_HOME");
    workload_setup s = {.home = h && *h ? h : ".", .logs = logs, .hw = &hw, .calib = &c,
                        .seed = 21, .whatif_steps = 300, .keep_steps = 1};
    ck_assert_msg(workload_predict(&s, w, n, &e) == UNPAD_OK, "%s", e.msg);
    /* a run whose activations held 1,024 tokens at the end (act_tokens): its memory is for those */
    workload_row *w2 = one_row("a,bert-base,8,1,none,short,3,5,5,4,a.csv");
    w2[0].act_tokens = 1024;
    ck_assert_msg(workload_predict(&s, w2, 1, &e) == UNPAD_OK, "%s", e.msg);
    memory_setup m2;
    memory_use u2;
    memory_trainer_setup(&m, 8, 1024, 8, 0, &m2);
    memory_predict(&m, &hw, &m2, &u2);
    ck_assert_double_eq_tol(w2[0].mem_gib, u2.total_gib, 1e-12);
    workload_free_steps(w2, 1);
    free(w2);
    unlink(logp);
    rmdir(logs);
    /* kept step by step: each logged step's batch, its prediction and its wall time */
    ck_assert_int_eq(w[0].nper_step, 3);
    int steps[3] = {9, 10, 11}, len[24];
    ck_assert_int_eq(workload_batch_lengths(&s, &w[0], steps, 3, len, &e), UNPAD_OK);
    for (int j = 0; j < 3; j++) {
        const workload_step *q = &w[0].per_step[j];
        int tok = 0, mx = 0;
        double sq = 0;
        for (int k = 0; k < 8; k++) {
            tok += len[j * 8 + k];
            sq += (double)len[j * 8 + k] * len[j * 8 + k];
            mx = len[j * 8 + k] > mx ? len[j * 8 + k] : mx;
        }
        ck_assert_int_eq(q->step, 9 + j);
        ck_assert_int_eq(q->seqs, 8);
        ck_assert_int_eq(q->tokens, tok);
        ck_assert_int_eq(q->max_len, mx);
        ck_assert_double_eq(q->sum_len2, sq);
        ck_assert_double_eq_tol(q->pred_ms, t[j], 1e-9);
        ck_assert_double_eq_tol(q->meas_ms, t[j] * slow[j], 1e-5);
    }
    char csv[600];
    snprintf(csv, sizeof csv, "%s.csv", logs);
    ck_assert_msg(workload_write_steps_csv(csv, w, n, "# a comment\n", &e) == UNPAD_OK, "%s", e.msg);
    FILE *cf = fopen(csv, "r");
    ck_assert_ptr_nonnull(cf);
    char line[512];
    int lines = 0, st = 0, seqs = 0, tk = 0;
    ck_assert_ptr_nonnull(fgets(line, sizeof line, cf));
    ck_assert_str_eq(line, "# a comment\n");
    ck_assert_ptr_nonnull(fgets(line, sizeof line, cf));
    ck_assert(strncmp(line, "workload,step,seqs,tokens,", 26) == 0);
    while (fgets(line, sizeof line, cf)) {
        ck_assert_int_eq(sscanf(line, "a,%d,%d,%d,", &st, &seqs, &tk), 3);
        ck_assert_int_eq(st, 9 + lines);
        ck_assert_int_eq(tk, w[0].per_step[lines].tokens);
        lines++;
    }
    fclose(cf);
    unlink(csv);
    ck_assert_int_eq(lines, 3);
    workload_free_steps(w, n);
    ck_assert_ptr_null(w[0].per_step);
    /* per step: the median of (predicted - measured) / measured, and one stall */
    ck_assert_double_eq_tol(w[0].step_err, 1 / 1.10 - 1, 1e-5);
    ck_assert_int_eq(w[0].stalls, 1);
    /* the band brackets a mean of `steps` steps: ordered, about the what-if's mean */
    ck_assert(w[0].band_lo_ms <= w[0].band_hi_ms);
    ck_assert(w[0].band_lo_ms > 0.6 * w[0].whatif_ms && w[0].band_hi_ms < 1.4 * w[0].whatif_ms);
    double mean = (t[0] + t[1] + t[2]) / 3;
    ck_assert_double_eq_tol(w[0].predict_ms, mean, 1e-9);
    ck_assert_double_eq_tol(w[0].predict_err, (mean - 5) / 5, 1e-9);
    /* the what-if's mean is of the same order; the memory is memory.h's for 8 x the longest */
    ck_assert(w[0].whatif_ms > 0.7 * mean && w[0].whatif_ms < 1.3 * mean);
    memory_setup ms;
    memory_use mu;
    memory_trainer_setup(&m, 8, 8L * maxl, 8, 0, &ms);
    memory_predict(&m, &hw, &ms, &mu);
    ck_assert_double_eq_tol(w[0].mem_gib, mu.total_gib, 1e-12);
    dist_sampler_free(ds);
    dist_free(&d);
    step_model_free(&sm);
    free(w);
}
END_TEST

/* The table's summary: the what-if errors against 2%, the band, and the trainer's draw against the
 * sampled batches (predict / whatif - 1), its mean and the rows above 0. */
START_TEST(test_summarize)
{
    workload_row r[3];
    memset(r, 0, sizeof r);
    const double meas[3] = {10, 20, 40}, pred[3] = {10.2, 19.8, 40.8}, wif[3] = {10.0, 20.0, 40.0};
    for (int i = 0; i < 3; i++) {
        r[i].meas_ms = meas[i];
        r[i].predict_ms = pred[i];
        r[i].whatif_ms = wif[i];
        r[i].predict_err = (pred[i] - meas[i]) / meas[i];
        r[i].whatif_err = (wif[i] - meas[i]) / meas[i];
        r[i].band_lo_ms = 0.99 * wif[i];
        r[i].band_hi_ms = 1.01 * wif[i];
        r[i].step_err = NAN;
    }
    r[2].meas_ms = 41; /* 2.4% above its what-if: out of 2% and out of its band */
    r[2].whatif_err = (40.0 - 41) / 41;
    workload_summary s;
    workload_summarize(r, 3, &s);
    ck_assert_int_eq(s.n, 3);
    ck_assert_int_eq(s.within, 2);
    ck_assert_int_eq(s.in_band, 2);
    ck_assert_double_eq_tol(s.draw_mean, (0.02 - 0.01 + 0.02) / 3, 1e-12);
    ck_assert_int_eq(s.draw_above, 2);
    ck_assert_int_eq(s.step_logs, 0);
    ck_assert(isnan(s.step_max_abs));
}
END_TEST

/* Several workloads on several threads: the same numbers as one after another. */
START_TEST(test_threads)
{
    unpad_err e = {0};
    static const char *const rows[3] = {"a,bert-base,8,1,none,short,20,5,5,4,a.csv",
                                        "b,bert-base,16,1,none,uniform,20,9,9,5,b.csv",
                                        "c,bert-base,6,3,kk,bimodal,20,14,14,5,c.csv"};
    workload_row one[3], many[3];
    for (int i = 0; i < 3; i++) {
        workload_row *w = one_row(rows[i]);
        one[i] = many[i] = w[0];
        free(w);
    }
    hw_spec hw;
    calib_coef c;
    model_cfg m;
    unpad_dist d;
    load_inputs(&hw, &m, &d, &c);
    const char *h = getenv("UNPAD_HOME");
    workload_setup s = {.home = h && *h ? h : ".", .logs = "/nonexistent", .hw = &hw, .calib = &c, .seed = 21,
                        .whatif_steps = 300, .threads = 1};
    ck_assert_msg(workload_predict(&s, one, 3, &e) == UNPAD_OK, "%s", e.msg);
    s.threads = 3;
    ck_assert_msg(workload_predict(&s, many, 3, &e) == UNPAD_OK, "%s", e.msg);
    for (int i = 0; i < 3; i++) {
        ck_assert_double_eq(one[i].predict_ms, many[i].predict_ms);
        ck_assert_double_eq(one[i].whatif_ms, many[i].whatif_ms);
        ck_assert_double_eq(one[i].band_lo_ms, many[i].band_lo_ms);
        ck_assert_double_eq(one[i].band_hi_ms, many[i].band_hi_ms);
        ck_assert(one[i].predict_ms > 0);
    }
    ck_assert(one[1].predict_ms != one[0].predict_ms); /* each row its own */
    dist_free(&d);
}
END_TEST

/* --graphs on: calib_graphs swaps in the graph coefficients (or, without them, keeps the launches
 * and drops only the host's wait, an estimate); a log that says so is read as such; the fit of the
 * graph coefficients recovers them from steps of two launch counts and refuses one count; a row
 * whose log says --graphs on is predicted under calib_graphs. */
START_TEST(test_graphs)
{
    hw_spec hw;
    calib_coef c;
    model_cfg m;
    unpad_dist d;
    load_inputs(&hw, &m, &d, &c);
    c.host_launch_us = 17;
    calib_coef est = c, fit = c;
    calib_graphs(&est);
    ck_assert_int_eq(est.graphs, CALIB_GRAPHS_ESTIMATED);
    ck_assert_double_eq(est.launch_us, c.launch_us);
    ck_assert_double_eq(est.step_overhead_us, c.step_overhead_us);
    ck_assert_double_eq(est.host_launch_us, 0);
    ck_assert_ptr_nonnull(strstr(calib_graphs_label(&est), "an estimate"));
    fit.graph_launch_us = 1.25;
    fit.graph_step_overhead_us = 33;
    calib_graphs(&fit);
    ck_assert_int_eq(fit.graphs, CALIB_GRAPHS_FITTED);
    ck_assert_double_eq(fit.launch_us, 1.25);
    ck_assert_double_eq(fit.step_overhead_us, 33);
    ck_assert_double_eq(fit.host_launch_us, 0);
    ck_assert_str_eq(calib_graphs_label(&fit), "on");
    calib_graphs(&fit); /* twice: once */
    ck_assert_double_eq(fit.launch_us, 1.25);
    ck_assert_str_eq(calib_graphs_label(&c), "");

    /* the log's start-up lines */
    char logs[512], logp[600];
    snprintf(logs, sizeof logs, "/tmp/unpad-test-graphs-%d", (int)getpid());
    ck_assert_int_eq(mkdir(logs, 0700), 0);
    snprintf(logp, sizeof logp, "%s/g.log", logs);
    const char *h = getenv("UNPAD_HOME");
    workload_row *w = one_row("g,bert-base,8,1,none,short,3,5,5,4,g.csv");
    workload_setup s = {.home = h && *h ? h : ".", .logs = logs, .hw = &hw, .calib = &c, .seed = 21,
                        .whatif_steps = 200, .threads = 1};
    ck_assert_int_eq(workload_log_graphs(&s, &w[0]), 0); /* no log */
    static const char *const logs_of[4][2] = {
        {WORKLOAD_LOG_GRAPHS ", captured while the step before computes (not the first step)\n", "1"},
        {WORKLOAD_LOG_GRAPHS ", captured while the step before computes (not used: the all-reduce buckets start "
                             "from inside the backward)\n", "0"},
        {"  data synthetic tokens\n", "0"},
        {"step      9/12 | loss 11.1\n" WORKLOAD_LOG_GRAPHS "\n", "0"}};
    for (int i = 0; i < 4; i++) {
        FILE *lf = fopen(logp, "w");
        ck_assert_ptr_nonnull(lf);
        fprintf(lf, "unpad-train: bert-base (12 layers) on %s, bf16 activations and weights\n%s", hw.device,
                logs_of[i][0]);
        fclose(lf);
        ck_assert_int_eq(workload_log_graphs(&s, &w[0]), logs_of[i][1][0] - '0');
    }

    /* a run with graphs, predicted under the graph coefficients: the same numbers as the row
     * predicted without the log line under calib_graphs directly */
    FILE *lf = fopen(logp, "w");
    ck_assert_ptr_nonnull(lf);
    fprintf(lf, "unpad-train: bert-base (12 layers) on %s, bf16 activations and weights\n%s", hw.device,
            logs_of[0][0]);
    for (int st = 9; st <= 11; st++)
        fprintf(lf, "step %6d/12 | loss 11.1 | 100.0 samples/s | 5.0 ms/step | ETA 0s\n", st);
    fclose(lf);
    calib_coef g = c;
    g.graph_launch_us = 1.5;
    g.graph_step_overhead_us = 20;
    s.calib = &g;
    unpad_err e = {0};
    ck_assert_msg(workload_predict(&s, w, 1, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_int_eq(w[0].graphs, CALIB_GRAPHS_FITTED);
    calib_coef gg = g;
    calib_graphs(&gg);
    workload_row *w2 = one_row("g,bert-base,8,1,none,short,3,5,5,4,g.csv");
    workload_setup s2 = s;
    s2.calib = &gg;
    s2.logs = "/nonexistent";
    ck_assert_msg(workload_predict(&s2, w2, 1, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_int_eq(w2[0].graphs, 0);
    ck_assert_double_eq_tol(w[0].predict_ms, w2[0].predict_ms, 1e-12);
    ck_assert_double_eq_tol(w[0].whatif_ms, w2[0].whatif_ms, 1e-12);
    workload_row *w3 = one_row("g,bert-base,8,1,none,short,3,5,5,4,g.csv"); /* without graphs: longer */
    s2.calib = &g;
    ck_assert_msg(workload_predict(&s2, w3, 1, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert(w3[0].predict_ms > w[0].predict_ms);
    workload_free_steps(w, 1);
    free(w);
    free(w2);
    free(w3);
    unlink(logp);
    rmdir(logs);

    /* the fit: gap = 1.7 x launches + 55, +-0.5, launches of two models */
    enum { N = 40 };
    double gap[N], launches[N], step[N];
    for (int i = 0; i < N; i++) {
        launches[i] = i % 2 ? 800 : 420;
        gap[i] = 1.7 * launches[i] + 55 + (i % 4 < 2 ? 0.5 : -0.5);
        step[i] = 20000 + gap[i];
    }
    fit_result *r = calloc(1, sizeof *r);
    ck_assert_ptr_nonnull(r);
    ck_assert_msg(fit_graphs_untraced(r, gap, launches, step, N, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_double_eq_tol(r->coef.graph_launch_us, 1.7, 1e-3);
    ck_assert_double_eq_tol(r->coef.graph_step_overhead_us, 55, 0.5);
    ck_assert_int_eq(r->param[FIT_GRAPH_LAUNCH_US].fitted, 1);
    ck_assert_int_eq(r->param[FIT_GRAPH_STEP_OVERHEAD_US].rows, N);
    ck_assert_int_eq(r->resid[FIT_GROUP_GRAPHS].rows, N);
    for (int i = 0; i < N; i++)
        launches[i] = 420;
    memset(r, 0, sizeof *r);
    ck_assert_int_eq(fit_graphs_untraced(r, gap, launches, step, N, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "cannot be told apart"), "%s", e.msg);
    ck_assert_int_eq(fit_graphs_untraced(r, gap, launches, step, 2, &e), UNPAD_EINVAL);
    free(r);
    dist_free(&d);
}
END_TEST

/* Calibration from untraced steps: each logged step's wall time minus the step model's time for
 * its batch (no overhead), then their robust location as the step overhead. */
START_TEST(test_step_gaps)
{
    unpad_err e = {0};
    workload_row *w = one_row("g,bert-base,8,1,none,short,4,5,5,4,g.csv");
    hw_spec hw;
    calib_coef c;
    model_cfg m;
    unpad_dist d;
    load_inputs(&hw, &m, &d, &c);
    c.step_overhead_us = 0;
    step_model sm;
    ck_assert_int_eq(step_model_init(&sm, &m, &hw, &c, 1, &e), 0);
    dist_sampler *ds;
    ck_assert_int_eq(dist_sampler_alloc(&d, 1, &ds, &e), 0);
    int maxl = d.max_len < m.max_len ? d.max_len : m.max_len;
    /* steps 9..12: 0.4, 0.5, 0.6 ms above the model and a 30 ms stall; step 11 missing */
    const double extra_ms[4] = {0.4, 0.5, 0.6, 30};
    double t[4];
    for (int st = 9; st <= 12; st++)
        t[st - 9] = trainer_step_us(&sm, ds, maxl, st) / 1e3 + extra_ms[st - 9];
    char logs[512], logp[600];
    snprintf(logs, sizeof logs, "/tmp/unpad-test-gaps-%d", (int)getpid());
    ck_assert_int_eq(mkdir(logs, 0700), 0);
    const char *h = getenv("UNPAD_HOME");
    workload_setup s = {.home = h && *h ? h : ".", .logs = logs, .hw = &hw, .calib = &c, .seed = 21};
    double gap[8], step[8];
    size_t k = 0;
    /* no log: an error naming it, nothing appended */
    ck_assert_int_eq(workload_step_gaps(&s, &w[0], gap, step, &k, &e), UNPAD_EIO);
    ck_assert_msg(strstr(e.msg, "g.log") && strstr(e.msg, "workload g"), "%s", e.msg);
    ck_assert_int_eq((int)k, 0);
    snprintf(logp, sizeof logp, "%s/g.log", logs);
    FILE *lf = fopen(logp, "w");
    ck_assert_ptr_nonnull(lf);
    for (int st = 9; st <= 12; st++)
        if (st != 11)
            fprintf(lf, "step %6d/12 | loss 11.1 | 100.0 samples/s | %.6f ms/step | ETA 0s\n", st, t[st - 9]);
    fclose(lf);
    ck_assert_msg(workload_step_gaps(&s, &w[0], gap, step, &k, &e) == UNPAD_OK, "%s", e.msg);
    /* a log of unpad-train --fp8 on against a bf16 calibration: refused, naming the log's line 1 */
    lf = fopen(logp, "w");
    ck_assert_ptr_nonnull(lf);
    fprintf(lf, "unpad-train: bert-base (12 layers) on NVIDIA H200, bf16 activations and weights, the encoder's "
                "Linear forwards and data gradients in FP8\n");
    fclose(lf);
    size_t k2 = 0;
    ck_assert_int_eq(workload_step_gaps(&s, &w[0], gap, step, &k2, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "g.log:1: workload g ran with --fp8 on, but the calibration describes bf16 "
                                "products: pass --fp8 on"), "%s", e.msg);
    ck_assert_int_eq((int)k2, 0);
    /* a log of another GPU than the spec's device: refused, naming the spec of that GPU where one
     * names it */
    const char *other[2][2] = {{"NVIDIA H100 80GB HBM3", "pass --hw h100-sxm"},
                               {"Some GPU 7", "pass --hw with a spec of that GPU"}};
    for (int i = 0; i < 2; i++) {
        lf = fopen(logp, "w");
        ck_assert_ptr_nonnull(lf);
        fprintf(lf, "unpad-train: bert-base (12 layers) on %s, bf16 activations and weights\n", other[i][0]);
        fclose(lf);
        ck_assert_int_eq(workload_step_gaps(&s, &w[0], gap, step, &k2, &e), UNPAD_EINVAL);
        ck_assert_msg(strstr(e.msg, "g.log:1: workload g ran on ") && strstr(e.msg, other[i][0]) &&
                          strstr(e.msg, "but --hw is h200-sxm (device = NVIDIA H200)") && strstr(e.msg, other[i][1]),
                      "%s", e.msg);
        ck_assert_int_eq((int)k2, 0);
    }
    unlink(logp);
    rmdir(logs);
    ck_assert_int_eq((int)k, 3);
    ck_assert_double_eq_tol(gap[0], 400, 1e-3);
    ck_assert_double_eq_tol(gap[1], 500, 1e-3);
    ck_assert_double_eq_tol(gap[2], 30000, 1e-3);
    ck_assert_double_eq_tol(step[2], t[3] * 1e3, 1e-3);
    dist_sampler_free(ds);
    dist_free(&d);
    step_model_free(&sm);
    free(w);
}
END_TEST

START_TEST(test_overhead_untraced)
{
    /* a robust location: the 40 ms stall does not move it */
    const double gap[] = {480, 520, 500, 490, 510, 505, 495, 40000};
    double step[8];
    for (int i = 0; i < 8; i++)
        step[i] = 10000 + gap[i];
    fit_result *r = calloc(1, sizeof *r);
    unpad_err e = {0};
    ck_assert_ptr_nonnull(r);
    r->coef.step_overhead_us = 993;
    ck_assert_msg(fit_overhead_untraced(r, gap, step, 8, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_double_eq_tol(r->coef.step_overhead_us, 500, 5);
    ck_assert_int_eq(r->param[FIT_STEP_OVERHEAD_US].fitted, 1);
    ck_assert_int_eq((int)r->param[FIT_STEP_OVERHEAD_US].rows, 8);
    ck_assert_int_eq((int)r->resid[FIT_GROUP_STEP].rejected, 1);
    ck_assert_ptr_nonnull(strstr(r->notes, "untraced"));
    /* steps faster than their operators: floored at 0, and said */
    const double neg[] = {-300, -310, -290};
    memset(r, 0, sizeof *r);
    ck_assert_int_eq(fit_overhead_untraced(r, neg, step, 3, &e), UNPAD_OK);
    ck_assert_double_eq(r->coef.step_overhead_us, 0);
    ck_assert_ptr_nonnull(strstr(r->notes, "set to 0"));
    /* one step is not a fit */
    ck_assert_int_eq(fit_overhead_untraced(r, gap, step, 1, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "at least 2"));
    free(r);
}
END_TEST

START_TEST(test_host_untraced)
{
    /* 60 steps of which a third are short enough to wait: under host time h each waits
     * (h - 6) x 30 us where h > 6 (made up, increasing in h), the others never; their gaps are
     * an overhead of 200 us plus the wait at the true h = 10 plus +-1 us. The grid's candidate 10
     * is found, the gaps come back without its wait, and the overhead fit on them gives 200. */
    enum { N = 60, NH = 41 };
    double hs[NH], gap[N], step[N], wait[N * NH];
    for (int j = 0; j < NH; j++)
        hs[j] = 0.5 * j;
    for (int i = 0; i < N; i++) {
        int waits = i % 3 == 0;
        for (int j = 0; j < NH; j++)
            wait[i * NH + j] = waits && hs[j] > 6 ? (hs[j] - 6) * 30 : 0;
        gap[i] = 200 + (i % 2 ? 1 : -1) + wait[i * NH + 20];
        step[i] = (waits ? 5000 : 40000) + gap[i];
    }
    fit_result *r = calloc(1, sizeof *r);
    unpad_err e = {0};
    ck_assert_ptr_nonnull(r);
    ck_assert_msg(fit_host_untraced(r, gap, step, N, hs, NH, wait, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_double_eq(r->coef.host_launch_us, 10);
    ck_assert_int_eq(r->param[FIT_HOST_LAUNCH_US].fitted, 1);
    ck_assert_double_eq(r->param[FIT_HOST_LAUNCH_US].se, 0.5);
    for (int i = 0; i < N; i++)
        ck_assert_double_eq_tol(gap[i], 200, 1.001);
    ck_assert_int_eq(fit_overhead_untraced(r, gap, step, N, &e), UNPAD_OK);
    ck_assert_double_eq_tol(r->coef.step_overhead_us, 200, 1.001);
    /* no step waits under any candidate: 0 is kept, the gaps unchanged */
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < NH; j++)
            wait[i * NH + j] = 0;
        gap[i] = 200 + (i % 2 ? 1 : -1);
    }
    memset(r, 0, sizeof *r);
    ck_assert_int_eq(fit_host_untraced(r, gap, step, N, hs, NH, wait, &e), UNPAD_OK);
    ck_assert_double_eq(r->coef.host_launch_us, 0);
    ck_assert_double_eq(gap[1], 201);
    /* every step waits alike (h x 2 launches of its first kernel): the overhead absorbs it, the
     * scores tie, and 0 is kept however the rounding falls */
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < NH; j++)
            wait[i * NH + j] = 2 * hs[j];
        gap[i] = 200 + 7.3 * (i % 5) + 2 * 10;
    }
    memset(r, 0, sizeof *r);
    ck_assert_int_eq(fit_host_untraced(r, gap, step, N, hs, NH, wait, &e), UNPAD_OK);
    ck_assert_double_eq(r->coef.host_launch_us, 0);
    ck_assert_int_eq(fit_host_untraced(r, gap, step, 1, hs, NH, wait, &e), UNPAD_EINVAL);
    free(r);
}
END_TEST

/* The lengths of a measured run reproduced from its seed are the trainer's: every traced batch of
 * traces/calib-w-bert-base-b16-wiki512.csv has their counts, and the fit takes them; a length off
 * by one is refused as another run's. */
START_TEST(test_batch_lengths_match_trainer)
{
    char path[512], home[512];
    unpad_err e = {0};
    workload_row *w = one_row("calib-w-bert-base-b16-wiki512,bert-base,16,1,none,wiki512,92,9,9,5,x.csv");
    const char *h = getenv("UNPAD_HOME");
    workload_setup s = {.home = h && *h ? h : ".", .seed = 21};
    trace_set set = {0};
    ck_assert_msg(trace_read(tu_path(path, sizeof path, "traces/calib-w-bert-base-b16-wiki512.csv"), &set, &e) == 0,
                  "%s", e.msg);
    set.lens = calloc(4, sizeof *set.lens);
    ck_assert_ptr_nonnull(set.lens);
    const int steps[4] = {5, 6, 7, 8};
    int all[4 * 16];
    ck_assert_msg(workload_batch_lengths(&s, w, steps, 4, all, &e) == UNPAD_OK, "%s", e.msg);
    for (int j = 0; j < 4; j++) {
        int *len = malloc(16 * sizeof *len);
        ck_assert_ptr_nonnull(len);
        memcpy(len, all + 16 * j, 16 * sizeof *len);
        set.lens[set.nlens++] = (trace_batch_lengths){.step = steps[j], .rank = 0, .n = 16, .len = len};
    }
    model_cfg m;
    hw_spec hw;
    ck_assert_int_eq(model_load(tu_path(home, sizeof home, "models/bert-base.cfg"), &m, &e), 0);
    ck_assert_int_eq(hw_load(tu_path(home, sizeof home, "models/hw/h200-sxm.cfg"), &hw, &e), 0);
    calib_coef init;
    calib_default(&hw, &init);
    fit_result *r = calloc(1, sizeof *r);
    ck_assert_ptr_nonnull(r);
    ck_assert_msg(fit_calibrate(&set, 1, &m, 1, &hw, &init, r, &e) == UNPAD_OK, "%s", e.msg);
    set.lens[2].len[0]++;
    ck_assert_int_eq(fit_calibrate(&set, 1, &m, 1, &hw, &init, r, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "step 7") && strstr(e.msg, "another run"), "%s", e.msg);
    /* virtual ranks are balanced: not reproduced here */
    w->vranks = 2;
    ck_assert_int_eq(workload_batch_lengths(&s, w, steps, 1, all, &e), UNPAD_EINVAL);
    free(r);
    free(w);
    trace_set_free(&set);
}
END_TEST

/* A log with the start-up line of the last layer on the heads' rows (before the first step line):
 * the run's steps predicted so, in the validation (predict and what-if) and in the calibration's
 * step gaps; a log without it, or with it only after a step line: every layer on all tokens. */
START_TEST(test_last_heads_log)
{
    hw_spec hw;
    calib_coef c;
    model_cfg m;
    unpad_dist d;
    unpad_err e = {0};
    load_inputs(&hw, &m, &d, &c);
    c.step_overhead_us = 0;
    char logs[512], logp[600];
    snprintf(logs, sizeof logs, "/tmp/unpad-test-heads-%d", (int)getpid());
    ck_assert_int_eq(mkdir(logs, 0700), 0);
    snprintf(logp, sizeof logp, "%s/h.log", logs);
    const char *h = getenv("UNPAD_HOME");
    workload_setup s = {.home = h && *h ? h : ".", .logs = logs, .hw = &hw, .calib = &c, .seed = 21,
                        .whatif_steps = 200, .threads = 1};
    workload_row *w = one_row("h,bert-base,8,1,none,short,3,5,5,4,h.csv");
    ck_assert_int_eq(workload_log_last_heads(&s, &w[0]), 0); /* no log */
    /* the trainer's steps 9..11 under each step model, 0.3 ms above it */
    step_model sm[2];
    dist_sampler *ds;
    ck_assert_int_eq(dist_sampler_alloc(&d, 1, &ds, &e), 0);
    int maxl = d.max_len < m.max_len ? d.max_len : m.max_len;
    double t[2][3];
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(step_model_init(&sm[k], &m, &hw, &c, STEP_FUSED | (k ? STEP_LAST_HEADS : 0), &e), 0);
        for (int st = 9; st <= 11; st++)
            t[k][st - 9] = trainer_step_us(&sm[k], ds, maxl, st) / 1e3;
    }
    ck_assert(t[1][0] < t[0][0]);
    static const char *const head[4] = {WORKLOAD_LOG_LAST_HEADS " (the masked positions and each sequence's first "
                                        "token)\n", "  data synthetic tokens\n", "",
                                        "  data synthetic tokens\n"};
    static const char *const after[4] = {"", "", "", WORKLOAD_LOG_LAST_HEADS "\n"};
    double pred[4], whatif[4], gap[4][3];
    for (int i = 0; i < 4; i++) {
        FILE *lf = fopen(logp, "w");
        ck_assert_ptr_nonnull(lf);
        fprintf(lf, "unpad-train: bert-base (12 layers) on %s, bf16 activations and weights\n%s", hw.device, head[i]);
        for (int st = 9; st <= 11; st++)
            fprintf(lf, "step %6d/11 | loss 11.1 | 100.0 samples/s | %.6f ms/step | ETA 0s\n%s", st,
                    t[1][st - 9] + 0.3, st == 9 ? after[i] : "");
        fclose(lf);
        ck_assert_int_eq(workload_log_last_heads(&s, &w[0]), i == 0);
        ck_assert_int_eq(workload_log_graphs(&s, &w[0]), 0);
        ck_assert_msg(workload_predict(&s, w, 1, &e) == UNPAD_OK, "%s", e.msg);
        ck_assert_int_eq(w[0].last_heads, i == 0);
        pred[i] = w[0].predict_ms;
        whatif[i] = w[0].whatif_ms;
        double step[3];
        size_t k = 0;
        ck_assert_msg(workload_step_gaps(&s, &w[0], gap[i], step, &k, &e) == UNPAD_OK, "%s", e.msg);
        ck_assert_int_eq((int)k, 3);
    }
    for (int j = 0; j < 3; j++) {
        ck_assert_double_eq_tol(gap[0][j], 300, 1e-3); /* the model the log names: the 0.3 ms left */
        ck_assert_double_eq_tol(gap[1][j], 300 - (t[0][j] - t[1][j]) * 1e3, 1e-3);
    }
    ck_assert_double_eq_tol(pred[0], (t[1][0] + t[1][1] + t[1][2]) / 3, 1e-9);
    ck_assert_double_eq_tol(pred[1], (t[0][0] + t[0][1] + t[0][2]) / 3, 1e-9);
    ck_assert(whatif[0] < whatif[1]);
    for (int i = 2; i < 4; i++) {
        ck_assert_double_eq(pred[i], pred[1]);
        ck_assert_double_eq(whatif[i], whatif[1]);
    }
    workload_free_steps(w, 1);
    free(w);
    unlink(logp);
    rmdir(logs);
    for (int k = 0; k < 2; k++)
        step_model_free(&sm[k]);
    dist_sampler_free(ds);
    dist_free(&d);
}
END_TEST

Suite *workload_suite(void)
{
    Suite *s = suite_create("workload");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_parse);
    tcase_add_test(tc, test_predict);
    tcase_add_test(tc, test_summarize);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_step_gaps);
    tcase_add_test(tc, test_overhead_untraced);
    tcase_add_test(tc, test_host_untraced);
    tcase_add_test(tc, test_graphs);
    tcase_add_test(tc, test_last_heads_log);
    tcase_add_test(tc, test_batch_lengths_match_trainer);
    suite_add_tcase(s, tc);
    return s;
}
