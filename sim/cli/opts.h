/* opts.h — the flags of the `unpad` subcommands as a table. Each entry names a long flag, what
 * kind of value it takes and where the value goes; cli_opts_parse runs getopt_long over the table,
 * checks every value (a number's range, each item of a list) and stores it. A command's parser is
 * then its table, and the flags every command shares (the inputs, the outputs) are parsed, checked
 * and refused with the same words everywhere:
 *
 *   predict_opts o = {.batch = 56, ...};               the defaults
 *   const cli_opt opts[] = {
 *       CLI_OPTS_INPUTS(&o.rq),                        --dist --model --hw --calib --no-calib
 *       CLI_OPT_INT("batch", &o.batch, 1, 4096),
 *       CLI_OPT_STR("json", &o.json),
 *   };
 *   int rc = cli_opts_parse("predict", argc, argv, 1, opts, CLI_NOPTS(opts), usage, NULL);
 *   if (rc >= 0) return rc;                            0 after --help, 2 for a refused flag
 *
 * --help and -h are every command's (usage to standard output); an unknown flag, or one without
 * its value, is named ("unpad CMD: ...") with the usage on standard error. A flag with one value given twice is refused (CLI_STRS flags
 * collect each value; flags without a value may repeat). An output given as "-" is standard output:
 * one output at most may go there (two are refused, naming both flags), and once one does, the
 * command's text is discarded (outfile_stdout) so that standard output holds that output alone. */
#ifndef UNPAD_CLI_OPTS_H
#define UNPAD_CLI_OPTS_H

#include <stdio.h>

#include "layout.h"
#include "resolve.h"

typedef enum {
    CLI_FLAG,    /* no value: *(int *)dst = 1 */
    CLI_STR,     /* *(const char **)dst = the value */
    CLI_INT,     /* *(int *)dst: an integer in [lo, hi] (cli_int) */
    CLI_DOUBLE,  /* *(double *)dst: a number in [lo, hi] (cli_double) */
    CLI_INTS,    /* *(cli_ints *)dst: a comma list of integers in [lo, hi] */
    CLI_STRS,    /* *(cli_strs *)dst: the value appended (the flag may be repeated) */
    CLI_LAYOUTS, /* *(cli_layouts *)dst: a --layout list (layout_parse_list) of at most hi */
    CLI_CALL,    /* fn(cmd, flag, value, dst): 0, or nonzero after printing why it refused */
    CLI_SWITCH,  /* no value: fn(cmd, flag, NULL, dst), as CLI_CALL */
    CLI_OUT,     /* an output file, as CLI_STR; "-" is standard output */
    CLI_OUT_FILE /* an output file, as CLI_STR; "-" is refused, with why (a file is needed) */
} cli_opt_kind;

typedef struct {
    const char *name; /* the long flag without its dashes */
    cli_opt_kind kind;
    void *dst;
    double lo, hi;
    int (*fn)(const char *cmd, const char *flag, const char *val, void *dst);
    const char *why; /* CLI_OUT_FILE: why its output cannot be standard output */
} cli_opt;

#define CLI_NOPTS(table) ((int)(sizeof(table) / sizeof((table)[0])))

/* The table's entries, one per kind. */
#define CLI_OPT_FLAG(flag_, p) {.name = (flag_), .kind = CLI_FLAG, .dst = (p)}
#define CLI_OPT_STR(flag_, p) {.name = (flag_), .kind = CLI_STR, .dst = (p)}
#define CLI_OPT_INT(flag_, p, lo_, hi_) {.name = (flag_), .kind = CLI_INT, .dst = (p), .lo = (lo_), .hi = (hi_)}
#define CLI_OPT_DOUBLE(flag_, p, lo_, hi_) \
    {.name = (flag_), .kind = CLI_DOUBLE, .dst = (p), .lo = (lo_), .hi = (hi_)}
