/* Whisper weights from a whisper.cpp ggml file (include/candle/ggml_whisper.h):
 * openai-whisper's tensor names mapped to CTranslate2's (whisper-src-impl.h),
 * the tokenizer rebuilt from the file's vocabulary, the configuration from
 * openai-whisper's rules.
 *
 * The vocabulary holds tiktoken's mergeable ranks as raw bytes (id = rank)
 * up to <|endoftext|>; whisper.cpp assigns the special tokens after it by
 * n_vocab (whisper_model_load). The tokenizer is an in-memory tokenizer.json
 * as Hugging Face's tiktoken converter would write it (byte-level BPE, every
 * split of a token into two tokens a merge, ordered by the token's rank)
 * with the specials named as the CTranslate2 packages' tokenizer.json names
 * them, so ids and names equal theirs. Like those, it has no timestamp
 * tokens (the model finds them by id, after <|notimestamps|>). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candle/ggml_whisper.h"
#include "candle/whisper.h"
#include "core/core-impl.h"
#include "core/strbuf-impl.h"
#include "whisper-src-impl.h"

typedef struct gsrc {
    candle_ggml_whisper *g;
    candle_ggml_whisper_hparams hp;
    int32_t eot, sot, n_lang; /* translate = sot + 1 + n_lang, then the other specials */
    bool multilingual;
    char rank_byte[256]; /* the byte of each single-byte rank (bytes_to_unicode's order) */
} gsrc;

static candle_status gerr(const whisper_src *s, const char *fmt, const char *a, long long b) {
    char msg[512];
    snprintf(msg, sizeof msg, fmt, a, b);
    return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: %s", s->path, msg);
}

bool whisper_src_ggml_probe(const char *path) {
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) return false;
    unsigned char head[48];
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    return candle_ggml_whisper_probe(head, n);
}

/* ---- tensors ---- */

/* The part of a tensor by whisper.cpp name, rows along its outermost dim. */
static bool part(const gsrc *g, const char *name, wsrc_part *p, const candle_ggml_whisper_tensor_info **out) {
    int64_t i = candle_ggml_whisper_find_tensor(g->g, name);
    const candle_ggml_whisper_tensor_info *t = candle_ggml_whisper_tensor(g->g, i);
    if (!t) return false;
    *p = (wsrc_part){t->data, t->dtype, t->shape[0]};
    if (out) *out = t;
    return true;
}

/* One tensor of whisper.cpp's as it is (squeeze: conv biases are [n, 1]). */
static bool single(const gsrc *g, const char *name, bool squeeze, wsrc_tensor *t) {
    const candle_ggml_whisper_tensor_info *v;
    memset(t, 0, sizeof *t);
    if (!part(g, name, &t->part[0], &v) || v->rank > 3) return false;
    t->n_parts = 1;
    t->rank = squeeze && v->rank == 2 && v->shape[1] == 1 ? 1 : v->rank;
    for (int i = 0; i < t->rank; i++) t->shape[i] = v->shape[i];
    return true;
}

/* Projections fused as CTranslate2 fuses them: names[i] NULL is a zero
 * bias of n_state rows (Whisper's key has none). */
static bool fused(const gsrc *g, const char *pre, const char *const *names, int n, bool bias, wsrc_tensor *t) {
    memset(t, 0, sizeof *t);
    t->rank = bias ? 1 : 2;
    t->n_parts = n;
    int64_t n_state = g->hp.n_text_state;
    for (int i = 0; i < n; i++) {
        if (!names[i]) {
            t->part[i] = (wsrc_part){NULL, CANDLE_DTYPE_F32, n_state};
            t->shape[0] += n_state;
            continue;
        }
        char name[256];
        snprintf(name, sizeof name, "%s.%s.%s", pre, names[i], bias ? "bias" : "weight");
        const candle_ggml_whisper_tensor_info *v;
        if (!part(g, name, &t->part[i], &v) || v->rank != t->rank || v->shape[0] != n_state) return false;
        if (!bias && t->shape[1] && v->shape[1] != t->shape[1]) return false;
        if (!bias) t->shape[1] = v->shape[1];
        t->shape[0] += v->shape[0];
    }
    return true;
}

