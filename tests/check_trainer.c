/* check_trainer.c — the trainer's CPU-side outputs and files, without a GPU: the metrics file (JSON
 * lines with the documented keys), the run summary, checkpoint folders (naming, rotation, a failed
 * write that keeps the good ones, resume selection of the latest complete one, refusals of a bad
 * header, another model or another run), and the Chrome trace writer (valid JSON after a normal
 * close and after an early exit). */
#include <check.h>
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "chrome_trace.h"
#include "ckpt_dir.h"
#include "testutil.h"
#include "train_log.h"

/* ---- a small JSON validator: 1 if s[0..] holds exactly one JSON value (and blanks) ------------- */
static const char *js_value(const char *p);
static const char *js_ws(const char *p)
{
    while (*p && isspace((unsigned char)*p))
        p++;
    return p;
}
static const char *js_string(const char *p)
{
    if (*p++ != '"')
        return NULL;
    for (; *p && *p != '"'; p++)
        if (*p == '\\') {
            p++;
            if (!*p)
                return NULL;
        } else if ((unsigned char)*p < 0x20) {
            return NULL;
        }
    return *p == '"' ? p + 1 : NULL;
}
static const char *js_number(const char *p)
{
    char *end;
    strtod(p, &end);
    return end == p ? NULL : end;
}
static const char *js_seq(const char *p, char close, int object)
{
    p = js_ws(p + 1);
    if (*p == close)
        return p + 1;
    for (;;) {
        if (object) {
            if (!(p = js_string(js_ws(p))) || *(p = js_ws(p)) != ':')
                return NULL;
            p++;
        }
        if (!(p = js_value(p)))
            return NULL;
        p = js_ws(p);
        if (*p == close)
            return p + 1;
        if (*p++ != ',')
            return NULL;
    }
}
static const char *js_value(const char *p)
{
    p = js_ws(p);
    if (*p == '{')
        return js_seq(p, '}', 1);
    if (*p == '[')
        return js_seq(p, ']', 0);
    if (*p == '"')
        return js_string(p);
    if (!strncmp(p, "null", 4) || !strncmp(p, "true", 4))
        return p + 4;
    if (!strncmp(p, "false", 5))
        return p + 5;
    return js_number(p);
}
static int json_valid(const char *s)
{
    const char *p = js_value(s);
    return p && !*js_ws(p);
}

static char *slurp(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    unpad_err e = {0};
    ck_assert_msg(unpad_read_file(path, &text, &len, &e) == UNPAD_OK, "%s", e.msg);
    return text;
}

static void tmp_dir(char *buf, size_t n)
{
    snprintf(buf, n, "/tmp/unpad-ckpt-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(buf));
}

static void rm_rf(const char *p)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", p);
    ck_assert_int_eq(system(cmd), 0);
}

