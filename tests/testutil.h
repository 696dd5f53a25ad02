/* testutil.h — helpers shared by the Check suites: temporary files and the project root. */
#ifndef UNPAD_TESTUTIL_H
#define UNPAD_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes text to a fresh temporary file; returns its path in buf (caller unlinks). */
static inline const char *tu_write_tmp(char *buf, size_t n, const char *suffix, const char *text)
{
    snprintf(buf, n, "/tmp/unpad-test-XXXXXX%s", suffix);
    int fd = mkstemps(buf, (int)strlen(suffix));
    if (fd < 0)
        return NULL;
    size_t len = strlen(text);
    if (write(fd, text, len) != (ssize_t)len) {
        close(fd);
        return NULL;
    }
    close(fd);
    return buf;
}

/* A path under the project root (UNPAD_HOME, set by `make test`, or the current folder). */
static inline const char *tu_path(char *buf, size_t n, const char *rel)
{
    const char *home = getenv("UNPAD_HOME");
    snprintf(buf, n, "%s/%s", home && *home ? home : ".", rel);
    return buf;
}

#endif
