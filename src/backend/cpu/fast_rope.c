/* Fast rotary embedding for f32 x [..., S, H, D] with a contiguous last dim
 * (same formula as ref/rope.c). The H heads of one position share its
 * angles, so cos/sin are made once per position and applied to every head.
 *
 * sin and cos in double (as the reference takes them) were most of a
 * rope's time when every position called them for every pair. Instead
 * the angles of position p are those of its anchor a = p rounded down to
 * ROPE_ANCHOR (taken with sin/cos from the reference's own angle) turned
 * forward p - a times by one position's rotation, in double: an error of a
 * few 1e-16 per turn, far below f32 rounding. Any path to p gives the same
 * bits, so results do not depend on how positions are split over threads.
 * Each thread keeps the frequencies, anchor and last position of the last
 * ROPE_SETS frequency sets (base, scale, n_dims, freq factors, YaRN) it used:
 * prefill walks the positions
 * forward one turn each, decoding turns once per token, and Gemma 3's two
 * bases (local and global layers) keep a set each instead of thrashing. */
#include <math.h>
#include <string.h>

#include "fast-impl.h"

#define ROPE_ANCHOR 32     /* positions turned from one exact anchor, at most 31 turns */
#define ROPE_MAX_PAIRS 128 /* pairs a cached set holds (n_dims <= 256); more: no cache */
#define ROPE_SETS 2

static bool match_rope(const candle_tensor *dst) {
    const candle_tensor *x = dst->src[0];
    return dst->op == CANDLE_OP_ROPE && dst->dtype == CANDLE_DTYPE_F32 &&
           candle_tensor_is_contiguous(dst) && x && x->dtype == CANDLE_DTYPE_F32 && x->rank >= 3 &&
           (x->stride[x->rank - 1] == 4 || x->shape[x->rank - 1] == 1);
}

/* Scratch for sets too large for the cache: cos and sin of one position. */
static size_t rope_thread_bytes(const candle_tensor *dst) {
    return ((size_t)dst->iparams[1] * sizeof(float) + 63) & ~(size_t)63;
}

/* Split from 4096 elements: a batched decode step's q (16 rows x 9 heads x
 * 64, SmolLM2) took 4-7 us on one thread. Each thread keeps its own angle
 * cache, and a position's angles do not depend on which thread computes
 * them (always stepped from the same anchor): the same bits. */
static void plan_rope(const candle_tensor *dst, int n_threads, cpu_plan *p) {
    p->nth = cpu_tasks_for((double)candle_tensor_numel(dst), 4096, n_threads, 4);
    p->wsize = 64 + (size_t)n_threads * rope_thread_bytes(dst);
}

static int64_t position(const candle_tensor *dst, int64_t s) {
    const candle_tensor *pos = dst->src[1];
    if (!pos) return dst->iparams[2] + s;
    return cdl_load_i64(pos->dtype, tensor_ptr(pos) + s * pos->stride[0]);
}

/* One frequency set's cached angles (pairs [0, n_pairs)). */
typedef struct rope_set {
    bool valid, at_pos;     /* at_pos: c, s, cf, sf hold position pos */
    double base, scale, ext, m, lo, hi; /* fparams[0..5] */
    int64_t n_dims, anchor, pos;
    unsigned last_use;
    bool has_ff;
    float ff[ROPE_MAX_PAIRS];            /* the freq factors' values when has_ff */
    double w[ROPE_MAX_PAIRS];            /* base^(-2i / n_dims) / ff_i */
    double sc[ROPE_MAX_PAIRS];           /* position multiplier: angle = (p * sc) * w */
    double cstep[ROPE_MAX_PAIRS], sstep[ROPE_MAX_PAIRS]; /* one position's turn */
    double ca[ROPE_MAX_PAIRS], sa[ROPE_MAX_PAIRS];       /* at the anchor, exact */
    double c[ROPE_MAX_PAIRS], s[ROPE_MAX_PAIRS];         /* at pos */
    float cf[ROPE_MAX_PAIRS], sf[ROPE_MAX_PAIRS];        /* m c, m s rounded */
} rope_set;

typedef struct rope_cache {
    unsigned clock;
    rope_set set[ROPE_SETS];
} rope_cache;

static _Thread_local rope_cache g_rope_cache;

/* The thread's set for dst's frequencies, made afresh in the least
 * recently used slot when none matches. */
/* Does cached set e hold dst's frequencies? The factors are compared by
 * value: a tensor at a reused address may hold others. */
static bool set_matches(const rope_set *e, const candle_tensor *dst, int64_t n_dims) {
    const candle_tensor *ff = dst->src[2];
    const double *f = dst->fparams;
    if (!e->valid || e->base != f[0] || e->scale != f[1] || e->ext != f[2] || e->m != f[3] ||
        e->lo != f[4] || e->hi != f[5] || e->n_dims != n_dims || e->has_ff != (ff != NULL))
        return false;
    return !ff || !memcmp(e->ff, tensor_ptr(ff), sizeof(float) * (size_t)(n_dims / 2));
}

static rope_set *set_for(const candle_tensor *dst, int64_t n_dims) {
    rope_cache *rc = &g_rope_cache;
    const candle_tensor *ff = dst->src[2];
    const double *f = dst->fparams;
    rope_set *s = &rc->set[0];
    for (int i = 0; i < ROPE_SETS; i++) {
        rope_set *e = &rc->set[i];
        if (set_matches(e, dst, n_dims)) {
            s = e;
            goto found;
        }
        if (!e->valid || e->last_use < s->last_use) s = e;
    }
    *s = (rope_set){.valid = true, .base = f[0], .scale = f[1], .ext = f[2], .m = f[3],
                    .lo = f[4], .hi = f[5], .n_dims = n_dims, .has_ff = ff != NULL};
    if (ff) memcpy(s->ff, tensor_ptr(ff), sizeof(float) * (size_t)(n_dims / 2));
    for (int64_t i = 0; i < n_dims / 2; i++) {
        cpu_rope_pair(dst, i, &s->w[i], &s->sc[i]);
        s->cstep[i] = cos(s->sc[i] * s->w[i]);
        s->sstep[i] = sin(s->sc[i] * s->w[i]);
    }
found:
    s->last_use = ++rc->clock;
    return s;
}

