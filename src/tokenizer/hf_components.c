/* tokenizer.json components: normalizers, pre-tokenizers, decoders and
 * post-processors from their JSON objects (recursively for Sequence), and
 * freeing them. An unknown "type" is CANDLE_ERR_UNSUPPORTED. */
#include <stdlib.h>
#include <string.h>

#include "core/core-impl.h"
#include "hf-load-impl.h"
#include "unicode-impl.h"

/* ---- normalizers ---- */

candle_status hf_load_norm(const hf_ld *l, const json_value *o, const char *path, hf_norm *n);

static candle_status load_norm_seq(const hf_ld *l, const json_value *o, const char *path, hf_norm *n) {
    const json_value *arr;
    candle_status st = hf_get_array(l, o, "normalizers", path, &arr);
    if (st != CANDLE_OK) return st;
    if (!(n->seq = calloc(arr->n + 1, sizeof *n->seq))) return hf_oom();
    for (size_t i = 0; i < arr->n && st == CANDLE_OK; i++) {
        char sub[512];
        PATH(sub, "%s.normalizers[%zu]", path, i);
        n->n_seq++;
        st = hf_load_norm(l, json_at(arr, i), sub, &n->seq[i]);
    }
    return st;
}

candle_status hf_load_norm(const hf_ld *l, const json_value *o, const char *path, hf_norm *n) {
    const char *type;
    candle_status st = hf_get_type(l, o, path, &type);
    if (st != CANDLE_OK) return st;
    static const struct { const char *name; int type; } simple[] = {
        {"NFC", HN_NFC}, {"NFD", HN_NFD}, {"NFKC", HN_NFKC}, {"NFKD", HN_NFKD},
        {"Lowercase", HN_LOWERCASE}, {"StripAccents", HN_STRIP_ACCENTS},
    };
    for (size_t i = 0; i < sizeof simple / sizeof simple[0]; i++)
        if (!strcmp(type, simple[i].name)) {
            n->type = simple[i].type;
            return CANDLE_OK;
        }
    size_t len;
    if (!strcmp(type, "Sequence")) {
        n->type = HN_SEQUENCE;
        return load_norm_seq(l, o, path, n);
    }
    if (!strcmp(type, "BertNormalizer")) {
        n->type = HN_BERT;
        n->clean_text = hf_opt_bool(o, "clean_text", true);
        n->chinese = hf_opt_bool(o, "handle_chinese_chars", true);
        n->lowercase = hf_opt_bool(o, "lowercase", true);
        n->strip_accents = hf_opt_bool(o, "strip_accents", n->lowercase); /* null follows lowercase */
        return CANDLE_OK;
    }
    if (!strcmp(type, "Strip")) {
        n->type = HN_STRIP;
        n->left = hf_opt_bool(o, "strip_left", true);
        n->right = hf_opt_bool(o, "strip_right", true);
        return CANDLE_OK;
    }
    if (!strcmp(type, "Replace")) {
        n->type = HN_REPLACE;
        st = hf_load_pattern(l, o, path, &n->pat);
        return st != CANDLE_OK ? st : hf_dup_member(l, o, "content", path, true, &n->content, &n->content_len);
    }
    if (!strcmp(type, "Prepend")) {
        n->type = HN_PREPEND;
        return hf_dup_member(l, o, "prepend", path, true, &n->content, &n->content_len);
    }
    if (!strcmp(type, "Precompiled")) {
        const char *b64;
        n->type = HN_PRECOMPILED;
        st = hf_get_str(l, o, "precompiled_charsmap", path, true, &b64, &len);
        return st != CANDLE_OK ? st : hf_precompiled_load(n, b64, len, l->file, path);
    }
    return hf_unsup(l, path, type);
}

/* ---- pre-tokenizers ---- */

