/* main_data.c — `unpad-data`: plain text -> shards of BERT pre-training samples, synthetic shards
 * from a length distribution, and a look inside a shard. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dist.h"
#include "outfile.h"
#include "pretrain.h"
#include "resolve.h"
#include "shard.h"
#include "wordpiece.h"

static const char *prog = "unpad-data";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: unpad-data --vocab F --input F [F...] --out DIR|FILE [options]   text -> shards\n"
            "       unpad-data --synthetic --dist F --samples N --out DIR|FILE [options]\n"
            "       unpad-data --inspect DIR|FILE [--vocab F] [--show N] [--hist CSV]\n"
            "text:\n"
            "  --vocab F            WordPiece vocabulary, one token per line (BERT uncased)\n"
            "  --input F            text file ('-': standard input); repeat, or list more files after\n"
            "                       it. WikiText (first line ' = Title = ') or one sentence per line\n"
            "                       with blank lines between documents; --format auto|wikitext|lines\n"
            "                       (default auto)\n"
            "  --dupe N             passes over the text, fresh pairs and masks each (default 1)\n"
            "  --short-seq-prob P   share of documents cut to a random shorter target (default 0.1)\n"
            "  --shuffle-buffer N   samples held to shuffle the output (default 10000; 0 = none)\n"
            "synthetic:\n"
            "  --synthetic          random ordinary tokens, lengths drawn from --dist\n"
            "  --dist F             length,count CSV or one length per line, or a name in models/dists/\n"
            "                       (wiki512, short, ...)\n"
            "  --samples N          how many samples\n"
            "  --vocab-size N       ids in BERT's layout when no --vocab is given (default 30522)\n"
            "both:\n"
            "  --out FILE|DIR       one shard file, or a folder of shard-NNNNN.bin files (a folder when\n"
            "                       it exists, ends in '/', or --samples-per-shard is given)\n"
            "  --samples-per-shard N  samples per file in a folder (default 65536)\n"
            "  --force              replace the --out file, or the shard-*.bin files in the --out folder\n"
            "                       (once the new set is whole: a failed run leaves the old one)\n"
            "  --max-len N          tokens per sample, [CLS]/[SEP] included (default 512)\n"
            "  --max-pred N         masked positions per sample at most, >= 1 (default 76)\n"
            "  --masked-prob P      share of tokens masked, > 0, at least 1 per sample (default 0.15)\n"
            "  --seed S             the same seed makes the same shards (default 12345)\n"
            "inspect:\n"
            "  --inspect F          print the header, length statistics and the first samples\n"
            "  --show N             samples to print (default 3)\n"
            "  --hist CSV           write the length histogram (length,count; `unpad stats --dist`)\n");
}

static int bad_flag(const char *flag, const char *val, const char *want)
{
    fprintf(stderr, "%s: %s '%s': expected %s\n", prog, flag, val, want);
    return 2;
}

/* Said when a value leaves no masked-LM targets, which BERT pre-training learns from. */
#define NO_TARGETS "; 0 masks no position, leaving the masked-LM loss nothing to learn from"

static int flag_long(const char *flag, const char *val, long lo, long hi, long *out)
{
    long v;
    char want[96];
    snprintf(want, sizeof want, "an integer in %ld..%ld", lo, hi);
    if (unpad_parse_long(val, &v) || v < lo || v > hi)
        return bad_flag(flag, val, want);
    *out = v;
    return 0;
}

static int flag_prob(const char *flag, const char *val, double *out)
{
    double v;
    if (unpad_parse_double(val, &v) || v < 0 || v > 1)
        return bad_flag(flag, val, "a probability in [0, 1]");
    *out = v;
    return 0;
}

static int fail(const unpad_err *e)
{
    fprintf(stderr, "%s: %s\n", prog, e->msg);
    return 1;
}

/* ---- stopping on a signal -------------------------------------------------------------------- */

/* The signal (SIGINT, SIGTERM, SIGHUP) that asked the run to stop, 0 while none did. The handler
 * only sets it; the reader and the write loop check it, and the run then stops as on an error:
 * the shards it wrote are removed, and the file being written (a temporary) is dropped. */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig) { stop_signal = sig; }

/* Catches the stop signals, except one ignored when the program starts (SIGINT of a background
 * job, SIGHUP under nohup), which stays ignored. A second signal changes nothing: the cleanup is
 * quick (the flag is checked at every sample and line), and leaving it would leave the shards.
 * Without SA_RESTART, a read from a pipe that waits for more text is interrupted too (the writes
 * retry). */
static void catch_stop_signals(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa;
        if (sigaction(sigs[i], NULL, &old) != 0 || old.sa_handler == SIG_IGN)
            continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_stop_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = 0;
        sigaction(sigs[i], &sa, NULL);
    }
}

static const char *signal_name(int sig)
{
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal";
}

/* After the cleanup, ends the process by the signal that stopped it, so that the caller (a shell,
 * make) sees the run killed rather than failed. */
static void die_by_stop_signal(void)
{
    int sig = stop_signal;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
    fflush(NULL);
    raise(sig);
}

