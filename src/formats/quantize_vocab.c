/* A Hugging Face tokenizer.json as the tokenizer.ggml.* keys llama.cpp
 * reads, for the file `candle quantize` writes from a directory, in the
 * form llama.cpp's own converter gives them:
 *
 * - WordPiece behind BERT's normalizer (and BERT's limit of 100 characters
 *   a word, or more): model "bert"; a word-initial piece
 *   gets a leading U+2581 and a "##" continuation loses its prefix, added
 *   tokens stay as they are; [CLS]/[SEP] become bos/eos, both added.
 * - Byte-level BPE without a normalizer: model "gpt2" with the merges, and
 *   the pre-tokenizer named when it is one llama.cpp knows by that name
 *   (GPT-2's, Llama 3's, Qwen 2's, SmolLM's single digits).
 *
 * - Byte-fallback BPE whose normalizer marks spaces with U+2581 (Llama 2,
 *   Mistral, Gemma):
 *   model "llama", SentencePiece's form, where a merge's priority is the
 *   score of the token it makes: each token scores minus the rank of the
 *   first merge that makes it, so the highest score is the first merge.
 *
 * Anything else (Unigram, other normalizers or splits)
 * would tokenize differently in llama.cpp, so it gets no keys and the
 * reason is returned; the file still carries tokenizer.huggingface.json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core-impl.h"
#include "core/json-impl.h"
#include "quantize-impl.h"

/* llama.cpp's token types */
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

#define RE_LLAMA3                                                                                   \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                                    \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"     \
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

typedef struct vocab {
    int64_t n;
    const char **text; /* [n] token strings (into the document or pool) */
    int32_t *type;     /* [n] */
    bool *added;       /* [n] an added token: kept verbatim */
    char **owned;      /* [n] strings made here, freed with the vocab */
} vocab;

static void vocab_free(vocab *v) {
    for (int64_t i = 0; v->owned && i < v->n; i++) free(v->owned[i]);
    free(v->owned);
    free(v->text);
    free(v->type);
    free(v->added);
}

static int64_t vocab_find(const vocab *v, const char *s) {
    for (int64_t i = 0; s && i < v->n; i++)
        if (v->text[i] && !strcmp(v->text[i], s)) return i;
    return -1;
}

static bool set_owned(vocab *v, int64_t i, char *s) {
    if (!s) return false;
    free(v->owned[i]);
    v->owned[i] = s;
    v->text[i] = s;
    return true;
}

/* model.vocab and added_tokens by id; ids no token names become
 * "[PAD<id>]" of type unused, as llama.cpp's converter fills them. Ids from
 * n_max on (n_max > 0: the embedding's rows) are left out, as they are by
 * llama.cpp (Gemma 3's <image_soft_token>). */
static candle_status read_vocab(const json_value *root, int64_t n_max, vocab *v, char *why, size_t nw) {
    const json_value *map = json_get(json_get(root, "model"), "vocab"), *added = json_get(root, "added_tokens");
    if (!map || map->type != JSON_OBJECT || !map->n) return snprintf(why, nw, "model.vocab is not an object of ids"), CANDLE_OK;
    int64_t n = 0, id;
    for (size_t i = 0; i < map->n; i++) {
        if (!json_as_i64(json_obj_val(map, i), &id) || id < 0 || id > INT32_MAX)
            return snprintf(why, nw, "model.vocab[%zu] is not an id", i), CANDLE_OK;
        if (id + 1 > n) n = id + 1;
    }
    for (size_t i = 0; added && i < added->n; i++)
        if (json_as_i64(json_get(json_at(added, i), "id"), &id) && id >= 0 && id < INT32_MAX && id + 1 > n) n = id + 1;
    if (n_max > 0 && n > n_max) n = n_max;
    v->n = n;
    v->text = calloc((size_t)n, sizeof *v->text);
    v->type = calloc((size_t)n, sizeof *v->type);
    v->added = calloc((size_t)n, sizeof *v->added);
    v->owned = calloc((size_t)n, sizeof *v->owned);
    if (!v->text || !v->type || !v->added || !v->owned)
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "quantize: out of memory for a vocabulary of %lld", (long long)n);
    for (size_t i = 0; i < map->n; i++) {
        json_as_i64(json_obj_val(map, i), &id);
        if (id >= n) continue;
        v->text[id] = json_obj_key(map, i)->u.str;
        v->type[id] = TT_NORMAL;
    }
    for (size_t i = 0; added && i < added->n; i++) {
        const json_value *a = json_at(added, i);
        const char *s;
        bool special = false;
        json_as_bool(json_get(a, "special"), &special);
        if (!json_as_i64(json_get(a, "id"), &id) || id < 0 || !json_as_str(json_get(a, "content"), &s, NULL))
            return snprintf(why, nw, "added_tokens[%zu] has no id and content", i), CANDLE_OK;
        if (id >= n) continue;
        v->text[id] = s;
        v->type[id] = special ? TT_CONTROL : TT_USER;
        v->added[id] = true;
    }
    for (int64_t i = 0; i < n; i++)
        if (!v->text[i]) {
            char buf[32];
            snprintf(buf, sizeof buf, "[PAD%lld]", (long long)i);
            if (!set_owned(v, i, strdup(buf))) return cdl_set_error(NULL, CANDLE_ERR_OOM, "quantize: out of memory");
            v->type[i] = TT_UNUSED;
        }
    return CANDLE_OK;
}

