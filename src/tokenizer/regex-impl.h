/* A small backtracking regex engine over code points, for the
 * pre-tokenizer patterns of the reference tokenizers (Perl semantics:
 * leftmost-first alternation, greedy or lazy quantifiers).
 *
 * Supported: literals and escapes (\r \n \t \\ \. ...), classes [...] and
 * [^...] with ranges, \p{L} \p{N} \p{P} \p{S} \p{M} \p{Z} \p{C} (and \P{..}),
 * \p{Lu} .. (two-letter general categories, with a table that has them),
 * \s \S \d \D, '.', groups (...) (?:...), lookahead (?=...) (?!...), '$',
 * quantifiers ? * + {m} {m,} {m,n} with an optional lazy '?'. */
#ifndef CANDLE_TOKENIZER_REGEX_IMPL_H
#define CANDLE_TOKENIZER_REGEX_IMPL_H

#include <stdint.h>

#include "candle/status.h"

typedef struct tok_regex tok_regex;

/* Errors go to the thread-local last error ("regex: ... at offset N"). */
candle_status tok_regex_compile(const char *pattern, tok_regex **out);
/* The same with \p{X} read from another category table (the Hugging Face
 * tokenizers' Unicode version rather than llama.cpp's), and \p{Xy} (Lu, Nd,
 * ...) from gc, which gives an index into gc_names (two letters each,
 * at most 32); gc NULL refuses \p{Xy}. */
candle_status tok_regex_compile_cat(const char *pattern, int (*cat)(uint32_t), int (*gc)(uint32_t),
                                    const char *gc_names, tok_regex **out);
void tok_regex_free(tok_regex *re);

/* Backtracking state reused across matches (grows as needed). When the
 * matches tried on one text take too many steps (a greedy run that keeps
 * failing at its end, as \s+$ on a long run of spaces), a bitmap of the
 * (position, instruction) states already explored is switched on, bounding
 * the work by their number, as in RE2's BitState. */
typedef struct tok_regex_stack {
    int64_t *v;
    int64_t n, cap;
    const void *memo_re, *memo_text; /* what the steps and memo are for */
    int64_t memo_len, steps;
    uint64_t *memo;                  /* NULL until switched on */
} tok_regex_stack;

void tok_regex_stack_free(tok_regex_stack *st);
/* Before matching a new text (the memo belongs to one text and regex; it
 * is also dropped when either's address or the length changes). */
void tok_regex_begin(tok_regex_stack *st);

/* End of the match that starts exactly at cps[pos] within cps[0..n), or -1
 * if none (or -2 if memory ran out). */
int64_t tok_regex_match_at(const tok_regex *re, const uint32_t *cps, int64_t n, int64_t pos,
                           tok_regex_stack *st);

#endif
