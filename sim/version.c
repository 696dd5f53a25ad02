/* version.c — the version and the commit the Makefile passes in (-DUNPAD_COMMIT). */
#include "version.h"

#include <stdio.h>

#ifndef UNPAD_COMMIT
#define UNPAD_COMMIT "unknown"
#endif

const char *unpad_commit(void)
{
    return UNPAD_COMMIT;
}

void unpad_version_string(char *buf, size_t n)
{
    snprintf(buf, n, "unpad %s (commit %s)", UNPAD_VERSION, UNPAD_COMMIT);
}