/* CTranslate2's leaf names for norms and linears -> openai's suffixes. */
static const char *leaf(const char *ct2) {
    if (!strcmp(ct2, "gamma") || !strcmp(ct2, "weight")) return "weight";
    if (!strcmp(ct2, "beta") || !strcmp(ct2, "bias")) return "bias";
    return NULL;
}

/* A layer's tensor: rest is "self_attention/linear_0/weight", ... */
static bool find_layer(const gsrc *g, const char *side, long layer, const char *rest, wsrc_tensor *t) {
    char pre[128], sub[64], lf[16];
    snprintf(pre, sizeof pre, "%s.blocks.%ld", side, layer);
    bool dec = side[0] == 'd';
    /* "<group>/<module>/<leaf>" */
    const char *a = strchr(rest, '/'), *b = a ? strchr(a + 1, '/') : NULL;
    if (!a || !b || strchr(b + 1, '/') || (size_t)(b - rest) >= sizeof sub || strlen(b + 1) >= sizeof lf) return false;
    memcpy(sub, rest, (size_t)(b - rest));
    sub[b - rest] = 0;
    const char *suffix = leaf(b + 1);
    if (!suffix) return false;
    bool bias = !strcmp(suffix, "bias");
    static const char *const QKV[3] = {"attn.query", "attn.key", "attn.value"};
    static const char *const QKV_B[3] = {"attn.query", NULL, "attn.value"};
    static const char *const KV[2] = {"cross_attn.key", "cross_attn.value"};
    static const char *const KV_B[2] = {NULL, "cross_attn.value"};
    static const struct {
        const char *ct2, *openai; /* a norm (gamma/beta) or a linear */
        bool dec_only;
    } map[] = {
        {"self_attention/layer_norm", "attn_ln", false}, {"self_attention/linear_1", "attn.out", false},
        {"ffn/layer_norm", "mlp_ln", false},             {"ffn/linear_0", "mlp.0", false},
        {"ffn/linear_1", "mlp.2", false},                {"attention/layer_norm", "cross_attn_ln", true},
        {"attention/linear_0", "cross_attn.query", true}, {"attention/linear_2", "cross_attn.out", true},
    };
    if (!strcmp(sub, "self_attention/linear_0")) return fused(g, pre, bias ? QKV_B : QKV, 3, bias, t);
    if (dec && !strcmp(sub, "attention/linear_1")) return fused(g, pre, bias ? KV_B : KV, 2, bias, t);
    for (size_t i = 0; i < sizeof map / sizeof *map; i++) {
        if (strcmp(sub, map[i].ct2) || (map[i].dec_only && !dec)) continue;
        bool norm = strstr(sub, "layer_norm") != NULL;
        /* norms take gamma/beta, linears weight/bias */
        if (norm != (!strcmp(b + 1, "gamma") || !strcmp(b + 1, "beta"))) return false;
        char name[256];
        snprintf(name, sizeof name, "%s.%s.%s", pre, map[i].openai, suffix);
        return single(g, name, false, t);
    }
    return false;
}

static bool gfind(const whisper_src *s, const char *name, wsrc_tensor *t) {
    const gsrc *g = s->impl;
    static const struct {
        const char *ct2, *openai;
    } top[] = {
        {"encoder/conv1/weight", "encoder.conv1.weight"},
        {"encoder/conv1/bias", "encoder.conv1.bias"},
        {"encoder/conv2/weight", "encoder.conv2.weight"},
        {"encoder/conv2/bias", "encoder.conv2.bias"},
        {"encoder/position_encodings/encodings", "encoder.positional_embedding"},
        {"encoder/layer_norm/gamma", "encoder.ln_post.weight"},
        {"encoder/layer_norm/beta", "encoder.ln_post.bias"},
        {"decoder/layer_norm/gamma", "decoder.ln.weight"},
        {"decoder/layer_norm/beta", "decoder.ln.bias"},
        {"decoder/embeddings/weight", "decoder.token_embedding.weight"},
        {"decoder/projection/weight", "decoder.token_embedding.weight"}, /* tied, as CTranslate2's alias */
        {"decoder/position_encodings/encodings", "decoder.positional_embedding"},
    };
    for (size_t i = 0; i < sizeof top / sizeof *top; i++)
        if (!strcmp(name, top[i].ct2)) return single(g, top[i].openai, true, t);
    for (int side = 0; side < 2; side++) {
        const char *sd = side ? "decoder" : "encoder";
        size_t n = strlen(sd);
        if (strncmp(name, sd, n) || strncmp(name + n, "/layer_", 7)) continue;
        char *end;
        const char *num = name + n + 7;
        if (*num < '0' || *num > '9') return false;
        long layer = strtol(num, &end, 10);
        if (*end != '/' || layer >= (side ? g->hp.n_text_layer : g->hp.n_audio_layer)) return false;
        return find_layer(g, sd, layer, end + 1, t);
    }
    return false;
}