/* ---- metrics and summary ------------------------------------------------------------------------ */
START_TEST(test_metrics_lines)
{
    char path[256];
    ck_assert_ptr_nonnull(tu_write_tmp(path, sizeof path, ".jsonl", ""));
    train_log *l;
    unpad_err e = {0};
    ck_assert_int_eq(train_log_open(path, 0, &l, &e), UNPAD_OK);
    train_step_metrics m = {.step = 10, .steps = 30, .time_s = 1.5, .loss = 7.25, .mlm_loss = 6.5, .nsp_loss = 0.75,
                            .mlm_acc = 0.125, .lr = 4.25e-4, .grad_norm = NAN, .samples_per_s = 100,
                            .tokens_per_s = 25600, .tflops = 1.5, .ms_per_step = 20, .gpu_ms = 19.5, .host_ms = 2.25,
                            .eta_s = -1, .skipped = 1};
    train_log_step(l, &m);
    train_log_eval(l, 10, 2.0, 6.75, 0.25);
    ck_assert_int_eq(train_log_close(l, &e), UNPAD_OK);
    char *text = slurp(path), *save = NULL;
    const char *step_keys[] = {"\"kind\": \"step\"", "\"step\": 10", "\"steps\": 30", "\"time_s\"", "\"loss\": 7.25",
                               "\"mlm_loss\": 6.5", "\"nsp_loss\": 0.75", "\"mlm_acc\": 0.125", "\"lr\": 0.000425",
                               "\"grad_norm\": null", "\"samples_per_s\": 100", "\"tokens_per_s\": 25600",
                               "\"tflops\": 1.5", "\"ms_per_step\": 20", "\"gpu_ms\": 19.5",
                               "\"host_ms\": 2.25", "\"eta_s\": null", "\"skipped\": 1"};
    int lines = 0;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save), lines++) {
        ck_assert_msg(json_valid(line), "not one JSON object: %s", line);
        if (lines == 0)
            for (size_t k = 0; k < sizeof step_keys / sizeof *step_keys; k++)
                ck_assert_msg(strstr(line, step_keys[k]), "%s missing in %s", step_keys[k], line);
        else
            ck_assert_str_eq(line, "{\"kind\": \"eval\", \"step\": 10, \"time_s\": 2, \"mlm_loss\": 6.75, "
                                   "\"mlm_acc\": 0.25}");
    }
    ck_assert_int_eq(lines, 2);
    free(text);
    /* a resumed run appends after a resume line: the interrupted run's lines stay */
    ck_assert_int_eq(train_log_open(path, 1, &l, &e), UNPAD_OK);
    train_log_resume(l, 8, "ck/step-000008");
    train_log_eval(l, 12, 3.0, 6.5, 0.5);
    ck_assert_int_eq(train_log_close(l, &e), UNPAD_OK);
    text = slurp(path);
    const char *want[] = {"\"kind\": \"step\", \"step\": 10", "\"kind\": \"eval\", \"step\": 10",
                          "{\"kind\": \"resume\", \"step\": 8, \"from\": \"ck/step-000008\"}",
                          "\"kind\": \"eval\", \"step\": 12"};
    lines = 0;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save), lines++) {
        ck_assert_msg(lines < 4 && json_valid(line) && strstr(line, want[lines]), "line %d: %s", lines, line);
    }
    ck_assert_int_eq(lines, 4);
    free(text);
    /* a new run (no --resume) starts the file again */
    ck_assert_int_eq(train_log_open(path, 0, &l, &e), UNPAD_OK);
    ck_assert_int_eq(train_log_close(l, &e), UNPAD_OK);
    text = slurp(path);
    ck_assert_str_eq(text, "");
    free(text);
    unlink(path);
}
END_TEST

START_TEST(test_summary_json)
{
    char path[512], derived[512];
    train_summary_path(NULL, "run/metrics.jsonl", derived, sizeof derived);
    ck_assert_str_eq(derived, "run/metrics.summary.json");
    train_summary_path(NULL, "a.b/log", derived, sizeof derived);
    ck_assert_str_eq(derived, "a.b/log.summary.json");
    train_summary_path("s.json", "log.jsonl", derived, sizeof derived);
    ck_assert_str_eq(derived, "s.json");
    ck_assert_ptr_nonnull(tu_write_tmp(path, sizeof path, ".json", ""));
    char *argv[] = {"unpad-train", "--model", "m \"quoted\".cfg"};
    train_summary s = {.outcome = "stopped by signal", .reason = "", .first_step = 1, .last_step = 12,
                       .steps_total = 30, .steps_run = 12, .time_s = 3, .warmup_s = 0.75, .first_step_s = NAN,
                       .samples_per_s = 10, .steady_samples_per_s = NAN, .first_loss = 11, .final_loss = 9.5,
                       .eval_mlm_loss = NAN,
                       .checkpoint = "ck/step-000012", .model = "bert-tiny", .build = "abc-dirty", .argc = 3,
                       .argv = argv};
    unpad_err e = {0};
    ck_assert_int_eq(train_summary_write(path, &s, &e), UNPAD_OK);
    char *text = slurp(path);
    ck_assert_msg(json_valid(text), "%s", text);
    ck_assert_ptr_nonnull(strstr(text, "\"outcome\": \"stopped by signal\""));
    ck_assert_ptr_nonnull(strstr(text, "\"steady_samples_per_s\": null"));
    ck_assert_ptr_nonnull(strstr(text, "\"last_step\": 12"));
    ck_assert_ptr_nonnull(strstr(text, "\"warmup_s\": 0.75"));
    ck_assert_ptr_nonnull(strstr(text, "\"first_step_s\": null"));
    ck_assert_ptr_nonnull(strstr(text, "\"m \\\"quoted\\\".cfg\""));
    ck_assert_ptr_nonnull(strstr(text, "\"build\": \"abc-dirty\""));
    free(text);
    unlink(path);
}
END_TEST

