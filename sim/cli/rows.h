/* rows.h — the what-if rows of `unpad whatif` and `unpad plan` in every form they are written:
 *
 *   text   the table, a line per configuration as soon as it is done (above the progress line)
 *   CSV    while running, <csv>.partial: provenance comments, the header, and each row as it is
 *          done (flushed), so an interrupted sweep keeps what it did; at the end <csv> in the
 *          order of the configurations with a last "# complete: N configurations" line, written
 *          under a temporary name and renamed, and the .partial removed
 *   JSON   the same with <json>.partial holding one row object per line (JSON lines), and at the
 *          end the document (docs/json.md) with every row
 *
 * rows_done is whatif_setup.row_done; it locks, so worker threads may call it. */
#ifndef UNPAD_CLI_ROWS_H
#define UNPAD_CLI_ROWS_H

#include <pthread.h>
#include <stdio.h>

#include "json.h"
#include "progress.h"
#include "whatif.h"

typedef struct {
    const char *cmd;
    FILE *text;                 /* the table's lines (NULL: none) */
    progress *progress;         /* held while a line is printed */
    const char *csv, *json;     /* the final files, NULL: not asked ("-": JSON to stdout) */
    const char *prov_comment;   /* "# key: value" lines for the CSVs */
    int train;                  /* the table has the time-to-train columns */
    char csv_partial[4200], json_partial[4200];
    FILE *csv_f, *json_f;
    int done, failed;
    pthread_mutex_t lock;
} cli_rows;

/* Opens the .partial files; prints the reason and returns 1 on failure. */
int cli_rows_open(cli_rows *o);
void cli_rows_done(void *ctx, const struct whatif_row *row);
/* Writes the final CSV (if asked) from rows[0..n) and removes the .partial files; 1 on failure.
 * The JSON document is the caller's (it holds more than the rows): cli_rows_json. */
int cli_rows_finish(cli_rows *o, const whatif_row *rows, int n);
/* Closes the .partial files and leaves them (after a failure: they hold what was done). */
void cli_rows_abandon(cli_rows *o);

/* One row as a JSON object (key NULL inside an array). */
void cli_row_json(json_w *w, const char *key, const whatif_row *r);
/* "rows": [every row]. */
void cli_rows_json(json_w *w, const whatif_row *rows, int n);

/* 0 for the policies whose count constraint cannot change the result (none and sort-deal always
 * give every GPU an equal count): a sweep keeps one row (count equal) for them. */
int cli_count_matters(int policy);

#endif
