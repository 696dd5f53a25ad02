/* cmd_plot.c — `unpad plot KIND`: PNG and SVG pictures with gnuplot (plots/<kind>.gp). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <errno.h>
#include <unistd.h>

#include "cli.h"
#include "opts.h"
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
            "             [--dist F] [--model F] [--hw F] [--calib F | --no-calib] [--faster L] [--gpus N]\n"
            "             [--batch B] [--count equal|free] [--seed S] [--tokens] [--hw-set L]\n"
            "             [--graphs on|off] [--last-layer heads|all]\n"
            "  imbalance  imbalance against GPU count and batch size, from a what-if CSV\n"
            "             --csv F [--batch B] [--gpus N]  (fixed value of each panel; default: the\n"
            "             value with the most points) [--layout NAME] [--accum K]  (the rows of one\n"
            "             layout and accumulation, where the CSV sweeps them)\n"
            "  groups     FMHA grouping of one GPU's batch as a timeline over streams, against one\n"
            "             launch and the 128/256/384/512 buckets\n"
            "             [--dist F] [--model F] [--hw F] [--calib F | --no-calib] [--faster L] [--batch B]\n"
            "             [--seed S] [--lengths L1,L2,...] [--streams S] [--granularity G] [--hw-set L]\n"
            "             [--graphs on|off]\n"
            "  --out PREFIX  writes PREFIX.png, PREFIX.svg and the data: PREFIX.csv (hist, groups),\n"
            "                PREFIX.csv and PREFIX-gpus.csv (load), PREFIX-gpus.csv and PREFIX-batch.csv\n"
            "                (imbalance)\n"
            "                (default unpad-KIND; --out x.png or x.svg is the prefix x; x.pdf, x.csv:\n"
            "                refused, since plot does not write them)\n"
            "  --plots DIR   the gnuplot scripts (default plots/ of the project)\n"
            "  --faster L, --hw-set L  what-ifs over the coefficients and the hardware spec's numbers\n"
            "                (unpad whatif --help)\n"
            "  --graphs on|off  the trainer's --graphs on: its launches and no wait for the host\n"
            "  --last-layer heads|all  (load) the trainer's --last-layer: heads (the default), the last\n"
            "                layer after its attention on the rows the heads read only; all: every token\n"
            "Defaults: --dist models/dists/wiki512.csv --model models/bert-large.cfg\n"
            "          --hw models/hw/h200-sxm.cfg --gpus 8 --batch 56 --count equal --seed 1\n"
            "Needs the gnuplot program (sudo apt-get install gnuplot-nox).\n");
}

enum { PLOT_HIST, PLOT_LOAD, PLOT_IMBALANCE, PLOT_GROUPS };

/* The flags (0 for --gpus and --batch: not given). */
typedef struct {
    const char *kind;
    int k;                 /* PLOT_* */
    resolve_req rq;
    int gpus, batch, seed, tokens, streams, gran;
    cli_ints lens;         /* --lengths */
    balance_count count;
    const char *csv, *out, *plots;
    const char *layout;    /* imbalance: the rows of this layout */
    int accum;             /* imbalance: the rows of this accumulation (0: any) */
    int last_heads;        /* load: --last-layer heads (1, the default) | all (0); -1: not given */
    char outs[5][4200];    /* the files this kind writes (""), and whether each was there before */
    int existed[5];
} plot_opts;

