/* wordpiece.c — BERT uncased basic tokenizer and WordPiece (see wordpiece.h). */
#include "wordpiece.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wordpiece_table.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

struct wordpiece_vocab {
    char *text;        /* the file, each token NUL-terminated in place */
    const char **tok;  /* (n) token of each id */
    int32_t *len;      /* (n) its length in bytes */
    uint8_t *reserved; /* (n) 1 for special and [unused...] tokens */
    int32_t n;
    int32_t *slot;     /* (mask + 1) open-addressing hash table of ids, -1 = empty */
    uint32_t mask;
    int max_bytes;     /* longest token in bytes */
    wordpiece_special sp;
};

/* ---- vocabulary ------------------------------------------------------------------------------- */

static uint32_t hash_piece(int cont, const char *s, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    if (cont) {
        h = (h ^ '#') * 16777619u;
        h = (h ^ '#') * 16777619u;
    }
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

/* Id of "##"-prefixed (cont) or plain piece s[0..n), or -1. */
static int32_t vocab_find_piece(const wordpiece_vocab *v, int cont, const char *s, size_t n)
{
    size_t full = n + (cont ? 2 : 0);
    for (uint32_t k = hash_piece(cont, s, n) & v->mask;; k = (k + 1) & v->mask) {
        int32_t id = v->slot[k];
        if (id < 0)
            return -1;
        if ((size_t)v->len[id] != full)
            continue;
        const char *t = v->tok[id];
        if (cont && (t[0] != '#' || t[1] != '#'))
            continue;
        if (memcmp(t + (cont ? 2 : 0), s, n) == 0)
            return id;
    }
}

/* Builds the vocabulary over text[0..size) (taken: freed on failure, kept by the vocabulary). */
static int vocab_build(const char *path, char *text, size_t size, wordpiece_vocab **out,
                       unpad_err *err)
{
    if (unpad_text_check(path, text, size, err)) {
        size_t n = strlen(err ? err->msg : "");
        if (err && n + 100 < sizeof err->msg)
            snprintf(err->msg + n, sizeof err->msg - n,
                     "; a WordPiece vocabulary has one token per line (e.g. "
                     "../shared/data/bert-uncased-vocab.txt)");
        free(text);
        return UNPAD_EINVAL;
    }
    long lines = 0;
    for (size_t i = 0; i < size; i++)
        lines += text[i] == '\n';
    if (size && text[size - 1] != '\n')
        lines++;
    if (lines == 0 || lines > (1L << 24)) {
        free(text);
        return unpad_fail(err, UNPAD_EINVAL, path, 0, "%s: a WordPiece vocabulary has 1 to %ld tokens",
                          lines ? "too many lines" : "empty file", 1L << 24);
    }
    wordpiece_vocab *v = calloc(1, sizeof *v);
    uint32_t cap = 16;
    while (cap < 2 * (uint32_t)lines)
        cap *= 2;
    if (v) {
        v->text = text;
        v->tok = malloc((size_t)lines * sizeof *v->tok);
        v->len = malloc((size_t)lines * sizeof *v->len);
        v->reserved = calloc((size_t)lines, 1);
        v->slot = malloc((size_t)cap * sizeof *v->slot);
        v->mask = cap - 1;
    }
    if (!v || !v->tok || !v->len || !v->reserved || !v->slot) {
        if (!v)
            free(text);
        wordpiece_vocab_free(v);
        return unpad_fail(err, UNPAD_ENOMEM, path, 0, "out of memory for %ld tokens", lines);
    }
    memset(v->slot, 0xff, (size_t)cap * sizeof *v->slot);

    char *p = text, *end = text + size;
    if (size >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) /* a UTF-8 byte-order mark: not part of a token */
        p += 3;
    char *last = end; /* blank lines closing the file (an editor's last newline) hold no token */
    while (last > p && (last[-1] == '\n' || last[-1] == '\r' || last[-1] == ' ' || last[-1] == '\t'))
        last--;
    char *last_eol = memchr(last, '\n', (size_t)(end - last));
    if (last_eol)
        end = last_eol + 1;
    for (int32_t id = 0; p < end; id++) {
        char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        char *tend = eol;
        if (tend > p && tend[-1] == '\r')
            tend--;
        int line = id + 1;
        size_t n = (size_t)(tend - p);
        const char *why = NULL;
        size_t blanks = 0;
        for (size_t k = 0; k < n; k++)
            blanks += p[k] == ' ' || p[k] == '\t' || p[k] == '\r';
        if (blanks == n)
            why = "not a WordPiece vocabulary: an empty line (expected one token per line)";
        else if (blanks)
            why = "not a WordPiece vocabulary: a token with blanks (expected one token per line; "
                  "is this a text corpus?)";
        int32_t dup = why ? -1 : vocab_find_piece(v, 0, p, n);
        if (why || dup >= 0) {
            char shown[160];
            snprintf(shown, sizeof shown, "%.*s", (int)(n < 120 ? n : 120), p);
            if (why)
                unpad_fail(err, UNPAD_EINVAL, path, line, "%s", why);
            else
                unpad_fail(err, UNPAD_EINVAL, path, line,
                           "not a WordPiece vocabulary: token '%s' already on line %d", shown, dup + 1);
            unpad_err_show_line(err, line, shown);
            wordpiece_vocab_free(v);
            return UNPAD_EINVAL;
        }
        *tend = '\0';
        v->tok[id] = p;
        v->len[id] = (int32_t)n;
        if ((int)n > v->max_bytes)
            v->max_bytes = (int)n;
        uint32_t k = hash_piece(0, p, n) & v->mask;
        while (v->slot[k] >= 0)
            k = (k + 1) & v->mask;
        v->slot[k] = id;
        v->n = id + 1;
        p = eol + 1;
    }

    static const char *names[5] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    int32_t *ids[5] = {&v->sp.pad, &v->sp.unk, &v->sp.cls, &v->sp.sep, &v->sp.mask};
    char missing[64] = "";
    for (int i = 0; i < 5; i++) {
        *ids[i] = wordpiece_vocab_find(v, names[i]);
        if (*ids[i] < 0)
            snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s",
                     *missing ? " " : "", names[i]);
        else
            v->reserved[*ids[i]] = 1;
    }
    if (*missing) {
        unpad_fail(err, UNPAD_EINVAL, path, 0,
                   "not a BERT WordPiece vocabulary: no %s among its %d tokens (expected one token "
                   "per line, e.g. ../shared/data/bert-uncased-vocab.txt)",
                   missing, v->n);
        wordpiece_vocab_free(v);
        return UNPAD_EINVAL;
    }
    for (int32_t id = 0; id < v->n; id++)
        if (strncmp(v->tok[id], "[unused", 7) == 0)
            v->reserved[id] = 1;
    *out = v;
    return UNPAD_OK;
}

