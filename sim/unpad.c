/* unpad.c — error records, strict number parsing, file reading and the GSL error handler, shared
 * by the library. */
#include "unpad.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>

int unpad_fail(unpad_err *err, int code, const char *file, int line, const char *fmt, ...)
{
    if (!err)
        return code;
    err->code = code;
    size_t n = 0;
    if (file && line > 0)
        n = (size_t)snprintf(err->msg, sizeof err->msg, "%s:%d: ", file, line);
    else if (file)
        n = (size_t)snprintf(err->msg, sizeof err->msg, "%s: ", file);
    if (n >= sizeof err->msg)
        n = sizeof err->msg - 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg + n, sizeof err->msg - n, fmt, ap);
    va_end(ap);
    return code;
}

void unpad_err_show_line(unpad_err *err, int line, const char *text)
{
    if (!err)
        return;
    size_t n = strlen(err->msg);
    if (n + 16 >= sizeof err->msg)
        return;
    /* Show at most one line of at most 120 characters. */
    int len = 0;
    while (text[len] && text[len] != '\n' && text[len] != '\r' && len < 120)
        len++;
    snprintf(err->msg + n, sizeof err->msg - n, "\n    %d | %.*s", line, len, text);
}

void unpad_invariant_failed(const char *file, int line, const char *cond)
{
    fprintf(stderr, "%s:%d: internal error: %s does not hold (a bug: please report it)\n", file, line,
            cond);
    abort();
}

static void gsl_handler_off(void) { gsl_set_error_handler_off(); }

void unpad_gsl_quiet(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, gsl_handler_off);
}

static int only_blanks(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
        s++;
    return *s == '\0';
}

int unpad_parse_long(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || errno == ERANGE || !only_blanks(end))
        return UNPAD_EINVAL;
    *out = v;
    return UNPAD_OK;
}

int unpad_parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno == ERANGE || !only_blanks(end) || !isfinite(v))
        return UNPAD_EINVAL;
    *out = v;
    return UNPAD_OK;
}

int unpad_read_file(const char *path, char **out, size_t *len, unpad_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot open: %s", strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        return unpad_fail(err, UNPAD_ENOMEM, path, 0, "out of memory");
    }
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                fclose(f);
                return unpad_fail(err, UNPAD_ENOMEM, path, 0, "out of memory");
            }
            buf = nb;
            cap *= 2;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return unpad_fail(err, UNPAD_EIO, path, 0, "read error");
    }
    buf[n] = '\0';
    *out = buf;
    if (len)
        *len = n;
    return UNPAD_OK;
}
