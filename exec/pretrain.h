/* pretrain.h — BERT pre-training samples from documents, or synthetic ones from a length
 * distribution.
 *
 * From text it follows BERT's create_pretraining_data: documents are lists of sentences; a sample
 * takes a chunk of consecutive sentences up to a target length (max_len - 3, or with probability
 * short_seq_prob a random length in 2..max_len - 3), splits it into A and B, and with probability
 * 1/2 (always when the chunk is one sentence) replaces B by sentences of another document
 * (nsp = 1); the longer of A and B is cut one token at a time, from the front or the back at
 * random, until [CLS] A [SEP] B [SEP] fits max_len. Masking picks round(len * 0.15) positions
 * (at least 1, at most max_pred) among the non-[CLS]/[SEP] tokens: 80% become [MASK], 10% a random
 * token, 10% stay. Random tokens are drawn from the ordinary tokens only (never a special or
 * [unused] one). Everything is drawn from one GSL mt19937 generator, so a seed gives the same
 * samples. Samples pass through a shuffle buffer on their way out.
 *
 * Nothing is dropped without a count: a sentence longer than max_len - 3 tokens (e.g. a long line
 * with no sentence ends) is split into pieces of PRETRAIN_PIECE_TOKENS tokens that chunk like
 * sentences, so it becomes many samples rather than one; the tokens that truncation cuts, the
 * words that became [UNK] and the bytes tokenizing dropped are counted (pretrain_stats,
 * wordpiece_counts) for the caller to report.
 *
 * Memory: the token ids of the corpus (4 bytes a token) and the shuffle buffer (up to
 * shuffle_buffer samples). */
#ifndef UNPAD_PRETRAIN_H
#define UNPAD_PRETRAIN_H

#include <gsl/gsl_rng.h>
#include <signal.h>
#include <stdint.h>

#include "dist.h"
#include "shard.h"
#include "wordpiece.h"

typedef struct {
    int max_len;           /* tokens per sample, [CLS] and [SEP]s included (default 512) */
    int max_pred;          /* masked positions per sample at most (default 76) */
    double masked_prob;    /* share of tokens masked (default 0.15) */
    double short_seq_prob; /* share of documents given a shorter random target (default 0.1) */
    int dupe;              /* passes over the corpus, each with fresh pairs and masks (default 1) */
    int shuffle_buffer;    /* samples held for shuffling; <= 1: none (default 10000) */
    uint64_t seed;         /* default 12345 */
} pretrain_opts;

void pretrain_opts_default(pretrain_opts *o);
/* Checks the ranges (max_len 5..65535, max_pred 0..max_len, probabilities in [0, 1], dupe >= 1). */
int pretrain_opts_check(const pretrain_opts *o, unpad_err *err);

/* What masking needs: special ids and the ids random tokens are drawn from. */
typedef struct {
    int32_t cls, sep, mask, pad, unk;
    int32_t vocab_size;
    int32_t *random_ids; /* (n_random) ordinary tokens */
    int32_t n_random;
} pretrain_masker;

/* From a vocabulary: ordinary tokens are those neither special nor [unused...]. */
int pretrain_masker_from_vocab(const wordpiece_vocab *v, pretrain_masker *m, unpad_err *err);
/* The BERT uncased id layout without a vocabulary file: [PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102,
 * [MASK] 103, ordinary tokens 999..vocab_size-1 (vocab_size > 1000). */
int pretrain_masker_bert_ids(int32_t vocab_size, pretrain_masker *m, unpad_err *err);
void pretrain_masker_free(pretrain_masker *m);

/* Masks s->tokens[0..s->len) in place as described above; fills s->mpos (increasing),
 * s->mlabels and s->n_pred. */
void pretrain_mask(const pretrain_masker *m, double prob, int max_pred, gsl_rng *rng, shard_sample *s);

/* ---- documents ---- */
/* The longest line a text file may have (bytes); a longer one is refused, not cut. */
#define PRETRAIN_MAX_LINE (256L << 20)
/* Pieces an over-long sentence is split into, in tokens (sentence-sized, so chunks fill up to
 * their target as with ordinary sentences). */