static int behavior(const json_value *o, int dflt) {
    const json_value *b = json_get(o, "behavior");
    if (json_str_eq(b, "Removed")) return HB_REMOVED;
    if (json_str_eq(b, "Isolated")) return HB_ISOLATED;
    if (json_str_eq(b, "MergedWithPrevious")) return HB_PREVIOUS;
    if (json_str_eq(b, "MergedWithNext")) return HB_NEXT;
    if (json_str_eq(b, "Contiguous")) return HB_CONTIGUOUS;
    return b ? -1 : dflt;
}

candle_status hf_load_pre(const hf_ld *l, const json_value *o, const char *path, hf_pre *p) {
    const char *type;
    candle_status st = hf_get_type(l, o, path, &type);
    if (st != CANDLE_OK) return st;
    size_t rl;
    if (!strcmp(type, "Sequence")) {
        const json_value *arr;
        p->type = HPT_SEQUENCE;
        if ((st = hf_get_array(l, o, "pretokenizers", path, &arr)) != CANDLE_OK) return st;
        if (!(p->seq = calloc(arr->n + 1, sizeof *p->seq))) return hf_oom();
        for (size_t i = 0; i < arr->n && st == CANDLE_OK; i++) {
            char sub[512];
            PATH(sub, "%s.pretokenizers[%zu]", path, i);
            p->n_seq++;
            st = hf_load_pre(l, json_at(arr, i), sub, &p->seq[i]);
        }
        return st;
    }
    if (!strcmp(type, "ByteLevel")) {
        p->type = HPT_BYTELEVEL;
        p->add_prefix_space = hf_opt_bool(o, "add_prefix_space", true);
        p->use_regex = hf_opt_bool(o, "use_regex", true);
        return p->use_regex ? hf_regex_compile(hf_gpt2_pattern, &p->gpt2) : CANDLE_OK;
    }
    if (!strcmp(type, "Whitespace")) return p->type = HPT_WHITESPACE, CANDLE_OK;
    if (!strcmp(type, "WhitespaceSplit")) return p->type = HPT_WHITESPACE_SPLIT, CANDLE_OK;
    if (!strcmp(type, "BertPreTokenizer")) return p->type = HPT_BERT, CANDLE_OK;
    if (!strcmp(type, "Metaspace")) {
        p->type = HPT_METASPACE;
        p->prepend = hf_prepend_scheme(o);
        p->split = hf_opt_bool(o, "split", true);
        return hf_get_replacement(l, o, path, p->repl, &rl, &p->repl_cp);
    }
    if (!strcmp(type, "Digits")) {
        p->type = HPT_DIGITS;
        p->individual_digits = hf_opt_bool(o, "individual_digits", false);
        return CANDLE_OK;
    }
    if (!strcmp(type, "Punctuation") || !strcmp(type, "Split")) {
        p->type = type[0] == 'P' ? HPT_PUNCTUATION : HPT_SPLIT;
        if ((p->behavior = behavior(o, HB_ISOLATED)) < 0) {
            char sub[512];
            PATH(sub, "%s.behavior", path);
            return hf_ferr(l, sub, "unknown behavior");
        }
        p->invert = hf_opt_bool(o, "invert", false);
        return p->type == HPT_SPLIT ? hf_load_pattern(l, o, path, &p->pat) : CANDLE_OK;
    }
    return hf_unsup(l, path, type);
}

/* ---- decoders ---- */

