/* Whisper (whisper.h) from a CTranslate2 model directory: the weights of
 * model.bin widened to f32 at load (CTranslate2 on a CPU computes a float16
 * model in f32 too, so the products see the same weights), the encoder graph
 * of one 30 s window, and the decoder with a self-attention KV cache and
 * cross-attention keys and values computed once per window.
 *
 * CTranslate2's WhisperSpec fuses the projections: self-attention linear_0
 * is Q|K|V ([3 n_state, n_state]), cross-attention linear_0 Q and linear_1
 * K|V; Whisper's key projections have no bias and the converter stores
 * zeros there, so a fused bias is used as it is. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candle/ct2.h"
#include "candle/whisper.h"
#include "core/json-impl.h"
#include "model-impl.h"

#define WHISPER_MAX_LAYERS 64
#define WHISPER_LN_EPS 1e-5
#define WHISPER_MAX_SUPPRESS 1024

typedef struct wlin {
    candle_tensor *w, *b; /* [out, in], [out] or NULL */
} wlin;

typedef struct wnorm {
    candle_tensor *g, *b;
} wnorm;

typedef struct wlayer {
    wnorm attn_ln, cross_ln, ffn_ln;
    wlin qkv, attn_out;          /* self-attention */
    wlin cross_q, cross_kv, cross_out; /* decoder only */
    wlin fc1, fc2;
} wlayer;

struct candle_whisper {
    candle_ctx *wctx; /* owns the f32 weights */
    candle_tokenizer *tok;
    candle_whisper_dims d;
    candle_tensor *conv1_w, *conv1_b, *conv2_w, *conv2_b, *enc_pos;
    wnorm enc_ln, dec_ln;
    wlayer enc[WHISPER_MAX_LAYERS], dec[WHISPER_MAX_LAYERS];
    candle_tensor *tok_embd, *dec_pos;
    int32_t sot, no_timestamps, eot;
    int32_t suppress[WHISPER_MAX_SUPPRESS], suppress_begin[WHISPER_MAX_SUPPRESS];
    int n_suppress, n_suppress_begin;
};

candle_whisper_params candle_whisper_default_params(void) {
    return (candle_whisper_params){.no_mmap = false};
}

candle_whisper_transcribe_params candle_whisper_transcribe_default_params(void) {
    return (candle_whisper_transcribe_params){.n_threads = 0, .max_tokens = 0};
}

/* ---- loading ---- */

/* A float variable widened to f32 (malloc'ed; *v its description). The
 * bytes of the image may sit at any alignment, hence the memcpy. */
static float *read_f32(const candle_ct2 *m, const char *name, const candle_ct2_var_info **vout) {
    int64_t i = candle_ct2_find_var(m, name);
    const candle_ct2_var_info *v = i >= 0 ? candle_ct2_var(m, i) : NULL;
    if (!v || v->rank < 1) {
        candle_set_error(NULL, CANDLE_ERR_FORMAT, "whisper: model.bin lacks %s", name);
        return NULL;
    }
    if (v->ct2_dtype != CANDLE_CT2_F32 && v->ct2_dtype != CANDLE_CT2_F16 && v->ct2_dtype != CANDLE_CT2_BF16) {
        candle_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "whisper: %s is %s (want a float type)", name,
                         candle_ct2_dtype_name(v->ct2_dtype));
        return NULL;
    }
    int64_t n = 1;
    for (int k = 0; k < v->rank; k++) n *= v->shape[k];
    float *buf = malloc((size_t)n * sizeof *buf);
    if (!buf) {
        candle_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory reading %s", name);
        return NULL;
    }
    const unsigned char *p = v->data;
    for (int64_t k = 0; k < n; k++) {
        uint16_t h;
        if (v->ct2_dtype == CANDLE_CT2_F32) memcpy(&buf[k], p + 4 * k, 4);
        else if (memcpy(&h, p + 2 * k, 2), v->ct2_dtype == CANDLE_CT2_F16) buf[k] = candle_f16_to_f32(h);
        else buf[k] = candle_bf16_to_f32(h);
    }
    *vout = v;
    return buf;
}