int wordpiece_vocab_load(const char *path, wordpiece_vocab **out, unpad_err *err)
{
    char *text;
    size_t size;
    int rc = unpad_read_file(path, &text, &size, err);
    if (rc)
        return rc;
    return vocab_build(path, text, size, out, err);
}

int wordpiece_vocab_parse(const char *name, const char *text, size_t len, wordpiece_vocab **out,
                          unpad_err *err)
{
    char *copy = malloc(len + 1);
    if (!copy)
        return unpad_fail(err, UNPAD_ENOMEM, name, 0, "out of memory");
    memcpy(copy, text, len);
    copy[len] = '\0';
    return vocab_build(name, copy, len, out, err);
}

void wordpiece_vocab_free(wordpiece_vocab *v)
{
    if (!v)
        return;
    free(v->text);
    free(v->tok);
    free(v->len);
    free(v->reserved);
    free(v->slot);
    free(v);
}

int32_t wordpiece_vocab_size(const wordpiece_vocab *v) { return v->n; }

const wordpiece_special *wordpiece_vocab_special(const wordpiece_vocab *v) { return &v->sp; }

int32_t wordpiece_vocab_find(const wordpiece_vocab *v, const char *token)
{
    return vocab_find_piece(v, 0, token, strlen(token));
}

const char *wordpiece_vocab_token(const wordpiece_vocab *v, int32_t id)
{
    return id >= 0 && id < v->n ? v->tok[id] : NULL;
}

int wordpiece_vocab_is_reserved(const wordpiece_vocab *v, int32_t id)
{
    return id >= 0 && id < v->n && v->reserved[id];
}

/* ---- characters ------------------------------------------------------------------------------- */

