/* A strict JSON (RFC 8259) reader for the files models ship with:
 * safetensors headers, config.json, tokenizer.json and the like.
 *
 * The whole document is parsed into one read-only tree owned by the
 * json_doc. Nothing is read outside text[0..len); nesting deeper than
 * max_depth, invalid UTF-8 in strings, lone surrogates in \u escapes, control
 * characters, leading zeros, trailing commas and trailing bytes are errors.
 * Errors go to the thread-local last error as CANDLE_ERR_FORMAT, worded
 * "<what>: byte N: <reason>" so a caller's message names the file and the
 * place. Duplicate object keys are kept in order (json_get finds the first);
 * readers for which a duplicate matters check json_obj_key themselves. */
#ifndef CANDLE_JSON_IMPL_H
#define CANDLE_JSON_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "candle/status.h"

typedef enum json_type {
    JSON_NULL = 0,
    JSON_FALSE,
    JSON_TRUE,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT,
} json_type;

typedef struct json_value json_value;
struct json_value {
    json_type type;
    bool is_int;  /* a number written without fraction or exponent that fits int64 */
    size_t n;     /* string: bytes; array: elements; object: members */
    union {
        double num;        /* JSON_NUMBER (also set when is_int) */
        const char *str;   /* JSON_STRING: n bytes, unescaped UTF-8, NUL-terminated */
        json_value *items; /* JSON_ARRAY: n values; JSON_OBJECT: 2n, key then value */
    } u;
    int64_t i64; /* JSON_NUMBER with is_int */
    size_t offset; /* byte offset of the value in the text, for messages */
};

typedef struct json_doc json_doc;

typedef struct json_parse_params {
    int max_depth; /* arrays/objects nested deeper are an error; 0 = 64 */
} json_parse_params;

/* Parse text[0..len) (need not be NUL-terminated). `what` names the source in
 * error messages (a file name). p may be NULL. */
candle_status json_parse(json_doc **out, const char *text, size_t len, const char *what,
                         const json_parse_params *p);
/* Read and parse the file at path, refusing one of more than max_bytes.
 * `name` (NULL: path) names it in messages. */
candle_status json_parse_file(json_doc **out, const char *path, const char *name,
                              size_t max_bytes);
void json_free(json_doc *d);
const json_value *json_root(const json_doc *d);

/* Lookups: NULL when v is NULL, of another type, or the key/index is absent,
 * so chains like json_get(json_get(root, "model"), "vocab") need one check. */
const json_value *json_get(const json_value *obj, const char *key);
const json_value *json_at(const json_value *arr, size_t i);
const json_value *json_obj_key(const json_value *obj, size_t i); /* a JSON_STRING */
const json_value *json_obj_val(const json_value *obj, size_t i);

/* Typed reads: false (and *out untouched) when v is NULL or of another type. */
bool json_as_i64(const json_value *v, int64_t *out); /* integers only */
bool json_as_f64(const json_value *v, double *out);  /* any number */
bool json_as_bool(const json_value *v, bool *out);
bool json_as_str(const json_value *v, const char **s, size_t *len);
/* Is v the string s? */
bool json_str_eq(const json_value *v, const char *s);
/* "object", "string", ... for messages. */
const char *json_type_name(json_type t);

#endif
