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
/* 1 when the comma-separated list s has an empty item ("8,,16", ",8", "8,"). */
int unpad_list_has_empty(const char *s);

/* A command-line flag that takes one value, seen with value val: 0 the first time (*given = val),
 * else 1 after printing "PROG: --FLAG given twice ('first', then 'val'): give it once". */
int unpad_flag_once(const char *prog, const char *flag, const char *val, const char **given);

/* getopt_long's refusal said as "PROG: unknown option '--x'" or "PROG: --batch needs a value", for a
 * parse run with opterr = 0 and an optstring that starts with ':' (c: what getopt_long returned,
 * '?' or ':'). */
void unpad_getopt_error(const char *prog, int c, int argc, char **argv);

/* Seconds on the monotonic clock (for intervals: progress, timings, diagnostics). */
double unpad_now_s(void);

/* Strict integer parsing into an int: the number must lie in [lo, hi] (lo and hi within int). */
int unpad_parse_int(const char *s, long lo, long hi, int *out);

/* The most bytes unpad_read_file takes in memory: 1 GiB from a regular file (a config,
 * distribution, plan or trace larger than this is refused before reading), 64 MiB from a pipe or
 * device (read up to that, then refused: /dev/zero does not fill the memory). */
#define UNPAD_READ_MAX (1L << 30)
#define UNPAD_READ_MAX_STREAM (64L << 20)

/* Reads a whole file into a buffer the caller frees, with a NUL byte after the last one (so text
 * may be used as a string once unpad_text_check has passed it). A regular file is read whole when
 * it has at most limit bytes (<= 0: UNPAD_READ_MAX), else refused before reading; a pipe or
 * device is read up to limit bytes (<= 0: UNPAD_READ_MAX_STREAM) and refused when it has more; a
 * folder is refused. */
int unpad_read_file(const char *path, char **out, size_t *len, unpad_err *err);
int unpad_read_file_max(const char *path, long limit, char **out, size_t *len, unpad_err *err);

/* Refuses text[0..len) holding a NUL byte, naming its byte offset and line: a text reader must not
 * stop there silently. */
int unpad_text_check(const char *name, const char *text, size_t len, unpad_err *err);

/* ---- line by line ----
 * Lines of text[0..len) one at a time, each copied NUL-terminated into `line` without its "\n" or
 * "\r\n". A line longer than UNPAD_LINE_MAX characters is refused (file, line, reason), never cut.
 *
 *   unpad_lines it;
 *   unpad_lines_init(&it, name, text, len);     (a UTF-8 byte-order mark at the start is skipped)
 *   while ((rc = unpad_lines_next(&it, err)) > 0) ... it.line, it.lineno ...
 *   if (rc < 0) ... error in err */
#define UNPAD_LINE_MAX 4096

typedef struct {
    const char *name;                /* the file, for messages */
    const char *begin, *p, *end;     /* the text; what is left to read */
    int lineno;                      /* number of the current line, 1-based */
    size_t len;                      /* length of the current line */
    char line[UNPAD_LINE_MAX + 1];   /* the current line */
} unpad_lines;

void unpad_lines_init(unpad_lines *it, const char *name, const char *text, size_t len);
/* 1: it->line holds the next line; 0: no more lines; -1: err filled (UNPAD_EINVAL). */
int unpad_lines_next(unpad_lines *it, unpad_err *err);

#endif
