/* Reading tokenizer.json (and tokenizer_config.json) into a candle_tokenizer
 * of kind TOK_HF: the model (vocabulary, merges, scores), the added tokens,
 * the special tokens from the config, and the components (hf_components.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core-impl.h"
#include "hf-load-impl.h"
#include "unicode-impl.h"

/* ---- model ---- */

/* Counts the model vocabulary and the largest id. */
static candle_status vocab_extent(const hf_ld *l, const json_value *vocab, bool unigram, int64_t *max_id) {
    *max_id = -1;
    if (!vocab || vocab->type != (unigram ? JSON_ARRAY : JSON_OBJECT))
        return hf_ferr(l, "model.vocab", vocab ? (unigram ? "expected an array" : "expected an object") : "missing");
    for (size_t i = 0; i < vocab->n; i++) {
        int64_t id = (int64_t)i;
        if (!unigram && (!json_as_i64(json_obj_val(vocab, i), &id) || id < 0 || id >= INT32_MAX)) {
            char sub[512];
            const char *k;
            size_t kn;
            json_as_str(json_obj_key(vocab, i), &k, &kn);
            PATH(sub, "model.vocab[\"%.100s\"]", k);
            return hf_ferr(l, sub, "expected an id");
        }
        if (id > *max_id) *max_id = id;
    }
    return CANDLE_OK;
}

/* A JSON number as serde_json (without float_roundtrip) reads it, which
 * is how the reference gets its Unigram scores: the decimal digits as a
 * u64 (digits past its range dropped), converted to double, then one
 * multiplication or division by a power of ten, so not always the nearest
 * double. The lattice's ties depend on the last bit. */
static double serde_f64(const char *s, size_t n) {
    static const double pow10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                     1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    size_t i = 0;
    bool neg = i < n && s[i] == '-';
    if (neg) i++;
    uint64_t sig = 0;
    int64_t exp10 = 0;
    bool frac = false;
    for (; i < n; i++) {
        char c = s[i];
        if (c == '.' && !frac) {
            frac = true;
            continue;
        }
        if (c < '0' || c > '9') break;
        if (sig > UINT64_MAX / 10 || (sig == UINT64_MAX / 10 && (uint64_t)(c - '0') > UINT64_MAX % 10)) {
            if (!frac) exp10++; /* integer digits past u64 scale the value; fraction digits are dropped */
            continue;
        }
        sig = sig * 10 + (uint64_t)(c - '0');
        if (frac) exp10--;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        bool eneg = i < n && s[i] == '-';
        if (i < n && (s[i] == '-' || s[i] == '+')) i++;
        int64_t e = 0;
        for (; i < n && s[i] >= '0' && s[i] <= '9' && e < 100000; i++) e = e * 10 + (s[i] - '0');
        exp10 += eneg ? -e : e;
    }
    double f = (double)sig;
    /* Powers past 1e22 are not exact; the reference's table holds the
     * correctly rounded literals, which strtod gives. */
    for (;;) {
        int64_t a = exp10 < 0 ? -exp10 : exp10;
        if (a <= 308) {
            double p;
            if (a <= 22) p = pow10[a];
            else {
                char lit[8];
                snprintf(lit, sizeof lit, "1e%d", (int)a);
                p = strtod(lit, NULL);
            }
            f = exp10 >= 0 ? f * p : f / p;
            break;
        }
        if (f == 0.0 || exp10 > 0) break;
        f /= 1e308;
        exp10 += 308;
    }
    return neg ? -f : f;
}

static candle_status load_unigram(const hf_ld *l, candle_tokenizer *t, const json_value *m) {
    hf_model *md = &t->hf->model;
    const json_value *vocab = json_get(m, "vocab");
    if (!(md->scores = calloc((size_t)t->n_vocab + 1, sizeof *md->scores))) return hf_oom();
    md->min_score = 1e300;
    for (size_t i = 0; i < vocab->n; i++) {
        const json_value *e = json_at(vocab, i);
        double sc;
        if (!json_as_f64(json_at(e, 1), &sc)) {
            char sub[64];
            PATH(sub, "model.vocab[%zu]", i);
            return hf_ferr(l, sub, "expected [piece, score]");
        }
        const json_value *num = json_at(e, 1);
        if (num->offset < l->len) sc = serde_f64(l->text + num->offset, l->len - num->offset);
        md->scores[i] = sc;
        if (sc < md->min_score) md->min_score = sc;
        if (t->tokens[i].len > md->max_piece_len) md->max_piece_len = t->tokens[i].len;
    }
    int64_t unk = -1;
    json_as_i64(json_get(m, "unk_id"), &unk);
    md->unk = unk >= 0 && unk < t->n_vocab ? (int32_t)unk : -1;
    md->fuse_unk = true;
    md->byte_fallback = hf_opt_bool(m, "byte_fallback", false);
    return CANDLE_OK;
}

