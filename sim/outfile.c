/* outfile.c — complete-or-nothing output files (temporary name, checked writes, rename) and the
 * guard against an output that is one of the inputs. */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

struct unpad_outfile {
    char *path, *tmp;  /* tmp == path when writing straight to a device or pipe */
    int fd;
    FILE *f;
    int write_errno;   /* errno of the first failed write or seek, 0 if none */
    int direct;        /* 1: path is a device or pipe (e.g. /dev/stdout): no temporary, no rename */
};

/* The stream writes straight to the descriptor, so the reason of a failed write (errno) is kept
 * instead of being lost inside stdio. */
static ssize_t stream_write(void *cookie, const char *buf, size_t n)
{
    unpad_outfile *o = cookie;
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(o->fd, buf + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (!o->write_errno)
                o->write_errno = w < 0 ? errno : EIO;
            errno = o->write_errno;
            return 0; /* fopencookie: 0 is an error */
        }
        done += (size_t)w;
    }
    return (ssize_t)n;
}

static int stream_seek(void *cookie, off64_t *off, int whence)
{
    unpad_outfile *o = cookie;
    off_t r = lseek(o->fd, (off_t)*off, whence);
    if (r < 0) {
        if (!o->write_errno)
            o->write_errno = errno;
        return -1;
    }
    *off = r;
    return 0;
}

static int stream_close(void *cookie)
{
    (void)cookie; /* the descriptor is synced and closed by commit or abort */
    return 0;
}

static void outfile_free(unpad_outfile *o)
{
    if (o->tmp != o->path)
        free(o->tmp);
    free(o->path);
    free(o);
}

int outfile_is_stdout(const char *path) { return path && !strcmp(path, "-"); }

static int stdout_fd = -1; /* the real standard output once outfile_stdout has taken it */

int outfile_stdout(int *fd, unpad_err *err)
{
    if (stdout_fd < 0) {
        fflush(stdout);
        int d = dup(STDOUT_FILENO);
        if (d < 0 || fcntl(d, F_SETFD, FD_CLOEXEC) != 0 || !freopen("/dev/null", "w", stdout)) {
            int e = errno;
            if (d >= 0)
                close(d);
            return unpad_fail(err, UNPAD_EIO, NULL, 0, "cannot use standard output: %s", strerror(e));
        }
        stdout_fd = d;
    }
    *fd = stdout_fd;
    return UNPAD_OK;
}

/* Standard output as an outfile: written directly, never renamed. */
static int open_stdout(unpad_outfile *o, unpad_err *err)
{
    int fd;
    int rc = outfile_stdout(&fd, err);
    if (rc)
        return rc;
    o->direct = 1;
    o->fd = dup(fd);
    if (o->fd < 0)
        return unpad_fail(err, UNPAD_EIO, NULL, 0, "cannot write to standard output: %s", strerror(errno));
    return UNPAD_OK;
}

int outfile_open(const char *path, unpad_outfile **out, unpad_err *err)
{
    *out = NULL;
    if (!path || !*path)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "an output file needs a name");
    int to_stdout = outfile_is_stdout(path);
    struct stat st;
    int exists = !to_stdout && stat(path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode))
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot write: a folder, not a file");
    unpad_outfile *o = calloc(1, sizeof *o);
    size_t n = strlen(path) + 12;
    if (!o || !(o->path = strdup(path)) || !(o->tmp = malloc(n))) {
        if (o)
            outfile_free(o);
        return unpad_fail(err, UNPAD_ENOMEM, path, 0, "out of memory");
    }
    o->direct = exists && !S_ISREG(st.st_mode);
    if (to_stdout) {
        free(o->tmp);
        o->tmp = o->path;
        int rc = open_stdout(o, err);
        if (rc) {
            outfile_free(o);
            return rc;
        }
    } else if (o->direct) { /* a device or pipe is written as it is: it cannot be replaced whole */
        free(o->tmp);
        o->tmp = o->path;
        o->fd = open(path, O_WRONLY | O_CLOEXEC);
    } else {
        snprintf(o->tmp, n, "%s.tmp-XXXXXX", path);
        o->fd = mkstemp(o->tmp);
    }
    if (o->fd < 0) {
        int e = errno;
        outfile_free(o);
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot write: %s", strerror(e));
    }
    mode_t mask = umask(0);
    umask(mask);
    if (!o->direct && fchmod(o->fd, 0666 & ~mask) != 0) {
        int e = errno;
        close(o->fd);
        unlink(o->tmp);
        outfile_free(o);
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot write: %s", strerror(e));
    }
    cookie_io_functions_t io = {.read = NULL, .write = stream_write, .seek = stream_seek,
                                .close = stream_close};
    o->f = fopencookie(o, "w", io);
    if (!o->f) {
        close(o->fd);
        unlink(o->tmp);
        outfile_free(o);
        return unpad_fail(err, UNPAD_ENOMEM, path, 0, "out of memory");
    }
    *out = o;
    return UNPAD_OK;
}

FILE *outfile_stream(unpad_outfile *o) { return o->f; }

const char *outfile_temp_path(const unpad_outfile *o) { return o->tmp; }

long outfile_size(unpad_outfile *o)
{
    struct stat st;
    if (fflush(o->f) != 0 || fstat(o->fd, &st) != 0)
        return -1;
    return (long)st.st_size;
}

