/* inputs.c — the shared --dist/--model/--hw/--calib inputs of the subcommands. */
#include "inputs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "outfile.h"

int cli_inputs_load(const char *cmd, cli_inputs *in, int need_dist)
{
    unpad_err err = {0};
    if (!in->model_path)
        in->model_path = cli_project_path("models/bert-large.cfg", in->model_buf, sizeof in->model_buf);
    if (!in->hw_path)
        in->hw_path = cli_project_path("models/hw/h200-sxm.cfg", in->hw_buf, sizeof in->hw_buf);
    if (model_load(in->model_path, &in->model, &err) || hw_load(in->hw_path, &in->hw, &err))
        return cli_error(cmd, &err);
    if (!in->calib_path && !in->no_calib) {
        char rel[CFG_STR_LEN + 32];
        snprintf(rel, sizeof rel, "models/calib/%s.cfg", in->hw.name);
        const char *p = cli_project_path(rel, in->calib_buf, sizeof in->calib_buf);
        if (access(p, R_OK) == 0)
            in->calib_path = p;
    }
    if (in->calib_path) {
        if (calib_load(in->calib_path, &in->hw, &in->calib, &err))
            return cli_error(cmd, &err);
    } else {
        calib_default(&in->hw, &in->calib);
    }
    memset(&in->dist, 0, sizeof in->dist);
    if (need_dist) {
        if (!in->dist_path)
            in->dist_path = cli_project_path("models/dists/wiki512.csv", in->dist_buf, sizeof in->dist_buf);
        if (dist_load(in->dist_path, &in->dist, &err))
            return cli_error(cmd, &err);
        if (in->dist.max_len > in->model.max_len) {
            fprintf(stderr, "unpad %s: %s has lengths up to %d but %s trains at most %d\n", cmd,
                    in->dist_path, in->dist.max_len, in->model_path, in->model.max_len);
            dist_free(&in->dist);
            return 1;
        }
    }
    return 0;
}

void cli_inputs_free(cli_inputs *in)
{
    dist_free(&in->dist);
}

int cli_check_outputs(const char *cmd, const cli_inputs *in, const char *const *more, int nm,
                      const char *const *outs, int no)
{
    const char **all = calloc((size_t)nm + 4, sizeof *all);
    if (!all) {
        fprintf(stderr, "unpad %s: out of memory\n", cmd);
        return 1;
    }
    int n = 0;
    if (in) {
        all[n++] = in->dist.count ? in->dist_path : NULL;
        all[n++] = in->model_path;
        all[n++] = in->hw_path;
        all[n++] = in->calib_path;
    }
    for (int i = 0; i < nm; i++)
        all[n++] = more[i];
    unpad_err err = {0};
    int rc = outfile_check_all(outs, no, all, n, &err);
    free(all);
    return rc ? cli_error(cmd, &err) : 0;
}
