/* json.c — JSON writing helpers (see json.h). */
#include "json.h"

#include <math.h>

void json_put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

void json_put_number(FILE *f, double v, int digits)
{
    if (isfinite(v))
        fprintf(f, "%.*g", digits, v);
    else
        fputs("null", f);
}