static candle_status load_merges(const hf_ld *l, candle_tokenizer *t, const json_value *m) {
    hf_model *md = &t->hf->model;
    const json_value *arr;
    candle_status st = hf_get_array(l, m, "merges", "model", &arr);
    if (st != CANDLE_OK) return st;
    hf_merge_map *mm = &md->merges;
    mm->cap = 16;
    while (mm->cap < arr->n * 2) mm->cap *= 2;
    mm->keys = calloc(mm->cap, sizeof *mm->keys);
    mm->rank = calloc(mm->cap, sizeof *mm->rank);
    mm->id = calloc(mm->cap, sizeof *mm->id);
    hf_str both = {0};
    if (!mm->keys || !mm->rank || !mm->id) return hf_oom();
    for (size_t i = 0; i < arr->n && st == CANDLE_OK; i++) {
        const json_value *e = json_at(arr, i);
        const char *a, *b, *s;
        size_t an, bn, sn;
        char sub[64];
        PATH(sub, "model.merges[%zu]", i);
        if (json_as_str(e, &s, &sn)) {
            const char *sp = memchr(s, ' ', sn);
            if (!sp || memchr(sp + 1, ' ', sn - (size_t)(sp + 1 - s))) {
                st = hf_ferr(l, sub, "expected \"left right\"");
                break;
            }
            a = s, an = (size_t)(sp - s), b = sp + 1, bn = sn - an - 1;
        } else if (!json_as_str(json_at(e, 0), &a, &an) || !json_as_str(json_at(e, 1), &b, &bn) || e->n != 2) {
            st = hf_ferr(l, sub, "expected \"left right\" or [left, right]");
            break;
        }
        int32_t ia = tok_map_get(&t->vocab, a, an), ib = tok_map_get(&t->vocab, b, bn);
        size_t skip = md->prefix_len <= bn ? md->prefix_len : bn;
        both.n = 0;
        if (!hf_str_add(&both, a, an) || !hf_str_add(&both, b + skip, bn - skip)) st = hf_oom();
        int32_t ic = st == CANDLE_OK ? tok_map_get(&t->vocab, both.p, both.n) : -1;
        if (st == CANDLE_OK && (ia < 0 || ib < 0 || ic < 0)) st = hf_ferr(l, sub, "merge token out of vocabulary");
        if (st == CANDLE_OK) hf_merge_put(mm, ia, ib, (int32_t)i, ic);
    }
    hf_str_free(&both);
    return st;
}

static candle_status model_token(const hf_ld *l, candle_tokenizer *t, const json_value *m, const char *key,
                                 int32_t *id) {
    const char *s;
    size_t n;
    candle_status st = hf_get_str(l, m, key, "model", false, &s, &n);
    *id = s ? tok_map_get(&t->vocab, s, n) : -1;
    return st;
}

static candle_status load_model_params(const hf_ld *l, candle_tokenizer *t, const json_value *m) {
    hf_model *md = &t->hf->model;
    candle_status st = CANDLE_OK;
    if (md->type == HM_UNIGRAM) return load_unigram(l, t, m);
    if ((st = model_token(l, t, m, "unk_token", &md->unk)) != CANDLE_OK) return st;
    if ((st = hf_dup_member(l, m, "continuing_subword_prefix", "model", false, &md->prefix, &md->prefix_len)) != CANDLE_OK)
        return st;
    if (md->type == HM_WORDPIECE) {
        if (!json_get(m, "continuing_subword_prefix")) {
            free(md->prefix);
            if (!(md->prefix = hf_dup_n("##", 2))) return hf_oom();
            md->prefix_len = 2;
        }
        md->max_chars = 100;
        json_as_i64(json_get(m, "max_input_chars_per_word"), &md->max_chars);
        return CANDLE_OK;
    }
    const json_value *dropout = json_get(m, "dropout");
    double dp = 0;
    if (dropout && dropout->type != JSON_NULL && (!json_as_f64(dropout, &dp) || dp != 0.0))
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "%s: model.dropout: BPE dropout is not supported",
                                l->file);
    if ((st = hf_dup_member(l, m, "end_of_word_suffix", "model", false, &md->suffix, &md->suffix_len)) != CANDLE_OK)
        return st;
    md->fuse_unk = hf_opt_bool(m, "fuse_unk", false);
    md->byte_fallback = hf_opt_bool(m, "byte_fallback", false);
    md->ignore_merges = hf_opt_bool(m, "ignore_merges", false);
    return load_merges(l, t, m);
}