static candle_tensor *leaf(candle_whisper *w, const char *name, int rank, const int64_t *shape, float *buf) {
    candle_tensor *t = buf ? candle_tensor_from_f32(w->wctx, CANDLE_DTYPE_F32, rank, shape, buf) : NULL;
    free(buf);
    if (t) candle_tensor_set_name(t, name);
    return t;
}

/* A variable as an f32 leaf of the weight context. */
static candle_tensor *load_f32(candle_whisper *w, const candle_ct2 *m, const char *name) {
    const candle_ct2_var_info *v = NULL;
    float *buf = read_f32(m, name, &v);
    return buf ? leaf(w, name, v->rank, v->shape, buf) : NULL;
}

/* A conv weight [O, C, K] as the matrix [O, K*C] (column k*C + c) that
 * multiplies the frames' im2col rows (conv_gelu). */
static candle_tensor *load_conv(candle_whisper *w, const candle_ct2 *m, const char *name) {
    const candle_ct2_var_info *v = NULL;
    float *buf = read_f32(m, name, &v);
    if (!buf) return NULL;
    if (v->rank != 3 || v->shape[2] != 3) {
        free(buf);
        candle_set_error(NULL, CANDLE_ERR_FORMAT, "whisper: %s is not a [O, C, 3] kernel", name);
        return NULL;
    }
    int64_t O = v->shape[0], C = v->shape[1], K = 3, shape[2] = {O, K * C};
    float *t = malloc((size_t)(O * C * K) * sizeof *t);
    for (int64_t o = 0; t && o < O; o++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t k = 0; k < K; k++) t[o * K * C + k * C + c] = buf[(o * C + c) * K + k];
    free(buf);
    if (!t) candle_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory reading %s", name);
    return leaf(w, name, 2, shape, t);
}

/* A scalar attribute (num_heads) or -1. */
static int64_t load_scalar(const candle_ct2 *m, const char *name) {
    int64_t i = candle_ct2_find_var(m, name);
    const candle_ct2_var_info *v = i >= 0 ? candle_ct2_var(m, i) : NULL;
    if (!v || v->rank != 0) return -1;
    int16_t s16;
    int32_t s32;
    if (v->ct2_dtype == CANDLE_CT2_I16 && v->size == 2) return memcpy(&s16, v->data, 2), s16;
    if (v->ct2_dtype == CANDLE_CT2_I32 && v->size == 4) return memcpy(&s32, v->data, 4), s32;
    return -1;
}

static bool has_var(const candle_ct2 *m, const char *name) { return candle_ct2_find_var(m, name) >= 0; }

static bool load_lin(candle_whisper *w, const candle_ct2 *m, const char *pre, wlin *l) {
    char name[320];
    snprintf(name, sizeof name, "%s/weight", pre);
    l->w = load_f32(w, m, name);
    snprintf(name, sizeof name, "%s/bias", pre);
    l->b = has_var(m, name) ? load_f32(w, m, name) : NULL;
    return l->w && (l->b || !has_var(m, name));
}

static bool load_norm(candle_whisper *w, const candle_ct2 *m, const char *pre, wnorm *n) {
    char name[320];
    snprintf(name, sizeof name, "%s/gamma", pre);
    n->g = load_f32(w, m, name);
    snprintf(name, sizeof name, "%s/beta", pre);
    n->b = load_f32(w, m, name);
    return n->g && n->b;
}

static bool load_layer(candle_whisper *w, const candle_ct2 *m, const char *side, int64_t il, wlayer *l) {
    char p[192], q[256];
    snprintf(p, sizeof p, "%s/layer_%lld", side, (long long)il);
    bool ok = true;
#define SUB(fmt, call) (snprintf(q, sizeof q, fmt, p), ok = ok && (call))
    SUB("%s/self_attention/layer_norm", load_norm(w, m, q, &l->attn_ln));
    SUB("%s/self_attention/linear_0", load_lin(w, m, q, &l->qkv));
    SUB("%s/self_attention/linear_1", load_lin(w, m, q, &l->attn_out));
    SUB("%s/ffn/layer_norm", load_norm(w, m, q, &l->ffn_ln));
    SUB("%s/ffn/linear_0", load_lin(w, m, q, &l->fc1));
    SUB("%s/ffn/linear_1", load_lin(w, m, q, &l->fc2));
    if (!strcmp(side, "decoder")) {
        SUB("%s/attention/layer_norm", load_norm(w, m, q, &l->cross_ln));
        SUB("%s/attention/linear_0", load_lin(w, m, q, &l->cross_q));
        SUB("%s/attention/linear_1", load_lin(w, m, q, &l->cross_kv));
        SUB("%s/attention/linear_2", load_lin(w, m, q, &l->cross_out));
    }
#undef SUB
    return ok;
}