/* ---- output: one file or a folder of shards --------------------------------------------------- */

typedef struct {
    const char *out;
    int folder, made_folder; /* made_folder: this run made the folder */
    int replace;             /* --force over a folder's shards: the new set is written under staged
                              * names and replaces the old one only once it is whole */
    long per_shard;
    int max_len, max_pred, vocab_size;
    uint64_t seed;
    uint32_t flags;
    shard_writer *w;
    int files;
    long samples, tokens, masked, random_next;
} sink;

/* Path of the i-th shard of a folder output (staged, not named *.bin, while it replaces a set). */
static void shard_path(const sink *k, int i, char *path, size_t n)
{
    if (k->folder)
        snprintf(path, n, k->replace ? "%s/.shard-%05d.bin.new" : "%s/shard-%05d.bin", k->out, i);
    else
        snprintf(path, n, "%s", k->out);
}

/* The whole new set is written: the old shard-*.bin files go, the staged ones take their names. */
static int replace_shards(sink *k, unpad_err *err)
{
    DIR *d = opendir(k->out);
    if (!d)
        return unpad_fail(err, UNPAD_EIO, k->out, 0, "cannot open the folder: %s", strerror(errno));
    struct dirent *de;
    int rc = UNPAD_OK;
    while ((de = readdir(d)) && !rc) {
        size_t l = strlen(de->d_name);
        if (l > 10 && !strncmp(de->d_name, "shard-", 6) && !strcmp(de->d_name + l - 4, ".bin")) {
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", k->out, de->d_name);
            if (remove(p))
                rc = unpad_fail(err, UNPAD_EIO, p, 0, "cannot remove the old shard: %s", strerror(errno));
        }
    }
    closedir(d);
    for (int i = 0; i < k->files && !rc; i++) {
        char from[4096], to[4096];
        shard_path(k, i, from, sizeof from);
        snprintf(to, sizeof to, "%s/shard-%05d.bin", k->out, i);
        if (rename(from, to))
            rc = unpad_fail(err, UNPAD_EIO, to, 0, "cannot rename %s to it: %s", from, strerror(errno));
    }
    return rc;
}

static int sink_emit(void *ctx, const shard_sample *s, unpad_err *err)
{
    sink *k = ctx;
    int rc;
    if (stop_signal)
        return unpad_fail(err, UNPAD_EINVAL, k->out, 0, "stopped by %s", signal_name(stop_signal));
    if (!k->w) {
        char path[4096];
        shard_path(k, k->files, path, sizeof path);
        if ((rc = shard_writer_open(path, k->max_len, k->max_pred, k->vocab_size, k->seed, k->flags,
                                    &k->w, err)))
            return rc;
    }
    if ((rc = shard_writer_add(k->w, s, err)))
        return rc;
    k->samples++;
    k->tokens += s->len;
    k->masked += s->n_pred;
    k->random_next += s->nsp;
    if (k->folder && (long)shard_writer_count(k->w) == k->per_shard) {
        shard_writer *w = k->w;
        k->w = NULL;
        if ((rc = shard_writer_close(w, err)))
            return rc;
        k->files++;
    }
    return UNPAD_OK;
}

/* Closes the last shard. A failed or stopped run removes the shards it completed (and the folder
 * when it made it and it is left empty), so a folder never holds part of a set that reads as a
 * whole smaller one. */
static int sink_finish(sink *k, int rc, unpad_err *err)
{
    if (!rc && stop_signal) /* a signal after the last sample: the set is not closed yet */
        rc = unpad_fail(err, UNPAD_EINVAL, k->out, 0, "stopped by %s", signal_name(stop_signal));
    if (k->w) {
        if (rc) {
            shard_writer_abort(k->w);
        } else {
            rc = shard_writer_close(k->w, err);
            k->files += rc == UNPAD_OK;
        }
        k->w = NULL;
    }
    if (rc && k->folder) /* the staged or written shards of this run; an old set replaced stays */
        for (int i = 0; i < k->files; i++) {
            char path[4096];
            shard_path(k, i, path, sizeof path);
            remove(path);
        }
    if (!rc && k->replace)
        rc = replace_shards(k, err);
    if (rc && k->made_folder)
        rmdir(k->out); /* fails, harmlessly, when the folder holds anything else */
    return rc;
}

/* Makes the folder (*made: 1 when this call made it). A folder with shard-*.bin files is refused
 * without force; with it, *replace is set and nothing is removed yet (replace_shards, once the new
 * set is whole). Another *.bin file is refused either way. */
