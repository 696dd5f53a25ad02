/* resolve.h — the inputs of a run, found and loaded the same way by `unpad` and `unpad-train`.
 *
 * Project home: $UNPAD_HOME when set (and not empty), else the folder above the executable's
 * `bin/` (found from /proc/self/exe), else (an executable elsewhere) the current folder. The
 * defaults live under the home; a path the user gives is taken as given (relative to the current
 * folder), except a bare name that is no file here: `--model bert-base` is the project's
 * models/bert-base.cfg, `--hw a100-sxm4-40g` models/hw/a100-sxm4-40g.cfg, `--dist short`
 * models/dists/short.csv, `--calib h200-sxm` models/calib/h200-sxm.cfg (resolve_named).
 *
 *   model        --model F, default models/bert-large.cfg
 *   hardware     --hw F; else, on a GPU (device: its CUDA name, which unpad-train passes), the spec
 *                under models/hw whose `device` is that name; else models/hw/h200-sxm.cfg. Two
 *                specs naming the same device, or one that does not load, are errors naming them.
 *   calibration  --calib F; else models/calib/<hw name>.cfg when it exists; else the uncalibrated
 *                defaults (calib_default); --no-calib: the defaults even where that file exists.
 *                With FP8 products asked (fp8: --fp8 on), models/calib/<hw name>-fp8.cfg first
 *                (fitted on --fp8 on traces: calib.fp8), else the bf16 one as above, whose step
 *                times are then the bf16 products'; a calibration with fp8 = true without --fp8
 *                on is refused.
 *                The source is recorded: default, fitted, or transferred (a file written by
 *                `unpad calibrate --transfer`, which says `transferred = true`); --faster
 *                then scales them (calib_faster: a what-if, recorded in calib.faster); --graphs on
 *                then gives the coefficients of runs with CUDA graphs (calib_graphs)
 *   distribution --dist F, default models/dists/wiki512.csv (loaded only when asked for); lengths
 *                over the model's max_len are an error, except with a cap (--max-len N, N at most
 *                the model's max_len), which truncates them: the distribution is then cut to the
 *                model's max_len (layout_truncate) and the cap applies on top of it
 *   plan         --plan F (optional), then the flags on top of it:
 *                --policy, --count, --fmha-groups, --streams and --tokens override the plan;
 *                a plan's `weights = tokens` is kept; the per-sequence cost is the plan's
 *                (plan_seq_cost), except with --calib, where it is recomputed from that
 *                calibration (cost_seq_model); without a plan it comes from the calibration.
 *
 * Errors return a status with an unpad_err naming the file or the flag. */
#ifndef UNPAD_RESOLVE_H
#define UNPAD_RESOLVE_H

#include <stddef.h>

#include "calib.h"
#include "dist.h"
#include "model.h"
#include "plan.h"

#define RESOLVE_PATH_LEN 4096

/* What the user asked; NULL (or 0) everywhere means "the default". */
typedef struct {
    const char *model, *hw, *calib, *dist, *plan; /* paths as given */
    int no_calib;          /* 1: the uncalibrated defaults even where models/calib/<hw>.cfg exists */
    int fp8;               /* 1: the trainer's --fp8 on (an FP8 calibration preferred, see above) */
    int graphs;            /* 1: the trainer's --graphs on (calib_graphs applied to the calibration) */
    const char *faster;    /* what-if speed-ups applied to the coefficients (calib_faster), NULL: none */
    const char *hw_set;    /* what-if: KEY=VALUE,... over the hardware spec's numbers (resolve_hw_set), NULL: none */
    int need_dist;         /* 1: load the distribution (dist, else the default) */
    int max_len;           /* --max-len: longer sequences are truncated to it (0: none) */
    /* flags over the plan */
    const char *policy;    /* a balancing policy name (balance_policy_parse) */
    const char *count;     /* equal | free */
    const char *fmha_groups; /* auto | none | 128,384 (group_bounds_parse) */
    int streams;           /* 1..GROUP_MAX_STREAMS; 0: not given */
    int tokens;            /* 1: balance tokens (weights = tokens) */
    const char *device;    /* the GPU the run is on (cudaDeviceProp.name), NULL: none known */
} resolve_req;

typedef struct {
    /* the files used, for provenance in outputs ("" where none) */
    char model_path[RESOLVE_PATH_LEN], hw_path[RESOLVE_PATH_LEN], calib_path[RESOLVE_PATH_LEN];
    char dist_path[RESOLVE_PATH_LEN], plan_path[RESOLVE_PATH_LEN];
    model_cfg model;
    hw_spec hw;
    calib_coef calib;
    calib_source calib_from;   /* CALIB_DEFAULT: calib_path is "" */
    unpad_dist dist;           /* empty (count NULL) unless need_dist; at most the model's max_len */
    int dist_longest;          /* the file's longest length: above dist.max_len when it was cut */
    /* The plan file (plan_default with policy none when none was given) with the flags applied:
     * policy, count, weights_tokens, cost, fmha_nb/fmha_bounds, fmha_granularity, streams. The
     * other fields are the file's. streams is 0 when neither the plan nor --streams set it (the
     * program's default applies). */
    unpad_plan plan;
    int have_plan;             /* 1: a plan file was read (plan_path) */
    /* how the hardware spec was chosen: given (--hw), matched (its device is the GPU's name),
     * or the default (no spec names the GPU, or no GPU was named) */
    enum { HW_GIVEN, HW_MATCHED, HW_DEFAULT } hw_from;
    char hw_set[RESOLVE_PATH_LEN]; /* the --hw-set applied ("" where none) */
} resolve_inputs;

/* What-if over a hardware spec: set, "KEY=VALUE[,KEY=VALUE...]" with the spec's keys (gpus_per_node=4,
 * node_bw_gbs=25), each value read and range-checked as the spec file's would be, into hw. The name
 * and the device are refused (they choose the calibration and the GPU: give another --hw). */
int resolve_hw_set(const char *set, hw_spec *hw, unpad_err *err);

/* The project home into buf (no trailing '/'; "" for the current folder). */
int resolve_home(char *buf, size_t n, unpad_err *err);

/* rel (e.g. "models/hw/h200-sxm.cfg") under the project home, into buf. */
int resolve_project_path(const char *rel, char *buf, size_t n, unpad_err *err);

/* given as a path: itself when it names a file (not a folder) here or holds a '/' (or dir is NULL); else, a bare
 * name, <home>/dir/given (with ext appended unless given ends in it) when that exists. A bare name
 * found in neither place is an error naming the flag, both places and the names dir holds. */
int resolve_named(const char *given, const char *flag, const char *dir, const char *ext, char *out, size_t n,
                  unpad_err *err);

/* The spec under the project's models/hw whose `device` is the GPU name device, its path into
 * out[n] and the spec into hw; out "" when no spec names it. Two specs naming it, or a spec there
 * that does not load, are errors naming the files. */
int resolve_hw_by_device(const char *device, char *out, size_t n, hw_spec *hw, unpad_err *err);

/* Resolves and loads everything rq asks for into in (which resolve_inputs_free releases, also
 * after a failure). */
int resolve_inputs_load(const resolve_req *rq, resolve_inputs *in, unpad_err *err);
void resolve_inputs_free(resolve_inputs *in);

#endif
