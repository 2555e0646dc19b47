/* tokenizer.json models over one pre-tokenized split: BPE (merge ranks by
 * id pair, byte fallback, unknown-token fusing, subword prefix/suffix),
 * WordPiece (greedy longest match) and Unigram (Viterbi over piece
 * scores), each as the `tokenizers` library computes it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core-impl.h"
#include "hf-impl.h"
#include "unicode-impl.h"

static candle_status oom(void) { return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tokenizing"); }

static int32_t lookup(const candle_tokenizer *t, const char *s, size_t n) { return tok_map_get(&t->vocab, s, n); }

/* ---- BPE ---- */

typedef struct bsym {
    int32_t id, prev, next;
    uint32_t len;
} bsym;

typedef struct bword {
    bsym *v;
    int32_t n, cap;
} bword;

static bool bw_push(bword *w, int32_t id, uint32_t len) {
    if (w->n == w->cap) {
        int32_t nc = w->cap ? w->cap * 2 : 32;
        bsym *nv = tok_tmp_realloc(w->v, (size_t)w->cap * sizeof *nv, (size_t)nc * sizeof *nv);
        if (!nv) return false;
        w->v = nv;
        w->cap = nc;
    }
    w->v[w->n] = (bsym){id, w->n - 1, -1, len};
    if (w->n) w->v[w->n - 1].next = w->n;
    w->n++;
    return true;
}

/* The symbols of a word before merging: one per character (with the
 * subword prefix after the first, the suffix on the last), unknown
 * characters as byte tokens or (fused) unk. */
static bool bpe_init(const candle_tokenizer *t, const char *s, size_t n, bword *w) {
    const hf_model *m = &t->hf->model;
    char buf[64];
    int32_t unk_len = -1; /* pending unk symbol's byte length */
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = tok_utf8_decode(s + i, n - i, &cp);
        size_t bl = 0;
        if (i > 0 && m->prefix_len < 32) memcpy(buf, m->prefix, bl = m->prefix_len);
        memcpy(buf + bl, s + i, k);
        bl += k;
        if (i + k == n && m->suffix_len < 32) memcpy(buf + bl, m->suffix, m->suffix_len), bl += m->suffix_len;
        int32_t id = lookup(t, buf, bl);
        if (id >= 0) {
            if (unk_len >= 0 && !bw_push(w, m->unk, (uint32_t)unk_len)) return false;
            unk_len = -1;
            if (!bw_push(w, id, (uint32_t)k)) return false;
        } else {
            bool done = false;
            if (m->byte_fallback) {
                int32_t ids[4];
                size_t j = 0;
                for (; j < k; j++) {
                    char hb[8];
                    snprintf(hb, sizeof hb, "<0x%02X>", (unsigned char)s[i + j]);
                    if ((ids[j] = lookup(t, hb, 6)) < 0) break;
                }
                if (j == k) {
                    if (unk_len >= 0 && !bw_push(w, m->unk, (uint32_t)unk_len)) return false;
                    unk_len = -1;
                    for (j = 0; j < k; j++)
                        if (!bw_push(w, ids[j], 1)) return false;
                    done = true;
                }
            }
            if (!done && m->unk >= 0) {
                if (m->fuse_unk && unk_len >= 0) unk_len += (int32_t)k;
                else {
                    if (unk_len >= 0 && !bw_push(w, m->unk, (uint32_t)unk_len)) return false;
                    unk_len = (int32_t)k;
                }
            }
        }
        i += k;
    }
    return unk_len < 0 || bw_push(w, m->unk, (uint32_t)unk_len);
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static bool merge_get(const hf_merge_map *mm, int32_t a, int32_t b, int32_t *rank, int32_t *id) {
    if (!mm->cap) return false;
    uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    for (uint64_t i = mix64(key) & (mm->cap - 1);; i = (i + 1) & (mm->cap - 1)) {
        if (!mm->keys[i]) return false;
        if (mm->keys[i] == key) {
            *rank = mm->rank[i];
            *id = mm->id[i];
            return true;
        }
    }
}

bool hf_merge_put(hf_merge_map *mm, int32_t a, int32_t b, int32_t rank, int32_t id) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    for (uint64_t i = mix64(key) & (mm->cap - 1);; i = (i + 1) & (mm->cap - 1)) {
        if (mm->keys[i] == key) return false; /* the first rank of a pair stays */
        if (!mm->keys[i]) {
            mm->keys[i] = key;
            mm->rank[i] = rank;
            mm->id[i] = id;
            return true;
        }
    }
}

static bool push_pair(const hf_model *m, tok_heap *h, const bword *w, int32_t l) {
    if (l < 0) return true; /* the first symbol has no left neighbour */
    int32_t r = w->v[l].next, rank, id;
    if (r < 0 || !merge_get(&m->merges, w->v[l].id, w->v[r].id, &rank, &id)) return true;
    return tok_heap_push(h, (tok_bigram){rank, l, r, (uint32_t)id});
}

