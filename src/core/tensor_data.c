/* Moving a tensor's bytes: in place for host memory, through the backend's
 * buffer calls for memory the host cannot address (candle_storage.backend). */
#include <stdlib.h>
#include <string.h>

#include "core-impl.h"

bool candle_tensor_is_host(const candle_tensor *t) { return t && t->storage && !t->storage->backend; }

/* [t->offset + offset, + size) inside t's storage, else an error naming what. */
static candle_status check_range(const candle_tensor *t, size_t offset, size_t size, const char *what) {
    if (!t) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "%s: tensor is NULL", what);
    if (!t->storage) return cdl_set_error(t->ctx, CANDLE_ERR_INVALID_ARG, "%s: tensor has no storage", what);
    size_t cap = t->storage->size, start = t->offset;
    if (start > cap || offset > cap - start || size > cap - start - offset)
        return cdl_set_error(t->ctx, CANDLE_ERR_INVALID_ARG,
                                "%s: %zu bytes at offset %zu exceed the %zu bytes of the storage after offset %zu",
                                what, size, offset, cap, start);
    return CANDLE_OK;
}

static candle_status backend_failed(const candle_tensor *t, candle_status s, const char *what) {
    candle_backend *be = t->storage->backend;
    return cdl_set_error(t->ctx, s, "%s on %s: %s", what, be->iface->name, candle_backend_errmsg(be));
}

candle_status candle_tensor_set_bytes(candle_tensor *t, size_t offset, const void *src, size_t size) {
    candle_status s = check_range(t, offset, size, "tensor_set_bytes");
    if (s || !size) return s;
    if (!src) return cdl_set_error(t->ctx, CANDLE_ERR_INVALID_ARG, "tensor_set_bytes: src is NULL");
    candle_backend *be = t->storage->backend;
    if (!be) {
        memcpy((char *)t->storage->data + t->offset + offset, src, size);
        return CANDLE_OK;
    }
    s = be->iface->buffer_set(be, t->storage, t->offset + offset, src, size);
    return s ? backend_failed(t, s, "tensor_set_bytes") : CANDLE_OK;
}

candle_status candle_tensor_get_bytes(const candle_tensor *t, size_t offset, void *dst, size_t size) {
    candle_status s = check_range(t, offset, size, "tensor_get_bytes");
    if (s || !size) return s;
    if (!dst) return cdl_set_error(t->ctx, CANDLE_ERR_INVALID_ARG, "tensor_get_bytes: dst is NULL");
    candle_backend *be = t->storage->backend;
    if (!be) {
        memcpy(dst, (const char *)t->storage->data + t->offset + offset, size);
        return CANDLE_OK;
    }
    s = be->iface->buffer_get(be, t->storage, t->offset + offset, dst, size);
    return s ? backend_failed(t, s, "tensor_get_bytes") : CANDLE_OK;
}

candle_status candle_tensor_memset_bytes(candle_tensor *t, size_t offset, int value, size_t size) {
    candle_status s = check_range(t, offset, size, "tensor_memset_bytes");
    if (s || !size) return s;
    candle_backend *be = t->storage->backend;
    if (!be) {
        memset((char *)t->storage->data + t->offset + offset, value, size);
        return CANDLE_OK;
    }
    s = be->iface->buffer_memset(be, t->storage, t->offset + offset, value, size);
    return s ? backend_failed(t, s, "tensor_memset_bytes") : CANDLE_OK;
}

candle_status candle_tensor_copy_bytes(candle_tensor *dst, size_t dst_offset, const candle_tensor *src,
                                       size_t src_offset, size_t size) {
    candle_status s = check_range(dst, dst_offset, size, "tensor_copy_bytes: dst");
    if (!s) s = check_range(src, src_offset, size, "tensor_copy_bytes: src");
    if (s || !size) return s;
    candle_backend *bd = dst->storage->backend, *bs = src->storage->backend;
    if (!bs) return candle_tensor_set_bytes(dst, dst_offset, (const char *)candle_tensor_data(src) + src_offset, size);
    if (!bd) return candle_tensor_get_bytes(src, src_offset, (char *)candle_tensor_data(dst) + dst_offset, size);
    if (bd == bs) {
        s = bd->iface->buffer_copy(bd, dst->storage, dst->offset + dst_offset, src->storage, src->offset + src_offset,
                                   size);
        return s ? backend_failed(dst, s, "tensor_copy_bytes") : CANDLE_OK;
    }
    /* between two device backends: through the host */
    void *tmp = malloc(size);
    if (!tmp) return cdl_set_error(dst->ctx, CANDLE_ERR_OOM, "out of memory: tensor_copy_bytes staging %zu bytes", size);
    s = candle_tensor_get_bytes(src, src_offset, tmp, size);
    if (!s) s = candle_tensor_set_bytes(dst, dst_offset, tmp, size);
    free(tmp);
    return s;
}