/* The kind, the flags, and the flags that do not go with the kind refused. */
static int plot_parse(int argc, char **argv, plot_opts *o)
{
    memset(o, 0, sizeof *o);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *kind = o->kind = argv[1];
    o->k = !strcmp(kind, "hist") ? PLOT_HIST : !strcmp(kind, "load") ? PLOT_LOAD
         : !strcmp(kind, "imbalance") ? PLOT_IMBALANCE : !strcmp(kind, "groups") ? PLOT_GROUPS : -1;
    if (o->k < 0) {
        fprintf(stderr, "unpad plot: unknown kind '%s' (expected hist, load, imbalance or groups)\n", kind);
        return 2;
    }
    o->seed = 1;
    o->streams = 4;
    o->gran = 1;
    o->count = BAL_EQUAL;
    o->last_heads = -1;
    const cli_opt opts[] = {
        CLI_OPTS_INPUTS(&o->rq),
        CLI_OPT_CALL("graphs", cli_parse_on_off, &o->rq.graphs),
        CLI_OPT_INT("gpus", &o->gpus, 1, 65536),
        CLI_OPT_INT("batch", &o->batch, 1, 65536),
        CLI_OPT_CALL("count", cli_parse_count, &o->count),
        CLI_OPT_SEED(&o->seed),
        CLI_OPT_FLAG("tokens", &o->tokens),
        CLI_OPT_STR("csv", &o->csv),
        CLI_OPT_INTS("lengths", &o->lens, 1, 1 << 20),
        CLI_OPT_INT("streams", &o->streams, 1, GROUP_MAX_STREAMS),
        CLI_OPT_INT("granularity", &o->gran, 1, 65536),
        CLI_OPT_OUT_FILE("out", &o->out, "OUT names the files written (OUT.png, OUT.svg and the data OUT.csv)"),
        CLI_OPT_STR("plots", &o->plots),
        CLI_OPT_STR("layout", &o->layout),
        CLI_OPT_INT("accum", &o->accum, 1, WHATIF_ACCUM_MAX),
        CLI_OPT_LAST_LAYER(&o->last_heads),
    };
    int rc = cli_opts_parse("plot", argc, argv, 2, opts, CLI_NOPTS(opts), usage, NULL);
    if (rc >= 0)
        return rc;
    if (o->k == PLOT_IMBALANCE && !o->csv) {
        fprintf(stderr, "unpad plot imbalance: --csv F is required (a CSV from `unpad whatif --csv F`)\n");
        return 2;
    }
    if (o->k != PLOT_IMBALANCE && (o->csv || o->layout || o->accum)) {
        fprintf(stderr, "unpad plot %s: --%s is for the imbalance plot\n", kind,
                o->csv ? "csv" : o->layout ? "layout" : "accum");
        return 2;
    }
    if (o->k != PLOT_GROUPS && o->lens.v) {
        fprintf(stderr, "unpad plot %s: --lengths is for the groups plot\n", kind);
        return 2;
    }
    if (o->k != PLOT_LOAD && o->last_heads >= 0) {
        fprintf(stderr, "unpad plot %s: --last-layer is for the load plot (the only one that times the layers "
                        "after the attention)\n", kind);
        return 2;
    }
    if (o->last_heads < 0)
        o->last_heads = 1;
    if (o->k == PLOT_LOAD && o->gpus && o->batch && (long)o->gpus * o->batch > (1L << 22)) {
        fprintf(stderr, "unpad plot load: %d GPUs x %d sequences is over 4,194,304\n", o->gpus, o->batch);
        return 2;
    }
    return -1;
}

/* The groups plot's lengths: --lengths, else a batch sampled from the distribution (what: how
 * they were got, for the title). */
static int groups_lengths(plot_opts *o, const resolve_inputs *in, char *what, size_t n)
{
    if (o->lens.v) {
        snprintf(what, n, "given lengths");
    } else {
        unpad_err err = {0};
        int nl = o->batch ? o->batch : 56;
        dist_sampler *smp;
        if (!(o->lens.v = malloc((size_t)nl * sizeof *o->lens.v)) ||
            dist_sampler_alloc(&in->dist, (uint64_t)o->seed, &smp, &err)) {
            fprintf(stderr, "unpad plot: %s\n", o->lens.v ? err.msg : "out of memory");
            return 1;
        }
        o->lens.n = nl;
        dist_sample(smp, o->lens.v, nl);
        dist_sampler_free(smp);
        const char *base = strrchr(in->dist_path, '/');
        snprintf(what, n, "sampled from %.400s, seed %d", base ? base + 1 : in->dist_path, o->seed);
    }
    for (int i = 0; i < o->lens.n; i++)
        if (o->lens.v[i] > in->model.max_len) {
            fprintf(stderr, "unpad plot groups: --lengths: %d is over the model's max_len %d\n", o->lens.v[i],
                    in->model.max_len);
            return 1;
        }
    return 0;
}