/* Next code point of s[*i..n), advancing *i; -1 (one byte consumed) for invalid UTF-8. */
static int32_t utf8_next(const unsigned char *s, size_t n, size_t *i)
{
    unsigned c = s[(*i)++];
    if (c < 0x80)
        return (int32_t)c;
    int more;
    uint32_t cp, min;
    if ((c & 0xE0) == 0xC0) {
        more = 1, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        more = 2, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        more = 3, cp = c & 0x07, min = 0x10000;
    } else {
        return -1;
    }
    if (*i + (size_t)more > n)
        return -1;
    for (int k = 0; k < more; k++) {
        unsigned d = s[*i + (size_t)k];
        if ((d & 0xC0) != 0x80)
            return -1;
        cp = (cp << 6) | (d & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return -1;
    *i += (size_t)more;
    return (int32_t)cp;
}

static int utf8_put(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static int in_ranges(const uint32_t (*r)[2], size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid][0])
            hi = mid;
        else if (cp > r[mid][1])
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

enum { CH_WORD, CH_SPACE, CH_PUNCT, CH_DROP, CH_CJK };

static int is_cjk(uint32_t cp)
{
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* Class of a code point as it appears in the input (before folding). */
static int char_class(uint32_t cp)
{
    if (cp < 0x80) {
        if (cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r')
            return CH_SPACE;
        if (cp < 0x20 || cp == 0x7F)
            return CH_DROP;
        if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
            (cp >= 123 && cp <= 126))
            return CH_PUNCT;
        return CH_WORD;
    }
    if (is_cjk(cp))
        return CH_CJK;
    if (cp >= 0x10000)
        return CH_WORD;
    if (in_ranges(wp_drop, NELEM(wp_drop), cp))
        return CH_DROP;
    if (in_ranges(wp_space, NELEM(wp_space), cp))
        return CH_SPACE;
    if (in_ranges(wp_punct, NELEM(wp_punct), cp))
        return CH_PUNCT;
    return CH_WORD;
}

static int is_punct_cp(uint32_t cp)
{
    return cp < 0x10000 && (cp < 0x80 ? char_class(cp) == CH_PUNCT
                                      : in_ranges(wp_punct, NELEM(wp_punct), cp));
}

static int is_cased(uint32_t cp) { return cp < 0x10000 && in_ranges(wp_cased, NELEM(wp_cased), cp); }

static int is_case_ignorable(uint32_t cp)
{
    return cp < 0x10000 && in_ranges(wp_case_ignorable, NELEM(wp_case_ignorable), cp);
}

/* Lowercasing's final-sigma rule for the capital sigma at s[at..after): it becomes final sigma
 * when a cased letter comes before it and none after it within the same word, case-ignorable
 * characters skipped (Python's str.lower(), which BERT uses, does this). */
static int final_sigma(const unsigned char *s, size_t n, size_t at, size_t after)
{
    size_t j = at;
    int before = 0;
    while (j > 0) {
        size_t k = j - 1;
        while (k > 0 && j - k < 4 && (s[k] & 0xC0) == 0x80)
            k--;
        size_t q = k;
        int32_t cp = utf8_next(s, n, &q);
        if (cp < 0 || q != j) { /* an invalid byte: dropped */
            j--;
            continue;
        }
        j = k;
        int cls = char_class((uint32_t)cp);
        if (cls == CH_DROP || (cls != CH_SPACE && cls != CH_CJK && is_case_ignorable((uint32_t)cp)))
            continue;
        before = cls != CH_SPACE && cls != CH_CJK && is_cased((uint32_t)cp);
        break;
    }
    if (!before)
        return 0;
    for (size_t q = after; q < n;) {
        int32_t cp = utf8_next(s, n, &q);
        if (cp < 0)
            continue;
        int cls = char_class((uint32_t)cp);
        if (cls == CH_SPACE || cls == CH_CJK)
            return 1;
        if (cls == CH_DROP || is_case_ignorable((uint32_t)cp))
            continue;
        return !is_cased((uint32_t)cp);
    }
    return 1;
}

/* Lowercases cp and strips its accents into to[] (at most 3 code points); returns the count. */
static int char_fold(uint32_t cp, uint32_t to[3])
{
    if (cp < 0x80) {
        to[0] = cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
        return 1;
    }
    if (cp >= 0xAC00 && cp <= 0xD7A3) { /* Hangul syllable: NFD into its jamo */
        uint32_t s = cp - 0xAC00;
        to[0] = 0x1100 + s / 588;
        to[1] = 0x1161 + (s % 588) / 28;
        if (s % 28 == 0)
            return 2;
        to[2] = 0x11A7 + s % 28;
        return 3;
    }
    if (cp < 0x10000) {
        size_t lo = 0, hi = NELEM(wp_fold);
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (wp_fold[mid].cp == cp) {
                to[0] = wp_fold[mid].to[0];
                if (!wp_fold[mid].to[1])
                    return 1;
                to[1] = wp_fold[mid].to[1];
                return 2;
            }
            if (wp_fold[mid].cp < cp)
                lo = mid + 1;
            else
                hi = mid;
        }
    }
    to[0] = cp;
    return 1;
}

/* ---- basic tokenizer -------------------------------------------------------------------------- */

typedef struct {
    char *buf; /* the word being built (bytes) */
    size_t n, cap;
    int chars;
} word_buf;

/* Receives each word: bytes, byte count, character count, and the id of a whole special token
 * (or -1). Returns nonzero to stop. */
typedef int (*word_fn)(void *ctx, const char *w, size_t n, int chars, int32_t special);

static int word_put(word_buf *wb, uint32_t cp)
{
    if (wb->n + 4 > wb->cap) {
        size_t cap = wb->cap ? wb->cap * 2 : 256;
        char *nb = realloc(wb->buf, cap);
        if (!nb)
            return -1;
        wb->buf = nb;
        wb->cap = cap;
    }
    wb->n += (size_t)utf8_put(wb->buf + wb->n, cp);
    wb->chars++;
    return 0;
}

static int word_flush(word_buf *wb, word_fn fn, void *ctx)
{
    if (!wb->n)
        return 0;
    int rc = fn(ctx, wb->buf, wb->n, wb->chars, -1);
    wb->n = 0;
    wb->chars = 0;
    return rc;
}

/* If a special token stands alone at s[i..], its id (0 without a vocabulary) and length; else -1. */
static int32_t special_at(const wordpiece_vocab *v, const unsigned char *s, size_t n, size_t i,
                          size_t *len)
{
    if (s[i] != '[')
        return -1;
    static const char *names[5] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    const int32_t ids[5] = {v ? v->sp.pad : 0, v ? v->sp.unk : 0, v ? v->sp.cls : 0,
                            v ? v->sp.sep : 0, v ? v->sp.mask : 0}; /* no vocabulary: 0 */
    for (int k = 0; k < 5; k++) {
        size_t l = strlen(names[k]);
        if (i + l > n || memcmp(s + i, names[k], l) != 0)
            continue;
        size_t j = i + l;
        if (j < n) {
            int32_t cp = utf8_next(s, n, &j);
            if (cp < 0 || char_class((uint32_t)cp) != CH_SPACE)
                continue;
        }
        *len = l;
        return ids[k];
    }
    return -1;
}

/* Splits text into normalised words and hands each to fn. 0, -1 (out of memory) or fn's code.
 * Counts what it drops into counts (may be NULL). */
static int basic_tokenize(const wordpiece_vocab *v, const char *text, size_t n, word_fn fn, void *ctx,
                          wordpiece_counts *counts)
{
    const unsigned char *s = (const unsigned char *)text;
    word_buf wb = {0};
    int rc = 0, at_start = 1; /* at the start of a whitespace-separated token */
    for (size_t i = 0; i < n && rc == 0;) {
        size_t sl;
        int32_t sp = at_start ? special_at(v, s, n, i, &sl) : -1;
        if (sp >= 0) {
            rc = fn(ctx, text + i, sl, (int)sl, sp);
            i += sl;
            continue;
        }
        size_t at = i;
        int32_t c = utf8_next(s, n, &i);
        if (c < 0) {
            if (counts)
                counts->invalid_bytes++;
            continue;
        }
        int cls = char_class((uint32_t)c);
        at_start = cls == CH_SPACE;
        if (cls == CH_DROP) {
            if (counts)
                counts->dropped_chars++;
            continue;
        }
        if (cls == CH_SPACE) {
            rc = word_flush(&wb, fn, ctx);
            continue;
        }
        uint32_t to[3];
        int k = char_fold((uint32_t)c, to);
        if (c == 0x3A3 && final_sigma(s, n, at, i))
            to[0] = 0x3C2;
        if (cls == CH_CJK) {
            rc = word_flush(&wb, fn, ctx);
            for (int j = 0; j < k && rc == 0; j++)
                rc = word_put(&wb, to[j]);
            if (rc == 0)
                rc = word_flush(&wb, fn, ctx);
            continue;
        }
        for (int j = 0; j < k && rc == 0; j++) {
            if (is_punct_cp(to[j])) {
                rc = word_flush(&wb, fn, ctx);
                if (rc == 0)
                    rc = word_put(&wb, to[j]);
                if (rc == 0)
                    rc = word_flush(&wb, fn, ctx);
            } else {
                rc = word_put(&wb, to[j]);
            }
        }
    }
    if (rc == 0)
        rc = word_flush(&wb, fn, ctx);
    free(wb.buf);
    return rc;
}

typedef struct {
    char *out;
    size_t n, cap;
} join_ctx;

static int join_word(void *ctx, const char *w, size_t n, int chars, int32_t special)
{
    join_ctx *j = ctx;
    if (j->n + n + 2 > j->cap) {
        size_t cap = (j->cap + n + 2) * 2;
        char *nb = realloc(j->out, cap);
        if (!nb)
            return -1;
        j->out = nb;
        j->cap = cap;
    }
    if (j->n)
        j->out[j->n++] = ' ';
    memcpy(j->out + j->n, w, n);
    j->n += n;
    j->out[j->n] = '\0';
    return 0;
}

char *wordpiece_basic_tokenize(const char *text, size_t len)
{
    join_ctx j = {calloc(1, 1), 0, 1};
    if (!j.out || basic_tokenize(NULL, text, len, join_word, &j, NULL)) {
        free(j.out);
        return NULL;
    }
    return j.out;
}

/* ---- WordPiece -------------------------------------------------------------------------------- */

static int ids_push(wordpiece_ids *ids, int32_t id)
{
    if (ids->n == ids->cap) {
        long cap = ids->cap ? ids->cap * 2 : 1024;
        int32_t *nb = realloc(ids->id, (size_t)cap * sizeof *nb);
        if (!nb)
            return -1;
        ids->id = nb;
        ids->cap = cap;
    }
    ids->id[ids->n++] = id;
    return 0;
}

void wordpiece_ids_free(wordpiece_ids *ids)
{
    free(ids->id);
    ids->id = NULL;
    ids->n = ids->cap = 0;
}

typedef struct {
    const wordpiece_vocab *v;
    wordpiece_ids *ids;
    wordpiece_counts *counts; /* may be NULL */
} wp_ctx;

static int wordpiece_word(void *ctx, const char *w, size_t n, int chars, int32_t special)
{
    wp_ctx *c = ctx;
    const wordpiece_vocab *v = c->v;
    if (special >= 0)
        return ids_push(c->ids, special);
    if (chars > WORDPIECE_MAX_WORD_CHARS) {
        if (c->counts)
            c->counts->unk_words++;
        return ids_push(c->ids, v->sp.unk);
    }
    long mark = c->ids->n;
    size_t start = 0;
    while (start < n) {
        size_t end = n - start > (size_t)v->max_bytes ? start + (size_t)v->max_bytes : n;
        while (end > start && end < n && ((unsigned char)w[end] & 0xC0) == 0x80)
            end--; /* never cut inside a character */
        int32_t id = -1;
        while (end > start) {
            id = vocab_find_piece(v, start > 0, w + start, end - start);
            if (id >= 0)
                break;
            do
                end--;
            while (end > start && ((unsigned char)w[end] & 0xC0) == 0x80);
        }
        if (id < 0) { /* an unmatched rest: the whole word is unknown */
            c->ids->n = mark;
            if (c->counts)
                c->counts->unk_words++;
            return ids_push(c->ids, v->sp.unk);
        }
        if (ids_push(c->ids, id))
            return -1;
        start = end;
    }
    return 0;
}

int wordpiece_tokenize(const wordpiece_vocab *v, const char *text, size_t len, wordpiece_ids *ids,
                       wordpiece_counts *counts, unpad_err *err)
{
    wp_ctx c = {v, ids, counts};
    if (basic_tokenize(v, text, len, wordpiece_word, &c, counts))
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory while tokenizing");
    return UNPAD_OK;
}

size_t wordpiece_decode(const wordpiece_vocab *v, const int32_t *ids, long n, char *buf, size_t cap)
{
    size_t need = 0;
    char num[24];
    if (cap)
        buf[0] = '\0';
    for (long i = 0; i < n; i++) {
        const char *t = wordpiece_vocab_token(v, ids[i]);
        if (!t) {
            snprintf(num, sizeof num, "<%d>", (int)ids[i]);
            t = num;
        }
        int glue = i > 0 && t[0] == '#' && t[1] == '#' && t[2];
        const char *piece = glue ? t + 2 : t;
        size_t l = strlen(piece);
        const char *sep = i > 0 && !glue ? " " : "";
        for (const char *q = sep; *q; q++, need++)
            if (need + 1 < cap)
                buf[need] = *q, buf[need + 1] = '\0';
        if (need + 1 < cap) {
            size_t k = l < cap - 1 - need ? l : cap - 1 - need;
            memcpy(buf + need, piece, k);
            buf[need + k] = '\0';
        }
        need += l;
    }
    return need;
}
