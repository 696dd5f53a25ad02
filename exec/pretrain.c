/* pretrain.c — sentence pairs, truncation and masking for BERT pre-training (see pretrain.h). */
#include "pretrain.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void pretrain_opts_default(pretrain_opts *o)
{
    o->max_len = 512;
    o->max_pred = 76;
    o->masked_prob = 0.15;
    o->short_seq_prob = 0.1;
    o->dupe = 1;
    o->shuffle_buffer = 10000;
    o->seed = 12345;
}

int pretrain_opts_check(const pretrain_opts *o, unpad_err *err)
{
    if (o->max_len < 5 || o->max_len > SHARD_MAX_LEN)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "max_len %d outside 5..%d", o->max_len,
                          SHARD_MAX_LEN);
    if (o->max_pred < 0 || o->max_pred > o->max_len)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "max_pred %d outside 0..max_len (%d)",
                          o->max_pred, o->max_len);
    if (!(o->masked_prob >= 0 && o->masked_prob <= 1) ||
        !(o->short_seq_prob >= 0 && o->short_seq_prob <= 1))
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "probabilities must lie in [0, 1] (masked %g, short sequences %g)",
                          o->masked_prob, o->short_seq_prob);
    if (o->dupe < 1)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "dupe %d: at least one pass", o->dupe);
    return UNPAD_OK;
}

/* ---- masking ---------------------------------------------------------------------------------- */

int pretrain_masker_from_vocab(const wordpiece_vocab *v, pretrain_masker *m, unpad_err *err)
{
    memset(m, 0, sizeof *m);
    const wordpiece_special *sp = wordpiece_vocab_special(v);
    m->cls = sp->cls, m->sep = sp->sep, m->mask = sp->mask, m->pad = sp->pad, m->unk = sp->unk;
    m->vocab_size = wordpiece_vocab_size(v);
    m->random_ids = malloc((size_t)m->vocab_size * sizeof *m->random_ids);
    if (!m->random_ids)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    for (int32_t id = 0; id < m->vocab_size; id++)
        if (!wordpiece_vocab_is_reserved(v, id))
            m->random_ids[m->n_random++] = id;
    if (m->n_random == 0) {
        pretrain_masker_free(m);
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "the vocabulary has no ordinary tokens");
    }
    return UNPAD_OK;
}

int pretrain_masker_bert_ids(int32_t vocab_size, pretrain_masker *m, unpad_err *err)
{
    memset(m, 0, sizeof *m);
    if (vocab_size <= 1000)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "vocabulary size %d: the BERT id layout needs more than 1000 (or give a "
                          "vocabulary file)", (int)vocab_size);
    m->pad = 0, m->unk = 100, m->cls = 101, m->sep = 102, m->mask = 103;
    m->vocab_size = vocab_size;
    m->n_random = vocab_size - 999;
    m->random_ids = malloc((size_t)m->n_random * sizeof *m->random_ids);
    if (!m->random_ids)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    for (int32_t k = 0; k < m->n_random; k++)
        m->random_ids[k] = 999 + k;
    return UNPAD_OK;
}

void pretrain_masker_free(pretrain_masker *m)
{
    free(m->random_ids);
    memset(m, 0, sizeof *m);
}

