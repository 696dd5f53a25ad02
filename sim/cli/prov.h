/* prov.h — provenance: what produced an output, written into every output of `unpad` so that a
 * number found later says where it came from. The same fields appear in three forms:
 *
 *   JSON      "provenance": {"version", "commit", "command_line", "model", "model_path", "hw",
 *             "hw_path", "calibration", "calibration_path", "distribution_path", "seed"}
 *             (docs/json.md; a field that does not apply is null)
 *   CSV       `# key: value` comment lines before the header (cli_prov_comment)
 *   text      two indented lines under a table's title (cli_prov_print)
 *
 * calibration is "fitted", "transferred" (carried from other hardware) or "default" (the
 * uncalibrated coefficients; no path). */
#ifndef UNPAD_CLI_PROV_H
#define UNPAD_CLI_PROV_H

#include <stdio.h>

#include "json.h"
#include "resolve.h"

typedef struct {
    char command_line[2048];    /* "unpad whatif --gpus 8,16 ..." (arguments quoted as needed) */
    const char *model, *model_path;        /* NULL: not used by the command */
    const char *hw, *hw_path;
    const char *calibration, *calibration_path;
    char calibration_label[4400]; /* cli_calib_label: text and CSV say "estimate (transferred ...)" */
    const char *faster;         /* what-if speed-ups (--faster), NULL: none */
    const char *hw_set;         /* what-if hardware numbers (--hw-set), NULL: none */
    const char *graphs;         /* --graphs on: calib_graphs_label, NULL: off */
    const char *dist_path;
    long long seed;
    int has_seed;
} cli_prov;

/* The command line (argv[0] is the subcommand's name, as the commands receive it). */
void cli_prov_init(cli_prov *p, int argc, char **argv);
/* The inputs a command loaded (the resolver's paths and calibration source); with_dist 0 leaves
 * the distribution out. */
void cli_prov_inputs(cli_prov *p, const resolve_inputs *in, int with_dist);
void cli_prov_seed(cli_prov *p, long long seed);
/* What a command that samples steps from the distribution records: init, inputs (with the
 * distribution) and seed, and the comment lines into pc (n bytes). */
void cli_prov_sampled(cli_prov *p, int argc, char **argv, const resolve_inputs *in, long long seed,
                      char *pc, size_t n);

/* "provenance": {...} inside the open object. */
void cli_prov_json(json_w *w, const cli_prov *p);
/* The `# key: value` lines (each ending in a newline) into buf. */
void cli_prov_comment(const cli_prov *p, char *buf, size_t n);
/* "  model ... hw ... calibration ...\n  lengths ..., seed ..., unpad 0.1.0 (commit ...)\n" */
void cli_prov_print(FILE *f, const cli_prov *p);

#endif
