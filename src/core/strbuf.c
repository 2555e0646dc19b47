#include "strbuf-impl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void cdl_strbuf_put(cdl_strbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (n > SIZE_MAX / 4 - b->n) { /* the doubling below would overflow */
        b->failed = true;
        return;
    }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *t = realloc(b->s, cap);
        if (!t) {
            b->failed = true;
            return;
        }
        b->s = t;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

void cdl_strbuf_str(cdl_strbuf *b, const char *s) { cdl_strbuf_put(b, s, strlen(s)); }
