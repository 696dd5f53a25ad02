/* opts.c — the subcommands' flag tables parsed with getopt_long (see opts.h). */
#include "opts.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "balance.h"
#include "cli.h"
#include "outfile.h"

#define OPTS_MAX 48

/* One value into its place; nonzero when refused (the reason printed). */
static int opt_store(const char *cmd, const cli_opt *o, const char *val)
{
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", o->name);
    switch (o->kind) {
    case CLI_FLAG: *(int *)o->dst = 1; return 0;
    case CLI_STR:
    case CLI_OUT: *(const char **)o->dst = val; return 0;
    case CLI_OUT_FILE:
        if (outfile_is_stdout(val)) {
            fprintf(stderr, "unpad %s: %s -: not to standard output: %s\n", cmd, flag, o->why);
            return 1;
        }
        *(const char **)o->dst = val;
        return 0;
    case CLI_INT: return cli_int(cmd, flag, val, (long)o->lo, (long)o->hi, (int *)o->dst);
    case CLI_DOUBLE: return cli_double(cmd, flag, val, o->lo, o->hi, (double *)o->dst);
    case CLI_INTS: {
        cli_ints *l = o->dst;
        cli_ints_free(l);
        return cli_int_list(cmd, flag, val, (long)o->lo, (long)o->hi, &l->v, &l->n);
    }
    case CLI_STRS: {
        cli_strs *l = o->dst;
        if (l->n == l->max) {
            fprintf(stderr, "unpad %s: more than %d %s\n", cmd, l->max, l->what);
            return 1;
        }
        l->v[l->n++] = val;
        return 0;
    }
    case CLI_LAYOUTS: {
        cli_layouts *l = o->dst;
        unpad_err err = {0};
        int max = (int)o->hi < CLI_MAX_LAYOUTS ? (int)o->hi : CLI_MAX_LAYOUTS;
        return layout_parse_list(flag, val, l->v, &l->n, max, &err) ? cli_error(cmd, &err) : 0;
    }
    case CLI_CALL:
    case CLI_SWITCH: return o->fn(cmd, flag, val, o->dst);
    }
    return 1;
}

/* The one output given as "-" takes standard output now, before any text; two are refused. */
static int stdout_output(const char *cmd, const cli_opt *opts, int n, const char *const *given)
{
    int first = -1;
    for (int i = 0; i < n; i++) {
        if (opts[i].kind != CLI_OUT || !given[i] || !outfile_is_stdout(given[i]))
            continue;
        if (first >= 0) {
            fprintf(stderr, "unpad %s: --%s - and --%s -: both to standard output, where one output can go; "
                            "give one of them a file name\n", cmd, opts[first].name, opts[i].name);
            return 1;
        }
        first = i;
    }
    unpad_err err = {0};
    int fd;
    if (first >= 0 && outfile_stdout(&fd, &err)) {
        fprintf(stderr, "unpad %s: --%s -: %s\n", cmd, opts[first].name, err.msg);
        return 1;
    }
    return 0;
}

int cli_opts_parse(const char *cmd, int argc, char **argv, int first, const cli_opt *opts, int n,
                   void (*usage)(FILE *), cli_strs *rest)
{
    /* getopt_long's table: each flag's val is 256 + its index (distinct vals, so an abbreviation
     * that two flags share is refused as ambiguous), then --help. */
    struct option lo[OPTS_MAX + 2];
    if (n > OPTS_MAX) {
        fprintf(stderr, "unpad %s: more than %d flags in its table\n", cmd, OPTS_MAX);
        return 2;
    }
    for (int i = 0; i < n; i++) {
        int bare = opts[i].kind == CLI_FLAG || opts[i].kind == CLI_SWITCH;
        lo[i] = (struct option){opts[i].name, bare ? no_argument : required_argument, NULL, 256 + i};
    }
    lo[n] = (struct option){"help", no_argument, NULL, 'h'};
    lo[n + 1] = (struct option){0, 0, 0, 0};
    /* A flag that takes one value is refused when given twice (which one was meant?); a flag
     * without a value may repeat, and a list flag (CLI_STRS) collects each. */
    const char *given[OPTS_MAX] = {0};
    int c;
    optind = first;
    opterr = 0; /* its messages would name the command "predict", not "unpad predict" */
    while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        if (c < 256 || c >= 256 + n) {
            char prog[64];
            snprintf(prog, sizeof prog, "unpad %s", cmd);
            unpad_getopt_error(prog, c, argc, argv);
            usage(stderr);
            return 2;
        }
        const cli_opt *o = &opts[c - 256];
        char prog[64];
        snprintf(prog, sizeof prog, "unpad %s", cmd);
        if (optarg && o->kind != CLI_STRS && unpad_flag_once(prog, o->name, optarg, &given[c - 256]))
            return 2;
        if (opt_store(cmd, o, optarg))
            return 2;
    }
    for (; optind < argc; optind++) {
        if (!rest || !rest->n || rest->n == rest->max) {
            fprintf(stderr, "unpad %s: unexpected argument '%s'\n", cmd, argv[optind]);
            return 2;
        }
        rest->v[rest->n++] = argv[optind];
    }
    return stdout_output(cmd, opts, n, given) ? 2 : -1;
}

void cli_ints_free(cli_ints *l)
{
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

/* One of two words into an int: 1 for `one`, 0 for `zero`. */
static int parse_two(const char *cmd, const char *flag, const char *val, int *dst, const char *one,
                     const char *zero)
{
    if (strcmp(val, one) && strcmp(val, zero)) {
        fprintf(stderr, "unpad %s: %s: unknown '%s' (expected %s or %s)\n", cmd, flag, val, one, zero);
        return 1;
    }
    *dst = !strcmp(val, one);
    return 0;
}

int cli_parse_on_off(const char *cmd, const char *flag, const char *val, void *dst)
{
    return parse_two(cmd, flag, val, dst, "on", "off");
}

int cli_parse_last_layer(const char *cmd, const char *flag, const char *val, void *dst)
{
    return parse_two(cmd, flag, val, dst, "heads", "all");
}

int cli_parse_count(const char *cmd, const char *flag, const char *val, void *dst)
{
    int v = balance_count_from_name(val);
    if (v < 0) {
        fprintf(stderr, "unpad %s: %s: unknown '%s' (expected equal or free)\n", cmd, flag, val);
        return 1;
    }
    *(balance_count *)dst = (balance_count)v;
    return 0;
}
