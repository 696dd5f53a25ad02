/* check_data.c — the data path of the trainer: WordPiece tokenization, sentence pairs and
 * masking, the shard format (round trip, packed batches, every kind of bad shard), synthetic
 * samples and determinism. */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pretrain.h"
#include "shard.h"
#include "testutil.h"
#include "wordpiece.h"

/* ---- helpers ---------------------------------------------------------------------------------- */

/* A small vocabulary: the specials, a few words and pieces, and the numbers 0..999. */
static const char *tiny_vocab_path(char *p, size_t n)
{
    static char text[16384];
    size_t k = (size_t)snprintf(text, sizeof text,
                                "[PAD]\n[unused0]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nun\n##aff\n##able\n"
                                "the\ncat\nsat\n.\n,\n!\n-\nhello\nworld\n##s\n");
    for (int i = 0; i < 1000; i++)
        k += (size_t)snprintf(text + k, sizeof text - k, "%d\n", i);
    return tu_write_tmp(p, n, ".txt", text);
}

static wordpiece_vocab *load_tiny(void)
{
    char p[512];
    unpad_err e = {0};
    wordpiece_vocab *v = NULL;
    ck_assert_ptr_nonnull(tiny_vocab_path(p, sizeof p));
    ck_assert_msg(wordpiece_vocab_load(p, &v, &e) == UNPAD_OK, "%s", e.msg);
    unlink(p);
    return v;
}

/* The real BERT vocabulary when it is at hand (../shared/data), else NULL. */
static wordpiece_vocab *load_real(void)
{
    char p[1024];
    unpad_err e = {0};
    wordpiece_vocab *v = NULL;
    tu_path(p, sizeof p, "../shared/data/bert-uncased-vocab.txt");
    if (access(p, R_OK) != 0)
        return NULL;
    ck_assert_msg(wordpiece_vocab_load(p, &v, &e) == UNPAD_OK, "%s", e.msg);
    return v;
}

/* Tokenizes text and returns the pieces joined by spaces (static buffer). */
static const char *pieces(const wordpiece_vocab *v, const char *text)
{
    static char out[4096];
    wordpiece_ids ids = {0};
    unpad_err e = {0};
    ck_assert_int_eq(wordpiece_tokenize(v, text, strlen(text), &ids, NULL, &e), UNPAD_OK);
    size_t k = 0;
    out[0] = '\0';
    for (long i = 0; i < ids.n; i++)
        k += (size_t)snprintf(out + k, sizeof out - k, "%s%s", i ? " " : "",
                              wordpiece_vocab_token(v, ids.id[i]));
    wordpiece_ids_free(&ids);
    return out;
}

static const char *basic(const char *text)
{
    static char out[4096];
    char *s = wordpiece_basic_tokenize(text, strlen(text));
    ck_assert_ptr_nonnull(s);
    snprintf(out, sizeof out, "%s", s);
    free(s);
    return out;
}

/* Collects emitted samples in memory. */
typedef struct {
    shard_sample *s;
    int n, cap, max_len, max_pred;
} sample_list;

static int collect(void *ctx, const shard_sample *s, unpad_err *err)
{
    sample_list *l = ctx;
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->s = realloc(l->s, (size_t)l->cap * sizeof *l->s);
        ck_assert_ptr_nonnull(l->s);
    }
    shard_sample *d = &l->s[l->n++];
    ck_assert_int_eq(shard_sample_alloc(d, l->max_len, l->max_pred > 0 ? l->max_pred : 1), UNPAD_OK);
    d->len = s->len, d->n_pred = s->n_pred, d->nsp = s->nsp;
    memcpy(d->tokens, s->tokens, (size_t)s->len * sizeof(int32_t));
    memcpy(d->segments, s->segments, (size_t)s->len * sizeof(int32_t));
    memcpy(d->mpos, s->mpos, (size_t)s->n_pred * sizeof(int32_t));
    memcpy(d->mlabels, s->mlabels, (size_t)s->n_pred * sizeof(int32_t));
    return UNPAD_OK;
}

static void list_free(sample_list *l)
{
    for (int i = 0; i < l->n; i++)
        shard_sample_free(&l->s[i]);
    free(l->s);
    memset(l, 0, sizeof *l);
}

static int write_to_shard(void *ctx, const shard_sample *s, unpad_err *err)
{
    return shard_writer_add(ctx, s, err);
}

/* A temporary shard path (file not created). */
static const char *tmp_shard_path(char *p, size_t n)
{
    ck_assert_ptr_nonnull(tu_write_tmp(p, n, ".bin", ""));
    unlink(p);
    return p;
}

/* Writes a shard of n samples with the given lengths (masks at every 7th position). */
static void write_test_shard(const char *path, const int *len, int n, int max_len, int max_pred,
                             int vocab)
{
    shard_writer *w;
    unpad_err e = {0};
    ck_assert_msg(shard_writer_open(path, max_len, max_pred, vocab, 7, 0, &w, &e) == UNPAD_OK, "%s",
                  e.msg);
    shard_sample s;
    ck_assert_int_eq(shard_sample_alloc(&s, max_len, max_pred), UNPAD_OK);
    for (int i = 0; i < n; i++) {
        s.len = len[i];
        s.nsp = i % 2;
        s.n_pred = 0;
        for (int k = 0; k < s.len; k++) {
            s.tokens[k] = (int32_t)((i * 1000 + k * 7) % vocab);
            s.segments[k] = k >= s.len / 2;
            if (k % 7 == 3 && s.n_pred < max_pred) {
                s.mpos[s.n_pred] = k;
                s.mlabels[s.n_pred++] = (int32_t)((k + i) % vocab);
            }
        }
        ck_assert_msg(shard_writer_add(w, &s, &e) == UNPAD_OK, "%s", e.msg);
    }
    ck_assert_msg(shard_writer_close(w, &e) == UNPAD_OK, "%s", e.msg);
    shard_sample_free(&s);
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static void patch_bytes(const char *path, long at, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, at, SEEK_SET), 0);
    ck_assert_uint_eq(fwrite(bytes, 1, n, f), n);
    fclose(f);
}

