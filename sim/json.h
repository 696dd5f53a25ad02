/* json.h — a small streaming JSON writer for every JSON file unpad writes: the documents of
 * `unpad ... --json`, and the trainer's metrics lines, summary and Chrome traces.
 *
 *   json_w w;
 *   json_init(&w, f, JSON_INDENTED);      (or JSON_COMPACT / JSON_LINE: one line, see below)
 *   json_obj(&w, NULL);                   the top-level object
 *     json_str(&w, "model", "bert-large");
 *     json_num(&w, "step_us", 77712.5);   full precision: the shortest form that reads back equal
 *     json_arr(&w, "rows"); ... json_end(&w);
 *   json_end(&w);
 *   if (json_finish(&w, &err)) ...        misuse (a key missing in an object, a key given in an
 *                                         array, unclosed levels) or a write error
 *
 * Layouts: JSON_INDENTED, a key a line, two spaces a level; JSON_COMPACT, one line without spaces;
 * JSON_LINE, one line spaced for people ({"kind": "step", "step": 3}). json_break asks for a line
 * break before the next value or closing bracket (a stream of one record a line).
 * Inside an object every value needs its key; inside an array and at the top keys are NULL.
 * Strings are escaped (quote, backslash, control characters as \u00XX; UTF-8 passes through).
 * Numbers that are not finite (NaN, inf) are written as null: a value that was not computed is
 * null, never a number standing for "none". Errors are sticky: after the first one nothing more
 * is written and json_finish reports it. */
#ifndef UNPAD_JSON_H
#define UNPAD_JSON_H

#include <stdio.h>

#include "unpad.h"

#define JSON_MAX_DEPTH 32

enum { JSON_COMPACT = 0, JSON_INDENTED = 1, JSON_LINE = 2 };

typedef struct {
    FILE *f;
    int pretty;                            /* the layout: JSON_COMPACT, _INDENTED or _LINE */
    int brk;                               /* json_break asked for a line break */
    int depth;                             /* open objects and arrays */
    int done;                              /* a complete top-level value was written */
    unsigned char in_obj[JSON_MAX_DEPTH];  /* 1: level is an object, 0: an array */
    unsigned char nonempty[JSON_MAX_DEPTH]; /* 1: a value was written at the level */
    int rc;                                /* first failure (UNPAD_OK while fine) */
    char why[160];
} json_w;

void json_init(json_w *w, FILE *f, int pretty);
/* A line break before what comes next (the next value's separator stays before it). */
void json_break(json_w *w);

void json_obj(json_w *w, const char *key);   /* opens an object */
void json_arr(json_w *w, const char *key);   /* opens an array */
void json_end(json_w *w);                    /* closes the innermost object or array */

void json_str(json_w *w, const char *key, const char *v);   /* NULL: null */
void json_num(json_w *w, const char *key, double v);        /* not finite: null */
/* A number at a chosen precision, for files read by people as well (the trainer's logs):
 * digits significant digits (%.*g), or decimals after the point (%.*f); not finite: null. */
void json_num_sig(json_w *w, const char *key, double v, int digits);
void json_num_fixed(json_w *w, const char *key, double v, int decimals);
void json_int(json_w *w, const char *key, long long v);
void json_bool(json_w *w, const char *key, int v);
void json_null(json_w *w, const char *key);

/* UNPAD_OK when exactly one complete value was written without error; else the failure, with
 * the reason in err. Ends the value with a newline (one per line in JSON lines); does
 * not close the stream. */
int json_finish(json_w *w, unpad_err *err);

/* The shortest %g form of v that reads back as the same double (up to 17 digits); "null" when
 * v is not finite. buf holds at least 32 characters. */
void json_format_num(double v, char *buf, size_t n);

#endif
