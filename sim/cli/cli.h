/* cli.h — small helpers shared by the `unpad` subcommands: flag parsing with range checks, and
 * the inputs (model, hardware, calibration, distribution) through the library's resolver. */
#ifndef UNPAD_CLI_H
#define UNPAD_CLI_H

#include "json.h"
#include "prov.h"
#include "resolve.h"

/* Parse an integer / number flag value in [lo, hi]; on failure print "unpad CMD: --flag: reason"
 * and return nonzero. */
int cli_int(const char *cmd, const char *flag, const char *val, long lo, long hi, int *out);
int cli_double(const char *cmd, const char *flag, const char *val, double lo, double hi, double *out);
/* A comma-separated list of integers in [lo, hi]; *out is malloc'd. */
int cli_int_list(const char *cmd, const char *flag, const char *val, long lo, long hi, int **out,
                 int *n);
/* rel under the project home (resolve_project_path); prints the error and returns 1 on failure. */
int cli_project_path(const char *cmd, const char *rel, char *buf, size_t n);
/* resolve_inputs_load(rq with need_dist); prints "unpad CMD: reason" and returns 1 on failure.
 * Commands zero `in` where they declare it, so resolve_inputs_free is safe on every path. */
int cli_inputs_load(const char *cmd, resolve_req *rq, resolve_inputs *in, int need_dist);

/* What the coefficients are, for every output that uses them: "calibrated (FILE)", "uncalibrated
 * defaults", or "estimate (transferred from HW: FILE)" (calibrate --transfer: nothing measured on
 * this hardware). */
const char *cli_calib_label(const resolve_inputs *in, char *buf, size_t n);
/* Before any work: refuses (prints "unpad CMD: ..." and returns 1) an output among outs[0..no)
 * that is one of the run's inputs — those in (may be NULL) loaded: model, hardware, calibration,
 * distribution, plan — or one of more[0..nm), or another output. NULL entries are skipped. */
int cli_check_outputs(const char *cmd, const resolve_inputs *in, const char *const *more, int nm,
                      const char *const *outs, int no);

/* Prints err's message as "unpad CMD: message" and returns the exit code 1. */
int cli_error(const char *cmd, const unpad_err *err);

/* The JSON document of --json PATH (docs/json.md): built in memory, written under a temporary
 * name and renamed when complete, so an interrupted command leaves none; PATH "-" writes it to
 * standard output, and the command's text output is then discarded so that standard output
 * holds only the document. */
#define CLI_JSON_FORMAT 1 /* "unpad_json": bumped when a key changes meaning or goes away */

typedef struct {
    FILE *f;            /* the document, in memory until cli_json_close */
    char *buf;
    size_t len;
    json_w w;
    FILE *out;          /* "-": the real standard output */
    int to_stdout;
    char path[4096];
} cli_json;

/* Opens the document and writes its first keys: "unpad_json" (the format's version),
 * "command" and "provenance". Prints the reason and returns 1 on failure. */
int cli_json_open(const char *cmd, const char *path, const cli_prov *prov, cli_json *j);
/* Closes the top object, checks the document, renames it into place; 1 on failure. */
int cli_json_close(const char *cmd, cli_json *j);
/* Drops an unfinished document (after another failure); j may be unopened (f NULL). */
void cli_json_abandon(cli_json *j);

#endif
