/* progress.h — a progress line on stderr for long runs:
 *
 *   unpad whatif: 12/40 configurations, 31% of the work, 2.1 configurations/s, 5.7 s, ETA 13 s
 *
 * It appears only once the run has taken PROGRESS_DELAY_S (a short command prints nothing), is
 * redrawn at most PROGRESS_REFRESH_S apart, and is erased at the end. Only where it is enabled:
 * progress_wanted() says whether stderr is a terminal (and not TERM=dumb) and --quiet was not
 * given; a disabled or NULL progress costs one branch per call.
 *
 * Thread safe and lock free: workers add what they finished (items: the unit counted, e.g.
 * configurations; work: any integer measure of effort that the ETA is computed from) with
 * atomic additions, and the one that finds the line due and the drawing slot free redraws it.
 * Call it per configuration or per batch of steps, not per step. */
#ifndef UNPAD_PROGRESS_H
#define UNPAD_PROGRESS_H

#include <stddef.h>

#include "unpad.h"

#define PROGRESS_DELAY_S 2.0
#define PROGRESS_REFRESH_S 0.25

typedef struct progress progress;

/* 1 when a progress line should be drawn: stderr is a terminal and quiet is 0. */
int progress_wanted(int quiet);

/* what: the line's prefix ("unpad whatif"); unit: what items are ("configurations");
 * total_items, total_work >= 1. enabled 0 gives a progress that draws nothing. */
int progress_start(const char *what, const char *unit, long long total_items,
                   long long total_work, int enabled, progress **out, unpad_err *err);
void progress_add(progress *p, long long items, long long work);
/* What was added so far. */
void progress_counts(progress *p, long long *items, long long *work);
/* Around other output to the terminal (rows printed as they finish): progress_hold waits for a
 * redraw in progress, erases the line and keeps it away until progress_release. */
void progress_hold(progress *p);
void progress_release(progress *p);
/* Erases the line (when one was drawn) and frees p; p may be NULL. */
void progress_end(progress *p);

/* The line for a state (elapsed seconds), without the leading \r: for tests. */
void progress_format(char *buf, size_t n, const char *what, const char *unit, long long items,
                     long long total_items, long long work, long long total_work, double elapsed_s);

#endif