void pretrain_mask(const pretrain_masker *m, double prob, int max_pred, gsl_rng *rng, shard_sample *s)
{
    /* Candidates in perm (partial Fisher-Yates: only the first k are shuffled into place). */
    int32_t *chosen = s->mpos;
    int nc = 0;
    int len = s->len;
    int want = (int)rint(len * prob);
    if (want < 1)
        want = 1;
    if (want > max_pred)
        want = max_pred;
    int32_t perm_buf[1024], *perm = len <= 1024 ? perm_buf : malloc((size_t)len * sizeof *perm);
    if (!perm) { /* cannot happen for len <= 65535 in practice; mask nothing rather than crash */
        s->n_pred = 0;
        return;
    }
    for (int i = 0; i < len; i++)
        if (s->tokens[i] != m->cls && s->tokens[i] != m->sep)
            perm[nc++] = i;
    int k = want < nc ? want : nc;
    for (int i = 0; i < k; i++) {
        int j = i + (int)gsl_rng_uniform_int(rng, (unsigned long)(nc - i));
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
        chosen[i] = perm[i];
    }
    if (perm != perm_buf)
        free(perm);
    for (int i = 1; i < k; i++) { /* insertion sort: k <= max_pred, small */
        int32_t v = chosen[i];
        int j = i - 1;
        while (j >= 0 && chosen[j] > v) {
            chosen[j + 1] = chosen[j];
            j--;
        }
        chosen[j + 1] = v;
    }
    for (int i = 0; i < k; i++) {
        int p = chosen[i];
        s->mlabels[i] = s->tokens[p];
        if (gsl_rng_uniform(rng) < 0.8)
            s->tokens[p] = m->mask;
        else if (gsl_rng_uniform(rng) >= 0.5)
            s->tokens[p] = m->random_ids[gsl_rng_uniform_int(rng, (unsigned long)m->n_random)];
        /* else: kept as it is */
    }
    s->n_pred = k;
}

/* ---- corpus ----------------------------------------------------------------------------------- */

struct pretrain_corpus {
    wordpiece_ids tok; /* all token ids, sentence after sentence */
    long *sent;        /* (n_sent + 1) start of each sentence in tok; sent[n_sent] = tok.n */
    long n_sent, cap_sent;
    long *doc;         /* (n_doc + 1) first sentence of each document; doc[n_doc] = n_sent */
    long n_doc, cap_doc;
    long open_first;   /* first sentence of the document being read */
    wordpiece_counts counts; /* what tokenizing dropped */
    const volatile sig_atomic_t *stop; /* reading stops while *stop is nonzero (NULL: never) */
};

static int grow_long(long **a, long *cap, long need)
{
    if (need <= *cap)
        return 0;
    long c = *cap ? *cap : 1024;
    while (c < need)
        c *= 2;
    long *na = realloc(*a, (size_t)c * sizeof *na);
    if (!na)
        return -1;
    *a = na;
    *cap = c;
    return 0;
}

int pretrain_corpus_alloc(pretrain_corpus **out, unpad_err *err)
{
    pretrain_corpus *c = calloc(1, sizeof *c);
    if (!c || grow_long(&c->sent, &c->cap_sent, 1) || grow_long(&c->doc, &c->cap_doc, 1)) {
        pretrain_corpus_free(c);
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    }
    c->sent[0] = 0;
    c->doc[0] = 0;
    *out = c;
    return UNPAD_OK;
}

void pretrain_corpus_free(pretrain_corpus *c)
{
    if (!c)
        return;
    wordpiece_ids_free(&c->tok);
    free(c->sent);
    free(c->doc);
    free(c);
}

void pretrain_corpus_stop_on(pretrain_corpus *c, const volatile sig_atomic_t *stop) { c->stop = stop; }

long pretrain_corpus_documents(const pretrain_corpus *c) { return c->n_doc; }
long pretrain_corpus_sentences(const pretrain_corpus *c) { return c->n_sent; }
long pretrain_corpus_tokens(const pretrain_corpus *c) { return c->tok.n; }
const wordpiece_counts *pretrain_corpus_counts(const pretrain_corpus *c) { return &c->counts; }

/* Tokenizes one sentence; an empty one is dropped. */
static int add_sentence(pretrain_corpus *c, const wordpiece_vocab *v, const char *text, size_t n,
                        unpad_err *err)
{
    int rc = wordpiece_tokenize(v, text, n, &c->tok, &c->counts, err);
    if (rc)
        return rc;
    if (c->tok.n == c->sent[c->n_sent])
        return UNPAD_OK;
    if (grow_long(&c->sent, &c->cap_sent, c->n_sent + 2))
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    c->sent[++c->n_sent] = c->tok.n;
    return UNPAD_OK;
}