static candle_status model_type(const hf_ld *l, const json_value *m, int *type) {
    const char *ty = NULL;
    size_t n;
    if (!m || m->type != JSON_OBJECT) return hf_ferr(l, "model", m ? "expected an object" : "missing");
    candle_status st = hf_get_str(l, m, "type", "model", false, &ty, &n);
    if (st != CANDLE_OK) return st;
    if (!ty) { /* old files: guess from the fields, as the library does */
        *type = json_get(m, "merges") ? HM_BPE : json_get(m, "unk_id") ? HM_UNIGRAM : HM_WORDPIECE;
        return CANDLE_OK;
    }
    if (!strcmp(ty, "BPE")) *type = HM_BPE;
    else if (!strcmp(ty, "WordPiece")) *type = HM_WORDPIECE;
    else if (!strcmp(ty, "Unigram")) *type = HM_UNIGRAM;
    else return hf_unsup(l, "model", ty);
    return CANDLE_OK;
}

/* ---- vocabulary and added tokens ---- */

static candle_status build_vocab(const hf_ld *l, candle_tokenizer *t, const json_value *root) {
    const json_value *m = json_get(root, "model"), *vocab = json_get(m, "vocab");
    const json_value *added = json_get(root, "added_tokens");
    bool uni = t->hf->model.type == HM_UNIGRAM;
    int64_t max_id;
    candle_status st = vocab_extent(l, vocab, uni, &max_id);
    if (st != CANDLE_OK) return st;
    if (added && added->type != JSON_ARRAY) return hf_ferr(l, "added_tokens", "expected an array");
    for (size_t i = 0; added && i < added->n; i++) {
        int64_t id;
        char sub[64];
        PATH(sub, "added_tokens[%zu].id", i);
        if (!json_as_i64(json_get(json_at(added, i), "id"), &id) || id < 0 || id >= INT32_MAX)
            return hf_ferr(l, sub, "expected an id");
        if (id > max_id) max_id = id;
    }
    if (max_id < 0) return hf_ferr(l, "model.vocab", "empty vocabulary");
    if (max_id >= (1 << 26)) return hf_ferr(l, "model.vocab", "ids beyond 2^26");
    t->n_vocab = (int32_t)(max_id + 1);
    size_t pool = 0;
    for (size_t i = 0; i < vocab->n; i++) {
        const char *s;
        size_t n;
        if (!json_as_str(uni ? json_at(json_at(vocab, i), 0) : json_obj_key(vocab, i), &s, &n)) {
            char sub[64];
            PATH(sub, "model.vocab[%zu]", i);
            return hf_ferr(l, sub, "expected a string");
        }
        pool += n + 1;
    }
    t->tokens = calloc((size_t)t->n_vocab, sizeof *t->tokens);
    t->pool = malloc(pool + 1);
    if (!t->tokens || !t->pool) return hf_oom();
    if ((st = tok_map_init(&t->vocab, (int64_t)vocab->n)) != CANDLE_OK) return st;
    for (int32_t i = 0; i < t->n_vocab; i++) t->tokens[i] = (tok_token){"", 0, TT_UNUSED, 0, 0};
    char *p = t->pool;
    for (size_t i = 0; i < vocab->n; i++) {
        const char *s;
        size_t n;
        int64_t id = (int64_t)i;
        json_as_str(uni ? json_at(json_at(vocab, i), 0) : json_obj_key(vocab, i), &s, &n);
        if (!uni) json_as_i64(json_obj_val(vocab, i), &id);
        memcpy(p, s, n);
        p[n] = 0;
        t->tokens[id] = (tok_token){p, (uint32_t)n, TT_NORMAL, 0, 0};
        tok_map_put(&t->vocab, p, n, (int32_t)id);
        p += n + 1;
    }
    return CANDLE_OK;
}

