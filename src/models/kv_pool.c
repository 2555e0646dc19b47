/* The paged KV block pool (see candle/kv_pool.h). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "candle/kv_pool.h"
#include "model-impl.h"
#include "kv_pool-impl.h"

size_t candle_kv_pool_block_bytes(const candle_model *m, candle_dtype kv_type) {
    const candle_model_config *c = &m->cfg;
    /* a row of a block type is whole blocks: rounded up, so a head_dim the
     * pool refuses still gives a size (never 0: callers divide by it) */
    int64_t bs = candle_dtype_info(kv_type)->block_size;
    size_t row = candle_dtype_row_size(kv_type, (c->head_dim + bs - 1) / bs * bs);
    return (size_t)(CANDLE_KV_BLOCK * 2 * c->n_layer * c->n_head_kv) * row;
}

/* Free list: doubly linked through prev/next, -1 ends; oldest at head. */
static void fl_unlink(candle_kv_pool *p, int32_t b) {
    int32_t pr = p->prev[b], nx = p->next[b];
    if (pr >= 0) p->next[pr] = nx;
    else p->head = nx;
    if (nx >= 0) p->prev[nx] = pr;
    else p->tail = pr;
    p->prev[b] = p->next[b] = -1;
    p->in_free[b] = false;
}

static void fl_push(candle_kv_pool *p, int32_t b) {
    p->prev[b] = p->tail;
    p->next[b] = -1;
    if (p->tail >= 0) p->next[p->tail] = b;
    else p->head = b;
    p->tail = b;
    p->in_free[b] = true;
}

candle_status candle_kv_pool_init(candle_kv_pool **out, const candle_model *m, int64_t n_blocks,
                                  candle_dtype kv_type) {
    *out = NULL;
    if (model_need_decoder(m, "kv pool")) return candle_last_error();
    if (n_blocks <= 0 || n_blocks > INT32_MAX / CANDLE_KV_BLOCK)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "kv pool: %lld blocks",
                                (long long)n_blocks);
    candle_status checked = kv_check_type(NULL, "kv pool", kv_type, m->cfg.head_dim, true);
    if (checked) return checked;
    candle_kv_pool *p = calloc(1, sizeof *p);
    if (!p) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: kv pool");
    const candle_model_config *c = &m->cfg;
    p->model = m;
    p->n_blocks = n_blocks;
    p->n_layer = c->n_layer;
    size_t nb = (size_t)n_blocks;
    p->refs = calloc(nb, sizeof *p->refs);
    p->hash = calloc(nb, sizeof *p->hash);
    p->fill = calloc(nb, sizeof *p->fill);
    p->toks = calloc(nb * CANDLE_KV_BLOCK, sizeof *p->toks);
    size_t nbk = 1;
    while (nbk < 2 * nb) nbk *= 2;
    p->mask = nbk - 1;
    p->bucket = malloc(nbk * sizeof *p->bucket);
    p->chain = malloc(nb * sizeof *p->chain);
    p->prev = malloc(nb * sizeof *p->prev);
    p->next = malloc(nb * sizeof *p->next);
    p->in_free = calloc(nb, sizeof *p->in_free);
    p->k = calloc((size_t)c->n_layer, sizeof *p->k);
    p->v = calloc((size_t)c->n_layer, sizeof *p->v);
    candle_ctx_params cp = candle_ctx_default_params();
    cp.backend = m->backend;
    candle_status st = candle_ctx_init(&p->ctx, &cp);
    if (!st && !(p->refs && p->hash && p->fill && p->toks && p->bucket && p->chain && p->prev && p->next && p->in_free && p->k && p->v))
        st = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: kv pool tables");
    int64_t shape[3] = {n_blocks * CANDLE_KV_BLOCK, c->n_head_kv, c->head_dim};
    for (int64_t il = 0; !st && il < c->n_layer; il++) {
        p->k[il] = candle_tensor_new(p->ctx, kv_type, 3, shape);
        p->v[il] = candle_tensor_new(p->ctx, kv_type, 3, shape);
        if (!p->k[il] || !p->v[il])
            st = cdl_set_error(NULL, candle_errcode(p->ctx), "kv pool: %s",
                                  candle_errmsg(p->ctx));
        else if (!(st = candle_tensor_memset_bytes(p->k[il], 0, 0, candle_tensor_nbytes(p->k[il]))))
            st = candle_tensor_memset_bytes(p->v[il], 0, 0, candle_tensor_nbytes(p->v[il]));
    }
    if (st) {
        candle_kv_pool_free(p);
        return st;
    }
    p->head = p->tail = -1;
    memset(p->bucket, 0xff, (p->mask + 1) * sizeof *p->bucket); /* all -1 */
    for (int32_t b = 0; b < (int32_t)n_blocks; b++) fl_push(p, b);
    *out = p;
    return CANDLE_OK;
}

