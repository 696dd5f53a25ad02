/* progress.c — the progress line of progress.h. */
#include "progress.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct progress {
    char what[64], unit[32];
    long long total_items, total_work;
    int enabled;
    double t0;
    atomic_llong items, work;
    atomic_llong next_draw_ns;  /* monotonic time of the next redraw */
    atomic_flag drawing;        /* one thread draws at a time; others skip */
    atomic_int drawn;           /* 1 once a line is on the terminal */
};

int progress_wanted(int quiet)
{
    const char *term = getenv("TERM");
    return !quiet && isatty(STDERR_FILENO) && !(term && !strcmp(term, "dumb"));
}

int progress_start(const char *what, const char *unit, long long total_items,
                   long long total_work, int enabled, progress **out, unpad_err *err)
{
    progress *p = calloc(1, sizeof *p);
    if (!p)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    snprintf(p->what, sizeof p->what, "%s", what);
    snprintf(p->unit, sizeof p->unit, "%s", unit);
    p->total_items = total_items > 0 ? total_items : 1;
    p->total_work = total_work > 0 ? total_work : 1;
    p->enabled = enabled;
    p->t0 = unpad_now_s();
    atomic_init(&p->items, 0);
    atomic_init(&p->work, 0);
    atomic_init(&p->next_draw_ns, (long long)((p->t0 + PROGRESS_DELAY_S) * 1e9));
    atomic_flag_clear(&p->drawing);
    atomic_init(&p->drawn, 0);
    *out = p;
    return UNPAD_OK;
}

/* "4.2 s", "3 min 05 s", "2 h 07 min". */
static void format_duration(char *buf, size_t n, double s)
{
    if (s < 60)
        snprintf(buf, n, "%.1f s", s);
    else if (s < 3600)
        snprintf(buf, n, "%d min %02d s", (int)(s / 60), (int)s % 60);
    else
        snprintf(buf, n, "%d h %02d min", (int)(s / 3600), (int)(s / 60) % 60);
}

void progress_format(char *buf, size_t n, const char *what, const char *unit, long long items,
                     long long total_items, long long work, long long total_work, double elapsed_s)
{
    double frac = total_work > 0 ? (double)work / total_work : 0;
    char el[32], eta[48] = "ETA unknown";
    format_duration(el, sizeof el, elapsed_s);
    if (frac > 0) {
        char t[32];
        format_duration(t, sizeof t, elapsed_s * (1 - frac) / frac);
        snprintf(eta, sizeof eta, "ETA %s", t);
    }
    char rate[64] = "";
    double r = elapsed_s > 0 ? items / elapsed_s : 0;
    if (items > 0 && elapsed_s > 0)
        snprintf(rate, sizeof rate, r >= 100 ? ", %.0f %s/s" : ", %.2g %s/s", r, unit);
    snprintf(buf, n, "%s: %lld/%lld %s, %.0f%% of the work%s, %s, %s", what, items, total_items,
             unit, 100 * frac, rate, el, eta);
}

void progress_add(progress *p, long long items, long long work)
{
    if (!p)
        return;
    long long it = atomic_fetch_add(&p->items, items) + items;
    long long wk = atomic_fetch_add(&p->work, work) + work;
    if (!p->enabled)
        return;
    double t = unpad_now_s();
    if ((long long)(t * 1e9) < atomic_load(&p->next_draw_ns) || atomic_flag_test_and_set(&p->drawing))
        return;
    atomic_store(&p->next_draw_ns, (long long)((t + PROGRESS_REFRESH_S) * 1e9));
    char line[256];
    progress_format(line, sizeof line, p->what, p->unit, it, p->total_items, wk, p->total_work,
                    t - p->t0);
    fprintf(stderr, "\r\033[K%s", line); /* \033[K: erase the rest of the previous line */
    fflush(stderr);
    atomic_store(&p->drawn, 1);
    atomic_flag_clear(&p->drawing);
}

void progress_counts(progress *p, long long *items, long long *work)
{
    *items = atomic_load(&p->items);
    *work = atomic_load(&p->work);
}

void progress_hold(progress *p)
{
    if (!p || !p->enabled)
        return;
    while (atomic_flag_test_and_set(&p->drawing))
        ;
    if (atomic_load(&p->drawn)) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        atomic_store(&p->drawn, 0);
    }
}

void progress_release(progress *p)
{
    if (!p || !p->enabled)
        return;
    double t = unpad_now_s();
    if (t - p->t0 >= PROGRESS_DELAY_S) /* redraw at the next addition */
        atomic_store(&p->next_draw_ns, (long long)(t * 1e9));
    atomic_flag_clear(&p->drawing);
}

void progress_end(progress *p)
{
    if (!p)
        return;
    if (atomic_load(&p->drawn)) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    free(p);
}
