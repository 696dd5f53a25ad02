/* unpad.h — status codes and the error record shared by every unpad library function.
 *
 * Library functions return a status and, on failure, fill an unpad_err with a message a
 * person can act on: "file:line: reason" and, for parse errors, the offending line itself.
 * Only main()s print and exit. */
#ifndef UNPAD_H
#define UNPAD_H

#include <stddef.h>

enum {
    UNPAD_OK = 0,
    UNPAD_EINVAL = 1, /* malformed or out-of-range input */
    UNPAD_EIO = 2,    /* file missing, unreadable or unwritable */
    UNPAD_ENOMEM = 3, /* allocation failed */
    UNPAD_ERANGE = 4, /* a request the data cannot satisfy (e.g. more GPUs than sequences) */
};

#define UNPAD_ERR_LEN 1024

typedef struct {
    int code;
    char msg[UNPAD_ERR_LEN];
} unpad_err;

/* Fills err (may be NULL) with "file:line: reason" (line <= 0 leaves the line number out,
 * file == NULL leaves the file out) and returns code, so callers can `return unpad_fail(...)`. */
int unpad_fail(unpad_err *err, int code, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Appends "\n    <line> | <text>" to err's message: shows the person the line that was refused. */
void unpad_err_show_line(unpad_err *err, int line, const char *text);

/* Name of a status code ("EINVAL", ...). */
const char *unpad_strstatus(int code);

/* Strict number parsing: the whole string must be one number (surrounding blanks allowed). */
int unpad_parse_long(const char *s, long *out);
int unpad_parse_double(const char *s, double *out);

/* Reads a whole text file into a NUL-terminated buffer the caller frees. */
int unpad_read_file(const char *path, char **out, size_t *len, unpad_err *err);

#endif
