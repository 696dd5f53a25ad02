/* cmd_stats.c — `unpad stats`: statistics of a length distribution. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

const char cmd_stats_what[] = "statistics of a length distribution";

static void usage(FILE *f)
{
    fprintf(f, "usage: unpad stats [--dist F] [--pad L]\n"
               "  --dist F   length,count CSV or one length per line (default models/dists/wiki512.csv)\n"
               "  --pad L    report the padding fraction when padded to L (default: the longest length)\n");
}

int cmd_stats(int argc, char **argv)
{
    static const struct option opts[] = {
        {"dist", required_argument, 0, 'd'}, {"pad", required_argument, 0, 'p'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    char dbuf[4096];
    const char *dist_path = NULL;
    int pad = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'd': dist_path = optarg; break;
        case 'p': if (cli_int("stats", "--pad", optarg, 1, 65536, &pad)) return 2; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "unpad stats: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!dist_path) {
        if (cli_project_path("stats", "models/dists/wiki512.csv", dbuf, sizeof dbuf))
            return 1;
        dist_path = dbuf;
    }
    unpad_dist d;
    unpad_err err = {0};
    if (dist_load(dist_path, &d, &err))
        return cli_error("stats", &err);
    dist_stats s;
    dist_compute_stats(&d, &s);
    if (!pad)
        pad = s.max;
    printf("distribution   %s\n", dist_path);
    printf("sequences      %.0f\n", s.count);
    printf("mean length    %.2f  (stddev %.2f)\n", s.mean, s.stddev);
    printf("min / max      %d / %d\n", s.min, s.max);
    printf("p50 / p90 / p99  %d / %d / %d\n", s.p50, s.p90, s.p99);
    printf("share at max   %.1f%%\n", 100 * s.share_at_max);
    printf("padding at %d  %.1f%% of tokens\n", pad, 100 * dist_padding_fraction(&d, pad));
    dist_free(&d);
    return 0;
}
