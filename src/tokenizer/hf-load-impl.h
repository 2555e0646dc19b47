/* Reading tokenizer.json: the JSON helpers and the component loaders
 * (hf_json.c, hf_components.c) that hf_load.c puts together. Errors name
 * the file and the JSON path ("normalizer.normalizers[1].type"). */
#ifndef CANDLE_TOKENIZER_HF_LOAD_IMPL_H
#define CANDLE_TOKENIZER_HF_LOAD_IMPL_H

#include <stdio.h>

#include "core/json-impl.h"
#include "hf-impl.h"

typedef struct hf_ld {
    const char *file;
    const char *text; /* the JSON, for numbers read as the reference reads them */
    size_t len;
} hf_ld;

#define PATH(buf, ...) snprintf(buf, sizeof buf, __VA_ARGS__)

/* CANDLE_ERR_FORMAT "file: path: what". */
candle_status hf_ferr(const hf_ld *l, const char *path, const char *what);
/* CANDLE_ERR_UNSUPPORTED "file: path.type 'T' is not supported". */
candle_status hf_unsup(const hf_ld *l, const char *path, const char *type);
candle_status hf_oom(void);
char *hf_dup_n(const char *s, size_t n);
bool hf_opt_bool(const json_value *o, const char *key, bool dflt);
/* A string member; absent or null gives NULL, an error only if required. */
candle_status hf_get_str(const hf_ld *l, const json_value *o, const char *key, const char *path,
                         bool required, const char **s, size_t *n);
candle_status hf_get_type(const hf_ld *l, const json_value *o, const char *path, const char **type);
candle_status hf_get_array(const hf_ld *l, const json_value *o, const char *key, const char *path,
                           const json_value **arr);
candle_status hf_dup_member(const hf_ld *l, const json_value *o, const char *key, const char *path,
                            bool required, char **out, size_t *len);
/* {"pattern": {"String": s} | {"Regex": r}}. */
candle_status hf_load_pattern(const hf_ld *l, const json_value *o, const char *path, hf_pattern *p);
/* HP_*, from prepend_scheme or the older add_prefix_space. */
int hf_prepend_scheme(const json_value *o);
candle_status hf_get_replacement(const hf_ld *l, const json_value *o, const char *path, char *out,
                                 size_t *len, uint32_t *cp);

candle_status hf_load_norm(const hf_ld *l, const json_value *o, const char *path, hf_norm *n);
candle_status hf_load_pre(const hf_ld *l, const json_value *o, const char *path, hf_pre *p);
candle_status hf_load_dec(const hf_ld *l, const json_value *o, const char *path, hf_dec *d);
candle_status hf_load_post(const hf_ld *l, const json_value *o, const char *path, hf_post *p);
/* Free what a component holds (not the struct itself). */
void hf_norm_free(hf_norm *n);
void hf_pre_free(hf_pre *p);
void hf_post_free(hf_post *p);
void hf_dec_free(hf_dec *d);

candle_status hf_precompiled_load(hf_norm *n, const char *b64, size_t len, const char *file,
                                  const char *path);
bool hf_merge_put(hf_merge_map *mm, int32_t a, int32_t b, int32_t rank, int32_t id);

#endif
