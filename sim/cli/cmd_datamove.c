/* cmd_datamove.c — `unpad datamove`: data movement of every operator and class, and what fusion
 * saves, for a batch of B sequences of length S. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cost.h"
#include "opts.h"
#include "prov.h"
#include "resolve.h"

const char cmd_datamove_what[] = "data movement per operator and class, fused against unfused";

static void usage(FILE *f)
{
    fprintf(f, "usage: unpad datamove [--model F] [--hw F] [--calib F | --no-calib] [--batch B] [--seq S]\n"
               "                      [--last-layer heads|all] [--json F]\n"
               "  --model F   model config, or a name in models/ (default bert-large)\n"
               "  --hw F      hardware spec, or a name in models/hw/ (default h200-sxm)\n"
               "  --calib F   fitted coefficients, or a name in models/calib/ (default: <hw> if it exists)\n"
               "  --no-calib  the uncalibrated default coefficients instead\n"
               "  --faster L  what-if: make operators or classes F times as fast, L = NAME=F,...\n"
               "              (fmha_bwd=1.3, gemm=1.1, overhead=2; docs/planning.md)\n"
               "  --hw-set L  what-if: the hardware spec's numbers, L = KEY=VALUE,...\n"
               "              (gpus_per_node=4,node_bw_gbs=25: the keys of models/hw/*.cfg)\n"
               "  --batch B   sequences (default 56)\n"
               "  --seq S     length of every sequence (default 512)\n"
               "  --last-layer heads|all  the trainer's --last-layer: heads (the default) runs the last\n"
               "              layer after its attention on the rows the heads read only; all: every token\n"
               "  --json F    also write the tables as JSON (docs/json.md); F '-': only the JSON, on\n"
               "              standard output\n");
}

/* The sums over a class of operators, or over the step. */
typedef struct {
    double flops, bytes, bytes_unfused, us, us_unfused;
} move_sum;

/* The operator table (and its JSON array when w), summed into cls and tot. */
static void datamove_ops(json_w *w, const cost_step *fu, const cost_step *un, move_sum *cls, move_sum *tot)
{
    printf("%-14s %-13s %10s %11s %11s %8s %10s %10s\n", "operator", "class", "GFLOP",
           "fused_MB", "unfused_MB", "saved", "fused_us", "unfused_us");
    if (w)
        json_arr(w, "operators");
    for (int i = 0; i < OP_COUNT; i++) {
        const op_cost *o = &fu->ops[i];
        if (i == OP_ALLREDUCE || i == OP_EXCHANGE)
            continue;
        double k = o->instances;
        double bfu = k * o->bytes_fused, bun = k * o->bytes_unfused;
        double t1 = k * fu->time_us[i], t2 = k * un->time_us[i];
        printf("%-14s %-13s %10.2f %11.1f %11.1f %7.1f%% %10.1f %10.1f\n", op_name((op_id)i),
               op_class_name(op_class_of((op_id)i)), k * o->flops / 1e9, bfu / 1e6, bun / 1e6,
               bun > 0 ? 100 * (1 - bfu / bun) : 0, t1, t2);
        if (w) {
            json_obj(w, NULL);
            json_str(w, "name", op_name((op_id)i));
            json_str(w, "class", op_class_name(op_class_of((op_id)i)));
            json_int(w, "instances", o->instances);
            json_num(w, "flops", k * o->flops);
            json_num(w, "fused_bytes", bfu);
            json_num(w, "unfused_bytes", bun);
            json_num(w, "saved_fraction", bun > 0 ? 1 - bfu / bun : 0);
            json_num(w, "fused_us", t1);
            json_num(w, "unfused_us", t2);
            json_end(w);
        }
        move_sum *sums[2] = {&cls[op_class_of((op_id)i)], tot};
        for (int j = 0; j < 2; j++) {
            sums[j]->flops += k * o->flops;
            sums[j]->bytes += bfu;
            sums[j]->bytes_unfused += bun;
            sums[j]->us += t1;
            sums[j]->us_unfused += t2;
        }
    }
    if (w)
        json_end(w);
}