static int prepare_folder(const char *dir, int force, int *made, int *replace, unpad_err *err)
{
    *replace = 0;
    *made = mkdir(dir, 0777) == 0;
    if (!*made && errno != EEXIST)
        return unpad_fail(err, UNPAD_EIO, dir, 0, "cannot make the folder: %s", strerror(errno));
    DIR *d = opendir(dir);
    if (!d)
        return unpad_fail(err, UNPAD_EIO, dir, 0, "cannot open the folder: %s", strerror(errno));
    struct dirent *de;
    int rc = UNPAD_OK;
    while ((de = readdir(d)) && !rc) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 4, ".bin") != 0)
            continue;
        if (!force) {
            rc = unpad_fail(err, UNPAD_EINVAL, dir, 0,
                            "the folder already holds shards (%s); remove them, choose another "
                            "folder, or add --force to replace them", de->d_name);
        } else if (strncmp(de->d_name, "shard-", 6) == 0) {
            *replace = 1;
        } else {
            rc = unpad_fail(err, UNPAD_EINVAL, dir, 0,
                            "the folder holds %s, which is not ours to replace; a reader would mix "
                            "it in", de->d_name);
        }
    }
    closedir(d);
    return rc;
}

/* What the text gave and what it lost on the way (nothing is dropped without a count). */
static void print_text_summary(const pretrain_corpus *c, const pretrain_stats *st)
{
    const wordpiece_counts *wc = pretrain_corpus_counts(c);
    double t = st->text_tokens > 0 ? (double)st->text_tokens : 1.0;
    printf("text tokens  %ld (over %s): %ld in samples (%.2f%%), %ld cut by truncation to --max-len "
           "(%.2f%%); random B segments add %ld copied tokens\n",
           st->text_tokens, st->text_tokens == pretrain_corpus_tokens(c) ? "one pass" : "all passes",
           st->kept_tokens, 100.0 * (double)st->kept_tokens / t, st->cut_tokens,
           100.0 * (double)st->cut_tokens / t, st->random_tokens);
    if (st->split_sentences)
        printf("long lines   %ld sentence%s longer than --max-len - 3 tokens split into %ld pieces "
               "of up to %d tokens (not dropped)\n",
               st->split_sentences, st->split_sentences == 1 ? "" : "s", st->split_pieces,
               PRETRAIN_PIECE_TOKENS);
    if (wc->unk_words || wc->invalid_bytes || wc->dropped_chars)
        printf("tokenizer    %ld word%s became [UNK] (over %d characters or not in the vocabulary); "
               "%ld invalid UTF-8 byte%s and %ld control character%s dropped\n",
               wc->unk_words, wc->unk_words == 1 ? "" : "s", WORDPIECE_MAX_WORD_CHARS,
               wc->invalid_bytes, wc->invalid_bytes == 1 ? "" : "s", wc->dropped_chars,
               wc->dropped_chars == 1 ? "" : "s");
    if (wc->invalid_bytes) /* the letters of those words are gone from the shards: say why, where it is seen */
        fprintf(stderr, "unpad-data: warning: %ld byte%s of the text %s not UTF-8 and dropped, with the letters "
                        "they encoded; text in another encoding (Latin-1, say) is converted first, e.g. "
                        "iconv -f latin1 -t utf-8\n",
                wc->invalid_bytes, wc->invalid_bytes == 1 ? "" : "s", wc->invalid_bytes == 1 ? "is" : "are");
}

static void print_summary(const sink *k, double secs)
{
    printf("wrote %ld samples, %ld tokens (mean %.1f), %ld masked (%.2f per sample), %.1f%% random "
           "next, to %s (%d file%s) in %.2f s\n",
           k->samples, k->tokens, k->samples ? (double)k->tokens / (double)k->samples : 0.0,
           k->masked, k->samples ? (double)k->masked / (double)k->samples : 0.0,
           k->samples ? 100.0 * (double)k->random_next / (double)k->samples : 0.0, k->out,
           k->files, k->files == 1 ? "" : "s", secs);
}

/* Refuses any of files[0..n) (NULL or missing ones skipped) that is a *.bin file in folder dir, or
 * dir itself: the run would read and write the same shards. */
static int folder_check(const char *dir, const char *const *inputs, int n, unpad_err *err)
{
    char rdir[PATH_MAX], rin[PATH_MAX];
    if (!realpath(dir, rdir))
        return outfile_check_inputs(dir, inputs, n, err); /* not there yet: only the name itself */
    for (int i = 0; i < n; i++) {
        if (!inputs[i] || !realpath(inputs[i], rin))
            continue;
        char *slash = strrchr(rin, '/');
        size_t l = strlen(rin);
        int in_dir = slash && (size_t)(slash - rin) == strlen(rdir) &&
                     strncmp(rin, rdir, (size_t)(slash - rin)) == 0;
        if (!strcmp(rin, rdir) || (in_dir && l > 4 && !strcmp(rin + l - 4, ".bin")))
            return unpad_fail(err, UNPAD_EINVAL, dir, 0,
                              "%s is a shard in this folder, which the run both reads and writes: "
                              "refused before any work; write elsewhere", inputs[i]);
    }
    return UNPAD_OK;
}

/* Refuses a folder the run cannot make files in (read-only, not its own, or one like /proc): a
 * file is made there and removed, as the permission bits do not tell (root, mounts). path names the
 * output in the message. */