/* Ends the document being read (an empty one leaves no trace). */
static int end_document(pretrain_corpus *c, unpad_err *err)
{
    if (c->n_sent == c->open_first)
        return UNPAD_OK;
    if (grow_long(&c->doc, &c->cap_doc, c->n_doc + 2))
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    c->doc[++c->n_doc] = c->n_sent;
    c->open_first = c->n_sent;
    return UNPAD_OK;
}

int pretrain_corpus_add_document(pretrain_corpus *c, const wordpiece_vocab *v,
                                 const char *const *sentences, int n, unpad_err *err)
{
    for (int k = 0; k < n; k++) {
        int rc = add_sentence(c, v, sentences[k], strlen(sentences[k]), err);
        if (rc)
            return rc;
    }
    return end_document(c, err);
}

/* Heading level of a WikiText line (" = T = " 1, " = = T = = " 2, ...), 0 for text. */
static int wikitext_heading(const char *s, size_t n)
{
    while (n && (*s == ' ' || *s == '\t'))
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        n--;
    if (n < 3 || s[0] != '=' || s[n - 1] != '=')
        return 0;
    int level = 0;
    size_t i = 0;
    while (i + 1 < n && s[i] == '=' && s[i + 1] == ' ')
        level++, i += 2;
    return level;
}

static int is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
            return 0;
    return 1;
}

/* WikiText's markers in place: "<unk>" -> "[UNK]", "@-@" -> " - " (also @,@ and @.@). */
static void wikitext_clean(char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int before = i == 0 || s[i - 1] == ' ';
        if (s[i] == '<' && before && i + 5 <= n && memcmp(s + i, "<unk>", 5) == 0 &&
            (i + 5 == n || s[i + 5] == ' ' || s[i + 5] == '\n')) {
            memcpy(s + i, "[UNK]", 5);
            i += 4;
        } else if (s[i] == '@' && i + 3 <= n && s[i + 2] == '@' &&
                   (s[i + 1] == '-' || s[i + 1] == ',' || s[i + 1] == '.')) {
            s[i] = ' ';
            s[i + 2] = ' ';
            i += 2;
        }
    }
}

/* One WikiText paragraph line: sentences end after " . ", " ? " or " ! ". */
static int add_wikitext_line(pretrain_corpus *c, const wordpiece_vocab *v, char *line, size_t n,
                             unpad_err *err)
{
    size_t start = 0;
    for (size_t i = 1; i + 2 <= n; i++) {
        char ch = line[i];
        if ((ch == '.' || ch == '?' || ch == '!') && line[i - 1] == ' ' &&
            (i + 1 == n || line[i + 1] == ' ' || line[i + 1] == '\n')) {
            wikitext_clean(line + start, i + 1 - start);
            int rc = add_sentence(c, v, line + start, i + 1 - start, err);
            if (rc)
                return rc;
            start = i + 1;
        }
    }
    if (start < n && !is_blank(line + start, n - start)) {
        wikitext_clean(line + start, n - start);
        return add_sentence(c, v, line + start, n - start, err);
    }
    return UNPAD_OK;
}

/* One line of a text file (n bytes, may be changed in place), format decided on the first line
 * with text. A byte-order mark opening the file is skipped. */
