/* ckpt_dir.c — step-numbered checkpoint folders: save, rotate, find the latest (see ckpt_dir.h). */
#include "ckpt_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_MAX_LEN 4096
#define STEPS_MAX 100000 /* step folders considered in one folder */

int ckpt_dir_step_path(const char *root, int64_t step, char *out, size_t n, unpad_err *err)
{
    int k = snprintf(out, n, "%s/step-%06lld", root, (long long)step);
    if (k < 0 || (size_t)k >= n)
        return unpad_fail(err, UNPAD_EINVAL, root, 0, "checkpoint path too long");
    return UNPAD_OK;
}

static int sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* Removes a checkpoint folder (flat: files only). */
static int remove_folder(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : -1;
    struct dirent *e;
    char p[PATH_MAX_LEN + 300];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    closedir(d);
    return rmdir(dir);
}

/* "step-000300" -> 300; "step-000300.tmp" -> 300 with *tmp = 1; else -1. */
static long long parse_step_name(const char *name, int *tmp)
{
    *tmp = 0;
    if (strncmp(name, "step-", 5))
        return -1;
    char *end;
    errno = 0;
    long long s = strtoll(name + 5, &end, 10);
    if (errno || end == name + 5 || s < 0)
        return -1;
    if (!strcmp(end, ".tmp"))
        *tmp = 1;
    else if (*end)
        return -1;
    return s;
}

static int has_marker(const char *dir)
{
    char p[PATH_MAX_LEN + 32];
    snprintf(p, sizeof p, "%s/" CKPT_DIR_MARKER, dir);
    return access(p, R_OK) == 0;
}

/* The complete step folders' steps, descending, into steps (at most cap); tmp folders' steps into
 * tmps if not NULL. Returns the count of complete ones, -1 if root cannot be read. */
static int list_steps(const char *root, long long *steps, int cap, long long *tmps, int *ntmp)
{
    DIR *d = opendir(root);
    if (!d)
        return -1;
    int n = 0;
    if (ntmp)
        *ntmp = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int tmp;
        long long s = parse_step_name(e->d_name, &tmp);
        if (s < 0)
            continue;
        if (tmp) {
            if (tmps && *ntmp < cap)
                tmps[(*ntmp)++] = s;
        } else if (n < cap) {
            steps[n++] = s;
        }
    }
    closedir(d);
    for (int i = 1; i < n; i++) /* insertion sort, descending */
        for (int j = i; j > 0 && steps[j] > steps[j - 1]; j--) {
            long long t = steps[j];
            steps[j] = steps[j - 1];
            steps[j - 1] = t;
        }
    return n;
}

static int write_marker(const char *dir, int64_t step, unpad_err *err)
{
    char p[PATH_MAX_LEN + 32];
    snprintf(p, sizeof p, "%s/" CKPT_DIR_MARKER, dir);
    FILE *f = fopen(p, "w");
    if (!f)
        return unpad_fail(err, UNPAD_EIO, p, 0, "cannot write: %s", strerror(errno));
    int ok = fprintf(f, "step = %lld\n", (long long)step) > 0 && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int e = errno;
    ok = (fclose(f) == 0) && ok;
    return ok ? UNPAD_OK : unpad_fail(err, UNPAD_EIO, p, 0, "write failed: %s", strerror(e ? e : EIO));
}

/* The extra file x in dir, written, flushed and synced. */
static int write_extra(const char *dir, const ckpt_extra *x, unpad_err *err)
{
    char p[PATH_MAX_LEN + 300];
    snprintf(p, sizeof p, "%s/%s", dir, x->name);
    FILE *f = fopen(p, "w");
    if (!f)
        return unpad_fail(err, UNPAD_EIO, p, 0, "cannot write: %s", strerror(errno));
    int rc = x->write(x->ctx, f, err);
    int ok = rc == UNPAD_OK && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int e = errno;
    ok = (fclose(f) == 0) && ok;
    if (rc)
        return rc;
    return ok ? UNPAD_OK : unpad_fail(err, UNPAD_EIO, p, 0, "write failed: %s", strerror(e ? e : EIO));
}

int ckpt_dir_save(const char *root, const ckpt_model *m, const ckpt_state *st, ckpt_chunk_fn get, void *ctx,
                  int keep_last, char *saved, size_t n, unpad_err *err)
{
    return ckpt_dir_save_with(root, m, st, get, ctx, NULL, keep_last, saved, n, err);
}

int ckpt_dir_save_with(const char *root, const ckpt_model *m, const ckpt_state *st, ckpt_chunk_fn get,
                       void *ctx, const ckpt_extra *extra, int keep_last, char *saved, size_t n, unpad_err *err)
{
    char final[PATH_MAX_LEN], tmp[PATH_MAX_LEN + 8], file[PATH_MAX_LEN + 32], old[PATH_MAX_LEN + 8];
    int rc;
    if (mkdir(root, 0755) && errno != EEXIST)
        return unpad_fail(err, UNPAD_EIO, root, 0, "cannot create the checkpoint folder: %s", strerror(errno));
    if ((rc = ckpt_dir_step_path(root, st->step, final, sizeof final, err)))
        return rc;
    snprintf(tmp, sizeof tmp, "%s.tmp", final);
    snprintf(old, sizeof old, "%s.old", final);
    remove_folder(tmp); /* a leftover of a write that was killed */
    if (mkdir(tmp, 0755))
        return unpad_fail(err, UNPAD_EIO, tmp, 0, "cannot create: %s", strerror(errno));
    snprintf(file, sizeof file, "%s/" CKPT_FILE, tmp);
    if ((rc = ckpt_file_write(file, m, st, get, ctx, err)) || (extra && (rc = write_extra(tmp, extra, err))) ||
        (rc = write_marker(tmp, st->step, err))) {
        remove_folder(tmp);
        return rc;
    }
    if (sync_dir(tmp)) {
        remove_folder(tmp);
        return unpad_fail(err, UNPAD_EIO, tmp, 0, "cannot sync: %s", strerror(errno));
    }
    /* the same step saved again (a resumed run): the new one replaces it only once it is whole */
    int replaced = access(final, F_OK) == 0 && rename(final, old) == 0;
    if (rename(tmp, final)) {
        int e = errno;
        if (replaced)
            rename(old, final);
        remove_folder(tmp);
        return unpad_fail(err, UNPAD_EIO, final, 0, "cannot rename the new checkpoint into place: %s", strerror(e));
    }
    sync_dir(root);
    if (replaced)
        remove_folder(old);
    if (saved)
        snprintf(saved, n, "%s", final);
    return keep_last > 0 ? ckpt_dir_rotate(root, keep_last, err) : UNPAD_OK;
}

