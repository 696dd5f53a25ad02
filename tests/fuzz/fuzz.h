/* fuzz.h — what every libFuzzer harness of tests/fuzz checks besides the sanitizers: a reader
 * either succeeds with values inside its documented ranges, or fails with a message that starts
 * with the file's name (so a person can act on it). Any other outcome aborts, and libFuzzer keeps
 * the input that did it. */
#ifndef UNPAD_FUZZ_H
#define UNPAD_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unpad.h"

/* The name the harnesses give their input; every error message must start with it. */
#define FUZZ_NAME "fuzz-input"

#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz check failed: %s: ", #cond);                                     \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* A failed parse: a known status and a message naming the input. */
static inline void fuzz_check_refusal(int rc, const unpad_err *e)
{
    FUZZ_CHECK(rc == UNPAD_EINVAL || rc == UNPAD_ERANGE || rc == UNPAD_EIO, "status %d", rc);
    FUZZ_CHECK(strncmp(e->msg, FUZZ_NAME, strlen(FUZZ_NAME)) == 0, "message '%s'", e->msg);
}

#endif
