/* Jinja2 subset: the syntax tree jinja_parse.c builds and jinja_eval.c runs.
 * Everything of a compiled template lives in one arena freed with it. */
#ifndef CANDLE_JINJA_IMPL_H
#define CANDLE_JINJA_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "candle/jinja.h"

/* Parser nesting (expressions and blocks) beyond this is refused: the
 * parser and the evaluator recurse once per level. */
#define JJ_MAX_NEST 100
/* Height of one expression's tree (a+a+...+a is parsed in a loop but
 * evaluated recursively). */
#define JJ_MAX_HEIGHT 128

/* A bump allocator with a cap on the bytes it hands out. */
typedef struct jj_block jj_block;
typedef struct jj_arena {
    jj_block *head;
    size_t used, cap; /* cap 0: none */
} jj_arena;
void *cdl_jj_alloc(jj_arena *a, size_t n); /* zeroed; NULL past the cap or on OOM */
void cdl_jj_arena_free(jj_arena *a);

typedef enum jx_kind {
    JX_STR, JX_INT, JX_FLOAT, JX_BOOL, JX_NONE,
    JX_NAME,   /* name */
    JX_ATTR,   /* kid[0].name */
    JX_INDEX,  /* kid[0][kid[1]] */
    JX_SLICE,  /* kid[0][kid[1]:kid[2]:kid[3]], absent parts NULL */
    JX_CALL,   /* kid[0](kid[1..]) */
    JX_FILTER, /* kid[0] | name(kid[1..]) */
    JX_TEST,   /* kid[0] is [not] name(kid[1..]); op 1 when negated */
    JX_BIN,    /* kid[0] op kid[1] */
    JX_NEG, JX_POS, JX_NOT,
    JX_AND, JX_OR,
    JX_COND,  /* kid[1] if kid[0] else kid[2] (kid[2] may be NULL) */
    JX_LIST,  /* [kid...] and tuples */
    JX_DICT,  /* {kid[0]: kid[1], ...} */
} jx_kind;

enum { JOP_ADD = 1, JOP_SUB, JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD, JOP_POW, JOP_CONCAT,
       JOP_EQ, JOP_NE, JOP_LT, JOP_LE, JOP_GT, JOP_GE, JOP_IN, JOP_NOTIN };

typedef struct jx jx;
struct jx {
    jx_kind kind;
    int op;
    int line, col;
    int h;            /* height of the tree below */
    const char *name; /* JX_STR text, JX_NAME/ATTR/FILTER/TEST name; NUL-terminated */
    size_t len;       /* of name */
    int64_t i;
    double f;
    jx **kid;
    const char **kw; /* per kid: keyword name of a call argument, or NULL */
    int nkid;
};

typedef enum jn_kind {
    JN_TEXT,     /* text, len */
    JN_OUT,      /* {{ expr }} */
    JN_IF,       /* conds[i] -> bodies[i]; a NULL cond is else */
    JN_FOR,      /* for vars in expr [if cond]: body [else: alt] */
    JN_SET,      /* set name[.attr] = expr, or a block set when expr is NULL */
    JN_MACRO,    /* macro name(params = defaults): body */
    JN_BREAK, JN_CONTINUE,
    JN_BLOCK,    /* a body rendered in place ({% generation %}) */
} jn_kind;

typedef struct jnode jnode;
typedef struct jbody {
    jnode **n;
    int count;
} jbody;

struct jnode {
    jn_kind kind;
    int line, col;
    const char *text;
    size_t len;
    jx *expr;
    jx *cond;
    jx **conds; /* JN_IF */
    jbody *bodies;
    int nconds;
    const char *vars[2]; /* JN_FOR targets (vars[1] NULL unless a pair); JN_SET name, attr */
    int nvars;
    jbody body, alt;
    const char **params; /* JN_MACRO */
    jx **defaults;
    int nparams;
};

struct candle_jinja {
    jj_arena arena;
    jbody root;
};

#endif