static int cmp_added(const void *a, const void *b) {
    const hf_added *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static candle_status load_added(const hf_ld *l, candle_tokenizer *t, const json_value *root) {
    const json_value *added = json_get(root, "added_tokens");
    hf_tok *h = t->hf;
    if (!added) return CANDLE_OK;
    if (!(h->added = calloc(added->n + 1, sizeof *h->added))) return hf_oom();
    for (size_t i = 0; i < added->n; i++) {
        const json_value *e = json_at(added, i);
        hf_added *a = &h->added[h->n_added++];
        char sub[64];
        int64_t id;
        const char *s;
        size_t n;
        PATH(sub, "added_tokens[%zu]", i);
        json_as_i64(json_get(e, "id"), &id);
        candle_status st = hf_get_str(l, e, "content", sub, true, &s, &n);
        if (st != CANDLE_OK) return st;
        a->id = (int32_t)id;
        a->special = hf_opt_bool(e, "special", false);
        a->single_word = hf_opt_bool(e, "single_word", false);
        a->lstrip = hf_opt_bool(e, "lstrip", false);
        a->rstrip = hf_opt_bool(e, "rstrip", false);
        a->normalized = hf_opt_bool(e, "normalized", !a->special);
        /* own holds the text matched (the normalized form for a
         * normalized token), a NUL, then the content that decoding gives. */
        hf_str keep = {0};
        bool ok = a->normalized ? hf_normalize(h->norm, s, n, &keep) : hf_str_add(&keep, s, n);
        size_t kn = keep.n;
        if (!ok || !hf_str_add(&keep, "", 1) || !hf_str_add(&keep, s, n)) {
            hf_str_free(&keep);
            return hf_oom();
        }
        a->own = keep.p;
        a->text = keep.p;
        a->len = kn;
        t->tokens[id] = (tok_token){keep.p + kn + 1, (uint32_t)n, a->special ? TT_CONTROL : TT_USER, 0, 0};
    }
    /* Decoding skips special tokens by their text, so a vocabulary entry
     * spelled like a special added token (under another id) is one too. */
    tok_map sp = {0};
    candle_status st = tok_map_init(&sp, h->n_added);
    if (st != CANDLE_OK) return st;
    for (int i = 0; i < h->n_added; i++) {
        const tok_token *at = &t->tokens[h->added[i].id];
        if (h->added[i].special) tok_map_put(&sp, at->text, at->len, 1);
    }
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (t->tokens[id].type == TT_NORMAL && tok_map_get(&sp, t->tokens[id].text, t->tokens[id].len) == 1)
            t->tokens[id].type = TT_CONTROL;
    tok_map_free(&sp);
    qsort(h->added, (size_t)h->n_added, sizeof *h->added, cmp_added);
    /* Buckets by first byte, so matching looks at few tokens per byte. */
    if (!(h->by_byte = malloc((size_t)(h->n_added + 1) * sizeof *h->by_byte))) return hf_oom();
    int count[257] = {0};
    for (int i = 0; i < h->n_added; i++)
        if (h->added[i].len) count[(unsigned char)h->added[i].text[0] + 1]++;
    for (int b = 0; b < 256; b++) count[b + 1] += count[b];
    memcpy(h->bucket, count, sizeof count);
    for (int i = 0; i < h->n_added; i++)
        if (h->added[i].len) h->by_byte[count[(unsigned char)h->added[i].text[0]]++] = i;
    return CANDLE_OK;
}

static int32_t token_id(const candle_tokenizer *t, const char *s, size_t n) {
    for (int i = 0; t->hf && i < t->hf->n_added; i++) {
        const tok_token *tk = &t->tokens[t->hf->added[i].id];
        if (tk->len == n && !memcmp(tk->text, s, n)) return t->hf->added[i].id;
    }
    return tok_map_get(&t->vocab, s, n);
}

/* ---- tokenizer_config.json ---- */

static int32_t config_token(const candle_tokenizer *t, const json_value *cfg, const char *key) {
    const json_value *v = json_get(cfg, key);
    const char *s;
    size_t n;
    if (v && v->type == JSON_OBJECT) v = json_get(v, "content");
    if (!json_as_str(v, &s, &n)) return -2;
    return token_id(t, s, n);
}

static int32_t first_of(const candle_tokenizer *t, const char *const *names) {
    for (; *names; names++) {
        int32_t id = token_id(t, *names, strlen(*names));
        if (id >= 0) return id;
    }
    return -1;
}

static void set_specials(candle_tokenizer *t, const json_value *cfg) {
    static const char *const bos[] = {"<s>", "<bos>", "<|begin_of_text|>", "<|startoftext|>", "[CLS]", NULL};
    static const char *const eos[] = {"</s>", "<eos>", "<|endoftext|>", "<|end_of_text|>", "[SEP]", NULL};
    static const char *const eog[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                                      "<|endoftext|>", "<|end_of_text|>", "<|eom_id|>", NULL};
    hf_tok *h = t->hf;
    t->bos = config_token(t, cfg, "bos_token");
    t->eos = config_token(t, cfg, "eos_token");
    if (t->bos == -2) t->bos = cfg ? -1 : first_of(t, bos);
    if (t->eos == -2) t->eos = cfg ? -1 : first_of(t, eos);
    t->unk = h->model.unk;
    t->pad = config_token(t, cfg, "pad_token");
    t->sep = config_token(t, cfg, "sep_token");
    if (t->pad < 0) t->pad = -1;
    if (t->sep < 0) t->sep = -1;
    h->add_bos = hf_opt_bool(cfg, "add_bos_token", false);
    h->add_eos = hf_opt_bool(cfg, "add_eos_token", false);
    t->add_bos = h->add_bos;
    t->add_eos = h->add_eos;
    h->model_max_length = 0;
    double mx;
    if (json_as_f64(json_get(cfg, "model_max_length"), &mx) && mx > 0 && mx < 9e18) h->model_max_length = (int64_t)mx;
    if (t->eos >= 0) t->eog[t->n_eog++] = t->eos;
    for (int i = 0; eog[i] && t->n_eog < 8; i++) {
        int32_t id = token_id(t, eog[i], strlen(eog[i]));
        bool dup = id < 0 || t->tokens[id].type != TT_CONTROL;
        for (int k = 0; k < t->n_eog && !dup; k++) dup = t->eog[k] == id;
        if (!dup) t->eog[t->n_eog++] = id;
    }
}

/* ---- top level ---- */

static candle_status load_components(const hf_ld *l, candle_tokenizer *t, const json_value *root) {
    hf_tok *h = t->hf;
    const json_value *v;
    candle_status st = model_type(l, json_get(root, "model"), &h->model.type);
    h->model.unk = -1;
    if (st == CANDLE_OK && (v = json_get(root, "normalizer")) && v->type != JSON_NULL) {
        if (!(h->norm = calloc(1, sizeof *h->norm))) return hf_oom();
        st = hf_load_norm(l, v, "normalizer", h->norm);
    }
    if (st == CANDLE_OK && (v = json_get(root, "pre_tokenizer")) && v->type != JSON_NULL) {
        if (!(h->pre = calloc(1, sizeof *h->pre))) return hf_oom();
        st = hf_load_pre(l, v, "pre_tokenizer", h->pre);
    }
    if (st == CANDLE_OK && (v = json_get(root, "post_processor")) && v->type != JSON_NULL) {
        if (!(h->post = calloc(1, sizeof *h->post))) return hf_oom();
        st = hf_load_post(l, v, "post_processor", h->post);
    }
    if (st == CANDLE_OK && (v = json_get(root, "decoder")) && v->type != JSON_NULL) {
        if (!(h->dec = calloc(1, sizeof *h->dec))) return hf_oom();
        st = hf_load_dec(l, v, "decoder", h->dec);
    }
    if (st == CANDLE_OK) st = build_vocab(l, t, root);
    if (st == CANDLE_OK) st = load_model_params(l, t, json_get(root, "model"));
    if (st == CANDLE_OK) st = load_added(l, t, root);
    return st;
}

static candle_status check_ids(const hf_ld *l, const candle_tokenizer *t, const hf_post *p) {
    if (!p) return CANDLE_OK;
    for (int i = 0; i < p->n_seq; i++)
        if (check_ids(l, t, &p->seq[i]) != CANDLE_OK) return CANDLE_ERR_FORMAT;
    for (int k = 0; k < 2; k++) {
        const hf_tmpl_item *it = k ? p->pair : p->single;
        int n = k ? p->n_pair : p->n_single;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < it[i].n_ids; j++)
                if (it[i].ids[j] >= t->n_vocab) return hf_ferr(l, "post_processor", "special token id out of range");
    }
    return CANDLE_OK;
}

