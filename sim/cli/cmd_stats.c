/* cmd_stats.c — `unpad stats`: statistics of a length distribution. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "opts.h"

const char cmd_stats_what[] = "statistics of a length distribution";

static void usage(FILE *f)
{
    fprintf(f, "usage: unpad stats [--dist F] [--pad L] [--json F]\n"
               "  --dist F   length,count CSV or one length per line, or a name in models/dists/\n"
               "             (default wiki512)\n"
               "  --pad L    report the padding fraction when padded to L (default: the longest length)\n"
               "  --json F   also write the statistics as JSON (docs/json.md); F '-': only the JSON,\n"
               "             on standard output\n");
}

int cmd_stats(int argc, char **argv)
{
    char dbuf[4096];
    const char *dist_path = NULL, *json = NULL;
    int pad = 0;
    const cli_opt opts[] = {
        CLI_OPT_STR("dist", &dist_path), CLI_OPT_INT("pad", &pad, 1, 65536), CLI_OPT_OUT("json", &json)};
    int rc = cli_opts_parse("stats", argc, argv, 1, opts, CLI_NOPTS(opts), usage, NULL);
    if (rc >= 0)
        return rc;
    if (!dist_path) {
        if (cli_project_path("stats", "models/dists/wiki512.csv", dbuf, sizeof dbuf))
            return 1;
    } else {
        unpad_err ne = {0};
        if (resolve_named(dist_path, "--dist", "models/dists", ".csv", dbuf, sizeof dbuf, &ne))
            return cli_error("stats", &ne);
    }
    dist_path = dbuf;
    const char *outs[1] = {json && strcmp(json, "-") ? json : NULL};
    if (cli_check_outputs("stats", NULL, &dist_path, 1, outs, 1))
        return 1;
    unpad_dist d;
    unpad_err err = {0};
    if (dist_load(dist_path, &d, &err))
        return cli_error("stats", &err);
    dist_stats s;
    dist_compute_stats(&d, &s);
    if (!pad)
        pad = s.max;
    if (pad < s.max) {
        fprintf(stderr, "unpad stats: --pad %d is shorter than the longest length %d of %s (padding "
                        "does not cut sequences)\n", pad, s.max, dist_path);
        dist_free(&d);
        return 2;
    }
    double padding = dist_padding_fraction(&d, pad);
    cli_prov prov;
    cli_prov_init(&prov, argc, argv);
    prov.dist_path = dist_path;
    cli_json j = {0};
    if (json && cli_json_open("stats", json, &prov, &j)) {
        dist_free(&d);
        return 1;
    }
    printf("unpad stats: %s\n", dist_path);
    cli_prov_print(stdout, &prov);
    char count[64];
    printf("\nsequences      %s%s\n", dist_count_text(s.count, count, sizeof count),
           s.fractional ? " (the file's counts have fractions: weights, not whole sequences)" : "");
    printf("mean length    %.2f  (stddev %.2f)\n", s.mean, s.stddev);
    printf("min / max      %d / %d\n", s.min, s.max);
    printf("p50 / p90 / p99  %d / %d / %d\n", s.p50, s.p90, s.p99);
    printf("share at max   %.1f%%\n", 100 * s.share_at_max);
    printf("padding at %d  %.1f%% of tokens\n", pad, 100 * padding);
    rc = 0;
    if (json) {
        json_w *w = &j.w;
        json_obj(w, "stats");
        json_num(w, "sequences", s.count);
        json_num(w, "mean_len", s.mean);
        json_num(w, "stddev_len", s.stddev);
        json_int(w, "min_len", s.min);
        json_int(w, "max_len", s.max);
        json_int(w, "p50_len", s.p50);
        json_int(w, "p90_len", s.p90);
        json_int(w, "p99_len", s.p99);
        json_num(w, "share_at_max", s.share_at_max);
        json_num(w, "mean_len2", s.sum_len2_mean);
        json_int(w, "pad_len", pad);
        json_num(w, "padding_fraction", padding);
        json_end(w);
        rc = cli_json_close("stats", &j);
        if (!rc && !j.to_stdout)
            printf("\nwrote %s\n", json);
    }
    dist_free(&d);
    return rc;
}
