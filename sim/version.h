/* version.h — what built this program, for the provenance every output carries. */
#ifndef UNPAD_VERSION_H
#define UNPAD_VERSION_H

#include <stddef.h>

#define UNPAD_VERSION "0.1.0"

/* The git commit the build was made from (12 hex digits, "-dirty" when the work tree had
 * uncommitted changes; "unknown" outside git), injected by the Makefile as -DUNPAD_COMMIT. */
const char *unpad_commit(void);

/* "unpad 0.1.0 (commit 7a9a31e2c4f1)" into buf. */
void unpad_version_string(char *buf, size_t n);

#endif