static int check_writable(const char *path, const char *dir, unpad_err *err)
{
    char probe[PATH_MAX];
    if (snprintf(probe, sizeof probe, "%s/.unpad-data-XXXXXX", dir) >= (int)sizeof probe)
        return unpad_fail(err, UNPAD_EINVAL, path, 0, "path too long");
    int fd = mkstemp(probe);
    if (fd < 0)
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot write in the folder %s: %s (refused before any work)",
                          dir, strerror(errno));
    close(fd);
    unlink(probe);
    return UNPAD_OK;
}

/* Refuses, before any work, a file output in a folder that is not there or not writable, and, as a
 * folder output refuses one with shards in it, a file that is there already (a regular file: a
 * text corpus, a shard) unless force; a device or pipe is written as it is. */
static int file_check(const char *out, int force, const char *const *inputs, int n, unpad_err *err)
{
    struct stat st;
    if (outfile_is_stdout(out))
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "--out -: a shard cannot go to standard output (its header is written last, at "
                          "the start of the file); give a file name");
    int rc = outfile_check_all(&out, 1, inputs, n, err); /* an input, a folder, no such folder */
    if (rc)
        return rc;
    if (!force && stat(out, &st) == 0 && S_ISREG(st.st_mode))
        return unpad_fail(err, UNPAD_EINVAL, out, 0,
                          "the file is already there; remove it, choose another name, or add --force to "
                          "replace it (refused before any work)");
    if (stat(out, &st) == 0 && !S_ISREG(st.st_mode))
        return UNPAD_OK; /* a device or pipe, opened as it is */
    char dir[PATH_MAX];
    const char *slash = strrchr(out, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (slash == out ? 1 : (int)(slash - out)) : 1, slash ? out : ".");
    return check_writable(out, dir, err);
}

/* ---- inspect ---------------------------------------------------------------------------------- */

static void print_ids(const wordpiece_vocab *v, const int32_t *ids, int n)
{
    if (v) {
        size_t need = wordpiece_decode(v, ids, n, NULL, 0);
        char *buf = malloc(need + 1);
        if (buf) {
            wordpiece_decode(v, ids, n, buf, need + 1);
            printf("%s", buf);
            free(buf);
        }
        return;
    }
    for (int k = 0; k < n; k++)
        printf("%s%d", k ? " " : "", (int)ids[k]);
}

static int inspect(const char *path, const char *vocab_path, long show, const char *hist_path)
{
    unpad_err err = {0};
    wordpiece_vocab *v = NULL;
    shard *s = NULL;
    if (vocab_path && wordpiece_vocab_load(vocab_path, &v, &err))
        return fail(&err);
    if (shard_open(path, &s, &err)) {
        wordpiece_vocab_free(v);
        return fail(&err);
    }
    const shard_info *in = shard_get_info(s);
    long n = shard_count(s);
    const int *len = shard_lengths(s);
    int lmin = n ? len[0] : 0, lmax = 0;
    long nsp1 = 0;
    shard_sample smp;
    int rc = shard_sample_alloc(&smp, (int)in->max_len, (int)in->max_pred);
    for (long i = 0; i < n; i++) {
        lmin = len[i] < lmin ? len[i] : lmin;
        lmax = len[i] > lmax ? len[i] : lmax;
    }
    printf("shard        %s (%d file%s)\n", path, in->n_files, in->n_files == 1 ? "" : "s");
    printf("format       version %u, %u-byte token ids, vocabulary %u\n", in->version,
           in->token_bytes, in->vocab_size);
    printf("limits       max_len %u, max_pred %u\n", in->max_len, in->max_pred);
    printf("made         seed %llu, %s\n", (unsigned long long)in->seed,
           in->flags & SHARD_FLAG_SYNTHETIC ? "synthetic tokens" : "from text");
    printf("samples      %ld\n", n);
    printf("tokens       %llu (length mean %.1f, min %d, max %d)\n",
           (unsigned long long)in->n_tokens, n ? (double)in->n_tokens / (double)n : 0.0, lmin, lmax);
    printf("masked       %llu (%.2f per sample, %.1f%% of tokens)\n",
           (unsigned long long)in->n_masked, n ? (double)in->n_masked / (double)n : 0.0,
           in->n_tokens ? 100.0 * (double)in->n_masked / (double)in->n_tokens : 0.0);
    if (v && (uint32_t)wordpiece_vocab_size(v) != in->vocab_size)
        printf("warning      the vocabulary has %d tokens, the shard was made with %u\n",
               wordpiece_vocab_size(v), in->vocab_size);
    /* Every sample is read, so its ids, segments and positions are checked too. */
    for (long i = 0; i < n && rc == UNPAD_OK; i++) {
        if ((rc = shard_read(s, i, &smp, &err)))
            break;
        nsp1 += smp.nsp;
        if (i >= show)
            continue;
        int a = 0;
        while (a < smp.len && smp.segments[a] == 0)
            a++;
        printf("\nsample %ld: %d tokens (segment A %d, B %d), nsp %d (%s), %d masked\n  ", i,
               smp.len, a, smp.len - a, smp.nsp, smp.nsp ? "B is random" : "B follows A",
               smp.n_pred);
        print_ids(v, smp.tokens, smp.len);
        printf("\n  masked:");
        for (int k = 0; k < smp.n_pred; k++) {
            printf(" %d=", (int)smp.mpos[k]);
            print_ids(v, &smp.mlabels[k], 1);
        }
        printf("\n");
    }
    if (rc == UNPAD_OK)
        printf("\nchecked      all %ld samples: ids, segments and masked positions valid; %.1f%% with "
               "a random B\n", n, n ? 100.0 * (double)nsp1 / (double)n : 0.0);
    if (rc == UNPAD_OK && hist_path) {
        unpad_outfile *o = NULL;
        long *count = calloc((size_t)in->max_len + 1, sizeof *count);
        if (!count)
            rc = unpad_fail(&err, UNPAD_ENOMEM, hist_path, 0, "out of memory");
        else if (!(rc = outfile_open(hist_path, &o, &err))) {
            FILE *f = outfile_stream(o);
            for (long i = 0; i < n; i++)
                count[len[i]]++;
            fprintf(f, "# lengths of %s (%ld samples)\nlength,count\n", path, n);
            for (uint32_t l = 1; l <= in->max_len; l++)
                fprintf(f, "%u,%ld\n", l, count[l]);
            if (!(rc = outfile_commit(o, &err)))
                printf("\nlength histogram written to %s\n", hist_path);
        }
        free(count);
    }
    shard_sample_free(&smp);
    shard_close(s);
    wordpiece_vocab_free(v);
    return rc ? fail(&err) : 0;
}