static void put_le32(uint8_t *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

/* Opens path expecting failure; returns the message (static). */
static const char *open_error(const char *path, int *code)
{
    static unpad_err e;
    shard *s = NULL;
    memset(&e, 0, sizeof e);
    *code = shard_open(path, &s, &e);
    if (*code == UNPAD_OK)
        shard_close(s);
    return e.msg;
}

/* ---- WordPiece -------------------------------------------------------------------------------- */

START_TEST(test_wordpiece_known_words)
{
    wordpiece_vocab *v = load_tiny();
    ck_assert_str_eq(pieces(v, "unaffable"), "un ##aff ##able");
    ck_assert_str_eq(pieces(v, "The cats sat."), "the cat ##s sat .");
    ck_assert_str_eq(pieces(v, "Hello, WORLD!"), "hello , world !");
    ck_assert_str_eq(pieces(v, "unaffablex"), "[UNK]"); /* an unmatched rest: the whole word */
    ck_assert_str_eq(pieces(v, "[MASK] cat [SEP]"), "[MASK] cat [SEP]");
    ck_assert_str_eq(pieces(v, "[MASK]cat"), "[UNK] [UNK] [UNK] cat"); /* not alone: split */
    ck_assert_str_eq(pieces(v, "12-345"), "12 - 345");
    char longw[160];
    memset(longw, 'a', 101);
    longw[101] = '\0';
    ck_assert_str_eq(pieces(v, longw), "[UNK]"); /* more than 100 characters */
    ck_assert_int_eq(wordpiece_vocab_size(v), 1019);
    const wordpiece_special *sp = wordpiece_vocab_special(v);
    ck_assert_int_eq(sp->pad, 0);
    ck_assert_int_eq(sp->unk, 2);
    ck_assert_int_eq(sp->cls, 3);
    ck_assert_int_eq(sp->sep, 4);
    ck_assert_int_eq(sp->mask, 5);
    ck_assert(wordpiece_vocab_is_reserved(v, 1)); /* [unused0] */
    ck_assert(!wordpiece_vocab_is_reserved(v, 6));
    /* decode glues ## pieces back */
    int32_t ids[3] = {6, 7, 8};
    char buf[64];
    ck_assert_uint_eq(wordpiece_decode(v, ids, 3, buf, sizeof buf), 9);
    ck_assert_str_eq(buf, "unaffable");
    ck_assert_uint_eq(wordpiece_decode(v, ids, 3, buf, 4), 9); /* cut, still terminated */
    ck_assert_str_eq(buf, "una");
    wordpiece_vocab_free(v);

    wordpiece_vocab *real = load_real();
    if (real) { /* bert-base-uncased splits it differently from the paper's example */
        ck_assert_int_eq(wordpiece_vocab_size(real), 30522);
        ck_assert_str_eq(pieces(real, "unaffable"), "una ##ffa ##ble");
        ck_assert_str_eq(pieces(real, "Héllo, naïve CAFÉ résumé!"), "hello , naive cafe resume !");
        ck_assert_str_eq(pieces(real, "The European lobster <unk> @-@ tipped"),
                         "the european lobster < un ##k > @ - @ tipped");
        ck_assert_int_eq(wordpiece_vocab_special(real)->cls, 101);
        ck_assert_int_eq(wordpiece_vocab_special(real)->mask, 103);
        ck_assert_int_eq(wordpiece_vocab_find(real, "hello"), 7592);
        wordpiece_vocab_free(real);
    }
}
END_TEST

START_TEST(test_basic_punctuation_and_accents)
{
    ck_assert_str_eq(basic("Héllo, Wörld!"), "hello , world !");
    ck_assert_str_eq(basic("naïve CAFÉ résumé Ångström ÇA ÑO"), "naive cafe resume angstrom ca no");
    ck_assert_str_eq(basic("don't stop—now…"), "don ' t stop — now …");
    ck_assert_str_eq(basic("İstanbul Łódź ŠKODA Æsir straße"), "istanbul łodz skoda æsir straße");
    ck_assert_str_eq(basic("ΟΔΟΣ. ΣΑΣ άλφα"), "οδος . σας αλφα"); /* final sigma, tonos stripped */
    ck_assert_str_eq(basic("Йод ЁЛКА"), "иод елка");                /* Cyrillic breve/diaeresis */
    ck_assert_str_eq(basic("中文x字"), "中 文 x 字");               /* CJK: one word each */
    ck_assert_str_eq(basic("a\x01" "b\xe2\x80\x8b" "c\xc2\xad" "d"), "abcd"); /* control, ZWSP, SHY */
    ck_assert_str_eq(basic("a\xc2\xa0" "b\xe2\x80\xa8" "c\td\r\ne"), "a b c d e"); /* NBSP, U+2028 */
    ck_assert_str_eq(basic("a\xff" "b\xc3" "c"), "abc");                /* invalid UTF-8 dropped */
    ck_assert_str_eq(basic("e\xcc\x81t\xc3\xa9"), "ete");               /* combining acute removed */
    ck_assert_str_eq(basic("«quote» ¿qué? ¡sí!"), "« quote » ¿ que ? ¡ si !");
    ck_assert_str_eq(basic("$5 + 3% = x^2 ~ `y`"), "$ 5 + 3 % = x ^ 2 ~ ` y `"); /* ASCII symbols */
    ck_assert_str_eq(basic("  \n\t "), "");
    ck_assert_str_eq(basic("\xed\x95\x9c"), "\xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab"); /* Hangul NFD */
}
END_TEST

static const char *vocab_error(const char *text, int *code)
{
    static unpad_err e;
    char p[512];
    wordpiece_vocab *v = NULL;
    memset(&e, 0, sizeof e);
    tu_write_tmp(p, sizeof p, ".txt", text);
    *code = wordpiece_vocab_load(p, &v, &e);
    wordpiece_vocab_free(v);
    unlink(p);
    ck_assert_msg(strstr(e.msg, "/tmp/unpad-test-"), "names the file: %s", e.msg);
    return strstr(e.msg, ".txt") ? strstr(e.msg, ".txt") + 4 : e.msg;
}

START_TEST(test_wrong_vocab_refused)
{
    int code;
    const char *m = vocab_error("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n", &code);
    ck_assert_int_eq(code, UNPAD_EINVAL);
    ck_assert_msg(strstr(m, ": not a BERT WordPiece vocabulary: no [MASK] among its 5 tokens"), "%s", m);
    m = vocab_error("the\ncat\n", &code);
    ck_assert_msg(strstr(m, "no [PAD] [UNK] [CLS] [SEP] [MASK]"), "%s", m);
    m = vocab_error("[PAD]\n[UNK]\nthe\n[CLS]\nthe\n", &code);
    ck_assert_msg(strstr(m, ":5: not a WordPiece vocabulary: token 'the' already on line 3"), "%s", m);
    m = vocab_error("[PAD]\n\n[UNK]\n", &code);
    ck_assert_msg(strstr(m, ":2: not a WordPiece vocabulary: an empty line"), "%s", m);
    m = vocab_error("[PAD]\n\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n\n", &code); /* blank at the end too */
    ck_assert_msg(strstr(m, ":2: not a WordPiece vocabulary: an empty line"), "%s", m);
    m = vocab_error(" \n = Homarus gammarus = \n", &code); /* WikiText starts with a blank line */
    ck_assert_msg(strstr(m, ":1: not a WordPiece vocabulary: an empty line"), "%s", m);
    m = vocab_error(" = Homarus gammarus = \n\n The lobster . \n", &code);
    ck_assert_msg(strstr(m, ":1: not a WordPiece vocabulary: a token with blanks"), "%s", m);
    ck_assert_msg(strstr(m, "1 |  = Homarus gammarus ="), "shows the line: %s", m);
    m = vocab_error("", &code);
    ck_assert_msg(strstr(m, "empty file"), "%s", m);
    char p[512];
    unpad_err e = {0};
    wordpiece_vocab *v = NULL;
    tu_write_tmp(p, sizeof p, ".txt", "");
    FILE *f = fopen(p, "wb");
    fwrite("[PAD]\n[UNK]\nUNPADSHD\x01\x00\x00\x00\n", 1, 22, f);
    fclose(f);
    ck_assert_int_eq(wordpiece_vocab_load(p, &v, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, p) && strstr(e.msg, ":3: a NUL byte (byte offset 21): this is not a text file"), "%s",
                  e.msg);
    unlink(p);
    ck_assert_int_eq(wordpiece_vocab_load("/nonexistent/vocab.txt", &v, &e), UNPAD_EIO);
    ck_assert_msg(strstr(e.msg, "/nonexistent/vocab.txt: cannot open"), "%s", e.msg);
}
END_TEST

/* Blank lines closing a vocabulary file (an editor's newline after the last one) were refused as
 * "an empty line"; they hold no token and are let be. */
START_TEST(test_vocab_trailing_blank_lines)
{
    static const char *const texts[] = {"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n\n",
                                        "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n\n \n\t\n",
                                        "[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\n[MASK]\r\nthe\r\n\r\n",
                                        "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n\n\n\n"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        wordpiece_vocab *v = NULL;
        unpad_err e = {0};
        ck_assert_msg(wordpiece_vocab_parse("v.txt", texts[i], strlen(texts[i]), &v, &e) == UNPAD_OK, "%zu: %s", i,
                      e.msg);
        ck_assert_int_eq(wordpiece_vocab_size(v), 6);
        ck_assert_int_eq(wordpiece_vocab_find(v, "the"), 5);
        wordpiece_vocab_free(v);
    }
}
END_TEST

/* ---- masking and pairs ------------------------------------------------------------------------ */

START_TEST(test_masking_proportions)
{
    pretrain_masker m;
    unpad_err e = {0};
    ck_assert_int_eq(pretrain_masker_bert_ids(30522, &m, &e), UNPAD_OK);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 42);
    shard_sample s;
    ck_assert_int_eq(shard_sample_alloc(&s, 512, 76), UNPAD_OK);
    long masked = 0, as_mask = 0, as_random = 0, kept = 0, tokens = 0;
    const int lens[] = {5, 10, 30, 64, 100, 128, 300, 511, 512};
    for (int it = 0; it < 4000; it++) {
        int len = lens[it % 9];
        int32_t orig[512];
        for (int k = 0; k < len; k++)
            s.tokens[k] = orig[k] = 999 + (int32_t)gsl_rng_uniform_int(rng, 29000);
        s.tokens[0] = orig[0] = m.cls;
        s.tokens[len / 2] = orig[len / 2] = m.sep;
        s.tokens[len - 1] = orig[len - 1] = m.sep;
        s.len = len;
        pretrain_mask(&m, 0.15, 76, rng, &s);
        int want = (int)rint(len * 0.15);
        want = want < 1 ? 1 : want > 76 ? 76 : want;
        ck_assert_int_eq(s.n_pred, want);
        for (int k = 0; k < s.n_pred; k++) {
            int p = s.mpos[k];
            ck_assert(k == 0 || p > s.mpos[k - 1]);
            ck_assert(orig[p] != m.cls && orig[p] != m.sep); /* never a [CLS] or [SEP] */
            ck_assert_int_eq(s.mlabels[k], orig[p]);
            if (s.tokens[p] == m.mask)
                as_mask++;
            else if (s.tokens[p] == orig[p])
                kept++;
            else {
                as_random++;
                ck_assert(s.tokens[p] >= 999 && s.tokens[p] < 30522);
            }
        }
        int changed = 0;
        for (int k = 0; k < len; k++)
            changed += s.tokens[k] != orig[k];
        ck_assert(changed <= s.n_pred); /* only masked positions change */
        masked += s.n_pred;
        tokens += len;
    }
    /* round(): len 10 -> 2 (1.5 to even), 30 -> 4 (4.5 to even); 512 -> 76 (the cap). */
    ck_assert_double_eq_tol((double)as_mask / masked, 0.8, 0.01);
    ck_assert_double_eq_tol((double)as_random / masked, 0.1, 0.01);
    ck_assert_double_eq_tol((double)kept / masked, 0.1, 0.01);
    ck_assert(masked > 100000);
    /* per 9 samples: 1+2+4+10+15+19+45+76+76 masked of 1660 tokens */
    ck_assert_double_eq_tol((double)masked / tokens, 248.0 / 1660, 0.002);
    shard_sample_free(&s);
    gsl_rng_free(rng);
    pretrain_masker_free(&m);
}
END_TEST

/* Documents of consecutive numbers: document d, sentence j holds 5 numbers (d*100 + 5j ...). */
static pretrain_corpus *number_corpus(const wordpiece_vocab *v, int docs, int sents)
{
    pretrain_corpus *c;
    unpad_err e = {0};
    ck_assert_int_eq(pretrain_corpus_alloc(&c, &e), UNPAD_OK);
    char text[20][64];
    const char *ptr[20];
    for (int d = 0; d < docs; d++) {
        for (int j = 0; j < sents; j++) {
            int b = d * 100 + 5 * j;
            snprintf(text[j], sizeof text[j], "%d %d %d %d %d", b, b + 1, b + 2, b + 3, b + 4);
            ptr[j] = text[j];
        }
        ck_assert_int_eq(pretrain_corpus_add_document(c, v, ptr, sents, &e), UNPAD_OK);
    }
    return c;
}

