/* wordpiece.h — BERT uncased tokenization: the vocabulary file, the basic tokenizer and WordPiece.
 *
 * The basic tokenizer does what BERT's uncased BasicTokenizer does: drop NUL, U+FFFD and control
 * characters, put CJK ideographs in words of their own, split on whitespace, lowercase, strip
 * accents (NFD, then drop combining marks; tables cover the Basic Multilingual Plane), and split
 * off every punctuation character. A whitespace-separated word that is exactly one of the five
 * special tokens ([PAD], [UNK], [CLS], [SEP], [MASK]) is kept whole.
 * WordPiece then splits each word greedily, longest match first, continuation pieces prefixed
 * with "##"; a word longer than 100 characters or with an unmatched rest becomes [UNK]. */
#ifndef UNPAD_WORDPIECE_H
#define UNPAD_WORDPIECE_H

#include <stddef.h>
#include <stdint.h>

#include "unpad.h"

/* Words longer than this (in characters) become [UNK], as in BERT. */
#define WORDPIECE_MAX_WORD_CHARS 100

typedef struct wordpiece_vocab wordpiece_vocab;

/* Ids of the tokens every BERT vocabulary must hold. */
typedef struct {
    int32_t pad, unk, cls, sep, mask;
} wordpiece_special;

/* Loads a vocabulary file: one token per line, the line number - 1 is the id (a UTF-8 byte-order
 * mark opening the file is skipped). Refuses a file that lacks any of [PAD] [UNK] [CLS] [SEP]
 * [MASK], has an empty line (blank lines closing the file are no tokens and are let be), a token
 * with blanks or a NUL byte, or a token twice, naming the file and the line. */
int wordpiece_vocab_load(const char *path, wordpiece_vocab **out, unpad_err *err);
/* The same from text[0..len) in memory (copied); name stands for the file in messages. */
int wordpiece_vocab_parse(const char *name, const char *text, size_t len, wordpiece_vocab **out,
                          unpad_err *err);
void wordpiece_vocab_free(wordpiece_vocab *v);

int32_t wordpiece_vocab_size(const wordpiece_vocab *v);
const wordpiece_special *wordpiece_vocab_special(const wordpiece_vocab *v);
/* Id of a token (exact, case-sensitive), or -1. */
int32_t wordpiece_vocab_find(const wordpiece_vocab *v, const char *token);
/* The token of an id, or NULL when id is out of range. */
const char *wordpiece_vocab_token(const wordpiece_vocab *v, int32_t id);
/* 1 when id is one of the five special tokens or an "[unused...]" placeholder: ids that never
 * come out of the tokenizer for text and are not drawn as random replacement tokens. */
int wordpiece_vocab_is_reserved(const wordpiece_vocab *v, int32_t id);

/* A growing array of token ids. */
typedef struct {
    int32_t *id;
    long n, cap;
} wordpiece_ids;

void wordpiece_ids_free(wordpiece_ids *ids);

/* What tokenizing dropped or could not represent, added up over calls. */
typedef struct {
    long invalid_bytes; /* bytes that are not valid UTF-8: dropped */
    long dropped_chars; /* NUL, U+FFFD and control characters: dropped, as BERT does */
    long unk_words;     /* words that became [UNK]: longer than 100 characters or unmatched */
} wordpiece_counts;

/* Tokenizes len bytes of UTF-8 text and appends the ids to ids; adds what it dropped to counts
 * (may be NULL). Fails only for lack of memory. */
int wordpiece_tokenize(const wordpiece_vocab *v, const char *text, size_t len, wordpiece_ids *ids,
                       wordpiece_counts *counts, unpad_err *err);

/* The basic tokenizer alone: the words of text, normalised, joined by single spaces, as a
 * NUL-terminated string the caller frees (NULL when out of memory). For tests and inspection. */
char *wordpiece_basic_tokenize(const char *text, size_t len);

/* Writes ids back as text into buf (always NUL-terminated, cut at cap - 1 bytes): tokens joined
 * by spaces, "##" continuations glued to the piece before. Returns the length the whole text
 * would have (like snprintf). Ids outside the vocabulary print as <id>. */
size_t wordpiece_decode(const wordpiece_vocab *v, const int32_t *ids, long n, char *buf, size_t cap);

#endif
