/* json.h — the few JSON writing helpers the trainer's output files share (metrics lines, the run
 * summary, Chrome traces). */
#ifndef UNPAD_JSON_H
#define UNPAD_JSON_H

#include <stdio.h>

/* s as a JSON string, quotes included (quote, backslash and control characters escaped). */
void json_put_string(FILE *f, const char *s);
/* v as a JSON number with %.*g, or null when it is not finite (JSON has no NaN). */
void json_put_number(FILE *f, double v, int digits);

#endif
