/* Tensor descriptors: creation, layout queries, element access, printing. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx-impl.h"
#include "elem-impl.h"

int64_t candle_tensor_numel(const candle_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= t->shape[i];
    return n;
}

candle_dtype candle_tensor_dtype(const candle_tensor *t) {
    return t ? t->dtype : CANDLE_DTYPE_COUNT;
}

int candle_tensor_rank(const candle_tensor *t) { return t ? t->rank : -1; }

/* i in [-rank, rank) as an index, or -1. */
static int dim_index(const candle_tensor *t, int i) {
    if (!t) return -1;
    if (i < 0) i += t->rank;
    return i >= 0 && i < t->rank ? i : -1;
}

int64_t candle_tensor_dim(const candle_tensor *t, int i) {
    int d = dim_index(t, i);
    return d < 0 ? -1 : t->shape[d];
}

int64_t candle_tensor_stride(const candle_tensor *t, int i) {
    int d = dim_index(t, i);
    return d < 0 ? 0 : t->stride[d];
}

int64_t candle_tensor_nelements(const candle_tensor *t) { return t ? candle_tensor_numel(t) : 0; }

void candle_contiguous_strides(candle_dtype dtype, int rank, const int64_t *shape,
                               int64_t *stride) {
    const candle_dtype_traits *tr = candle_dtype_info(dtype);
    int64_t s = (int64_t)tr->type_size;
    for (int i = rank - 1; i >= 0; i--) {
        stride[i] = s;
        s *= (i == rank - 1) ? shape[i] / tr->block_size : shape[i];
    }
}

size_t candle_tensor_nbytes(const candle_tensor *t) {
    if (!t) return 0;
    if (t->rank == 0) return candle_dtype_info(t->dtype)->type_size;
    size_t rows = 1;
    for (int i = 0; i < t->rank - 1; i++) rows *= (size_t)t->shape[i];
    return rows * candle_dtype_row_size(t->dtype, t->shape[t->rank - 1]);
}

bool candle_tensor_is_contiguous(const candle_tensor *t) {
    int64_t want[CANDLE_MAX_RANK];
    candle_contiguous_strides(t->dtype, t->rank, t->shape, want);
    for (int i = 0; i < t->rank; i++)
        if (t->shape[i] != 1 && t->stride[i] != want[i]) return false;
    return true;
}

bool candle_tensor_same_shape(const candle_tensor *a, const candle_tensor *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

void *candle_tensor_data(const candle_tensor *t) {
    return t->storage ? (char *)t->storage->data + t->offset : NULL;
}

const char *candle_shape_str(int rank, const int64_t *shape, char *buf, size_t n) {
    size_t used = 0;
    used += (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < rank && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, i ? ", %" PRId64 : "%" PRId64, shape[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}

void candle_tensor_set_name(candle_tensor *t, const char *name) {
    if (t) snprintf(t->name, sizeof t->name, "%s", name);
}

/* Check a requested shape: rank in range, no negative sizes, byte size fits. */
static bool check_shape(candle_ctx *ctx, const char *what, candle_dtype dtype, int rank,
                        const int64_t *shape) {
    char buf[128];
    if ((unsigned)dtype >= CANDLE_DTYPE_COUNT) {
        cdl_set_error(ctx, CANDLE_ERR_DTYPE, "%s: invalid dtype %d", what, (int)dtype);
        return false;
    }
    if (rank < 0 || rank > CANDLE_MAX_RANK || (rank > 0 && !shape)) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE, "%s: rank %d out of range (max %d)", what, rank,
                         CANDLE_MAX_RANK);
        return false;
    }
    const candle_dtype_traits *tr = candle_dtype_info(dtype);
    uint64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0 || (shape[i] > 0 && n > (UINT64_MAX >> 2) / (uint64_t)shape[i])) {
            cdl_set_error(ctx, CANDLE_ERR_SHAPE, "%s: invalid shape %s", what,
                             candle_shape_str(rank, shape, buf, sizeof buf));
            return false;
        }
        n *= (uint64_t)shape[i];
    }
    if (tr->block_size > 1 && (rank == 0 || shape[rank - 1] % tr->block_size)) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE,
                         "%s: %s rows must be a multiple of %" PRId64 " elements, shape %s",
                         what, tr->name, tr->block_size,
                         candle_shape_str(rank, shape, buf, sizeof buf));
        return false;
    }
    if (n > (uint64_t)INT64_MAX / 8) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE, "%s: shape %s too large", what,
                         candle_shape_str(rank, shape, buf, sizeof buf));
        return false;
    }
    return true;
}

