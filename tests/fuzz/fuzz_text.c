/* fuzz_text.c — text corpora (exec/pretrain.c over exec/wordpiece.c) from arbitrary bytes: the
 * first byte picks the format, the rest is the text. Text that reads becomes valid samples of at
 * most max_len tokens, and every token of the text is either in a sample or counted as cut. */
#include "fuzz.h"
#include "pretrain.h"
#include "wordpiece.h"

static wordpiece_vocab *vocab;
static pretrain_masker masker;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static const char text[] = "[PAD]\n[unused0]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nun\n##aff\n##able\n"
                               "the\ncat\nsat\n.\n,\n!\n-\n=\nhello\nworld\n##s\na\nb\n##a\n##b\n"
                               "1\n2\n3\n";
    unpad_err e = {0};
    if (wordpiece_vocab_parse("tiny-vocab", text, sizeof text - 1, &vocab, &e) ||
        pretrain_masker_from_vocab(vocab, &masker, &e)) {
        fprintf(stderr, "fuzz_text: %s\n", e.msg);
        abort();
    }
    return 0;
}

typedef struct {
    const pretrain_opts *o;
    long samples;
} emit_ctx;

static int check_sample(void *ctx, const shard_sample *s, unpad_err *err)
{
    emit_ctx *c = ctx;
    FUZZ_CHECK(s->len >= 2 && s->len <= c->o->max_len, "len %d", s->len);
    FUZZ_CHECK(s->n_pred >= 0 && s->n_pred <= c->o->max_pred, "n_pred %d", s->n_pred);
    for (int k = 0; k < s->len; k++)
        FUZZ_CHECK(s->tokens[k] >= 0 && s->tokens[k] < wordpiece_vocab_size(vocab) &&
                       (s->segments[k] == 0 || s->segments[k] == 1),
                   "token %d segment %d", s->tokens[k], s->segments[k]);
    for (int k = 0; k < s->n_pred; k++)
        FUZZ_CHECK(s->mpos[k] > 0 && s->mpos[k] < s->len && (!k || s->mpos[k] > s->mpos[k - 1]),
                   "mpos %d", s->mpos[k]);
    c->samples++;
    return UNPAD_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const int formats[3] = {PRETRAIN_TEXT_AUTO, PRETRAIN_TEXT_WIKITEXT, PRETRAIN_TEXT_LINES};
    pretrain_corpus *c;
    unpad_err e = {0};
    FUZZ_CHECK(pretrain_corpus_alloc(&c, &e) == UNPAD_OK, "alloc");
    int rc = pretrain_corpus_add_text(c, vocab, FUZZ_NAME, (const char *)data + 1, size - 1,
                                      formats[data[0] % 3], &e);
    if (rc) {
        fuzz_check_refusal(rc, &e);
    } else if (pretrain_corpus_documents(c) > 0) {
        pretrain_opts o;
        pretrain_opts_default(&o);
        o.max_len = 8 + data[0] % 24; /* short, so that long sentences are split */
        o.max_pred = 3;
        o.shuffle_buffer = 4;
        o.seed = data[0];
        emit_ctx ec = {&o, 0};
        pretrain_stats st;
        FUZZ_CHECK(pretrain_generate(c, &o, &masker, check_sample, &ec, &st, &e) == UNPAD_OK, "%s",
                   e.msg);
        FUZZ_CHECK(st.samples == ec.samples, "samples %ld emitted %ld", st.samples, ec.samples);
        FUZZ_CHECK(st.text_tokens == pretrain_corpus_tokens(c), "text tokens %ld", st.text_tokens);
        FUZZ_CHECK(st.kept_tokens + st.cut_tokens == st.text_tokens, "kept %ld + cut %ld != %ld",
                   st.kept_tokens, st.cut_tokens, st.text_tokens);
    }
    pretrain_corpus_free(c);
    return 0;
}