/* ---- validation at open: every tensor whisper.cpp creates, its shape ---- */
static candle_status need(const whisper_src *s, const char *name, int rank, int64_t d0, int64_t d1, int64_t d2) {
    const gsrc *g = s->impl;
    const candle_ggml_whisper_tensor_info *t =
        candle_ggml_whisper_tensor(g->g, candle_ggml_whisper_find_tensor(g->g, name));
    if (!t) return gerr(s, "tensor '%s' missing%.0lld", name, 0);
    int64_t want[3] = {d0, d1, d2};
    bool ok = t->rank == rank;
    for (int i = 0; ok && i < rank; i++) ok = t->shape[i] == want[i];
    if (!ok) {
        char shp[160];
        int k = snprintf(shp, sizeof shp, "%s: shape [", name);
        for (int i = 0; i < rank && k > 0 && (size_t)k < sizeof shp; i++)
            k += snprintf(shp + k, sizeof shp - (size_t)k, "%s%lld", i ? ", " : "", (long long)want[i]);
        if (k > 0 && (size_t)k < sizeof shp) snprintf(shp + k, sizeof shp - (size_t)k, "] expected");
        return gerr(s, "tensor %s (rank %lld in the file)", shp, t->rank);
    }
    return CANDLE_OK;
}

static candle_status validate(const whisper_src *s) {
    const gsrc *g = s->impl;
    const candle_ggml_whisper_hparams *h = &g->hp;
    int64_t n = h->n_audio_state;
    candle_status r;
#define NEED(...)                                        \
    do {                                                 \
        if ((r = need(s, __VA_ARGS__))) return r;        \
    } while (0)
    NEED("encoder.positional_embedding", 2, h->n_audio_ctx, n, 0);
    NEED("encoder.conv1.weight", 3, n, h->n_mels, 3);
    NEED("encoder.conv1.bias", 2, n, 1, 0);
    NEED("encoder.conv2.weight", 3, n, n, 3);
    NEED("encoder.conv2.bias", 2, n, 1, 0);
    NEED("encoder.ln_post.weight", 1, n, 0, 0);
    NEED("encoder.ln_post.bias", 1, n, 0, 0);
    NEED("decoder.positional_embedding", 2, h->n_text_ctx, n, 0);
    NEED("decoder.token_embedding.weight", 2, h->n_vocab, n, 0);
    NEED("decoder.ln.weight", 1, n, 0, 0);
    NEED("decoder.ln.bias", 1, n, 0, 0);
    for (int side = 0; side < 2; side++) {
        int32_t nl = side ? h->n_text_layer : h->n_audio_layer;
        for (int32_t l = 0; l < nl; l++) {
            char p[256];
            const char *sd = side ? "decoder" : "encoder";
            static const char *const attn[2] = {"attn", "cross_attn"};
            for (int a = 0; a < 1 + side; a++) {
#define LAYER(fmt, ...) (snprintf(p, sizeof p, "%s.blocks.%d." fmt, sd, (int)l, attn[a]), need(s, p, __VA_ARGS__))
                if ((r = LAYER("%s_ln.weight", 1, n, 0, 0)) || (r = LAYER("%s_ln.bias", 1, n, 0, 0)) ||
                    (r = LAYER("%s.query.weight", 2, n, n, 0)) || (r = LAYER("%s.query.bias", 1, n, 0, 0)) ||
                    (r = LAYER("%s.key.weight", 2, n, n, 0)) || (r = LAYER("%s.value.weight", 2, n, n, 0)) ||
                    (r = LAYER("%s.value.bias", 1, n, 0, 0)) || (r = LAYER("%s.out.weight", 2, n, n, 0)) ||
                    (r = LAYER("%s.out.bias", 1, n, 0, 0)))
                    return r;
#undef LAYER
            }
#define MLP(fmt, ...) (snprintf(p, sizeof p, "%s.blocks.%d." fmt, sd, (int)l), need(s, p, __VA_ARGS__))
            if ((r = MLP("mlp_ln.weight", 1, n, 0, 0)) || (r = MLP("mlp_ln.bias", 1, n, 0, 0)) ||
                (r = MLP("mlp.0.weight", 2, 4 * n, n, 0)) || (r = MLP("mlp.0.bias", 1, 4 * n, 0, 0)) ||
                (r = MLP("mlp.2.weight", 2, n, 4 * n, 0)) || (r = MLP("mlp.2.bias", 1, n, 0, 0)))
                return r;
#undef MLP
        }
    }
#undef NEED
    return CANDLE_OK;
}

