/* chrome_trace.c — Chrome trace event files that close on every exit (see chrome_trace.h), through
 * the JSON writer of sim/json.h: one event a line. The file is streamed, each event written as it
 * comes: a trace is meant to be read while the run goes on (and after a crash, up to there). */
#include "chrome_trace.h"
#include "json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct chrome_trace {
    FILE *f;
    json_w w;                  /* the document: its top object and "traceEvents" stay open */
    char path[4096];
    long events;
    struct chrome_trace *next; /* the open files, closed at exit */
};

static chrome_trace *g_open;
static int g_atexit;

static void close_all_at_exit(void)
{
    while (g_open)
        chrome_trace_close(g_open, NULL);
}

int chrome_trace_rank_path(const char *path, int rank, int nranks, char *out, size_t n, unpad_err *err)
{
    int k;
    if (nranks <= 1) {
        k = snprintf(out, n, "%s", path);
    } else {
        const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
        if (!dot || (slash && dot < slash) || dot == (slash ? slash + 1 : path))
            dot = path + strlen(path); /* no extension (or a hidden file's leading dot) */
        k = snprintf(out, n, "%.*s.rank%d%s", (int)(dot - path), path, rank, dot);
    }
    if (k < 0 || (size_t)k >= n)
        return unpad_fail(err, UNPAD_EINVAL, path, 0, "trace path too long");
    return UNPAD_OK;
}

int chrome_trace_open(const char *path, int64_t start_us, const char *build, chrome_trace **out,
                      unpad_err *err)
{
    *out = NULL;
    chrome_trace *t = calloc(1, sizeof *t);
    if (!t)
        return unpad_fail(err, UNPAD_ENOMEM, path, 0, "out of host memory");
    snprintf(t->path, sizeof t->path, "%s", path);
    if (!(t->f = fopen(path, "w"))) {
        int e = errno;
        free(t);
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot write the trace: %s", strerror(e));
    }
    json_w *w = &t->w;
    json_init(w, t->f, JSON_LINE);
    json_obj(w, NULL);
    json_str(w, "displayTimeUnit", "ms");
    json_obj(w, "otherData");
    json_int(w, "start_time_us", start_us);
    json_str(w, "build", build ? build : "");
    json_end(w);
    json_arr(w, "traceEvents");
    if (!g_atexit) {
        atexit(close_all_at_exit);
        g_atexit = 1;
    }
    t->next = g_open;
    g_open = t;
    *out = t;
    return UNPAD_OK;
}

/* Opens the next event, on a line of its own: name, [cat,] ph, pid, tid. */
static json_w *event_open(chrome_trace *t, const char *name, const char *cat, const char *ph, int pid, int tid)
{
    json_w *w = &t->w;
    t->events++;
    json_break(w);
    json_obj(w, NULL);
    json_str(w, "name", name);
    if (cat)
        json_str(w, "cat", cat);
    json_str(w, "ph", ph);
    json_int(w, "pid", pid);
    json_int(w, "tid", tid);
    return w;
}

/* A metadata event naming a process or a thread. */
static void name_event(chrome_trace *t, const char *what, int pid, int tid, const char *name)
{
    json_w *w = event_open(t, what, NULL, "M", pid, tid);
    json_obj(w, "args");
    json_str(w, "name", name);
    json_end(w);
    json_end(w);
}

void chrome_trace_process_name(chrome_trace *t, int pid, const char *name)
{
    name_event(t, "process_name", pid, 0, name);
}

void chrome_trace_thread_name(chrome_trace *t, int pid, int tid, const char *name)
{
    name_event(t, "thread_name", pid, tid, name);
}

void chrome_trace_complete(chrome_trace *t, const char *name, const char *cat, int pid, int tid,
                           double ts_us, double dur_us, const chrome_arg *args, int nargs)
{
    json_w *w = event_open(t, name, cat ? cat : "", "X", pid, tid);
    json_num_fixed(w, "ts", ts_us, 3);
    json_num_fixed(w, "dur", dur_us < 0 ? 0.0 : dur_us, 3);
    json_obj(w, "args");
    for (int i = 0; i < nargs; i++)
        json_num_fixed(w, args[i].key, args[i].value, 0);
    json_end(w);
    json_end(w);
}

long chrome_trace_events(const chrome_trace *t) { return t->events; }

int chrome_trace_close(chrome_trace *t, unpad_err *err)
{
    if (!t)
        return UNPAD_OK;
    for (chrome_trace **p = &g_open; *p; p = &(*p)->next)
        if (*p == t) {
            *p = t->next;
            break;
        }
    json_break(&t->w);
    json_end(&t->w);
    json_end(&t->w);
    int bad = json_finish(&t->w, NULL) || ferror(t->f);
    bad |= fclose(t->f) != 0;
    int rc = bad ? unpad_fail(err, UNPAD_EIO, t->path, 0, "write failed (%s)", strerror(errno)) : UNPAD_OK;
    free(t);
    return rc;
}

int64_t chrome_trace_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
