/* Min-heap of merge candidates, shared by the SPM and BPE encoders. */
#include <stdlib.h>

#include "tokenizer-impl.h"

static bool before(const tok_bigram *a, const tok_bigram *b) {
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

bool tok_heap_push(tok_heap *h, tok_bigram b) {
    if (h->n == h->cap) {
        int64_t nc = h->cap ? h->cap * 2 : 64;
        tok_bigram *nv = tok_tmp_realloc(h->v, (size_t)h->cap * sizeof *nv, (size_t)nc * sizeof *nv);
        if (!nv) return false;
        h->v = nv;
        h->cap = nc;
    }
    int64_t i = h->n++;
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!before(&b, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = b;
    return true;
}

tok_bigram tok_heap_pop(tok_heap *h) {
    tok_bigram top = h->v[0], last = h->v[--h->n];
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && before(&h->v[c + 1], &h->v[c])) c++;
        if (!before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}
