/* cli.h — small helpers shared by the `unpad` subcommands: flag parsing with range checks, and
 * the inputs (model, hardware, calibration, distribution) through the library's resolver. */
#ifndef UNPAD_CLI_H
#define UNPAD_CLI_H

#include "json.h"
#include "layout.h"
#include "opts.h"
#include "prov.h"
#include "resolve.h"
#include "trace.h"
#include "whatif.h"

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
/* The same for files written beside those outputs (a sweep's .partial files): outs[0..no) against
 * the inputs and outputs the last cli_check_outputs accepted, and each other; fills err. */
int cli_check_more_outputs(const char *const *outs, int no, unpad_err *err);

/* Prints err's message as "unpad CMD: message" and returns the exit code 1. */
int cli_error(const char *cmd, const unpad_err *err);

/* The measured traces of calibrate and validate: the --model configs loaded into models, each
 * trace read into sets[i] and refused unless measured on hardware hw, then the models the traces
 * name that were not given found under models/ (at most max in all; *nmodels counts them). sets
 * (n) and models (max) are the caller's, zeroed. Prints "unpad CMD: reason" and returns 1 on
 * failure. */
/* A path, for cli_resolve_names. */
typedef struct {
    char s[RESOLVE_PATH_LEN];
} cli_path;

/* Each non-NULL v[i] (a path or a bare name of the project's, resolve_named: dir, ext) resolved
 * into store[i], v[i] then pointing there. Returns -1 when all resolve, else 2 (said why). */
int cli_resolve_names(const char *cmd, const char *flag, const char **v, int n, const char *dir, const char *ext,
                      cli_path *store);

int cli_traces_load(const char *cmd, const char *const *traces, int n, const char *const *model_paths, int nm,
                    const char *hw, trace_set *sets, model_cfg *models, int *nmodels, int max);

/* ---- the sweeps of whatif and plan ---- */
/* Their shared flags: the inputs, the GPU counts and batch sizes, the sweep's settings (into s),
 * the seed, --json and --quiet. */
#define CLI_MAX_PRICES 8
typedef struct {
    double v[CLI_MAX_PRICES];
    int n;
} cli_prices;

typedef struct {
    resolve_req rq;
    whatif_setup s;
    cli_ints gpus, batch; /* default 8 and 56 (cli_sweep_check) */
    cli_prices prices;    /* --price: one, or (plan) one per --hw; cli_sweep_check puts the first in s */
    int seed, quiet;
    const char *json;
} cli_sweep;

#define CLI_OPTS_SWEEP(w)                                                                       \
    CLI_OPTS_INPUTS(&(w)->rq), CLI_OPT_INTS("gpus", &(w)->gpus, 1, 65536),                      \
        CLI_OPT_INTS("batch", &(w)->batch, 1, 65536), CLI_OPT_INT("steps", &(w)->s.steps, 1, 10000000), \
        CLI_OPT_SEED(&(w)->seed), CLI_OPT_INT("threads", &(w)->s.threads, 0, 256),              \
        CLI_OPT_FLAG("tokens", &(w)->s.weights_tokens),                                         \
        CLI_OPT_INT("streams", &(w)->s.max_streams, 1, GROUP_MAX_STREAMS),                      \
        CLI_OPT_INT("granularity", &(w)->s.granularity, 1, 65536),                              \
        CLI_OPT_INT("max-len", &(w)->s.max_len, 1, 1 << 20), CLI_OPT_OUT("json", &(w)->json),   \
        CLI_OPT_FLAG("quiet", &(w)->quiet), CLI_OPT_CALL("fp8", cli_parse_on_off, &(w)->s.fp8),    \
        CLI_OPT_CALL("graphs", cli_parse_on_off, &(w)->rq.graphs),                              \
        CLI_OPT_LAST_LAYER(&(w)->s.last_heads), CLI_OPTS_TRAIN(&(w)->s.train_samples, &(w)->prices)

/* --train-samples N (a count: 3e6, 2.5M, 400k) and --price P[,P...] (per GPU-hour: one, or with
 * `plan --hw A,B` one per hardware): the time and cost of training N samples. */
#define CLI_OPTS_TRAIN(samples, prices)                                                         \
    CLI_OPT_CALL("train-samples", cli_opt_count, (samples)), CLI_OPT_CALL("price", cli_opt_prices, (prices))
/* A comma list of prices in (0, 1e9] into the cli_prices dst (CLI_CALL). */
int cli_opt_prices(const char *cmd, const char *flag, const char *val, void *dst);
/* A count with an optional k, M or G suffix (x 1e3, 1e6, 1e9) into the double dst, 1..1e15
 * (CLI_CALL). */
int cli_opt_count(const char *cmd, const char *flag, const char *val, void *dst);
/* v (a whole count) with thousands separators: 256,000,000. */
const char *cli_count_format(double v, char *buf, size_t n);
/* Refuses (prints why, returns 1) a --price without --train-samples. */
int cli_check_train(const char *cmd, double samples, double price);
/* The usage lines of --train-samples and --price, their descriptions at column col. */
void cli_train_usage(FILE *f, int col);

/* The defaults (whatif_setup_default, seed 1). */
void cli_sweep_init(cli_sweep *w);
/* After the flags: the default lists where none was given (and without --steps, 1000 steps with
 * the sequence budget WHATIF_AUTO_SEQS: whatif_config_steps), then cli_check_configs; 1 (printed
 * why) when refused. */
int cli_sweep_check(const char *cmd, cli_sweep *w, int unique);
void cli_sweep_free(cli_sweep *w);
/* Under a title: the configurations (GPUs, batch, micro-batches; accum may be NULL: one) that
 * sample fewer than s->steps steps (whatif_config_steps), with their steps (the first 8, then how
 * many more); nothing when none. */
void cli_steps_note(FILE *f, const whatif_setup *s, const int *gpus, const int *batch, const int *accum, int k);
/* Refuses (prints why, returns 1) a GPU count x batch size over 16,777,216 sequences a step and,
 * with unique, a pair asked twice. */
int cli_check_configs(const char *cmd, const int *gpus, int ng, const int *batch, int nb, int unique);
/* The loaded inputs and the seed into s. */
void cli_setup_inputs(whatif_setup *s, const resolve_inputs *in, int seed);
/* Refuses, before any work, a --max-len over the model's and each layout that cannot hold the
 * distribution's lengths (layout_resolve). */
int cli_check_layouts(const char *cmd, int max_len, const resolve_inputs *in, const layout *lay, int n);
/* With --fp8 on, what the step times are: "step times with FP8 products" when the calibration was
 * fitted on --fp8 on traces (in->calib.fp8), else "step times: the bf16 products' (...)", saying
 * which calibration and where an FP8 one would be. */
const char *cli_fp8_times(const resolve_inputs *in);
/* --last-layer's word ("heads", "all": the JSON's config.last_layer), and what it means for a title. */
const char *cli_last_layer_name(int last_heads);
const char *cli_last_layer_text(int last_heads);
/* With --graphs on (in->calib.graphs) and more than one GPU among gpus[0..n) (not virtual ranks):
 * the line that says unpad-train launches graphs on several GPUs only with --bucket-mb 0. */
void cli_graphs_note(FILE *f, const resolve_inputs *in, const int *gpus, int n, int virtual_ranks);
/* Refuses (prints why, returns 1) --fp8 on for hardware whose spec has no FP8 tensor cores. */
int cli_check_fp8(const char *cmd, int fp8, const resolve_inputs *in);

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
