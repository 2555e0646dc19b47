/* safetensors internals shared by the parser and the reader.
 *
 * The parsed handle keeps the JSON tree of the header: tensor names, dtype
 * names and metadata point into it (NUL-terminated, unescaped), so nothing
 * of the parse points into the file image and the image can be swapped for
 * a loaded copy after validation (no_mmap). */
#ifndef CANDLE_SAFETENSORS_IMPL_H
#define CANDLE_SAFETENSORS_IMPL_H

#include "candle/safetensors.h"
#include "core/core-impl.h"
#include "core/json-impl.h"

/* A name and the index of its entry, sorted by name for binary search. */
typedef cdl_name_ref st_name_ref;

typedef struct st_meta {
    const char *key;
    const char *val;
    size_t len;
} st_meta;

struct candle_safetensors {
    char *name; /* the file's name, for messages */
    candle_storage *storage; /* the image; one reference owned here */
    const uint8_t *base;
    size_t file_size;
    size_t data_offset; /* 8 + header length */
    json_doc *doc;      /* the header */
    candle_safetensors_tensor_info *tensors;
    int64_t n_tensors;
    st_name_ref *tensor_sorted;
    st_meta *meta;
    int64_t n_meta;
    st_name_ref *meta_sorted;
};

/* Parse and validate the image at st->base (st zeroed but for name, base,
 * file_size, storage). On error records "<name>: <where>: <problem>" and
 * returns CANDLE_ERR_FORMAT (or OOM); st is then only fit for
 * cst_free_parsed. */
candle_status cst_parse(candle_safetensors *st);
void cst_free_parsed(candle_safetensors *st);
/* Index of name in a sorted ref table, or -1. */

#endif