/* ---- the tokenizer ---- */

/* Token i's bytes. whisper.cpp's early converters wrote the vocabulary
 * decoded as UTF-8 with errors='replace', so the models they made (still
 * the ones most users have) hold U+FFFD for every token that is not whole
 * UTF-8; the 256 single bytes come back from their ranks, the others stay
 * as stored (they decode to U+FFFD, as in whisper.cpp, and repeat). */
static void tok_at(const gsrc *g, int32_t i, const char **p, size_t *n) {
    candle_ggml_whisper_token(g->g, i, p, n);
    if (i < 256 && *n == 3 && !memcmp(*p, "\xef\xbf\xbd", 3)) {
        *p = &g->rank_byte[i];
        *n = 1;
    }
}

/* GPT-2's bytes_to_unicode: the code point byte b is written as. */
static uint32_t byte_cp(uint8_t b) {
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE)) return b;
    /* the others in order from U+0100 */
    uint32_t k = 0;
    for (uint32_t x = 0; x < b; x++)
        if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE))) k++;
    return 256 + k;
}

typedef struct cps {
    char utf8[256][3]; /* byte -> its code point in UTF-8 (1 or 2 bytes) */
    uint8_t len[256];
} cps;

static void cps_init(cps *c) {
    for (int b = 0; b < 256; b++) {
        uint32_t cp = byte_cp((uint8_t)b);
        if (cp < 0x80) {
            c->utf8[b][0] = (char)cp;
            c->len[b] = 1;
        } else {
            c->utf8[b][0] = (char)(0xC0 | (cp >> 6));
            c->utf8[b][1] = (char)(0x80 | (cp & 0x3F));
            c->len[b] = 2;
        }
    }
}

/* A token's byte-level text as a JSON string body. */
static void put_bytes(cdl_strbuf *o, const cps *c, const char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)p[i];
        if (b == '"' || b == '\\') cdl_strbuf_put(o, "\\", 1);
        cdl_strbuf_put(o, c->utf8[b], c->len[b]);
    }
}

/* bytes -> rank over the vocabulary below eot (open addressing). */
typedef struct rank_map {
    int32_t *slot; /* rank + 1, 0 empty */
    size_t cap;
    const gsrc *g;
} rank_map;

static uint64_t hash_bytes(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    return h;
}

/* The rank of p[0..n), or -1; with insert, adds rank id when absent and
 * gives the rank already there when present. */
static int32_t rank_get(rank_map *m, const char *p, size_t n, int32_t insert) {
    for (size_t i = hash_bytes(p, n) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->slot[i]) {
            if (insert >= 0) m->slot[i] = insert + 1;
            return -1;
        }
        const char *q;
        size_t qn;
        tok_at(m->g, m->slot[i] - 1, &q, &qn);
        if (qn == n && !memcmp(p, q, n)) return m->slot[i] - 1;
    }
}

