/* cli.h — small helpers shared by the `unpad` subcommands: flag parsing with range checks and
 * loading the common inputs (distribution, model, hardware) with defaults. */
#ifndef UNPAD_CLI_H
#define UNPAD_CLI_H

#include "dist.h"
#include "model.h"

/* Parse an integer / number flag value in [lo, hi]; on failure print "unpad CMD: --flag: reason"
 * and return nonzero. */
int cli_int(const char *cmd, const char *flag, const char *val, long lo, long hi, int *out);
int cli_double(const char *cmd, const char *flag, const char *val, double lo, double hi, double *out);
/* A comma-separated list of integers in [lo, hi]; *out is malloc'd. */
int cli_int_list(const char *cmd, const char *flag, const char *val, long lo, long hi, int **out,
                 int *n);
/* Resolves a path under the project (UNPAD_HOME or the folder of the executable's parent). */
const char *cli_project_path(const char *rel, char *buf, size_t n);

/* Prints err's message as "unpad CMD: message" and returns the exit code 1. */
int cli_error(const char *cmd, const unpad_err *err);

#endif