/* post_processor's first and last special tokens around the sequence:
 * BertProcessing/RobertaProcessing's cls and sep, or a TemplateProcessing
 * single template's ends (-1: none; both -2: a template adding several
 * tokens at an end, which one bos and one eos cannot say). */
static void added_ends(const json_value *post, const vocab *v, int64_t *bos, int64_t *eos) {
    *bos = *eos = -1;
    if (json_str_eq(json_get(post, "type"), "Sequence")) {
        const json_value *ps = json_get(post, "processors");
        for (size_t i = 0; ps && i < ps->n && *bos == -1 && *eos == -1; i++) added_ends(json_at(ps, i), v, bos, eos);
        return;
    }
    if (json_str_eq(json_get(post, "type"), "BertProcessing") || json_str_eq(json_get(post, "type"), "RobertaProcessing")) {
        json_as_i64(json_at(json_get(post, "cls"), 1), bos);
        json_as_i64(json_at(json_get(post, "sep"), 1), eos);
        return;
    }
    const json_value *single = json_get(post, "single");
    if (!json_str_eq(json_get(post, "type"), "TemplateProcessing") || !single || !single->n) return;
    size_t seq = 0; /* the Sequence item's index */
    while (seq < single->n && !json_get(json_at(single, seq), "Sequence")) seq++;
    if (seq > 1 || (seq < single->n && single->n - seq > 2)) { /* more than one token at an end */
        *bos = *eos = -2;
        return;
    }
    const char *s;
    if (seq == 1 && json_as_str(json_get(json_get(json_at(single, 0), "SpecialToken"), "id"), &s, NULL))
        *bos = vocab_find(v, s);
    if (single->n - seq == 2 &&
        json_as_str(json_get(json_get(json_at(single, single->n - 1), "SpecialToken"), "id"), &s, NULL))
        *eos = vocab_find(v, s);
}

/* A special token of tokenizer_config.json (a string or {"content"}). */
static int64_t config_token(const json_value *cfg, const char *key, const vocab *v) {
    const json_value *t = json_get(cfg, key);
    const char *s = NULL;
    if (!json_as_str(t, &s, NULL)) json_as_str(json_get(t, "content"), &s, NULL);
    return vocab_find(v, s);
}

static candle_status set_id(candle_gguf_writer *w, const char *key, int64_t id) {
    return id >= 0 ? candle_gguf_writer_set_u32(w, key, (uint32_t)id) : CANDLE_OK;
}

static candle_status write_tokens(candle_gguf_writer *w, const char *model, const vocab *v) {
    candle_status s = candle_gguf_writer_set_str(w, "tokenizer.ggml.model", model);
    if (!s) s = candle_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", CANDLE_GGUF_STRING, v->text, v->n);
    if (!s) s = candle_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", CANDLE_GGUF_INT32, v->type, v->n);
    return s;
}