/* ---- main ------------------------------------------------------------------------------------- */

enum { O_VOCAB = 1000, O_INPUT, O_OUT, O_MAXLEN, O_MAXPRED, O_SEED, O_PER_SHARD, O_SYNTH,
       O_DIST, O_SAMPLES, O_INSPECT, O_SHOW, O_HIST, O_PROB, O_SHORT, O_DUPE, O_SHUFFLE,
       O_FORMAT, O_VOCAB_SIZE, O_FORCE, O_HELP };
#define SEEN(o) (1u << ((o) - O_VOCAB))

/* The flags. */
typedef struct {
    const char *vocab_path, *out, *dist_path, *inspect_path, *hist;
    const char **inputs; /* (argc + 3): the texts, then room for the vocabulary and distribution */
    int n_inputs, synthetic, force, format;
    long samples, per_shard, show, vocab_size;
    pretrain_opts po;
    unsigned seen; /* SEEN(flag) for each flag given */
} data_opts;

/* --format auto|wikitext|lines. */
static int flag_format(const char *val, int *format)
{
    if (strcmp(val, "auto") == 0)
        *format = PRETRAIN_TEXT_AUTO;
    else if (strcmp(val, "wikitext") == 0)
        *format = PRETRAIN_TEXT_WIKITEXT;
    else if (strcmp(val, "lines") == 0)
        *format = PRETRAIN_TEXT_LINES;
    else
        return bad_flag("--format", val, "auto, wikitext or lines");
    return 0;
}

/* Returns -1 when the run goes on, else the exit code (0 after --help). */
/* An input "-" is standard input (read as a pipe is). */
static const char *stdin_name(const char *path) { return strcmp(path, "-") ? path : "/dev/stdin"; }