typedef struct merge {
    int32_t l, r; /* token ids */
} merge;

static candle_status build_json(const whisper_src *s, cdl_strbuf *o) {
    const gsrc *g = s->impl;
    cps c;
    cps_init(&c);
    rank_map m = {NULL, 64, g};
    while (m.cap < (size_t)g->eot * 2) m.cap *= 2;
    m.slot = calloc(m.cap, sizeof *m.slot);
    if (!m.slot) return cdl_set_error(NULL, CANDLE_ERR_OOM, "%s: out of memory (vocabulary)", s->path);
    candle_status r = CANDLE_OK;
    /* a repeated token (a lossy vocabulary) keeps the first id for encoding */
    for (int32_t i = 0; i < g->eot; i++) {
        const char *p;
        size_t n;
        tok_at(g, i, &p, &n);
        rank_get(&m, p, n, i);
    }
    cdl_strbuf_str(o, "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[");
    static const char *const after[] = {"<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>",
                                        "<|nocaptions|>", "<|notimestamps|>"};
    int32_t n_special = 2 + g->n_lang + 6;
    for (int32_t k = 0; k < n_special && !r; k++) {
        char name[32];
        if (k == 0) snprintf(name, sizeof name, "<|endoftext|>");
        else if (k == 1) snprintf(name, sizeof name, "<|startoftranscript|>");
        else if (k < 2 + g->n_lang) snprintf(name, sizeof name, "<|%s|>", candle_whisper_language_at(k - 2));
        else snprintf(name, sizeof name, "%s", after[k - 2 - g->n_lang]);
        char e[160];
        snprintf(e, sizeof e,
                 "%s{\"id\":%d,\"content\":\"%s\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
                 "\"normalized\":false,\"special\":true}",
                 k ? "," : "", (int)(g->eot + k), name);
        cdl_strbuf_str(o, e);
    }
    cdl_strbuf_str(o, "],\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                      "\"trim_offsets\":true,\"use_regex\":true},\"post_processor\":null,\"decoder\":{\"type\":"
                      "\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true,\"use_regex\":true},\"model\":{"
                      "\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,\"continuing_subword_prefix\":\"\","
                      "\"end_of_word_suffix\":\"\",\"fuse_unk\":false,\"vocab\":{");
    for (int32_t i = 0; i < g->eot && !r; i++) {
        const char *p;
        size_t n;
        char id[24];
        tok_at(g, i, &p, &n);
        cdl_strbuf_str(o, i ? ",\"" : "\"");
        put_bytes(o, &c, p, n);
        snprintf(id, sizeof id, "\":%d", (int)i);
        cdl_strbuf_str(o, id);
    }
    /* every token's splits into two tokens (a local order by the pieces'
     * ranks), tokens in rank order: transformers' TikTokenConverter */
    cdl_strbuf_str(o, "},\"merges\":[");
    merge *local = NULL;
    size_t cap = 0;
    bool first = true;
    for (int32_t i = 0; i < g->eot && !r; i++) {
        const char *p;
        size_t n, k = 0;
        tok_at(g, i, &p, &n);
        if (n < 2 || rank_get(&m, p, n, -1) != i) continue; /* a repeat merges as its first */
        if (cap < n) {
            merge *nl = realloc(local, n * sizeof *nl);
            if (!nl) {
                r = cdl_set_error(NULL, CANDLE_ERR_OOM, "%s: out of memory (merges)", s->path);
                break;
            }
            local = nl;
            cap = n;
        }
        for (size_t j = 1; j < n; j++) {
            int32_t a = rank_get(&m, p, j, -1), b = a >= 0 ? rank_get(&m, p + j, n - j, -1) : -1;
            if (b >= 0) local[k++] = (merge){a, b};
        }
        /* insertion sort: a token has few splits */
        for (size_t x = 1; x < k; x++)
            for (size_t y = x; y > 0 && (local[y].l < local[y - 1].l ||
                                         (local[y].l == local[y - 1].l && local[y].r < local[y - 1].r));
                 y--) {
                merge t = local[y];
                local[y] = local[y - 1];
                local[y - 1] = t;
            }
        for (size_t x = 0; x < k; x++) {
            const char *lp, *rp;
            size_t ln, rn;
            tok_at(g, local[x].l, &lp, &ln);
            tok_at(g, local[x].r, &rp, &rn);
            cdl_strbuf_str(o, first ? "\"" : ",\"");
            first = false;
            put_bytes(o, &c, lp, ln);
            cdl_strbuf_put(o, " ", 1);
            put_bytes(o, &c, rp, rn);
            cdl_strbuf_put(o, "\"", 1);
        }
    }
    free(local);
    free(m.slot);
    cdl_strbuf_str(o, "]}}");
    if (!r && o->failed) r = cdl_set_error(NULL, CANDLE_ERR_OOM, "%s: out of memory (tokenizer)", s->path);
    return r;
}