static candle_status bpe(const candle_tokenizer *t, const char *s, size_t n, tok_out *o) {
    const hf_model *m = &t->hf->model;
    if (m->ignore_merges) {
        int32_t id = lookup(t, s, n);
        if (id >= 0) {
            tok_out_push(o, id);
            return CANDLE_OK;
        }
    }
    bword w = {0};
    tok_heap h = {0};
    bool ok = bpe_init(t, s, n, &w);
    for (int32_t i = 0; ok && i + 1 < w.n; i++) ok = push_pair(m, &h, &w, i);
    while (ok && h.n) {
        tok_bigram b = tok_heap_pop(&h);
        bsym *l = &w.v[b.left];
        int32_t rank, id;
        if (!l->len || l->next != b.right) continue;
        if (!merge_get(&m->merges, l->id, w.v[b.right].id, &rank, &id) || id != (int32_t)b.size) continue;
        bsym *r = &w.v[b.right];
        l->id = id;
        l->len += r->len;
        l->next = r->next;
        r->len = 0;
        if (l->next >= 0) w.v[l->next].prev = b.left;
        ok = push_pair(m, &h, &w, l->prev) && push_pair(m, &h, &w, b.left);
    }
    for (int32_t i = 0; ok && w.n && i >= 0; i = w.v[i].next) tok_out_push(o, w.v[i].id);
    tok_tmp_free(w.v);
    tok_tmp_free(h.v);
    return ok ? CANDLE_OK : oom();
}

/* ---- WordPiece ---- */

static candle_status wordpiece(const candle_tokenizer *t, const char *s, size_t n, tok_out *o) {
    const hf_model *m = &t->hf->model;
    int64_t chars = 0;
    for (size_t i = 0; i < n; i++) chars += ((unsigned char)s[i] & 0xC0) != 0x80;
    int64_t mark = o->n;
    bool bad = chars > m->max_chars;
    char *buf = bad ? NULL : tok_tmp_alloc(n + m->prefix_len + 1);
    if (!bad && !buf) return oom();
    for (size_t start = 0; !bad && start < n;) {
        size_t end = n;
        int32_t id = -1;
        while (start < end) {
            size_t bl = 0;
            if (start > 0) memcpy(buf, m->prefix, bl = m->prefix_len);
            memcpy(buf + bl, s + start, end - start);
            if ((id = lookup(t, buf, bl + end - start)) >= 0) break;
            do end--; while (end > start && ((unsigned char)s[end] & 0xC0) == 0x80);
        }
        if (id < 0) bad = true;
        else tok_out_push(o, id);
        start = end;
    }
    tok_tmp_free(buf);
    if (bad) {
        if (m->unk < 0)
            return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tokenizer: WordPiece has no unk_token");
        o->n = mark;
        tok_out_push(o, m->unk);
    }
    return CANDLE_OK;
}

/* ---- Unigram ---- */

typedef struct unode {
    double score;
    int64_t start; /* -1: not reached */
    int32_t id;
} unode;

static candle_status unigram(const candle_tokenizer *t, const char *s, size_t n, tok_out *o) {
    const hf_model *m = &t->hf->model;
    unode *best = tok_tmp_alloc((n + 1) * sizeof *best);
    size_t *cuts = tok_tmp_alloc((n + 1) * 3 * sizeof *cuts);
    if (!best || !cuts) {
        tok_tmp_free(best);
        tok_tmp_free(cuts);
        return oom();
    }
    for (size_t i = 0; i <= n; i++) best[i] = (unode){0, -1, -1};
    double unk_score = m->min_score - 10.0;
    for (size_t at = 0; at < n;) {
        uint32_t cp;
        size_t mb = tok_utf8_decode(s + at, n - at, &cp);
        double here = best[at].score;
        bool single = false;
        for (size_t len = 1; len <= m->max_piece_len && at + len <= n; len++) {
            int32_t id = lookup(t, s + at, len);
            if (id < 0) continue;
            unode *tn = &best[at + len];
            double c = m->scores[id] + here;
            if (tn->start < 0 || c > tn->score) *tn = (unode){c, (int64_t)at, id};
            if (len == mb) single = true;
        }
        if (!single) {
            unode *tn = &best[at + mb];
            double c = unk_score + here;
            if (tn->start < 0 || c > tn->score) *tn = (unode){c, (int64_t)at, m->unk};
        }
        at += mb;
    }
    /* Back from the end, as (start, end, unk) triples right to left;
     * consecutive unknown pieces become one. */
    size_t nc = 0;
    for (size_t end = n; end > 0;) {
        const unode *nd = &best[end];
        size_t st = (size_t)nd->start;
        bool is_unk = m->unk >= 0 && nd->id == m->unk;
        if (is_unk && nc && cuts[3 * nc - 1]) cuts[3 * nc - 3] = st;
        else {
            cuts[3 * nc] = st;
            cuts[3 * nc + 1] = end;
            cuts[3 * nc + 2] = is_unk;
            nc++;
        }
        end = st;
    }
    candle_status stt = CANDLE_OK;
    for (size_t k = nc; stt == CANDLE_OK && k-- > 0;) {
        size_t a = cuts[3 * k], b = cuts[3 * k + 1];
        int32_t id = lookup(t, s + a, b - a);
        if (id >= 0) {
            tok_out_push(o, id);
            continue;
        }
        bool done = false;
        if (m->byte_fallback) {
            int64_t mark = o->n;
            done = true;
            for (size_t j = a; j < b && done; j++) {
                char hb[8];
                snprintf(hb, sizeof hb, "<0x%02X>", (unsigned char)s[j]);
                int32_t bid = lookup(t, hb, 6);
                if (bid < 0) done = false;
                else tok_out_push(o, bid);
            }
            if (!done) o->n = mark;
        }
        if (!done) {
            if (m->unk < 0) stt = cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tokenizer: Unigram has no unk_id");
            else tok_out_push(o, m->unk);
        }
    }
    tok_tmp_free(best);
    tok_tmp_free(cuts);
    return stt;
}

candle_status hf_model_encode(const candle_tokenizer *t, const char *s, size_t len, tok_out *o) {
    if (!len) return CANDLE_OK;
    switch (t->hf->model.type) {
    case HM_BPE: return bpe(t, s, len, o);
    case HM_WORDPIECE: return wordpiece(t, s, len, o);
    default: return unigram(t, s, len, o);
    }
}