static int data_parse(int argc, char **argv, data_opts *d)
{
    static const struct option opts[] = {
        {"vocab", required_argument, 0, O_VOCAB}, {"input", required_argument, 0, O_INPUT},
        {"out", required_argument, 0, O_OUT}, {"max-len", required_argument, 0, O_MAXLEN},
        {"max-pred", required_argument, 0, O_MAXPRED}, {"seed", required_argument, 0, O_SEED},
        {"samples-per-shard", required_argument, 0, O_PER_SHARD},
        {"synthetic", no_argument, 0, O_SYNTH}, {"dist", required_argument, 0, O_DIST},
        {"samples", required_argument, 0, O_SAMPLES}, {"inspect", required_argument, 0, O_INSPECT},
        {"show", required_argument, 0, O_SHOW}, {"hist", required_argument, 0, O_HIST},
        {"masked-prob", required_argument, 0, O_PROB},
        {"short-seq-prob", required_argument, 0, O_SHORT}, {"dupe", required_argument, 0, O_DUPE},
        {"shuffle-buffer", required_argument, 0, O_SHUFFLE},
        {"format", required_argument, 0, O_FORMAT},
        {"vocab-size", required_argument, 0, O_VOCAB_SIZE}, {"force", no_argument, 0, O_FORCE},
        {"help", no_argument, 0, O_HELP}, {0, 0, 0, 0}};
    pretrain_opts *o = &d->po;
    long v;
    int c;
#define TAKE_LONG(flag, lo, hi, dst)                                                               \
    do {                                                                                           \
        if (flag_long(flag, optarg, lo, hi, &v))                                                   \
            return 2;                                                                              \
        dst = v;                                                                                   \
    } while (0)
    /* a flag's value given twice is refused (which one was meant?), except --input, which
     * collects */
    const char *given[sizeof opts / sizeof opts[0]] = {0};
    int at = -1;
    opterr = 0; /* said in the default case as "unpad-data: ...", not under the path it was run by */
    while ((c = getopt_long(argc, argv, ":h", opts, &at)) != -1) {
        if (c == 'h')
            c = O_HELP;
        if (optarg && at >= 0 && c != O_INPUT && unpad_flag_once("unpad-data", opts[at].name, optarg, &given[at]))
            return 2;
        at = -1;
        if (c >= O_VOCAB && c < O_HELP)
            d->seen |= SEEN(c);
        switch (c) {
        case O_VOCAB: d->vocab_path = optarg; break;
        case O_INPUT: d->inputs[d->n_inputs++] = stdin_name(optarg); break;
        case O_OUT: d->out = optarg; break;
        case O_MAXLEN: TAKE_LONG("--max-len", 5, SHARD_MAX_LEN, o->max_len); break;
        case O_MAXPRED:
            if (unpad_parse_long(optarg, &v) == 0 && v == 0)
                return bad_flag("--max-pred", optarg, "at least 1" NO_TARGETS);
            TAKE_LONG("--max-pred", 1, SHARD_MAX_LEN, o->max_pred);
            break;
        case O_SEED: TAKE_LONG("--seed", 0, 4294967295L, o->seed); break;
        case O_PER_SHARD: TAKE_LONG("--samples-per-shard", 1, 1L << 40, d->per_shard); break;
        case O_SYNTH: d->synthetic = 1; break;
        case O_DIST: d->dist_path = optarg; break;
        case O_SAMPLES: TAKE_LONG("--samples", 1, 1L << 40, d->samples); break;
        case O_INSPECT: d->inspect_path = optarg; break;
        case O_SHOW: TAKE_LONG("--show", 0, 1L << 40, d->show); break;
        case O_HIST: d->hist = optarg; break;
        case O_DUPE: TAKE_LONG("--dupe", 1, 1000, o->dupe); break;
        case O_SHUFFLE: TAKE_LONG("--shuffle-buffer", 0, 10000000, o->shuffle_buffer); break;
        case O_VOCAB_SIZE: TAKE_LONG("--vocab-size", 1001, 1L << 30, d->vocab_size); break;
        case O_FORCE: d->force = 1; break;
        case O_PROB:
            if (flag_prob("--masked-prob", optarg, &o->masked_prob))
                return 2;
            if (o->masked_prob == 0)
                return bad_flag("--masked-prob", optarg, "a share in (0, 1]" NO_TARGETS);
            break;
        case O_SHORT:
            if (flag_prob("--short-seq-prob", optarg, &o->short_seq_prob))
                return 2;
            break;
        case O_FORMAT:
            if (flag_format(optarg, &d->format))
                return 2;
            break;
        case O_HELP: usage(stdout); return 0;
        default:
            unpad_getopt_error("unpad-data", c, argc, argv);
            usage(stderr);
            return 2;
        }
    }
#undef TAKE_LONG
    for (int i = optind; i < argc; i++) /* --input a.txt b.txt: the rest are inputs too */
        d->inputs[d->n_inputs++] = stdin_name(argv[i]);
    return -1;
}

/* Each flag belongs to some of the three runs (text, synthetic, inspect); one given to another is
 * refused rather than ignored. Returns 2 (said why) when refused, else -1. */
static int data_modes(const data_opts *d)
{
    enum { TEXT = 1, SYNTH = 2, INSPECT = 4 };
    static const struct {
        int opt, modes;
        const char *flag;
    } flags[] = {{O_OUT, TEXT | SYNTH, "--out"}, {O_PER_SHARD, TEXT | SYNTH, "--samples-per-shard"},
                 {O_FORCE, TEXT | SYNTH, "--force"}, {O_MAXLEN, TEXT | SYNTH, "--max-len"},
                 {O_MAXPRED, TEXT | SYNTH, "--max-pred"}, {O_PROB, TEXT | SYNTH, "--masked-prob"},
                 {O_SEED, TEXT | SYNTH, "--seed"}, {O_INPUT, TEXT, "--input"}, {O_DUPE, TEXT, "--dupe"},
                 {O_SHORT, TEXT, "--short-seq-prob"}, {O_SHUFFLE, TEXT, "--shuffle-buffer"},
                 {O_FORMAT, TEXT, "--format"}, {O_DIST, SYNTH, "--dist"}, {O_SAMPLES, SYNTH, "--samples"},
                 {O_VOCAB_SIZE, SYNTH, "--vocab-size"}, {O_SHOW, INSPECT, "--show"},
                 {O_HIST, INSPECT, "--hist"}};
    static const char *const run_name[] = {"", "text input (--vocab, --input)", "--synthetic", "",
                                           "--inspect"};
    const int mode = d->inspect_path ? INSPECT : d->synthetic ? SYNTH : TEXT;
    if (mode == INSPECT && d->synthetic) {
        fprintf(stderr, "%s: --synthetic makes shards and does not go with --inspect\n", prog);
        return 2;
    }
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if ((d->seen & SEEN(flags[i].opt)) && !(flags[i].modes & mode)) {
            fprintf(stderr, "%s: %s does not go with %s (see --help)\n", prog, flags[i].flag, run_name[mode]);
            return 2;
        }
    if (mode == INSPECT && d->n_inputs) {
        fprintf(stderr, "%s: --inspect reads one shard or folder; drop '%s'\n", prog, d->inputs[0]);
        return 2;
    }
    if (d->vocab_path && (d->seen & SEEN(O_VOCAB_SIZE))) {
        fprintf(stderr, "%s: --vocab-size is for ids without a --vocab; the vocabulary sets the size\n", prog);
        return 2;
    }
    return -1;
}