candle_tensor *cdl_node_new(candle_ctx *ctx, candle_op op, candle_dtype dtype, int rank,
                               const int64_t *shape) {
    const char *what = op == CANDLE_OP_NONE ? "tensor_new" : candle_op_name(op);
    if (!check_shape(ctx, what, dtype, rank, shape)) return NULL;
    candle_tensor *t = cdl_tensor_alloc_desc(ctx);
    if (!t) return NULL;
    t->op = op;
    t->dtype = dtype;
    t->rank = rank;
    for (int i = 0; i < rank; i++) t->shape[i] = shape[i];
    candle_contiguous_strides(dtype, rank, shape, t->stride);
    return t;
}

candle_tensor *candle_tensor_new(candle_ctx *ctx, candle_dtype dtype, int rank,
                                 const int64_t *shape) {
    if (!ctx) return NULL;
    candle_tensor *t = cdl_node_new(ctx, CANDLE_OP_NONE, dtype, rank, shape);
    if (!t) return NULL;
    if (cdl_tensor_alloc_storage(ctx, t) != CANDLE_OK) return NULL;
    t->computed = true;
    return t;
}

candle_tensor *candle_tensor_from_storage(candle_ctx *ctx, candle_dtype dtype, int rank,
                                          const int64_t *shape, candle_storage *s,
                                          size_t offset) {
    if (!ctx) return NULL;
    candle_tensor *t = cdl_node_new(ctx, CANDLE_OP_NONE, dtype, rank, shape);
    if (!t) return NULL;
    size_t need = candle_tensor_nbytes(t);
    if (!s || offset > s->size || need > s->size - offset) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG,
                         "tensor_from_storage: %zu bytes at offset %zu exceed storage of %zu bytes",
                         need, offset, s ? s->size : 0);
        return NULL;
    }
    t->storage = candle_storage_retain(s);
    t->offset = offset;
    t->device = s->device;
    t->computed = true;
    return t;
}

candle_tensor *candle_tensor_from_f32(candle_ctx *ctx, candle_dtype dtype, int rank,
                                      const int64_t *shape, const float *data) {
    candle_tensor *t = candle_tensor_new(ctx, dtype, rank, shape);
    if (!t) return NULL;
    const candle_dtype_traits *tr = candle_dtype_info(dtype);
    int64_t n = candle_tensor_numel(t);
    if (tr->is_quantized) {
        if (!tr->from_f32) {
            cdl_set_error(ctx, CANDLE_ERR_UNSUPPORTED, "tensor_from_f32: no quantizer for %s",
                             tr->name);
            return NULL;
        }
    }
    /* converted in place, or staged on the host for a device's memory */
    size_t bytes = candle_tensor_nbytes(t);
    char *p = candle_tensor_is_host(t) ? candle_tensor_data(t) : malloc(bytes ? bytes : 1);
    if (!p) {
        cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: tensor_from_f32 staging %zu bytes", bytes);
        return NULL;
    }
    if (tr->is_quantized) tr->from_f32(data, p, n);
    else
        for (int64_t i = 0; i < n; i++) cdl_store_f64(dtype, p + i * (int64_t)tr->type_size, data[i]);
    if (p == candle_tensor_data(t)) return t;
    candle_status s = candle_tensor_set_bytes(t, 0, p, bytes);
    free(p);
    return s ? NULL : t;
}