static int number_of(const wordpiece_vocab *v, int32_t id)
{
    return atoi(wordpiece_vocab_token(v, id));
}

START_TEST(test_sentence_pairs)
{
    wordpiece_vocab *v = load_tiny();
    const wordpiece_special *sp = wordpiece_vocab_special(v);
    pretrain_corpus *c = number_corpus(v, 10, 20);
    ck_assert_int_eq(pretrain_corpus_documents(c), 10);
    ck_assert_int_eq(pretrain_corpus_sentences(c), 200);
    ck_assert_int_eq(pretrain_corpus_tokens(c), 1000);
    pretrain_masker m;
    unpad_err e = {0};
    ck_assert_int_eq(pretrain_masker_from_vocab(v, &m, &e), UNPAD_OK);
    ck_assert_int_eq(m.n_random, 1019 - 6); /* not the specials, not [unused0] */
    pretrain_opts o;
    pretrain_opts_default(&o);
    o.max_len = 128;      /* a whole document (100 tokens) fits: no cut between A and B */
    o.short_seq_prob = 0; /* no shorter targets either */
    o.max_pred = 0;       /* no masking: the pairs can be read back */
    o.dupe = 40;
    sample_list l = {.max_len = 128, .max_pred = 1};
    ck_assert_int_eq(pretrain_generate(c, &o, &m, collect, &l, NULL, &e), UNPAD_OK);
    ck_assert(l.n > 600);
    int random_next = 0;
    for (int i = 0; i < l.n; i++) {
        shard_sample *s = &l.s[i];
        ck_assert(s->len >= 5 && s->len <= 128);
        ck_assert_int_eq(s->n_pred, 0);
        ck_assert_int_eq(s->tokens[0], sp->cls);
        ck_assert_int_eq(s->tokens[s->len - 1], sp->sep);
        int sep = 1;
        while (s->tokens[sep] != sp->sep)
            sep++;
        ck_assert(sep >= 2 && sep <= s->len - 3); /* A and B each hold a token */
        for (int k = 0; k < s->len; k++) {
            ck_assert_int_eq(s->segments[k], k > sep);
            if (k != 0 && k != sep && k != s->len - 1)
                ck_assert(s->tokens[k] != sp->sep && s->tokens[k] != sp->cls);
        }
        int a_last = number_of(v, s->tokens[sep - 1]), b_first = number_of(v, s->tokens[sep + 1]);
        if (s->nsp) {
            random_next++;
            ck_assert_int_ne(a_last / 100, b_first / 100); /* B from another document */
        } else {
            ck_assert_int_eq(b_first, a_last + 1); /* B follows A */
        }
        for (int k = 2; k < s->len - 1; k++) /* within A and within B the numbers run on */
            if (k != sep && k != sep + 1)
                ck_assert_int_eq(number_of(v, s->tokens[k]), number_of(v, s->tokens[k - 1]) + 1);
    }
    ck_assert_double_eq_tol((double)random_next / l.n, 0.5, 0.05);
    list_free(&l);

    /* Long sentences: truncation cuts the longer side until it fits. */
    o.max_len = 8;
    l.max_len = 8;
    ck_assert_int_eq(pretrain_generate(c, &o, &m, collect, &l, NULL, &e), UNPAD_OK);
    for (int i = 0; i < l.n; i++)
        ck_assert(l.s[i].len <= 8 && l.s[i].len >= 5);
    list_free(&l);
    pretrain_masker_free(&m);
    pretrain_corpus_free(c);
    wordpiece_vocab_free(v);
}
END_TEST

START_TEST(test_text_reader)
{
    wordpiece_vocab *v = load_tiny();
    char p[512];
    unpad_err e = {0};
    pretrain_corpus *c;
    tu_write_tmp(p, sizeof p, ".txt",
                 " \n = Hello = \n \n The cat sat . The cat <unk> . 12 @-@ 345 @,@ 6 @.@ 7 \n"
                 " \n = = World = = \n \n Hello world ! hello \n \n = Cat = \n \n The cat . \n");
    ck_assert_int_eq(pretrain_corpus_alloc(&c, &e), UNPAD_OK);
    ck_assert_msg(pretrain_corpus_add_file(c, v, p, PRETRAIN_TEXT_AUTO, &e) == UNPAD_OK, "%s", e.msg);
    unlink(p);
    ck_assert_int_eq(pretrain_corpus_documents(c), 2); /* "= = World = =" is not a document */
    /* the cat sat . | the cat [UNK] . | 12 - 345 , 6 . 7 | hello world ! | hello | the cat . */
    ck_assert_int_eq(pretrain_corpus_sentences(c), 6);
    ck_assert_int_eq(pretrain_corpus_tokens(c), 4 + 4 + 7 + 3 + 1 + 3);
    pretrain_corpus_free(c);

    /* BERT's own format: a sentence per line, blank lines between documents */
    tu_write_tmp(p, sizeof p, ".txt", "the cat sat .\nhello world\n\n\nthe cat\n\nworld\n");
    ck_assert_int_eq(pretrain_corpus_alloc(&c, &e), UNPAD_OK);
    ck_assert_int_eq(pretrain_corpus_add_file(c, v, p, PRETRAIN_TEXT_AUTO, &e), UNPAD_OK);
    ck_assert_int_eq(pretrain_corpus_documents(c), 3);
    ck_assert_int_eq(pretrain_corpus_sentences(c), 4);
    pretrain_corpus_free(c);
    unlink(p);

    /* a shard or a missing file as input */
    char s[512];
    int one = 10;
    write_test_shard(tmp_shard_path(s, sizeof s), &one, 1, 16, 2, 100);
    ck_assert_int_eq(pretrain_corpus_alloc(&c, &e), UNPAD_OK);
    ck_assert_int_eq(pretrain_corpus_add_file(c, v, s, PRETRAIN_TEXT_AUTO, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, s) && strstr(e.msg, "this is a shard, not text"), "%s", e.msg);
    ck_assert_int_eq(pretrain_corpus_add_file(c, v, "/nonexistent/a.txt", 0, &e), UNPAD_EIO);
    ck_assert_msg(strstr(e.msg, "/nonexistent/a.txt: cannot open"), "%s", e.msg);
    /* no text at all */
    pretrain_masker m;
    pretrain_opts o;
    pretrain_opts_default(&o);
    ck_assert_int_eq(pretrain_masker_from_vocab(v, &m, &e), UNPAD_OK);
    sample_list l = {.max_len = 512, .max_pred = 76};
    ck_assert_int_eq(pretrain_generate(c, &o, &m, collect, &l, NULL, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "no text"), "%s", e.msg);
    pretrain_masker_free(&m);
    pretrain_corpus_free(c);
    unlink(s);
    wordpiece_vocab_free(v);
}
END_TEST

/* A UTF-8 byte-order mark opening a file (as some editors write) hid WikiText's first heading, so
 * the file read as lines, and counted as a dropped control character; opening a vocabulary, it
 * hid [PAD]. Now it is skipped in each input file and in the vocabulary. */
