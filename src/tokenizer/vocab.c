/* Vocabulary: string pool, text->id and merge->rank maps, special ids and
 * defaults per model family, built from GGUF metadata or a tok_source. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/core-impl.h"
#include "hf-impl.h"
#include "tokenizer-impl.h"
#include "unicode-impl.h"

/* ---- map ---- */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

candle_status tok_map_init(tok_map *m, int64_t n) {
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2) cap *= 2; /* load factor <= 1/2 */
    m->keys = calloc(cap, sizeof *m->keys);
    m->lens = calloc(cap, sizeof *m->lens);
    m->vals = calloc(cap, sizeof *m->vals);
    m->cap = cap;
    if (!m->keys || !m->lens || !m->vals) {
        tok_map_free(m);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tokenizer map of %llu slots",
                                (unsigned long long)cap);
    }
    return CANDLE_OK;
}

void tok_map_free(tok_map *m) {
    free(m->keys);
    free(m->lens);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

void tok_map_put(tok_map *m, const char *key, size_t len, int32_t val) {
    uint64_t i = hash_bytes(key, len) & (m->cap - 1);
    while (m->keys[i]) {
        if (m->lens[i] == len && !memcmp(m->keys[i], key, len)) break;
        i = (i + 1) & (m->cap - 1);
    }
    m->keys[i] = key;
    m->lens[i] = (uint32_t)len;
    m->vals[i] = val;
}

int32_t tok_map_get(const tok_map *m, const char *key, size_t len) {
    if (!m->cap) return -1;
    uint64_t i = hash_bytes(key, len) & (m->cap - 1);
    while (m->keys[i]) {
        if (m->lens[i] == len && !memcmp(m->keys[i], key, len)) return m->vals[i];
        i = (i + 1) & (m->cap - 1);
    }
    return -1;
}

/* ---- building ---- */

void candle_tokenizer_free(candle_tokenizer *t) {
    if (!t) return;
    tok_map_free(&t->vocab);
    tok_map_free(&t->merges);
    for (int i = 0; i < t->n_regex; i++) tok_regex_free(t->regex[i]);
    free(t->tokens);
    free(t->pool);
    free(t->specials);
    hf_tok_free(t->hf);
    free(t);
}

static int32_t pick_id(int64_t given, int32_t dflt, int32_t n_vocab) {
    int64_t v = given == -2 ? dflt : given;
    return (v >= 0 && v < n_vocab) ? (int32_t)v : -1;
}

/* A special token id the file gives outside the vocabulary: dropped for the
 * default, with a warning, as llama.cpp does ("bad special token"). */
static int64_t given_id(int64_t given, const char *what, int32_t n_vocab) {
    if (given < 0 || given < n_vocab) return given;
    cdl_log_msg(CANDLE_LOG_WARN,
                   "tokenizer: %s token id %lld is outside the vocabulary of %d tokens; "
                   "ignored, using the default",
                   what, (long long)given, (int)n_vocab);
    return -2;
}

static void set_defaults(candle_tokenizer *t, const tok_source *s) {
    int32_t n = t->n_vocab;
    bool spm = t->kind == TOK_SPM, wpm = t->kind == TOK_WPM;
    t->bos = pick_id(given_id(s->bos, "BOS", n), spm ? 1 : -1, n);
    t->eos = pick_id(given_id(s->eos, "EOS", n), spm ? 2 : -1, n);
    t->unk = pick_id(given_id(s->unk, "UNK", n), spm ? 0 : -1, n);
    t->pad = pick_id(given_id(s->pad, "PAD", n), -1, n);
    t->sep = pick_id(given_id(s->sep, "SEP", n), -1, n);
    t->lowercase = !s->cased;
    if (wpm) { /* BERT frames a sequence as [CLS] ... [SEP] */
        if (t->bos < 0) t->bos = pick_id(-2, tok_map_get(&t->vocab, "[CLS]", 5), n);
        if (t->sep < 0) t->sep = pick_id(-2, tok_map_get(&t->vocab, "[SEP]", 5), n);
        if (t->eos < 0) t->eos = t->sep;
        if (t->unk < 0) t->unk = pick_id(-2, tok_map_get(&t->vocab, "[UNK]", 5), n);
    }
    t->add_bos = s->add_bos >= 0 ? s->add_bos : (spm || wpm);
    t->add_eos = s->add_eos >= 0 ? s->add_eos : wpm;
    t->add_space_prefix = s->add_space_prefix >= 0 ? s->add_space_prefix : spm;
    if (t->kind == TOK_BPE && s->add_bos < 0 && t->ignore_merges) t->add_bos = true; /* llama 3 */
}

/* End of generation: eos, eot, eom, and the end-of-turn markers chat
 * models use without naming them in metadata. */
static void set_eog(candle_tokenizer *t, const tok_source *s) {
    static const char *const names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                                        "<|endoftext|>", "<EOT>", "<|end_of_text|>", "<|eom_id|>"};
    int32_t cand[3 + sizeof names / sizeof names[0]];
    int nc = 0;
    cand[nc++] = t->eos;
    cand[nc++] = pick_id(given_id(s->eot, "EOT", t->n_vocab), -1, t->n_vocab);
    cand[nc++] = pick_id(given_id(s->eom, "EOM", t->n_vocab), -1, t->n_vocab);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int32_t id = tok_map_get(&t->vocab, names[i], strlen(names[i]));
        if (id >= 0 && t->tokens[id].type == TT_CONTROL) cand[nc++] = id;
    }
    for (int i = 0; i < nc && t->n_eog < (int)(sizeof t->eog / sizeof t->eog[0]); i++) {
        bool dup = cand[i] < 0;
        for (int k = 0; k < t->n_eog && !dup; k++) dup = t->eog[k] == cand[i];
        if (!dup) t->eog[t->n_eog++] = cand[i];
    }
}