candle_tensor *candle_tensor_from_i32(candle_ctx *ctx, int rank, const int64_t *shape,
                                      const int32_t *data) {
    candle_tensor *t = candle_tensor_new(ctx, CANDLE_DTYPE_I32, rank, shape);
    return t && candle_tensor_set_bytes(t, 0, data, candle_tensor_nbytes(t)) ? NULL : t;
}

/* A device tensor seen through a host copy of its whole storage (the
 * element readers below; sh->storage->data is freed by the caller). */
static candle_status host_shadow(const candle_tensor *t, candle_tensor *sh, candle_storage *st) {
    const candle_storage *src = t->storage;
    void *p = malloc(src->size ? src->size : 1);
    if (!p) return cdl_set_error(t->ctx, CANDLE_ERR_OOM, "out of memory: reading %zu bytes from %s", src->size,
                                    src->backend->iface->name);
    candle_status s = src->backend->iface->buffer_get(src->backend, src, 0, p, src->size);
    if (s) {
        free(p);
        return cdl_set_error(t->ctx, s, "reading a tensor from %s: %s", src->backend->iface->name,
                                candle_backend_errmsg(src->backend));
    }
    *st = (candle_storage){.data = p, .size = src->size, .refcount = 1, .kind = CANDLE_STORAGE_HEAP};
    *sh = *t;
    sh->storage = st;
    return CANDLE_OK;
}

static candle_status check_readable(const candle_tensor *t, const char *what) {
    if (!t) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "%s: tensor is NULL", what);
    if (!t->storage || !t->computed)
        return cdl_set_error(t->ctx, CANDLE_ERR_INVALID_ARG, "%s: tensor not computed", what);
    return CANDLE_OK;
}

/* The dim a block dtype's view stores in blocks: the last one in the stored
 * layout, but dim -2 in transpose(w) of a weight w [N, K]. It steps by the
 * block's bytes over whole blocks; the last dim where it qualifies (or none
 * does), else the one other dim that does. (Where K is one block, a row
 * steps by a block's bytes too and the descriptor cannot tell the two
 * apart: the last dim, as before.) */
static int blocked_dim(const candle_tensor *t, const candle_dtype_traits *tr) {
    int last = t->rank - 1, found = -1, n = 0;
    if (!tr->is_quantized || t->rank == 0) return last;
    for (int i = 0; i < t->rank; i++)
        if (t->stride[i] == (int64_t)tr->type_size && t->shape[i] % tr->block_size == 0) found = i, n++;
    if (n == 0 || found == last) return last;
    return n == 1 ? found : last;
}

candle_status candle_tensor_get_f64(const candle_tensor *t, const int64_t *index, double *out) {
    candle_status s = check_readable(t, "tensor_get");
    if (s) return s;
    if (!candle_tensor_is_host(t)) {
        candle_tensor sh;
        candle_storage st;
        s = host_shadow(t, &sh, &st);
        if (s) return s;
        s = candle_tensor_get_f64(&sh, index, out);
        free(st.data);
        return s;
    }
    const candle_dtype_traits *tr = candle_dtype_info(t->dtype);
    int64_t off = (int64_t)t->offset;
    int bd = blocked_dim(t, tr);
    for (int i = 0; i < t->rank; i++) {
        if (index[i] < 0 || index[i] >= t->shape[i])
            return cdl_set_error(t->ctx, CANDLE_ERR_INVALID_ARG,
                                    "tensor_get: index %" PRId64 " out of range for dim %d of size %" PRId64,
                                    index[i], i, t->shape[i]);
        if (i == bd && tr->is_quantized) continue;
        off += index[i] * t->stride[i];
    }
    const char *base = (const char *)t->storage->data;
    if (tr->is_quantized && !tr->to_f32)
        return cdl_set_error(t->ctx, CANDLE_ERR_UNSUPPORTED, "tensor_get: no dequantizer for %s",
                                tr->name);
    if (tr->is_quantized) {
        int64_t j = t->rank ? index[bd] : 0;
        float tmp[256];
        tr->to_f32(base + off + (t->rank ? (j / tr->block_size) * t->stride[bd] : 0), tmp, tr->block_size);
        *out = tmp[j % tr->block_size];
        return CANDLE_OK;
    }
    *out = cdl_load_f64(t->dtype, base + off);
    return CANDLE_OK;
}