void candle_kv_pool_free(candle_kv_pool *p) {
    if (!p) return;
    candle_ctx_free(p->ctx);
    free(p->k);
    free(p->v);
    free(p->refs);
    free(p->hash);
    free(p->fill);
    free(p->bucket);
    free(p->chain);
    free(p->toks);
    free(p->prev);
    free(p->next);
    free(p->in_free);
    free(p);
}

int64_t candle_kv_pool_n_blocks(const candle_kv_pool *p) { return p->n_blocks; }
int64_t candle_kv_pool_n_used(const candle_kv_pool *p) { return p->n_used; }

candle_status candle_kv_seq_init(candle_kv_seq *s, int64_t n_ctx) {
    memset(s, 0, sizeof *s);
    s->n_ctx = n_ctx;
    s->cap = (n_ctx + CANDLE_KV_BLOCK - 1) / CANDLE_KV_BLOCK;
    s->blocks = malloc((size_t)(s->cap > 0 ? s->cap : 1) * sizeof *s->blocks);
    return s->blocks ? CANDLE_OK : cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: block table");
}

static void ref(candle_kv_pool *p, int32_t b) {
    if (p->refs[b]++ == 0) {
        if (p->in_free[b]) fl_unlink(p, b);
        p->n_used++;
    }
}

static void unref(candle_kv_pool *p, int32_t b) {
    if (--p->refs[b] == 0) {
        fl_push(p, b); /* contents and hash kept: still shareable until reused */
        p->n_used--;
    }
}

void candle_kv_seq_free(candle_kv_pool *p, candle_kv_seq *s) {
    for (int64_t i = 0; i < s->n_blocks; i++) unref(p, s->blocks[i]);
    free(s->blocks);
    memset(s, 0, sizeof *s);
}

/* Hash of a block's tokens chained to the prefix before it (FNV-1a). */
static uint64_t block_hash(uint64_t prev, const int32_t *t) {
    uint64_t h = prev ^ 0xcbf29ce484222325ull;
    for (int i = 0; i < CANDLE_KV_BLOCK; i++) {
        uint32_t x = (uint32_t)t[i];
        for (int k = 0; k < 4; k++) {
            h ^= (x >> (8 * k)) & 0xff;
            h *= 0x100000001b3ull;
        }
    }
    return h;
}

/* The hash of the whole blocks among tokens[0..n_blocks*BLOCK). */
static uint64_t prefix_hash(const int32_t *tokens, int64_t n_blocks) {
    uint64_t h = 0;
    for (int64_t i = 0; i < n_blocks; i++) h = block_hash(h, tokens + i * CANDLE_KV_BLOCK);
    return h;
}

static int64_t common_rows(const int32_t *a, const int32_t *b, int64_t max) {
    int64_t m = 0;
    while (m < max && a[m] == b[m]) m++;
    return m;
}

static void index_add(candle_kv_pool *p, int32_t b, uint64_t h) {
    p->hash[b] = h;
    p->chain[b] = p->bucket[h & p->mask];
    p->bucket[h & p->mask] = b;
}

/* Unpublish b (a no-op when it is not published). */
static void index_drop(candle_kv_pool *p, int32_t b) {
    if (!p->fill[b]) return;
    p->fill[b] = 0;
    int32_t *at = &p->bucket[p->hash[b] & p->mask];
    while (*at != b) at = &p->chain[*at];
    *at = p->chain[b];
}

/* The published block after a prefix of hash h whose leading rows match
 * most of t[0..max) (at least min_rows of them), or -1; *rows gets how
 * many. The hash stands for the prefix: the tokens before a block are not
 * compared (a 64-bit collision is the risk taken). */
static int32_t find_rows(const candle_kv_pool *p, uint64_t h, const int32_t *t, int64_t max,
                         int64_t min_rows, int64_t *rows) {
    int32_t best = -1;
    *rows = 0;
    for (int32_t b = p->bucket[h & p->mask]; b >= 0; b = p->chain[b]) {
        if (p->fill[b] < min_rows || p->hash[b] != h) continue;
        int64_t lim = p->fill[b] < max ? p->fill[b] : max;
        int64_t m = common_rows(p->toks + b * CANDLE_KV_BLOCK, t, lim);
        if (m >= min_rows && m > *rows) {
            *rows = m;
            best = b;
        }
    }
    return best;
}

int64_t candle_kv_seq_share_prefix(candle_kv_pool *p, candle_kv_seq *s, const int32_t *tokens,
                                   int64_t n) {
    if (s->pos != s->n_blocks * CANDLE_KV_BLOCK || n <= 1) return s->pos;
    int64_t full = (n - 1) / CANDLE_KV_BLOCK, rows;
    uint64_t h = prefix_hash(tokens, s->n_blocks);
    for (int64_t i = s->n_blocks; i < full && i < s->cap; i++) {
        const int32_t *t = tokens + i * CANDLE_KV_BLOCK;
        int32_t b = find_rows(p, h, t, CANDLE_KV_BLOCK, CANDLE_KV_BLOCK, &rows);
        if (b < 0) break;
        ref(p, b);
        s->blocks[s->n_blocks++] = b;
        h = block_hash(h, t);
    }
    s->pos = s->n_blocks * CANDLE_KV_BLOCK;
    return s->pos;
}