static int cmp_special(const void *a, const void *b, void *tv) {
    const candle_tokenizer *t = tv;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (t->tokens[x].len != t->tokens[y].len) return t->tokens[x].len > t->tokens[y].len ? -1 : 1;
    return x < y ? -1 : x > y;
}

static candle_status collect_specials(candle_tokenizer *t) {
    int32_t n = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        uint8_t ty = t->tokens[i].type;
        n += (ty == TT_CONTROL || ty == TT_USER || ty == TT_UNKNOWN) && t->tokens[i].len;
    }
    t->specials = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    if (!t->specials) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: specials");
    for (int32_t i = 0; i < t->n_vocab; i++) {
        uint8_t ty = t->tokens[i].type;
        if ((ty == TT_CONTROL || ty == TT_USER || ty == TT_UNKNOWN) && t->tokens[i].len)
            t->specials[t->n_specials++] = i;
    }
    qsort_r(t->specials, (size_t)t->n_specials, sizeof(int32_t), cmp_special, t);
    return CANDLE_OK;
}

static bool contains_ci(const char *s, const char *sub) {
    if (!s) return false;
    for (size_t n = strlen(sub); *s; s++)
        if (!strncasecmp(s, sub, n)) return true;
    return false;
}

/* Phi-3's added tokens drop the whitespace after them (their rstrip flag
 * in the reference tokenizer, which GGUF does not carry). */
static void set_strip_flags(candle_tokenizer *t, const tok_source *s) {
    bool phi3 = (s->arch && !strcmp(s->arch, "phi3")) || contains_ci(s->name, "phi-3") ||
                contains_ci(s->name, "phi3");
    if (!phi3) return;
    for (int32_t i = 0; i < t->n_specials; i++) t->tokens[t->specials[i]].strip |= STRIP_RIGHT;
    static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        int32_t id = tok_map_get(&t->vocab, keep[i], strlen(keep[i]));
        if (id >= 0) t->tokens[id].strip = 0;
    }
}

/* The token of each byte: for BPE its printable stand-in; otherwise the
 * "<0xHH>" token of type byte, the only kind the decoder turns back into
 * that byte (a vocabulary without token types gets the type for them), so
 * the byte fallback always decodes to what it encoded. */
