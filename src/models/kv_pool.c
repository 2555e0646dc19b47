/* The paged KV block pool (see candle/kv_pool.h). */
#include <stdlib.h>
#include <string.h>

#include "candle/kv_pool.h"
#include "model-impl.h"
#include "kv_pool-impl.h"

size_t candle_kv_pool_block_bytes(const candle_model *m) {
    const candle_model_config *c = &m->cfg;
    return (size_t)(CANDLE_KV_BLOCK * 2 * c->n_layer * c->n_head_kv * c->head_dim) * sizeof(float);
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

candle_status candle_kv_pool_init(candle_kv_pool **out, const candle_model *m, int64_t n_blocks) {
    *out = NULL;
    if (n_blocks <= 0 || n_blocks > INT32_MAX / CANDLE_KV_BLOCK)
        return candle_set_error(NULL, CANDLE_ERR_INVALID_ARG, "kv pool: %lld blocks",
                                (long long)n_blocks);
    candle_kv_pool *p = calloc(1, sizeof *p);
    if (!p) return candle_set_error(NULL, CANDLE_ERR_OOM, "out of memory: kv pool");
    const candle_model_config *c = &m->cfg;
    p->model = m;
    p->n_blocks = n_blocks;
    p->n_layer = c->n_layer;
    size_t nb = (size_t)n_blocks;
    p->refs = calloc(nb, sizeof *p->refs);
    p->hash = calloc(nb, sizeof *p->hash);
    p->pred = calloc(nb, sizeof *p->pred);
    p->toks = calloc(nb * CANDLE_KV_BLOCK, sizeof *p->toks);
    p->prev = malloc(nb * sizeof *p->prev);
    p->next = malloc(nb * sizeof *p->next);
    p->in_free = calloc(nb, sizeof *p->in_free);
    p->k = calloc((size_t)c->n_layer, sizeof *p->k);
    p->v = calloc((size_t)c->n_layer, sizeof *p->v);
    candle_ctx_params cp = candle_ctx_default_params();
    candle_status st = candle_ctx_init(&p->ctx, &cp);
    if (!st && !(p->refs && p->hash && p->pred && p->toks && p->prev && p->next && p->in_free && p->k && p->v))
        st = candle_set_error(NULL, CANDLE_ERR_OOM, "out of memory: kv pool tables");
    int64_t shape[3] = {n_blocks * CANDLE_KV_BLOCK, c->n_head_kv, c->head_dim};
    for (int64_t il = 0; !st && il < c->n_layer; il++) {
        p->k[il] = candle_tensor_new(p->ctx, CANDLE_DTYPE_F32, 3, shape);
        p->v[il] = candle_tensor_new(p->ctx, CANDLE_DTYPE_F32, 3, shape);
        if (!p->k[il] || !p->v[il])
            st = candle_set_error(NULL, candle_errcode(p->ctx), "kv pool: %s",
                                  candle_errmsg(p->ctx));
        else {
            memset(candle_tensor_data(p->k[il]), 0, candle_tensor_nbytes(p->k[il]));
            memset(candle_tensor_data(p->v[il]), 0, candle_tensor_nbytes(p->v[il]));
        }
    }
    if (st) {
        candle_kv_pool_free(p);
        return st;
    }
    p->head = p->tail = -1;
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
    free(p->pred);
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
    return s->blocks ? CANDLE_OK : candle_set_error(NULL, CANDLE_ERR_OOM, "out of memory: block table");
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
    return h ? h : 1; /* 0 marks "not published" */
}

/* A published block with this hash, whose stored tokens and predecessor
 * match (hashes can collide). */
static int32_t find_block(const candle_kv_pool *p, uint64_t h, int32_t prev_block,
                          const int32_t *t) {
    for (int64_t b = 0; b < p->n_blocks; b++)
        if (p->hash[b] == h && p->pred[b] == prev_block &&
            !memcmp(p->toks + b * CANDLE_KV_BLOCK, t, CANDLE_KV_BLOCK * sizeof *t))
            return (int32_t)b;
    return -1;
}

int64_t candle_kv_seq_share_prefix(candle_kv_pool *p, candle_kv_seq *s, const int32_t *tokens,
                                   int64_t n) {
    if (s->n_blocks || n <= 1) return 0;
    int64_t full = (n - 1) / CANDLE_KV_BLOCK;
    uint64_t h = 0;
    int32_t prev = -1;
    for (int64_t i = 0; i < full && i < s->cap; i++) {
        h = block_hash(h, tokens + i * CANDLE_KV_BLOCK);
        int32_t b = find_block(p, h, prev, tokens + i * CANDLE_KV_BLOCK);
        if (b < 0) break;
        ref(p, b);
        s->blocks[s->n_blocks++] = b;
        prev = b;
    }
    s->pos = s->n_blocks * CANDLE_KV_BLOCK;
    return s->pos;
}

void candle_kv_seq_publish(candle_kv_pool *p, candle_kv_seq *s, const int32_t *tokens, int64_t n) {
    uint64_t h = 0;
    int32_t prev = -1;
    int64_t full = n / CANDLE_KV_BLOCK;
    if (full > s->n_blocks) full = s->n_blocks;
    for (int64_t i = 0; i < full; i++) {
        int32_t b = s->blocks[i];
        h = block_hash(h, tokens + i * CANDLE_KV_BLOCK);
        if (p->hash[b] != h) {
            /* Only one copy of a prefix is published: a duplicate block
             * (computed while another sequence held the same prefix) is
             * left unpublished. */
            if (find_block(p, h, prev, tokens + i * CANDLE_KV_BLOCK) < 0) {
                p->hash[b] = h;
                p->pred[b] = prev;
                memcpy(p->toks + b * CANDLE_KV_BLOCK, tokens + i * CANDLE_KV_BLOCK,
                       CANDLE_KV_BLOCK * sizeof *tokens);
            }
        }
        prev = b;
    }
}

candle_status candle_kv_seq_reserve(candle_kv_pool *p, candle_kv_seq *s, int64_t n) {
    int64_t need_pos = s->pos + n;
    if (need_pos > s->n_ctx)
        return candle_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "kv: %lld positions past %lld exceed the sequence's %lld",
                                (long long)n, (long long)s->pos, (long long)s->n_ctx);
    int64_t need = (need_pos + CANDLE_KV_BLOCK - 1) / CANDLE_KV_BLOCK - s->n_blocks;
    if (need <= 0) return CANDLE_OK;
    if (need > p->n_blocks - p->n_used)
        return candle_set_error(NULL, CANDLE_ERR_OOM, "kv pool: %lld blocks needed, %lld free",
                                (long long)need, (long long)(p->n_blocks - p->n_used));
    for (int64_t i = 0; i < need; i++) {
        /* The block after the sequence's last one when it is free, so that
         * tables tend to be runs that attention reads in place; else the
         * oldest free block (the least recently used cached prefix). */
        int32_t b = p->head;
        if (s->n_blocks > 0) {
            int32_t after = s->blocks[s->n_blocks - 1] + 1;
            if (after < p->n_blocks && p->in_free[after]) b = after;
        }
        p->hash[b] = 0;      /* about to be overwritten: no longer shareable */
        ref(p, b);
        s->blocks[s->n_blocks++] = b;
    }
    return CANDLE_OK;
}
