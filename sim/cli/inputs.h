/* inputs.h — loading the inputs most subcommands share (--dist, --model, --hw, --calib), with the
 * project's defaults, so each command states only its own flags. */
#ifndef UNPAD_CLI_INPUTS_H
#define UNPAD_CLI_INPUTS_H

#include "calib.h"
#include "dist.h"
#include "model.h"

typedef struct {
    const char *dist_path, *model_path, *hw_path, *calib_path; /* NULL: the default */
    int no_calib;            /* 1: uncalibrated defaults even where models/calib/<hw>.cfg exists */
    unpad_dist dist;
    model_cfg model;
    hw_spec hw;
    calib_coef calib;
    char dist_buf[4096], model_buf[4096], hw_buf[4096], calib_buf[4096];
} cli_inputs;

/* Loads what is asked (need_dist may be 0); prints "unpad CMD: file:line: reason" on failure.
 * Without --calib, the fitted coefficients of models/calib/<hw name>.cfg are used when that file
 * exists (calib_path then names it), else the uncalibrated defaults (calib_path stays NULL). */
int cli_inputs_load(const char *cmd, cli_inputs *in, int need_dist);
void cli_inputs_free(cli_inputs *in);

/* Before any work: refuses (prints "unpad CMD: ..." and returns 1) an output among outs[0..no)
 * that is one of the run's inputs — those in (may be NULL) loaded: distribution, model, hardware,
 * calibration — or one of more[0..nm), or another output. NULL entries are skipped. */
int cli_check_outputs(const char *cmd, const cli_inputs *in, const char *const *more, int nm,
                      const char *const *outs, int no);

#endif