candle_status candle_tensor_to_f32(const candle_tensor *t, float *out) {
    candle_status s = check_readable(t, "tensor_to_f32");
    if (s) return s;
    if (!candle_tensor_is_host(t)) {
        candle_tensor sh;
        candle_storage st;
        s = host_shadow(t, &sh, &st);
        if (s) return s;
        s = candle_tensor_to_f32(&sh, out);
        free(st.data);
        return s;
    }
    /* contiguous float or block data (a step's logits): whole rows at once */
    const candle_dtype_traits *tr = candle_dtype_info(t->dtype);
    if (candle_tensor_is_contiguous(t) && (tr->is_float || tr->is_quantized) && tr->to_f32) {
        tr->to_f32(candle_tensor_data(t), out, candle_tensor_numel(t));
        return CANDLE_OK;
    }
    int64_t n = candle_tensor_numel(t), idx[CANDLE_MAX_RANK] = {0};
    for (int64_t i = 0; i < n; i++) {
        double v;
        s = candle_tensor_get_f64(t, idx, &v);
        if (s) return s;
        out[i] = (float)v;
        for (int d = t->rank - 1; d >= 0; d--) {
            if (++idx[d] < t->shape[d]) break;
            idx[d] = 0;
        }
    }
    return CANDLE_OK;
}

static void print_rec(FILE *f, const candle_tensor *t, int64_t *idx, int d, int indent) {
    const int64_t edge = 3; /* elements shown at each end of a long dim */
    int64_t n = t->shape[d];
    fputc('[', f);
    for (int64_t i = 0; i < n; i++) {
        if (n > 2 * edge + 1 && i == edge) {
            fputs(d == t->rank - 1 ? "..., " : "...,\n", f);
            i = n - edge - 1;
            continue;
        }
        idx[d] = i;
        if (d == t->rank - 1) {
            double v = 0;
            candle_tensor_get_f64(t, idx, &v);
            if (candle_dtype_info(t->dtype)->is_int) fprintf(f, "%.0f", v);
            else fprintf(f, "%.4f", v);
            if (i + 1 < n) fputs(", ", f);
        } else {
            if (i) fprintf(f, "%*s", indent + 1, "");
            print_rec(f, t, idx, d + 1, indent + 1);
            if (i + 1 < n) fputs(",\n", f);
        }
    }
    fputc(']', f);
}

candle_status candle_tensor_print(const candle_tensor *t, void *file) {
    candle_status s = check_readable(t, "tensor_print");
    if (s) return s;
    if (!candle_tensor_is_host(t)) {
        candle_tensor sh;
        candle_storage st;
        s = host_shadow(t, &sh, &st);
        if (s) return s;
        s = candle_tensor_print(&sh, file);
        free(st.data);
        return s;
    }
    FILE *f = file ? (FILE *)file : stdout;
    int64_t idx[CANDLE_MAX_RANK] = {0};
    char buf[128];
    fputs("tensor(", f);
    if (t->rank == 0) {
        double v = 0;
        candle_tensor_get_f64(t, idx, &v);
        fprintf(f, "%.4f", v);
    } else {
        print_rec(f, t, idx, 0, 7);
    }
    fprintf(f, ", shape=%s, dtype=%s)\n", candle_shape_str(t->rank, t->shape, buf, sizeof buf),
            candle_dtype_name(t->dtype));
    return CANDLE_OK;
}