candle_status hf_load_dec(const hf_ld *l, const json_value *o, const char *path, hf_dec *d) {
    const char *type;
    candle_status st = hf_get_type(l, o, path, &type);
    if (st != CANDLE_OK) return st;
    if (!strcmp(type, "Sequence")) {
        const json_value *arr;
        d->type = HD_SEQUENCE;
        if ((st = hf_get_array(l, o, "decoders", path, &arr)) != CANDLE_OK) return st;
        if (!(d->seq = calloc(arr->n + 1, sizeof *d->seq))) return hf_oom();
        for (size_t i = 0; i < arr->n && st == CANDLE_OK; i++) {
            char sub[512];
            PATH(sub, "%s.decoders[%zu]", path, i);
            d->n_seq++;
            st = hf_load_dec(l, json_at(arr, i), sub, &d->seq[i]);
        }
        return st;
    }
    if (!strcmp(type, "ByteLevel")) return d->type = HD_BYTELEVEL, CANDLE_OK;
    if (!strcmp(type, "ByteFallback")) return d->type = HD_BYTEFALLBACK, CANDLE_OK;
    if (!strcmp(type, "Fuse")) return d->type = HD_FUSE, CANDLE_OK;
    if (!strcmp(type, "WordPiece")) {
        d->type = HD_WORDPIECE;
        d->cleanup = hf_opt_bool(o, "cleanup", true);
        if (!json_get(o, "prefix")) return (d->prefix = hf_dup_n("##", 2)) ? (d->prefix_len = 2, CANDLE_OK) : hf_oom();
        return hf_dup_member(l, o, "prefix", path, true, &d->prefix, &d->prefix_len);
    }
    if (!strcmp(type, "BPEDecoder")) {
        d->type = HD_BPE;
        if (!json_get(o, "suffix")) return (d->prefix = hf_dup_n("</w>", 4)) ? (d->prefix_len = 4, CANDLE_OK) : hf_oom();
        return hf_dup_member(l, o, "suffix", path, true, &d->prefix, &d->prefix_len);
    }
    if (!strcmp(type, "Metaspace")) {
        uint32_t cp;
        d->type = HD_METASPACE;
        d->prepend = hf_prepend_scheme(o);
        return hf_get_replacement(l, o, path, d->repl, &d->repl_len, &cp);
    }
    if (!strcmp(type, "Strip")) {
        const char *c;
        size_t n;
        d->type = HD_STRIP;
        if ((st = hf_get_str(l, o, "content", path, true, &c, &n)) != CANDLE_OK) return st;
        if (!n || tok_utf8_decode(c, n, &d->strip_cp) != n) return hf_ferr(l, path, "content must be one character");
        json_as_i64(json_get(o, "start"), &d->start);
        json_as_i64(json_get(o, "stop"), &d->stop);
        return CANDLE_OK;
    }
    if (!strcmp(type, "Replace")) {
        d->type = HD_REPLACE;
        st = hf_load_pattern(l, o, path, &d->pat);
        return st != CANDLE_OK ? st : hf_dup_member(l, o, "content", path, true, &d->content, &d->content_len);
    }
    return hf_unsup(l, path, type);
}

/* ---- post-processors ---- */

static candle_status load_tmpl(const hf_ld *l, const json_value *o, const char *key, const char *path,
                               const json_value *specials, hf_tmpl_item **out, int *n_out) {
    const json_value *arr;
    candle_status st = hf_get_array(l, o, key, path, &arr);
    if (st != CANDLE_OK) return st;
    if (!(*out = calloc(arr->n + 1, sizeof **out))) return hf_oom();
    for (size_t i = 0; i < arr->n; i++) {
        const json_value *e = json_at(arr, i), *sp = json_get(e, "SpecialToken"), *sq = json_get(e, "Sequence");
        hf_tmpl_item *it = &(*out)[(*n_out)++];
        char sub[512];
        PATH(sub, "%s.%s[%zu]", path, key, i);
        int64_t ty = 0;
        json_as_i64(json_get(sp ? sp : sq, "type_id"), &ty);
        it->type_id = (int32_t)ty;
        if (sq) {
            it->seq_b = json_str_eq(json_get(sq, "id"), "B");
            continue;
        }
        const char *name;
        size_t nn;
        if (!sp || !json_as_str(json_get(sp, "id"), &name, &nn)) return hf_ferr(l, sub, "expected SpecialToken or Sequence");
        it->special = true;
        const json_value *ids = json_get(json_get(specials, name), "ids");
        if (!ids || ids->type != JSON_ARRAY) return hf_ferr(l, sub, "special token missing from special_tokens");
        if (!(it->ids = calloc(ids->n + 1, sizeof *it->ids))) return hf_oom();
        for (size_t k = 0; k < ids->n; k++) {
            int64_t v;
            if (!json_as_i64(json_at(ids, k), &v) || v < 0 || v > INT32_MAX) return hf_ferr(l, sub, "bad special token id");
            it->ids[it->n_ids++] = (int32_t)v;
        }
    }
    return CANDLE_OK;
}