static int64_t count_layers(const candle_ct2 *m, const char *side) {
    int64_t n = 0;
    char name[192];
    for (;; n++) {
        snprintf(name, sizeof name, "%s/layer_%lld/ffn/linear_0/weight", side, (long long)n);
        if (!has_var(m, name)) return n;
    }
}

static bool load_weights(candle_whisper *w, const candle_ct2 *m) {
    candle_whisper_dims *d = &w->d;
    d->n_audio_layer = count_layers(m, "encoder");
    d->n_text_layer = count_layers(m, "decoder");
    d->n_head = load_scalar(m, "encoder/num_heads");
    if (d->n_audio_layer < 1 || d->n_text_layer < 1 || d->n_audio_layer > WHISPER_MAX_LAYERS ||
        d->n_text_layer > WHISPER_MAX_LAYERS || d->n_head < 1 || load_scalar(m, "decoder/num_heads") != d->n_head) {
        candle_set_error(NULL, CANDLE_ERR_FORMAT, "whisper: model.bin: %lld/%lld layers, %lld heads (unsupported)",
                         (long long)d->n_audio_layer, (long long)d->n_text_layer, (long long)d->n_head);
        return false;
    }
    bool ok = (w->conv1_w = load_conv(w, m, "encoder/conv1/weight")) && (w->conv1_b = load_f32(w, m, "encoder/conv1/bias")) &&
              (w->conv2_w = load_conv(w, m, "encoder/conv2/weight")) && (w->conv2_b = load_f32(w, m, "encoder/conv2/bias")) &&
              (w->enc_pos = load_f32(w, m, "encoder/position_encodings/encodings")) &&
              load_norm(w, m, "encoder/layer_norm", &w->enc_ln) && load_norm(w, m, "decoder/layer_norm", &w->dec_ln) &&
              (w->tok_embd = load_f32(w, m, "decoder/embeddings/weight")) &&
              (w->dec_pos = load_f32(w, m, "decoder/position_encodings/encodings"));
    for (int64_t il = 0; ok && il < d->n_audio_layer; il++) ok = load_layer(w, m, "encoder", il, &w->enc[il]);
    for (int64_t il = 0; ok && il < d->n_text_layer; il++) ok = load_layer(w, m, "decoder", il, &w->dec[il]);
    if (!ok) return false;
    d->n_mels = w->conv1_w->shape[1] / 3;
    d->n_state = w->conv1_w->shape[0];
    d->n_audio_ctx = w->enc_pos->shape[0];
    d->n_vocab = w->tok_embd->shape[0];
    d->n_text_ctx = w->dec_pos->shape[0];
    /* conv2 halves 3000 frames to the 1500 positions the encodings cover */
    if (d->n_state % d->n_head || w->conv2_w->shape[1] != 3 * d->n_state || w->enc_pos->shape[1] != d->n_state || w->tok_embd->shape[1] != d->n_state ||
        d->n_audio_ctx * 2 != CANDLE_WHISPER_CHUNK_FRAMES || w->enc[0].qkv.w->shape[0] != 3 * d->n_state) {
        candle_set_error(NULL, CANDLE_ERR_FORMAT, "whisper: model.bin: inconsistent shapes");
        return false;
    }
    return true;
}


static int read_ids(const json_value *arr, int32_t *out, int64_t n_vocab) {
    int n = 0;
    for (size_t i = 0; arr && i < arr->n && n < WHISPER_MAX_SUPPRESS; i++) {
        int64_t v;
        if (json_as_i64(json_at(arr, i), &v) && v >= 0 && v < n_vocab) out[n++] = (int32_t)v;
    }
    return n;
}