int64_t candle_kv_seq_share_rows(candle_kv_pool *p, candle_kv_seq *s, const int32_t *tokens,
                                 int64_t n) {
    int64_t max = n - 1 - s->pos, rows;
    if (s->pos != s->n_blocks * CANDLE_KV_BLOCK || max < 1) return s->pos;
    if (max > CANDLE_KV_BLOCK) max = CANDLE_KV_BLOCK;
    int32_t src = find_rows(p, prefix_hash(tokens, s->n_blocks), tokens + s->pos, max, 1, &rows);
    /* the source may be a free block that reserve hands back as the copy:
     * its rows then stay where they are */
    if (src < 0) return s->pos;
    /* a free source is the most recently used free block now: the rows of a
     * partly filled block are only ever copied, never referenced, and the
     * least recently used order would otherwise hand it out first */
    if (p->in_free[src]) {
        fl_unlink(p, src);
        fl_push(p, src);
    }
    if (candle_kv_seq_reserve(p, s, rows)) return s->pos;
    int32_t dst = s->blocks[s->n_blocks - 1];
    size_t row = candle_tensor_nbytes(p->k[0]) / (size_t)(p->n_blocks * CANDLE_KV_BLOCK);
    size_t bytes = (size_t)rows * row;
    size_t from = (size_t)src * CANDLE_KV_BLOCK * row, to = (size_t)dst * CANDLE_KV_BLOCK * row;
    for (int64_t il = 0; dst != src && il < p->n_layer; il++)
        /* a failed copy shares nothing: the prompt's evaluation writes the rows */
        if (candle_tensor_copy_bytes(p->k[il], to, p->k[il], from, bytes) ||
            candle_tensor_copy_bytes(p->v[il], to, p->v[il], from, bytes))
            return s->pos;
    s->pos += rows;
    return s->pos;
}

void candle_kv_seq_publish(candle_kv_pool *p, candle_kv_seq *s, const int32_t *tokens, int64_t n) {
    uint64_t h = 0;
    int64_t nb = (n + CANDLE_KV_BLOCK - 1) / CANDLE_KV_BLOCK, rows;
    if (nb > s->n_blocks) nb = s->n_blocks;
    for (int64_t i = 0; i < nb; i++) {
        int32_t b = s->blocks[i];
        const int32_t *t = tokens + i * CANDLE_KV_BLOCK;
        int64_t f = n - i * CANDLE_KV_BLOCK < CANDLE_KV_BLOCK ? n - i * CANDLE_KV_BLOCK : CANDLE_KV_BLOCK;
        bool mine = p->fill[b] > 0 && p->hash[b] == h; /* published by this sequence before */
        /* Only one copy of given rows is published: a duplicate block
         * (computed while another sequence held the same rows) is left
         * unpublished; a block of this sequence's grows as its prompt does. */
        if (mine ? p->fill[b] < f : find_rows(p, h, t, f, f, &rows) < 0) {
            if (!mine) {
                index_drop(p, b);
                index_add(p, b, h);
            }
            p->fill[b] = (int32_t)f;
            memcpy(p->toks + b * CANDLE_KV_BLOCK, t, (size_t)f * sizeof *t);
        }
        if (f == CANDLE_KV_BLOCK) h = block_hash(h, t);
    }
}

candle_status candle_kv_seq_reserve(candle_kv_pool *p, candle_kv_seq *s, int64_t n) {
    int64_t need_pos = s->pos + n;
    if (need_pos > s->n_ctx)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "kv: %lld positions past %lld exceed the sequence's %lld",
                                (long long)n, (long long)s->pos, (long long)s->n_ctx);
    int64_t need = (need_pos + CANDLE_KV_BLOCK - 1) / CANDLE_KV_BLOCK - s->n_blocks;
    if (need <= 0) return CANDLE_OK;
    if (need > p->n_blocks - p->n_used)
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "kv pool: %lld blocks needed, %lld free",
                                (long long)need, (long long)(p->n_blocks - p->n_used));
    for (int64_t i = 0; i < need; i++) {
        /* The block after the sequence's last one when it is free and holds
         * no published rows, so that tables tend to be runs that attention
         * reads in place; else the oldest free block (never used, or the
         * least recently used cached prefix). */
        int32_t b = p->head;
        if (s->n_blocks > 0) {
            int32_t after = s->blocks[s->n_blocks - 1] + 1;
            if (after < p->n_blocks && p->in_free[after] && !p->fill[after]) b = after;
        }
        index_drop(p, b); /* about to be overwritten: no longer shareable */
        ref(p, b);
        s->blocks[s->n_blocks++] = b;
    }
    return CANDLE_OK;
}
