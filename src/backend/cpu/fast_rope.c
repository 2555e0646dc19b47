/* Fast rotary embedding for f32 x [..., S, H, D] with a contiguous last dim
 * (same formula as ref/rope.c). The H heads of one position share its
 * angles, so cos/sin are computed once per position (in double, as the
 * reference does) into the thread's table and applied to every head; the
 * last position's table is kept per thread for the next rope call. */
#include <math.h>

#include "fast-impl.h"

static bool match_rope(const candle_tensor *dst) {
    const candle_tensor *x = dst->src[0];
    return dst->op == CANDLE_OP_ROPE && dst->dtype == CANDLE_DTYPE_F32 &&
           candle_tensor_is_contiguous(dst) && x && x->dtype == CANDLE_DTYPE_F32 && x->rank >= 3 &&
           (x->stride[x->rank - 1] == 4 || x->shape[x->rank - 1] == 1);
}

static size_t rope_thread_bytes(const candle_tensor *dst) {
    return ((size_t)dst->iparams[1] * sizeof(float) + 63) & ~(size_t)63;
}

static void plan_rope(const candle_tensor *dst, int n_threads, cpu_plan *p) {
    p->nth = cpu_tasks_for((double)candle_tensor_numel(dst), 16384, n_threads, 4);
    p->wsize = 64 + (size_t)n_threads * rope_thread_bytes(dst);
}

static double position(const candle_tensor *dst, int64_t s) {
    const candle_tensor *pos = dst->src[1];
    if (!pos) return (double)(dst->iparams[2] + s);
    return (double)candle_load_i64(pos->dtype, tensor_ptr(pos) + s * pos->stride[0]);
}

static void rotate(const float *x, float *y, const float *cs, int64_t D, int64_t n_dims, bool inter) {
    int64_t half = n_dims / 2;
    for (int64_t i = 0; i < half; i++) {
        int64_t k0 = inter ? 2 * i : i, k1 = inter ? 2 * i + 1 : i + half;
        float c = cs[2 * i], s = cs[2 * i + 1], x0 = x[k0], x1 = x[k1];
        y[k0] = x0 * c - x1 * s;
        y[k1] = x0 * s + x1 * c;
    }
    for (int64_t k = n_dims; k < D; k++) y[k] = x[k];
}

/* The angles of the last position each thread computed: in decoding every
 * layer's q and k share one position and frequencies, so 2 * n_layer ropes
 * a token compute them once (pow and sincos were most of a rope's time). */
#define ROPE_CACHE_FLOATS 512

typedef struct rope_cache {
    bool valid;
    double pos, base, scale;
    int64_t n_dims;
    float cs[ROPE_CACHE_FLOATS];
} rope_cache;

static _Thread_local rope_cache g_rope_cache;

static void angles(const candle_tensor *dst, double pos, int64_t n_dims, float *cs) {
    for (int64_t i = 0; i < n_dims / 2; i++) {
        double a = pos * dst->fparams[1] * pow(dst->fparams[0], -2.0 * (double)i / (double)n_dims);
        cs[2 * i] = (float)cos(a);
        cs[2 * i + 1] = (float)sin(a);
    }
}

/* cos/sin pairs for pos: the thread's cached table, or tmp filled. */
static const float *angles_at(const candle_tensor *dst, double pos, int64_t n_dims, float *tmp) {
    rope_cache *c = &g_rope_cache;
    if (n_dims > ROPE_CACHE_FLOATS) {
        angles(dst, pos, n_dims, tmp);
        return tmp;
    }
    if (!c->valid || c->pos != pos || c->base != dst->fparams[0] || c->scale != dst->fparams[1] ||
        c->n_dims != n_dims) {
        angles(dst, pos, n_dims, c->cs);
        c->valid = true;
        c->pos = pos;
        c->base = dst->fparams[0];
        c->scale = dst->fparams[1];
        c->n_dims = n_dims;
    }
    return c->cs;
}

static candle_status run_rope(const cpu_task *t, candle_tensor *dst) {
    const candle_tensor *x = dst->src[0];
    int r = dst->rank;
    int64_t D = dst->shape[r - 1], H = dst->shape[r - 2], S = dst->shape[r - 3];
    int64_t n_dims = dst->iparams[1];
    bool inter = dst->iparams[0] == CANDLE_ROPE_INTERLEAVED;
    float *tmp = cpu_thread_scratch(t, rope_thread_bytes(dst));
    int64_t hd = H * D, n_pos = S > 0 && hd > 0 ? candle_tensor_numel(dst) / hd : 0, p0, p1;
    cpu_split(n_pos, 1, t->ith, t->nth, &p0, &p1);
    for (int64_t ps = p0; ps < p1; ps++) {
        const float *cs = angles_at(dst, position(dst, ps % S), n_dims, tmp);
        /* offset of (outer..., s) in x: decompose ps over dims [0, r - 2) */
        int64_t off = 0, rem = ps;
        for (int d = r - 3; d >= 0; d--) {
            off += (rem % dst->shape[d]) * x->stride[d];
            rem /= dst->shape[d];
        }
        for (int64_t h = 0; h < H; h++)
            rotate((const float *)(tensor_ptr(x) + off + h * x->stride[r - 2]),
                   (float *)tensor_ptr(dst) + (ps * H + h) * D, cs, D, n_dims, inter);
    }
    return CANDLE_OK;
}

const cpu_fast_kernel cpu_fast_rope = {"rope f32", match_rope, plan_rope, run_rope};
