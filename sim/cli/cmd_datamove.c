/* cmd_datamove.c — `unpad datamove`: data movement of every operator and class, and what fusion
 * saves, for a batch of B sequences of length S. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cost.h"
#include "prov.h"
#include "resolve.h"

const char cmd_datamove_what[] = "data movement per operator and class, fused against unfused";

static void usage(FILE *f)
{
    fprintf(f, "usage: unpad datamove [--model F] [--hw F] [--calib F | --no-calib] [--batch B] [--seq S]\n"
               "                      [--json F]\n"
               "  --model F   model config (default models/bert-large.cfg)\n"
               "  --hw F      hardware spec for predicted times (default models/hw/h200-sxm.cfg)\n"
               "  --calib F   fitted coefficients (default: models/calib/<hw>.cfg if it exists)\n"
               "  --no-calib  the uncalibrated default coefficients instead\n"
               "  --batch B   sequences (default 56)\n"
               "  --seq S     length of every sequence (default 512)\n"
               "  --json F    also write the tables as JSON (docs/json.md); F '-': only the JSON, on\n"
               "              standard output\n");
}

int cmd_datamove(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"hw", required_argument, 0, 'w'},
        {"calib", required_argument, 0, 'c'}, {"no-calib", no_argument, 0, 'N'}, {"batch", required_argument, 0, 'b'},
        {"seq", required_argument, 0, 's'},   {"json", required_argument, 0, 'j'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    resolve_req rq = {0};
    resolve_inputs in;
    memset(&in, 0, sizeof in);
    int batch = 56, seq = 512, c;
    const char *json = NULL;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'm': rq.model = optarg; break;
        case 'w': rq.hw = optarg; break;
        case 'c': rq.calib = optarg; break;
        case 'N': rq.no_calib = 1; break;
        case 'b': if (cli_int("datamove", "--batch", optarg, 1, 4096, &batch)) return 2; break;
        case 's': if (cli_int("datamove", "--seq", optarg, 1, 8192, &seq)) return 2; break;
        case 'j': json = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "unpad datamove: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    const char *outs[1] = {json && strcmp(json, "-") ? json : NULL};
    if (cli_inputs_load("datamove", &rq, &in, 0) || cli_check_outputs("datamove", &in, NULL, 0, outs, 1))
        return 1;
    if (seq > in.model.max_len) {
        fprintf(stderr, "unpad datamove: --seq %d exceeds the model's max_len %d (%s)\n", seq,
                in.model.max_len, in.model_path);
        return 2;
    }
    int *len = malloc(sizeof *len * (size_t)batch);
    if (!len)
        return 1;
    for (int i = 0; i < batch; i++)
        len[i] = seq;
    unpad_err err = {0};
    cost_step fu, un;
    op_batch bf = {.len = len, .n = batch, .fused = 1, .gpus = 1, .dropout = 1};
    op_batch bu = bf;
    bu.fused = 0;
    if (cost_predict_step(&in.model, &in.hw, &in.calib, &bf, &fu, &err) ||
        cost_predict_step(&in.model, &in.hw, &in.calib, &bu, &un, &err)) {
        free(len);
        return cli_error("datamove", &err);
    }
    cli_prov prov;
    cli_prov_init(&prov, argc, argv);
    cli_prov_inputs(&prov, &in, 0);
    cli_json j = {0};
    json_w *w = &j.w;
    if (json) {
        if (cli_json_open("datamove", json, &prov, &j)) {
            free(len);
            return 1;
        }
        json_obj(w, "config");
        json_int(w, "batch", batch);
        json_int(w, "seq_len", seq);
        json_end(w);
        json_arr(w, "operators");
    }
    printf("unpad datamove: %s, %d sequences x %d tokens, one training step on %s\n",
           in.model.name, batch, seq, in.hw.name);
    cli_prov_print(stdout, &prov);
    printf("\n");
    printf("%-14s %-13s %10s %11s %11s %8s %10s %10s\n", "operator", "class", "GFLOP",
           "fused_MB", "unfused_MB", "saved", "fused_us", "unfused_us");
    double cf[OPC_COUNT] = {0}, cb[OPC_COUNT] = {0}, cbu[OPC_COUNT] = {0}, ct[OPC_COUNT] = {0},
           ctu[OPC_COUNT] = {0};
    double tf = 0, tb = 0, tbu = 0, tt = 0, ttu = 0;
    for (int i = 0; i < OP_COUNT; i++) {
        const op_cost *o = &fu.ops[i];
        if (i == OP_ALLREDUCE || i == OP_EXCHANGE)
            continue;
        double k = o->instances;
        double bfu = k * o->bytes_fused, bun = k * o->bytes_unfused;
        double t1 = k * fu.time_us[i], t2 = k * un.time_us[i];
        printf("%-14s %-13s %10.2f %11.1f %11.1f %7.1f%% %10.1f %10.1f\n", op_name((op_id)i),
               op_class_name(op_class_of((op_id)i)), k * o->flops / 1e9, bfu / 1e6, bun / 1e6,
               bun > 0 ? 100 * (1 - bfu / bun) : 0, t1, t2);
        if (json) {
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
        op_class cl = op_class_of((op_id)i);
        cf[cl] += k * o->flops;
        cb[cl] += bfu;
        cbu[cl] += bun;
        ct[cl] += t1;
        ctu[cl] += t2;
        tf += k * o->flops;
        tb += bfu;
        tbu += bun;
        tt += t1;
        ttu += t2;
    }
    printf("\n%-36s %7s %7s %7s %11s %11s %7s\n", "by class", "%FLOPs", "%bytes", "%time",
           "fused_MB", "unfused_MB", "saved");
    static const char *GROUP[OPC_COUNT] = {
        [OPC_GEMM] = "tensor contraction", [OPC_ATTN] = "tensor contraction",
        [OPC_NORM] = "stat. normalization", [OPC_ELEM] = "element-wise",
        [OPC_OPTIM] = "optimizer", [OPC_COMM] = "communication"};
    if (json) {
        json_end(w);
        json_arr(w, "classes");
    }
    for (int cl = 0; cl < OPC_COUNT; cl++) {
        if (cl == OPC_COMM)
            continue;
        char name[64];
        snprintf(name, sizeof name, "%s (%s)", op_class_name((op_class)cl), GROUP[cl]);
        printf("%-36s %6.1f%% %6.1f%% %6.1f%% %11.1f %11.1f %6.1f%%\n", name, 100 * cf[cl] / tf,
               100 * cb[cl] / tb, 100 * ct[cl] / tt, cb[cl] / 1e6, cbu[cl] / 1e6,
               cbu[cl] > 0 ? 100 * (1 - cb[cl] / cbu[cl]) : 0);
        if (json) {
            json_obj(w, NULL);
            json_str(w, "class", op_class_name((op_class)cl));
            json_str(w, "kind", GROUP[cl]);
            json_num(w, "flop_share", cf[cl] / tf);
            json_num(w, "bytes_share", cb[cl] / tb);
            json_num(w, "time_share", ct[cl] / tt);
            json_num(w, "fused_bytes", cb[cl]);
            json_num(w, "unfused_bytes", cbu[cl]);
            json_num(w, "saved_fraction", cbu[cl] > 0 ? 1 - cb[cl] / cbu[cl] : 0);
            json_end(w);
        }
    }
    printf("\ntotal: %.1f GB fused against %.1f GB unfused (%.1f%% fewer bytes); predicted step %.2f ms "
           "fused, %.2f ms unfused\n", tb / 1e9, tbu / 1e9, 100 * (1 - tb / tbu), tt / 1e3,
           ttu / 1e3);
    int rc = 0;
    if (json) {
        json_end(w);
        json_obj(w, "total");
        json_num(w, "flops", tf);
        json_num(w, "fused_bytes", tb);
        json_num(w, "unfused_bytes", tbu);
        json_num(w, "saved_fraction", 1 - tb / tbu);
        json_num(w, "fused_us", tt);
        json_num(w, "unfused_us", ttu);
        json_end(w);
        rc = cli_json_close("datamove", &j);
        if (!rc && !j.to_stdout)
            printf("wrote %s\n", json);
    }
    free(len);
    resolve_inputs_free(&in);
    return rc;
}