/* Draws the kind asked into o->out (.png, .svg, the data CSVs). */
static int plot_draw(plot_opts *o, const resolve_inputs *in, int argc, char **argv)
{
    unpad_err err = {0};
    cli_prov prov;
    char pc[8192];
    int given = o->k == PLOT_GROUPS && o->lens.v; /* the groups of given lengths: no distribution */
    cli_prov_init(&prov, argc, argv);
    if (o->k == PLOT_IMBALANCE) {
        cli_prov_comment(&prov, pc, sizeof pc);
        return plot_imbalance(o->plots, o->csv, o->batch, o->gpus, o->layout, o->accum, pc, o->out, &err)
                   ? cli_error("plot", &err)
                   : 0;
    }
    cli_prov_inputs(&prov, in, !given);
    if (o->k == PLOT_HIST) /* the histogram uses only the distribution */
        prov.model = prov.hw = prov.calibration = NULL;
    if (o->k != PLOT_HIST && !given)
        cli_prov_seed(&prov, o->seed);
    cli_prov_comment(&prov, pc, sizeof pc);
    int rc = 0;
    if (o->k == PLOT_HIST)
        rc = plot_hist(o->plots, &in->dist, pc, o->out, &err);
    if (o->k == PLOT_LOAD) {
        plot_load_setup ls = {&in->dist, &in->model, &in->hw, &in->calib, o->gpus ? o->gpus : 8,
                              o->batch ? o->batch : 56, o->count, (uint64_t)o->seed, o->tokens, pc,
                              in->hw_set[0] ? in->hw_set : NULL, o->last_heads};
        rc = plot_load(o->plots, &ls, o->out, &err);
    }
    if (o->k == PLOT_GROUPS) {
        char what[512];
        if (groups_lengths(o, in, what, sizeof what))
            return 1;
        plot_groups_setup gs = {&in->model, &in->hw, &in->calib, o->lens.v, o->lens.n, o->streams, o->gran,
                                what, pc, in->hw_set[0] ? in->hw_set : NULL};
        rc = plot_groups(o->plots, &gs, o->out, &err);
    }
    return rc ? cli_error("plot", &err) : 0;
}

/* gnuplot, the output prefix and the scripts' folder found; the inputs loaded; no output over
 * an input. */