int ckpt_dir_rotate(const char *root, int keep_last, unpad_err *err)
{
    long long *steps = malloc(2 * STEPS_MAX * sizeof *steps);
    if (!steps)
        return unpad_fail(err, UNPAD_ENOMEM, root, 0, "out of host memory");
    long long *tmps = steps + STEPS_MAX;
    int ntmp = 0, n = list_steps(root, steps, STEPS_MAX, tmps, &ntmp);
    if (n < 0) {
        free(steps);
        return unpad_fail(err, UNPAD_EIO, root, 0, "cannot read the checkpoint folder: %s", strerror(errno));
    }
    char p[PATH_MAX_LEN + 8];
    int kept = 0, rc = UNPAD_OK;
    for (int i = 0; i < n; i++) {
        if (ckpt_dir_step_path(root, steps[i], p, sizeof p, err))
            continue;
        if (!has_marker(p)) /* incomplete: never counted, never the reason to delete a good one */
            continue;
        if (++kept > keep_last && remove_folder(p) && rc == UNPAD_OK)
            rc = unpad_fail(err, UNPAD_EIO, p, 0, "cannot remove an old checkpoint: %s", strerror(errno));
    }
    for (int i = 0; i < ntmp; i++)
        if (ckpt_dir_step_path(root, tmps[i], p, sizeof p - 4, err) == UNPAD_OK) {
            strcat(p, ".tmp");
            remove_folder(p);
        }
    free(steps);
    return rc;
}

/* Appends a line to notes. */
static void note(char *notes, size_t nn, const char *fmt, const char *a, const char *b)
{
    if (!notes || !nn)
        return;
    size_t k = strlen(notes);
    if (k + 1 < nn)
        snprintf(notes + k, nn - k, fmt, a, b);
}

/* The checkpoint file path checked for resuming: its header against the model want, then its
 * state against the run's (both may be NULL: not checked). */
static int check_candidate(const char *path, const ckpt_model *want, const ckpt_state *run, unpad_err *err)
{
    ckpt_state got;
    int rc = ckpt_file_check(path, want, NULL, &got, err);
    if (!rc && run)
        rc = ckpt_state_check(path, &got, run, err);
    return rc;
}

int ckpt_dir_latest(const char *root, const ckpt_model *want, const ckpt_state *run, char *path, size_t n,
                    char *notes, size_t nn, unpad_err *err)
{
    char own[2048]; /* the notes, for the message, when the caller keeps none */
    if (!notes || !nn) {
        notes = own;
        nn = sizeof own;
    }
    notes[0] = 0;
    struct stat sb;
    if (stat(root, &sb))
        return unpad_fail(err, UNPAD_EIO, root, 0, "cannot open: %s (no checkpoint to resume from)", strerror(errno));
    unpad_err e = {0};
    if (S_ISREG(sb.st_mode)) { /* a ckpt.bin named directly */
        snprintf(path, n, "%s", root);
        return check_candidate(path, want, run, err);
    }
    long long *steps = malloc(STEPS_MAX * sizeof *steps);
    if (!steps)
        return unpad_fail(err, UNPAD_ENOMEM, root, 0, "out of host memory");
    int cnt = list_steps(root, steps, STEPS_MAX, NULL, NULL), refused = 0;
    char dir[PATH_MAX_LEN + 8], file[PATH_MAX_LEN + 32];
    for (int i = 0; i < cnt; i++) {
        if (ckpt_dir_step_path(root, steps[i], dir, sizeof dir, &e))
            continue;
        snprintf(file, sizeof file, "%s/" CKPT_FILE, dir);
        if (!has_marker(dir)) {
            note(notes, nn, "%s: skipped, incomplete (no %s marker)\n", dir, CKPT_DIR_MARKER);
            continue;
        }
        if (check_candidate(file, want, run, &e)) {
            note(notes, nn, "%s: skipped: %s\n", dir, e.msg);
            refused++;
            continue;
        }
        snprintf(path, n, "%s", file);
        free(steps);
        return UNPAD_OK;
    }
    free(steps);
    /* a step folder named directly, or the layout of one ckpt.bin in the folder */
    snprintf(file, sizeof file, "%s/" CKPT_FILE, root);
    if (access(file, R_OK) == 0) {
        snprintf(path, n, "%s", file);
        return check_candidate(path, want, run, err);
    }
    if (refused) /* complete ones exist, but none is of this model and run */
        return unpad_fail(err, UNPAD_EIO, NULL, 0, "no checkpoint in %s can resume this run:\n%s", root, notes);
    return unpad_fail(err, UNPAD_EIO, root, 0, "no complete checkpoint to resume from%s%s", notes[0] ? ":\n" : "",
                      notes);
}