static candle_status load_config(candle_whisper *w, const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_doc *doc;
    candle_status s = json_parse_file(&doc, path, NULL, (size_t)16 << 20);
    if (s) return s;
    const json_value *root = json_root(doc);
    w->n_suppress = read_ids(json_get(root, "suppress_ids"), w->suppress, w->d.n_vocab);
    w->n_suppress_begin = read_ids(json_get(root, "suppress_ids_begin"), w->suppress_begin, w->d.n_vocab);
    json_free(doc);
    return CANDLE_OK;
}

static candle_status load_tokenizer(candle_whisper *w, const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    candle_status s = candle_tokenizer_from_hf_file(&w->tok, path, NULL);
    if (s) return s;
    w->sot = candle_tokenizer_find(w->tok, "<|startoftranscript|>");
    w->no_timestamps = candle_tokenizer_find(w->tok, "<|notimestamps|>");
    w->eot = candle_tokenizer_find(w->tok, "<|endoftext|>");
    if (w->sot < 0 || w->no_timestamps < 0 || w->eot < 0 || w->sot >= w->d.n_vocab ||
        w->no_timestamps >= w->d.n_vocab || w->eot >= w->d.n_vocab)
        return candle_set_error(NULL, CANDLE_ERR_FORMAT, "%s: lacks Whisper's special tokens", path);
    return CANDLE_OK;
}

candle_status candle_whisper_load(candle_whisper **out, const char *dir, const candle_whisper_params *p) {
    if (!out || !dir) return candle_set_error(NULL, CANDLE_ERR_INVALID_ARG, "whisper_load: NULL argument");
    *out = NULL;
    candle_whisper_params def = candle_whisper_default_params();
    if (!p) p = &def;
    char path[4096];
    snprintf(path, sizeof path, "%s/model.bin", dir);
    candle_ct2_open_params op = {.no_mmap = p->no_mmap};
    candle_ct2 *m = NULL;
    candle_status s = candle_ct2_open(&m, path, &op);
    if (s) return s;
    candle_whisper *w = calloc(1, sizeof *w);
    if (!w) {
        candle_ct2_close(m);
        return candle_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
    }
    if (strcmp(candle_ct2_spec(m), "WhisperSpec"))
        s = candle_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "%s: spec %s, not WhisperSpec", path, candle_ct2_spec(m));
    if (!s) s = candle_ctx_init(&w->wctx, NULL);
    if (!s && !load_weights(w, m)) s = candle_last_error() ? candle_last_error() : CANDLE_ERR_FORMAT;
    candle_ct2_close(m); /* the weights were copied out */
    if (!s) s = load_config(w, dir);
    if (!s) s = load_tokenizer(w, dir);
    if (s) {
        candle_whisper_free(w);
        return s;
    }
    *out = w;
    return CANDLE_OK;
}

void candle_whisper_free(candle_whisper *w) {
    if (!w) return;
    candle_tokenizer_free(w->tok);
    candle_ctx_free(w->wctx);
    free(w);
}

candle_whisper_dims candle_whisper_get_dims(const candle_whisper *w) {
    return w ? w->d : (candle_whisper_dims){0};
}

const candle_tokenizer *candle_whisper_tokenizer(const candle_whisper *w) { return w ? w->tok : NULL; }

/* ---- graphs ---- */

static candle_tensor *lin(candle_ctx *ctx, candle_tensor *x, const wlin *l) {
    return candle_linear(ctx, x, l->w, l->b);
}

static candle_tensor *norm(candle_ctx *ctx, candle_tensor *x, const wnorm *n) {
    return candle_layer_norm(ctx, x, n->g, n->b, WHISPER_LN_EPS);
}

/* [n, H*D] -> [1, H, n, D] */
static candle_tensor *to_heads(candle_ctx *ctx, const candle_whisper_dims *d, candle_tensor *x) {
    int64_t n = x->shape[0];
    int64_t shape[3] = {n, d->n_head, d->n_state / d->n_head};
    candle_tensor *h = candle_reshape_copy(ctx, x, 3, shape);
    return candle_unsqueeze(ctx, candle_transpose(ctx, h, 0, 1), 0);
}