static int corpus_line(pretrain_corpus *c, const wordpiece_vocab *v, const char *path, int *format,
                       long lineno, char *line, size_t n, unpad_err *err)
{
    if (lineno == 1 && n >= 3 && memcmp(line, "\xEF\xBB\xBF", 3) == 0) { /* a UTF-8 byte-order mark */
        line += 3;
        n -= 3;
    }
    if (lineno == 1 && n >= 8 && memcmp(line, SHARD_MAGIC, 8) == 0)
        return unpad_fail(err, UNPAD_EINVAL, path, 0,
                          "this is a shard, not text: give plain text to --input, or use "
                          "--inspect to look at a shard");
    const char *nul = memchr(line, '\0', n);
    if (nul)
        return unpad_fail(err, UNPAD_EINVAL, path, (int)lineno,
                          "a NUL byte (byte %ld of the line): this is not a text file (expected "
                          "UTF-8 text)", (long)(nul - line));
    if (*format == PRETRAIN_TEXT_AUTO && !is_blank(line, n))
        *format = wikitext_heading(line, n) == 1 ? PRETRAIN_TEXT_WIKITEXT : PRETRAIN_TEXT_LINES;
    if (*format == PRETRAIN_TEXT_WIKITEXT) {
        int level = wikitext_heading(line, n);
        if (level == 1)
            return end_document(c, err);
        if (level == 0 && !is_blank(line, n))
            return add_wikitext_line(c, v, line, n, err);
        return UNPAD_OK;
    }
    if (*format == PRETRAIN_TEXT_LINES)
        return is_blank(line, n) ? end_document(c, err) : add_sentence(c, v, line, n, err);
    return UNPAD_OK;
}

/* Reads the next line of f (with its "\n") into *buf; 1, 0 at the end, -1 when longer than max. */
static int read_line(FILE *f, char **buf, size_t *cap, size_t *n, size_t max)
{
    size_t k = 0;
    int ch = EOF;
    while ((ch = getc_unlocked(f)) != EOF) {
        if (k + 2 > *cap) {
            size_t nc = *cap ? *cap * 2 : 4096;
            char *nb = realloc(*buf, nc);
            if (!nb)
                return -2;
            *buf = nb;
            *cap = nc;
        }
        (*buf)[k++] = (char)ch;
        if (ch == '\n')
            break;
        if (k > max)
            return -1;
    }
    if (k == 0)
        return 0;
    (*buf)[k] = '\0';
    *n = k;
    return 1;
}

int pretrain_corpus_add_file(pretrain_corpus *c, const wordpiece_vocab *v, const char *path,
                             int format, unpad_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return unpad_fail(err, UNPAD_EIO, path, 0, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode))) {
        fclose(f);
        return unpad_fail(err, UNPAD_EINVAL, path, 0,
                          "not a regular file or a pipe (a folder or a device): refused; give a "
                          "text file");
    }
    char *line = NULL;
    size_t cap = 0, n = 0;
    long lineno = 0;
    int rc = UNPAD_OK, got;
    while ((got = read_line(f, &line, &cap, &n, PRETRAIN_MAX_LINE)) > 0) {
        lineno++;
        if (c->stop && *c->stop) {
            rc = unpad_fail(err, UNPAD_EINVAL, path, (int)lineno, "reading stopped");
            break;
        }
        if ((rc = corpus_line(c, v, path, &format, lineno, line, n, err)))
            break;
    }
    if (got == -1)
        rc = unpad_fail(err, UNPAD_EINVAL, path, (int)(lineno + 1),
                        "a line longer than %ld bytes: refused (is this text?)",
                        (long)PRETRAIN_MAX_LINE);
    else if (got == -2)
        rc = unpad_fail(err, UNPAD_ENOMEM, path, (int)(lineno + 1), "out of memory for a line");
    if (!rc && ferror(f))
        rc = unpad_fail(err, UNPAD_EIO, path, (int)lineno, "read error: %s", strerror(errno));
    free(line);
    fclose(f);
    if (!rc)
        rc = end_document(c, err); /* documents do not continue into the next file */
    return rc;
}

