/* train_log.c — the metrics file and the run summary (see train_log.h). */
#include "train_log.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

struct train_log {
    FILE *f;
    char path[4096];
};

int train_log_open(const char *path, train_log **out, unpad_err *err)
{
    *out = NULL;
    if (!path)
        return UNPAD_OK;
    train_log *l = calloc(1, sizeof *l);
    if (!l)
        return unpad_fail(err, UNPAD_ENOMEM, path, 0, "out of host memory");
    snprintf(l->path, sizeof l->path, "%s", path);
    if (!(l->f = fopen(path, "w"))) {
        int e = errno;
        free(l);
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot write the metrics file: %s", strerror(e));
    }
    *out = l;
    return UNPAD_OK;
}

/* "key": value pairs of one object, comma-separated. */
static void kv(FILE *f, const char *key, double v, int digits)
{
    fprintf(f, ", \"%s\": ", key);
    json_put_number(f, v, digits);
}

void train_log_step(train_log *l, const train_step_metrics *m)
{
    if (!l)
        return;
    fprintf(l->f, "{\"kind\": \"step\", \"step\": %d, \"steps\": %d", m->step, m->steps);
    kv(l->f, "time_s", m->time_s, 6);
    kv(l->f, "loss", m->loss, 7);
    kv(l->f, "mlm_loss", m->mlm_loss, 7);
    kv(l->f, "nsp_loss", m->nsp_loss, 7);
    kv(l->f, "mlm_acc", m->mlm_acc, 6);
    kv(l->f, "lr", m->lr, 9);
    kv(l->f, "grad_norm", m->grad_norm, 6);
    kv(l->f, "samples_per_s", m->samples_per_s, 6);
    kv(l->f, "tokens_per_s", m->tokens_per_s, 7);
    kv(l->f, "tflops", m->tflops, 5);
    kv(l->f, "ms_per_step", m->ms_per_step, 5);
    kv(l->f, "eta_s", m->eta_s >= 0 ? m->eta_s : NAN, 6);
    fprintf(l->f, ", \"skipped\": %d}\n", m->skipped);
    fflush(l->f);
}

void train_log_eval(train_log *l, int step, double time_s, double mlm_loss, double mlm_acc)
{
    if (!l)
        return;
    fprintf(l->f, "{\"kind\": \"eval\", \"step\": %d", step);
    kv(l->f, "time_s", time_s, 6);
    kv(l->f, "mlm_loss", mlm_loss, 7);
    kv(l->f, "mlm_acc", mlm_acc, 6);
    fputs("}\n", l->f);
    fflush(l->f);
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

static void ks(FILE *f, const char *key, const char *v)
{
    fprintf(f, ",\n  \"%s\": ", key);
    json_put_string(f, v ? v : "");
}

static void kn(FILE *f, const char *key, double v)
{
    fprintf(f, ",\n  \"%s\": ", key);
    json_put_number(f, v, 7);
}

int train_summary_write(const char *path, const train_summary *s, unpad_err *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot write the summary: %s", strerror(errno));
    fputs("{\n  \"outcome\": ", f);
    json_put_string(f, s->outcome ? s->outcome : "");
    ks(f, "reason", s->reason);
    fprintf(f, ",\n  \"first_step\": %d,\n  \"last_step\": %d,\n  \"steps_total\": %d,\n  \"steps_run\": %d,\n"
               "  \"skipped_nonfinite\": %d,\n  \"warmup_steps\": %d",
            s->first_step, s->last_step, s->steps_total, s->steps_run, s->skipped, s->warmup_steps);
    kn(f, "time_s", s->time_s);
    kn(f, "samples_per_s", s->samples_per_s);
    kn(f, "tokens_per_s", s->tokens_per_s);
    kn(f, "tflops", s->tflops);
    kn(f, "steady_samples_per_s", s->steady_samples_per_s);
    kn(f, "steady_tokens_per_s", s->steady_tokens_per_s);
    kn(f, "steady_tflops", s->steady_tflops);
    kn(f, "memory_gib", s->memory_gib);
    kn(f, "first_loss", s->first_loss);
    kn(f, "final_loss", s->final_loss);
    kn(f, "final_mlm_loss", s->final_mlm_loss);
    kn(f, "final_nsp_loss", s->final_nsp_loss);
    kn(f, "final_mlm_acc", s->final_mlm_acc);
    kn(f, "eval_mlm_loss", s->eval_mlm_loss);
    kn(f, "eval_mlm_acc", s->eval_mlm_acc);
    ks(f, "checkpoint", s->checkpoint);
    ks(f, "model", s->model);
    ks(f, "device", s->device);
    ks(f, "precision", s->precision);
    ks(f, "build", s->build);
    fputs(",\n  \"argv\": [", f);
    for (int i = 0; i < s->argc; i++) {
        if (i)
            fputs(", ", f);
        json_put_string(f, s->argv[i]);
    }
    fputs("]\n}\n", f);
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    return bad ? unpad_fail(err, UNPAD_EIO, path, 0, "write failed") : UNPAD_OK;
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