/* [1, H, n, D] -> [n, H*D] */
static candle_tensor *from_heads(candle_ctx *ctx, const candle_whisper_dims *d, candle_tensor *o) {
    int64_t flat[2] = {o->shape[2], d->n_state};
    return candle_reshape_copy(ctx, candle_transpose(ctx, candle_squeeze(ctx, o, 0), 0, 1), 2, flat);
}

static candle_tensor *mlp(candle_ctx *ctx, const wlayer *l, candle_tensor *x) {
    candle_tensor *h = candle_unary(ctx, CANDLE_OP_GELU_ERF, lin(ctx, norm(ctx, x, &l->ffn_ln), &l->fc1));
    return candle_add(ctx, x, lin(ctx, h, &l->fc2));
}

static candle_tensor *enc_block(candle_ctx *ctx, const candle_whisper *w, const wlayer *l, candle_tensor *x) {
    int64_t ns = w->d.n_state;
    candle_tensor *y = lin(ctx, norm(ctx, x, &l->attn_ln), &l->qkv);
    candle_tensor *q = to_heads(ctx, &w->d, candle_narrow(ctx, y, 1, 0, ns));
    candle_tensor *k = to_heads(ctx, &w->d, candle_narrow(ctx, y, 1, ns, ns));
    candle_tensor *v = to_heads(ctx, &w->d, candle_narrow(ctx, y, 1, 2 * ns, ns));
    candle_tensor *o = candle_attention(ctx, q, k, v, NULL, 0, false);
    x = candle_add(ctx, x, lin(ctx, from_heads(ctx, &w->d, o), &l->attn_out));
    return mlp(ctx, l, x);
}

/* A kernel-3, padding-1 convolution of frames x [L, C] as one product:
 * rows t of [x[s t - 1], x[s t], x[s t + 1]] (zeros past the ends) times
 * the [O, 3C] weight (load_conv), + bias, GELU: [L / s, O]. CTranslate2
 * computes it as im2col + GEMM too; the direct conv op is far slower. */
static candle_tensor *conv_gelu(candle_ctx *ctx, candle_tensor *x, candle_tensor *w, candle_tensor *b, int s) {
    int64_t L = x->shape[0], C = x->shape[1], Lo = L / s, zs[2] = {1, C};
    candle_tensor *z = candle_zeros(ctx, CANDLE_DTYPE_F32, 2, zs);
    candle_tensor *parts[3] = {z, x, z};
    candle_tensor *xp = candle_concat(ctx, parts, 3, 0); /* [L + 2, C] */
    candle_tensor *k[3];
    if (s == 1) {
        for (int i = 0; i < 3; i++) k[i] = candle_narrow(ctx, xp, 0, i, Lo);
    } else { /* s == 2, L even: padded row pairs [(L + 2) / 2, 2C] */
        int64_t rs[2] = {(L + 2) / 2, 2 * C};
        candle_tensor *r = candle_reshape_copy(ctx, xp, 2, rs);
        k[0] = candle_narrow(ctx, candle_narrow(ctx, r, 0, 0, Lo), 1, 0, C);
        k[1] = candle_narrow(ctx, candle_narrow(ctx, r, 0, 0, Lo), 1, C, C);
        k[2] = candle_narrow(ctx, candle_narrow(ctx, r, 0, 1, Lo), 1, 0, C);
    }
    candle_tensor *col = candle_concat(ctx, k, 3, 1); /* [Lo, 3C] */
    return candle_unary(ctx, CANDLE_OP_GELU_ERF, candle_linear(ctx, col, w, b));
}

/* mel [n_mels][3000] -> [n_audio_ctx, n_state] */
static candle_tensor *encoder_graph(candle_ctx *ctx, const candle_whisper *w, const float *mel) {
    int64_t shape[2] = {w->d.n_mels, CANDLE_WHISPER_CHUNK_FRAMES};
    candle_tensor *x = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 2, shape, mel);
    x = candle_contiguous(ctx, candle_transpose(ctx, x, 0, 1)); /* frames as rows */
    x = conv_gelu(ctx, x, w->conv1_w, w->conv1_b, 1);
    x = conv_gelu(ctx, x, w->conv2_w, w->conv2_b, 2); /* [1500, n_state] */
    x = candle_add(ctx, x, w->enc_pos);
    for (int64_t il = 0; il < w->d.n_audio_layer && x; il++) x = enc_block(ctx, w, &w->enc[il], x);
    return norm(ctx, x, &w->enc_ln);
}