START_TEST(test_eta)
{
    char b[32];
    ck_assert_double_eq_tol(train_eta_s(10.0, 5, 100), 200.0, 1e-12);
    ck_assert(train_eta_s(0, 0, 100) < 0);
    train_format_eta(3723, b, sizeof b);
    ck_assert_str_eq(b, "1h02m03s");
    train_format_eta(245, b, sizeof b);
    ck_assert_str_eq(b, "4m05s");
    train_format_eta(-1, b, sizeof b);
    ck_assert_str_eq(b, "?");
}
END_TEST

/* ---- checkpoint folders --------------------------------------------------------------------------- */
static const ckpt_model MODEL = {.layers = 2, .hidden = 128, .heads = 2, .ffn = 512, .vocab = 1000,
                                 .vocab_pad = 1024, .max_position = 512, .type_vocab = 2, .params = 5000,
                                 .tensors = 7, .names_hash = 0x1234};

/* A payload whose values say the part and the element; fails at element fail_at of part 1 when set. */
typedef struct {
    long fail_at;
} payload;

static int get_chunk(void *ctx, int part, size_t off, float *buf, size_t cnt, unpad_err *err)
{
    const payload *p = ctx;
    if (p && p->fail_at >= 0 && part == 1)
        return unpad_fail(err, UNPAD_EIO, "test", 0, "no space left on device (simulated)");
    for (size_t i = 0; i < cnt; i++)
        buf[i] = (float)part * 10000.0f + (float)(off + i);
    return UNPAD_OK;
}

static int put_check(void *ctx, int part, size_t off, float *buf, size_t cnt, unpad_err *err)
{
    for (size_t i = 0; i < cnt; i++)
        if (buf[i] != (float)part * 10000.0f + (float)(off + i))
            return unpad_fail(err, UNPAD_EINVAL, "test", 0, "payload differs at part %d element %zu", part, off + i);
    (*(int *)ctx)++;
    return UNPAD_OK;
}

static void save_step(const char *root, int64_t step, int keep, long fail_at, int want_rc)
{
    ckpt_state st = {.step = step, .data_pos = step * 16, .seed = 5, .batch = 16, .ranks = 1};
    payload p = {fail_at};
    char saved[4200];
    unpad_err e = {0};
    ck_assert_int_eq(ckpt_dir_save(root, &MODEL, &st, get_chunk, &p, keep, saved, sizeof saved, &e), want_rc);
}

static int exists(const char *root, const char *rel)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    return access(p, F_OK) == 0;
}

START_TEST(test_ckpt_naming_rotation)
{
    char root[64], p[256];
    tmp_dir(root, sizeof root);
    unpad_err e = {0};
    ck_assert_int_eq(ckpt_dir_step_path("run", 300, p, sizeof p, &e), UNPAD_OK);
    ck_assert_str_eq(p, "run/step-000300");
    ck_assert_int_eq(ckpt_dir_step_path("run", 12345678, p, sizeof p, &e), UNPAD_OK);
    ck_assert_str_eq(p, "run/step-12345678");
    for (int s = 10; s <= 40; s += 10)
        save_step(root, s, 2, -1, UNPAD_OK);
    ck_assert(!exists(root, "step-000010") && !exists(root, "step-000020"));
    ck_assert(exists(root, "step-000030/ckpt.bin") && exists(root, "step-000040/" CKPT_DIR_MARKER));
    /* a write that fails (a full disk) leaves the good ones and no .tmp folder */
    save_step(root, 50, 2, 0, UNPAD_EIO);
    ck_assert(exists(root, "step-000030") && exists(root, "step-000040"));
    ck_assert(!exists(root, "step-000050") && !exists(root, "step-000050.tmp"));
    /* the same step again replaces it whole */
    save_step(root, 40, 2, -1, UNPAD_OK);
    ck_assert(exists(root, "step-000040/ckpt.bin") && !exists(root, "step-000040.old"));
    rm_rf(root);
}
END_TEST

