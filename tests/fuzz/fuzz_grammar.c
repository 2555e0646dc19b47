/* libFuzzer target for the GBNF parser and matcher: an input is
 *   [grammar text] \0 [bytes for the matcher]
 * (no \0: all grammar). Beyond "no crash":
 * - a refused grammar has a message starting "grammar: ";
 * - feeding the bytes whole or one by one gives the same verdicts (a refused
 *   byte leaves the state as it was);
 * - the mask over a small fixed vocabulary agrees with token_ok for every
 *   token, never removes every token without saying so, and only tokens it
 *   kept are accepted.
 * The grammar text is also read as a JSON Schema: when it converts, the
 * GBNF it gives must parse.
 * Seeds: tests/fuzz/gen_grammar_corpus.py. Built with -DCANDLE_FUZZ=ON. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "candle/candle.h"
#include "candle/grammar.h"
#include "fuzz-check.h"

#define MAX_FEED 512 /* longer feeds cost time per input more than they find */

static const char *const pieces[] = {"a", "b", "ab", "{", "}", "\"", " ", "\n", "0", "1",
                                     "true", "x", "\xC3", "\xA9", "\xC3\xA9", "-", "", ":"};
#define N_PIECES ((int32_t)(sizeof pieces / sizeof pieces[0]))

static candle_grammar_vocab *vocab(void) {
    static candle_grammar_vocab *v;
    if (!v) {
        size_t lens[N_PIECES];
        for (int32_t i = 0; i < N_PIECES; i++) lens[i] = strlen(pieces[i]);
        check(!candle_grammar_vocab_from_pieces(&v, pieces, lens, N_PIECES, N_PIECES - 2));
    }
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t glen = nul ? (size_t)(nul - data) : size;
    const char *feed = nul ? (const char *)nul + 1 : NULL;
    size_t flen = nul ? size - glen - 1 : 0;
    if (flen > MAX_FEED) flen = MAX_FEED;
    char *gbnf = NULL;
    if (!candle_json_schema_to_gbnf((const char *)data, glen, &gbnf)) {
        candle_grammar *sg = NULL;
        check(gbnf && !candle_grammar_parse(&sg, gbnf, strlen(gbnf)));
        candle_grammar_free(sg);
        candle_free(gbnf);
    } else {
        check(gbnf == NULL && !strncmp(candle_last_errmsg(), "json schema", 11));
    }
    candle_grammar *g = NULL;
    if (candle_grammar_parse(&g, (const char *)data, glen)) {
        check(g == NULL && !strncmp(candle_last_errmsg(), "grammar: ", 9));
        return 0;
    }
    candle_grammar_state *a = NULL, *b = NULL;
    if (candle_grammar_state_init(&a, g) || candle_grammar_state_init(&b, g)) {
        candle_grammar_state_free(a);
        candle_grammar_free(g);
        return 0; /* the start rule is over the matcher's limits: refused with a message */
    }
    /* whole: the longest accepted prefix, found byte by byte on b */
    size_t ok_prefix = 0;
    for (size_t i = 0; i < flen; i++) {
        if (!candle_grammar_state_accept_bytes(b, feed + i, 1)) break;
        ok_prefix = i + 1;
    }
    check(candle_grammar_state_accept_bytes(a, feed, ok_prefix));
    if (ok_prefix < flen) {
        check(!candle_grammar_state_accept_bytes(a, feed + ok_prefix, 1)); /* a is left as it was */
        check(!candle_grammar_match(g, feed, ok_prefix + 1));
    }
    check(candle_grammar_state_can_end(a) == candle_grammar_state_can_end(b));
    check(candle_grammar_match(g, feed, ok_prefix) == candle_grammar_state_can_end(a));

    candle_grammar_vocab *v = vocab();
    float logits[N_PIECES];
    for (int32_t i = 0; i < N_PIECES; i++) logits[i] = 0;
    int32_t n_allowed = -1;
    candle_status st = candle_grammar_mask(a, v, logits, &n_allowed);
    check(st == CANDLE_OK ? n_allowed > 0 : n_allowed == 0);
    for (int32_t i = 0; i < N_PIECES; i++) {
        bool kept = st == CANDLE_OK && logits[i] == 0;
        check(st != CANDLE_OK || kept == candle_grammar_token_ok(a, v, i));
        check(st == CANDLE_OK || !candle_grammar_token_ok(a, v, i));
        if (kept && i != N_PIECES - 2) { /* the kept token is accepted: on b, a copy of a */
            candle_grammar_state_reset(b);
            check(candle_grammar_state_accept_bytes(b, feed, ok_prefix));
            check(!candle_grammar_accept_token(b, v, i));
        }
    }
    candle_grammar_state_free(a);
    candle_grammar_state_free(b);
    candle_grammar_free(g);
    return 0;
}
