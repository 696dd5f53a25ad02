/* outfile.h — every file unpad writes goes through here: written under a temporary name in the
 * same folder and renamed to its final name only once complete, so a failed run (full disk, write
 * error, crash) leaves either the old file or none, never a truncated one under the final name.
 *
 *   unpad_outfile *o;
 *   if (outfile_open(path, &o, err)) return err->code;
 *   fprintf(outfile_stream(o), ...);                 // or hand outfile_temp_path(o) to a program
 *   return outfile_commit(o, err);                   // or outfile_abort(o) on an error of yours
 *
 * Every write, flush, sync and close is checked; a failure names the final file and the system's
 * reason (e.g. "No space left on device"). The temporary is `<path>.tmp-XXXXXX`; a commit syncs it,
 * renames it over path and syncs the folder; an abort, or a failed commit, removes it. The final
 * file gets mode 0666 less the umask, as fopen would give. An existing device or pipe (e.g.
 * /dev/stdout) is written directly, as it cannot be replaced whole; a folder is refused. The name
 * "-" is standard output (outfile_stdout): written directly too.
 *
 * Outputs must not overwrite the run's inputs: outfile_check_inputs refuses that before any work. */
#ifndef UNPAD_OUTFILE_H
#define UNPAD_OUTFILE_H

#include <stdio.h>

#include "unpad.h"

typedef struct unpad_outfile unpad_outfile;

int outfile_open(const char *path, unpad_outfile **out, unpad_err *err);
/* 1 when path is "-": standard output. */
int outfile_is_stdout(const char *path);
/* The real standard output, for the one output written there: its descriptor in *fd (kept open;
 * dup it to close it). The first call sends the stdout stream to /dev/null, so that the command's
 * text does not mix with the output and standard output holds that output alone. */
int outfile_stdout(int *fd, unpad_err *err);
/* The stream to write (seekable: it is the temporary file). */
FILE *outfile_stream(unpad_outfile *o);
/* The temporary's path, for a program that writes the file by name (gnuplot). */
const char *outfile_temp_path(const unpad_outfile *o);
/* Bytes in the temporary now (after a flush), or -1. */
long outfile_size(unpad_outfile *o);
/* outfile_open, then the comment lines (NULL: none) and a CSV header line (its newline added). */
int outfile_open_csv(const char *path, const char *comment, const char *header, unpad_outfile **out,
                     unpad_err *err);
/* Checks, flushes, syncs, closes and renames; frees o whether it succeeds or not. */
int outfile_commit(unpad_outfile *o, unpad_err *err);
/* Drops the temporary and frees o (NULL is allowed). */
void outfile_abort(unpad_outfile *o);

/* Refuses (UNPAD_EINVAL, naming both) writing `output` when it is one of inputs[0..n) (NULL
 * entries skipped): an existing output is compared by device and inode, a new one by the real path
 * of its folder joined with its name. */
int outfile_check_inputs(const char *output, const char *const *inputs, int n, unpad_err *err);

/* Refuses any output among outputs[0..no) that is one of inputs[0..ni) or another of the outputs,
 * a folder, or in a folder that is not there (NULL entries skipped); "-" (standard output) is no
 * file, and two of them are refused. */
int outfile_check_all(const char *const *outputs, int no, const char *const *inputs, int ni,
                      unpad_err *err);

#endif