static void find_byte_tokens(candle_tokenizer *t, const tok_source *s) {
    for (int b = 0; b < 256; b++) {
        char buf[8];
        size_t n;
        if (t->kind == TOK_BPE) {
            n = tok_utf8_encode(tok_byte_to_cp((uint8_t)b), buf);
        } else {
            static const char hex[] = "0123456789ABCDEF";
            memcpy(buf, "<0x", 3);
            buf[3] = hex[b >> 4];
            buf[4] = hex[b & 15];
            buf[5] = '>';
            n = 6;
        }
        int32_t id = tok_map_get(&t->vocab, buf, n);
        if (id >= 0 && t->kind != TOK_BPE && t->tokens[id].type != TT_BYTE) {
            if (s->types) id = -1;
            else t->tokens[id].type = TT_BYTE;
        }
        t->byte_ids[b] = id;
    }
}

/* Whether merge m ("LEFT RIGHT") joins two tokens into a token; a token
 * with a space of its own may make any space the separator. */
static bool merge_names_tokens(const candle_tokenizer *t, const char *m, size_t n) {
    char stack[256];
    char *joined = n <= sizeof stack ? stack : malloc(n);
    if (!joined) return true; /* out of memory: no verdict */
    bool ok = false;
    for (const char *sp = m; !ok && (sp = memchr(sp, ' ', n - (size_t)(sp - m))) != NULL; sp++) {
        size_t l = (size_t)(sp - m), r = n - l - 1;
        if (!l || !r || tok_map_get(&t->vocab, m, l) < 0 || tok_map_get(&t->vocab, sp + 1, r) < 0) continue;
        memcpy(joined, m, l);
        memcpy(joined + l, sp + 1, r);
        ok = tok_map_get(&t->vocab, joined, n - 1) >= 0;
    }
    if (joined != stack) free(joined);
    return ok;
}

/* Copies every token and merge string into one pool, so the tokenizer
 * does not depend on the GGUF handle staying open. */
static candle_status copy_strings(candle_tokenizer *t, const tok_source *s) {
    size_t total = 0;
    for (int64_t i = 0; i < s->n_tokens; i++) total += s->token_lens[i] + 1;
    for (int64_t i = 0; i < s->n_merges; i++) total += s->merge_lens[i] + 1;
    t->pool = malloc(total ? total : 1);
    t->tokens = calloc((size_t)s->n_tokens, sizeof *t->tokens);
    if (!t->pool || !t->tokens)
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: vocabulary of %lld tokens",
                                (long long)s->n_tokens);
    char *p = t->pool;
    candle_status st = tok_map_init(&t->vocab, s->n_tokens);
    if (st != CANDLE_OK) return st;
    for (int64_t i = 0; i < s->n_tokens; i++) {
        tok_token *tk = &t->tokens[i];
        memcpy(p, s->tokens[i], s->token_lens[i]);
        p[s->token_lens[i]] = 0;
        tk->text = p;
        tk->len = (uint32_t)s->token_lens[i];
        tk->type = s->types ? (uint8_t)s->types[i] : TT_NORMAL;
        tk->score = s->scores ? s->scores[i] : 0.0f;
        p += s->token_lens[i] + 1;
        tok_map_put(&t->vocab, tk->text, tk->len, (int32_t)i);
    }
    if (!s->n_merges) return CANDLE_OK;
    if ((st = tok_map_init(&t->merges, s->n_merges)) != CANDLE_OK) return st;
    int64_t n_bad = 0, first_bad = -1;
    for (int64_t i = 0; i < s->n_merges; i++) {
        memcpy(p, s->merges[i], s->merge_lens[i]);
        p[s->merge_lens[i]] = 0;
        /* Keep the best (first) rank when a merge is listed twice. */
        if (tok_map_get(&t->merges, p, s->merge_lens[i]) < 0)
            tok_map_put(&t->merges, p, s->merge_lens[i], (int32_t)i);
        if (!merge_names_tokens(t, p, s->merge_lens[i]) && !n_bad++) first_bad = i;
        p += s->merge_lens[i] + 1;
    }
    /* The encoder copes (a result that is no token falls back to byte
     * tokens), but such a file was not made for this vocabulary: say so. */
    if (n_bad) {
        char esc[128];
        candle_escape_text(s->merges[first_bad], s->merge_lens[first_bad], esc, sizeof esc);
        cdl_log_msg(CANDLE_LOG_WARN,
                    "tokenizer: %lld of %lld tokenizer.ggml.merges are not 'LEFT RIGHT' of tokens whose "
                    "join is a token (the first: '%s'); a word they would merge is encoded as byte "
                    "tokens there",
                    (long long)n_bad, (long long)s->n_merges, esc);
    }
    return CANDLE_OK;
}