static candle_status ctx_for(candle_ctx **ctx, int n_threads) {
    candle_ctx_params cp = candle_ctx_default_params();
    cp.n_threads = n_threads;
    return candle_ctx_init(ctx, &cp);
}

candle_status candle_whisper_encode(const candle_whisper *w, const float *mel, int n_threads, float *out,
                                    size_t out_len) {
    if (!w || !mel || !out) return candle_set_error(NULL, CANDLE_ERR_INVALID_ARG, "whisper_encode: NULL argument");
    size_t need = (size_t)(w->d.n_audio_ctx * w->d.n_state);
    if (out_len < need)
        return candle_set_error(NULL, CANDLE_ERR_INVALID_ARG, "whisper_encode: out of %zu floats, need %zu", out_len, need);
    candle_ctx *ctx;
    candle_status s = ctx_for(&ctx, n_threads);
    if (s) return s;
    candle_tensor *e = candle_contiguous(ctx, encoder_graph(ctx, w, mel));
    s = e ? candle_compute(ctx, e) : candle_errcode(ctx);
    if (!s) s = candle_tensor_to_f32(e, out);
    if (s) candle_set_error(NULL, s, "whisper_encode: %s", candle_errmsg(ctx));
    candle_ctx_free(ctx);
    return s;
}

/* ---- decoding ---- */

/* One window's decoder state: the cross-attention keys and values
 * ([1, H, 1500, D] per layer, computed once) and the self-attention cache. */
typedef struct wdec {
    candle_ctx *ctx;
    const candle_whisper *w;
    candle_tensor *ck[WHISPER_MAX_LAYERS], *cv[WHISPER_MAX_LAYERS];
    kv_cache kv;
    candle_ctx_mark mark;
    int64_t pos;
} wdec;

static candle_status dec_begin(wdec *st, const candle_whisper *w, const float *mel) {
    candle_ctx *ctx = st->ctx;
    st->w = w;
    st->pos = 0;
    const candle_whisper_dims *d = &w->d;
    candle_status s = kv_cache_init(&st->kv, ctx, d->n_text_layer, d->n_head, d->n_text_ctx, d->n_state / d->n_head,
                                    CANDLE_DTYPE_F32);
    if (s) return s;
    candle_tensor *enc = encoder_graph(ctx, w, mel);
    candle_tensor *outs[2 * WHISPER_MAX_LAYERS];
    int64_t ns = d->n_state;
    for (int64_t il = 0; il < d->n_text_layer && enc; il++) {
        candle_tensor *kv = lin(ctx, enc, &w->dec[il].cross_kv);
        st->ck[il] = candle_contiguous(ctx, to_heads(ctx, d, candle_narrow(ctx, kv, 1, 0, ns)));
        st->cv[il] = candle_contiguous(ctx, to_heads(ctx, d, candle_narrow(ctx, kv, 1, ns, ns)));
        outs[2 * il] = st->ck[il];
        outs[2 * il + 1] = st->cv[il];
    }
    if (candle_errcode(ctx)) return candle_errcode(ctx);
    candle_graph *g = candle_graph_build(ctx, outs, (int)(2 * d->n_text_layer));
    s = g ? candle_graph_compute(ctx, g) : candle_errcode(ctx);
    st->mark = candle_ctx_get_mark(ctx);
    return s;
}

static candle_tensor *dec_block(wdec *st, const wlayer *l, int64_t il, candle_tensor *x) {
    candle_ctx *ctx = st->ctx;
    const candle_whisper_dims *d = &st->w->d;
    int64_t ns = d->n_state, n = x->shape[0];
    int64_t hs[3] = {n, d->n_head, ns / d->n_head};
    candle_tensor *y = lin(ctx, norm(ctx, x, &l->attn_ln), &l->qkv);
    candle_tensor *q = to_heads(ctx, d, candle_narrow(ctx, y, 1, 0, ns));
    candle_tensor *k = candle_reshape_copy(ctx, candle_narrow(ctx, y, 1, ns, ns), 3, hs);
    candle_tensor *v = candle_reshape_copy(ctx, candle_narrow(ctx, y, 1, 2 * ns, ns), 3, hs);
    candle_tensor *ka, *va;
    if (!kv_cache_update(ctx, &st->kv, il, k, v, st->pos, &ka, &va)) return NULL;
    candle_tensor *o = candle_attention(ctx, q, ka, va, NULL, 0, true);
    x = candle_add(ctx, x, lin(ctx, from_heads(ctx, d, o), &l->attn_out));
    q = to_heads(ctx, d, lin(ctx, norm(ctx, x, &l->cross_ln), &l->cross_q));
    o = candle_attention(ctx, q, st->ck[il], st->cv[il], NULL, 0, false);
    x = candle_add(ctx, x, lin(ctx, from_heads(ctx, d, o), &l->cross_out));
    return mlp(ctx, l, x);
}

