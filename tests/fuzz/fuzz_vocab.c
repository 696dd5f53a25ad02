/* fuzz_vocab.c — WordPiece vocabularies (exec/wordpiece.c) from arbitrary bytes; a vocabulary that
 * loads then tokenizes the same bytes as text, every id inside it. */
#include "fuzz.h"
#include "wordpiece.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wordpiece_vocab *v = NULL;
    unpad_err e = {0};
    int rc = wordpiece_vocab_parse(FUZZ_NAME, (const char *)data, size, &v, &e);
    if (rc) {
        fuzz_check_refusal(rc, &e);
        return 0;
    }
    wordpiece_ids ids = {0};
    wordpiece_counts wc = {0};
    FUZZ_CHECK(wordpiece_tokenize(v, (const char *)data, size, &ids, &wc, &e) == UNPAD_OK, "%s", e.msg);
    for (long i = 0; i < ids.n; i++)
        FUZZ_CHECK(ids.id[i] >= 0 && ids.id[i] < wordpiece_vocab_size(v), "id %d", ids.id[i]);
    FUZZ_CHECK(wc.invalid_bytes >= 0 && (size_t)wc.invalid_bytes <= size, "invalid %ld", wc.invalid_bytes);
    char buf[256];
    wordpiece_decode(v, ids.id, ids.n, buf, sizeof buf);
    FUZZ_CHECK(memchr(buf, '\0', sizeof buf) != NULL, "decode unterminated");
    wordpiece_ids_free(&ids);
    wordpiece_vocab_free(v);
    return 0;
}