int pretrain_corpus_add_text(pretrain_corpus *c, const wordpiece_vocab *v, const char *name,
                             const char *text, size_t len, int format, unpad_err *err)
{
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    int rc = UNPAD_OK;
    for (const char *p = text, *end = text + len; p < end && !rc;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = (size_t)((nl ? nl + 1 : end) - p);
        if (n + 1 > cap) {
            char *nb = realloc(line, n + 1);
            if (!nb) {
                rc = unpad_fail(err, UNPAD_ENOMEM, name, 0, "out of memory");
                break;
            }
            line = nb;
            cap = n + 1;
        }
        memcpy(line, p, n);
        line[n] = '\0';
        p += n;
        rc = corpus_line(c, v, name, &format, ++lineno, line, n, err);
    }
    free(line);
    if (!rc)
        rc = end_document(c, err);
    return rc;
}

/* ---- shuffle buffer --------------------------------------------------------------------------- */

typedef struct {
    int len, n_pred, nsp;
    int32_t *data; /* tokens[len], segments[len], mpos[n_pred], mlabels[n_pred] */
} held_sample;

typedef struct {
    held_sample *h;
    int n, cap;
    gsl_rng *rng;
    pretrain_emit_fn emit;
    void *ctx;
    shard_sample view;
} shuffler;

static int held_store(held_sample *h, const shard_sample *s)
{
    size_t words = 2 * (size_t)s->len + 2 * (size_t)s->n_pred;
    int32_t *d = realloc(h->data, words * sizeof *d);
    if (!d)
        return -1;
    h->data = d;
    h->len = s->len, h->n_pred = s->n_pred, h->nsp = s->nsp;
    memcpy(d, s->tokens, (size_t)s->len * sizeof *d);
    memcpy(d + s->len, s->segments, (size_t)s->len * sizeof *d);
    memcpy(d + 2 * s->len, s->mpos, (size_t)s->n_pred * sizeof *d);
    memcpy(d + 2 * s->len + s->n_pred, s->mlabels, (size_t)s->n_pred * sizeof *d);
    return 0;
}

static int held_emit(shuffler *sh, const held_sample *h, unpad_err *err)
{
    shard_sample *v = &sh->view;
    v->len = h->len, v->n_pred = h->n_pred, v->nsp = h->nsp;
    v->tokens = h->data;
    v->segments = h->data + h->len;
    v->mpos = h->data + 2 * h->len;
    v->mlabels = h->data + 2 * h->len + h->n_pred;
    return sh->emit(sh->ctx, v, err);
}

static int shuffler_put(shuffler *sh, const shard_sample *s, unpad_err *err)
{
    if (sh->cap <= 1)
        return sh->emit(sh->ctx, s, err);
    if (sh->n < sh->cap) {
        if (held_store(&sh->h[sh->n], s))
            return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory in the shuffle buffer");
        sh->n++;
        return UNPAD_OK;
    }
    int j = (int)gsl_rng_uniform_int(sh->rng, (unsigned long)sh->n);
    int rc = held_emit(sh, &sh->h[j], err);
    if (rc)
        return rc;
    if (held_store(&sh->h[j], s))
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory in the shuffle buffer");
    return UNPAD_OK;
}

static int shuffler_drain(shuffler *sh, unpad_err *err)
{
    for (int i = sh->n - 1; i > 0; i--) {
        int j = (int)gsl_rng_uniform_int(sh->rng, (unsigned long)(i + 1));
        held_sample t = sh->h[i];
        sh->h[i] = sh->h[j];
        sh->h[j] = t;
    }
    for (int i = 0; i < sh->n; i++) {
        int rc = held_emit(sh, &sh->h[i], err);
        if (rc)
            return rc;
    }
    return UNPAD_OK;
}

/* ---- sample generation ------------------------------------------------------------------------ */

typedef struct {
    const pretrain_corpus *c;
    const pretrain_opts *o;
    const pretrain_masker *m;
    gsl_rng *rng;
    long *order; /* (n_doc) documents in shuffled order */
    shard_sample s;
    shuffler sh;
    /* Sentences as the generator sees them: the corpus's, or with over-long ones split. */
    const long *sent;      /* (n_sent + 1) start of each sentence in c->tok */
    const long *doc;       /* (n_doc + 1) first sentence of each document */
    long *own_sent, *own_doc; /* the split index when one was needed, else NULL */
    pretrain_stats st;
} gen;

