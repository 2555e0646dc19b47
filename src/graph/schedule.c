/* Placement of a node on the context's backend: inputs whose bytes that
 * backend cannot read (host memory for a device, a device's memory for the
 * CPU) are copied where it can for the node's run, and a node it does not
 * support runs on a CPU backend with its inputs and output copied to the host
 * and back. Every copy is counted on the context (candle_ctx_transfer_stats). */
#include <stdlib.h>
#include <string.h>

#include "graph-impl.h"

/* Whether be's kernels read storage s in place. */
static bool reads(const candle_backend *be, const candle_storage *s) {
    return be->iface->host_visible ? s->backend == NULL : s->backend == be;
}

bool cdl_sched_needed(const candle_ctx *ctx, const candle_tensor *t) {
    const candle_backend *be = ctx->backend;
    if (!be->iface->supports_op((candle_backend *)be, t)) return true;
    for (int i = 0; i < t->n_src; i++)
        if (t->src[i] && t->src[i]->storage && !reads(be, t->src[i]->storage)) return true;
    return false;
}

/* The bytes t's layout touches when dim `blocked` is the one stored in
 * blocks (indexed per block), from t->offset + *lo (<= 0 where strides are
 * negative). */
static int64_t span_with(const candle_tensor *t, int blocked, int64_t *lo) {
    const candle_dtype_traits *tr = candle_dtype_info(t->dtype);
    int64_t low = 0, high = (int64_t)tr->type_size;
    for (int i = 0; i < t->rank; i++) {
        int64_t n = i == blocked ? t->shape[i] / tr->block_size : t->shape[i];
        if (n <= 0) {
            *lo = 0;
            return 0;
        }
        int64_t ext = (n - 1) * t->stride[i];
        if (ext < 0) low += ext;
        else high += ext;
    }
    *lo = low;
    return high - low;
}

/* The bytes t's layout touches: [t->offset + *lo, t->offset + *lo + span)
 * (*lo <= 0 where strides are negative). A block dtype's blocked dim is its
 * last one in the stored layout but not in every view: transpose(w) of a
 * weight w [N, K] has it at dim -2. It steps by the block's bytes over whole
 * blocks; where more than one dim looks so (rows of one block), the widest
 * of their spans (all from the same start, so it holds the true one), cut at
 * the storage's end (which the true one never passes). */
static size_t view_span(const candle_tensor *t, int64_t *lo) {
    const candle_dtype_traits *tr = candle_dtype_info(t->dtype);
    if (tr->block_size == 1 || t->rank == 0) return (size_t)span_with(t, t->rank - 1, lo);
    int64_t best = -1, best_lo = 0;
    for (int i = t->rank - 1; i >= 0; i--) {
        if (t->stride[i] != (int64_t)tr->type_size || t->shape[i] % tr->block_size) continue;
        int64_t l, s = span_with(t, i, &l);
        if (s > best) best = s, best_lo = l;
    }
    if (best < 0) return (size_t)span_with(t, t->rank - 1, lo);
    *lo = best_lo;
    if (t->storage) {
        int64_t room = (int64_t)t->storage->size - ((int64_t)t->offset + best_lo);
        if (best > room && room >= 0) best = room;
    }
    return (size_t)best;
}

/* A copy of the bytes of t's layout in memory `on` reads: *m describes t
 * over the new storage (released by the caller). */
static candle_status mirror(candle_ctx *ctx, const candle_tensor *t, candle_backend *on, candle_tensor *m) {
    int64_t lo;
    size_t span = view_span(t, &lo);
    candle_storage *s = NULL;
    candle_status st = on->iface->buffer_alloc(on, span ? span : 1, &s);
    if (st) return cdl_set_error(ctx, st, "copying an input to %s: %s", on->iface->name, candle_last_errmsg());
    candle_tensor dst = {.storage = s, .ctx = ctx}, src = *t;
    src.offset = (size_t)((int64_t)t->offset + lo);
    src.ctx = ctx; /* errors on this context, not the input's */
    st = candle_tensor_copy_bytes(&dst, 0, &src, 0, span);
    if (st) {
        candle_storage_release(s);
        return st;
    }
    *m = *t;
    m->storage = s;
    m->offset = (size_t)-lo;
    m->device = s->device;
    m->view_src = NULL;
    ctx->n_copies++;
    ctx->copy_bytes += span;
    if (cdl_profile_on()) cdl_profile_copy(span);
    return CANDLE_OK;
}