START_TEST(test_byte_order_mark_skipped)
{
    wordpiece_vocab *v = load_tiny();
    unpad_err e = {0};
    static const char wiki[] = " \n = Hello = \n \n The cat sat . The cat . \n \n = Cat = \n \n Hello world . \n";
    static const char bom[] = "\xEF\xBB\xBF";
    char text[256], p[512];
    long docs[2], sents[2], toks[2];
    for (int with = 0; with < 2; with++) {
        pretrain_corpus *c;
        snprintf(text, sizeof text, "%s%s", with ? bom : "", wiki);
        ck_assert_int_eq(pretrain_corpus_alloc(&c, &e), UNPAD_OK);
        ck_assert_ptr_nonnull(tu_write_tmp(p, sizeof p, ".txt", text));
        for (int file = 0; file < 2; file++) /* the mark opens each file */
            ck_assert_msg(pretrain_corpus_add_file(c, v, p, PRETRAIN_TEXT_AUTO, &e) == UNPAD_OK, "%s", e.msg);
        unlink(p);
        ck_assert_msg(pretrain_corpus_add_text(c, v, "t.txt", text, strlen(text), PRETRAIN_TEXT_AUTO, &e) == UNPAD_OK,
                      "%s", e.msg);
        docs[with] = pretrain_corpus_documents(c);
        sents[with] = pretrain_corpus_sentences(c);
        toks[with] = pretrain_corpus_tokens(c);
        ck_assert_int_eq(pretrain_corpus_counts(c)->dropped_chars, 0);
        pretrain_corpus_free(c);
    }
    ck_assert_int_eq(docs[0], 6); /* two documents per file */
    ck_assert_int_eq(docs[1], docs[0]);
    ck_assert_int_eq(sents[1], sents[0]);
    ck_assert_int_eq(toks[1], toks[0]);
    wordpiece_vocab_free(v);
    /* the vocabulary */
    static const char vocab[] = "\xEF\xBB\xBF[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n";
    ck_assert_msg(wordpiece_vocab_parse("v.txt", vocab, sizeof vocab - 1, &v, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_int_eq(wordpiece_vocab_size(v), 6);
    ck_assert_int_eq(wordpiece_vocab_find(v, "[PAD]"), 0);
    ck_assert_int_eq(wordpiece_vocab_find(v, "the"), 5);
    wordpiece_vocab_free(v);
}
END_TEST

/* ---- shards ----------------------------------------------------------------------------------- */

static const int LENS[] = {1, 2, 63, 64, 65, 511, 512, 5, 300, 128};
#define NLENS ((int)(sizeof LENS / sizeof LENS[0]))

START_TEST(test_shard_round_trip)
{
    char p[512];
    unpad_err e = {0};
    for (int vocab = 30522; vocab <= 100000; vocab += 69478) { /* u16 ids, then i32 ids */
        tmp_shard_path(p, sizeof p);
        write_test_shard(p, LENS, NLENS, 512, 76, vocab);
        ck_assert(file_size(p) > 128);
        char tmp[600];
        snprintf(tmp, sizeof tmp, "%s.tmp", p);
        ck_assert_int_eq(access(tmp, F_OK), -1); /* renamed into place */
        shard *s;
        ck_assert_msg(shard_open(p, &s, &e) == UNPAD_OK, "%s", e.msg);
        const shard_info *in = shard_get_info(s);
        ck_assert_int_eq(shard_count(s), NLENS);
        ck_assert_uint_eq(in->token_bytes, vocab <= 65536 ? 2 : 4);
        ck_assert_uint_eq(in->max_len, 512);
        ck_assert_uint_eq(in->max_pred, 76);
        ck_assert_uint_eq(in->vocab_size, (uint32_t)vocab);
        ck_assert_uint_eq(in->seed, 7);
        long tokens = 0;
        for (int i = 0; i < NLENS; i++) {
            ck_assert_int_eq(shard_lengths(s)[i], LENS[i]);
            tokens += LENS[i];
        }
        ck_assert_uint_eq(in->n_tokens, (uint64_t)tokens);
        shard_sample r;
        ck_assert_int_eq(shard_sample_alloc(&r, 512, 76), UNPAD_OK);
        for (int i = 0; i < NLENS; i++) {
            ck_assert_msg(shard_read(s, i, &r, &e) == UNPAD_OK, "%s", e.msg);
            ck_assert_int_eq(r.len, LENS[i]);
            ck_assert_int_eq(r.nsp, i % 2);
            int np = 0;
            for (int k = 0; k < r.len; k++) {
                ck_assert_int_eq(r.tokens[k], (i * 1000 + k * 7) % vocab);
                ck_assert_int_eq(r.segments[k], k >= r.len / 2);
                if (k % 7 == 3 && np < 76) {
                    ck_assert_int_eq(r.mpos[np], k);
                    ck_assert_int_eq(r.mlabels[np++], (k + i) % vocab);
                }
            }
            ck_assert_int_eq(r.n_pred, np);
            ck_assert_int_eq(shard_npred(s)[i], np);
        }
        ck_assert_int_eq(shard_read(s, NLENS, &r, &e), UNPAD_ERANGE);
        ck_assert_msg(strstr(e.msg, "sample 10 out of range: the shard holds 10 samples"), "%s", e.msg);
        shard_sample_free(&r);
        shard_close(s);
        unlink(p);
    }
}
END_TEST

START_TEST(test_pack_batch)
{
    char p[512];
    unpad_err e = {0};
    tmp_shard_path(p, sizeof p);
    write_test_shard(p, LENS, NLENS, 512, 76, 30522);
    shard *s;
    ck_assert_msg(shard_open(p, &s, &e) == UNPAD_OK, "%s", e.msg);
    shard_batch b;
    ck_assert_int_eq(shard_batch_alloc(&b, 8, 2048, 300), UNPAD_OK);
    const long idx[] = {3, 0, 5, 5, 2};
    ck_assert_msg(shard_pack_batch(s, idx, 5, &b, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_int_eq(b.n, 5);
    ck_assert_int_eq(b.T, 64 + 1 + 511 + 511 + 63);
    ck_assert_int_eq(b.max_seqlen, 511);
    const int32_t cu[] = {0, 64, 65, 576, 1087, 1150};
    for (int k = 0; k <= 5; k++)
        ck_assert_int_eq(b.cu_seqlens[k], cu[k]);
    shard_sample r;
    ck_assert_int_eq(shard_sample_alloc(&r, 512, 76), UNPAD_OK);
    long p_at = 0;
    for (int k = 0; k < 5; k++) {
        ck_assert_int_eq(shard_read(s, idx[k], &r, &e), UNPAD_OK);
        ck_assert_int_eq(b.nsp[k], r.nsp);
        for (int j = 0; j < r.len; j++) {
            ck_assert_int_eq(b.tokens[cu[k] + j], r.tokens[j]);
            ck_assert_int_eq(b.segments[cu[k] + j], r.segments[j]);
            ck_assert_int_eq(b.positions[cu[k] + j], j);
        }
        for (int j = 0; j < r.n_pred; j++, p_at++) {
            ck_assert_int_eq(b.mpos[p_at], cu[k] + r.mpos[j]); /* global index into T */
            ck_assert_int_eq(b.mlabels[p_at], r.mlabels[j]);
            ck_assert_int_eq(b.mseq[p_at], k);
        }
    }
    ck_assert_int_eq(b.P, p_at);
    /* too little room, a bad index */
    const long big[] = {6, 6, 6, 6, 6};
    ck_assert_int_eq(shard_pack_batch(s, big, 5, &b, &e), UNPAD_ERANGE);
    ck_assert_msg(strstr(e.msg, "batch of 5 samples needs 2560 tokens"), "%s", e.msg);
    ck_assert_int_eq(b.n, 0);
    const long bad[] = {1, 99};
    ck_assert_int_eq(shard_pack_batch(s, bad, 2, &b, &e), UNPAD_ERANGE);
    ck_assert_msg(strstr(e.msg, "batch entry 1: sample 99 out of range"), "%s", e.msg);
    shard_sample_free(&r);
    shard_batch_free(&b);
    shard_close(s);
    unlink(p);
}
END_TEST

START_TEST(test_shard_folder)
{
    char dir[] = "/tmp/unpad-test-shards-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/shard-00000.bin", dir);
    snprintf(b, sizeof b, "%s/shard-00001.bin", dir);
    write_test_shard(b, LENS + 4, 6, 512, 76, 30522);
    write_test_shard(a, LENS, 4, 512, 76, 30522);
    shard *s;
    unpad_err e = {0};
    ck_assert_msg(shard_open(dir, &s, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_int_eq(shard_count(s), NLENS);
    ck_assert_int_eq(shard_get_info(s)->n_files, 2);
    for (int i = 0; i < NLENS; i++)
        ck_assert_int_eq(shard_lengths(s)[i], LENS[i]); /* files in name order */
    shard_sample r;
    ck_assert_int_eq(shard_sample_alloc(&r, 512, 76), UNPAD_OK);
    ck_assert_int_eq(shard_read(s, 5, &r, &e), UNPAD_OK);
    ck_assert_int_eq(r.len, 511);
    ck_assert_int_eq(r.tokens[1], (1 * 1000 + 7) % 30522); /* sample 1 of the second file */
    shard_sample_free(&r);
    shard_close(s);
    /* a file that does not match the others */
    write_test_shard(b, LENS, 2, 256, 76, 30522);
    int code;
    const char *m = open_error(dir, &code);
    ck_assert_msg(strstr(m, b) && strstr(m, "does not match") && strstr(m, "max_len 256 / 512"), "%s", m);
    unlink(a);
    unlink(b);
    m = open_error(dir, &code);
    ck_assert_msg(strstr(m, dir) && strstr(m, "no shards (*.bin files) in this folder"), "%s", m);
    rmdir(dir);
}
END_TEST

START_TEST(test_bad_shards)
{
    char p[512], want[512];
    int code;
    const char *m;
    /* lengths 64, 5, 10 with 9, 1, 1 masks (every 7th from 3): records of 3 bytes a token and
     * 4 a mask (u16 ids), then the 16-byte index entries */
    const int lens[3] = {64, 5, 10};
    const long rec0 = 64 * 3 + 9 * 4, rec1 = 5 * 3 + 4, rec2 = 10 * 3 + 4;
    const long idx = 128 + rec0 + rec1 + rec2, good_size = idx + 3 * 16;
    tmp_shard_path(p, sizeof p);
    write_test_shard(p, lens, 3, 64, 10, 30522);
    ck_assert_int_eq(file_size(p), good_size);
    m = open_error(p, &code);
    ck_assert_msg(code == UNPAD_OK, "%s", m);

    /* missing file */
    m = open_error("/nonexistent/x.bin", &code);
    ck_assert_int_eq(code, UNPAD_EIO);
    ck_assert_msg(strstr(m, "/nonexistent/x.bin: cannot open shard: No such file"), "%s", m);

    /* bad magic */
    patch_bytes(p, 0, "GARBAGE!", 8);
    m = open_error(p, &code);
    ck_assert_int_eq(code, UNPAD_EINVAL);
    ck_assert_msg(strstr(m, p) && strstr(m, "not an unpad shard: bad magic at byte 0: found "
                                             "\"GARBAGE!\", expected \"UNPADSHD\""), "%s", m);
    patch_bytes(p, 0, SHARD_MAGIC, 8);

    /* wrong version */
    uint8_t b4[4];
    put_le32(b4, 2);
    patch_bytes(p, 8, b4, 4);
    m = open_error(p, &code);
    ck_assert_msg(strstr(m, p) && strstr(m, "unsupported shard version 2 at byte 8: this build "
                                             "reads version 1"), "%s", m);
    put_le32(b4, 1);
    patch_bytes(p, 8, b4, 4);

    /* header says more tokens than the samples hold */
    uint8_t b8[8] = {0};
    put_le32(b8, 64 + 5 + 10 + 1);
    patch_bytes(p, 40, b8, 8);
    m = open_error(p, &code);
    ck_assert_msg(strstr(m, p) && strstr(m, "size mismatch: the samples hold 79 tokens, the header "
                                             "(byte 40) says 80"), "%s", m);
    put_le32(b8, 64 + 5 + 10);
    patch_bytes(p, 40, b8, 8);

    /* sample 1's length 5 -> 6 in the index: sample 2's record offset no longer follows */
    put_le32(b4, 6);
    patch_bytes(p, idx + 16 + 8, b4, 4);
    m = open_error(p, &code);
    snprintf(want, sizeof want,
             "size mismatch at byte %ld (index entry of sample 2): record offset %ld, expected %ld",
             idx + 32, 128 + rec0 + rec1, 128 + rec0 + rec1 + 3);
    ck_assert_msg(strstr(m, p) && strstr(m, want), "%s\nwanted: %s", m, want);
    put_le32(b4, 5);
    patch_bytes(p, idx + 16 + 8, b4, 4);
    put_le32(b4, 65); /* sample 0's length above max_len */
    patch_bytes(p, idx + 8, b4, 4);
    m = open_error(p, &code);
    snprintf(want, sizeof want, "bad index entry at byte %ld (sample 0): length 65 (1..64)", idx);
    ck_assert_msg(strstr(m, want), "%s\nwanted: %s", m, want);
    put_le32(b4, 64);
    patch_bytes(p, idx + 8, b4, 4);

    /* a token id past the vocabulary: found when the sample is read */
    uint8_t big[2] = {0xff, 0xff};
    patch_bytes(p, 128 + 2 * 3, big, 2);
    shard *s;
    unpad_err e = {0};
    ck_assert_int_eq(shard_open(p, &s, &e), UNPAD_OK);
    shard_sample r;
    ck_assert_int_eq(shard_sample_alloc(&r, 64, 10), UNPAD_OK);
    ck_assert_int_eq(shard_read(s, 0, &r, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, p) && strstr(e.msg, "sample 0 (record at byte 128): token id 65535 "
                                                     "at position 3 is not below the vocabulary "
                                                     "size 30522"), "%s", e.msg);
    ck_assert_int_eq(shard_read(s, 1, &r, &e), UNPAD_OK);
    shard_sample_free(&r);
    shard_close(s);

    /* extra bytes */
    FILE *f = fopen(p, "ab");
    fputs("xyz", f);
    fclose(f);
    m = open_error(p, &code);
    snprintf(want, sizeof want, "size mismatch: the file has %ld bytes, its header", good_size + 3);
    ck_assert_msg(strstr(m, p) && strstr(m, want), "%s\nwanted: %s", m, want);
    snprintf(want, sizeof want, "3 extra bytes from byte %ld", good_size);
    ck_assert_msg(strstr(m, want), "%s\nwanted: %s", m, want);

    /* truncated: in the index, in the records, in the header, to nothing */
    ck_assert_int_eq(truncate(p, good_size - 1), 0);
    m = open_error(p, &code);
    snprintf(want, sizeof want, "truncated: the file ends at byte %ld, inside the index entry of "
             "sample 2", good_size - 1);
    ck_assert_msg(strstr(m, p) && strstr(m, want), "%s\nwanted: %s", m, want);
    ck_assert_int_eq(truncate(p, 300), 0);
    m = open_error(p, &code);
    ck_assert_msg(strstr(m, "truncated: the file ends at byte 300, inside the sample records"), "%s", m);
    ck_assert_int_eq(truncate(p, 50), 0);
    m = open_error(p, &code);
    ck_assert_msg(strstr(m, "truncated: the file has 50 bytes, less than the 128-byte header"), "%s", m);
    ck_assert_int_eq(truncate(p, 0), 0);
    m = open_error(p, &code);
    ck_assert_msg(strstr(m, p) && strstr(m, "truncated: the file has 0 bytes"), "%s", m);
    unlink(p);

    /* the writer refuses a bad sample */
    shard_writer *w;
    ck_assert_int_eq(shard_writer_open(p, 16, 2, 100, 1, 0, &w, &e), UNPAD_OK);
    ck_assert_int_eq(shard_sample_alloc(&r, 16, 2), UNPAD_OK);
    r.len = 3, r.n_pred = 0, r.nsp = 0;
    r.tokens[0] = 1, r.tokens[1] = 100, r.tokens[2] = 2;
    r.segments[0] = r.segments[1] = r.segments[2] = 0;
    ck_assert_int_eq(shard_writer_add(w, &r, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "token id 100 at position 1 outside the vocabulary (size 100)"), "%s",
                  e.msg);
    r.tokens[1] = 5;
    r.n_pred = 2, r.mpos[0] = 2, r.mpos[1] = 1, r.mlabels[0] = r.mlabels[1] = 3;
    ck_assert_int_eq(shard_writer_add(w, &r, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "masked position 1 (#1) not increasing"), "%s", e.msg);
    shard_writer_abort(w);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    ck_assert_int_eq(access(tmp, F_OK), -1);
    ck_assert_int_eq(access(p, F_OK), -1);
    shard_sample_free(&r);
}
END_TEST

/* ---- synthetic samples, determinism ------------------------------------------------------------ */

START_TEST(test_synthetic)
{
    char dp[512];
    unpad_err e = {0};
    unpad_dist d;
    tu_write_tmp(dp, sizeof dp, ".txt", "1\n2\n4\n5\n64\n128\n128\n");
    ck_assert_int_eq(dist_load(dp, &d, &e), UNPAD_OK);
    pretrain_masker m;
    ck_assert_int_eq(pretrain_masker_bert_ids(30522, &m, &e), UNPAD_OK);
    pretrain_opts o;
    pretrain_opts_default(&o);
    o.max_len = 128;
    o.max_pred = 20;
    sample_list l = {.max_len = 128, .max_pred = 20};
    ck_assert_int_eq(pretrain_synthetic(&d, 3000, &o, &m, collect, &l, &e), UNPAD_OK);
    ck_assert_int_eq(l.n, 3000);
    int count[129] = {0}, nsp = 0;
    long masked = 0, tokens = 0;
    for (int i = 0; i < l.n; i++) {
        shard_sample *s = &l.s[i];
        count[s->len]++;
        nsp += s->nsp;
        ck_assert_int_eq(s->tokens[0], 101);
        if (s->len >= 2)
            ck_assert_int_eq(s->tokens[s->len - 1], 102);
        int seps = 0;
        for (int k = 0; k < s->len; k++)
            seps += s->tokens[k] == 102;
        ck_assert_int_eq(seps, s->len >= 5 ? 2 : s->len >= 2);
        if (s->len >= 5)
            ck_assert_int_eq(s->segments[s->len - 1], 1);
        for (int k = 0; k < s->n_pred; k++)
            ck_assert(s->mlabels[k] >= 999 && s->mlabels[k] < 30522);
        masked += s->n_pred;
        tokens += s->len;
    }
    ck_assert_int_eq(count[1] + count[2] + count[4] + count[5] + count[64] + count[128], 3000);
    ck_assert_double_eq_tol(count[128] / 3000.0, 2.0 / 7, 0.03);
    ck_assert_double_eq_tol(nsp / 3000.0, 0.5, 0.03);
    ck_assert_double_eq_tol((double)masked / tokens, 0.15, 0.01);
    list_free(&l);
    /* lengths above max_len are refused */
    o.max_len = 100;
    ck_assert_int_eq(pretrain_synthetic(&d, 10, &o, &m, collect, &l, &e), UNPAD_ERANGE);
    ck_assert_msg(strstr(e.msg, dp) && strstr(e.msg, "lengths up to 128, longer than max_len 100"),
                  "%s", e.msg);
    list_free(&l);
    pretrain_masker_free(&m);
    dist_free(&d);
    unlink(dp);
}
END_TEST

/* Makes a shard at path from the number corpus (or synthetic) with the seed; returns its size. */
static long make_shard(const char *path, uint64_t seed, int synthetic)
{
    wordpiece_vocab *v = load_tiny();
    pretrain_masker m;
    unpad_err e = {0};
    ck_assert_int_eq(pretrain_masker_from_vocab(v, &m, &e), UNPAD_OK);
    pretrain_opts o;
    pretrain_opts_default(&o);
    o.max_len = 48;
    o.max_pred = 8;
    o.dupe = 5;
    o.shuffle_buffer = 50;
    o.seed = seed;
    shard_writer *w;
    ck_assert_int_eq(shard_writer_open(path, 48, 8, wordpiece_vocab_size(v), seed, 0, &w, &e), UNPAD_OK);
    if (synthetic) {
        char dp[512];
        unpad_dist d;
        tu_write_tmp(dp, sizeof dp, ".txt", "5\n17\n30\n48\n");
        ck_assert_int_eq(dist_load(dp, &d, &e), UNPAD_OK);
        ck_assert_int_eq(pretrain_synthetic(&d, 500, &o, &m, write_to_shard, w, &e), UNPAD_OK);
        dist_free(&d);
        unlink(dp);
    } else {
        pretrain_corpus *c = number_corpus(v, 8, 12);
        ck_assert_msg(pretrain_generate(c, &o, &m, write_to_shard, w, NULL, &e) == UNPAD_OK, "%s", e.msg);
        pretrain_corpus_free(c);
    }
    ck_assert_int_eq(shard_writer_close(w, &e), UNPAD_OK);
    pretrain_masker_free(&m);
    wordpiece_vocab_free(v);
    return file_size(path);
}

static int same_file(const char *a, const char *b)
{
    char *x, *y;
    size_t nx, ny;
    ck_assert_int_eq(unpad_read_file(a, &x, &nx, NULL), UNPAD_OK);
    ck_assert_int_eq(unpad_read_file(b, &y, &ny, NULL), UNPAD_OK);
    int same = nx == ny && memcmp(x, y, nx) == 0;
    free(x);
    free(y);
    return same;
}

START_TEST(test_deterministic_for_a_seed)
{
    char a[512], b[512], c[512];
    for (int synthetic = 0; synthetic <= 1; synthetic++) {
        tmp_shard_path(a, sizeof a);
        tmp_shard_path(b, sizeof b);
        tmp_shard_path(c, sizeof c);
        ck_assert(make_shard(a, 99, synthetic) > 128);
        make_shard(b, 99, synthetic);
        make_shard(c, 100, synthetic);
        ck_assert_msg(same_file(a, b), "same seed, same bytes (synthetic %d)", synthetic);
        ck_assert_msg(!same_file(a, c), "another seed, other samples (synthetic %d)", synthetic);
        unlink(a);
        unlink(b);
        unlink(c);
    }
}
END_TEST

/* The real thing when it is at hand: WikiText-2 valid with the BERT vocabulary. */
START_TEST(test_wikitext_valid)
{
    wordpiece_vocab *v = load_real();
    char p[1024];
    tu_path(p, sizeof p, "../shared/data/wikitext-2/valid.txt");
    if (!v || access(p, R_OK) != 0) {
        wordpiece_vocab_free(v);
        return;
    }
    unpad_err e = {0};
    pretrain_corpus *c;
    ck_assert_int_eq(pretrain_corpus_alloc(&c, &e), UNPAD_OK);
    ck_assert_msg(pretrain_corpus_add_file(c, v, p, PRETRAIN_TEXT_AUTO, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_int_eq(pretrain_corpus_documents(c), 60);
    ck_assert(pretrain_corpus_tokens(c) > 200000 && pretrain_corpus_tokens(c) < 260000);
    pretrain_masker m;
    ck_assert_int_eq(pretrain_masker_from_vocab(v, &m, &e), UNPAD_OK);
    pretrain_opts o;
    pretrain_opts_default(&o);
    o.max_len = 128;
    o.max_pred = 20;
    sample_list l = {.max_len = 128, .max_pred = 20};
    ck_assert_int_eq(pretrain_generate(c, &o, &m, collect, &l, NULL, &e), UNPAD_OK);
    ck_assert(l.n > 1500);
    int nsp = 0, unk_tokens = 0;
    long tokens = 0;
    for (int i = 0; i < l.n; i++) {
        nsp += l.s[i].nsp;
        tokens += l.s[i].len;
        for (int k = 0; k < l.s[i].len; k++)
            unk_tokens += l.s[i].tokens[k] == 100;
        ck_assert(l.s[i].len <= 128 && l.s[i].n_pred <= 20);
    }
    /* BERT's sample maker takes a random B for half the chunks and always for a chunk of one
     * sentence (a document's end, a short target, a piece of a split long sentence): the share of
     * random B is a half plus those; 0.57 on WikiText-2's valid set at max_len 128 */
    ck_assert_msg((double)nsp / l.n > 0.5 && (double)nsp / l.n < 0.62, "random-B share %.3f", (double)nsp / l.n);
    ck_assert(unk_tokens > 0 && unk_tokens < tokens / 20); /* <unk> became [UNK], and only it */
    list_free(&l);
    pretrain_masker_free(&m);
    pretrain_corpus_free(c);
    wordpiece_vocab_free(v);
}
END_TEST

/* ---- what is refused, what is kept ------------------------------------------------------------ */

/* The header's reserved bytes and undefined flags were once never checked: a shard from a newer
 * writer (or a damaged one) was read as if they meant nothing. */
START_TEST(test_shard_reserved_bytes_and_flags)
{
    char p[512];
    int code;
    const int lens[2] = {10, 20};
    tmp_shard_path(p, sizeof p);
    write_test_shard(p, lens, 2, 32, 4, 1000);
    const char *m = open_error(p, &code);
    ck_assert_msg(code == UNPAD_OK, "%s", m);
    uint8_t one = 1, b4[4];
    patch_bytes(p, 100, &one, 1);
    m = open_error(p, &code);
    ck_assert_int_eq(code, UNPAD_EINVAL);
    ck_assert_msg(strstr(m, p) && strstr(m, "bad header at byte 100: reserved bytes 76..127 must be "
                                             "zero, found 0x01"), "%s", m);
    one = 0;
    patch_bytes(p, 100, &one, 1);
    put_le32(b4, 2);
    patch_bytes(p, 72, b4, 4);
    m = open_error(p, &code);
    ck_assert_msg(strstr(m, "bad header at byte 72: flags 0x2, only bit 0 (synthetic) is defined"),
                  "%s", m);
    put_le32(b4, SHARD_FLAG_SYNTHETIC);
    patch_bytes(p, 72, b4, 4);
    /* the same checks on memory; a shard in memory reads like its file */
    char *bytes;
    size_t n;
    unpad_err e = {0};
    ck_assert_int_eq(unpad_read_file(p, &bytes, &n, &e), UNPAD_OK);
    shard *s;
    ck_assert_msg(shard_open_mem("mem.bin", bytes, n, &s, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_int_eq(shard_count(s), 2);
    ck_assert_int_eq(shard_lengths(s)[1], 20);
    ck_assert_uint_eq(shard_get_info(s)->flags, SHARD_FLAG_SYNTHETIC);
    shard_close(s);
    bytes[127] = 9;
    ck_assert_int_eq(shard_open_mem("mem.bin", bytes, n, &s, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "mem.bin: bad header at byte 127"), "%s", e.msg);
    ck_assert_int_eq(shard_open_mem("mem.bin", bytes, 50, &s, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "mem.bin: truncated: the file has 50 bytes"), "%s", e.msg);
    free(bytes);
    unlink(p);
}
END_TEST

/* Text: a NUL byte, a folder or a device is refused; /dev/zero once grew the memory forever. */
START_TEST(test_text_refusals)
{
    wordpiece_vocab *v = load_tiny();
    pretrain_corpus *c;
    unpad_err e = {0};
    ck_assert_int_eq(pretrain_corpus_alloc(&c, &e), UNPAD_OK);
    static const char text[] = "the cat\nsat\0 the\n";
    ck_assert_int_eq(pretrain_corpus_add_text(c, v, "t.txt", text, sizeof text - 1,
                                              PRETRAIN_TEXT_LINES, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "t.txt:2: a NUL byte (byte 3 of the line)"), "%s", e.msg);
    ck_assert_int_eq(pretrain_corpus_add_file(c, v, "/dev/zero", PRETRAIN_TEXT_LINES, &e),
                     UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "/dev/zero: not a regular file or a pipe"), "%s", e.msg);
    ck_assert_int_eq(pretrain_corpus_add_file(c, v, "/tmp", PRETRAIN_TEXT_LINES, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "/tmp: not a regular file or a pipe"), "%s", e.msg);
    pretrain_corpus_free(c);
    /* a vocabulary in memory, with a NUL byte */
    wordpiece_vocab *w;
    static const char vocab[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MA\0SK]\n";
    ck_assert_int_eq(wordpiece_vocab_parse("v.txt", vocab, sizeof vocab - 1, &w, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "v.txt:5: a NUL byte (byte offset 27)"), "%s", e.msg);
    ck_assert_int_eq(wordpiece_vocab_parse("v.txt", vocab, 26, &w, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "v.txt: not a BERT WordPiece vocabulary: no [MASK]"), "%s", e.msg);
    wordpiece_vocab_free(v);
}
END_TEST

typedef struct {
    long samples, tokens;
    int max_len;
} sample_count;

static int count_samples(void *ctx, const shard_sample *s, unpad_err *err)
{
    sample_count *k = ctx;
    ck_assert_int_le(s->len, k->max_len);
    k->samples++;
    k->tokens += s->len;
    return UNPAD_OK;
}

/* One line of 20 MB once became one sample: 512 tokens kept, the other millions dropped without a
 * word. Now an over-long sentence is split into pieces that chunk like sentences, and every token
 * of the text is counted as kept or cut. (A 100,000-token line here: the same path, faster.) */
START_TEST(test_long_line_becomes_many_samples)
{
    wordpiece_vocab *v = load_tiny();
    enum { WORDS = 100000 };
    char *text = malloc((size_t)WORDS * 4 + 2);
    size_t n = 0;
    for (int i = 0; i < WORDS; i++) {
        memcpy(text + n, i % 2 ? "cat " : "sat ", 4);
        n += 4;
    }
    text[n++] = '\n';
    pretrain_corpus *c;
    unpad_err e = {0};
    ck_assert_int_eq(pretrain_corpus_alloc(&c, &e), UNPAD_OK);
    ck_assert_int_eq(pretrain_corpus_add_text(c, v, "long.txt", text, n, PRETRAIN_TEXT_LINES, &e),
                     UNPAD_OK);
    free(text);
    ck_assert_int_eq(pretrain_corpus_sentences(c), 1);
    ck_assert_int_eq(pretrain_corpus_tokens(c), WORDS);
    pretrain_masker m;
    ck_assert_int_eq(pretrain_masker_from_vocab(v, &m, &e), UNPAD_OK);
    pretrain_opts o;
    pretrain_opts_default(&o);
    o.shuffle_buffer = 0;
    sample_count k = {.max_len = o.max_len};
    pretrain_stats st;
    ck_assert_int_eq(pretrain_generate(c, &o, &m, count_samples, &k, &st, &e), UNPAD_OK);
    ck_assert_int_eq(st.samples, k.samples);
    ck_assert_int_eq(st.split_sentences, 1);
    ck_assert_int_eq(st.split_pieces, (WORDS + PRETRAIN_PIECE_TOKENS - 1) / PRETRAIN_PIECE_TOKENS);
    ck_assert_int_eq(st.text_tokens, WORDS);
    ck_assert_int_eq(st.kept_tokens + st.cut_tokens, WORDS); /* nothing lost without a count */
    ck_assert_int_ge(k.samples, WORDS / (o.max_len - 3));   /* about one sample per 509 tokens */
    ck_assert_int_lt(st.cut_tokens, WORDS / 50);             /* less than 2% cut */
    ck_assert_int_eq(k.tokens, st.kept_tokens + st.random_tokens + 3 * k.samples);
    /* ordinary text is not split, and the identity holds there too */
    pretrain_corpus *d = number_corpus(v, 10, 20);
    o.max_len = 16;
    o.max_pred = 2;
    k.max_len = 16;
    ck_assert_int_eq(pretrain_generate(d, &o, &m, count_samples, &k, &st, &e), UNPAD_OK);
    ck_assert_int_eq(st.split_sentences, 0);
    ck_assert_int_eq(st.kept_tokens + st.cut_tokens, 1000);
    ck_assert_int_gt(st.cut_tokens, 0); /* chunks of 5-token sentences overshoot a 13-token target */
    pretrain_corpus_free(d);
    pretrain_masker_free(&m);
    pretrain_corpus_free(c);
    wordpiece_vocab_free(v);
}
END_TEST

/* What tokenizing drops is counted: invalid UTF-8, control characters, words that become [UNK]. */
START_TEST(test_tokenizer_counts)
{
    wordpiece_vocab *v = load_tiny();
    char text[256];
    int n = snprintf(text, sizeof text, "the \xff cat\x01 zzz ");
    memset(text + n, 'a', 120);
    n += 120;
    text[n] = '\0';
    wordpiece_ids ids = {0};
    wordpiece_counts wc = {0};
    unpad_err e = {0};
    ck_assert_int_eq(wordpiece_tokenize(v, text, (size_t)n, &ids, &wc, &e), UNPAD_OK);
    ck_assert_int_eq(ids.n, 4); /* the cat [UNK] [UNK] */
    ck_assert_int_eq(wc.invalid_bytes, 1);
    ck_assert_int_eq(wc.dropped_chars, 1);
    ck_assert_int_eq(wc.unk_words, 2); /* zzz is no piece; 120 a's are over 100 characters */
    wordpiece_ids_free(&ids);
    wordpiece_vocab_free(v);
}
END_TEST

/* `unpad-data` with the flags of one run given to another: refused (exit 2, the flag named), never
 * ignored (an --out beside --inspect once wrote nothing and exited 0). */
static int data_run(const char *args, const char *out_dir)
{
    char bin[512], home[512], cmd[2048];
    const char *b = getenv("UNPAD_DATA_BIN");
    if (!b || !*b)
        b = tu_path(bin, sizeof bin, "bin/unpad-data");
    snprintf(cmd, sizeof cmd, "cd '%s' && UNPAD_HOME='%s' '%s' %s > /dev/null 2> err.txt", out_dir,
             tu_path(home, sizeof home, "."), b, args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(test_cli_flags_of_another_run)
{
    char dir[] = "/tmp/unpad-data-XXXXXX", path[600], *text;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_int_eq(data_run("--synthetic --dist short --samples 4 --max-len 512 --out a.bin", dir), 0);
    static const struct {
        const char *args, *flag;
    } bad[] = {
        {"--inspect a.bin --out b.bin", "--out"},
        {"--inspect a.bin --synthetic --dist short --samples 4", "--synthetic"},
        {"--inspect a.bin --seed 3", "--seed"},
        {"--inspect a.bin a.bin", "drop 'a.bin'"},
        {"--synthetic --dist short --samples 4 --out b.bin --show 2", "--show"},
        {"--synthetic --dist short --samples 4 --out b.bin --hist h.csv", "--hist"},
        {"--synthetic --dist short --samples 4 --out b.bin --dupe 2", "--dupe"},
        {"--vocab a.bin --input a.bin --out b.bin --dist short", "--dist"},
        {"--vocab a.bin --input a.bin --out b.bin --samples 9", "--samples"},
        {"--synthetic --dist short --samples 4 --samples 8 --out b.bin", "--samples given twice ('4', then '8')"},
        /* no masked-LM targets: once a run masked 1 a sample anyway, or wrote shards with none */
        {"--synthetic --dist short --samples 4 --out b.bin --masked-prob 0", "--masked-prob '0': expected a share "
                                                                            "in (0, 1]; 0 masks no position"},
        {"--synthetic --dist short --samples 4 --out b.bin --max-pred 0", "--max-pred '0': expected at least 1; 0 "
                                                                         "masks no position"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(data_run(bad[i].args, dir) == 2, "%s", bad[i].args);
        unpad_err e = {0};
        snprintf(path, sizeof path, "%s/err.txt", dir);
        ck_assert_int_eq(unpad_read_file(path, &text, NULL, &e), UNPAD_OK);
        ck_assert_msg(strstr(text, bad[i].flag), "%s: %s", bad[i].args, text);
        free(text);
        snprintf(path, sizeof path, "%s/b.bin", dir);
        ck_assert_msg(access(path, F_OK) != 0, "%s", bad[i].args);
    }
    ck_assert_int_eq(data_run("--inspect a.bin --show 1 --hist h.csv", dir), 0);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(path), 0);
}
END_TEST

/* err.txt of the last data_run in dir, in a static buffer. */
static const char *data_err(const char *dir)
{
    static char buf[4096];
    char path[600], *text;
    unpad_err e = {0};
    snprintf(path, sizeof path, "%s/err.txt", dir);
    ck_assert_int_eq(unpad_read_file(path, &text, NULL, &e), UNPAD_OK);
    snprintf(buf, sizeof buf, "%s", text);
    free(text);
    return buf;
}

/* The text as given: in another encoding than UTF-8 it loses the letters of its bytes, and the run
 * says so on stderr with what to do (text in UTF-8 gets no such word); one file given twice is
 * refused; nothing asked at all gets the usage. */
START_TEST(test_cli_text_inputs)
{
    char dir[] = "/tmp/unpad-data-XXXXXX", path[600];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    static const char *const files[][2] = {
        {"vocab.txt", "[PAD]\n[unused0]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\nsat\ncafe\n.\n"},
        {"latin1.txt", "the caf\xe9 cat sat .\nthe cat sat .\n"},
        {"utf8.txt", "the caf\xc3\xa9 cat sat .\nthe cat sat .\n"}};
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i][0]);
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(files[i][1], f);
        fclose(f);
    }
    ck_assert_int_eq(data_run("--vocab vocab.txt --input latin1.txt --out a.bin", dir), 0);
    const char *m = data_err(dir);
    ck_assert_msg(strstr(m, "warning: 1 byte of the text is not UTF-8 and dropped") && strstr(m, "iconv -f latin1"),
                  "%s", m);
    ck_assert_int_eq(data_run("--vocab vocab.txt --input utf8.txt --out b.bin", dir), 0);
    m = data_err(dir);
    ck_assert_msg(!strstr(m, "not UTF-8"), "%s", m);
    ck_assert_int_eq(data_run("--vocab vocab.txt --input utf8.txt ./utf8.txt --out c.bin", dir), 2);
    m = data_err(dir);
    ck_assert_msg(strstr(m, "the input './utf8.txt' is 'utf8.txt' again"), "%s", m);
    snprintf(path, sizeof path, "%s/c.bin", dir);
    ck_assert(access(path, F_OK) != 0);
    /* '-' is standard input: the same shard as from the file */
    ck_assert_int_eq(data_run("--vocab vocab.txt --input - --out d.bin < utf8.txt", dir), 0);
    snprintf(path, sizeof path, "cmp -s '%s/b.bin' '%s/d.bin'", dir, dir);
    ck_assert_int_eq(system(path), 0);
    /* nothing asked at all: the usage, exit 2 */
    ck_assert_int_eq(data_run("", dir), 2);
    m = data_err(dir);
    ck_assert_msg(strstr(m, "usage: unpad-data"), "%s", m);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(path), 0);
}
END_TEST

/* A file --out that is there already was overwritten without a word (a text corpus became a
 * shard), while a folder with shards is refused: now both want --force. */
START_TEST(test_cli_out_file_there)
{
    char dir[] = "/tmp/unpad-data-XXXXXX", path[600], *text;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    unpad_err e = {0};
    FILE *f;
    snprintf(path, sizeof path, "%s/corpus.txt", dir);
    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    fputs("the cat sat .\n", f);
    fclose(f);
    ck_assert_int_eq(data_run("--synthetic --dist short --samples 4 --out corpus.txt", dir), 1);
    const char *m = data_err(dir);
    ck_assert_msg(strstr(m, "corpus.txt: the file is already there") && strstr(m, "--force"), "%s", m);
    ck_assert_int_eq(unpad_read_file(path, &text, NULL, &e), UNPAD_OK);
    ck_assert_str_eq(text, "the cat sat .\n");
    free(text);
    ck_assert_int_eq(data_run("--synthetic --dist short --samples 4 --out corpus.txt --force", dir), 0);
    shard *s;
    ck_assert_msg(shard_open(path, &s, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_int_eq(shard_count(s), 4);
    shard_close(s);
    ck_assert_int_eq(data_run("--synthetic --dist short --samples 4 --out /dev/null", dir), 0); /* a device */
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(path), 0);
}
END_TEST

/* --force over a folder of shards replaces the set only once the new one is whole: a refused run
 * (a .bin file not ours) and a failed one (a missing distribution file) leave the old set as it was. */
START_TEST(test_cli_force_keeps_the_old_set_until_the_new_one_is_whole)
{
    char dir[] = "/tmp/unpad-data-XXXXXX", path[700];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_int_eq(data_run("--synthetic --dist short --samples 30 --samples-per-shard 10 --out fd", dir), 0);
    ck_assert_int_eq(data_run("--synthetic --dist short --samples 4 --out fd/zz-other.bin", dir), 0);
    ck_assert_int_eq(data_run("--synthetic --dist short --samples 5 --samples-per-shard 10 --out fd --force", dir), 1);
    ck_assert_msg(strstr(data_err(dir), "zz-other.bin, which is not ours to replace"), "%s", data_err(dir));
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/fd/shard-%05d.bin", dir, i);
        ck_assert_msg(access(path, F_OK) == 0, "%s removed by a refused run", path);
    }
    snprintf(path, sizeof path, "%s/fd/zz-other.bin", dir);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(data_run("--synthetic --dist no-such.csv --samples 5 --out fd --force", dir), 1);
    unpad_err e = {0};
    for (int i = 0; i < 3; i++) { /* the old set, whole */
        shard *sh;
        snprintf(path, sizeof path, "%s/fd/shard-%05d.bin", dir, i);
        ck_assert_msg(shard_open(path, &sh, &e) == UNPAD_OK, "%s", e.msg);
        ck_assert_int_eq(shard_count(sh), 10);
        shard_close(sh);
    }
    /* a whole new set: the old one's extra shard gone, no staged file left */
    ck_assert_int_eq(data_run("--synthetic --dist short --samples 15 --samples-per-shard 10 --out fd --force", dir),
                     0);
    for (int i = 0; i < 2; i++) {
        shard *sh;
        snprintf(path, sizeof path, "%s/fd/shard-%05d.bin", dir, i);
        ck_assert_msg(shard_open(path, &sh, &e) == UNPAD_OK, "%s", e.msg);
        ck_assert_int_eq(shard_count(sh), i ? 5 : 10);
        shard_close(sh);
    }
    snprintf(path, sizeof path, "%s/fd/shard-00002.bin", dir);
    ck_assert(access(path, F_OK) != 0);
    snprintf(path, sizeof path, "%s/fd/.shard-00000.bin.new", dir);
    ck_assert(access(path, F_OK) != 0);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(path), 0);
}
END_TEST

/* A file --out in a folder that is not there or cannot be written was reported only after the
 * whole text had been read and tokenized; now before any work (the text's second file, missing,
 * is never reached). */
START_TEST(test_cli_out_file_place_checked_first)
{
    char dir[] = "/tmp/unpad-data-XXXXXX", path[600], vocab[512], args[1200];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    FILE *f;
    snprintf(path, sizeof path, "%s/t.txt", dir);
    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    fputs("the cat sat .\nhello world .\n\nthe cat .\n", f);
    fclose(f);
    ck_assert_ptr_nonnull(tiny_vocab_path(vocab, sizeof vocab));
    static const struct {
        const char *out, *says;
    } bad[] = {
        {"/nonexistent-unpad/x.bin", "/nonexistent-unpad/x.bin: cannot write: no folder /nonexistent-unpad"},
        {"/proc/x.bin", "/proc/x.bin: cannot write in the folder /proc: "},
        {"-", "--out -: a shard cannot go to standard output"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "--vocab '%s' --input t.txt missing.txt --max-len 16 --max-pred 2 --out %s",
                 vocab, bad[i].out);
        ck_assert_int_eq(data_run(args, dir), 1);
        const char *m = data_err(dir);
        ck_assert_msg(strstr(m, bad[i].says), "%s", m);
    }
    unlink(vocab);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(path), 0);
}
END_TEST

/* 1 when folder dir holds an entry whose name starts with prefix. */
static int has_entry(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int found = 0;
    while (d && !found && (de = readdir(d)))
        found = strncmp(de->d_name, prefix, strlen(prefix)) == 0;
    if (d)
        closedir(d);
    return found;
}

/* Starts unpad-data in dir (its output in out.txt and err.txt), waits until dir holds an entry
 * named wait_for..., sends sig and returns the wait status. */
static int data_run_signalled(const char *dir, char *const *args, const char *wait_for, int sig)
{
    char bin[512];
    const char *b = getenv("UNPAD_DATA_BIN");
    if (!b || !*b)
        b = tu_path(bin, sizeof bin, "bin/unpad-data");
    char abs_bin[1024];
    ck_assert_ptr_nonnull(realpath(b, abs_bin));
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGINT, SIG_DFL); /* as from a terminal, even under a shell that ignores it */
        signal(SIGTERM, SIG_DFL);
        if (chdir(dir) != 0 || !freopen("out.txt", "w", stdout) || !freopen("err.txt", "w", stderr))
            _exit(127);
        char *argv[32] = {abs_bin};
        for (int i = 0; args[i] && i < 30; i++)
            argv[i + 1] = args[i];
        execv(abs_bin, argv);
        _exit(127);
    }
    int seen = 0;
    for (int i = 0; i < 20000 && !seen; i++) { /* up to 20 s */
        char sub[600];
        const char *slash = strrchr(wait_for, '/');
        snprintf(sub, sizeof sub, "%s/%.*s", dir, slash ? (int)(slash - wait_for) : 0, wait_for);
        seen = has_entry(sub, slash ? slash + 1 : wait_for);
        if (!seen)
            usleep(1000);
    }
    kill(pid, seen ? sig : SIGKILL);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(seen, "no %s appeared in %s", wait_for, dir);
    return st;
}

/* A run stopped by a signal once left the shards it had completed, a folder that read as a whole
 * smaller set. Now it stops as on an error: the shards it wrote and the folder it made are
 * removed, and a file output leaves neither the file nor its temporary. */
START_TEST(test_signal_removes_what_the_run_wrote)
{
    char dir[] = "/tmp/unpad-data-XXXXXX", path[600], *text;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    unpad_err e = {0};
    char *folder_run[] = {"--synthetic", "--dist", "short", "--samples", "100000000",
                          "--samples-per-shard", "100", "--out", "set/", NULL};
    int st = data_run_signalled(dir, folder_run, "set/shard-00003.bin", SIGINT);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT, "status %d", st);
    snprintf(path, sizeof path, "%s/set", dir);
    ck_assert_msg(access(path, F_OK) != 0, "the folder and its shards are left");
    snprintf(path, sizeof path, "%s/err.txt", dir);
    ck_assert_int_eq(unpad_read_file(path, &text, NULL, &e), UNPAD_OK);
    ck_assert_msg(strstr(text, "set: stopped by SIGINT before the run was complete: removed the "), "%s", text);
    free(text);
    /* a folder that was there stays, empty */
    snprintf(path, sizeof path, "%s/kept", dir);
    ck_assert_int_eq(mkdir(path, 0777), 0);
    folder_run[8] = "kept";
    st = data_run_signalled(dir, folder_run, "kept/shard-00002.bin", SIGTERM);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "status %d", st);
    ck_assert_msg(!has_entry(path, "shard-"), "shards are left in %s", path);
    ck_assert_int_eq(rmdir(path), 0);
    /* one file: written under a temporary name, which goes */
    char *file_run[] = {"--synthetic", "--dist", "short", "--samples", "100000000", "--out",
                        "one.bin", NULL};
    st = data_run_signalled(dir, file_run, "one.bin.tmp-", SIGTERM);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "status %d", st);
    ck_assert_msg(!has_entry(dir, "one.bin"), "one.bin or its temporary is left");
    snprintf(path, sizeof path, "%s/err.txt", dir);
    ck_assert_int_eq(unpad_read_file(path, &text, NULL, &e), UNPAD_OK);
    ck_assert_msg(strstr(text, "one.bin: stopped by SIGTERM before the run was complete: nothing written"), "%s",
                  text);
    free(text);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(path), 0);
}
END_TEST