static candle_status compile_pre(candle_tokenizer *t, const char *pre) {
    bool known = true;
    const char *const *res = tok_pre_regexes(pre, &t->ignore_merges, &known);
    if (!known) {
        char esc[128];
        candle_escape_text(pre, strlen(pre), esc, sizeof esc);
        cdl_log_msg(CANDLE_LOG_WARN,
                    "tokenizer: tokenizer.ggml.pre '%s' is not a pre-tokenizer Candle knows; using "
                    "the default split, so some texts may tokenize differently from the model's own "
                    "tokenizer",
                    esc);
    }
    for (int i = 0; res[i]; i++) {
        if (t->n_regex == TOK_MAX_REGEX)
            return cdl_set_error(NULL, CANDLE_ERR_INTERNAL, "tokenizer: too many pre-tokenizer regexes");
        candle_status st = tok_regex_compile(res[i], &t->regex[t->n_regex]);
        if (st != CANDLE_OK) return st;
        t->n_regex++;
    }
    return CANDLE_OK;
}

candle_status tok_build(candle_tokenizer **out, const tok_source *s) {
    *out = NULL;
    tok_kind kind;
    if (!s->model) return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "tokenizer: no tokenizer.ggml.model");
    if (!strcmp(s->model, "llama")) kind = TOK_SPM;
    else if (!strcmp(s->model, "gpt2")) kind = TOK_BPE;
    else if (!strcmp(s->model, "bert")) kind = TOK_WPM;
    else return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "tokenizer: model '%s' not supported", s->model);
    if (s->n_tokens <= 0 || s->n_tokens > INT32_MAX)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "tokenizer: %lld tokens", (long long)s->n_tokens);
    if (kind == TOK_BPE && s->n_merges <= 0)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "tokenizer: BPE vocabulary without merges");
    candle_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tokenizer");
    t->kind = kind;
    t->n_vocab = (int32_t)s->n_tokens;
    candle_status st = copy_strings(t, s);
    if (st == CANDLE_OK && kind == TOK_BPE) st = compile_pre(t, s->pre);
    if (st == CANDLE_OK) st = collect_specials(t);
    if (st != CANDLE_OK) {
        candle_tokenizer_free(t);
        return st;
    }
    set_defaults(t, s);
    set_eog(t, s);
    set_strip_flags(t, s);
    find_byte_tokens(t, s);
    *out = t;
    return CANDLE_OK;
}

/* ---- from GGUF ---- */

static int64_t get_id(const candle_gguf *g, const char *key) {
    int64_t v;
    if (!candle_gguf_get_i64(g, key, &v)) return -2;
    return v == 0xFFFFFFFFll ? -1 : v;
}

static int get_flag(const candle_gguf *g, const char *key) {
    bool b;
    return candle_gguf_get_bool(g, key, &b) ? b : -1;
}

/* String array `key` as pointer/length arrays (allocated here). */
static candle_status get_strings(const candle_gguf *g, const char *key, int64_t *n,
                                 const char ***strs, size_t **lens) {
    candle_gguf_type et;
    *n = 0;
    if (!candle_gguf_get_arr(g, key, &et, n)) return CANDLE_OK;
    if (et != CANDLE_GGUF_STRING || *n < 0)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "tokenizer: %s is not a string array", key);
    *strs = malloc((size_t)(*n ? *n : 1) * sizeof **strs);
    *lens = malloc((size_t)(*n ? *n : 1) * sizeof **lens);
    if (!*strs || !*lens) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: %s", key);
    for (int64_t i = 0; i < *n; i++)
        if (!candle_gguf_arr_str(g, key, i, &(*strs)[i], &(*lens)[i]))
            return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "tokenizer: %s[%lld] unreadable", key,
                                    (long long)i);
    return CANDLE_OK;
}

/* Numeric array `key` (4-byte elements of type want, count n) copied into
 * an aligned buffer, since metadata arrays sit at any byte offset; NULL if
 * the key is absent. */
