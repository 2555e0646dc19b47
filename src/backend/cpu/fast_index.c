/* index_select by whole slices: when x and dst have the same dtype and the
 * dims after `dim` are contiguous in both, each selected index moves one
 * contiguous slice with memcpy (the paged KV cache gathers blocks this way),
 * split over threads by (outer, index) pairs. */
#include <inttypes.h>

#include "fast-impl.h"

/* Bytes of the dims after d if they are contiguous in t, else 0. */
static size_t inner_bytes(const candle_tensor *t, int d) {
    int64_t want = (int64_t)candle_dtype_info(t->dtype)->type_size;
    for (int i = t->rank - 1; i > d; i--) {
        if (t->shape[i] != 1 && t->stride[i] != want) return 0;
        want *= t->shape[i];
    }
    return (size_t)want;
}

static bool match_index(const candle_tensor *dst) {
    if (dst->op != CANDLE_OP_INDEX_SELECT) return false;
    const candle_tensor *x = dst->src[0];
    int d = (int)dst->iparams[0];
    return x->dtype == dst->dtype && !candle_dtype_info(x->dtype)->is_quantized &&
           candle_tensor_is_contiguous(dst) && inner_bytes(x, d) > 0;
}

static void plan_index(const candle_tensor *dst, int n_threads, cpu_plan *p) {
    p->nth = cpu_tasks_for((double)candle_tensor_nbytes(dst) / 4, 1 << 15, n_threads, 4);
    p->wsize = 0;
}

static int64_t index_at(const candle_tensor *idx, int64_t i) {
    const char *p = tensor_ptr(idx) + i * idx->stride[0];
    return idx->dtype == CANDLE_DTYPE_I32 ? *(const int32_t *)p : *(const int64_t *)p;
}

static candle_status out_of_range(const cpu_task *t, const candle_tensor *x, int d, int64_t v, int64_t i) {
    return cpu_error(t, CANDLE_ERR_INVALID_ARG,
                     "index_select: index %" PRId64 " out of range for dim %d of size %" PRId64 " (position %" PRId64
                     ")",
                     v, d, x->shape[d], i);
}

/* 4-byte elements picked along the last dim (a GPTQ act-order linear's
 * activations into its inputs' order): one load and store per element
 * rather than a memcpy and an index decomposition. */
static candle_status run_index_last4(const cpu_task *t, candle_tensor *dst, int64_t outer) {
    const candle_tensor *x = dst->src[0], *idx = dst->src[1];
    int d = x->rank - 1;
    int64_t n_sel = idx->shape[0], n = x->shape[d], r0, r1;
    cpu_split(outer, 1, t->ith, t->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t xo = 0, rem = r;
        for (int k = d - 1; k >= 0; k--) {
            xo += (rem % x->shape[k]) * x->stride[k];
            rem /= x->shape[k];
        }
        const char *src = tensor_ptr(x) + xo;
        int64_t step = x->stride[d];
        uint32_t *out = (uint32_t *)(void *)(tensor_ptr(dst)) + r * n_sel;
        for (int64_t i = 0; i < n_sel; i++) {
            int64_t v = index_at(idx, i);
            if (v < 0 || v >= n) return out_of_range(t, x, d, v, i);
            memcpy(&out[i], src + v * step, 4);
        }
    }
    return CANDLE_OK;
}

static candle_status run_index(const cpu_task *t, candle_tensor *dst) {
    const candle_tensor *x = dst->src[0], *idx = dst->src[1];
    int d = (int)dst->iparams[0];
    int64_t n_sel = idx->shape[0], outer = 1;
    for (int i = 0; i < d; i++) outer *= dst->shape[i];
    size_t slice = inner_bytes(x, d);
    if (d == x->rank - 1 && slice == 4 && candle_tensor_is_contiguous(idx)) return run_index_last4(t, dst, outer);
    int64_t r0, r1;
    cpu_split(outer * n_sel, 1, t->ith, t->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t o = r / n_sel, i = r % n_sel, v = index_at(idx, i);
        if (v < 0 || v >= x->shape[d]) return out_of_range(t, x, d, v, i);
        /* x's byte offset of outer index o (row-major over dims < d) */
        int64_t xo = 0, rem = o;
        for (int k = d - 1; k >= 0; k--) {
            xo += (rem % x->shape[k]) * x->stride[k];
            rem /= x->shape[k];
        }
        memcpy(tensor_ptr(dst) + (size_t)r * slice, tensor_ptr(x) + xo + v * x->stride[d], slice);
    }
    return CANDLE_OK;
}

const cpu_fast_kernel cpu_fast_index_select = {"index_select (contiguous slices, memcpy)", match_index,
                                               plan_index, run_index};
