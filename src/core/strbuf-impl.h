/* A growing NUL-terminated string for the text the library writes (chat
 * prompts, grammars, tool-call arguments). */
#ifndef CANDLE_STRBUF_IMPL_H
#define CANDLE_STRBUF_IMPL_H

#include <stdbool.h>
#include <stddef.h>

typedef struct cdl_strbuf {
    char *s;       /* NULL until the first append; the caller frees it */
    size_t n, cap; /* bytes held (without the NUL), allocated */
    bool failed;   /* an append ran out of memory (or its caller refused it): later ones do nothing */
} cdl_strbuf;

void cdl_strbuf_put(cdl_strbuf *b, const char *s, size_t n);
void cdl_strbuf_str(cdl_strbuf *b, const char *s);

#endif