/* randint(lo, hi) inclusive, as Python's random.randint. */
static long rand_between(gsl_rng *r, long lo, long hi)
{
    return lo + (long)gsl_rng_uniform_int(r, (unsigned long)(hi - lo + 1));
}

static long sent_len(const gen *g, long k) { return g->sent[k + 1] - g->sent[k]; }

/* A and B as ranges [a0, a1) and [b0, b1) of corpus tokens: truncate, assemble, mask, emit. */
static int make_sample(gen *g, long a0, long a1, long b0, long b1, int random_next, unpad_err *err)
{
    const long max_tokens = g->o->max_len - 3, la = a1 - a0, lb = b1 - b0;
    while ((a1 - a0) + (b1 - b0) > max_tokens) {
        int cut_a = a1 - a0 > b1 - b0;
        long *front = cut_a ? &a0 : &b0, *back = cut_a ? &a1 : &b1;
        if (gsl_rng_uniform(g->rng) < 0.5)
            (*front)++;
        else
            (*back)--;
    }
    const int32_t *tok = g->c->tok.id;
    shard_sample *s = &g->s;
    int n = 0;
    s->tokens[n] = g->m->cls, s->segments[n++] = 0;
    for (long i = a0; i < a1; i++)
        s->tokens[n] = tok[i], s->segments[n++] = 0;
    s->tokens[n] = g->m->sep, s->segments[n++] = 0;
    for (long i = b0; i < b1; i++)
        s->tokens[n] = tok[i], s->segments[n++] = 1;
    s->tokens[n] = g->m->sep, s->segments[n++] = 1;
    s->len = n;
    s->nsp = random_next;
    g->st.samples++;
    g->st.kept_tokens += a1 - a0;
    g->st.cut_tokens += la - (a1 - a0);
    if (random_next) {
        g->st.random_tokens += b1 - b0;
    } else {
        g->st.kept_tokens += b1 - b0;
        g->st.cut_tokens += lb - (b1 - b0);
    }
    pretrain_mask(g->m, g->o->masked_prob, g->o->max_pred, g->rng, s);
    return shuffler_put(&g->sh, s, err);
}

/* create_instances_from_document of BERT, for the document at position di of the order. */
static int document_samples(gen *g, long di, unpad_err *err)
{
    const pretrain_corpus *c = g->c;
    const long *sent = g->sent;
    const long d = g->order[di], first = g->doc[d], last = g->doc[d + 1];
    const long max_tokens = g->o->max_len - 3;
    long target = max_tokens;
    if (gsl_rng_uniform(g->rng) < g->o->short_seq_prob)
        target = rand_between(g->rng, 2, max_tokens);
    long chunk_first = first, chunk_n = 0, chunk_len = 0;
    for (long i = first; i < last; i++) {
        chunk_n++;
        chunk_len += sent_len(g, i);
        if (i != last - 1 && chunk_len < target)
            continue;
        long a_end = 1; /* sentences of the chunk that go to A */
        if (chunk_n >= 2)
            a_end = rand_between(g->rng, 1, chunk_n - 1);
        long a0 = sent[chunk_first], a1 = sent[chunk_first + a_end], b0, b1;
        int random_next = chunk_n == 1 || gsl_rng_uniform(g->rng) < 0.5;
        if (random_next) {
            long target_b = target - (a1 - a0), rdi = di;
            for (int t = 0; t < 10 && rdi == di; t++)
                rdi = rand_between(g->rng, 0, c->n_doc - 1);
            long rd = g->order[rdi], rfirst = g->doc[rd], rlast = g->doc[rd + 1];
            long k = rand_between(g->rng, rfirst, rlast - 1);
            b0 = sent[k];
            for (b1 = b0; k < rlast; k++) {
                b1 = sent[k + 1];
                if (b1 - b0 >= target_b)
                    break;
            }
            i -= chunk_n - a_end; /* the unused sentences start the next chunk */
        } else {
            b0 = a1;
            b1 = sent[chunk_first + chunk_n];
        }
        int rc = make_sample(g, a0, a1, b0, b1, random_next, err);
        if (rc)
            return rc;
        chunk_first = i + 1;
        chunk_n = 0;
        chunk_len = 0;
    }
    return UNPAD_OK;
}

