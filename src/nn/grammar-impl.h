/* The compiled form of a GBNF grammar, shared by the parser and the matcher.
 *
 * Every rule is a run of elements in one flat array: its alternatives one
 * after the other, separated by GE_ALT and closed by GE_END. Repetitions and
 * groups were turned into generated rules by the parser, so an element is a
 * character set, any character, or a reference to a rule. */
#ifndef CANDLE_GRAMMAR_IMPL_H
#define CANDLE_GRAMMAR_IMPL_H

#include <stdint.h>

#include "candle/grammar.h"

enum { GE_END, GE_ALT, GE_REF, GE_CHARS, GE_ANY };

typedef struct gelem {
    uint8_t type;
    uint8_t neg;    /* GE_CHARS: [^...] */
    uint32_t a, b;  /* GE_REF: a = rule; GE_CHARS: ranges[a .. a + b) */
} gelem;

/* Limits that keep a hostile grammar from exhausting memory or time. */
#define GRAMMAR_MAX_RULES 20000
#define GRAMMAR_MAX_ELEMS (1u << 20)
#define GRAMMAR_MAX_NEST 200
#define GRAMMAR_MAX_REPEAT 4096
/* Matcher limits: stacks alive at once, depth of one stack, and expansion
 * steps per accepted code point. Beyond them the text is refused. */
#define GRAMMAR_MAX_STACKS 4096
#define GRAMMAR_MAX_DEPTH 1024
#define GRAMMAR_MAX_WORK 200000

struct candle_grammar {
    gelem *el;
    uint32_t n_el;
    uint32_t *rule_start; /* [n_rules] index into el */
    uint32_t n_rules, root;
    uint32_t *alt_off, *alts; /* rule r's alternatives start at alts[alt_off[r] .. alt_off[r + 1]) */
    uint32_t *ranges; /* pairs lo, hi (inclusive code points) */
    uint32_t n_ranges;
};

#endif