/* --inspect, its --hist checked against the inputs first. */
static int data_inspect(const data_opts *d)
{
    const char *ins[2] = {d->inspect_path, d->vocab_path};
    const char *hist = d->hist;
    unpad_err e = {0};
    struct stat sd;
    int dir = stat(d->inspect_path, &sd) == 0 && S_ISDIR(sd.st_mode);
    if (hist && (outfile_check_inputs(hist, ins, 2, &e) || (dir && folder_check(d->inspect_path, &hist, 1, &e))))
        return fail(&e);
    return inspect(d->inspect_path, d->vocab_path, d->show, hist);
}

/* The flags a run needs, and those that do not go together; 2 (said why) when refused. */
/* One file twice (overlapping globs, a link to it) would put its text in the set twice: each input
 * is looked up once, the identities sorted, a repeat refused. */
typedef struct {
    dev_t dev;
    ino_t ino;
    int i;
} file_id;

static int file_id_cmp(const void *pa, const void *pb)
{
    const file_id *a = pa, *b = pb;
    if (a->dev != b->dev)
        return a->dev < b->dev ? -1 : 1;
    if (a->ino != b->ino)
        return a->ino < b->ino ? -1 : 1;
    return a->i - b->i;
}

static int data_inputs_once(const data_opts *d)
{
    file_id *ids = malloc(sizeof *ids * (size_t)(d->n_inputs + 1));
    if (!ids) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    int n = 0, rc = 0;
    for (int i = 0; i < d->n_inputs; i++) {
        struct stat st;
        if (stat(d->inputs[i], &st) == 0) /* else reading it says what is wrong */
            ids[n++] = (file_id){st.st_dev, st.st_ino, i};
    }
    qsort(ids, (size_t)n, sizeof *ids, file_id_cmp);
    for (int k = 1; k < n && !rc; k++)
        if (ids[k].dev == ids[k - 1].dev && ids[k].ino == ids[k - 1].ino) {
            fprintf(stderr, "%s: the input '%s' is '%s' again: give each file once (--dupe N makes N passes over "
                            "the text)\n", prog, d->inputs[ids[k].i], d->inputs[ids[k - 1].i]);
            rc = 2;
        }
    free(ids);
    return rc;
}

static int data_check(const data_opts *d)
{
    const char *missing = !d->out ? "--out" : d->synthetic && !d->dist_path ? "--dist"
                          : d->synthetic && d->samples < 0                  ? "--samples"
                          : !d->synthetic && !d->vocab_path                 ? "--vocab"
                          : !d->synthetic && !d->n_inputs                   ? "--input"
                                                                            : NULL;
    if (missing) {
        fprintf(stderr, "%s: %s is missing (see --help)\n", prog, missing);
        return 2;
    }
    if (d->synthetic && d->n_inputs) {
        fprintf(stderr, "%s: --synthetic makes its own tokens; drop the input '%s'\n", prog, d->inputs[0]);
        return 2;
    }
    if (d->po.max_pred > d->po.max_len) {
        fprintf(stderr, "%s: --max-pred %d is more than --max-len %d\n", prog, d->po.max_pred, d->po.max_len);
        return 2;
    }
    return data_inputs_once(d);
}

/* The output (one file, or a folder: when it exists, ends in '/', or --samples-per-shard is
 * given); outbuf holds "dir" for "dir/". Refuses, before any work, an output that is one of the
 * inputs (a folder: an input that is a .bin in it, since its shards are replaced), and a file that
 * is there already without --force or cannot be written where asked (a folder is checked when made,
 * also before the text is read). */
static int data_sink(data_opts *d, sink *k, char *outbuf, size_t n, unpad_err *err)
{
    const char *out = d->out;
    struct stat sb;
    size_t ol = strlen(out);
    k->out = out;
    k->folder = d->per_shard > 0 || (ol && out[ol - 1] == '/') || (stat(out, &sb) == 0 && S_ISDIR(sb.st_mode));
    k->per_shard = d->per_shard > 0 ? d->per_shard : 65536;
    k->max_len = d->po.max_len;
    k->max_pred = d->po.max_pred;
    k->seed = d->po.seed;
    k->flags = d->synthetic ? SHARD_FLAG_SYNTHETIC : 0;
    if (k->folder && ol > 1 && out[ol - 1] == '/') { /* "dir/" -> "dir" */
        snprintf(outbuf, n, "%.*s", (int)(ol - 1), out);
        k->out = outbuf;
    }
    d->inputs[d->n_inputs] = d->vocab_path;
    d->inputs[d->n_inputs + 1] = d->dist_path;
    if (k->folder)
        return folder_check(k->out, d->inputs, d->n_inputs + 2, err);
    return file_check(k->out, d->force, d->inputs, d->n_inputs + 2, err);
}