static candle_status wordpiece(candle_gguf_writer *w, const json_value *root, vocab *v, char *why, size_t nw) {
    const json_value *norm = json_get(root, "normalizer");
    bool lower = true;
    if (!json_str_eq(json_get(norm, "type"), "BertNormalizer") ||
        !json_str_eq(json_get(json_get(root, "pre_tokenizer"), "type"), "BertPreTokenizer"))
        return snprintf(why, nw, "WordPiece without BERT's normalizer and pre-tokenizer"), CANDLE_OK;
    json_as_bool(json_get(norm, "lowercase"), &lower);
    int64_t max_chars = 100;
    json_as_i64(json_get(json_get(root, "model"), "max_input_chars_per_word"), &max_chars);
    if (max_chars < 100) /* llama.cpp cuts words of any length; 100 is BERT's and Candle's */
        return snprintf(why, nw, "WordPiece with words of over %lld characters unknown", (long long)max_chars), CANDLE_OK;
    const char *prefix = "##";
    json_as_str(json_get(json_get(root, "model"), "continuing_subword_prefix"), &prefix, NULL);
    size_t pl = strlen(prefix);
    for (int64_t i = 0; i < v->n; i++) {
        if (v->added[i] || v->type[i] == TT_UNUSED) continue;
        const char *t = v->text[i];
        char *s;
        if (pl && !strncmp(t, prefix, pl)) s = strdup(t + pl);
        else if ((s = malloc(strlen(t) + 4))) snprintf(s, strlen(t) + 4, "\xe2\x96\x81%s", t);
        if (!set_owned(v, i, s)) return cdl_set_error(NULL, CANDLE_ERR_OOM, "quantize: out of memory");
    }
    int64_t cls, sep, pad = -1;
    added_ends(json_get(root, "post_processor"), v, &cls, &sep);
    if (cls == -2) return snprintf(why, nw, "a post-processor adding several tokens at an end"), CANDLE_OK;
    if (cls < 0) cls = vocab_find(v, "[CLS]");
    if (sep < 0) sep = vocab_find(v, "[SEP]");
    json_as_i64(json_get(json_get(root, "padding"), "pad_id"), &pad);
    if (pad < 0) pad = vocab_find(v, "[PAD]");
    const char *unk = NULL;
    json_as_str(json_get(json_get(root, "model"), "unk_token"), &unk, NULL);
    candle_status s = write_tokens(w, "bert", v);
    if (!s) s = set_id(w, "tokenizer.ggml.bos_token_id", cls);
    if (!s) s = set_id(w, "tokenizer.ggml.eos_token_id", sep);
    if (!s) s = set_id(w, "tokenizer.ggml.seperator_token_id", sep);
    if (!s) s = set_id(w, "tokenizer.ggml.unknown_token_id", vocab_find(v, unk));
    if (!s) s = set_id(w, "tokenizer.ggml.padding_token_id", pad);
    if (!s) s = set_id(w, "tokenizer.ggml.mask_token_id", vocab_find(v, "[MASK]"));
    if (!s) s = candle_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", cls >= 0);
    if (!s) s = candle_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", sep >= 0);
    if (!s) s = candle_gguf_writer_set_bool(w, "tokenizer.ggml.normalizer.lowercase", lower);
    return s;
}

/* The llama.cpp name of a byte-level BPE pre-tokenizer, or NULL. */
static const char *bpe_pre(const json_value *pre) {
    bool rx = true, prefix = false;
    if (json_str_eq(json_get(pre, "type"), "ByteLevel")) {
        json_as_bool(json_get(pre, "use_regex"), &rx);
        json_as_bool(json_get(pre, "add_prefix_space"), &prefix);
        return rx && !prefix ? "gpt-2" : NULL;
    }
    const json_value *ps = json_get(pre, "pretokenizers"), *a = json_at(ps, 0), *b = json_at(ps, 1);
    if (!json_str_eq(json_get(pre, "type"), "Sequence") || !ps || ps->n != 2 || !json_str_eq(json_get(b, "type"), "ByteLevel"))
        return NULL;
    json_as_bool(json_get(b, "use_regex"), &rx);
    json_as_bool(json_get(b, "add_prefix_space"), &prefix);
    if (prefix) return NULL;
    bool single = false;
    if (json_str_eq(json_get(a, "type"), "Digits") && json_as_bool(json_get(a, "individual_digits"), &single) && single && rx)
        return "smollm";
    const json_value *re = json_get(json_get(a, "pattern"), "Regex");
    if (rx || !json_str_eq(json_get(a, "type"), "Split") || !json_str_eq(json_get(a, "behavior"), "Isolated")) return NULL;
    bool invert = false;
    json_as_bool(json_get(a, "invert"), &invert);
    if (invert) return NULL;
    if (json_str_eq(re, RE_LLAMA3)) return "llama-bpe";
    if (json_str_eq(re, RE_QWEN2)) return "qwen2";
    return NULL;
}