/* Feed n tokens at the next positions; logits [n_vocab] of the last. */
static candle_status dec_step(wdec *st, const int32_t *tokens, int64_t n, float *logits) {
    candle_ctx *ctx = st->ctx;
    const candle_whisper *w = st->w;
    candle_ctx_reset(ctx, st->mark);
    int32_t pos[64];
    if (n > 64 || st->pos + n > w->d.n_text_ctx)
        return candle_set_error(ctx, CANDLE_ERR_INVALID_ARG, "whisper: past the text context");
    for (int64_t i = 0; i < n; i++) pos[i] = (int32_t)(st->pos + i);
    candle_tensor *t = candle_tensor_from_i32(ctx, 1, &n, tokens), *p = candle_tensor_from_i32(ctx, 1, &n, pos);
    candle_tensor *x = candle_add(ctx, candle_embedding(ctx, w->tok_embd, t), candle_embedding(ctx, w->dec_pos, p));
    for (int64_t il = 0; il < w->d.n_text_layer && x; il++) x = dec_block(st, &w->dec[il], il, x);
    x = norm(ctx, candle_narrow(ctx, x, 0, n - 1, 1), &w->dec_ln);
    candle_tensor *lg = candle_contiguous(ctx, candle_linear(ctx, x, w->tok_embd, NULL));
    candle_status s = lg ? candle_compute(ctx, lg) : candle_errcode(ctx);
    if (!s) s = candle_tensor_to_f32(lg, logits);
    if (!s) st->pos += n;
    return s;
}

static int32_t pick(const candle_whisper *w, float *logits, bool first) {
    for (int i = 0; i < w->n_suppress; i++) logits[w->suppress[i]] = -INFINITY;
    for (int i = 0; first && i < w->n_suppress_begin; i++) logits[w->suppress_begin[i]] = -INFINITY;
    int32_t best = 0;
    for (int64_t i = 1; i < w->d.n_vocab; i++)
        if (logits[i] > logits[best]) best = (int32_t)i;
    return best;
}

typedef struct tokbuf {
    int32_t *ids;
    int64_t n, cap;
} tokbuf;

static bool tokbuf_push(tokbuf *b, int32_t id) {
    if (b->n == b->cap) {
        int64_t cap = b->cap ? 2 * b->cap : 256;
        int32_t *p = realloc(b->ids, (size_t)cap * sizeof *p);
        if (!p) return false;
        b->ids = p;
        b->cap = cap;
    }
    b->ids[b->n++] = id;
    return true;
}

/* Greedy decoding of one window's mel, the tokens appended to out. */
static candle_status decode_window(const candle_whisper *w, const float *mel, const candle_whisper_transcribe_params *p,
                                   tokbuf *out) {
    wdec st = {0};
    candle_status s = ctx_for(&st.ctx, p->n_threads);
    if (s) return s;
    float *logits = malloc((size_t)w->d.n_vocab * sizeof *logits);
    if (!logits) s = candle_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
    if (!s) s = dec_begin(&st, w, mel);
    int32_t prompt[2] = {w->sot, w->no_timestamps};
    int64_t max_new = w->d.n_text_ctx - 2;
    if (p->max_tokens > 0 && p->max_tokens < max_new) max_new = p->max_tokens;
    if (!s) s = dec_step(&st, prompt, 2, logits);
    for (int64_t i = 0; !s && i < max_new; i++) {
        int32_t id = pick(w, logits, i == 0);
        if (id == w->eot) break;
        if (!tokbuf_push(out, id)) s = candle_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
        else if (i + 1 < max_new) s = dec_step(&st, &id, 1, logits);
    }
    if (s && candle_errcode(st.ctx)) candle_set_error(NULL, s, "whisper: %s", candle_errmsg(st.ctx));
    free(logits);
    kv_cache_free(&st.kv);
    candle_ctx_free(st.ctx);
    return s;
}