#define PRETRAIN_PIECE_TOKENS 64

typedef struct pretrain_corpus pretrain_corpus;

enum {
    PRETRAIN_TEXT_AUTO,     /* WikiText when the first non-blank line is a " = Title = " heading */
    PRETRAIN_TEXT_WIKITEXT, /* " = Title = " starts a document; " = = Section = = " lines are
                               dropped; each line is split into sentences after " . ", " ? ",
                               " ! "; <unk> reads as [UNK]; @-@ @,@ @.@ as - , . */
    PRETRAIN_TEXT_LINES,    /* BERT's format: one sentence per line, a blank line ends a document */
};

int pretrain_corpus_alloc(pretrain_corpus **out, unpad_err *err);
void pretrain_corpus_free(pretrain_corpus *c);
/* While *stop (e.g. set by a signal handler) is nonzero, reading a file stops before its next line
 * with an error that names the file and line (NULL: never). */
void pretrain_corpus_stop_on(pretrain_corpus *c, const volatile sig_atomic_t *stop);
/* Reads a text file (line by line) and tokenizes it into documents; a UTF-8 byte-order mark
 * opening it is skipped. A regular file or a pipe; a folder or device is refused, as are a NUL
 * byte and a line over PRETRAIN_MAX_LINE bytes. */
int pretrain_corpus_add_file(pretrain_corpus *c, const wordpiece_vocab *v, const char *path,
                             int format, unpad_err *err);
/* The same from text[0..len) in memory; name stands for the file in messages. */
int pretrain_corpus_add_text(pretrain_corpus *c, const wordpiece_vocab *v, const char *name,
                             const char *text, size_t len, int format, unpad_err *err);
/* Adds one document; sentences[k] is one sentence of text. For tests and small inputs. */
int pretrain_corpus_add_document(pretrain_corpus *c, const wordpiece_vocab *v,
                                 const char *const *sentences, int n, unpad_err *err);
long pretrain_corpus_documents(const pretrain_corpus *c);
long pretrain_corpus_sentences(const pretrain_corpus *c);
long pretrain_corpus_tokens(const pretrain_corpus *c);
/* What tokenizing the corpus dropped or turned into [UNK]. */
const wordpiece_counts *pretrain_corpus_counts(const pretrain_corpus *c);

/* Receives each finished sample (its arrays are only valid during the call). */
typedef int (*pretrain_emit_fn)(void *ctx, const shard_sample *s, unpad_err *err);

/* What making samples from text kept and dropped. Over all passes:
 * text_tokens = kept_tokens + cut_tokens exactly. */
typedef struct {
    long samples;         /* emitted */
    long text_tokens;     /* tokens of the text, once per pass */
    long kept_tokens;     /* of those, the ones in a sample (as A, or as the B that follows A) */
    long cut_tokens;      /* of those, the ones truncation to max_len cut (lost) */
    long random_tokens;   /* tokens of random B segments (copies of text from other documents) */
    long split_sentences; /* sentences of the text longer than max_len - 3 tokens, split */
    long split_pieces;    /* the pieces they became */
} pretrain_stats;

/* Makes samples from the corpus (needs at least one document) and hands each to emit; stops at
 * the first nonzero code from emit. Fills stats (may be NULL). */
int pretrain_generate(const pretrain_corpus *c, const pretrain_opts *o, const pretrain_masker *m,
                      pretrain_emit_fn emit, void *ctx, pretrain_stats *stats, unpad_err *err);

/* n synthetic samples: lengths drawn from d (all of d's lengths must be <= max_len), ordinary
 * tokens drawn uniformly, [CLS] A [SEP] B [SEP] with a random split (lengths < 5 get one segment),
 * random nsp labels, masked as above. */
int pretrain_synthetic(const unpad_dist *d, long n, const pretrain_opts *o, const pretrain_masker *m,
                       pretrain_emit_fn emit, void *ctx, unpad_err *err);

#endif
