/* cmd_plot.c — `unpad plot KIND`: PNG and SVG pictures with gnuplot (plots/<kind>.gp). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "group.h"
#include "resolve.h"
#include "plot.h"
#include "prov.h"

const char cmd_plot_what[] = "pictures (PNG + SVG, gnuplot): hist, load, imbalance, groups";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: unpad plot KIND [options] [--out PREFIX]\n"
            "  hist       length histogram           [--dist F]\n"
            "  load       per-GPU predicted step time on one sampled step, one bar per policy\n"
            "             [--dist F] [--model F] [--hw F] [--calib F | --no-calib] [--gpus N] [--batch B]\n"
            "             [--count equal|free] [--seed S] [--tokens]\n"
            "  imbalance  imbalance against GPU count and batch size, from a what-if CSV\n"
            "             --csv F [--batch B] [--gpus N]  (fixed value of each panel; default: the\n"
            "             value with the most points)\n"
            "  groups     FMHA grouping of one GPU's batch as a timeline over streams, against one\n"
            "             launch and the 128/256/384/512 buckets\n"
            "             [--dist F] [--model F] [--hw F] [--calib F | --no-calib] [--batch B] [--seed S]\n"
            "             [--lengths L1,L2,...] [--streams S] [--granularity G]\n"
            "  --out PREFIX  writes PREFIX.png, PREFIX.svg and the data as PREFIX.csv\n"
            "                (default unpad-KIND)\n"
            "  --plots DIR   the gnuplot scripts (default plots/ of the project)\n"
            "Defaults: --dist models/dists/wiki512.csv --model models/bert-large.cfg\n"
            "          --hw models/hw/h200-sxm.cfg --gpus 8 --batch 56 --count equal --seed 1\n"
            "Needs the gnuplot program (sudo apt-get install gnuplot-nox).\n");
}

int cmd_plot(int argc, char **argv)
{
    static const struct option opts[] = {
        {"dist", required_argument, 0, 'd'},    {"model", required_argument, 0, 'm'},
        {"hw", required_argument, 0, 'w'},      {"calib", required_argument, 0, 'c'}, {"no-calib", no_argument, 0, 'N'},
        {"gpus", required_argument, 0, 'g'},    {"batch", required_argument, 0, 'b'},
        {"count", required_argument, 0, 'n'},   {"seed", required_argument, 0, 's'},
        {"tokens", no_argument, 0, 'T'},        {"csv", required_argument, 0, 'v'},
        {"lengths", required_argument, 0, 'l'}, {"streams", required_argument, 0, 'S'},
        {"granularity", required_argument, 0, 'G'}, {"out", required_argument, 0, 'o'},
        {"plots", required_argument, 0, 'P'},   {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *kind = argv[1];
    int k = !strcmp(kind, "hist") ? 0 : !strcmp(kind, "load") ? 1 : !strcmp(kind, "imbalance") ? 2
          : !strcmp(kind, "groups") ? 3 : -1;
    if (k < 0) {
        fprintf(stderr, "unpad plot: unknown kind '%s' (expected hist, load, imbalance or groups)\n",
                kind);
        return 2;
    }
    resolve_req rq = {0};
    resolve_inputs in;
    memset(&in, 0, sizeof in);
    int gpus = 0, batch = 0, seed = 1, tokens = 0, streams = 4, gran = 1, c, rc = 2, *lens = NULL,
        nl = 0;
    balance_count count = BAL_EQUAL;
    const char *csv = NULL, *out = NULL, *plots = NULL;
    char obuf[256], pbuf[4096];
    optind = 2;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'd': rq.dist = optarg; break;
        case 'm': rq.model = optarg; break;
        case 'w': rq.hw = optarg; break;
        case 'c': rq.calib = optarg; break;
        case 'N': rq.no_calib = 1; break;
        case 'g': if (cli_int("plot", "--gpus", optarg, 1, 65536, &gpus)) goto out; break;
        case 'b': if (cli_int("plot", "--batch", optarg, 1, 65536, &batch)) goto out; break;
        case 'n': {
            int v = balance_count_from_name(optarg);
            if (v < 0) {
                fprintf(stderr, "unpad plot: --count: unknown '%s' (expected equal or free)\n",
                        optarg);
                goto out;
            }
            count = v;
            break;
        }
        case 's': if (cli_int("plot", "--seed", optarg, 0, 2147483647, &seed)) goto out; break;
        case 'T': tokens = 1; break;
        case 'v': csv = optarg; break;
        case 'l':
            free(lens);
            if (cli_int_list("plot", "--lengths", optarg, 1, 1 << 20, &lens, &nl))
                goto out;
            break;
        case 'S':
            if (cli_int("plot", "--streams", optarg, 1, GROUP_MAX_STREAMS, &streams))
                goto out;
            break;
        case 'G': if (cli_int("plot", "--granularity", optarg, 1, 65536, &gran)) goto out; break;
        case 'o': out = optarg; break;
        case 'P': plots = optarg; break;
        case 'h': usage(stdout); rc = 0; goto out;
        default: usage(stderr); goto out;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "unpad plot: unexpected argument '%s'\n", argv[optind]);
        goto out;
    }
    if (k == 2 && !csv) {
        fprintf(stderr, "unpad plot imbalance: --csv F is required (a CSV from `unpad whatif --csv F`)\n");
        goto out;
    }
    if (k != 2 && csv) {
        fprintf(stderr, "unpad plot %s: --csv is for the imbalance plot\n", kind);
        goto out;
    }
    if (k != 3 && lens) {
        fprintf(stderr, "unpad plot %s: --lengths is for the groups plot\n", kind);
        goto out;
    }
    if (k == 1 && gpus && batch && (long)gpus * batch > (1L << 22)) {
        fprintf(stderr, "unpad plot load: %d GPUs x %d sequences is over 4,194,304\n", gpus, batch);
        goto out;
    }
    rc = 1;
    unpad_err err = {0};
    char gp[4096];
    if (plot_gnuplot_find(gp, sizeof gp, &err)) {
        cli_error("plot", &err);
        goto out;
    }
    if (!out) {
        snprintf(obuf, sizeof obuf, "unpad-%s", kind);
        out = obuf;
    }
    if (!plots) {
        if (cli_project_path("plot", "plots", pbuf, sizeof pbuf))
            goto out;
        plots = pbuf;
    }
    /* Before any work: none of the outputs (PREFIX.png, .svg, and .csv, -gpus.csv or -batch.csv
     * by kind) over an input. */
    char outs[5][4200];
    const char *outp[5];
    static const char *const ext[5] = {".png", ".svg", ".csv", "-gpus.csv", "-batch.csv"};
    for (int i = 0; i < 5; i++) {
        snprintf(outs[i], sizeof outs[i], "%s%s", out, ext[i]);
        int used = i < 2 || (i == 2 && k != 2) || (i == 3 && (k == 1 || k == 2)) || (i == 4 && k == 2);
        outp[i] = used ? outs[i] : NULL;
    }
    if (k != 2 && cli_inputs_load("plot", &rq, &in, !(k == 3 && lens)))
        goto out;
    if (cli_check_outputs("plot", k == 2 ? NULL : &in, &csv, 1, outp, 5))
        goto out;
    cli_prov prov;
    char pc[8192];
    cli_prov_init(&prov, argc, argv);
    if (k == 2) {
        cli_prov_comment(&prov, pc, sizeof pc);
        if (plot_imbalance(plots, csv, batch, gpus, pc, out, &err)) {
            cli_error("plot", &err);
            goto out;
        }
    } else {
        cli_prov_inputs(&prov, &in, !(k == 3 && lens));
        if (k == 0) /* the histogram uses only the distribution */
            prov.model = prov.hw = prov.calibration = NULL;
        if (k != 0 && !(k == 3 && lens))
            cli_prov_seed(&prov, seed);
        cli_prov_comment(&prov, pc, sizeof pc);
        if (k == 0 && plot_hist(plots, &in.dist, pc, out, &err)) {
            cli_error("plot", &err);
            goto out;
        }
        if (k == 1) {
            plot_load_setup ls = {&in.dist, &in.model, &in.hw, &in.calib, gpus ? gpus : 8,
                                  batch ? batch : 56, count, (uint64_t)seed, tokens, pc};
            if (plot_load(plots, &ls, out, &err)) {
                cli_error("plot", &err);
                goto out;
            }
        }
        if (k == 3) {
            char what[512];
            if (!lens) {
                nl = batch ? batch : 56;
                dist_sampler *smp;
                if (!(lens = malloc((size_t)nl * sizeof *lens)) ||
                    dist_sampler_alloc(&in.dist, (uint64_t)seed, &smp, &err)) {
                    fprintf(stderr, "unpad plot: %s\n", lens ? err.msg : "out of memory");
                    goto out;
                }
                dist_sample(smp, lens, nl);
                dist_sampler_free(smp);
                const char *base = strrchr(in.dist_path, '/');
                snprintf(what, sizeof what, "sampled from %.400s, seed %d", base ? base + 1 : in.dist_path,
                         seed);
            } else {
                snprintf(what, sizeof what, "given lengths");
            }
            for (int i = 0; i < nl; i++)
                if (lens[i] > in.model.max_len) {
                    fprintf(stderr, "unpad plot groups: --lengths: %d is over the model's max_len %d\n",
                            lens[i], in.model.max_len);
                    goto out;
                }
            plot_groups_setup gs = {&in.model, &in.hw, &in.calib, lens, nl, streams, gran, what, pc};
            if (plot_groups(plots, &gs, out, &err)) {
                cli_error("plot", &err);
                goto out;
            }
        }
    }
    printf("unpad plot %s: wrote %s.png, %s.svg and the data %s%s\n", kind, out, out, out,
           k == 2 ? "-gpus.csv, -batch.csv" : k == 1 ? ".csv, -gpus.csv" : ".csv");
    rc = 0;
out:
    free(lens);
    resolve_inputs_free(&in);
    return rc;
}
