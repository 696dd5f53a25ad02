/* prov.c — the provenance block of every `unpad` output (prov.h). */
#include "prov.h"

#include <string.h>

#include "cli.h"
#include "version.h"

void cli_prov_init(cli_prov *p, int argc, char **argv)
{
    memset(p, 0, sizeof *p);
    size_t o = (size_t)snprintf(p->command_line, sizeof p->command_line, "unpad");
    for (int i = 0; i < argc && o < sizeof p->command_line; i++) {
        const char *a = argv[i];
        int plain = *a != '\0';
        for (const char *c = a; *c; c++)
            plain &= !strchr(" \t\n'\"\\$`*?;&|<>(){}[]#~", *c);
        if (plain) {
            o += (size_t)snprintf(p->command_line + o, sizeof p->command_line - o, " %s", a);
            continue;
        }
        o += (size_t)snprintf(p->command_line + o, sizeof p->command_line - o, " '");
        for (const char *c = a; *c && o < sizeof p->command_line; c++)
            o += (size_t)snprintf(p->command_line + o, sizeof p->command_line - o,
                                  *c == '\'' ? "'\\''" : "%c", *c);
        if (o < sizeof p->command_line)
            o += (size_t)snprintf(p->command_line + o, sizeof p->command_line - o, "'");
    }
}

void cli_prov_inputs(cli_prov *p, const resolve_inputs *in, int with_dist)
{
    p->model = in->model.name;
    p->model_path = in->model_path;
    p->hw = in->hw.name;
    p->hw_path = in->hw_path;
    p->calibration = calib_source_name(in->calib_from);
    p->calibration_path = in->calib_from != CALIB_DEFAULT ? in->calib_path : NULL;
    cli_calib_label(in, p->calibration_label, sizeof p->calibration_label);
    p->dist_path = with_dist && in->dist_path[0] ? in->dist_path : NULL;
    p->faster = in->calib.faster[0] ? in->calib.faster : NULL;
    p->hw_set = in->hw_set[0] ? in->hw_set : NULL;
    p->graphs = in->calib.graphs ? calib_graphs_label(&in->calib) : NULL;
}

void cli_prov_seed(cli_prov *p, long long seed)
{
    p->seed = seed;
    p->has_seed = 1;
}

void cli_prov_sampled(cli_prov *p, int argc, char **argv, const resolve_inputs *in, long long seed,
                      char *pc, size_t n)
{
    cli_prov_init(p, argc, argv);
    cli_prov_inputs(p, in, 1);
    cli_prov_seed(p, seed);
    cli_prov_comment(p, pc, n);
}

void cli_prov_json(json_w *w, const cli_prov *p)
{
    json_obj(w, "provenance");
    json_str(w, "version", UNPAD_VERSION);
    json_str(w, "commit", unpad_commit());
    json_str(w, "command_line", p->command_line);
    json_str(w, "model", p->model);
    json_str(w, "model_path", p->model_path);
    json_str(w, "hw", p->hw);
    json_str(w, "hw_path", p->hw_path);
    json_str(w, "calibration", p->calibration);
    json_str(w, "calibration_path", p->calibration_path);
    json_str(w, "faster", p->faster);
    json_str(w, "hw_set", p->hw_set);
    json_str(w, "graphs", p->graphs);
    json_str(w, "distribution_path", p->dist_path);
    if (p->has_seed)
        json_int(w, "seed", p->seed);
    else
        json_null(w, "seed");
    json_end(w);
}

void cli_prov_comment(const cli_prov *p, char *buf, size_t n)
{
    size_t o = 0;
#define ADD(...) if (o < n) o += (size_t)snprintf(buf + o, n - o, __VA_ARGS__)
    ADD("# unpad: %s (commit %s)\n", UNPAD_VERSION, unpad_commit());
    ADD("# command: %s\n", p->command_line);
    if (p->model)
        ADD("# model: %s%s%s%s\n", p->model, p->model_path ? " (" : "",
            p->model_path ? p->model_path : "", p->model_path ? ")" : "");
    if (p->hw)
        ADD("# hw: %s (%s)\n", p->hw, p->hw_path ? p->hw_path : "");
    if (p->calibration && p->calibration_label[0] && !strcmp(p->calibration, "transferred")) {
        ADD("# calibration: %s\n", p->calibration_label); /* an estimate, never "calibrated" */
    } else if (p->calibration) {
        ADD("# calibration: %s%s%s%s\n", p->calibration, p->calibration_path ? " (" : "",
            p->calibration_path ? p->calibration_path : "", p->calibration_path ? ")" : "");
    }
    if (p->faster)
        ADD("# what-if: --faster %s (the coefficients scaled: not the calibration's predictions)\n", p->faster);
    if (p->hw_set)
        ADD("# what-if: --hw-set %s (the hardware spec's numbers changed: not the spec as written)\n", p->hw_set);
    if (p->graphs)
        ADD("# CUDA graphs (the trainer's --graphs on): %s\n", p->graphs);
    if (p->dist_path)
        ADD("# distribution: %s\n", p->dist_path);
    if (p->has_seed)
        ADD("# seed: %lld\n", p->seed);
#undef ADD
}

void cli_prov_print(FILE *f, const cli_prov *p)
{
    if (p->model || p->hw) {
        fprintf(f, " ");
        if (p->model)
            fprintf(f, " model %s%s%s%s", p->model, p->model_path ? " (" : "",
                    p->model_path ? p->model_path : "", p->model_path ? ")" : "");
        if (p->hw)
            fprintf(f, "%s hw %s (%s)", p->model ? "," : "", p->hw, p->hw_path);
        fprintf(f, "\n");
    }
    if (p->calibration && p->calibration_label[0] && !strcmp(p->calibration, "transferred"))
        fprintf(f, "  calibration %s\n", p->calibration_label);
    else if (p->calibration)
        fprintf(f, "  calibration %s%s%s%s\n", p->calibration,
                p->calibration_path ? " (" : " (UNCALIBRATED coefficients, fitted to no GPU: on the H100 and H200 "
                "they predict 26-30% more samples/s than the fitted ones; unpad calibrate fits them",
                p->calibration_path ? p->calibration_path : "", ")");
    if (p->faster)
        fprintf(f, "  what-if: --faster %s (the coefficients scaled: not the calibration's predictions)\n",
                p->faster);
    if (p->hw_set)
        fprintf(f, "  what-if: --hw-set %s (the hardware spec's numbers changed: not the spec as written)\n",
                p->hw_set);
    if (p->graphs)
        fprintf(f, "  CUDA graphs (the trainer's --graphs on): %s\n", p->graphs);
    fprintf(f, "  ");
    if (p->dist_path)
        fprintf(f, "lengths %s, ", p->dist_path);
    if (p->has_seed)
        fprintf(f, "seed %lld, ", p->seed);
    fprintf(f, "unpad %s (commit %s)\n", UNPAD_VERSION, unpad_commit());
}