candle_status candle_tokenizer_from_hf_memory(candle_tokenizer **out, const char *json, size_t len,
                                              const char *config, size_t config_len, const char *name) {
    if (!out || (!json && len))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tokenizer_from_hf_memory: NULL argument");
    *out = NULL;
    hf_ld l = {name ? name : "tokenizer.json", json, len};
    json_doc *doc = NULL, *cdoc = NULL;
    candle_status st = json_parse(&doc, json ? json : "", len, l.file, NULL);
    if (st == CANDLE_OK && config) st = json_parse(&cdoc, config, config_len, "tokenizer_config.json", NULL);
    const json_value *root = doc ? json_root(doc) : NULL;
    if (st == CANDLE_OK && root->type != JSON_OBJECT) st = hf_ferr(&l, "(root)", "expected an object");
    candle_tokenizer *t = NULL;
    if (st == CANDLE_OK && (!(t = calloc(1, sizeof *t)) || !(t->hf = calloc(1, sizeof *t->hf)))) st = hf_oom();
    if (st == CANDLE_OK) {
        t->kind = TOK_HF;
        st = load_components(&l, t, root);
    }
    if (st == CANDLE_OK) st = check_ids(&l, t, t->hf->post);
    if (st == CANDLE_OK) {
        for (int i = 0; i < 256; i++) t->byte_ids[i] = -1;
        set_specials(t, cdoc ? json_root(cdoc) : NULL);
        *out = t;
    } else {
        candle_tokenizer_free(t);
    }
    json_free(doc);
    json_free(cdoc);
    return st;
}

