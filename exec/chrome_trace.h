/* chrome_trace.h — a writer of Chrome trace event files (JSON, for chrome://tracing and Perfetto)
 * that stay valid JSON on every exit: the event array is closed by chrome_trace_close, and by an
 * exit handler for every file still open when the program exits (a CUDA check that stops, an
 * error returned to main, a signal handled as a clean stop). Only a SIGKILL leaves a file open.
 *
 * File: {"displayTimeUnit": "ms", "otherData": {"start_time_us": T0, ...}, "traceEvents": [...]}
 * Timestamps are microseconds since the run's start, T0 = that start in microseconds since the
 * Unix epoch. Processes and threads are named with metadata events (ph "M"). */
#ifndef UNPAD_CHROME_TRACE_H
#define UNPAD_CHROME_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "unpad.h"

typedef struct chrome_trace chrome_trace;

/* The file of rank `rank` of `nranks`: path itself with one rank, else path with ".rankN" inserted
 * before its extension (trace.json -> trace.rank3.json; no extension: trace -> trace.rank3). */
int chrome_trace_rank_path(const char *path, int rank, int nranks, char *out, size_t n, unpad_err *err);

/* Creates path; start_us: the run's start, microseconds since the epoch; build: a string recorded
 * in otherData (may be NULL). */
int chrome_trace_open(const char *path, int64_t start_us, const char *build, chrome_trace **out,
                      unpad_err *err);
/* Metadata: names process pid, thread (pid, tid). */
void chrome_trace_process_name(chrome_trace *t, int pid, const char *name);
void chrome_trace_thread_name(chrome_trace *t, int pid, int tid, const char *name);
/* One member of an event's "args": a whole number (step, layer, tokens, flops, ...). */
typedef struct {
    const char *key;
    double value;
} chrome_arg;

/* A complete event (ph "X") of dur_us from ts_us (since the start), with args[0..nargs) (nargs 0:
 * an empty "args"). */
void chrome_trace_complete(chrome_trace *t, const char *name, const char *cat, int pid, int tid,
                           double ts_us, double dur_us, const chrome_arg *args, int nargs);
/* Events written so far. */
long chrome_trace_events(const chrome_trace *t);
/* Closes the array and the file; EIO if a write failed. NULL is accepted. */
int chrome_trace_close(chrome_trace *t, unpad_err *err);

/* Microseconds since the epoch, now (CLOCK_REALTIME). */
int64_t chrome_trace_now_us(void);

#endif