/* Back from the mirror m of t into t's own storage (a fallback's output). */
static candle_status copy_back(candle_ctx *ctx, candle_tensor *t, const candle_tensor *m) {
    int64_t lo;
    size_t span = view_span(t, &lo);
    candle_tensor dst = *t, src = *m;
    dst.offset = (size_t)((int64_t)t->offset + lo);
    src.offset = (size_t)((int64_t)m->offset + lo);
    dst.ctx = src.ctx = ctx;
    candle_status st = candle_tensor_copy_bytes(&dst, 0, &src, 0, span);
    if (st) return st;
    ctx->n_copies++;
    ctx->copy_bytes += span;
    if (cdl_profile_on()) cdl_profile_copy(span);
    return CANDLE_OK;
}

static candle_backend *fallback_backend(candle_ctx *ctx) {
    if (!ctx->fallback) ctx->fallback = candle_backend_cpu_init(0);
    return ctx->fallback;
}

candle_status cdl_sched_compute(candle_ctx *ctx, candle_tensor *t) {
    candle_backend *be = ctx->backend, *run = be;
    if (!be->iface->supports_op(be, t)) {
        run = be->iface->host_visible ? NULL : fallback_backend(ctx);
        if (!run || !run->iface->supports_op(run, t)) {
            char b[128];
            return cdl_set_error(ctx, CANDLE_ERR_UNSUPPORTED, "%s: not supported on %s for %s %s",
                                    candle_op_name((candle_op)t->op), be->iface->name,
                                    candle_dtype_name(t->dtype), candle_shape_str(t->rank, t->shape, b, sizeof b));
        }
        ctx->n_fallback++;
        if (cdl_profile_on()) cdl_profile_fallback();
    }
    candle_tensor node = *t, srcs[CANDLE_MAX_SRC];
    bool copied[CANDLE_MAX_SRC] = {false}, out_copied = false;
    candle_status st = CANDLE_OK;
    for (int i = 0; !st && i < t->n_src; i++) {
        const candle_tensor *x = t->src[i];
        if (!x || !x->storage || reads(run, x->storage)) continue;
        st = mirror(ctx, x, run, &srcs[i]);
        copied[i] = !st;
        if (!st) node.src[i] = &srcs[i];
    }
    /* the output keeps its bytes (an in-place writer reads them) */
    if (!st && !reads(run, t->storage)) {
        candle_tensor out;
        st = mirror(ctx, t, run, &out);
        out_copied = !st;
        if (!st) node.storage = out.storage, node.offset = out.offset, node.device = out.device;
    }
    if (!st) {
        st = run->iface->compute_node(run, &node);
        if (st) st = cdl_set_error(ctx, st, "%s", candle_backend_errmsg(run));
    }
    if (!st && out_copied) st = copy_back(ctx, t, &node);
    if (out_copied) candle_storage_release(node.storage);
    for (int i = 0; i < t->n_src; i++)
        if (copied[i]) candle_storage_release(srcs[i].storage);
    return st;
}

void candle_ctx_transfer_stats(const candle_ctx *ctx, uint64_t *copies, uint64_t *bytes, uint64_t *fallback_nodes) {
    if (copies) *copies = ctx ? ctx->n_copies : 0;
    if (bytes) *bytes = ctx ? ctx->copy_bytes : 0;
    if (fallback_nodes) *fallback_nodes = ctx ? ctx->n_fallback : 0;
}