/* The table by class, and the total line (and their JSON when w). */
static void datamove_classes(json_w *w, const move_sum *cls, const move_sum *tot)
{
    printf("\n%-36s %7s %7s %7s %11s %11s %7s\n", "by class", "%FLOPs", "%bytes", "%time",
           "fused_MB", "unfused_MB", "saved");
    static const char *GROUP[OPC_COUNT] = {
        [OPC_GEMM] = "tensor contraction", [OPC_ATTN] = "tensor contraction",
        [OPC_NORM] = "stat. normalization", [OPC_ELEM] = "element-wise",
        [OPC_OPTIM] = "optimizer", [OPC_COMM] = "communication"};
    if (w)
        json_arr(w, "classes");
    for (int cl = 0; cl < OPC_COUNT; cl++) {
        if (cl == OPC_COMM)
            continue;
        const move_sum *c = &cls[cl];
        char name[64];
        snprintf(name, sizeof name, "%s (%s)", op_class_name((op_class)cl), GROUP[cl]);
        printf("%-36s %6.1f%% %6.1f%% %6.1f%% %11.1f %11.1f %6.1f%%\n", name, 100 * c->flops / tot->flops,
               100 * c->bytes / tot->bytes, 100 * c->us / tot->us, c->bytes / 1e6, c->bytes_unfused / 1e6,
               c->bytes_unfused > 0 ? 100 * (1 - c->bytes / c->bytes_unfused) : 0);
        if (w) {
            json_obj(w, NULL);
            json_str(w, "class", op_class_name((op_class)cl));
            json_str(w, "kind", GROUP[cl]);
            json_num(w, "flop_share", c->flops / tot->flops);
            json_num(w, "bytes_share", c->bytes / tot->bytes);
            json_num(w, "time_share", c->us / tot->us);
            json_num(w, "fused_bytes", c->bytes);
            json_num(w, "unfused_bytes", c->bytes_unfused);
            json_num(w, "saved_fraction", c->bytes_unfused > 0 ? 1 - c->bytes / c->bytes_unfused : 0);
            json_end(w);
        }
    }
    if (w)
        json_end(w);
    printf("\ntotal: %.1f GB fused against %.1f GB unfused (%.1f%% fewer bytes); the operators' predicted time "
           "%.2f ms fused, %.2f ms unfused (unpad predict's step adds the step overhead and the host's wait)\n", tot->bytes / 1e9, tot->bytes_unfused / 1e9,
           100 * (1 - tot->bytes / tot->bytes_unfused), tot->us / 1e3, tot->us_unfused / 1e3);
    if (w) {
        json_obj(w, "total");
        json_num(w, "flops", tot->flops);
        json_num(w, "fused_bytes", tot->bytes);
        json_num(w, "unfused_bytes", tot->bytes_unfused);
        json_num(w, "saved_fraction", 1 - tot->bytes / tot->bytes_unfused);
        json_num(w, "fused_us", tot->us);
        json_num(w, "unfused_us", tot->us_unfused);
        json_end(w);
    }
}

/* The step of batch sequences of length seq, fused and unfused. */
static int datamove_predict(const resolve_inputs *in, int batch, int seq, int last_heads, cost_step *fu,
                            cost_step *un)
{
    int *len = malloc(sizeof *len * (size_t)batch);
    if (!len)
        return 1;
    for (int i = 0; i < batch; i++)
        len[i] = seq;
    unpad_err err = {0};
    op_batch bf = {.len = len, .n = batch, .fused = 1, .gpus = 1, .dropout = 1, .last_heads = last_heads};
    op_batch bu = bf;
    bu.fused = 0;
    int rc = cost_predict_step(&in->model, &in->hw, &in->calib, &bf, fu, &err) ||
             cost_predict_step(&in->model, &in->hw, &in->calib, &bu, un, &err);
    free(len);
    return rc ? cli_error("datamove", &err) : 0;
}

int cmd_datamove(int argc, char **argv)
{
    resolve_req rq = {0};
    int batch = 56, seq = 512, last_heads = 1;
    const char *json = NULL;
    const cli_opt opts[] = {CLI_OPT_MODEL(&rq), CLI_OPT_HW(&rq), CLI_OPTS_CALIB(&rq),
                            CLI_OPT_INT("batch", &batch, 1, 65536), CLI_OPT_INT("seq", &seq, 1, 8192),
                            CLI_OPT_OUT("json", &json), CLI_OPT_LAST_LAYER(&last_heads)};
    int rc = cli_opts_parse("datamove", argc, argv, 1, opts, CLI_NOPTS(opts), usage, NULL);
    if (rc >= 0)
        return rc;
    resolve_inputs in;
    memset(&in, 0, sizeof in);
    const char *outs[1] = {json && strcmp(json, "-") ? json : NULL};
    if (cli_inputs_load("datamove", &rq, &in, 0) || cli_check_outputs("datamove", &in, NULL, 0, outs, 1))
        return 1;
    if (seq > in.model.max_len) {
        fprintf(stderr, "unpad datamove: --seq %d exceeds the model's max_len %d (%s)\n", seq,
                in.model.max_len, in.model_path);
        return 2;
    }
    cost_step fu, un;
    if (datamove_predict(&in, batch, seq, last_heads, &fu, &un))
        return 1;
    cli_prov prov;
    cli_prov_init(&prov, argc, argv);
    cli_prov_inputs(&prov, &in, 0);
    cli_json j = {0};
    json_w *w = json ? &j.w : NULL;
    if (json) {
        if (cli_json_open("datamove", json, &prov, &j))
            return 1;
        json_obj(w, "config");
        json_int(w, "batch", batch);
        json_int(w, "seq_len", seq);
        json_str(w, "last_layer", cli_last_layer_name(last_heads));
        json_end(w);
    }
    printf("unpad datamove: %s, %d sequences x %d tokens, one training step on %s; %s\n",
           in.model.name, batch, seq, in.hw.name, cli_last_layer_text(last_heads));
    cli_prov_print(stdout, &prov);
    printf("\n");
    move_sum cls[OPC_COUNT] = {{0}}, tot = {0};
    datamove_ops(w, &fu, &un, cls, &tot);
    datamove_classes(w, cls, &tot);
    rc = 0;
    if (json) {
        rc = cli_json_close("datamove", &j);
        if (!rc && !j.to_stdout)
            printf("wrote %s\n", json);
    }
    resolve_inputs_free(&in);
    return rc;
}
