/* cli.c — flag parsing and input loading for the `unpad` subcommands. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outfile.h"

int cli_int(const char *cmd, const char *flag, const char *val, long lo, long hi, int *out)
{
    long v;
    if (!val) {
        fprintf(stderr, "unpad %s: %s needs a value\n", cmd, flag);
        return 1;
    }
    if (unpad_parse_long(val, &v)) {
        fprintf(stderr, "unpad %s: %s: bad number '%s' (expected an integer in [%ld, %ld])\n", cmd,
                flag, val, lo, hi);
        return 1;
    }
    if (v < lo || v > hi) {
        fprintf(stderr, "unpad %s: %s = %ld is out of range (expected [%ld, %ld])\n", cmd, flag, v,
                lo, hi);
        return 1;
    }
    *out = (int)v;
    return 0;
}

int cli_double(const char *cmd, const char *flag, const char *val, double lo, double hi, double *out)
{
    double v;
    if (!val) {
        fprintf(stderr, "unpad %s: %s needs a value\n", cmd, flag);
        return 1;
    }
    if (unpad_parse_double(val, &v)) {
        fprintf(stderr, "unpad %s: %s: bad number '%s' (expected a number in [%g, %g])\n", cmd, flag,
                val, lo, hi);
        return 1;
    }
    if (v < lo || v > hi) {
        fprintf(stderr, "unpad %s: %s = %g is out of range (expected [%g, %g])\n", cmd, flag, v, lo,
                hi);
        return 1;
    }
    *out = v;
    return 0;
}

int cli_int_list(const char *cmd, const char *flag, const char *val, long lo, long hi, int **out,
                 int *n)
{
    if (!val) {
        fprintf(stderr, "unpad %s: %s needs a value\n", cmd, flag);
        return 1;
    }
    int cap = 1;
    for (const char *p = val; *p; p++)
        cap += *p == ',';
    int *v = malloc((size_t)cap * sizeof *v);
    char *copy = strdup(val);
    if (!v || !copy) {
        free(v);
        free(copy);
        fprintf(stderr, "unpad %s: out of memory\n", cmd);
        return 1;
    }
    int k = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        if (cli_int(cmd, flag, tok, lo, hi, &v[k++])) {
            free(v);
            free(copy);
            return 1;
        }
    free(copy);
    if (!k) {
        free(v);
        fprintf(stderr, "unpad %s: %s: empty list\n", cmd, flag);
        return 1;
    }
    *out = v;
    *n = k;
    return 0;
}

int cli_project_path(const char *cmd, const char *rel, char *buf, size_t n)
{
    unpad_err err = {0};
    return resolve_project_path(rel, buf, n, &err) ? cli_error(cmd, &err) : 0;
}

int cli_inputs_load(const char *cmd, resolve_req *rq, resolve_inputs *in, int need_dist)
{
    unpad_err err = {0};
    rq->need_dist = need_dist;
    return resolve_inputs_load(rq, in, &err) ? cli_error(cmd, &err) : 0;
}

int cli_error(const char *cmd, const unpad_err *err)
{
    fprintf(stderr, "unpad %s: %s\n", cmd, err->msg);
    return 1;
}

int cli_check_outputs(const char *cmd, const resolve_inputs *in, const char *const *more, int nm,
                      const char *const *outs, int no)
{
    const char **all = calloc((size_t)nm + 5, sizeof *all);
    if (!all) {
        fprintf(stderr, "unpad %s: out of memory\n", cmd);
        return 1;
    }
    int n = 0;
    if (in) {
        all[n++] = in->model_path[0] ? in->model_path : NULL;
        all[n++] = in->hw_path[0] ? in->hw_path : NULL;
        all[n++] = in->calib_path[0] ? in->calib_path : NULL;
        all[n++] = in->dist.count && in->dist_path[0] ? in->dist_path : NULL;
        all[n++] = in->have_plan && in->plan_path[0] ? in->plan_path : NULL;
    }
    for (int i = 0; i < nm; i++)
        all[n++] = more[i];
    unpad_err err = {0};
    int rc = outfile_check_all(outs, no, all, n, &err);
    free(all);
    return rc ? cli_error(cmd, &err) : 0;
}
