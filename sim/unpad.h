/* unpad.h — status codes and the error record shared by every unpad library function.
 *
 * The error policy of the library (sim/, and exec/ outside its main()s):
 *  - Input and environment errors (a file missing, unreadable or malformed, a flag out of range,
 *    a request the data cannot satisfy, memory that runs out) are returned: the function returns
 *    a status (UNPAD_EINVAL, UNPAD_EIO, UNPAD_ENOMEM, UNPAD_ERANGE) and fills an unpad_err with a
 *    message a person can act on, "file:line: reason" (or the flag) and, for parse errors, the
 *    offending line itself, up to main(), which prints it and exits. Library functions never
 *    print to stdout or stderr and never exit: they write only to a FILE they are handed.
 *  - Every allocation is checked (UNPAD_ENOMEM). GSL's aborting error handler is turned off
 *    (unpad_gsl_quiet), so a GSL failure is a status too.
 *  - Invariant violations (states no input can produce: a bug) stop at once through
 *    UNPAD_INVARIANT, which prints file:line and the condition and aborts; in the GPU code, CUDA,
 *    cuBLAS and NCCL failures stop at once through their check macros (cudaCheck, cublasCheck,
 *    ncclCheck), which print file:line and the library's own error string. */
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

/* GSL's default error handler aborts the process. Every library function that calls GSL first
 * calls this: it turns that handler off, once for the process (thread-safe), so a GSL failure
 * comes back as a GSL status, which the library turns into an unpad status. */
void unpad_gsl_quiet(void);

/* Stops the process when cond, an invariant of the code, is false (see the policy above). */
#define UNPAD_INVARIANT(cond) \
    ((cond) ? (void)0 : unpad_invariant_failed(__FILE__, __LINE__, #cond))
void unpad_invariant_failed(const char *file, int line, const char *cond) __attribute__((noreturn));

/* Strict number parsing: the whole string must be one number (surrounding blanks allowed). */
int unpad_parse_long(const char *s, long *out);
int unpad_parse_double(const char *s, double *out);

/* Reads a whole text file into a NUL-terminated buffer the caller frees. */
int unpad_read_file(const char *path, char **out, size_t *len, unpad_err *err);

#endif
