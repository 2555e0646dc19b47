/* Constrained decoding with GBNF grammars, as llama.cpp writes them.
 *
 * A grammar is parsed once (candle_grammar_parse) and shared read-only. A
 * matcher (candle_grammar_state) follows one generated stream: it is
 * advanced by each accepted token's bytes (UTF-8 sequences may span tokens)
 * and masks the logits of tokens that cannot continue the grammar. A
 * candle_grammar_vocab holds the vocabulary's byte strings in a prefix trie,
 * built once per tokenizer. */
#ifndef CANDLE_GRAMMAR_H
#define CANDLE_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "status.h"
#include "tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct candle_grammar candle_grammar;
typedef struct candle_grammar_state candle_grammar_state;
typedef struct candle_grammar_vocab candle_grammar_vocab;

/* Parse GBNF text (len bytes; need not be NUL-terminated); `root` is the
 * start rule. A bad grammar is CANDLE_ERR_INVALID_ARG with a message naming
 * the line:column and the rule ("grammar: 3:12: in rule 'value': ..."), also
 * the thread-local last error. Left recursion, undefined rules and grammars
 * over the size limits (rules, elements, nesting, repetition counts) are
 * refused the same way. */
CANDLE_API candle_status candle_grammar_parse(candle_grammar **out, const char *text, size_t len);
CANDLE_API void candle_grammar_free(candle_grammar *g);
CANDLE_API int32_t candle_grammar_n_rules(const candle_grammar *g);

/* A matcher at the start of g (g must outlive it). */
CANDLE_API candle_status candle_grammar_state_init(candle_grammar_state **out,
                                                   const candle_grammar *g);
CANDLE_API void candle_grammar_state_free(candle_grammar_state *s);
CANDLE_API void candle_grammar_state_reset(candle_grammar_state *s);
/* Advance by n bytes: true if the grammar admits them (a partial UTF-8
 * sequence at the end is kept for the next call); false leaves s unchanged. */
CANDLE_API bool candle_grammar_state_accept_bytes(candle_grammar_state *s, const char *bytes,
                                                  size_t n);
/* Whether the text so far is a complete sentence of the grammar. */
CANDLE_API bool candle_grammar_state_can_end(const candle_grammar_state *s);
/* Whether no more bytes can follow (only the end remains). */
CANDLE_API bool candle_grammar_state_done(const candle_grammar_state *s);
/* Whole-text check: the grammar matches exactly these n bytes. */
CANDLE_API bool candle_grammar_match(const candle_grammar *g, const char *bytes, size_t n);

/* The vocabulary of t: each token's bytes (special tokens have none and are
 * never allowed) and which tokens end generation. */
CANDLE_API candle_status candle_grammar_vocab_from_tokenizer(candle_grammar_vocab **out,
                                                             const candle_tokenizer *t);
/* The same from byte strings (pieces[i] of lens[i] bytes; NULL or empty:
 * never allowed) and an end-of-generation token (-1: none). */
CANDLE_API candle_status candle_grammar_vocab_from_pieces(candle_grammar_vocab **out,
                                                          const char *const *pieces,
                                                          const size_t *lens, int32_t n_vocab,
                                                          int32_t eog);
CANDLE_API void candle_grammar_vocab_free(candle_grammar_vocab *v);
CANDLE_API int32_t candle_grammar_vocab_n(const candle_grammar_vocab *v);

/* Whether token id may come next (its bytes continue the grammar, or it
 * ends generation and the grammar can end). */
CANDLE_API bool candle_grammar_token_ok(candle_grammar_state *s,
                                        const candle_grammar_vocab *v, int32_t id);
/* Set logits[i] (n_vocab of v) to -inf for every token that may not come
 * next. When none may, CANDLE_ERR_INVALID_ARG ("grammar: no token can
 * continue ...") and logits unchanged. *n_allowed (may be NULL) gets the
 * count of allowed tokens. */
CANDLE_API candle_status candle_grammar_mask(candle_grammar_state *s,
                                             const candle_grammar_vocab *v, float *logits,
                                             int32_t *n_allowed);
/* Advance by token id's bytes; an end-of-generation token is accepted when
 * the grammar can end. CANDLE_ERR_INVALID_ARG when the token is not allowed
 * (s unchanged). */
CANDLE_API candle_status candle_grammar_accept_token(candle_grammar_state *s,
                                                     const candle_grammar_vocab *v, int32_t id);

/* JSON Schema to GBNF text (malloc'ed NUL-terminated into *out; free with
 * candle_free) for the basic subset: type (a name or a list), properties and
 * required, enum, const, items with minItems/maxItems, minLength/maxLength,
 * anyOf/oneOf (oneOf's exclusivity is not enforced), $ref to "#",
 * "#/$defs/NAME" or "#/definitions/NAME" (recursion allowed), string format
 * date, time, date-time and uuid, string pattern (the regular part of
 * ECMA-262: classes, groups, alternation, quantifiers, ^ and $ at the ends
 * of the alternatives; backreferences, lookaround and \b refused).
 * Objects are generated with their declared properties only, required ones
 * first. A keyword that would constrain values but is not supported
 * (multipleOf, bounds on non-integer numbers, another format, ...) is
 * CANDLE_ERR_INVALID_ARG naming it and
 * its byte offset: never a silently looser grammar. */
CANDLE_API candle_status candle_json_schema_to_gbnf(const char *schema, size_t len, char **out);

#ifdef __cplusplus
}
#endif
#endif