void outfile_abort(unpad_outfile *o)
{
    if (!o)
        return;
    fclose(o->f);
    close(o->fd);
    if (!o->direct)
        unlink(o->tmp);
    outfile_free(o);
}

/* Syncs the folder holding path, so the rename itself survives a crash (best effort). */
static void sync_folder(const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

int outfile_commit(unpad_outfile *o, unpad_err *err)
{
    int e = 0;
    if (fflush(o->f) != 0 || ferror(o->f))
        e = o->write_errno ? o->write_errno : EIO;
    if (!e && o->write_errno)
        e = o->write_errno;
    if (!e && !o->direct && fsync(o->fd) != 0)
        e = errno;
    if (fclose(o->f) != 0 && !e)
        e = o->write_errno ? o->write_errno : EIO;
    if (close(o->fd) != 0 && !e)
        e = errno;
    if (!e && !o->direct && rename(o->tmp, o->path) != 0)
        e = errno;
    if (e) {
        if (!o->direct)
            unlink(o->tmp);
        unpad_fail(err, UNPAD_EIO, outfile_is_stdout(o->path) ? "standard output" : o->path, 0, "cannot write: %s%s",
                   strerror(e),
                   o->direct ? "" : " (nothing written; any old file is kept)");
        outfile_free(o);
        return UNPAD_EIO;
    }
    if (!o->direct)
        sync_folder(o->path);
    outfile_free(o);
    return UNPAD_OK;
}

/* ---- outputs against inputs ------------------------------------------------------------------ */

/* The real path of p's folder joined with its name (p itself when the folder does not resolve). */
static void canonical(const char *p, char *buf, size_t n)
{
    const char *slash = strrchr(p, '/'), *base = slash ? slash + 1 : p;
    char dir[PATH_MAX], real[PATH_MAX];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == p)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - p), p);
    if (*base && strcmp(base, ".") && strcmp(base, "..") && realpath(dir, real))
        snprintf(buf, n, "%s%s%s", real, strcmp(real, "/") ? "/" : "", base);
    else if (!realpath(p, buf))
        snprintf(buf, n, "%s", p);
}

/* 1 when a and b name the same file: same device and inode when both exist (devices and pipes,
 * such as /dev/stdin and /dev/stdout on one terminal, do not count), else the same canonical
 * path. */
static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    int ha = stat(a, &sa) == 0, hb = stat(b, &sb) == 0;
    if (ha && hb)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino &&
               (S_ISREG(sa.st_mode) || S_ISDIR(sa.st_mode));
    if (ha != hb)
        return 0;
    char ca[PATH_MAX + 256], cb[PATH_MAX + 256];
    canonical(a, ca, sizeof ca);
    canonical(b, cb, sizeof cb);
    return strcmp(ca, cb) == 0;
}

int outfile_check_inputs(const char *output, const char *const *inputs, int n, unpad_err *err)
{
    if (!output || outfile_is_stdout(output))
        return UNPAD_OK;
    for (int i = 0; i < n; i++)
        if (inputs[i] && same_file(output, inputs[i]))
            return unpad_fail(err, UNPAD_EINVAL, output, 0,
                              "this output is also an input of the run (%s): refused before any "
                              "work, so the input is not overwritten; write the output elsewhere",
                              inputs[i]);
    return UNPAD_OK;
}

/* An output that cannot be written where it is asked: a folder, or in a folder that is not there. */
static int check_place(const char *path, unpad_err *err)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot write: a folder, not a file (refused before any work)");
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path)
        return UNPAD_OK;
    char dir[PATH_MAX];
    if ((size_t)(slash - path) >= sizeof dir)
        return unpad_fail(err, UNPAD_EINVAL, path, 0, "path too long");
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = '\0';
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot write: no folder %s (refused before any work)", dir);
    return UNPAD_OK;
}

int outfile_check_all(const char *const *outputs, int no, const char *const *inputs, int ni,
                      unpad_err *err)
{
    for (int i = 0; i < no; i++) {
        if (outfile_is_stdout(outputs[i])) {
            for (int j = 0; j < i; j++)
                if (outfile_is_stdout(outputs[j]))
                    return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                                      "two outputs of the run go to standard output ('-'): refused before any "
                                      "work; give one of them a file name");
            continue;
        }
        if (outputs[i] && !outputs[i][0])
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "an output file needs a name (one was given empty): "
                              "refused before any work");
        int rc = outfile_check_inputs(outputs[i], inputs, ni, err);
        if (!rc && outputs[i])
            rc = check_place(outputs[i], err);
        if (rc)
            return rc;
        for (int j = 0; j < i; j++)
            if (outputs[i] && outputs[j] && same_file(outputs[i], outputs[j]))
                return unpad_fail(err, UNPAD_EINVAL, outputs[i], 0,
                                  "two outputs of the run are the same file (%s): refused before "
                                  "any work; give them different names", outputs[j]);
    }
    return UNPAD_OK;
}

int outfile_open_csv(const char *path, const char *comment, const char *header, unpad_outfile **out,
                     unpad_err *err)
{
    int rc = outfile_open(path, out, err);
    if (!rc)
        fprintf(outfile_stream(*out), "%s%s\n", comment ? comment : "", header);
    return rc;
}