static int write_extra_ok(void *ctx, FILE *f, unpad_err *err)
{
    fprintf(f, "%s\n", (const char *)ctx);
    return UNPAD_OK;
}

static int write_extra_fail(void *ctx, FILE *f, unpad_err *err)
{
    return unpad_fail(err, UNPAD_EIO, "extra", 0, "simulated failure");
}

START_TEST(test_ckpt_extra_file)
{
    char root[64], p[4300], line[64];
    tmp_dir(root, sizeof root);
    ckpt_state st = {.step = 7, .data_pos = 112, .seed = 5, .batch = 16, .ranks = 1};
    payload pl = {-1};
    char saved[4200];
    unpad_err e = {0};
    ckpt_extra x = {"extra.txt", write_extra_ok, "algorithms"};
    ck_assert_int_eq(ckpt_dir_save_with(root, &MODEL, &st, get_chunk, &pl, &x, 0, saved, sizeof saved, &e), UNPAD_OK);
    ck_assert(exists(root, "step-000007/extra.txt") && exists(root, "step-000007/" CKPT_DIR_MARKER));
    snprintf(p, sizeof p, "%s/extra.txt", saved);
    FILE *f = fopen(p, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    fclose(f);
    ck_assert_str_eq(line, "algorithms\n");
    /* an extra file that cannot be written leaves no folder of that step, and the good one stays */
    st.step = 8;
    x.write = write_extra_fail;
    ck_assert_int_eq(ckpt_dir_save_with(root, &MODEL, &st, get_chunk, &pl, &x, 0, saved, sizeof saved, &e), UNPAD_EIO);
    ck_assert(!exists(root, "step-000008") && !exists(root, "step-000008.tmp"));
    ck_assert(exists(root, "step-000007/extra.txt"));
    rm_rf(root);
}
END_TEST

START_TEST(test_ckpt_resume_selection)
{
    char root[64], path[4200], notes[2048], dir[4200];
    tmp_dir(root, sizeof root);
    unpad_err e = {0};
    ck_assert_int_eq(ckpt_dir_latest(root, &MODEL, NULL, path, sizeof path, notes, sizeof notes, &e), UNPAD_EIO);
    ck_assert_msg(strstr(e.msg, "no complete checkpoint to resume from"), "%s", e.msg);
    save_step(root, 10, 0, -1, UNPAD_OK);
    save_step(root, 20, 0, -1, UNPAD_OK);
    save_step(root, 30, 0, -1, UNPAD_OK);
    /* step 30 without its marker (an incomplete copy), step 20 truncated: step 10 is taken */
    snprintf(dir, sizeof dir, "%s/step-000030/" CKPT_DIR_MARKER, root);
    ck_assert_int_eq(unlink(dir), 0);
    snprintf(dir, sizeof dir, "%s/step-000020/ckpt.bin", root);
    ck_assert_int_eq(truncate(dir, 1000), 0);
    ck_assert_int_eq(ckpt_dir_latest(root, &MODEL, NULL, path, sizeof path, notes, sizeof notes, &e), UNPAD_OK);
    ck_assert_msg(strstr(path, "step-000010/ckpt.bin"), "%s", path);
    ck_assert_msg(strstr(notes, "step-000030: skipped, incomplete"), "%s", notes);
    ck_assert_msg(strstr(notes, "step-000020: skipped") && strstr(notes, "truncated"), "%s", notes);
    /* the same with the run's state: a checkpoint of this seed, batch and ranks resumes */
    ckpt_state run = {.step = 0, .seed = 5, .batch = 16, .ranks = 1};
    ck_assert_int_eq(ckpt_dir_latest(root, &MODEL, &run, path, sizeof path, NULL, 0, &e), UNPAD_OK);
    ck_assert_msg(strstr(path, "step-000010/ckpt.bin"), "%s", path);
    /* every complete one refused (another model; another seed): the message says none can resume
     * this run and gives each one refused with its reason, naming its ckpt.bin */
    char msg_start[128];
    snprintf(msg_start, sizeof msg_start, "no checkpoint in %s can resume this run:\n", root);
    ckpt_model bigger = MODEL;
    bigger.hidden *= 2;
    ck_assert_int_eq(ckpt_dir_latest(root, &bigger, NULL, path, sizeof path, NULL, 0, &e), UNPAD_EIO);
    ck_assert_msg(!strncmp(e.msg, msg_start, strlen(msg_start)), "%s", e.msg);
    ck_assert_msg(strstr(e.msg, "step-000010: skipped: ") && strstr(e.msg, "step-000010/ckpt.bin: ") &&
                      strstr(e.msg, "another model (its hidden differs)"), "%s", e.msg);
    ck_assert_msg(strstr(e.msg, "step-000020: skipped: ") && strstr(e.msg, "step-000030: skipped, incomplete"),
                  "%s", e.msg);
    run.seed = 6;
    ck_assert_int_eq(ckpt_dir_latest(root, &MODEL, &run, path, sizeof path, notes, sizeof notes, &e), UNPAD_EIO);
    ck_assert_msg(!strncmp(e.msg, msg_start, strlen(msg_start)), "%s", e.msg);
    ck_assert_msg(strstr(e.msg, "step-000010/ckpt.bin: made with --seed 5 (now 6)"), "%s", e.msg);
    /* the payload reads back whole, with the state */
    ckpt_state st;
    int chunks = 0;
    ck_assert_int_eq(ckpt_file_read(path, &MODEL, &st, put_check, &chunks, &e), UNPAD_OK);
    ck_assert_int_eq(chunks, 3);
    ck_assert_int_eq(st.step, 10);
    ck_assert_int_eq(st.data_pos, 160);
    /* another model is refused naming the field, another run naming the flags */
    ckpt_model other = MODEL;
    other.hidden = 256;
    ck_assert_int_eq(ckpt_file_check(path, &other, NULL, NULL, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "another model (its hidden differs)"), "%s", e.msg);
    ckpt_state want = st;
    want.seed = 6;
    want.ranks = 4;
    ck_assert_int_eq(ckpt_state_check(path, &st, &want, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "--seed 5 (now 6)") && strstr(e.msg, "1 ranks in all (now 4)"), "%s", e.msg);
    want = st;
    want.step = 99; /* the step is where the run is, never a reason to refuse */
    ck_assert_int_eq(ckpt_state_check(path, &st, &want, &e), UNPAD_OK);
    rm_rf(root);
}
END_TEST

START_TEST(test_ckpt_bad_files)
{
    char root[64], path[4200], f[4200];
    tmp_dir(root, sizeof root);
    unpad_err e = {0};
    save_step(root, 7, 0, -1, UNPAD_OK);
    snprintf(f, sizeof f, "%s/step-000007/ckpt.bin", root);
    FILE *fp = fopen(f, "r+b");
    ck_assert_ptr_nonnull(fp);
    /* a reserved header byte set: refused */
    fseek(fp, 200, SEEK_SET);
    fputc(1, fp);
    fclose(fp);
    ck_assert_int_eq(ckpt_file_check(f, &MODEL, NULL, NULL, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "reserved header byte 200"), "%s", e.msg);
    fp = fopen(f, "r+b");
    fseek(fp, 200, SEEK_SET);
    fputc(0, fp);
    /* a flipped payload bit: the header passes, the checksum does not */
    fseek(fp, CKPT_HEADER_BYTES + 40, SEEK_SET);
    fputc(0x55, fp);
    fclose(fp);
    int chunks = 0;
    ck_assert_int_eq(ckpt_file_check(f, &MODEL, NULL, NULL, &e), UNPAD_OK);
    ck_assert_int_ne(ckpt_file_read(f, &MODEL, NULL, put_check, &chunks, &e), UNPAD_OK);
    /* the old layout, DIR/ckpt.bin, still resumes */
    char old[4200], oldf[4300];
    snprintf(old, sizeof old, "%s/old", root);
    ck_assert_int_eq(mkdir(old, 0755), 0);
    snprintf(oldf, sizeof oldf, "%s/ckpt.bin", old);
    ckpt_state st = {.step = 3, .data_pos = 48, .seed = 5, .batch = 16, .ranks = 1};
    ck_assert_int_eq(ckpt_file_write(oldf, &MODEL, &st, get_chunk, NULL, &e), UNPAD_OK);
    ck_assert_int_eq(ckpt_dir_latest(old, &MODEL, NULL, path, sizeof path, NULL, 0, &e), UNPAD_OK);
    ck_assert_str_eq(path, oldf);
    /* not a checkpoint at all */
    char junk[256];
    ck_assert_ptr_nonnull(tu_write_tmp(junk, sizeof junk, ".bin", "hello, this is not a checkpoint"));
    ck_assert_int_eq(ckpt_file_check(junk, NULL, NULL, NULL, &e), UNPAD_EINVAL);
    unlink(junk);
    rm_rf(root);
}
END_TEST

/* ---- Chrome traces -------------------------------------------------------------------------------- */
START_TEST(test_chrome_trace)
{
    char p[512];
    unpad_err e = {0};
    ck_assert_int_eq(chrome_trace_rank_path("out/trace.json", 3, 8, p, sizeof p, &e), UNPAD_OK);
    ck_assert_str_eq(p, "out/trace.rank3.json");
    ck_assert_int_eq(chrome_trace_rank_path("a.d/trace", 0, 2, p, sizeof p, &e), UNPAD_OK);
    ck_assert_str_eq(p, "a.d/trace.rank0");
    ck_assert_int_eq(chrome_trace_rank_path("trace.json", 0, 1, p, sizeof p, &e), UNPAD_OK);
    ck_assert_str_eq(p, "trace.json");
    ck_assert_ptr_nonnull(tu_write_tmp(p, sizeof p, ".json", ""));
    chrome_trace *t;
    ck_assert_int_eq(chrome_trace_open(p, chrome_trace_now_us(), "build \"x\"", &t, &e), UNPAD_OK);
    chrome_trace_process_name(t, 0, "rank 0");
    chrome_trace_thread_name(t, 0, 1000, "all-reduce");
    chrome_trace_complete(t, "fmha_fwd", "fmha", 0, 0, 12.5, 3.25, (chrome_arg[]){{"step", 1}}, 1);
    chrome_trace_complete(t, "lamb", "optimizer", 0, 1001, 20, 1, NULL, 0);
    ck_assert_int_eq(chrome_trace_events(t), 4);
    ck_assert_int_eq(chrome_trace_close(t, &e), UNPAD_OK);
    char *text = slurp(p);
    ck_assert_msg(json_valid(text), "%s", text);
    ck_assert_ptr_nonnull(strstr(text, "\"ph\": \"M\""));
    ck_assert_ptr_nonnull(strstr(text, "\"start_time_us\": "));
    free(text);
    unlink(p);
}
END_TEST

START_TEST(test_chrome_trace_early_exit)
{
    char p[512];
    ck_assert_ptr_nonnull(tu_write_tmp(p, sizeof p, ".json", ""));
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) { /* a run that stops in the middle (as a CUDA check does): exit without closing */
        chrome_trace *t;
        unpad_err e = {0};
        if (chrome_trace_open(p, 0, NULL, &t, &e))
            _exit(3);
        chrome_trace_process_name(t, 2, "rank 2");
        for (int i = 0; i < 100; i++)
            chrome_trace_complete(t, "ffn1_fwd", "gemm", 2, 0, i * 10.0, 5.0, (chrome_arg[]){{"layer", 0}}, 1);
        exit(EXIT_FAILURE);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == EXIT_FAILURE);
    char *text = slurp(p);
    ck_assert_msg(json_valid(text), "not valid JSON after an early exit: ...%s", text + strlen(text) - 60);
    ck_assert_ptr_nonnull(strstr(text, "\"ts\": 990.000"));
    free(text);
    unlink(p);
}
END_TEST

Suite *trainer_suite(void)
{
    Suite *s = suite_create("trainer");
    TCase *tc = tcase_create("files");
    tcase_add_test(tc, test_metrics_lines);
    tcase_add_test(tc, test_summary_json);
    tcase_add_test(tc, test_eta);
    tcase_add_test(tc, test_ckpt_naming_rotation);
    tcase_add_test(tc, test_ckpt_extra_file);
    tcase_add_test(tc, test_ckpt_resume_selection);
    tcase_add_test(tc, test_ckpt_bad_files);
    tcase_add_test(tc, test_chrome_trace);
    tcase_add_test(tc, test_chrome_trace_early_exit);
    suite_add_tcase(s, tc);
    return s;
}