#define CLI_OPT_INTS(flag_, p, lo_, hi_) {.name = (flag_), .kind = CLI_INTS, .dst = (p), .lo = (lo_), .hi = (hi_)}
#define CLI_OPT_STRS(flag_, p) {.name = (flag_), .kind = CLI_STRS, .dst = (p)}
#define CLI_OPT_LAYOUTS(flag_, p, hi_) {.name = (flag_), .kind = CLI_LAYOUTS, .dst = (p), .hi = (hi_)}
#define CLI_OPT_CALL(flag_, f, p) {.name = (flag_), .kind = CLI_CALL, .dst = (p), .fn = (f)}
#define CLI_OPT_SWITCH(flag_, f, p) {.name = (flag_), .kind = CLI_SWITCH, .dst = (p), .fn = (f)}
#define CLI_OPT_OUT(flag_, p) {.name = (flag_), .kind = CLI_OUT, .dst = (p)}
#define CLI_OPT_OUT_FILE(flag_, p, why_) {.name = (flag_), .kind = CLI_OUT_FILE, .dst = (p), .why = (why_)}

/* The inputs of the planning commands, into a resolve_req. */
#define CLI_OPT_DIST(rq) CLI_OPT_STR("dist", &(rq)->dist)
#define CLI_OPT_MODEL(rq) CLI_OPT_STR("model", &(rq)->model)
#define CLI_OPT_HW(rq) CLI_OPT_STR("hw", &(rq)->hw)
#define CLI_OPTS_CALIB(rq)                                                                     \
    CLI_OPT_STR("calib", &(rq)->calib), CLI_OPT_FLAG("no-calib", &(rq)->no_calib),               \
        CLI_OPT_STR("faster", &(rq)->faster), CLI_OPT_STR("hw-set", &(rq)->hw_set)
#define CLI_OPTS_INPUTS(rq) CLI_OPT_DIST(rq), CLI_OPT_MODEL(rq), CLI_OPT_HW(rq), CLI_OPTS_CALIB(rq)
/* --seed S, the same range everywhere. */
#define CLI_OPT_SEED(p) CLI_OPT_INT("seed", (p), 0, 2147483647)

typedef struct {
    int *v; /* malloc'd (cli_ints_free); NULL: not given */
    int n;
} cli_ints;

typedef struct {
    const char **v; /* (max) the caller's */
    int n, max;
    const char *what; /* "more than MAX <what>" */
} cli_strs;

#define CLI_MAX_LAYOUTS 16
typedef struct {
    layout v[CLI_MAX_LAYOUTS];
    int n;
} cli_layouts;

/* Parses argv[first..argc) over opts[0..n). Arguments that are not flags go to rest (after the
 * ones given with their flag, as `--traces a.csv b.csv`: only once rest holds one, and up to its
 * max); with rest NULL, or before, they are refused. Returns -1 when the command goes on, else
 * the exit code: 0 after --help, 2 after a refused flag, value or argument (the reason printed as
 * "unpad CMD: ..."). */
int cli_opts_parse(const char *cmd, int argc, char **argv, int first, const cli_opt *opts, int n,
                   void (*usage)(FILE *), cli_strs *rest);

void cli_ints_free(cli_ints *l);

/* CLI_CALL parsers shared by several commands. --count equal|free into a balance_count: */
int cli_parse_count(const char *cmd, const char *flag, const char *val, void *dst);
/* on|off into an int (1 / 0): */
int cli_parse_on_off(const char *cmd, const char *flag, const char *val, void *dst);
/* --last-layer heads|all into an int (1 / 0): the trainer's last layer after its attention on the
 * heads' rows only, or every layer on all tokens (step.h STEP_LAST_HEADS): */
int cli_parse_last_layer(const char *cmd, const char *flag, const char *val, void *dst);
#define CLI_OPT_LAST_LAYER(p) CLI_OPT_CALL("last-layer", cli_parse_last_layer, (p))

#endif