static int plot_prepare(plot_opts *o, resolve_inputs *in, char *obuf, size_t on, char *pbuf, size_t pn)
{
    unpad_err err = {0};
    char gp[4096];
    if (plot_gnuplot_find(gp, sizeof gp, &err))
        return cli_error("plot", &err);
    if (!o->out) {
        snprintf(obuf, on, "unpad-%s", o->kind);
        o->out = obuf;
    }
    size_t ol = strlen(o->out);
    if (ol > 4 && (!strcmp(o->out + ol - 4, ".png") || !strcmp(o->out + ol - 4, ".svg"))) {
        /* "x.png" means the picture x.png, not x.png.png: the prefix without its extension */
        if (ol - 4 >= on) {
            fprintf(stderr, "unpad plot: --out '%s': the name is too long\n", o->out);
            return 2;
        }
        memcpy(obuf, o->out, ol - 4);
        obuf[ol - 4] = 0;
        o->out = obuf;
        ol -= 4;
    }
    const char *dot = strrchr(o->out, '.');
    static const char *const not_written[] = {".pdf", ".csv", ".jpg", ".jpeg", ".eps"};
    int refused = 0;
    for (size_t i = 0; dot && !strchr(dot, '/') && i < sizeof not_written / sizeof *not_written; i++)
        refused |= !strcasecmp(dot, not_written[i]);
    if (refused) {
        /* a picture or data name plot does not write: x.pdf would give x.pdf.png and x.pdf.svg */
        fprintf(stderr, "unpad plot: --out '%s': plot writes PREFIX.png, PREFIX.svg and the data PREFIX.csv; give "
                        "the prefix (%.*s) or a .png / .svg name\n", o->out, (int)(dot - o->out), o->out);
        return 2;
    }
    if (!ol || o->out[ol - 1] == '/') { /* "dir/": files named .png, .svg, .csv in it */
        fprintf(stderr, "unpad plot: --out '%s': a prefix of file names is needed (e.g. %sunpad-%s)\n",
                o->out, o->out, o->kind);
        return 2;
    }
    if (!o->plots) {
        if (cli_project_path("plot", "plots", pbuf, pn))
            return 1;
        o->plots = pbuf;
    }
    char script[4200];
    snprintf(script, sizeof script, "%s/%s.gp", o->plots, o->kind);
    if (access(script, R_OK) != 0) {
        fprintf(stderr, "unpad plot: %s: cannot read the gnuplot script (%s): refused before any work\n", script,
                strerror(errno));
        return 1;
    }
    /* PREFIX.png, .svg, and .csv, -gpus.csv or -batch.csv by kind */
    int k = o->k;
    const char *outp[5];
    static const char *const ext[5] = {".png", ".svg", ".csv", "-gpus.csv", "-batch.csv"};
    for (int i = 0; i < 5; i++) {
        int used = i < 2 || (i == 2 && k != PLOT_IMBALANCE) || (i == 3 && (k == PLOT_LOAD || k == PLOT_IMBALANCE)) ||
                   (i == 4 && k == PLOT_IMBALANCE);
        snprintf(o->outs[i], sizeof o->outs[i], "%s%s", used ? o->out : "", used ? ext[i] : "");
        outp[i] = used ? o->outs[i] : NULL;
        o->existed[i] = used && access(o->outs[i], F_OK) == 0;
    }
    if (k != PLOT_IMBALANCE && cli_inputs_load("plot", &o->rq, in, !(k == PLOT_GROUPS && o->lens.v)))
        return 1;
    return cli_check_outputs("plot", k == PLOT_IMBALANCE ? NULL : in, &o->csv, 1, outp, 5);
}

int cmd_plot(int argc, char **argv)
{
    plot_opts o;
    int rc = plot_parse(argc, argv, &o);
    if (rc < 0) {
        resolve_inputs in;
        memset(&in, 0, sizeof in);
        char obuf[4096], pbuf[4096];
        rc = plot_prepare(&o, &in, obuf, sizeof obuf, pbuf, sizeof pbuf);
        if (!rc && plot_draw(&o, &in, argc, argv)) { /* nothing this run made is left as if complete */
            rc = 1;
            for (int i = 0; i < 5; i++)
                if (o.outs[i][0] && !o.existed[i] && unlink(o.outs[i]) == 0)
                    fprintf(stderr, "unpad plot: removed %s (the plot failed)\n", o.outs[i]);
        }
        if (!rc && o.k == PLOT_IMBALANCE)
            printf("unpad plot %s: wrote %s.png, %s.svg and the data %s-gpus.csv and %s-batch.csv\n", o.kind, o.out,
                   o.out, o.out, o.out);
        else if (!rc && o.k == PLOT_LOAD)
            printf("unpad plot %s: wrote %s.png, %s.svg and the data %s.csv and %s-gpus.csv\n", o.kind, o.out, o.out,
                   o.out, o.out);
        else if (!rc)
            printf("unpad plot %s: wrote %s.png, %s.svg and the data %s.csv\n", o.kind, o.out, o.out, o.out);
        resolve_inputs_free(&in);
    }
    cli_ints_free(&o.lens);
    return rc;
}