Suite *data_suite(void)
{
    Suite *s = suite_create("data");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_wordpiece_known_words);
    tcase_add_test(tc, test_basic_punctuation_and_accents);
    tcase_add_test(tc, test_wrong_vocab_refused);
    tcase_add_test(tc, test_vocab_trailing_blank_lines);
    tcase_add_test(tc, test_masking_proportions);
    tcase_add_test(tc, test_sentence_pairs);
    tcase_add_test(tc, test_text_reader);
    tcase_add_test(tc, test_byte_order_mark_skipped);
    tcase_add_test(tc, test_shard_round_trip);
    tcase_add_test(tc, test_pack_batch);
    tcase_add_test(tc, test_shard_folder);
    tcase_add_test(tc, test_bad_shards);
    tcase_add_test(tc, test_synthetic);
    tcase_add_test(tc, test_deterministic_for_a_seed);
    tcase_add_test(tc, test_wikitext_valid);
    tcase_add_test(tc, test_shard_reserved_bytes_and_flags);
    tcase_add_test(tc, test_text_refusals);
    tcase_add_test(tc, test_long_line_becomes_many_samples);
    tcase_add_test(tc, test_tokenizer_counts);
    tcase_add_test(tc, test_cli_flags_of_another_run);
    tcase_add_test(tc, test_cli_out_file_there);
    tcase_add_test(tc, test_cli_force_keeps_the_old_set_until_the_new_one_is_whole);
    tcase_add_test(tc, test_cli_text_inputs);
    tcase_add_test(tc, test_cli_out_file_place_checked_first);
    tcase_add_test(tc, test_signal_removes_what_the_run_wrote);
    suite_add_tcase(s, tc);
    return s;
}