/* Token ids by text: open addressing over the vocabulary, for the merges. */
typedef struct id_index {
    int64_t *slot; /* [cap] token id + 1, 0 empty */
    size_t cap;
} id_index;

static uint64_t fnv(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static bool index_build(id_index *x, const vocab *v) {
    x->cap = 16;
    while (x->cap < 2 * (size_t)v->n) x->cap *= 2;
    if (!(x->slot = calloc(x->cap, sizeof *x->slot))) return false;
    for (int64_t i = 0; i < v->n; i++) {
        size_t h = fnv(v->text[i], strlen(v->text[i])) & (x->cap - 1);
        while (x->slot[h]) h = (h + 1) & (x->cap - 1);
        x->slot[h] = i + 1;
    }
    return true;
}

static int64_t index_find(const id_index *x, const vocab *v, const char *s, size_t n) {
    for (size_t h = fnv(s, n) & (x->cap - 1); x->slot[h]; h = (h + 1) & (x->cap - 1)) {
        const char *t = v->text[x->slot[h] - 1];
        if (strlen(t) == n && !memcmp(t, s, n)) return x->slot[h] - 1;
    }
    return -1;
}

/* Whether the text reaches the model as SentencePiece gives it: spaces
 * replaced by U+2581 by the normalizer, after (*prefix) one prepended. */
static bool spaces_marked(const json_value *root, bool *prefix) {
    const json_value *norm = json_get(root, "normalizer"), *pre = json_get(root, "pre_tokenizer");
    const json_value *steps = json_str_eq(json_get(norm, "type"), "Sequence") ? json_get(norm, "normalizers") : NULL;
    const json_value *first = steps ? json_at(steps, 0) : norm, *last = steps ? json_at(steps, steps->n - 1) : norm;
    bool replace = json_str_eq(json_get(last, "type"), "Replace") &&
                   json_str_eq(json_get(json_get(last, "pattern"), "String"), " ") &&
                   json_str_eq(json_get(last, "content"), "\xe2\x96\x81");
    bool prepend = steps && steps->n == 2 && json_str_eq(json_get(first, "type"), "Prepend") &&
                   json_str_eq(json_get(first, "prepend"), "\xe2\x96\x81");
    bool inert_pre = !pre || pre->type == JSON_NULL ||
                     (json_str_eq(json_get(pre, "type"), "Split") &&
                      json_str_eq(json_get(json_get(pre, "pattern"), "String"), " ")); /* no spaces are left */
    if (replace && (!steps || prepend) && inert_pre) {
        *prefix = prepend;
        return true;
    }
    /* Metaspace adds its prefix unless the text starts with a space, and
     * ("first") not after a special token: llama.cpp's SentencePiece
     * tokenizer does both, so it is not written. */
    return false;
}

/* One merge's two sides as text; false if it is neither "a b" nor [a, b]. */
static bool merge_sides(const json_value *e, const char **l, size_t *ll, const char **r, size_t *rl) {
    const char *s;
    size_t n;
    if (json_as_str(e, &s, &n)) {
        const char *sp = memchr(s, ' ', n);
        if (!sp) return false;
        *l = s, *ll = (size_t)(sp - s), *r = sp + 1, *rl = n - *ll - 1;
        return true;
    }
    return e && e->n == 2 && json_as_str(json_at(e, 0), l, ll) && json_as_str(json_at(e, 1), r, rl);
}

static candle_status spm(candle_gguf_writer *w, const json_value *root, vocab *v, bool prefix, char *why, size_t nw) {
    const json_value *model = json_get(root, "model"), *merges = json_get(model, "merges");
    if (!merges || merges->type != JSON_ARRAY) return snprintf(why, nw, "model.merges is not an array"), CANDLE_OK;
    float *score = malloc((size_t)v->n * sizeof *score);
    id_index x = {0};
    char *buf = NULL;
    size_t cap = 0;
    candle_status s = score && index_build(&x, v) ? CANDLE_OK
                                                  : cdl_set_error(NULL, CANDLE_ERR_OOM, "quantize: out of memory for scores");
    for (int64_t i = 0; !s && i < v->n; i++) score[i] = -1e9f; /* made by no merge: last */
    for (size_t i = 0; !s && i < merges->n; i++) {
        const char *l, *r;
        size_t ll, rl;
        if (!merge_sides(json_at(merges, i), &l, &ll, &r, &rl)) {
            snprintf(why, nw, "model.merges[%zu] is neither \"a b\" nor [a, b]", i);
            break;
        }
        if (ll + rl > cap) {
            char *nb = realloc(buf, cap = 2 * (ll + rl));
            if (!nb) {
                s = cdl_set_error(NULL, CANDLE_ERR_OOM, "quantize: out of memory for merges");
                break;
            }
            buf = nb;
        }
        memcpy(buf, l, ll);
        memcpy(buf + ll, r, rl);
        int64_t id = index_find(&x, v, buf, ll + rl);
        if (id >= 0 && score[id] == -1e9f) score[id] = -(float)(i + 1);
    }
    const char *unk = NULL;
    json_as_str(json_get(model, "unk_token"), &unk, NULL);
    for (int64_t i = 0; !s && i < v->n; i++) {
        const char *t = v->text[i];
        if (v->added[i]) continue;
        if (strlen(t) == 6 && !strncmp(t, "<0x", 3) && t[5] == '>') v->type[i] = TT_BYTE, score[i] = 0;
    }
    int64_t unk_id = unk ? index_find(&x, v, unk, strlen(unk)) : -1;
    if (unk_id >= 0) v->type[unk_id] = TT_UNKNOWN;
    int64_t bos, eos;
    added_ends(json_get(root, "post_processor"), v, &bos, &eos);
    if (bos == -2 && !*why) snprintf(why, nw, "a post-processor adding several tokens at an end");
    if (!s && !*why) s = write_tokens(w, "llama", v);
    if (!s && !*why) s = candle_gguf_writer_set_arr(w, "tokenizer.ggml.scores", CANDLE_GGUF_FLOAT32, score, v->n);
    if (!s && !*why) s = set_id(w, "tokenizer.ggml.bos_token_id", bos);
    if (!s && !*why) s = set_id(w, "tokenizer.ggml.eos_token_id", eos);
    if (!s && !*why) s = set_id(w, "tokenizer.ggml.unknown_token_id", unk_id);
    if (!s && !*why) s = candle_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", bos >= 0);
    if (!s && !*why) s = candle_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", eos >= 0);
    if (!s && !*why) s = candle_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", prefix);
    free(buf);
    free(x.slot);
    free(score);
    return s;
}

static candle_status bpe(candle_gguf_writer *w, const json_value *root, const json_value *cfg, vocab *v, char *why,
                         size_t nw) {
    const json_value *model = json_get(root, "model"), *merges = json_get(model, "merges");
    const json_value *norm = json_get(root, "normalizer");
    bool fallback = false, prefix = false;
    json_as_bool(json_get(model, "byte_fallback"), &fallback);
    if (fallback && spaces_marked(root, &prefix)) return spm(w, root, v, prefix, why, nw);
    const char *pre = bpe_pre(json_get(root, "pre_tokenizer"));
    const char *suffix = NULL;
    json_as_str(json_get(model, "end_of_word_suffix"), &suffix, NULL);
    if (fallback)
        return snprintf(why, nw, "byte-fallback BPE whose normalizer does not mark spaces (Metaspace's prefix "
                                 "rule is not llama.cpp's)"), CANDLE_OK;
    if ((norm && norm->type != JSON_NULL) || (suffix && *suffix))
        return snprintf(why, nw, "BPE with a normalizer or a word suffix, not byte-level"), CANDLE_OK;
    if (!pre) return snprintf(why, nw, "a BPE pre-tokenizer llama.cpp has no name for"), CANDLE_OK;
    if (!merges || merges->type != JSON_ARRAY) return snprintf(why, nw, "model.merges is not an array"), CANDLE_OK;
    const char **m = calloc(merges->n ? merges->n : 1, sizeof *m);
    char **made = calloc(merges->n ? merges->n : 1, sizeof *made);
    candle_status s = m && made ? CANDLE_OK : cdl_set_error(NULL, CANDLE_ERR_OOM, "quantize: out of memory for merges");
    for (size_t i = 0; !s && i < merges->n && !*why; i++) {
        const json_value *e = json_at(merges, i);
        const char *l, *r;
        size_t ll, rl;
        if (json_as_str(e, &m[i], NULL)) continue; /* "LEFT RIGHT" */
        if (!json_as_str(json_at(e, 0), &l, &ll) || !json_as_str(json_at(e, 1), &r, &rl) || e->n != 2) {
            snprintf(why, nw, "model.merges[%zu] is neither \"a b\" nor [a, b]", i);
            break;
        }
        if (!(made[i] = malloc(ll + rl + 2))) s = cdl_set_error(NULL, CANDLE_ERR_OOM, "quantize: out of memory for merges");
        else snprintf(made[i], ll + rl + 2, "%s %s", l, r), m[i] = made[i];
    }
    int64_t bos, eos;
    added_ends(json_get(root, "post_processor"), v, &bos, &eos);
    if (bos == -2 && !*why) snprintf(why, nw, "a post-processor adding several tokens at an end");
    bool add_bos = bos >= 0, add_eos = eos >= 0;
    if (bos < 0) bos = config_token(cfg, "bos_token", v);
    if (eos < 0) eos = config_token(cfg, "eos_token", v);
    if (!s && !*why) s = write_tokens(w, "gpt2", v);
    if (!s && !*why) s = candle_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    if (!s && !*why) s = candle_gguf_writer_set_arr(w, "tokenizer.ggml.merges", CANDLE_GGUF_STRING, m, (int64_t)merges->n);
    if (!s && !*why) s = set_id(w, "tokenizer.ggml.bos_token_id", bos);
    if (!s && !*why) s = set_id(w, "tokenizer.ggml.eos_token_id", eos);
    if (!s && !*why) s = set_id(w, "tokenizer.ggml.padding_token_id", config_token(cfg, "pad_token", v));
    if (!s && !*why) s = candle_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", add_bos);
    if (!s && !*why) s = candle_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", add_eos);
    for (size_t i = 0; made && i < merges->n; i++) free(made[i]);
    free(made);
    free(m);
    return s;
}

static candle_status write_vocab(candle_gguf_writer *w, const json_doc *doc, const json_doc *cdoc, int64_t n_vocab,
                                 char *why, size_t n_why) {
    why[0] = 0;
    const json_value *root = json_root(doc), *type = json_get(json_get(root, "model"), "type");
    vocab v = {0};
    candle_status s = CANDLE_OK;
    if (json_str_eq(type, "WordPiece") || json_str_eq(type, "BPE")) s = read_vocab(root, n_vocab, &v, why, n_why);
    else snprintf(why, n_why, "a model of type %s", type && type->type == JSON_STRING ? type->u.str : "(none)");
    if (!s && !*why && json_str_eq(type, "WordPiece")) s = wordpiece(w, root, &v, why, n_why);
    else if (!s && !*why) s = bpe(w, root, cdoc ? json_root(cdoc) : NULL, &v, why, n_why);
    vocab_free(&v);
    return s;
}

candle_status cquant_write_ggml_vocab(candle_gguf_writer *w, const char *tokenizer_json, const char *tokenizer_config,
                                      int64_t n_vocab, char *why, size_t n_why) {
    why[0] = 0;
    json_doc *doc = NULL, *cdoc = NULL;
    candle_status s = json_parse_file(&doc, tokenizer_json, NULL, (size_t)64 << 20);
    if (s) return s;
    if (tokenizer_config && json_parse_file(&cdoc, tokenizer_config, NULL, (size_t)16 << 20)) {
        candle_clear_last_error(); /* only bos/eos names come from it */
        cdoc = NULL;
    }
    s = write_vocab(w, doc, cdoc, n_vocab, why, n_why);
    json_free(cdoc);
    json_free(doc);
    return s;
}

candle_status cquant_write_ggml_vocab_memory(candle_gguf_writer *w, const char *json, size_t len, char *why,
                                             size_t n_why) {
    why[0] = 0;
    json_doc *doc = NULL;
    candle_status s = json_parse(&doc, json, len, "tokenizer.json", NULL);
    if (!s) s = write_vocab(w, doc, NULL, 0, why, n_why);
    json_free(doc);
    return s;
}