static candle_status read_file(const char *path, char **buf, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return cdl_set_error(NULL, CANDLE_ERR_IO, "%s: cannot open", path);
    hf_str s = {0};
    char chunk[65536];
    size_t n;
    bool ok = true;
    while (ok && (n = fread(chunk, 1, sizeof chunk, f)) > 0) ok = hf_str_add(&s, chunk, n);
    bool err = ferror(f);
    fclose(f);
    if (!ok) {
        hf_str_free(&s);
        return hf_oom();
    }
    if (err) {
        hf_str_free(&s);
        return cdl_set_error(NULL, CANDLE_ERR_IO, "%s: read error", path);
    }
    *buf = s.p;
    *len = s.n;
    return CANDLE_OK;
}

candle_status candle_tokenizer_from_hf_file(candle_tokenizer **out, const char *path, const char *config_path) {
    if (!out || !path) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tokenizer_from_hf_file: NULL argument");
    *out = NULL;
    char *json = NULL, *cfg = NULL;
    size_t len = 0, clen = 0;
    candle_status st = read_file(path, &json, &len);
    if (st == CANDLE_OK && config_path) st = read_file(config_path, &cfg, &clen);
    if (st == CANDLE_OK) st = candle_tokenizer_from_hf_memory(out, json, len, cfg ? cfg : NULL, clen, path);
    free(json);
    free(cfg);
    return st;
}

void hf_tok_free(hf_tok *h) {
    if (!h) return;
    if (h->norm) hf_norm_free(h->norm);
    if (h->pre) hf_pre_free(h->pre);
    if (h->post) hf_post_free(h->post);
    if (h->dec) hf_dec_free(h->dec);
    free(h->norm);
    free(h->pre);
    free(h->post);
    free(h->dec);
    for (int i = 0; i < h->n_added; i++) free(h->added[i].own);
    free(h->added);
    free(h->by_byte);
    free(h->model.prefix);
    free(h->model.suffix);
    free(h->model.merges.keys);
    free(h->model.merges.rank);
    free(h->model.merges.id);
    free(h->model.scores);
    free(h);
}
