/* rows.c — what-if rows as they finish and at the end (rows.h). */
#include "rows.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "group.h"
#include "outfile.h"

int cli_count_matters(int policy)
{
    return balance_count_matters((balance_policy)policy);
}

void cli_row_json(json_w *w, const char *key, const whatif_row *r)
{
    json_obj(w, key);
    json_int(w, "gpus", r->gpus);
    json_int(w, "batch", r->batch);
    json_int(w, "accum", r->accum < 1 ? 1 : r->accum);
    json_str(w, "policy", balance_policy_name(r->policy));
    json_str(w, "count", balance_count_name(r->count));
    json_int(w, "steps", r->steps);
    json_num(w, "step_us", r->step_us);
    json_num(w, "samples_per_s", r->samples_per_s);
    json_num(w, "imbalance_mean", r->imbalance_mean);
    json_num(w, "imbalance_p99", r->imbalance_p99);
    json_num(w, "imbalance_max", r->imbalance_max);
    json_num(w, "idle_mean", r->idle_mean);
    json_num(w, "idle_p99", r->idle_p99);
    json_num(w, "token_imbalance_mean", r->token_imbalance_mean);
    json_num(w, "fixed_us", r->fixed_us);
    json_num(w, "attn_us", r->attn_us);
    json_num(w, "attn_grouped_us", r->attn_grouped_us);
    json_int(w, "fmha_groups", r->groups);
    json_int(w, "fmha_streams", r->streams);
    int b[GROUP_MAX], nb = 0;
    unpad_err err;
    json_arr(w, "fmha_bounds");
    if (!group_bounds_parse(r->bounds, b, &nb, &err))
        for (int i = 0; i < nb; i++)
            json_int(w, NULL, b[i]);
    json_end(w);
    json_str(w, "layout", r->layout_name);
    json_num(w, "tokens_per_gpu", r->tokens_per_gpu);
    json_num(w, "padding_fraction", r->padding);
    json_num(w, "allreduce_us", r->allreduce_us);
    json_str(w, "allreduce_algorithm", net_algo_name(r->net));
    json_int(w, "nodes", r->nodes);
    json_num(w, "exchange_us", r->exchange_us);
    json_num(w, "memory_gib", r->mem_gib);
    json_num(w, "memory_tokens", (double)r->mem_tokens);
    json_num(w, "memory_budget_gib", r->mem_budget_gib);
    json_bool(w, "memory_fits", r->mem_fits);
    json_num(w, "train_hours", r->train_hours);
    json_num(w, "gpu_hours", r->gpu_hours);
    json_num(w, "cost", r->cost);
    json_end(w);
}

void cli_rows_json(json_w *w, const whatif_row *rows, int n)
{
    json_arr(w, "rows");
    for (int i = 0; i < n; i++)
        cli_row_json(w, NULL, &rows[i]);
    json_end(w);
}

static FILE *open_partial(const char *cmd, const char *path, char *partial, size_t n)
{
    snprintf(partial, n, "%s.partial", path);
    FILE *f = fopen(partial, "w");
    if (!f)
        fprintf(stderr, "unpad %s: cannot write %s: %s\n", cmd, partial, strerror(errno));
    return f;
}

/* 0 when path is standard output ("-"), a device or pipe (e.g. /dev/stdout): no .partial beside it. */
static int wants_partial(const char *path)
{
    struct stat st;
    return !outfile_is_stdout(path) && (stat(path, &st) != 0 || S_ISREG(st.st_mode));
}

/* Refuses a .partial that is one of the run's inputs or outputs (it is truncated now and removed
 * at the end); 1 after printing why. */
static int check_partials(cli_rows *o)
{
    const int csv = o->csv && wants_partial(o->csv);
    const int json = o->json && wants_partial(o->json);
    char cp[sizeof o->csv_partial], jp[sizeof o->json_partial];
    snprintf(cp, sizeof cp, "%s.partial", csv ? o->csv : "");
    snprintf(jp, sizeof jp, "%s.partial", json ? o->json : "");
    const char *partials[2] = {csv ? cp : NULL, json ? jp : NULL};
    unpad_err err = {0};
    if (!cli_check_more_outputs(partials, 2, &err))
        return 0;
    fprintf(stderr, "unpad %s: %s (the sweep writes its rows there while it runs)\n", o->cmd, err.msg);
    return 1;
}

int cli_rows_open(cli_rows *o)
{
    pthread_mutex_init(&o->lock, NULL);
    o->done = o->failed = 0;
    o->csv_f = o->json_f = NULL;
    if (check_partials(o))
        return 1;
    if (o->csv && wants_partial(o->csv)) {
        if (!(o->csv_f = open_partial(o->cmd, o->csv, o->csv_partial, sizeof o->csv_partial)))
            return 1;
        fputs(o->prov_comment ? o->prov_comment : "", o->csv_f);
        fprintf(o->csv_f, "# partial: rows in the order they were done; %s is written at the end\n",
                o->csv);
        fprintf(o->csv_f, "%s\n", whatif_csv_header);
        fflush(o->csv_f);
    }
    if (o->json && wants_partial(o->json)) {
        if (!(o->json_f = open_partial(o->cmd, o->json, o->json_partial, sizeof o->json_partial))) {
            cli_rows_abandon(o);
            return 1;
        }
    }
    return 0;
}

void cli_rows_done(void *ctx, const struct whatif_row *r)
{
    cli_rows *o = ctx;
    pthread_mutex_lock(&o->lock);
    o->done++;
    if (o->text) {
        progress_hold(o->progress);
        whatif_print_row(o->text, r, o->train);
        fflush(o->text);
        progress_release(o->progress);
    }
    if (o->csv_f) {
        whatif_csv_row(o->csv_f, r);
        o->failed |= fflush(o->csv_f) != 0;
    }
    if (o->json_f) {
        json_w w;
        unpad_err err;
        json_init(&w, o->json_f, 0);
        cli_row_json(&w, NULL, r);
        o->failed |= json_finish(&w, &err) != UNPAD_OK || fflush(o->json_f) != 0;
    }
    pthread_mutex_unlock(&o->lock);
}

void cli_rows_abandon(cli_rows *o)
{
    if (o->csv_f)
        fclose(o->csv_f);
    if (o->json_f)
        fclose(o->json_f);
    o->csv_f = o->json_f = NULL;
}

int cli_rows_finish(cli_rows *o, const whatif_row *rows, int n)
{
    cli_rows_abandon(o);
    if (o->csv) {
        unpad_err err = {0};
        unpad_outfile *of;
        int rc = outfile_open(o->csv, &of, &err);
        if (!rc) {
            FILE *f = outfile_stream(of);
            fputs(o->prov_comment ? o->prov_comment : "", f);
            fprintf(f, "%s\n", whatif_csv_header);
            for (int i = 0; i < n; i++)
                whatif_csv_row(f, &rows[i]);
            fprintf(f, "# complete: %d configurations\n", n);
            rc = outfile_commit(of, &err);
        }
        if (rc) {
            fprintf(stderr, "unpad %s: %s%s%s%s\n", o->cmd, err.msg,
                    o->csv_partial[0] ? " (the rows are in " : "", o->csv_partial,
                    o->csv_partial[0] ? ")" : "");
            return 1;
        }
        if (o->csv_partial[0])
            remove(o->csv_partial);
    }
    if (o->json_partial[0])
        remove(o->json_partial);
    pthread_mutex_destroy(&o->lock);
    return 0;
}
