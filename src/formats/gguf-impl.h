/* GGUF internals shared by the reader, the metadata accessors and the writer.
 *
 * The parsed handle keeps pointers into the file image (mapping, loaded copy
 * or caller memory); only keys and tensor names are copied, NUL-terminated,
 * because the file's strings are not. */
#ifndef CANDLE_GGUF_IMPL_H
#define CANDLE_GGUF_IMPL_H

#include "candle/gguf.h"
#include "core/core-impl.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32
/* Keys are at most 65535 bytes by the spec; tensor names are short in
 * practice (ggml allows 63) but we accept a little more. */
#define GGUF_MAX_KEY_LEN 65535
#define GGUF_MAX_NAME_LEN 255
/* Arrays of arrays are legal; bound the recursion so a hostile file cannot
 * exhaust the stack. */
#define GGUF_MAX_DEPTH 8

typedef struct gguf_kv {
    char *key;             /* NUL-terminated copy */
    candle_gguf_type type;
    candle_gguf_type elem_type; /* ARRAY only */
    uint64_t n;            /* ARRAY: element count; STRING: byte length */
    const uint8_t *val;    /* scalar bytes, string bytes or array payload */
    size_t val_size;       /* bytes of val (arrays: whole payload) */
    const uint8_t *raw;    /* from the type field to the value's end */
    size_t raw_size;
    size_t off;            /* where the key starts in the file */
    /* STRING arrays: offset (from val) of each element's length prefix,
     * so element i is found without a scan. */
    size_t *str_off;
    /* numeric arrays whose payload is misaligned in the file: an aligned
     * copy, so callers may read elements through typed pointers. */
    void *aligned;
} gguf_kv;

typedef cdl_name_ref gguf_name_ref;

typedef struct gguf_tensor {
    candle_gguf_tensor_info info;
    size_t name_off;  /* where the tensor's info (its name) starts */
    size_t field_off; /* where its offset field is */
} gguf_tensor;

struct candle_gguf {
    uint32_t version;
    size_t alignment;
    size_t file_size;
    size_t data_offset; /* aligned start of the tensor data section */
    const uint8_t *base;
    candle_storage *storage; /* holds base; one reference owned here */
    gguf_kv *kv;
    int64_t n_kv;
    gguf_name_ref *kv_sorted;
    gguf_tensor *tensors;
    int64_t n_tensors;
    gguf_name_ref *tensor_sorted;
};

/* Byte size of a scalar GGUF value type; 0 for STRING/ARRAY/invalid. */
size_t cgguf_scalar_size(uint32_t type);
const char *cgguf_type_name(uint32_t type);

/* Parse the image at g->base (g zeroed but for base, file_size, storage).
 * On error records "gguf: <field>: <problem> at offset <n>" and returns
 * CANDLE_ERR_FORMAT (or OOM); g is then only fit for cgguf_free_parsed. */
candle_status cgguf_parse(candle_gguf *g);
void cgguf_free_parsed(candle_gguf *g);

/* Index of name in a sorted ref table, or -1. */

#endif