static int64_t anchor_of(int64_t p) {
    int64_t r = p % ROPE_ANCHOR;
    return p - (r < 0 ? r + ROPE_ANCHOR : r);
}

/* s's angles moved to position p. */
static void set_seek(rope_set *s, int64_t p) {
    int64_t half = s->n_dims / 2, a = anchor_of(p);
    if (s->at_pos && s->pos == p) return;
    if (!s->at_pos || s->anchor != a || s->pos > p) {
        if (s->anchor != a || !s->at_pos) {
            for (int64_t i = 0; i < half; i++) { /* the reference's (pos * sc) * w */
                double ps = (double)a * s->sc[i];
                s->ca[i] = cos(ps * s->w[i]);
                s->sa[i] = sin(ps * s->w[i]);
            }
            s->anchor = a;
        }
        memcpy(s->c, s->ca, sizeof(double) * (size_t)half);
        memcpy(s->s, s->sa, sizeof(double) * (size_t)half);
        s->pos = a;
        s->at_pos = true;
    }
    for (; s->pos < p; s->pos++)
        for (int64_t i = 0; i < half; i++) {
            double c = s->c[i], sn = s->s[i];
            s->c[i] = c * s->cstep[i] - sn * s->sstep[i];
            s->s[i] = sn * s->cstep[i] + c * s->sstep[i];
        }
    for (int64_t i = 0; i < half; i++) {
        s->cf[i] = (float)(s->c[i] * s->m);
        s->sf[i] = (float)(s->s[i] * s->m);
    }
}

/* Sets beyond the cache: every pair's angle with sin/cos, into tmp
 * (cos for pairs [0, half), sin after them). */
static void angles_direct(const candle_tensor *dst, int64_t p, int64_t n_dims, float *tmp) {
    int64_t half = n_dims / 2;
    double m = dst->fparams[3];
    for (int64_t i = 0; i < half; i++) {
        double w, sc;
        cpu_rope_pair(dst, i, &w, &sc);
        double a = (double)p * sc * w;
        tmp[i] = (float)(cos(a) * m);
        tmp[half + i] = (float)(sin(a) * m);
    }
}

/* Pairs (i, i + half): contiguous halves, vectorised by the compiler. */
static void rotate_half(const float *x, float *y, const float *c, const float *s, int64_t half) {
    for (int64_t i = 0; i < half; i++) {
        float x0 = x[i], x1 = x[i + half];
        y[i] = x0 * c[i] - x1 * s[i];
        y[i + half] = x0 * s[i] + x1 * c[i];
    }
}

/* Pairs (2i, 2i + 1). */
static void rotate_pairs(const float *x, float *y, const float *c, const float *s, int64_t half) {
    for (int64_t i = 0; i < half; i++) {
        float x0 = x[2 * i], x1 = x[2 * i + 1];
        y[2 * i] = x0 * c[i] - x1 * s[i];
        y[2 * i + 1] = x0 * s[i] + x1 * c[i];
    }
}

static candle_status run_rope(const cpu_task *t, candle_tensor *dst) {
    const candle_tensor *x = dst->src[0];
    int r = dst->rank;
    int64_t D = dst->shape[r - 1], H = dst->shape[r - 2], S = dst->shape[r - 3];
    int64_t n_dims = dst->iparams[1], half = n_dims / 2;
    bool inter = dst->iparams[0] == CANDLE_ROPE_INTERLEAVED;
    float *tmp = cpu_thread_scratch(t, rope_thread_bytes(dst));
    rope_set *set = half <= ROPE_MAX_PAIRS ? set_for(dst, n_dims) : NULL;
    int64_t hd = H * D, n_pos = S > 0 && hd > 0 ? candle_tensor_numel(dst) / hd : 0, p0, p1;
    cpu_split(n_pos, 1, t->ith, t->nth, &p0, &p1);
    for (int64_t ps = p0; ps < p1; ps++) {
        const float *c = tmp, *s = tmp + half;
        if (set) {
            set_seek(set, position(dst, ps % S));
            c = set->cf;
            s = set->sf;
        } else {
            angles_direct(dst, position(dst, ps % S), n_dims, tmp);
        }
        /* offset of (outer..., s) in x: decompose ps over dims [0, r - 2) */
        int64_t off = 0, rem = ps;
        for (int d = r - 3; d >= 0; d--) {
            off += (rem % dst->shape[d]) * x->stride[d];
            rem /= dst->shape[d];
        }
        for (int64_t h = 0; h < H; h++) {
            const float *xr = (const float *)(tensor_ptr(x) + off + h * x->stride[r - 2]);
            float *yr = (float *)tensor_ptr(dst) + (ps * H + h) * D;
            if (inter) rotate_pairs(xr, yr, c, s, half);
            else rotate_half(xr, yr, c, s, half);
            if (n_dims < D) memmove(yr + n_dims, xr + n_dims, sizeof(float) * (size_t)(D - n_dims));
        }
    }
    return CANDLE_OK;
}

const cpu_fast_kernel cpu_fast_rope = {"rope f32", match_rope, plan_rope, run_rope};
