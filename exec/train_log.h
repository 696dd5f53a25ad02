/* train_log.h — what a training run reports beyond its progress lines, as files a program reads:
 *
 * The metrics file (--log-file F): one JSON object per line,
 *   {"kind": "step", "step": 300, "steps": 1000, "time_s": 41.2, "loss": 6.91, "mlm_loss": 6.23,
 *    "nsp_loss": 0.68, "mlm_acc": 0.121, "lr": 0.00042, "grad_norm": 1.93, "samples_per_s": 760.2,
 *    "tokens_per_s": 194600, "tflops": 376.1, "ms_per_step": 73.7, "gpu_ms": 73.5, "host_ms": 4.9,
 *    "eta_s": 51.6, "skipped": 0}
 * one per logged step (the values are the means over the steps since the last line; lr and
 * grad_norm those of the logged step; skipped counts the non-finite steps skipped so far;
 * ms_per_step is wall time, gpu_ms the span of the step's commands on the GPU, from its first
 * to its last, host_ms the host's time to enqueue them: ms_per_step above gpu_ms is the GPU idle
 * between steps, gpu_ms above the kernels' sum is idle inside a step), and
 *   {"kind": "eval", "step": 1000, "time_s": 130.2, "mlm_loss": 6.56, "mlm_acc": 0.131}
 * per evaluation. A non-finite number is written as null. A run resumed from a checkpoint
 * (--resume) appends to the file instead of replacing it, after
 *   {"kind": "resume", "step": 3000, "from": "ck/step-003000"}
 * so the interrupted run's lines stay; those of steps after the checkpoint's are then followed by
 * the resumed run's lines for the same steps (a reader keeps, per step, the last line).
 *
 * The metrics file is streamed (a line flushed per record: read it while the run goes on).
 *
 * The summary (--summary-json F, else beside the metrics file as <F less its extension>.summary.json),
 * written whole at the end through sim/outfile.h (complete under its name, or not there):
 * one JSON object with the run's outcome, its steps and time, the throughput over the whole run
 * and in steady state (the steps after the warm-up ones), the device memory, the final losses, the
 * last checkpoint, the arguments and the build (see train_summary). */
#ifndef UNPAD_TRAIN_LOG_H
#define UNPAD_TRAIN_LOG_H

#include <stddef.h>
#include <stdio.h>

#include "unpad.h"

typedef struct {
    int step, steps;
    double time_s;            /* since the run started */
    double loss, mlm_loss, nsp_loss, mlm_acc;
    double lr, grad_norm;
    double samples_per_s, tokens_per_s, tflops, ms_per_step;
    double gpu_ms, host_ms;   /* the step's span on the GPU and the host's time to enqueue it */
    double eta_s;             /* < 0: not known yet */
    int skipped;
} train_step_metrics;

typedef struct train_log train_log;

/* Creates (truncates) path, or with append adds to it (a resumed run); NULL path: *out = NULL
 * and every call below does nothing. */
int train_log_open(const char *path, int append, train_log **out, unpad_err *err);
/* The resumed run's first line: the checkpoint's step and path. */
void train_log_resume(train_log *l, long long step, const char *from);
void train_log_step(train_log *l, const train_step_metrics *m);
void train_log_eval(train_log *l, int step, double time_s, double mlm_loss, double mlm_acc);
/* Closes; EIO if a write failed. NULL is accepted. */
int train_log_close(train_log *l, unpad_err *err);

/* The summary's path: summary if given, else next to the log (NULL log: ""). */
void train_summary_path(const char *summary, const char *log, char *out, size_t n);

typedef struct {
    const char *outcome;      /* "completed" | "stopped by signal" | "diverged" | "failed" */
    const char *reason;       /* the message of a stop or failure, or "" */
    int first_step, last_step, steps_total, steps_run, skipped;
    double time_s;            /* wall time of the loop */
    double samples_per_s, tokens_per_s, tflops;          /* over every step run */
    double steady_samples_per_s, steady_tokens_per_s, steady_tflops;
    int warmup_steps;         /* left out of the steady state */
    double warmup_s;          /* the warm-up before the first step (plans, kernel loads), in time_s */
    double first_step_s;      /* the first step's wall time (NaN: none ran) */
    double memory_gib;        /* device memory in use at the end */
    double first_loss, final_loss, final_mlm_loss, final_nsp_loss, final_mlm_acc;
    double eval_mlm_loss, eval_mlm_acc; /* NaN: no evaluation */
    const char *checkpoint;   /* the last checkpoint written or resumed from, or "" */
    const char *model, *device, *precision, *build;
    int argc;
    char *const *argv;
} train_summary;

int train_summary_write(const char *path, const train_summary *s, unpad_err *err);

/* The estimated time left: the mean of the steady steps' time (steady_s over steady_steps) times
 * the steps left; -1 before any steady step. */
double train_eta_s(double steady_s, int steady_steps, int steps_left);
/* "1h02m03s", "4m05s", "12s"; "?" for a negative time. */
void train_format_eta(double s, char *out, size_t n);

#endif