static candle_status decode_text(const candle_whisper *w, const tokbuf *b, candle_whisper_result *out) {
    int64_t n_text = 0;
    int32_t *text_ids = malloc((size_t)(b->n + 1) * sizeof *text_ids);
    if (!text_ids) return candle_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
    for (int64_t i = 0; i < b->n; i++)
        if (b->ids[i] < w->eot) text_ids[n_text++] = b->ids[i]; /* specials and timestamps follow the text */
    size_t cap = 64 + (size_t)n_text * 16, len = 0;
    out->text = malloc(cap);
    candle_status s = out->text ? candle_tokenizer_decode(w->tok, text_ids, n_text, false, out->text, cap, &len)
                                : candle_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
    if (s == CANDLE_ERR_INVALID_ARG && len + 1 > cap) {
        char *t = realloc(out->text, len + 1);
        s = t ? candle_tokenizer_decode(w->tok, text_ids, n_text, false, t, len + 1, &len) : CANDLE_ERR_OOM;
        if (t) out->text = t;
    }
    free(text_ids);
    return s;
}

/* faster-whisper's window at seek: frames [seek, min(seek + 3000, content))
 * of mel ([nm][frames]; content = frames - 1, the last frame is never fed)
 * then zeros. */
static void window(const float *mel, size_t nm, size_t frames, size_t content, size_t seek, float *win) {
    size_t len = content - seek < CANDLE_WHISPER_CHUNK_FRAMES ? content - seek : CANDLE_WHISPER_CHUNK_FRAMES;
    for (size_t r = 0; r < nm; r++) {
        float *row = win + r * CANDLE_WHISPER_CHUNK_FRAMES;
        memcpy(row, mel + r * frames + seek, len * sizeof *row);
        memset(row + len, 0, (CANDLE_WHISPER_CHUNK_FRAMES - len) * sizeof *row);
    }
}

candle_status candle_whisper_transcribe(const candle_whisper *w, const float *samples, size_t n,
                                        const candle_whisper_transcribe_params *p, candle_whisper_result *out) {
    if (!out) return candle_set_error(NULL, CANDLE_ERR_INVALID_ARG, "whisper_transcribe: NULL out");
    memset(out, 0, sizeof *out);
    if (!w || !samples || !n) return candle_set_error(NULL, CANDLE_ERR_INVALID_ARG, "whisper_transcribe: no audio");
    candle_whisper_transcribe_params def = candle_whisper_transcribe_default_params();
    if (!p) p = &def;
    /* faster-whisper's features: 160 zeros after the audio, the last frame
     * dropped, each 30 s window padded with zeros */
    size_t frames = candle_whisper_mel_frames(n, CANDLE_WHISPER_HOP), nm = (size_t)w->d.n_mels;
    float *mel = malloc(nm * frames * sizeof *mel), *win = malloc(nm * CANDLE_WHISPER_CHUNK_FRAMES * sizeof *win);
    candle_status s = mel && win ? candle_whisper_log_mel(samples, n, (int)nm, CANDLE_WHISPER_HOP, mel, frames)
                                 : candle_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
    size_t content = frames > 0 ? frames - 1 : 0;
    tokbuf b = {0};
    for (size_t seek = 0; !s && seek < content; seek += CANDLE_WHISPER_CHUNK_FRAMES) {
        window(mel, nm, frames, content, seek, win);
        s = decode_window(w, win, p, &b);
    }
    free(mel);
    free(win);
    if (!s) s = decode_text(w, &b, out);
    out->tokens = b.ids;
    out->n_tokens = b.n;
    if (s) candle_whisper_result_free(out);
    return s;
}

void candle_whisper_result_free(candle_whisper_result *r) {
    if (!r) return;
    free(r->text);
    free(r->tokens);
    memset(r, 0, sizeof *r);
}
