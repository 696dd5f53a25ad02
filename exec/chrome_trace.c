/* chrome_trace.c — Chrome trace event files that close on every exit (see chrome_trace.h). */
#include "chrome_trace.h"
#include "json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct chrome_trace {
    FILE *f;
    char path[4096];
    long events;
    int failed;                /* a write failed */
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
    fprintf(t->f, "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"start_time_us\": %lld, \"build\": ",
            (long long)start_us);
    json_put_string(t->f, build ? build : "");
    fprintf(t->f, "}, \"traceEvents\": [\n");
    if (!g_atexit) {
        atexit(close_all_at_exit);
        g_atexit = 1;
    }
    t->next = g_open;
    g_open = t;
    *out = t;
    return UNPAD_OK;
}

static void event_sep(chrome_trace *t)
{
    if (t->events++)
        fputs(",\n", t->f);
}

void chrome_trace_process_name(chrome_trace *t, int pid, const char *name)
{
    event_sep(t);
    fprintf(t->f, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"args\": {\"name\": ", pid);
    json_put_string(t->f, name);
    fputs("}}", t->f);
}

void chrome_trace_thread_name(chrome_trace *t, int pid, int tid, const char *name)
{
    event_sep(t);
    fprintf(t->f, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": ",
            pid, tid);
    json_put_string(t->f, name);
    fputs("}}", t->f);
}

void chrome_trace_complete(chrome_trace *t, const char *name, const char *cat, int pid, int tid,
                           double ts_us, double dur_us, const char *args_json)
{
    event_sep(t);
    fputs("{\"name\": ", t->f);
    json_put_string(t->f, name);
    fputs(", \"cat\": ", t->f);
    json_put_string(t->f, cat ? cat : "");
    fprintf(t->f, ", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, \"args\": {%s}}",
            pid, tid, ts_us, dur_us < 0 ? 0.0 : dur_us, args_json ? args_json : "");
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
    fputs("\n]}\n", t->f);
    int bad = ferror(t->f) || t->failed;
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