/* The samples into the sink: synthetic ones from the distribution, or pairs from the texts. */
static int data_make(const data_opts *d, sink *k, unpad_err *err)
{
    wordpiece_vocab *vocab = NULL;
    pretrain_masker m = {0};
    pretrain_corpus *corpus = NULL;
    unpad_dist dist = {0};
    int rc = UNPAD_OK, have_dist = 0;
    double t0 = unpad_now_s(), t_read = 0;
    pretrain_stats st = {0};
    if (d->vocab_path)
        rc = wordpiece_vocab_load(d->vocab_path, &vocab, err);
    if (!rc)
        rc = vocab ? pretrain_masker_from_vocab(vocab, &m, err)
                   : pretrain_masker_bert_ids((int32_t)d->vocab_size, &m, err);
    k->vocab_size = m.vocab_size;
    if (!rc)
        rc = pretrain_opts_check(&d->po, err);
    if (!rc && k->folder)
        rc = prepare_folder(k->out, d->force, &k->made_folder, &k->replace, err);
    if (!rc && k->folder)
        rc = check_writable(k->out, k->out, err);
    if (!rc && d->synthetic) {
        rc = dist_load(d->dist_path, &dist, err);
        have_dist = rc == UNPAD_OK;
        if (!rc)
            rc = pretrain_synthetic(&dist, d->samples, &d->po, &m, sink_emit, k, err);
    } else if (!rc) {
        rc = pretrain_corpus_alloc(&corpus, err);
        if (!rc)
            pretrain_corpus_stop_on(corpus, &stop_signal);
        for (int i = 0; i < d->n_inputs && !rc; i++)
            rc = pretrain_corpus_add_file(corpus, vocab, d->inputs[i], d->format, err);
        t_read = unpad_now_s() - t0;
        if (!rc)
            printf("read %d file%s: %ld documents, %ld sentences, %ld tokens in %.2f s\n", d->n_inputs,
                   d->n_inputs == 1 ? "" : "s", pretrain_corpus_documents(corpus),
                   pretrain_corpus_sentences(corpus), pretrain_corpus_tokens(corpus), t_read);
        if (!rc)
            rc = pretrain_generate(corpus, &d->po, &m, sink_emit, k, &st, err);
    }
    rc = sink_finish(k, rc, err);
    if (stop_signal) { /* the reason, whatever the error it caused */
        if (k->folder)
            rc = unpad_fail(err, UNPAD_EINVAL, k->out, 0,
                            "stopped by %s before the run was complete: removed the %d shard%s it had "
                            "written (a folder holds whole sets only)%s", signal_name(stop_signal),
                            k->files, k->files == 1 ? "" : "s",
                            k->replace ? "; the folder's earlier set is kept as it was" : "");
        else
            rc = unpad_fail(err, UNPAD_EINVAL, k->out, 0,
                            "stopped by %s before the run was complete: nothing written to it (its "
                            "temporary file removed)", signal_name(stop_signal));
    }
    if (!rc)
        print_summary(k, unpad_now_s() - t0);
    if (!rc && corpus)
        print_text_summary(corpus, &st);
    pretrain_corpus_free(corpus);
    if (have_dist)
        dist_free(&dist);
    pretrain_masker_free(&m);
    wordpiece_vocab_free(vocab);
    return rc;
}

int main(int argc, char **argv)
{
    data_opts d = {.format = PRETRAIN_TEXT_AUTO, .samples = -1, .show = 3, .vocab_size = 30522};
    pretrain_opts_default(&d.po);
    if (argc < 2) { /* nothing asked: what can be asked */
        usage(stderr);
        return 2;
    }
    if (!(d.inputs = calloc((size_t)argc + 3, sizeof *d.inputs)))
        return 1;
    int rc = data_parse(argc, argv, &d);
    if (rc < 0)
        rc = data_modes(&d);
    if (rc < 0 && d.inspect_path)
        rc = data_inspect(&d);
    if (rc < 0 && !(rc = data_check(&d))) {
        unpad_err err = {0};
        sink k = {0};
        char outbuf[4096], distbuf[RESOLVE_PATH_LEN];
        if (d.dist_path && !resolve_named(d.dist_path, "--dist", "models/dists", ".csv", distbuf, sizeof distbuf, &err))
            d.dist_path = distbuf;
        catch_stop_signals();
        if (err.msg[0] || data_sink(&d, &k, outbuf, sizeof outbuf, &err) || data_make(&d, &k, &err))
            rc = fail(&err);
        if (stop_signal)
            die_by_stop_signal();
    }
    free(d.inputs);
    return rc;
}
