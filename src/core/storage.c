/* Refcounted storage. */
#include <stdio.h>
#include <stdlib.h>

#include "core-impl.h"

candle_storage *candle_storage_retain(candle_storage *s) {
    if (s) __atomic_fetch_add(&s->refcount, 1, __ATOMIC_RELAXED);
    return s;
}

void candle_storage_release(candle_storage *s) {
    if (!s) return;
    if (__atomic_sub_fetch(&s->refcount, 1, __ATOMIC_ACQ_REL) == 0) s->release(s);
}

static void release_external(candle_storage *s) { free(s); }

candle_storage *cdl_storage_new(void *data, size_t size, candle_storage_kind kind,
                                   void (*release)(candle_storage *)) {
    candle_storage *s = calloc(1, sizeof *s);
    if (!s) {
        cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: storage descriptor");
        return NULL;
    }
    s->data = data;
    s->size = size;
    s->refcount = 1;
    s->kind = kind;
    s->device = (candle_device){CANDLE_DEVICE_CPU, 0};
    s->release = release;
    return s;
}

candle_storage *candle_storage_external(void *data, size_t size) {
    return cdl_storage_new(data, size, CANDLE_STORAGE_EXTERNAL, release_external);
}

const char *candle_device_str(candle_device d, char *buf, size_t n) {
    if (d.type == CANDLE_DEVICE_CUDA) snprintf(buf, n, "cuda:%d", d.index);
    else snprintf(buf, n, "cpu");
    return buf;
}