static gsl_rng *rng_alloc(uint64_t seed)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (r)
        gsl_rng_set(r, (unsigned long)(seed ? seed : 1));
    return r;
}

static void gen_free(gen *g)
{
    if (g->sh.h) {
        for (int i = 0; i < g->sh.cap; i++)
            free(g->sh.h[i].data);
        free(g->sh.h);
    }
    shard_sample_free(&g->s);
    free(g->order);
    free(g->own_sent);
    free(g->own_doc);
    if (g->rng)
        gsl_rng_free(g->rng);
}

static int gen_init(gen *g, const pretrain_opts *o, const pretrain_masker *m, long n_order,
                    pretrain_emit_fn emit, void *ctx, unpad_err *err)
{
    memset(g, 0, sizeof *g);
    g->o = o;
    g->m = m;
    int rc = pretrain_opts_check(o, err);
    if (rc)
        return rc;
    g->rng = rng_alloc(o->seed);
    g->order = malloc((size_t)(n_order > 0 ? n_order : 1) * sizeof *g->order);
    g->sh.cap = o->shuffle_buffer > 1 ? o->shuffle_buffer : 0;
    g->sh.h = g->sh.cap ? calloc((size_t)g->sh.cap, sizeof *g->sh.h) : NULL;
    g->sh.rng = g->rng;
    g->sh.emit = emit;
    g->sh.ctx = ctx;
    if (!g->rng || !g->order || (g->sh.cap && !g->sh.h) ||
        shard_sample_alloc(&g->s, o->max_len, o->max_pred)) {
        gen_free(g);
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    }
    return UNPAD_OK;
}

/* Points g at the corpus's sentences, or at a copy of the index where every sentence longer than
 * max_len - 3 tokens is split into pieces of PRETRAIN_PIECE_TOKENS (or max_len - 3 if fewer). */
static int split_long_sentences(gen *g, unpad_err *err)
{
    const pretrain_corpus *c = g->c;
    const long max_tokens = g->o->max_len - 3;
    const long piece = PRETRAIN_PIECE_TOKENS < max_tokens ? PRETRAIN_PIECE_TOKENS : max_tokens;
    long pieces = 0;
    g->sent = c->sent;
    g->doc = c->doc;
    for (long k = 0; k < c->n_sent; k++) {
        long l = c->sent[k + 1] - c->sent[k];
        if (l > max_tokens) {
            g->st.split_sentences++;
            pieces += (l + piece - 1) / piece;
        }
    }
    g->st.split_pieces = pieces;
    if (!g->st.split_sentences)
        return UNPAD_OK;
    long n = c->n_sent - g->st.split_sentences + pieces;
    g->own_sent = malloc((size_t)(n + 1) * sizeof *g->own_sent);
    g->own_doc = malloc((size_t)(c->n_doc + 1) * sizeof *g->own_doc);
    if (!g->own_sent || !g->own_doc)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory to split long sentences");
    long j = 0, d = 0;
    for (long k = 0; k < c->n_sent; k++) {
        if (d <= c->n_doc && c->doc[d] == k)
            g->own_doc[d++] = j;
        long a = c->sent[k], b = c->sent[k + 1];
        if (b - a > max_tokens)
            for (long t = a; t < b; t += piece)
                g->own_sent[j++] = t;
        else
            g->own_sent[j++] = a;
    }
    while (d <= c->n_doc)
        g->own_doc[d++] = j;
    g->own_sent[j] = c->sent[c->n_sent];
    g->sent = g->own_sent;
    g->doc = g->own_doc;
    return UNPAD_OK;
}

