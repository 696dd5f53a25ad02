/* unpad.c — error records, strict number parsing, file reading and the GSL error handler, shared
 * by the library. */
#include "unpad.h"

#include <errno.h>
#include <getopt.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

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
    if (strpbrk(s, "xX")) /* strtod's hexadecimal form: not a number of these files and flags */
        return UNPAD_EINVAL;
    double v = strtod(s, &end);
    if (end == s || errno == ERANGE || !only_blanks(end) || !isfinite(v))
        return UNPAD_EINVAL;
    *out = v;
    return UNPAD_OK;
}

int unpad_list_has_empty(const char *s)
{
    size_t n = strlen(s);
    return n == 0 || s[0] == ',' || s[n - 1] == ',' || strstr(s, ",,") != NULL;
}

void unpad_getopt_error(const char *prog, int c, int argc, char **argv)
{
    const char *bad = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
    if (c == ':')
        fprintf(stderr, "%s: %s needs a value\n", prog, bad);
    else if (optopt && optopt < 256 && bad[0] == '-' && bad[1] != '-')
        fprintf(stderr, "%s: unknown option '-%c'\n", prog, optopt);
    else if (optopt && !strncmp(bad, "--", 2) && strchr(bad, '=')) /* a known flag that takes none */
        fprintf(stderr, "%s: '%s': the flag takes no value\n", prog, bad);
    else
        fprintf(stderr, "%s: unknown or ambiguous option '%s'\n", prog, bad);
}

int unpad_flag_once(const char *prog, const char *flag, const char *val, const char **given)
{
    if (*given) {
        fprintf(stderr, "%s: --%s given twice ('%s', then '%s'): give it once\n", prog, flag, *given, val);
        return 1;
    }
    *given = val;
    return 0;
}

int unpad_parse_int(const char *s, long lo, long hi, int *out)
{
    long v;
    if (unpad_parse_long(s, &v) || v < lo || v > hi || v < INT_MIN || v > INT_MAX)
        return UNPAD_EINVAL;
    *out = (int)v;
    return UNPAD_OK;
}

int unpad_read_file_max(const char *path, long limit, char **out, size_t *len, unpad_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot read: %s", strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return unpad_fail(err, UNPAD_EIO, path, 0, "a folder, not a file");
    }
    const int regular = S_ISREG(st.st_mode);
    if (limit <= 0)
        limit = regular ? UNPAD_READ_MAX : UNPAD_READ_MAX_STREAM;
    if (regular && st.st_size > limit) {
        close(fd);
        return unpad_fail(err, UNPAD_EINVAL, path, 0,
                          "%lld bytes, more than the %ld this reader takes (is this the right file?)",
                          (long long)st.st_size, limit);
    }
    /* Room for limit + 1 bytes at most, so that one byte too many is seen. */
    size_t cap = regular ? (size_t)st.st_size + 2 : (size_t)1 << 16, n = 0;
    char *buf = malloc(cap);
    int rc = buf ? UNPAD_OK : unpad_fail(err, UNPAD_ENOMEM, path, 0, "out of memory");
    while (!rc) {
        if (n + 1 == cap) {
            size_t ncap = cap * 2 > (size_t)limit + 2 ? (size_t)limit + 2 : cap * 2;
            char *nb = ncap > cap ? realloc(buf, ncap) : NULL;
            if (!nb) {
                rc = unpad_fail(err, UNPAD_ENOMEM, path, 0, "out of memory");
                break;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t got = read(fd, buf + n, cap - n - 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            rc = unpad_fail(err, UNPAD_EIO, path, 0, "read error: %s", strerror(errno));
            break;
        }
        if (got == 0)
            break;
        n += (size_t)got;
        if (n > (size_t)limit)
            rc = unpad_fail(err, UNPAD_EINVAL, path, 0,
                            "more than %ld bytes%s: refused (this reader takes at most that much%s)",
                            limit, regular ? " (the file grew while read)"
                                           : " from a device or pipe, not a regular file",
                            regular ? "" : "; write the data to a file");
    }
    close(fd);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *out = buf;
    if (len)
        *len = n;
    return UNPAD_OK;
}

int unpad_read_file(const char *path, char **out, size_t *len, unpad_err *err)
{
    return unpad_read_file_max(path, 0, out, len, err);
}

/* Line number (1-based) of byte `at` of text. */
static int line_at(const char *text, size_t at)
{
    int line = 1;
    for (const char *p = text; (p = memchr(p, '\n', (size_t)(text + at - p))); p++)
        line++;
    return line;
}

int unpad_text_check(const char *name, const char *text, size_t len, unpad_err *err)
{
    const char *nul = memchr(text, '\0', len);
    if (!nul)
        return UNPAD_OK;
    size_t at = (size_t)(nul - text);
    return unpad_fail(err, UNPAD_EINVAL, name, line_at(text, at),
                      "a NUL byte (byte offset %zu): this is not a text file", at);
}

void unpad_lines_init(unpad_lines *it, const char *name, const char *text, size_t len)
{
    it->name = name;
    it->begin = it->p = text;
    it->end = text + len;
    /* a UTF-8 byte-order mark (spreadsheets write one) is not part of the first line */
    if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3))
        it->p += 3;
    it->lineno = 0;
    it->len = 0;
    it->line[0] = '\0';
}

int unpad_lines_next(unpad_lines *it, unpad_err *err)
{
    if (it->p >= it->end)
        return 0;
    const char *start = it->p, *nl = memchr(start, '\n', (size_t)(it->end - start));
    size_t n = (size_t)((nl ? nl : it->end) - start);
    it->p = nl ? nl + 1 : it->end;
    it->lineno++;
    if (n && start[n - 1] == '\r')
        n--;
    const char *nul = memchr(start, '\0', n);
    if (nul) {
        unpad_fail(err, UNPAD_EINVAL, it->name, it->lineno,
                   "a NUL byte (byte offset %zu): this is not a text file",
                   (size_t)(nul - it->begin));
        return -1;
    }
    if (n > UNPAD_LINE_MAX) {
        unpad_fail(err, UNPAD_EINVAL, it->name, it->lineno,
                   "line of %zu characters, longer than the %d a line may have (refused, not cut)",
                   n, UNPAD_LINE_MAX);
        unpad_err_show_line(err, it->lineno, start);
        return -1;
    }
    memcpy(it->line, start, n);
    it->line[n] = '\0';
    it->len = n;
    return 1;
}

double unpad_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