/* BertProcessing/RobertaProcessing: single[0] = cls, single[1] = sep. */
static candle_status load_cls_sep(const hf_ld *l, const json_value *o, const char *path, hf_post *p) {
    if (!(p->single = calloc(2, sizeof *p->single))) return hf_oom();
    p->n_single = 2;
    static const char *const keys[2] = {"cls", "sep"};
    for (int i = 0; i < 2; i++) {
        int64_t id;
        char sub[512];
        PATH(sub, "%s.%s", path, keys[i]);
        if (!json_as_i64(json_at(json_get(o, keys[i]), 1), &id) || id < 0 || id > INT32_MAX)
            return hf_ferr(l, sub, "expected [token, id]");
        if (!(p->single[i].ids = malloc(sizeof(int32_t)))) return hf_oom();
        p->single[i].ids[0] = (int32_t)id;
        p->single[i].n_ids = 1;
        p->single[i].special = true;
    }
    return CANDLE_OK;
}

candle_status hf_load_post(const hf_ld *l, const json_value *o, const char *path, hf_post *p) {
    const char *type;
    candle_status st = hf_get_type(l, o, path, &type);
    if (st != CANDLE_OK) return st;
    if (!strcmp(type, "Sequence")) {
        const json_value *arr;
        p->type = HPP_SEQUENCE;
        if ((st = hf_get_array(l, o, "processors", path, &arr)) != CANDLE_OK) return st;
        if (!(p->seq = calloc(arr->n + 1, sizeof *p->seq))) return hf_oom();
        for (size_t i = 0; i < arr->n && st == CANDLE_OK; i++) {
            char sub[512];
            PATH(sub, "%s.processors[%zu]", path, i);
            p->n_seq++;
            st = hf_load_post(l, json_at(arr, i), sub, &p->seq[i]);
        }
        return st;
    }
    if (!strcmp(type, "ByteLevel")) return p->type = HPP_BYTELEVEL, CANDLE_OK;
    if (!strcmp(type, "TemplateProcessing")) {
        const json_value *sp = json_get(o, "special_tokens");
        p->type = HPP_TEMPLATE;
        st = load_tmpl(l, o, "single", path, sp, &p->single, &p->n_single);
        return st != CANDLE_OK ? st : load_tmpl(l, o, "pair", path, sp, &p->pair, &p->n_pair);
    }
    if (!strcmp(type, "BertProcessing") || !strcmp(type, "RobertaProcessing")) {
        p->type = type[0] == 'B' ? HPP_BERT : HPP_ROBERTA;
        return load_cls_sep(l, o, path, p);
    }
    return hf_unsup(l, path, type);
}

static void pattern_free(hf_pattern *p) {
    free(p->str);
    tok_regex_free(p->re);
}

void hf_norm_free(hf_norm *n) {
    for (int i = 0; i < n->n_seq; i++) hf_norm_free(&n->seq[i]);
    free(n->seq);
    pattern_free(&n->pat);
    free(n->content);
    free(n->blob);
    free((void *)n->trie);
}

void hf_pre_free(hf_pre *p) {
    for (int i = 0; i < p->n_seq; i++) hf_pre_free(&p->seq[i]);
    free(p->seq);
    tok_regex_free(p->gpt2);
    pattern_free(&p->pat);
}

void hf_post_free(hf_post *p) {
    for (int i = 0; i < p->n_seq; i++) hf_post_free(&p->seq[i]);
    free(p->seq);
    for (int i = 0; i < p->n_single; i++) free(p->single[i].ids);
    for (int i = 0; i < p->n_pair; i++) free(p->pair[i].ids);
    free(p->single);
    free(p->pair);
}

void hf_dec_free(hf_dec *d) {
    for (int i = 0; i < d->n_seq; i++) hf_dec_free(&d->seq[i]);
    free(d->seq);
    free(d->prefix);
    pattern_free(&d->pat);
    free(d->content);
}