static candle_status get_numbers(const candle_gguf *g, const char *key, candle_gguf_type want,
                                 int64_t n, void **data) {
    candle_gguf_type et;
    int64_t m;
    *data = NULL;
    if (!candle_gguf_get_arr(g, key, &et, &m)) return CANDLE_OK;
    if (et != want || m != n)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                "tokenizer: %s: expected %lld elements of type %d, got %lld of type %d",
                                key, (long long)n, (int)want, (long long)m, (int)et);
    const void *src = candle_gguf_arr_data(g, key);
    if (!src) return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "tokenizer: %s has no data", key);
    if (!(*data = malloc((size_t)n * 4))) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: %s", key);
    memcpy(*data, src, (size_t)n * 4);
    return CANDLE_OK;
}

static char *dup_str(const candle_gguf *g, const char *key) {
    const char *s;
    size_t n;
    if (!candle_gguf_get_str(g, key, &s, &n)) return NULL;
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

candle_status candle_tokenizer_from_gguf(candle_tokenizer **out, const candle_gguf *g) {
    if (!out || !g) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tokenizer_from_gguf: NULL argument");
    *out = NULL;
    /* A whole tokenizer.json (the GGUF spec allows it; candle quantize of a
     * Hugging Face directory writes it beside the tokenizer.ggml.* keys):
     * the model's own tokenizer, which those keys only approximate where
     * its normalizer or splits have no GGUF form. */
    const char *hf;
    size_t hf_len;
    if (candle_gguf_get_str(g, "tokenizer.huggingface.json", &hf, &hf_len))
        return candle_tokenizer_from_hf_memory(out, hf, hf_len, NULL, 0, "tokenizer.huggingface.json");
    tok_source s = {0};
    size_t *tlens = NULL, *mlens = NULL;
    const char **toks = NULL, **merges = NULL;
    char *model = dup_str(g, "tokenizer.ggml.model"), *pre = dup_str(g, "tokenizer.ggml.pre");
    char *arch = dup_str(g, "general.architecture"), *name = dup_str(g, "general.name");
    void *scores = NULL, *types = NULL;
    candle_status st = get_strings(g, "tokenizer.ggml.tokens", &s.n_tokens, &toks, &tlens);
    if (st == CANDLE_OK && !s.n_tokens)
        st = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "tokenizer: no tokenizer.ggml.tokens");
    if (st == CANDLE_OK)
        st = get_strings(g, "tokenizer.ggml.merges", &s.n_merges, &merges, &mlens);
    if (st == CANDLE_OK)
        st = get_numbers(g, "tokenizer.ggml.scores", CANDLE_GGUF_FLOAT32, s.n_tokens, &scores);
    if (st == CANDLE_OK)
        st = get_numbers(g, "tokenizer.ggml.token_type", CANDLE_GGUF_INT32, s.n_tokens, &types);
    if (st == CANDLE_OK) {
        s.model = model;
        s.pre = pre;
        s.arch = arch;
        s.name = name;
        s.tokens = toks;
        s.token_lens = tlens;
        s.merges = merges;
        s.merge_lens = mlens;
        s.scores = scores;
        s.types = types;
        s.bos = get_id(g, "tokenizer.ggml.bos_token_id");
        if (s.bos == -2) s.bos = get_id(g, "tokenizer.ggml.cls_token_id");
        s.eos = get_id(g, "tokenizer.ggml.eos_token_id");
        s.unk = get_id(g, "tokenizer.ggml.unknown_token_id");
        s.pad = get_id(g, "tokenizer.ggml.padding_token_id");
        s.sep = get_id(g, "tokenizer.ggml.seperator_token_id");
        s.eot = get_id(g, "tokenizer.ggml.eot_token_id");
        s.eom = get_id(g, "tokenizer.ggml.eom_token_id");
        s.add_bos = get_flag(g, "tokenizer.ggml.add_bos_token");
        s.add_eos = get_flag(g, "tokenizer.ggml.add_eos_token");
        s.add_space_prefix = get_flag(g, "tokenizer.ggml.add_space_prefix");
        s.cased = get_flag(g, "tokenizer.ggml.normalizer.lowercase") == 0;
        st = tok_build(out, &s);
    }
    free(toks);
    free(tlens);
    free(merges);
    free(mlens);
    free(scores);
    free(types);
    free(model);
    free(pre);
    free(arch);
    free(name);
    return st;
}