static candle_status gtokenizer(const whisper_src *s, candle_tokenizer **tok) {
    *tok = NULL;
    cdl_strbuf o = {0};
    candle_status r = build_json(s, &o);
    if (!r) r = candle_tokenizer_from_hf_memory(tok, o.s, o.n, NULL, 0, s->file);
    free(o.s);
    return r;
}

/* ---- the configuration ---- */

static int32_t single_token(const candle_tokenizer *tok, const char *text) {
    int32_t ids[64];
    int64_t n = 0;
    if (candle_tokenizer_encode(tok, text, strlen(text), false, false, ids, 64, &n) || n < 1) return -1;
    return n == 1 ? ids[0] : -2 - ids[0]; /* -2 - first id: several tokens */
}

static void add_id(int32_t *v, int *n, int32_t id) {
    if (id < 0) return;
    for (int i = 0; i < *n; i++)
        if (v[i] == id) return;
    if (*n < WHISPER_MAX_SUPPRESS) v[(*n)++] = id;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* openai-whisper's tokenizer.non_speech_tokens and the special tokens
 * DecodingTask._get_suppress_tokens adds for suppress_tokens "-1"
 * (CTranslate2's converter writes the same list into config.json). */
static candle_status gconfig(const whisper_src *s, const candle_tokenizer *tok, whisper_cfg *cfg) {
    const gsrc *g = s->impl;
    memset(cfg, 0, sizeof *cfg);
    static const char *const symbols[] = {
        "\"", "#", "(", ")", "*", "+", "/", ":", ";", "<", "=", ">", "@", "[", "\\", "]", "^", "_", "`",
        "{", "|", "}", "~", "「", "」", "『", "』", "<<", ">>", "<<<", ">>>", "--", "---", "-(", "-[",
        "('", "(\"", "((", "))", "(((", ")))", "[[", "]]", "{{", "}}", "♪♪", "♪♪♪"};
    static const char *const misc[] = {"♩", "♪", "♫", "♬", "♭", "♮", "♯"};
    int32_t id = single_token(tok, " -");
    add_id(cfg->suppress, &cfg->n_suppress, id >= 0 ? id : -2 - id);
    id = single_token(tok, " '");
    add_id(cfg->suppress, &cfg->n_suppress, id >= 0 ? id : -2 - id);
    for (size_t i = 0; i < sizeof symbols / sizeof *symbols + sizeof misc / sizeof *misc; i++) {
        bool is_misc = i >= sizeof symbols / sizeof *symbols;
        const char *sym = is_misc ? misc[i - sizeof symbols / sizeof *symbols] : symbols[i];
        char spaced[32];
        snprintf(spaced, sizeof spaced, " %s", sym);
        for (int k = 0; k < 2; k++) {
            id = single_token(tok, k ? spaced : sym);
            /* a multi-token encoding counts only for the music symbols (its first token) */
            if (id >= 0 || (is_misc && id < -1)) add_id(cfg->suppress, &cfg->n_suppress, id >= 0 ? id : -2 - id);
        }
    }
    int32_t tr = g->sot + 1 + g->n_lang;
    add_id(cfg->suppress, &cfg->n_suppress, tr + 1); /* transcribe */
    add_id(cfg->suppress, &cfg->n_suppress, tr);     /* translate */
    add_id(cfg->suppress, &cfg->n_suppress, g->sot);
    add_id(cfg->suppress, &cfg->n_suppress, tr + 3); /* startofprev */
    add_id(cfg->suppress, &cfg->n_suppress, tr + 2); /* startoflm */
    add_id(cfg->suppress, &cfg->n_suppress, tr + 4); /* nospeech */
    qsort(cfg->suppress, (size_t)cfg->n_suppress, sizeof *cfg->suppress, cmp_i32);
    id = single_token(tok, " ");
    add_id(cfg->suppress_begin, &cfg->n_suppress_begin, id >= 0 ? id : -2 - id);
    add_id(cfg->suppress_begin, &cfg->n_suppress_begin, g->eot);
    for (int32_t i = 0; i < g->n_lang && i < WHISPER_MAX_LANGS; i++) cfg->lang_ids[cfg->n_lang++] = g->sot + 1 + i;
    return CANDLE_OK;
}

/* ---- open / close ---- */

static void gclose(whisper_src *s) {
    gsrc *g = s->impl;
    if (g) candle_ggml_whisper_close(g->g);
    free(g);
    s->impl = NULL;
}

static candle_status setup(whisper_src *s, gsrc *g) {
    const candle_ggml_whisper_hparams *h = &g->hp;
    if (h->n_audio_state != h->n_text_state || h->n_audio_head != h->n_text_head)
        return gerr(s, "%sencoder and decoder widths or heads differ (%lld)", "", h->n_text_state);
    if (h->n_audio_state % h->n_audio_head)
        return gerr(s, "%sn_audio_state is not a multiple of n_audio_head (%lld)", "", h->n_audio_head);
    /* whisper.cpp's vocabulary layout: 51765 + the languages (+1 multilingual) */
    g->multilingual = h->n_vocab >= 51865;
    g->n_lang = h->n_vocab - 51765 - (g->multilingual ? 1 : 0);
    int n_known = 0;
    while (candle_whisper_language_at(n_known)) n_known++;
    if (g->n_lang < 1 || g->n_lang > n_known)
        return gerr(s, "%sn_vocab %lld is not a Whisper vocabulary (51765 + the languages)", "", h->n_vocab);
    g->eot = g->multilingual ? 50257 : 50256;
    for (int b = 0, k = 0; b < 256; b++) /* the printable bytes first, then the rest */
        if (byte_cp((uint8_t)b) < 256) g->rank_byte[k++] = (char)b;
    for (int b = 0, k = 0; b < 256; b++)
        if (byte_cp((uint8_t)b) >= 256) g->rank_byte[188 + k++] = (char)b;
    g->sot = g->eot + 1;
    if (candle_ggml_whisper_n_tokens(g->g) < g->eot)
        return gerr(s, "%svocabulary of %lld tokens ends before <|endoftext|>", "",
                    (long long)candle_ggml_whisper_n_tokens(g->g));
    return validate(s);
}

candle_status whisper_src_open_ggml(whisper_src *s, const char *path, bool no_mmap) {
    if (!s || !path) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "whisper_src_open_ggml: NULL argument");
    memset(s, 0, sizeof *s);
    snprintf(s->path, sizeof s->path, "%s", path);
    const char *slash = strrchr(s->path, '/');
    s->file = slash ? slash + 1 : s->path;
    gsrc *g = calloc(1, sizeof *g);
    if (!g) return cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
    s->impl = g;
    s->find = gfind;
    s->tokenizer = gtokenizer;
    s->config = gconfig;
    s->close = gclose;
    candle_ggml_whisper_open_params op = {.no_mmap = no_mmap};
    candle_status r = candle_ggml_whisper_open(&g->g, path, &op);
    if (!r) {
        g->hp = *candle_ggml_whisper_get_hparams(g->g);
        s->n_head = g->hp.n_audio_head;
        r = setup(s, g);
    }
    if (r) gclose(s);
    return r;
}