int pretrain_generate(const pretrain_corpus *c, const pretrain_opts *o, const pretrain_masker *m,
                      pretrain_emit_fn emit, void *ctx, pretrain_stats *stats, unpad_err *err)
{
    if (stats)
        memset(stats, 0, sizeof *stats);
    if (c->n_doc == 0)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "no text: the input holds no sentences");
    gen g;
    int rc = gen_init(&g, o, m, c->n_doc, emit, ctx, err);
    if (rc)
        return rc;
    g.c = c;
    if ((rc = split_long_sentences(&g, err))) {
        gen_free(&g);
        return rc;
    }
    for (long d = 0; d < c->n_doc; d++)
        g.order[d] = d;
    for (long d = c->n_doc - 1; d > 0; d--) { /* BERT shuffles the documents once */
        long j = (long)gsl_rng_uniform_int(g.rng, (unsigned long)(d + 1));
        long t = g.order[d];
        g.order[d] = g.order[j];
        g.order[j] = t;
    }
    for (int pass = 0; pass < o->dupe && !rc; pass++) {
        g.st.text_tokens += c->tok.n;
        for (long di = 0; di < c->n_doc && !rc; di++)
            rc = document_samples(&g, di, err);
    }
    if (!rc)
        rc = shuffler_drain(&g.sh, err);
    if (stats)
        *stats = g.st;
    gen_free(&g);
    return rc;
}

int pretrain_synthetic(const unpad_dist *d, long n, const pretrain_opts *o, const pretrain_masker *m,
                       pretrain_emit_fn emit, void *ctx, unpad_err *err)
{
    for (int l = o->max_len + 1; l <= d->max_len; l++)
        if (d->count[l] > 0) {
            int top = d->max_len;
            while (d->count[top] <= 0)
                top--;
            return unpad_fail(err, UNPAD_ERANGE, d->source, 0,
                              "lengths up to %d, longer than max_len %d (raise --max-len)", top,
                              o->max_len);
        }
    pretrain_opts plain = *o;
    plain.shuffle_buffer = 0; /* samples are independent already */
    gen g;
    int rc = gen_init(&g, &plain, m, 1, emit, ctx, err);
    if (rc)
        return rc;
    dist_sampler *ds = NULL;
    /* Lengths and tokens come from two generators (seeded apart), so the lengths for a seed do not
     * depend on the masking: they are what dist_sample gives for the same file and seed. */
    rc = dist_sampler_alloc(d, o->seed, &ds, err);
    gsl_rng_set(g.rng, (unsigned long)((o->seed + 0x5bd1e995u) & 0xffffffffu) | 1u);
    shard_sample *s = &g.s;
    for (long i = 0; i < n && !rc; i++) {
        int len;
        dist_sample(ds, &len, 1);
        for (int k = 0; k < len; k++) {
            s->tokens[k] = m->random_ids[gsl_rng_uniform_int(g.rng, (unsigned long)m->n_random)];
            s->segments[k] = 0;
        }
        s->tokens[0] = m->cls;
        if (len >= 2)
            s->tokens[len - 1] = m->sep;
        if (len >= 5) { /* [CLS] A [SEP] B [SEP], |A| in 1..len-4 */
            int a = 1 + (int)gsl_rng_uniform_int(g.rng, (unsigned long)(len - 4));
            s->tokens[a + 1] = m->sep;
            for (int k = a + 2; k < len; k++)
                s->segments[k] = 1;
        }
        s->len = len;
        s->nsp = (int)gsl_rng_uniform_int(g.rng, 2);
        pretrain_mask(m, o->masked_prob, o->max_pred, g.rng, s);
        rc = emit(ctx, s, err);
    }
    dist_sampler_free(ds);
    gen_free(&g);
    return rc;
}
