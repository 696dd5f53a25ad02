/* train_log.c — the metrics file and the run summary (see train_log.h), through the JSON writer
 * of sim/json.h. */
#include "train_log.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "outfile.h"

struct train_log {
    FILE *f;
    char path[4096];
};

int train_log_open(const char *path, int append, train_log **out, unpad_err *err)
{
    *out = NULL;
    if (!path)
        return UNPAD_OK;
    train_log *l = calloc(1, sizeof *l);
    if (!l)
        return unpad_fail(err, UNPAD_ENOMEM, path, 0, "out of host memory");
    snprintf(l->path, sizeof l->path, "%s", path);
    if (!(l->f = fopen(path, append ? "a" : "w"))) {
        int e = errno;
        free(l);
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot write the metrics file: %s", strerror(e));
    }
    *out = l;
    return UNPAD_OK;
}

/* The metrics file is streamed, a line per record flushed as it is written: it is meant to be read
 * while the run goes on (a crash keeps every line written). Numbers at the precision a reader of
 * the line wants. A record: line_begin, its keys, line_end. */
static void line_begin(train_log *l, json_w *w, const char *kind, long long step)
{
    json_init(w, l->f, JSON_LINE);
    json_obj(w, NULL);
    json_str(w, "kind", kind);
    json_int(w, "step", step);
}

static void line_end(train_log *l, json_w *w)
{
    json_end(w);
    json_finish(w, NULL); /* a failed write shows in train_log_close */
    fflush(l->f);
}

void train_log_step(train_log *l, const train_step_metrics *m)
{
    if (!l)
        return;
    json_w w;
    line_begin(l, &w, "step", m->step);
    json_int(&w, "steps", m->steps);
    json_num_sig(&w, "time_s", m->time_s, 6);
    json_num_sig(&w, "loss", m->loss, 7);
    json_num_sig(&w, "mlm_loss", m->mlm_loss, 7);
    json_num_sig(&w, "nsp_loss", m->nsp_loss, 7);
    json_num_sig(&w, "mlm_acc", m->mlm_acc, 6);
    json_num_sig(&w, "lr", m->lr, 9);
    json_num_sig(&w, "grad_norm", m->grad_norm, 6);
    json_num_sig(&w, "samples_per_s", m->samples_per_s, 6);
    json_num_sig(&w, "tokens_per_s", m->tokens_per_s, 7);
    json_num_sig(&w, "tflops", m->tflops, 5);
    json_num_sig(&w, "ms_per_step", m->ms_per_step, 5);
    json_num_sig(&w, "gpu_ms", m->gpu_ms, 5);
    json_num_sig(&w, "host_ms", m->host_ms, 4);
    json_num_sig(&w, "eta_s", m->eta_s >= 0 ? m->eta_s : NAN, 6);
    json_int(&w, "skipped", m->skipped);
    line_end(l, &w);
}

void train_log_resume(train_log *l, long long step, const char *from)
{
    if (!l)
        return;
    json_w w;
    line_begin(l, &w, "resume", step);
    json_str(&w, "from", from);
    line_end(l, &w);
}

void train_log_eval(train_log *l, int step, double time_s, double mlm_loss, double mlm_acc)
{
    if (!l)
        return;
    json_w w;
    line_begin(l, &w, "eval", step);
    json_num_sig(&w, "time_s", time_s, 6);
    json_num_sig(&w, "mlm_loss", mlm_loss, 7);
    json_num_sig(&w, "mlm_acc", mlm_acc, 6);
    line_end(l, &w);
}

int train_log_close(train_log *l, unpad_err *err)
{
    if (!l)
        return UNPAD_OK;
    int bad = ferror(l->f);
    bad |= fclose(l->f) != 0;
    int rc = bad ? unpad_fail(err, UNPAD_EIO, l->path, 0, "write failed") : UNPAD_OK;
    free(l);
    return rc;
}

void train_summary_path(const char *summary, const char *log, char *out, size_t n)
{
    if (summary) {
        snprintf(out, n, "%s", summary);
        return;
    }
    if (!log) {
        snprintf(out, n, "%s", "");
        return;
    }
    const char *slash = strrchr(log, '/'), *dot = strrchr(log, '.');
    if (!dot || (slash && dot < slash) || dot == (slash ? slash + 1 : log))
        dot = log + strlen(log);
    snprintf(out, n, "%.*s.summary.json", (int)(dot - log), log);
}

/* The summary, a whole file written at the end: complete under its name or not there at all. */
int train_summary_write(const char *path, const train_summary *s, unpad_err *err)
{
    unpad_outfile *o;
    int rc = outfile_open(path, &o, err);
    if (rc)
        return rc;
    json_w w;
    json_init(&w, outfile_stream(o), JSON_INDENTED);
    json_obj(&w, NULL);
    json_str(&w, "outcome", s->outcome ? s->outcome : "");
    json_str(&w, "reason", s->reason ? s->reason : "");
    json_int(&w, "first_step", s->first_step);
    json_int(&w, "last_step", s->last_step);
    json_int(&w, "steps_total", s->steps_total);
    json_int(&w, "steps_run", s->steps_run);
    json_int(&w, "skipped_nonfinite", s->skipped);
    json_int(&w, "warmup_steps", s->warmup_steps);
    const struct { const char *key; double v; } nums[] = {
        {"time_s", s->time_s}, {"warmup_s", s->warmup_s}, {"first_step_s", s->first_step_s},
        {"samples_per_s", s->samples_per_s}, {"tokens_per_s", s->tokens_per_s},
        {"tflops", s->tflops}, {"steady_samples_per_s", s->steady_samples_per_s},
        {"steady_tokens_per_s", s->steady_tokens_per_s}, {"steady_tflops", s->steady_tflops},
        {"memory_gib", s->memory_gib}, {"first_loss", s->first_loss}, {"final_loss", s->final_loss},
        {"final_mlm_loss", s->final_mlm_loss}, {"final_nsp_loss", s->final_nsp_loss},
        {"final_mlm_acc", s->final_mlm_acc}, {"eval_mlm_loss", s->eval_mlm_loss},
        {"eval_mlm_acc", s->eval_mlm_acc}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        json_num_sig(&w, nums[i].key, nums[i].v, 7);
    const struct { const char *key, *v; } strs[] = {
        {"checkpoint", s->checkpoint}, {"model", s->model}, {"device", s->device},
        {"precision", s->precision}, {"build", s->build}};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        json_str(&w, strs[i].key, strs[i].v ? strs[i].v : "");
    json_arr(&w, "argv");
    for (int i = 0; i < s->argc; i++)
        json_str(&w, NULL, s->argv[i]);
    json_end(&w);
    json_end(&w);
    if (json_finish(&w, NULL)) {
        outfile_abort(o);
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot write the summary: write failed");
    }
    return outfile_commit(o, err);
}

double train_eta_s(double steady_s, int steady_steps, int steps_left)
{
    if (steady_steps < 1)
        return -1;
    return steady_s / steady_steps * (steps_left > 0 ? steps_left : 0);
}

void train_format_eta(double s, char *out, size_t n)
{
    if (!(s >= 0)) {
        snprintf(out, n, "?");
        return;
    }
    long t = lround(s), h = t / 3600, m = t / 60 % 60, sec = t % 60;
    if (h)
        snprintf(out, n, "%ldh%02ldm%02lds", h, m, sec);
    else if (m)
        snprintf(out, n, "%ldm%02lds", m, sec);
    else
        snprintf(out, n, "%lds", sec);
}
