/* JSON helpers for reading tokenizer.json: typed member reads whose
 * errors name the file and the JSON path. */
#include <stdlib.h>
#include <string.h>

#include "core/core-impl.h"
#include "hf-load-impl.h"
#include "unicode-impl.h"

candle_status hf_ferr(const hf_ld *l, const char *path, const char *what) {
    return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: %s: %s", l->file, path, what);
}

candle_status hf_unsup(const hf_ld *l, const char *path, const char *type) {
    return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "%s: %s.type '%s' is not supported", l->file,
                            path, type);
}

candle_status hf_oom(void) { return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tokenizer.json"); }

char *hf_dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

bool hf_opt_bool(const json_value *o, const char *key, bool dflt) {
    bool v = dflt;
    json_as_bool(json_get(o, key), &v);
    return v;
}

/* A string member; absent or null gives NULL with no error unless required. */
candle_status hf_get_str(const hf_ld *l, const json_value *o, const char *key, const char *path,
                         bool required, const char **s, size_t *n) {
    const json_value *v = json_get(o, key);
    *s = NULL;
    *n = 0;
    if ((!v || v->type == JSON_NULL) && !required) return CANDLE_OK;
    if (!json_as_str(v, s, n)) {
        char p[512];
        PATH(p, "%s.%s", path, key);
        return hf_ferr(l, p, v ? "expected a string" : "missing");
    }
    return CANDLE_OK;
}

candle_status hf_get_type(const hf_ld *l, const json_value *o, const char *path, const char **type) {
    size_t n;
    if (!o || o->type != JSON_OBJECT) return hf_ferr(l, path, "expected an object");
    return hf_get_str(l, o, "type", path, true, type, &n);
}

candle_status hf_load_pattern(const hf_ld *l, const json_value *o, const char *path, hf_pattern *p) {
    const json_value *pat = json_get(o, "pattern");
    const char *s;
    size_t n;
    char sub[512];
    PATH(sub, "%s.pattern", path);
    if (json_as_str(json_get(pat, "String"), &s, &n)) {
        if (!(p->str = hf_dup_n(s, n))) return hf_oom();
        p->len = n;
        return CANDLE_OK;
    }
    if (!json_as_str(json_get(pat, "Regex"), &s, &n)) return hf_ferr(l, sub, "expected {\"String\"} or {\"Regex\"}");
    if (strlen(s) != n) return hf_ferr(l, sub, "NUL in regex");
    if (hf_regex_compile(s, &p->re) != CANDLE_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", candle_last_errmsg());
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "%s: %s.Regex '%s': %s", l->file, sub, s, msg);
    }
    return CANDLE_OK;
}

candle_status hf_dup_member(const hf_ld *l, const json_value *o, const char *key, const char *path,
                            bool required, char **out, size_t *len) {
    const char *s;
    candle_status st = hf_get_str(l, o, key, path, required, &s, len);
    if (st != CANDLE_OK) return st;
    if (!s) s = "";
    return (*out = hf_dup_n(s, *len)) ? CANDLE_OK : hf_oom();
}

candle_status hf_get_array(const hf_ld *l, const json_value *o, const char *key, const char *path,
                           const json_value **arr) {
    *arr = json_get(o, key);
    if (*arr && (*arr)->type == JSON_ARRAY) return CANDLE_OK;
    char p[512];
    PATH(p, "%s.%s", path, key);
    return hf_ferr(l, p, *arr ? "expected an array" : "missing");
}

int hf_prepend_scheme(const json_value *o) {
    const json_value *ps = json_get(o, "prepend_scheme");
    if (json_str_eq(ps, "first")) return HP_FIRST;
    if (json_str_eq(ps, "never")) return HP_NEVER;
    if (ps) return HP_ALWAYS;
    return hf_opt_bool(o, "add_prefix_space", true) ? HP_ALWAYS : HP_NEVER;
}

candle_status hf_get_replacement(const hf_ld *l, const json_value *o, const char *path, char *out, size_t *len,
                                 uint32_t *cp) {
    const char *s;
    size_t n;
    candle_status st = hf_get_str(l, o, "replacement", path, true, &s, &n);
    if (st != CANDLE_OK) return st;
    if (n == 0 || n > 4 || tok_utf8_decode(s, n, cp) != n) return hf_ferr(l, path, "replacement must be one character");
    memcpy(out, s, n);
    out[n] = 0;
    *len = n;
    return CANDLE_OK;
}
