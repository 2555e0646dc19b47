/* Reference kernels: index_select (and embedding), gather, concat.
 *
 * They move whole "units": an element of a plain dtype, a block of a
 * quantized one. A tensor's unit shape is its shape with the innermost dim
 * counted in blocks, so one strided loop serves both. */
#include <inttypes.h>
#include <stdlib.h>

#include "../cpu-impl.h"

/* Shape in units (innermost dim in blocks); strides stay in bytes. */
static void unit_shape(const candle_tensor *t, int64_t *shape) {
    for (int i = 0; i < t->rank; i++) shape[i] = t->shape[i];
    if (t->rank) shape[t->rank - 1] /= candle_dtype_info(t->dtype)->block_size;
}

/* Store one unit of src (dtype ts) at dp as dst dtype td: a byte copy when
 * the dtypes agree, else through f32 (embedding dequantizes). */
static void put_unit(candle_dtype ts, const char *sp, candle_dtype td, char *dp, int64_t dst_step) {
    const candle_dtype_traits *tr = candle_dtype_info(ts);
    if (ts == td) {
        memcpy(dp, sp, tr->type_size);
        return;
    }
    float buf[256]; /* largest block: 256 elements (k-quants) */
    tr->to_f32(sp, buf, tr->block_size);
    for (int64_t j = 0; j < tr->block_size; j++) cdl_store_f64(td, dp + j * dst_step, buf[j]);
}

static int64_t load_index(const candle_tensor *idx, const char *p) {
    return idx->dtype == CANDLE_DTYPE_I32 ? *(const int32_t *)p : *(const int64_t *)p;
}

candle_status cpu_ref_index_select(const cpu_task *task, candle_tensor *dst) {
    const candle_tensor *x = dst->src[0], *idx = dst->src[1];
    int d = (int)dst->iparams[0], r = dst->rank;
    int64_t n_sel = idx->shape[0], size = x->shape[d];
    const char *ip = tensor_ptr(idx);
    /* Check every index before writing anything. */
    for (int64_t i = 0; i < n_sel; i++) {
        int64_t v = load_index(idx, ip + i * idx->stride[0]);
        if (v < 0 || v >= size)
            return cpu_error(task, CANDLE_ERR_INVALID_ARG,
                             "%s: index %" PRId64 " out of range for dim %d of size %" PRId64
                             " (position %" PRId64 ")",
                             candle_op_name((candle_op)dst->op), v, d, size, i);
    }
    int64_t ushape[CANDLE_MAX_RANK], at[CANDLE_MAX_RANK] = {0}, from[CANDLE_MAX_RANK];
    unit_shape(x, ushape);
    ushape[d] = n_sel;
    for (int i = 0; i < r; i++)
        if (ushape[i] == 0) return CANDLE_OK;
    /* f32 output of a block type: each block fills block_size dst elements. */
    int64_t dst_block = candle_dtype_info(x->dtype)->block_size;
    const char *xp = tensor_ptr(x);
    char *dp = tensor_ptr(dst);
    do {
        memcpy(from, at, sizeof from);
        from[d] = load_index(idx, ip + at[d] * idx->stride[0]);
        int64_t doff = 0;
        for (int i = 0; i < r; i++)
            doff += (i == r - 1 && dst->dtype != x->dtype ? at[i] * dst_block : at[i]) * dst->stride[i];
        put_unit(x->dtype, xp + nd_offset(r, from, x->stride), dst->dtype, dp + doff,
                 r ? dst->stride[r - 1] : 0);
    } while (nd_next(r, ushape, at));
    return CANDLE_OK;
}

candle_status cpu_ref_gather(const cpu_task *task, candle_tensor *dst) {
    const candle_tensor *x = dst->src[0], *idx = dst->src[1];
    int d = (int)dst->iparams[0], r = dst->rank;
    if (candle_tensor_numel(dst) == 0) return CANDLE_OK;
    size_t esz = candle_dtype_info(x->dtype)->type_size;
    const char *xp = tensor_ptr(x), *ip = tensor_ptr(idx);
    char *dp = tensor_ptr(dst);
    int64_t at[CANDLE_MAX_RANK] = {0}, from[CANDLE_MAX_RANK];
    do {
        int64_t v = load_index(idx, ip + nd_offset(r, at, idx->stride));
        if (v < 0 || v >= x->shape[d])
            return cpu_error(task, CANDLE_ERR_INVALID_ARG,
                             "gather: index %" PRId64 " out of range for dim %d of size %" PRId64,
                             v, d, x->shape[d]);
        memcpy(from, at, sizeof from);
        from[d] = v;
        memcpy(dp + nd_offset(r, at, dst->stride), xp + nd_offset(r, from, x->stride), esz);
    } while (nd_next(r, dst->shape, at));
    return CANDLE_OK;
}

candle_status cpu_ref_concat(const cpu_task *task, candle_tensor *dst) {
    (void)task;
    int d = (int)dst->iparams[0], r = dst->rank;
    size_t usz = candle_dtype_info(dst->dtype)->type_size;
    int64_t block = candle_dtype_info(dst->dtype)->block_size;
    int64_t base = 0; /* units along d taken by earlier inputs */
    char *dp = tensor_ptr(dst);
    for (int s = 0; s < dst->n_src; s++) {
        const candle_tensor *x = dst->src[s];
        int64_t ushape[CANDLE_MAX_RANK], at[CANDLE_MAX_RANK] = {0};
        unit_shape(x, ushape);
        bool empty = false;
        for (int i = 0; i < r; i++) empty = empty || ushape[i] == 0;
        const char *xp = tensor_ptr(x);
        /* units adjacent along the last dim in both: one copy per row */
        int64_t run = r > 0 && x->stride[r - 1] == (int64_t)usz && dst->stride[r - 1] == (int64_t)usz
                          ? ushape[r - 1] : 1;
        if (run > 1) ushape[r - 1] = 1;
        if (!empty) do {
                int64_t doff = nd_offset(r, at, dst->stride) + base * dst->stride[d];
                memcpy(dp + doff, xp + nd_offset(r, at, x->stride), usz * (size_t)run);
            } while (nd_next(r, ushape, at));
        base += d == r - 1 ? x->shape[d] / block : x->shape[d];
    }
    return CANDLE_OK;
}
