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

#include "candle/whisper.h"
#include "core/json-impl.h"
#include "model-impl.h"
#include "whisper-impl.h"
#include "whisper-src-impl.h"

#ifdef CANDLE_HAVE_ZLIB
#include <zlib.h>
#endif

#define WHISPER_MAX_LAYERS 64
#define WHISPER_LN_EPS 1e-5

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
    candle_ctx *wctx; /* owns the weights */
    candle_dtype wdtype; /* of the matrices (candle_whisper_params.weight_dtype) */
    candle_tokenizer *tok;
    candle_whisper_dims d;
    candle_tensor *conv1_w, *conv1_b, *conv2_w, *conv2_b, *enc_pos;
    wnorm enc_ln, dec_ln;
    wlayer enc[WHISPER_MAX_LAYERS], dec[WHISPER_MAX_LAYERS];
    candle_tensor *tok_embd, *dec_pos;
    int32_t sot, no_timestamps, eot, sot_prev, no_speech; /* the last two -1 where absent */
    int32_t suppress[WHISPER_MAX_SUPPRESS], suppress_begin[WHISPER_MAX_SUPPRESS];
    int n_suppress, n_suppress_begin;
    /* multilingual models: config.json's lang_ids, their codes ("en" of
     * <|en|>), the task tokens (-1 where absent) */
    int32_t lang_ids[WHISPER_MAX_LANGS], transcribe_tok, translate_tok;
    char lang_codes[WHISPER_MAX_LANGS][16];
    int n_lang;
    /* the cross-attention heads of the word alignment (layer, head), by layer */
    int16_t align_l[WHISPER_MAX_ALIGN], align_h[WHISPER_MAX_ALIGN];
    int n_align;
};

candle_whisper_params candle_whisper_default_params(void) {
    return (candle_whisper_params){.no_mmap = false, .weight_dtype = CANDLE_DTYPE_F32};
}

candle_whisper_transcribe_params candle_whisper_transcribe_default_params(void) {
    return (candle_whisper_transcribe_params){.n_threads = 0,
                                              .max_tokens = 0,
                                              .timestamps = true,
                                              .condition_on_previous_text = true,
                                              .max_initial_timestamp = 1.0f,
                                              .temperatures = NULL,
                                              .n_temperatures = 0,
                                              .best_of = 5,
                                              .seed = 0,
                                              .compression_ratio_threshold = 2.4f,
                                              .log_prob_threshold = -1.0f,
                                              .no_speech_threshold = 0.6f,
                                              .prompt_reset_on_temperature = 0.5f,
                                              .beam_size = 5,
                                              .patience = 1.0f,
                                              .length_penalty = 1.0f,
                                              .language = NULL,
                                              .translate = false,
                                              .initial_prompt = NULL,
                                              .initial_prompt_tokens = NULL,
                                              .n_initial_prompt_tokens = 0,
                                              .word_timestamps = false,
                                              .prepend_punctuations = NULL,
                                              .append_punctuations = NULL};
}

/* ---- loading ---- */

/* A tensor of the source widened to f32 (malloc'ed; *t its description).
 * The bytes may sit at any alignment, hence the memcpy. */
static float *read_f32(const whisper_src *src, const char *name, wsrc_tensor *t) {
    if (!src->find(src, name, t)) {
        cdl_set_error(NULL, CANDLE_ERR_FORMAT, "whisper: %s: %s lacks %s", src->path, src->file, name);
        return NULL;
    }
    int64_t cols = 1;
    for (int k = 1; k < t->rank; k++) cols *= t->shape[k];
    float *buf = malloc((size_t)(t->shape[0] * cols) * sizeof *buf), *o = buf;
    if (!buf) {
        cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory reading %s", name);
        return NULL;
    }
    for (int i = 0; i < t->n_parts; i++) {
        const wsrc_part *p = &t->part[i];
        const candle_dtype_traits *di = p->dtype < CANDLE_DTYPE_COUNT ? candle_dtype_info(p->dtype) : NULL;
        int64_t n = p->rows * cols;
        const unsigned char *b = p->data;
        if (!b) memset(o, 0, (size_t)n * sizeof *o);
        else if (p->dtype == CANDLE_DTYPE_F32) memcpy(o, b, (size_t)n * sizeof *o);
        else if (di && di->to_f32 && cols % di->block_size == 0) {
            /* row by row through an aligned copy: a ggml file's rows need
             * not be aligned for their 16-bit values and scales */
            size_t rs = candle_dtype_row_size(p->dtype, cols);
            void *row = malloc(rs);
            for (int64_t r = 0; row && r < p->rows; r++) {
                memcpy(row, b + (size_t)r * rs, rs);
                di->to_f32(row, o + r * cols, cols);
            }
            if (!row) {
                free(buf);
                cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory reading %s", name);
                return NULL;
            }
            free(row);
        } else {
            free(buf);
            cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "whisper: %s: %s is of a type Candle's Whisper does not read (%s)",
                          src->path, name, di ? di->name : "unknown");
            return NULL;
        }
        o += n;
    }
    return buf;
}

static candle_tensor *leaf(candle_whisper *w, const char *name, int rank, const int64_t *shape, float *buf,
                           candle_dtype dtype) {
    candle_tensor *t = buf ? candle_tensor_from_f32(w->wctx, dtype, rank, shape, buf) : NULL;
    free(buf);
    if (t) candle_tensor_set_name(t, name);
    return t;
}

/* A matrix stored in a block type (a quantized ggml file) as it is: its
 * parts' rows, one after another, into *out (NULL: out of memory). False
 * when it is not one. */
static bool load_blocks(candle_whisper *w, const wsrc_tensor *t, const char *name, candle_tensor **out) {
    candle_dtype dt = t->part[0].dtype;
    if (t->rank != 2 || dt >= CANDLE_DTYPE_COUNT || !candle_dtype_info(dt)->is_quantized ||
        t->shape[1] % candle_dtype_info(dt)->block_size)
        return false;
    for (int i = 0; i < t->n_parts; i++)
        if (t->part[i].dtype != dt || !t->part[i].data) return false;
    candle_tensor *m = candle_tensor_new(w->wctx, dt, 2, t->shape);
    char *o = m ? candle_tensor_data(m) : NULL;
    size_t row = candle_dtype_row_size(dt, t->shape[1]);
    for (int i = 0; o && i < t->n_parts; o += (size_t)t->part[i].rows * row, i++)
        memcpy(o, t->part[i].data, (size_t)t->part[i].rows * row);
    if (o) candle_tensor_set_name(m, name);
    else cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory loading %s", name);
    *out = o ? m : NULL;
    return true;
}

/* A tensor as a leaf of the weight context: f32, or a matrix (matrix
 * true) in the model's weight dtype, or its stored block type. */
static candle_tensor *load_var(candle_whisper *w, const whisper_src *src, const char *name, bool matrix) {
    wsrc_tensor t;
    candle_tensor *m;
    if (matrix && src->find(src, name, &t) && load_blocks(w, &t, name, &m)) return m;
    float *buf = read_f32(src, name, &t);
    bool conv = matrix && buf && t.rank == 2 && t.shape[1] % candle_dtype_info(w->wdtype)->block_size == 0;
    return buf ? leaf(w, name, t.rank, t.shape, buf, conv ? w->wdtype : CANDLE_DTYPE_F32) : NULL;
}

static candle_tensor *load_f32(candle_whisper *w, const whisper_src *src, const char *name) {
    return load_var(w, src, name, false);
}

/* A conv weight [O, C, K] as the matrix [O, K*C] (column k*C + c) that
 * multiplies the frames' im2col rows (conv_gelu). */
static candle_tensor *load_conv(candle_whisper *w, const whisper_src *src, const char *name) {
    wsrc_tensor v;
    float *buf = read_f32(src, name, &v);
    if (!buf) return NULL;
    if (v.rank != 3 || v.shape[2] != 3) {
        free(buf);
        cdl_set_error(NULL, CANDLE_ERR_FORMAT, "whisper: %s is not a [O, C, 3] kernel", name);
        return NULL;
    }
    int64_t O = v.shape[0], C = v.shape[1], K = 3, shape[2] = {O, K * C};
    float *t = malloc((size_t)(O * C * K) * sizeof *t);
    for (int64_t o = 0; t && o < O; o++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t k = 0; k < K; k++) t[o * K * C + k * C + c] = buf[(o * C + c) * K + k];
    free(buf);
    if (!t) cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory reading %s", name);
    return leaf(w, name, 2, shape, t, CANDLE_DTYPE_F32);
}

static bool has_var(const whisper_src *src, const char *name) {
    wsrc_tensor t;
    return src->find(src, name, &t);
}

static bool load_lin(candle_whisper *w, const whisper_src *m, const char *pre, wlin *l) {
    char name[320];
    snprintf(name, sizeof name, "%s/weight", pre);
    l->w = load_var(w, m, name, true);
    snprintf(name, sizeof name, "%s/bias", pre);
    l->b = has_var(m, name) ? load_f32(w, m, name) : NULL;
    return l->w && (l->b || !has_var(m, name));
}

static bool load_norm(candle_whisper *w, const whisper_src *m, const char *pre, wnorm *n) {
    char name[320];
    snprintf(name, sizeof name, "%s/gamma", pre);
    n->g = load_f32(w, m, name);
    snprintf(name, sizeof name, "%s/beta", pre);
    n->b = load_f32(w, m, name);
    return n->g && n->b;
}

static bool load_layer(candle_whisper *w, const whisper_src *m, const char *side, int64_t il, wlayer *l) {
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

static int64_t count_layers(const whisper_src *m, const char *side) {
    int64_t n = 0;
    char name[192];
    for (;; n++) {
        snprintf(name, sizeof name, "%s/layer_%lld/ffn/linear_0/weight", side, (long long)n);
        if (!has_var(m, name)) return n;
    }
}

static bool load_weights(candle_whisper *w, const whisper_src *m) {
    candle_whisper_dims *d = &w->d;
    d->n_audio_layer = count_layers(m, "encoder");
    d->n_text_layer = count_layers(m, "decoder");
    d->n_head = m->n_head;
    if (d->n_audio_layer < 1 || d->n_text_layer < 1 || d->n_audio_layer > WHISPER_MAX_LAYERS ||
        d->n_text_layer > WHISPER_MAX_LAYERS || d->n_head < 1) {
        cdl_set_error(NULL, CANDLE_ERR_FORMAT, "whisper: %s: %lld/%lld layers, %lld heads (unsupported)", m->file,
                         (long long)d->n_audio_layer, (long long)d->n_text_layer, (long long)d->n_head);
        return false;
    }
    bool ok = (w->conv1_w = load_conv(w, m, "encoder/conv1/weight")) && (w->conv1_b = load_f32(w, m, "encoder/conv1/bias")) &&
              (w->conv2_w = load_conv(w, m, "encoder/conv2/weight")) && (w->conv2_b = load_f32(w, m, "encoder/conv2/bias")) &&
              (w->enc_pos = load_f32(w, m, "encoder/position_encodings/encodings")) &&
              load_norm(w, m, "encoder/layer_norm", &w->enc_ln) && load_norm(w, m, "decoder/layer_norm", &w->dec_ln) &&
              (w->tok_embd = load_var(w, m, "decoder/embeddings/weight", true)) &&
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
        cdl_set_error(NULL, CANDLE_ERR_FORMAT, "whisper: %s: inconsistent shapes", m->file);
        return false;
    }
    return true;
}


/* Ids of the source's configuration inside the vocabulary. */
static int keep_ids(const int32_t *ids, int n, int32_t *out, int64_t n_vocab) {
    int k = 0;
    for (int i = 0; i < n; i++)
        if (ids[i] >= 0 && ids[i] < n_vocab) out[k++] = ids[i];
    return k;
}

static candle_status load_config(candle_whisper *w, const whisper_src *src) {
    whisper_cfg *cfg = calloc(1, sizeof *cfg);
    if (!cfg) return cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
    candle_status s = src->config(src, w->tok, cfg);
    if (s) {
        free(cfg);
        return s;
    }
    int64_t nv = w->d.n_vocab;
    w->n_suppress = keep_ids(cfg->suppress, cfg->n_suppress, w->suppress, nv);
    w->n_suppress_begin = keep_ids(cfg->suppress_begin, cfg->n_suppress_begin, w->suppress_begin, nv);
    w->n_lang = keep_ids(cfg->lang_ids, cfg->n_lang, w->lang_ids, nv);
    /* alignment heads grouped by layer, as CTranslate2's set_alignment_heads
     * orders them; without them openai-whisper's default, every head of the
     * last half of the layers */
    int64_t nl = w->d.n_text_layer, nh = w->d.n_head;
    for (int64_t l = 0; l < nl; l++)
        for (int i = 0; i < cfg->n_align && w->n_align < WHISPER_MAX_ALIGN; i++)
            if (cfg->align_l[i] == l && cfg->align_h[i] < nh) {
                w->align_l[w->n_align] = cfg->align_l[i];
                w->align_h[w->n_align++] = cfg->align_h[i];
            }
    for (int64_t l = nl / 2; !w->n_align && l < nl; l++)
        for (int64_t h = 0; h < nh && w->n_align < WHISPER_MAX_ALIGN; h++) {
            w->align_l[w->n_align] = (int16_t)l;
            w->align_h[w->n_align++] = (int16_t)h;
        }
    free(cfg);
    return CANDLE_OK;
}

/* The special tokens of the tokenizer (w->tok) and the languages' codes. */
static candle_status find_specials(candle_whisper *w, const whisper_src *src) {
    w->sot = candle_tokenizer_find(w->tok, "<|startoftranscript|>");
    w->no_timestamps = candle_tokenizer_find(w->tok, "<|notimestamps|>");
    w->eot = candle_tokenizer_find(w->tok, "<|endoftext|>");
    w->sot_prev = candle_tokenizer_find(w->tok, "<|startofprev|>");
    w->no_speech = candle_tokenizer_find(w->tok, "<|nospeech|>");
    if (w->no_speech < 0) w->no_speech = candle_tokenizer_find(w->tok, "<|nocaptions|>");
    if (w->sot_prev >= w->d.n_vocab) w->sot_prev = -1;
    w->transcribe_tok = candle_tokenizer_find(w->tok, "<|transcribe|>");
    w->translate_tok = candle_tokenizer_find(w->tok, "<|translate|>");
    if (w->transcribe_tok >= w->d.n_vocab || w->translate_tok >= w->d.n_vocab) w->transcribe_tok = w->translate_tok = -1;
    /* a language token is <|xx|>: its code is xx */
    int nl = 0;
    for (int i = 0; i < w->n_lang; i++) {
        char buf[64];
        size_t len = 0;
        if (candle_tokenizer_token_bytes(w->tok, w->lang_ids[i], true, buf, sizeof buf, &len) || len < 5 ||
            len - 4 >= sizeof w->lang_codes[0] || memcmp(buf, "<|", 2) || memcmp(buf + len - 2, "|>", 2))
            continue;
        w->lang_ids[nl] = w->lang_ids[i];
        memcpy(w->lang_codes[nl], buf + 2, len - 4);
        w->lang_codes[nl++][len - 4] = 0;
    }
    /* CTranslate2's is_multilingual: a vocabulary of at least 51865 (the
     * .en models' config.json lists the language ids too) */
    w->n_lang = w->transcribe_tok >= 0 && w->d.n_vocab >= 51865 ? nl : 0;
    if (w->no_speech >= w->d.n_vocab) w->no_speech = -1;
    if (w->sot < 0 || w->no_timestamps < 0 || w->eot < 0 || w->sot >= w->d.n_vocab ||
        w->no_timestamps >= w->d.n_vocab || w->eot >= w->d.n_vocab)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: the tokenizer lacks Whisper's special tokens", src->path);
    return CANDLE_OK;
}

candle_status candle_whisper_load(candle_whisper **out, const char *path, const candle_whisper_params *p) {
    if (!out || !path) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "whisper_load: NULL argument");
    *out = NULL;
    candle_whisper_params def = candle_whisper_default_params();
    if (!p) p = &def;
    if (p->weight_dtype != CANDLE_DTYPE_F32 && p->weight_dtype != CANDLE_DTYPE_F16 &&
        p->weight_dtype != CANDLE_DTYPE_BF16 && p->weight_dtype != CANDLE_DTYPE_Q8_0)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                             "whisper_load: weight_dtype %s (want f32 for f32 weights, f16, bf16 or q8_0)",
                             candle_dtype_name(p->weight_dtype));
    whisper_src src;
    candle_status s = whisper_src_open(&src, path, p->no_mmap);
    if (s) return s;
    candle_whisper *w = calloc(1, sizeof *w);
    if (!w) s = cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
    if (!s) w->wdtype = p->weight_dtype;
    if (!s) s = candle_ctx_init(&w->wctx, NULL);
    if (!s && !load_weights(w, &src)) s = candle_last_error() ? candle_last_error() : CANDLE_ERR_FORMAT;
    if (!s) s = src.tokenizer(&src, &w->tok);
    if (!s) s = load_config(w, &src);
    if (!s) s = find_specials(w, &src);
    src.close(&src); /* the weights were copied out */
    if (s) {
        candle_whisper_free(w);
        return s;
    }
    *out = w;
    return CANDLE_OK;
}

bool candle_whisper_probe(const char *path) { return path && whisper_src_probe(path); }

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
    if (!w || !mel || !out) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "whisper_encode: NULL argument");
    size_t need = (size_t)(w->d.n_audio_ctx * w->d.n_state);
    if (out_len < need)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "whisper_encode: out of %zu floats, need %zu", out_len, need);
    candle_ctx *ctx;
    candle_status s = ctx_for(&ctx, n_threads);
    if (s) return s;
    candle_tensor *e = candle_contiguous(ctx, encoder_graph(ctx, w, mel));
    s = e ? candle_compute(ctx, e) : candle_errcode(ctx);
    if (!s) s = candle_tensor_to_f32(e, out);
    if (s) cdl_set_error(NULL, s, "whisper_encode: %s", candle_errmsg(ctx));
    candle_ctx_free(ctx);
    return s;
}

/* ---- decoding ---- */

#define WHISPER_TIME_PRECISION 0.02 /* seconds per timestamp token */
#define WHISPER_INPUT_STRIDE 2      /* mel frames per timestamp token */
#define WHISPER_FRAME_SECONDS 0.01  /* seconds per mel frame */

/* Hypotheses decoded side by side in one decoder step: beam search's beams,
 * the fallback's best_of draws (CTranslate2 batches both). */
#define WHISPER_MAX_BATCH 16

/* The decoder state of a transcription: the cross-attention keys and values
 * of the current window ([1, H, 1500, D] per layer, computed once per
 * window and shared by every hypothesis) and one self-attention cache per
 * hypothesis slot (a hypothesis reads and writes its slot's cache only). */
typedef struct wdec {
    candle_ctx *ctx;
    const candle_whisper *w;
    candle_tensor *ck[WHISPER_MAX_LAYERS], *cv[WHISPER_MAX_LAYERS];
    kv_cache kv[WHISPER_MAX_BATCH];
    int n_slots;
    candle_ctx_mark base, mark;
    int64_t pos; /* the next position, the same for every slot */
    /* the word alignment's pass: each layer's cross-attention queries kept */
    bool capture;
    candle_tensor *cq[WHISPER_MAX_LAYERS];
} wdec;

static candle_status dec_init(wdec *st, const candle_whisper *w, int n_threads, int n_slots) {
    memset(st, 0, sizeof *st);
    st->w = w;
    candle_status s = ctx_for(&st->ctx, n_threads);
    if (s) return s;
    const candle_whisper_dims *d = &w->d;
    for (int i = 0; !s && i < n_slots; i++, st->n_slots++)
        s = kv_cache_init(&st->kv[i], st->ctx, d->n_text_layer, d->n_head, d->n_text_ctx, d->n_state / d->n_head,
                          CANDLE_DTYPE_F32);
    st->base = candle_ctx_get_mark(st->ctx);
    return s;
}

static void dec_free(wdec *st) {
    for (int i = 0; i < st->n_slots; i++) kv_cache_free(&st->kv[i]);
    candle_ctx_free(st->ctx);
}

/* Slot dst's cache = slot src's, positions [0, npos) (a hypothesis forked:
 * the prompt's keys and values, or a beam's parent). */
static void slot_copy(wdec *st, int dst, int src, int64_t npos) {
    if (dst == src) return;
    const kv_cache *a = &st->kv[src], *b = &st->kv[dst];
    size_t row = (size_t)a->head_dim * sizeof(float), rows = (size_t)npos * row;
    for (int64_t il = 0; il < a->n_layer; il++)
        for (int kv = 0; kv < 2; kv++) {
            const char *from = candle_tensor_data(kv ? a->v[il] : a->k[il]);
            char *to = candle_tensor_data(kv ? b->v[il] : b->k[il]);
            for (int64_t h = 0; h < a->n_head_kv; h++)
                memcpy(to + (size_t)h * (size_t)a->n_ctx * row, from + (size_t)h * (size_t)a->n_ctx * row, rows);
        }
}

/* The encoder on a window and the cross-attention keys and values of it. */
static candle_status dec_window(wdec *st, const float *mel) {
    candle_ctx *ctx = st->ctx;
    const candle_whisper *w = st->w;
    const candle_whisper_dims *d = &w->d;
    candle_ctx_reset(ctx, st->base);
    st->pos = 0;
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
    candle_status s = g ? candle_graph_compute(ctx, g) : candle_errcode(ctx);
    st->mark = candle_ctx_get_mark(ctx);
    return s;
}

/* A decoder layer on x [n, n_state]: with nb == 1, n tokens of the
 * hypothesis in slots[0] at positions pos..; with nb > 1, one token of each
 * of nb hypotheses (row b in slots[b]) at position pos. The products run on
 * all rows at once; self-attention per hypothesis on its own cache; the
 * cross-attention queries of every row against the window's shared K/V. */
static candle_tensor *dec_block(wdec *st, const wlayer *l, int64_t il, candle_tensor *x, int nb, const int *slots) {
    candle_ctx *ctx = st->ctx;
    const candle_whisper_dims *d = &st->w->d;
    int64_t ns = d->n_state, n = nb > 1 ? 1 : x->shape[0];
    int64_t hs[3] = {n, d->n_head, ns / d->n_head};
    candle_tensor *y = lin(ctx, norm(ctx, x, &l->attn_ln), &l->qkv);
    candle_tensor *outs[WHISPER_MAX_BATCH] = {0}, *o;
    for (int b = 0; b < nb && y; b++) {
        candle_tensor *yb = nb > 1 ? candle_narrow(ctx, y, 0, b, 1) : y;
        candle_tensor *q = to_heads(ctx, d, candle_narrow(ctx, yb, 1, 0, ns));
        candle_tensor *k = candle_reshape_copy(ctx, candle_narrow(ctx, yb, 1, ns, ns), 3, hs);
        candle_tensor *v = candle_reshape_copy(ctx, candle_narrow(ctx, yb, 1, 2 * ns, ns), 3, hs);
        candle_tensor *ka, *va;
        if (!kv_cache_update(ctx, &st->kv[slots[b]], il, k, v, st->pos, &ka, &va)) return NULL;
        outs[b] = from_heads(ctx, d, candle_attention(ctx, q, ka, va, NULL, 0, true));
    }
    o = nb > 1 ? candle_concat(ctx, outs, nb, 0) : outs[0];
    x = candle_add(ctx, x, lin(ctx, o, &l->attn_out));
    candle_tensor *q = to_heads(ctx, d, lin(ctx, norm(ctx, x, &l->cross_ln), &l->cross_q));
    if (st->capture) st->cq[il] = candle_contiguous(ctx, q);
    o = candle_attention(ctx, q, st->ck[il], st->cv[il], NULL, 0, false);
    x = candle_add(ctx, x, lin(ctx, from_heads(ctx, d, o), &l->cross_out));
    return mlp(ctx, l, x);
}

#define WHISPER_STEP_MAX 64 /* tokens fed at once; a longer prompt goes in pieces */

/* The graph from the rows x [r, n_state] to the logits of `rows` of them
 * ([rows][n_vocab] into logits), then the positions move on by n. */
static candle_status dec_run(wdec *st, candle_tensor *x, int nb, const int *slots, int64_t n, bool last_only,
                             float *logits) {
    candle_ctx *ctx = st->ctx;
    const candle_whisper *w = st->w;
    for (int64_t il = 0; il < w->d.n_text_layer && x; il++) x = dec_block(st, &w->dec[il], il, x, nb, slots);
    if (x && last_only) x = candle_narrow(ctx, x, 0, x->shape[0] - 1, 1);
    x = norm(ctx, x, &w->dec_ln);
    candle_tensor *lg = candle_contiguous(ctx, candle_linear(ctx, x, w->tok_embd, NULL));
    candle_status s = lg ? candle_compute(ctx, lg) : candle_errcode(ctx);
    if (!s) s = candle_tensor_to_f32(lg, logits);
    if (s) return cdl_set_error(NULL, s, "whisper: %s", candle_errmsg(ctx));
    st->pos += n;
    return CANDLE_OK;
}

/* Feed n tokens of the hypothesis in slot at the next positions; logits
 * [n_vocab] of the last. */
static candle_status dec_step(wdec *st, int slot, const int32_t *tokens, int64_t n, float *logits) {
    candle_ctx *ctx = st->ctx;
    const candle_whisper *w = st->w;
    int32_t pos[WHISPER_STEP_MAX];
    if (st->pos + n > w->d.n_text_ctx)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "whisper: %lld tokens past the text context of %lld",
                                (long long)(st->pos + n), (long long)w->d.n_text_ctx);
    for (; n > WHISPER_STEP_MAX; tokens += WHISPER_STEP_MAX, n -= WHISPER_STEP_MAX) {
        candle_status s = dec_step(st, slot, tokens, WHISPER_STEP_MAX, logits);
        if (s) return s;
    }
    candle_ctx_reset(ctx, st->mark);
    for (int64_t i = 0; i < n; i++) pos[i] = (int32_t)(st->pos + i);
    candle_tensor *t = candle_tensor_from_i32(ctx, 1, &n, tokens), *p = candle_tensor_from_i32(ctx, 1, &n, pos);
    candle_tensor *x = candle_add(ctx, candle_embedding(ctx, w->tok_embd, t), candle_embedding(ctx, w->dec_pos, p));
    return dec_run(st, x, 1, &slot, n, true, logits);
}

/* One token of each of nb hypotheses (tokens[b] in slots[b]) at the next
 * position in one decoder step: logits [nb][n_vocab]. */
static candle_status dec_step_batch(wdec *st, int nb, const int *slots, const int32_t *tokens, float *logits) {
    if (nb == 1) return dec_step(st, slots[0], tokens, 1, logits);
    candle_ctx *ctx = st->ctx;
    const candle_whisper *w = st->w;
    if (st->pos + 1 > w->d.n_text_ctx)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "whisper: %lld tokens past the text context of %lld",
                                (long long)(st->pos + 1), (long long)w->d.n_text_ctx);
    candle_ctx_reset(ctx, st->mark);
    int32_t pos[WHISPER_MAX_BATCH];
    for (int b = 0; b < nb; b++) pos[b] = (int32_t)st->pos;
    int64_t n = nb;
    candle_tensor *t = candle_tensor_from_i32(ctx, 1, &n, tokens), *p = candle_tensor_from_i32(ctx, 1, &n, pos);
    candle_tensor *x = candle_add(ctx, candle_embedding(ctx, w->tok_embd, t), candle_embedding(ctx, w->dec_pos, p));
    return dec_run(st, x, nb, slots, 1, false, logits);
}

candle_status candle_whisper_logits(const candle_whisper *w, const float *mel, const int32_t *tokens, int64_t n,
                                    int n_threads, float *out, size_t out_len) {
    if (!w || !mel || !tokens || !out || n < 1)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "whisper_logits: NULL argument or no tokens");
    if (n > w->d.n_text_ctx || out_len < (size_t)(n * w->d.n_vocab))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                             "whisper_logits: %lld tokens (at most %lld) into %zu floats (need %lld)", (long long)n,
                             (long long)w->d.n_text_ctx, out_len, (long long)(n * w->d.n_vocab));
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= w->d.n_vocab)
            return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "whisper_logits: token %lld is %d, outside [0, %lld)",
                                 (long long)i, tokens[i], (long long)w->d.n_vocab);
    wdec st;
    candle_status s = dec_init(&st, w, n_threads, 1);
    if (!s) s = dec_window(&st, mel);
    int slot = 0;
    for (int64_t i = 0; !s && i < n; i += WHISPER_STEP_MAX) {
        int64_t k = n - i < WHISPER_STEP_MAX ? n - i : WHISPER_STEP_MAX;
        int32_t pos[WHISPER_STEP_MAX];
        for (int64_t j = 0; j < k; j++) pos[j] = (int32_t)(i + j);
        candle_ctx_reset(st.ctx, st.mark);
        candle_tensor *t = candle_tensor_from_i32(st.ctx, 1, &k, tokens + i), *p = candle_tensor_from_i32(st.ctx, 1, &k, pos);
        candle_tensor *x = candle_add(st.ctx, candle_embedding(st.ctx, w->tok_embd, t), candle_embedding(st.ctx, w->dec_pos, p));
        s = dec_run(&st, x, 1, &slot, k, false, out + i * w->d.n_vocab);
    }
    dec_free(&st);
    return s;
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

#define WHISPER_MAX_TEMPS 32

/* The options of one transcription, resolved. */
typedef struct wopts {
    candle_whisper_transcribe_params p;
    int32_t ts_begin, ts_end, max_initial; /* timestamp tokens; the last allowed first */
    float temps[WHISPER_MAX_TEMPS];
    int n_temps;
    uint64_t rng; /* splitmix64 state of the sampler */
    int32_t lang_tok; /* the language token after <|startoftranscript|>, -1: none */
} wopts;

/* A uniform double in [0, 1) (splitmix64). */
static double uniform(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

/* log(sum(exp(x[0..n)))) */
static double logsumexp(const float *x, int64_t n) {
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > m) m = x[i];
    if (m == -INFINITY) return -INFINITY;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += exp((double)x[i] - m);
    return m + log(sum);
}

static void mask(float *logits, int64_t from, int64_t to) {
    for (int64_t i = from; i < to; i++) logits[i] = -INFINITY;
}

/* CTranslate2's ApplyTimestampRules at `step` after the generated seq. */
static void timestamp_rules(const candle_whisper *w, const wopts *o, float *logits, const int32_t *seq, int64_t step) {
    int64_t tb = o->ts_begin, te = o->ts_end;
    logits[w->no_timestamps] = -INFINITY;
    bool check = false;
    if (step == 0) { /* a timestamp first, and not too late */
        mask(logits, 0, tb);
        mask(logits, o->max_initial + 1, te + 1);
    } else {
        int32_t last = seq[step - 1];
        if (last >= tb) {
            int32_t pen = step - 1 > 0 ? seq[step - 2] : last;
            if (pen >= tb) { /* a pair just closed: text (or the end) next */
                mask(logits, tb, te + 1);
            } else { /* an open timestamp: another one, not earlier, or the end */
                mask(logits, 0, w->eot);
                mask(logits, tb, last);
                check = true;
            }
        } else { /* after text, a timestamp is not earlier than the last one */
            check = true;
            for (int64_t t = step - 1; t >= 0; t--)
                if (seq[t] >= tb) {
                    mask(logits, tb, seq[t] + 1);
                    break;
                }
        }
    }
    if (!check) return;
    /* the timestamps' total probability against the likeliest text token */
    double ts = logsumexp(logits + tb, te - tb + 1);
    float mt = -INFINITY;
    for (int64_t i = 0; i < tb; i++)
        if (logits[i] > mt) mt = logits[i];
    if (ts > mt) mask(logits, 0, tb);
}

/* The text of tokens (text tokens only), malloc'ed. */
static candle_status decode_text(const candle_whisper *w, const int32_t *ids, int64_t n, char **text) {
    size_t len;
    return cdl_whisper_decode(w->tok, w->eot, ids, n, text, &len);
}

/* faster-whisper's get_compression_ratio: the UTF-8 bytes of the stripped
 * text over their zlib-compressed bytes (zlib.compress, level 6); NAN
 * without zlib. */
static float compression_ratio(const char *text) {
    while (*text == ' ' || (*text >= '\t' && *text <= '\r')) text++;
    size_t n = strlen(text);
    while (n && (text[n - 1] == ' ' || (text[n - 1] >= '\t' && text[n - 1] <= '\r'))) n--;
#ifdef CANDLE_HAVE_ZLIB
    uLongf len = compressBound((uLong)n);
    unsigned char *buf = malloc(len);
    if (!buf || compress2(buf, &len, (const Bytef *)text, (uLong)n, Z_DEFAULT_COMPRESSION) != Z_OK) len = 0;
    free(buf);
    return len ? (float)((double)n / (double)len) : NAN;
#else
    (void)n;
    return NAN;
#endif
}

/* A decoding of a window and its scores. */
typedef struct wcand {
    tokbuf toks;
    double sum_lp;
    float avg_lp, cr, nsp, temp;
} wcand;

static bool cand_copy(wcand *dst, const wcand *src) {
    tokbuf t = dst->toks;
    t.n = 0;
    for (int64_t i = 0; i < src->toks.n; i++)
        if (!tokbuf_push(&t, src->toks.ids[i])) return false;
    *dst = *src;
    dst->toks = t;
    return true;
}

/* Suppression (config.json's suppress_ids; suppress_ids_begin at the first
 * step) then the timestamp rules, on one hypothesis's logits at step after
 * its tokens seq, in CTranslate2's order of processors. */
static void process_logits(const candle_whisper *w, const wopts *o, float *lg, const int32_t *seq, int64_t step) {
    for (int i = 0; i < w->n_suppress; i++) lg[w->suppress[i]] = -INFINITY;
    for (int i = 0; step == 0 && i < w->n_suppress_begin; i++) lg[w->suppress_begin[i]] = -INFINITY;
    if (o->p.timestamps) timestamp_rules(w, o, lg, seq, step);
}

/* CTranslate2 decodes at most min(448 / 2, 448 - start) steps, start the
 * position of the token the first step feeds. */
static int64_t max_steps_for(const candle_whisper *w, const wopts *o, int64_t n_prompt) {
    int64_t max_steps = w->d.n_text_ctx / 2, room = w->d.n_text_ctx - (n_prompt - 1);
    if (room < max_steps) max_steps = room;
    if (o->p.max_tokens > 0 && o->p.max_tokens < max_steps) max_steps = o->p.max_tokens;
    return max_steps;
}

/* The prompt into slot 0 from position 0: logits of its last token, and
 * P(no speech) from the raw logits at <|startoftranscript|> (CTranslate2's
 * GetNoSpeechProbs; a prompt that goes on after it, as a multilingual
 * model's language and task tokens, is fed in two pieces). */
static candle_status feed_prompt(wdec *st, const int32_t *prompt, int64_t n_prompt, float *logits, float *nsp) {
    const candle_whisper *w = st->w;
    st->pos = 0;
    int64_t sot_at = n_prompt - 1;
    for (int64_t i = 0; i < n_prompt; i++)
        if (prompt[i] == w->sot) {
            sot_at = i;
            break;
        }
    candle_status s = dec_step(st, 0, prompt, sot_at + 1, logits);
    if (s) return s;
    double lse = logsumexp(logits, w->d.n_vocab);
    *nsp = w->no_speech >= 0 ? (float)exp(logits[w->no_speech] - lse) : 0.0f;
    if (sot_at + 1 < n_prompt) s = dec_step(st, 0, prompt + sot_at + 1, n_prompt - sot_at - 1, logits);
    return s;
}

/* The next token from processed logits: the likeliest at temp 0, else a
 * draw from softmax(logits / temp) as CTranslate2's RandomSampler. */
static int32_t pick(const float *lg, int64_t nv, float temp, uint64_t *rng) {
    int32_t id = 0;
    for (int64_t i = 1; i < nv; i++)
        if (lg[i] > lg[id]) id = (int32_t)i;
    if (temp > 0) {
        double total = 0, m = lg[id];
        for (int64_t i = 0; i < nv; i++) total += exp((lg[i] - m) / temp);
        double u = uniform(rng) * total, acc = 0;
        for (int64_t i = 0; i < nv; i++) {
            if (lg[i] == -INFINITY) continue;
            id = (int32_t)i;
            acc += exp((lg[i] - m) / temp);
            if (acc > u) break;
        }
    }
    return id;
}

/* n (<= WHISPER_MAX_BATCH) decodings of the current window after prompt,
 * side by side: greedy at temp 0 (n 1), else n draws at temp, as
 * CTranslate2 decodes num_hypotheses samples as one batch. The prompt runs
 * once and its cache is copied to the other slots; a hypothesis that reaches
 * <|endoftext|> leaves the batch. c[b]: the tokens up to <|endoftext|>
 * (excluded), the sum of their log-probabilities at temperature 1 (and
 * <|endoftext|>'s, as CTranslate2 scores), P(no speech). */
static candle_status sample_batch(wdec *st, wopts *o, float temp, int n, const int32_t *prompt, int64_t n_prompt,
                                  float *logits, wcand *c) {
    const candle_whisper *w = st->w;
    int64_t nv = w->d.n_vocab, max_steps = max_steps_for(w, o, n_prompt);
    float nsp = 0;
    candle_status s = feed_prompt(st, prompt, n_prompt, logits, &nsp);
    if (s) return s;
    int slots[WHISPER_MAX_BATCH], act[WHISPER_MAX_BATCH], na = n;
    int32_t next[WHISPER_MAX_BATCH];
    for (int b = 0; b < n; b++) {
        c[b].toks.n = 0;
        c[b].sum_lp = 0;
        c[b].nsp = nsp;
        slots[b] = act[b] = b;
        if (b) memcpy(logits + (size_t)b * (size_t)nv, logits, (size_t)nv * sizeof *logits);
    }
    for (int64_t step = 0; !s && step < max_steps && na > 0; step++) {
        int nn = 0;
        for (int r = 0; r < na; r++) {
            wcand *h = &c[act[r]];
            float *lg = logits + (size_t)r * (size_t)nv;
            process_logits(w, o, lg, h->toks.ids, step);
            int32_t id = pick(lg, nv, temp, &o->rng);
            h->sum_lp += lg[id] - logsumexp(lg, nv);
            if (id == w->eot) continue;
            if (!tokbuf_push(&h->toks, id)) return cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
            act[nn] = act[r];
            slots[nn] = slots[r];
            next[nn++] = id;
        }
        na = nn;
        if (na == 0 || step + 1 >= max_steps) break;
        if (step == 0)
            for (int b = 1; b < n; b++) slot_copy(st, b, 0, st->pos); /* the prompt's keys and values */
        s = dec_step_batch(st, na, slots, next, logits);
    }
    return s;
}

/* A finished beam-search hypothesis. */
typedef struct wfin {
    int32_t *ids;
    int64_t n;
    float score; /* the sum of log-probabilities */
} wfin;

static bool tokbuf_set(tokbuf *dst, const tokbuf *src, int32_t extra) {
    dst->n = 0;
    for (int64_t i = 0; i < src->n; i++)
        if (!tokbuf_push(dst, src->ids[i])) return false;
    return extra < 0 || tokbuf_push(dst, extra);
}

/* CTranslate2's BeamSearch::search (decoding.cc) with Whisper's options:
 *   - the first step expands the prompt's single hypothesis, later ones the
 *     K beams, all in one batched decoder step;
 *   - a beam's score is the sum of its log-probabilities (log_softmax of the
 *     processed logits, in f32); the 2K best (beam, token) pairs are taken;
 *   - of the first K, one ending with <|endoftext|> (or any at the last step)
 *     is finished, and the next candidate of the 2K that does not end takes
 *     its place;
 *   - the search stops when round(K * patience) hypotheses are finished
 *     (with length_penalty 0: when the best beam finishes);
 *   - the result is the finished hypothesis with the best score / length ^
 *     length_penalty, <|endoftext|> not counted.
 * Each beam keeps its cache slot; a beam's slot goes to its first child,
 * and only the other children of a parent copy its cache. */
static candle_status beam_search(wdec *st, wopts *o, const int32_t *prompt, int64_t n_prompt, float *logits,
                                 wcand *pool, wcand *c) {
    const candle_whisper *w = st->w;
    int64_t nv = w->d.n_vocab, max_steps = max_steps_for(w, o, n_prompt);
    int K = o->p.beam_size, NC = 2 * K;
    float pat = (float)K * o->p.patience;
    int64_t max_cand = (int64_t)lroundf(pat) < 1 ? 1 : (int64_t)lroundf(pat);
    bool early = o->p.length_penalty == 0;
    float nsp = 0;
    candle_status s = feed_prompt(st, prompt, n_prompt, logits, &nsp);
    if (s) return s;
    /* at most K finish a step; with length_penalty 0 the count is not the bound */
    int64_t n_fin = 0, cap_fin = max_cand + K;
    wfin *fin = calloc((size_t)cap_fin, sizeof *fin);
    if (!fin) return cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
    tokbuf *A[WHISPER_MAX_BATCH], *B[WHISPER_MAX_BATCH]; /* the alive beams' tokens, the next ones */
    for (int k = 0; k < K; k++) {
        A[k] = &pool[k].toks;
        B[k] = &pool[K + k].toks;
        A[k]->n = 0;
    }
    float score[WHISPER_MAX_BATCH] = {0}, cval[2 * WHISPER_MAX_BATCH];
    int64_t cflat[2 * WHISPER_MAX_BATCH];
    int slot[WHISPER_MAX_BATCH], nslot[WHISPER_MAX_BATCH], active[WHISPER_MAX_BATCH];
    int32_t next[WHISPER_MAX_BATCH];
    for (int k = 0; k < K; k++) slot[k] = k;
    bool top_finished = false;
    for (int64_t step = 0; !s && step < max_steps; step++) {
        int rows = step == 0 ? 1 : K;
        bool last = step + 1 == max_steps;
        int nc = 0; /* the best NC (row, token) pairs, best first */
        for (int r = 0; r < rows; r++) {
            float *lg = logits + (size_t)r * (size_t)nv;
            process_logits(w, o, lg, A[r]->ids, step);
            float lse = (float)logsumexp(lg, nv);
            for (int64_t i = 0; i < nv; i++) {
                float v = lg[i] - lse + score[r];
                if (nc == NC && !(v > cval[NC - 1])) continue;
                int j = nc < NC ? nc++ : NC - 1;
                for (; j > 0 && v > cval[j - 1]; j--) {
                    cval[j] = cval[j - 1];
                    cflat[j] = cflat[j - 1];
                }
                cval[j] = v;
                cflat[j] = (int64_t)r * nv + i;
            }
        }
        int sec = K;
        if (n_fin + K > cap_fin) {
            wfin *g = realloc(fin, (size_t)(2 * cap_fin) * sizeof *fin);
            if (!g) {
                s = cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
                break;
            }
            fin = g;
            cap_fin *= 2;
        }
        for (int k = 0; k < K; k++) {
            int32_t id = k < nc ? (int32_t)(cflat[k] % nv) : w->eot;
            active[k] = k;
            if (k >= nc || !(id == w->eot || last)) continue;
            if (k == 0) top_finished = true;
            const tokbuf *from = A[cflat[k] / nv];
            wfin *f = &fin[n_fin++];
            f->n = from->n + (id != w->eot);
            f->ids = malloc((size_t)(f->n ? f->n : 1) * sizeof *f->ids);
            if (!f->ids) {
                s = cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
                break;
            }
            memcpy(f->ids, from->ids, (size_t)from->n * sizeof *f->ids);
            if (id != w->eot) f->ids[from->n] = id;
            f->score = cval[k];
            for (int j = sec; j < nc; j++)
                if (cflat[j] % nv != w->eot) {
                    active[k] = j;
                    sec = j + 1;
                    break;
                }
        }
        if (s || last || (early ? top_finished && n_fin >= 1 : n_fin >= max_cand)) break;
        /* the next beams, their tokens and cache slots */
        bool claimed[WHISPER_MAX_BATCH] = {false};
        int parent_slot[WHISPER_MAX_BATCH];
        for (int k = 0; k < K; k++) {
            int j = active[k];
            int par = j < nc ? (int)(cflat[j] / nv) : 0;
            next[k] = j < nc ? (int32_t)(cflat[j] % nv) : w->eot;
            if (!tokbuf_set(B[k], A[par], next[k])) {
                s = cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
                break;
            }
            score[k] = j < nc ? cval[j] : -INFINITY;
            parent_slot[k] = slot[par];
            nslot[k] = -1;
            if (!claimed[slot[par]]) {
                claimed[slot[par]] = true;
                nslot[k] = slot[par];
            }
        }
        for (int k = 0; !s && k < K; k++) {
            if (nslot[k] >= 0) continue;
            int f = 0;
            while (claimed[f]) f++;
            claimed[f] = true;
            slot_copy(st, f, parent_slot[k], st->pos);
            nslot[k] = f;
        }
        for (int k = 0; k < K; k++) {
            tokbuf *t = A[k];
            A[k] = B[k];
            B[k] = t;
            slot[k] = nslot[k];
        }
        if (!s) s = dec_step_batch(st, K, slot, next, logits);
    }
    /* the best finished hypothesis by score / length ^ length_penalty */
    int64_t best = -1;
    float best_v = 0;
    for (int64_t i = 0; i < n_fin && !s; i++) {
        float v = fin[i].score / powf((float)fin[i].n, o->p.length_penalty);
        if (best < 0 || v > best_v) {
            best = i;
            best_v = v;
        }
    }
    if (!s && best >= 0) {
        c->toks.n = 0;
        for (int64_t i = 0; i < fin[best].n && !s; i++)
            if (!tokbuf_push(&c->toks, fin[best].ids[i])) s = cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
        c->sum_lp = fin[best].score;
        c->nsp = nsp;
    } else if (!s) {
        s = cdl_set_error(NULL, CANDLE_ERR_INTERNAL, "whisper: beam search finished nothing");
    }
    for (int64_t i = 0; i < n_fin; i++) free(fin[i].ids);
    free(fin);
    return s;
}

/* The window decoded at temp: at 0 beam search (beam_size > 1) or greedy;
 * above 0 the best of best_of draws by sum of log-probabilities / length
 * (CTranslate2's score with length_penalty 1), decoded WHISPER_MAX_BATCH at
 * a time. pool: 2 WHISPER_MAX_BATCH scratch decodings. */
static candle_status decode_at(wdec *st, wopts *o, float temp, const int32_t *prompt, int64_t n_prompt,
                               float *logits, wcand *c, wcand *pool) {
    candle_status s;
    if (temp == 0 && o->p.beam_size > 1) {
        s = beam_search(st, o, prompt, n_prompt, logits, pool, c);
    } else {
        int n = temp > 0 && o->p.best_of > 1 ? o->p.best_of : 1;
        double best = -INFINITY;
        bool have = false;
        for (int k0 = 0; k0 < n; k0 += WHISPER_MAX_BATCH) {
            int nb = n - k0 < WHISPER_MAX_BATCH ? n - k0 : WHISPER_MAX_BATCH;
            s = sample_batch(st, o, temp, nb, prompt, n_prompt, logits, pool);
            if (s) return s;
            for (int b = 0; b < nb; b++) {
                wcand *d = &pool[b];
                double len = (double)d->toks.n, score = len > 0 ? d->sum_lp / len : -INFINITY;
                if (have && !(score > best)) continue;
                if (!cand_copy(c, d)) return cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
                best = score;
                have = true;
            }
        }
        s = CANDLE_OK;
    }
    if (s) return s;
    c->temp = temp;
    c->avg_lp = (float)(c->sum_lp / (double)(c->toks.n + 1));
    char *text = NULL;
    s = decode_text(st->w, c->toks.ids, c->toks.n, &text);
    if (s) return s;
    c->cr = compression_ratio(text);
    free(text);
    return CANDLE_OK;
}

/* faster-whisper's generate_with_fallback: the decoding kept in *out. */
static candle_status decode_with_fallback(wdec *st, wopts *o, const int32_t *prompt, int64_t n_prompt, float *logits,
                                          wcand *cur, wcand *pool, wcand *best_all, wcand *best_low, wcand *out) {
    const candle_whisper_transcribe_params *p = &o->p;
    bool have_all = false, have_low = false;
    for (int i = 0; i < o->n_temps; i++) {
        candle_status s = decode_at(st, o, o->temps[i], prompt, n_prompt, logits, cur, pool);
        if (s) return s;
        bool fallback = false, low = true;
        if (!isnan(p->compression_ratio_threshold) && cur->cr > p->compression_ratio_threshold) {
            fallback = true; /* too repetitive */
            low = false;
        }
        if (!isnan(p->log_prob_threshold) && cur->avg_lp < p->log_prob_threshold) fallback = true;
        if (!isnan(p->no_speech_threshold) && cur->nsp > p->no_speech_threshold && !isnan(p->log_prob_threshold) &&
            cur->avg_lp < p->log_prob_threshold)
            fallback = false; /* silence */
        if (!fallback) return cand_copy(out, cur) ? CANDLE_OK : cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
        if ((!have_all || cur->avg_lp > best_all->avg_lp) && !cand_copy(best_all, cur))
            return cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
        have_all = true;
        if (low && (!have_low || cur->avg_lp > best_low->avg_lp)) {
            if (!cand_copy(best_low, cur)) return cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
            have_low = true;
        }
    }
    /* none passed: the likeliest, reported at the last temperature (which
     * prompt_reset_on_temperature then sees, as in the reference) */
    if (!cand_copy(out, have_low ? best_low : best_all)) return cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
    out->temp = o->temps[o->n_temps - 1];
    return CANDLE_OK;
}

/* faster-whisper's window at seek: frames [seek, seek + len) of mel
 * ([nm][frames]) then zeros. */
static void window(const float *mel, size_t nm, size_t frames, size_t seek, size_t len, float *win) {
    for (size_t r = 0; r < nm; r++) {
        float *row = win + r * CANDLE_WHISPER_CHUNK_FRAMES;
        memcpy(row, mel + r * frames + seek, len * sizeof *row);
        memset(row + len, 0, (CANDLE_WHISPER_CHUNK_FRAMES - len) * sizeof *row);
    }
}

/* A transcription in progress. */
typedef struct wrun {
    const candle_whisper *w;
    wopts o;
    candle_whisper_result *r;
    int64_t cap_segments;
    tokbuf all;           /* the initial prompt's then every kept segment's tokens, the prompt's source */
    int64_t reset_since;  /* the prompt uses all.ids[reset_since..] */
    bool stopped;         /* the callback asked to stop */
    double last_speech;   /* word timestamps: the end of the last segment with words */
} wrun;

/* A segment [t0, t1] of tokens kept (unless empty) and handed on. */
static void words_free(candle_whisper_word *w, int64_t n) {
    for (int64_t i = 0; w && i < n; i++) free(w[i].word);
    free(w);
}

/* A segment [t0, t1] of tokens kept (unless empty) and handed on; it takes
 * the words (freed when the segment is dropped). */
static candle_status emit(wrun *R, const int32_t *toks, int64_t n, double t0, double t1, int64_t seek,
                          float temp, float avg_lp, float cr, float nsp, candle_whisper_word *words,
                          int64_t n_words) {
    char *text = NULL;
    candle_status s = decode_text(R->w, toks, n, &text);
    if (s) {
        words_free(words, n_words);
        return s;
    }
    bool blank = true;
    for (const char *c = text; *c && blank; c++) blank = *c == ' ' || *c == '\t' || *c == '\n' || *c == '\r';
    if (t0 == t1 || blank) {
        free(text);
        words_free(words, n_words);
        return CANDLE_OK;
    }
    candle_whisper_result *r = R->r;
    if (r->n_segments == R->cap_segments) {
        int64_t cap = R->cap_segments ? 2 * R->cap_segments : 16;
        candle_whisper_segment *g = realloc(r->segments, (size_t)cap * sizeof *g);
        if (!g) {
            free(text);
            words_free(words, n_words);
            return cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
        }
        r->segments = g;
        R->cap_segments = cap;
    }
    candle_whisper_segment *g = &r->segments[r->n_segments];
    *g = (candle_whisper_segment){.t0 = t0, .t1 = t1, .text = text, .n_tokens = n, .seek = seek,
                                  .temperature = temp, .avg_logprob = avg_lp, .compression_ratio = cr,
                                  .no_speech_prob = nsp, .words = words, .n_words = n_words};
    g->tokens = malloc((size_t)(n ? n : 1) * sizeof *g->tokens);
    if (!g->tokens) {
        free(text);
        words_free(words, n_words);
        g->words = NULL;
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
    }
    memcpy(g->tokens, toks, (size_t)n * sizeof *toks);
    r->n_segments++;
    for (int64_t i = 0; i < n; i++)
        if (!tokbuf_push(&R->all, toks[i])) return cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
    if (R->o.p.on_segment && R->o.p.on_segment(g, R->o.p.user)) R->stopped = true;
    return CANDLE_OK;
}

/* A segment of a window's tokens: t[off, off + len). */
typedef struct wseg {
    int64_t off, len;
    cdl_wsub sub; /* its start and end, its words */
} wseg;

/* faster-whisper's _split_segments_by_timestamps of a window's tokens t[n]:
 * the segments into g (at most n), their count returned; the next seek and
 * whether the text ended on a single timestamp. */
static int64_t split_segments(const wrun *R, const int32_t *t, int64_t n, size_t *seek, size_t segment_size,
                              wseg *g, bool *single_ending_out) {
    int32_t tb = R->o.ts_begin;
    double time_offset = (double)*seek * WHISPER_FRAME_SECONDS;
    bool single_ending = n >= 2 && t[n - 2] < tb && t[n - 1] >= tb;
    bool consecutive = false;
    for (int64_t i = 1; i < n && !consecutive; i++) consecutive = t[i] >= tb && t[i - 1] >= tb;
    *single_ending_out = single_ending;
    int64_t ng = 0;
    if (consecutive) {
        int64_t last = 0;
        for (int64_t i = 1; i <= n; i++) {
            bool cut = i < n ? t[i] >= tb && t[i - 1] >= tb : single_ending;
            if (!cut) continue;
            int64_t len = i - last;
            g[ng++] = (wseg){.off = last, .len = len,
                             .sub = {.start = time_offset + (t[last] - tb) * WHISPER_TIME_PRECISION,
                                     .end = time_offset + (t[last + len - 1] - tb) * WHISPER_TIME_PRECISION}};
            last = i;
        }
        if (single_ending) *seek += segment_size; /* no speech after the last timestamp */
        else *seek += (size_t)(t[last - 1] - tb) * WHISPER_INPUT_STRIDE; /* the unfinished segment again */
        return ng;
    }
    double duration = (double)segment_size * WHISPER_FRAME_SECONDS;
    int32_t last_ts = -1;
    for (int64_t i = 0; i < n; i++)
        if (t[i] >= tb) last_ts = t[i];
    if (R->o.p.timestamps && last_ts > tb) duration = (last_ts - tb) * WHISPER_TIME_PRECISION;
    g[0] = (wseg){.off = 0, .len = n, .sub = {.start = time_offset, .end = time_offset + duration}};
    *seek += segment_size;
    return 1;
}

/* The sot sequence of the window: <|startoftranscript|> [language, task]. */
static int64_t sot_sequence(const wrun *R, int32_t *out) {
    const candle_whisper *w = R->w;
    int64_t n = 0;
    out[n++] = w->sot;
    if (R->o.lang_tok >= 0) { /* faster-whisper's sot_sequence of a multilingual model */
        out[n++] = R->o.lang_tok;
        out[n++] = R->o.p.translate ? w->translate_tok : w->transcribe_tok;
    }
    return n;
}

/* CTranslate2's WhisperReplica::align on the window in st: the decoder on
 * sot sequence, <|notimestamps|>, the T text tokens and <|endoftext|> from
 * position 0 (slot 0; the window's decoding is done); the raw scores of the
 * alignment heads' queries against the first num_frames / 2 encoder frames
 * (cdl_whisper_alignment: jump[T + 1]); probs[t] the probability of text[t]
 * among the text tokens (a softmax over the ids below <|endoftext|>). */
static candle_status align_window(wdec *st, const wrun *R, const int32_t *text, int64_t T, size_t num_frames,
                                  double *jump, float *probs) {
    const candle_whisper *w = st->w;
    const candle_whisper_dims *d = &w->d;
    candle_ctx *ctx = st->ctx;
    int32_t seq_head[4];
    int64_t off = sot_sequence(R, seq_head), N = off + 1 + T + 1, nv = d->n_vocab, D = d->n_state / d->n_head;
    int64_t F = (int64_t)num_frames / 2, H = d->n_head, nh = w->n_align;
    if (F < 1) F = 1;
    if (F > d->n_audio_ctx) F = d->n_audio_ctx;
    if (N > d->n_text_ctx)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "whisper: %lld tokens to align, past the text context of %lld",
                             (long long)N, (long long)d->n_text_ctx);
    int32_t *seq = malloc((size_t)N * sizeof *seq), pos[WHISPER_STEP_MAX];
    float *scores = malloc((size_t)(nh * N * F) * sizeof *scores);
    float *lg = malloc((size_t)(WHISPER_STEP_MAX * nv) * sizeof *lg);
    float *q = malloc((size_t)(H * WHISPER_STEP_MAX * D) * sizeof *q);
    candle_status s = seq && scores && lg && q ? CANDLE_OK : cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
    if (!s) {
        memcpy(seq, seq_head, (size_t)off * sizeof *seq);
        seq[off] = w->no_timestamps;
        memcpy(seq + off + 1, text, (size_t)T * sizeof *seq);
        seq[N - 1] = w->eot;
    }
    const float scale = 1.0f / sqrtf((float)D); /* CTranslate2 scales the queries */
    st->pos = 0;
    for (int64_t i0 = 0; !s && i0 < N; i0 += WHISPER_STEP_MAX) {
        int64_t n = N - i0 < WHISPER_STEP_MAX ? N - i0 : WHISPER_STEP_MAX;
        candle_ctx_reset(ctx, st->mark);
        for (int64_t i = 0; i < n; i++) pos[i] = (int32_t)(i0 + i);
        candle_tensor *tt = candle_tensor_from_i32(ctx, 1, &n, seq + i0), *pt = candle_tensor_from_i32(ctx, 1, &n, pos);
        candle_tensor *x = candle_add(ctx, candle_embedding(ctx, w->tok_embd, tt), candle_embedding(ctx, w->dec_pos, pt));
        int slot = 0;
        st->capture = true;
        for (int64_t il = 0; il < d->n_text_layer && x; il++) x = dec_block(st, &w->dec[il], il, x, 1, &slot);
        st->capture = false;
        candle_tensor *outs[1 + WHISPER_MAX_LAYERS];
        int no = 0;
        outs[no++] = candle_contiguous(ctx, candle_linear(ctx, norm(ctx, x, &w->dec_ln), w->tok_embd, NULL));
        for (int64_t il = 0; il < d->n_text_layer; il++) outs[no++] = st->cq[il];
        for (int k = 0; k < no && !candle_errcode(ctx); k++)
            if (!outs[k]) cdl_set_error(ctx, CANDLE_ERR_INTERNAL, "whisper: alignment graph");
        candle_graph *g = candle_errcode(ctx) ? NULL : candle_graph_build(ctx, outs, no);
        s = g ? candle_graph_compute(ctx, g) : candle_errcode(ctx);
        if (!s) s = candle_tensor_to_f32(outs[0], lg);
        if (s) {
            s = cdl_set_error(NULL, s, "whisper: %s", candle_errmsg(ctx));
            break;
        }
        /* the probabilities of the text tokens: rows off .. off + T - 1 predict them */
        for (int64_t i = 0; i < n; i++) {
            int64_t r = i0 + i - off;
            if (r < 0 || r >= T) continue;
            const float *row = lg + i * nv;
            float m = -INFINITY, sum = 0;
            for (int64_t v = 0; v < w->eot; v++) m = fmaxf(m, row[v]);
            for (int64_t v = 0; v < w->eot; v++) sum += expf(row[v] - m);
            probs[r] = text[r] < w->eot ? expf(row[text[r]] - m) / sum : 0;
        }
        /* the alignment heads' scores: queries [H][n][D] against keys [H][1500][D] */
        for (int a = 0; a < nh && !s; a++) {
            int l = w->align_l[a], h = w->align_h[a];
            if (a == 0 || l != w->align_l[a - 1]) s = candle_tensor_to_f32(st->cq[l], q);
            const float *K = candle_tensor_data(st->ck[l]);
            for (int64_t i = 0; i < n && !s; i++) {
                float qs[256];
                const float *qr = q + (h * n + i) * D;
                for (int64_t e = 0; e < D && e < 256; e++) qs[e] = qr[e] * scale;
                float *out = scores + ((size_t)a * (size_t)N + (size_t)(i0 + i)) * (size_t)F;
                for (int64_t f = 0; f < F; f++) {
                    const float *kr = K + ((size_t)h * (size_t)d->n_audio_ctx + (size_t)f) * (size_t)D;
                    float acc = 0;
                    for (int64_t e = 0; e < D; e++) acc += qs[e] * kr[e];
                    out[f] = acc;
                }
            }
        }
        st->pos += n;
    }
    if (!s && D > 256) s = cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "whisper: head size %lld", (long long)D);
    if (!s) s = cdl_whisper_alignment(scores, (int)nh, N, F, 7, off, T, jump);
    free(seq);
    free(scores);
    free(lg);
    free(q);
    return s;
}

static const char *lang_by_char[] = {"zh", "ja", "th", "lo", "my", "yue"};

/* faster-whisper's add_word_timestamps for one window (its segments g[ng]
 * from the tokens t, after seek) and the alignment it calls. */
static candle_status window_words(wdec *st, wrun *R, const int32_t *t, wseg *g, int64_t ng, size_t num_frames,
                                  size_t seek) {
    const candle_whisper *w = R->w;
    int64_t T = 0;
    for (int64_t k = 0; k < ng; k++) {
        g[k].sub.n_text = 0;
        for (int64_t i = 0; i < g[k].len; i++) g[k].sub.n_text += t[g[k].off + i] < w->eot;
        T += g[k].sub.n_text;
    }
    int32_t *text = malloc((size_t)(T ? T : 1) * sizeof *text);
    double *jump = malloc((size_t)(T + 1) * sizeof *jump);
    float *probs = malloc((size_t)(T ? T : 1) * sizeof *probs);
    candle_status s = text && jump && probs ? CANDLE_OK : cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
    int64_t k = 0;
    for (int64_t j = 0; !s && j < ng; j++)
        for (int64_t i = 0; i < g[j].len; i++)
            if (t[g[j].off + i] < w->eot) text[k++] = t[g[j].off + i];
    if (!s) s = align_window(st, R, text, T, num_frames, jump, probs);
    cdl_wword *a = NULL;
    int64_t na = 0;
    bool by_char = false;
    for (size_t i = 0; i < sizeof lang_by_char / sizeof *lang_by_char; i++)
        by_char = by_char || !strcmp(R->r->language, lang_by_char[i]);
    if (!s) s = cdl_whisper_split_words(w->tok, w->eot, text, T, by_char, &a, &na);
    if (!s) {
        /* find_alignment: the words but the last (<|endoftext|>), from the
         * jump at their first token to the jump at the next word's */
        if (na <= 1) na = 1;
        int64_t b = 0;
        for (int64_t i = 0; i + 1 < na; i++) {
            int64_t e = b + a[i].ntok;
            if (e > T) e = T;
            a[i].start = jump[b];
            a[i].end = jump[e];
            double sum = 0;
            for (int64_t j = b; j < e; j++) sum += probs[j];
            a[i].prob = e > b ? sum / (double)(e - b) : NAN;
            b = e;
        }
        cdl_wsub *subs = malloc((size_t)ng * sizeof *subs);
        if (!subs) s = cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
        for (int64_t j = 0; !s && j < ng; j++) subs[j] = g[j].sub;
        const candle_whisper_transcribe_params *p = &R->o.p;
        if (!s)
            s = cdl_whisper_place_words(a, na - 1, subs, ng, (double)seek / 100.0,
                                        p->prepend_punctuations ? p->prepend_punctuations : "\"'\xe2\x80\x9c\xc2\xbf([{-",
                                        p->append_punctuations ? p->append_punctuations
                                                               : "\"'.\xe3\x80\x82,\xef\xbc\x8c!\xef\xbc\x81?\xef\xbc\x9f:\xef\xbc\x9a\xe2\x80\x9d)]}\xe3\x80\x81",
                                        &R->last_speech);
        for (int64_t j = 0; subs && j < ng; j++) g[j].sub = subs[j]; /* the words, freed by the caller on error */
        free(subs);
    }
    cdl_whisper_words_free(a, na);
    free(text);
    free(jump);
    free(probs);
    return s;
}

/* The prompt of the next window: [<|startofprev|> the last 223 tokens]
 * <|startoftranscript|> [<|notimestamps|>]. */
static int64_t make_prompt(const wrun *R, int32_t *prompt) {
    const candle_whisper *w = R->w;
    int64_t n = 0, n_prev = R->all.n - R->reset_since, keep = w->d.n_text_ctx / 2 - 1;
    if (n_prev > 0 && w->sot_prev >= 0) {
        if (n_prev > keep) n_prev = keep;
        prompt[n++] = w->sot_prev;
        memcpy(prompt + n, R->all.ids + R->all.n - n_prev, (size_t)n_prev * sizeof *prompt);
        n += n_prev;
    }
    n += sot_sequence(R, prompt + n);
    if (!R->o.p.timestamps) prompt[n++] = w->no_timestamps;
    return n;
}

static candle_status run_windows(wrun *R, const float *mel, size_t nm, size_t frames) {
    const candle_whisper *w = R->w;
    wdec st;
    int n_slots = R->o.p.beam_size > 1 ? R->o.p.beam_size : 1;
    for (int i = 0; i < R->o.n_temps; i++)
        if (R->o.temps[i] > 0 && R->o.p.best_of > n_slots)
            n_slots = R->o.p.best_of < WHISPER_MAX_BATCH ? R->o.p.best_of : WHISPER_MAX_BATCH;
    candle_status s = dec_init(&st, w, R->o.p.n_threads, n_slots);
    float *win = malloc(nm * CANDLE_WHISPER_CHUNK_FRAMES * sizeof *win);
    float *logits = malloc((size_t)WHISPER_MAX_BATCH * (size_t)w->d.n_vocab * sizeof *logits);
    int32_t *prompt = malloc((size_t)(w->d.n_text_ctx + 4) * sizeof *prompt);
    if (!s && (!win || !logits || !prompt)) s = cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
    wcand c[4] = {0}; /* the current decoding, the best two so far, the one kept */
    wcand pool[2 * WHISPER_MAX_BATCH] = {0}; /* draws, beams */
    wcand *res = &c[3];
    /* faster-whisper never feeds the last frame */
    size_t content = frames > 0 ? frames - 1 : 0;
    for (size_t seek = 0; !s && !R->stopped && seek < content;) {
        size_t segment_size = content - seek < CANDLE_WHISPER_CHUNK_FRAMES ? content - seek : CANDLE_WHISPER_CHUNK_FRAMES;
        window(mel, nm, frames, seek, segment_size, win);
        s = dec_window(&st, win);
        int64_t n_prompt = make_prompt(R, prompt);
        if (!s) s = decode_with_fallback(&st, &R->o, prompt, n_prompt, logits, &c[0], pool, &c[1], &c[2], res);
        if (s) break;
        const candle_whisper_transcribe_params *p = &R->o.p;
        if (!isnan(p->no_speech_threshold) && res->nsp > p->no_speech_threshold &&
            !(!isnan(p->log_prob_threshold) && res->avg_lp > p->log_prob_threshold)) {
            seek += segment_size; /* silence: on to the next window */
            continue;
        }
        size_t before = seek;
        bool single_ending = false;
        wseg *g = malloc((size_t)(res->toks.n ? res->toks.n : 1) * sizeof *g);
        if (!g) {
            s = cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
            break;
        }
        int64_t ng = split_segments(R, res->toks.ids, res->toks.n, &seek, segment_size, g, &single_ending);
        if (p->word_timestamps) {
            s = window_words(&st, R, res->toks.ids, g, ng, segment_size, before);
            /* faster-whisper: the next window from the last word's end */
            double last_end = -1;
            for (int64_t k = ng - 1; k >= 0 && last_end < 0; k--)
                if (g[k].sub.n_words) last_end = g[k].sub.words[g[k].sub.n_words - 1].t1;
            if (last_end < 0 && ng > 0) last_end = g[ng - 1].sub.end;
            if (!single_ending && last_end > (double)before * WHISPER_FRAME_SECONDS)
                seek = (size_t)nearbyint(last_end * 100.0);
            if (last_end >= 0) R->last_speech = last_end;
        }
        for (int64_t k = 0; k < ng; k++) {
            const int32_t *sl = res->toks.ids + g[k].off;
            if (!s && !R->stopped)
                s = emit(R, sl, g[k].len, g[k].sub.start, g[k].sub.end, (int64_t)before, res->temp, res->avg_lp,
                         res->cr, res->nsp, g[k].sub.words, g[k].sub.n_words);
            else
                words_free(g[k].sub.words, g[k].sub.n_words);
        }
        free(g);
        if (seek <= before) seek = before + segment_size; /* always forward */
        if (!p->condition_on_previous_text || res->temp > p->prompt_reset_on_temperature) R->reset_since = R->all.n;
    }
    for (int i = 0; i < 4; i++) free(c[i].toks.ids);
    for (int i = 0; i < 2 * WHISPER_MAX_BATCH; i++) free(pool[i].toks.ids);
    free(win);
    free(logits);
    free(prompt);
    dec_free(&st);
    return s;
}

/* faster-whisper's initial_prompt: the tokens of " " + the text stripped
 * (or the ids given) first in the prompt's source, as if transcribed. */
static candle_status initial_prompt(wrun *R) {
    const candle_whisper_transcribe_params *p = &R->o.p;
    if (!p->initial_prompt) {
        for (int64_t i = 0; i < p->n_initial_prompt_tokens; i++)
            if (!tokbuf_push(&R->all, p->initial_prompt_tokens[i]))
                return cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
        return CANDLE_OK;
    }
    const char *t = p->initial_prompt;
    while (*t == ' ' || (*t >= '\t' && *t <= '\r')) t++;
    size_t len = strlen(t);
    while (len && (t[len - 1] == ' ' || (t[len - 1] >= '\t' && t[len - 1] <= '\r'))) len--;
    char *text = malloc(len + 2);
    if (!text) return cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
    text[0] = ' ';
    memcpy(text + 1, t, len);
    text[len + 1] = 0;
    int64_t cap = (int64_t)len + 8, n = 0;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    /* HF's encode(add_special_tokens=False) still matches special tokens' text */
    candle_status s = ids ? candle_tokenizer_encode(R->w->tok, text, len + 1, false, true, ids, cap, &n)
                          : cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
    if (!s && n > cap) {
        int32_t *more = realloc(ids, (size_t)n * sizeof *ids);
        s = more ? candle_tokenizer_encode(R->w->tok, text, len + 1, false, true, more, n, &n)
                 : cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
        if (more) ids = more;
    }
    for (int64_t i = 0; !s && i < n; i++)
        if (!tokbuf_push(&R->all, ids[i])) s = cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
    free(text);
    free(ids);
    return s;
}

/* The segments' texts and tokens concatenated. */
static candle_status join_result(candle_whisper_result *r) {
    size_t len = 0;
    int64_t nt = 0;
    for (int64_t i = 0; i < r->n_segments; i++) {
        len += strlen(r->segments[i].text);
        nt += r->segments[i].n_tokens;
    }
    r->text = malloc(len + 1);
    r->tokens = malloc((size_t)(nt ? nt : 1) * sizeof *r->tokens);
    if (!r->text || !r->tokens) return cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
    len = 0;
    for (int64_t i = 0; i < r->n_segments; i++) {
        const candle_whisper_segment *g = &r->segments[i];
        size_t l = strlen(g->text);
        memcpy(r->text + len, g->text, l);
        len += l;
        memcpy(r->tokens + r->n_tokens, g->tokens, (size_t)g->n_tokens * sizeof *g->tokens);
        r->n_tokens += g->n_tokens;
    }
    r->text[len] = 0;
    return CANDLE_OK;
}

typedef struct wlang {
    int idx;
    float p;
} wlang;

static int wlang_cmp(const void *a, const void *b) {
    const wlang *x = a, *y = b;
    return x->p < y->p ? 1 : x->p > y->p ? -1 : x->idx - y->idx;
}

/* The languages of the first window, best first, into out[n_lang]. */
static candle_status detect(const candle_whisper *w, const float *samples, size_t n, int n_threads, wlang *out) {
    size_t n30 = n < (size_t)CANDLE_WHISPER_CHUNK_FRAMES * CANDLE_WHISPER_HOP ? n
                                                                              : (size_t)CANDLE_WHISPER_CHUNK_FRAMES * CANDLE_WHISPER_HOP;
    size_t frames = candle_whisper_mel_frames(n30, CANDLE_WHISPER_HOP), nm = (size_t)w->d.n_mels;
    size_t len = frames < CANDLE_WHISPER_CHUNK_FRAMES ? frames : CANDLE_WHISPER_CHUNK_FRAMES;
    float *mel = malloc(nm * frames * sizeof *mel), *win = malloc(nm * CANDLE_WHISPER_CHUNK_FRAMES * sizeof *win);
    float *logits = malloc((size_t)w->d.n_vocab * sizeof *logits);
    wdec st;
    candle_status s = dec_init(&st, w, n_threads, 1);
    if (!s && (!mel || !win || !logits)) s = cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
    /* as faster-whisper: every frame of the features (the last one too), the
     * window padded with zeros (pad_or_trim) */
    if (!s) s = candle_whisper_log_mel(samples, n30, (int)nm, CANDLE_WHISPER_HOP, mel, frames);
    if (!s) {
        window(mel, nm, frames, 0, len, win);
        s = dec_window(&st, win);
    }
    if (!s) s = dec_step(&st, 0, &w->sot, 1, logits);
    if (!s) { /* the softmax over the language tokens' logits alone */
        float m = -INFINITY;
        for (int i = 0; i < w->n_lang; i++) m = fmaxf(m, logits[w->lang_ids[i]]);
        double sum = 0;
        for (int i = 0; i < w->n_lang; i++) sum += exp((double)logits[w->lang_ids[i]] - m);
        for (int i = 0; i < w->n_lang; i++)
            out[i] = (wlang){i, (float)(exp((double)logits[w->lang_ids[i]] - m) / sum)};
        qsort(out, (size_t)w->n_lang, sizeof *out, wlang_cmp);
    }
    dec_free(&st);
    free(mel);
    free(win);
    free(logits);
    return s;
}

candle_status candle_whisper_transcribe(const candle_whisper *w, const float *samples, size_t n,
                                        const candle_whisper_transcribe_params *p, candle_whisper_result *out) {
    if (!out) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "whisper_transcribe: NULL out");
    memset(out, 0, sizeof *out);
    if (!w || !samples || !n) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "whisper_transcribe: no audio");
    wrun R = {.w = w, .r = out};
    R.o.p = p ? *p : candle_whisper_transcribe_default_params();
    if (R.o.p.n_threads < 0 || R.o.p.max_tokens < 0 || !(R.o.p.max_initial_timestamp >= 0))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "whisper_transcribe: n_threads %d, max_tokens %lld, max_initial_timestamp %g",
                                R.o.p.n_threads, (long long)R.o.p.max_tokens, (double)R.o.p.max_initial_timestamp);
    const candle_whisper_transcribe_params *q = &R.o.p;
    if (q->n_temperatures < 0 || q->n_temperatures > WHISPER_MAX_TEMPS || (q->n_temperatures && !q->temperatures) ||
        q->best_of < 0)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "whisper_transcribe: %d temperatures (at most %d), best_of %d", q->n_temperatures,
                                WHISPER_MAX_TEMPS, q->best_of);
    if (q->beam_size < 0 || q->beam_size > WHISPER_MAX_BATCH || !(q->patience > 0) || !(q->length_penalty >= 0))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "whisper_transcribe: beam_size %d (0..%d), patience %g (> 0), length_penalty %g (>= 0)",
                                q->beam_size, WHISPER_MAX_BATCH, (double)q->patience, (double)q->length_penalty);
    static const float def_temps[] = {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f};
    const float *temps = q->n_temperatures ? q->temperatures : def_temps;
    R.o.n_temps = q->n_temperatures ? q->n_temperatures : 6;
    for (int i = 0; i < R.o.n_temps; i++) {
        if (!(temps[i] >= 0 && temps[i] <= 100))
            return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "whisper_transcribe: temperature %g", (double)temps[i]);
        R.o.temps[i] = temps[i];
    }
    if (q->n_initial_prompt_tokens < 0 || (q->n_initial_prompt_tokens && !q->initial_prompt_tokens))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "whisper_transcribe: %lld initial prompt tokens",
                             (long long)q->n_initial_prompt_tokens);
    for (int64_t i = 0; !q->initial_prompt && i < q->n_initial_prompt_tokens; i++)
        if (q->initial_prompt_tokens[i] < 0 || q->initial_prompt_tokens[i] >= w->d.n_vocab)
            return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "whisper_transcribe: initial prompt token %d of %lld",
                                 (int)q->initial_prompt_tokens[i], (long long)w->d.n_vocab);
    R.o.rng = q->seed;
    R.o.lang_tok = -1;
    snprintf(out->language, sizeof out->language, "en");
    out->language_probability = 1;
    if (w->n_lang) {
        const char *lang = q->language;
        if (!lang || !*lang || !strcmp(lang, "auto")) { /* faster-whisper's detect_language */
            wlang L[WHISPER_MAX_LANGS];
            candle_status ds = detect(w, samples, n, q->n_threads, L);
            if (ds) return ds;
            R.o.lang_tok = w->lang_ids[L[0].idx];
            snprintf(out->language, sizeof out->language, "%s", w->lang_codes[L[0].idx]);
            out->language_probability = L[0].p;
        } else {
            for (int i = 0; i < w->n_lang && R.o.lang_tok < 0; i++)
                if (!strcmp(w->lang_codes[i], lang)) {
                    R.o.lang_tok = w->lang_ids[i];
                    snprintf(out->language, sizeof out->language, "%s", lang);
                }
            if (R.o.lang_tok < 0) {
                char esc[64];
                candle_escape_text(lang, strlen(lang), esc, sizeof esc);
                return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "whisper_transcribe: unknown language '%s'", esc);
            }
        }
    }
    R.o.ts_begin = w->no_timestamps + 1;
    R.o.ts_end = (int32_t)w->d.n_vocab - 1;
    if (R.o.p.timestamps && R.o.ts_begin > R.o.ts_end)
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "whisper_transcribe: the vocabulary has no timestamps");
    double mi = round(R.o.p.max_initial_timestamp / WHISPER_TIME_PRECISION);
    R.o.max_initial = mi > R.o.ts_end - R.o.ts_begin ? R.o.ts_end : R.o.ts_begin + (int32_t)mi;
    candle_status s = initial_prompt(&R);
    if (s) {
        free(R.all.ids);
        return s;
    }
    /* faster-whisper's features: 160 zeros after the audio */
    size_t frames = candle_whisper_mel_frames(n, CANDLE_WHISPER_HOP), nm = (size_t)w->d.n_mels;
    float *mel = malloc(nm * frames * sizeof *mel);
    s = mel ? candle_whisper_log_mel(samples, n, (int)nm, CANDLE_WHISPER_HOP, mel, frames)
            : cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
    if (!s) s = run_windows(&R, mel, nm, frames);
    free(mel);
    free(R.all.ids);
    if (!s) s = join_result(out);
    if (s) candle_whisper_result_free(out);
    return s;
}

void candle_whisper_result_free(candle_whisper_result *r) {
    if (!r) return;
    free(r->text);
    free(r->tokens);
    for (int64_t i = 0; i < r->n_segments; i++) {
        free(r->segments[i].text);
        free(r->segments[i].tokens);
        words_free(r->segments[i].words, r->segments[i].n_words);
    }
    free(r->segments);
    memset(r, 0, sizeof *r);
}

bool candle_whisper_is_multilingual(const candle_whisper *w) { return w && w->n_lang > 0; }

candle_status candle_whisper_detect_language(const candle_whisper *w, const float *samples, size_t n,
                                             int n_threads, char (*codes)[16], float *probs, int n_out,
                                             int *n_langs) {
    if (!w || !samples || !n || n_out < 0 || (n_out > 0 && (!codes || !probs)) || n_threads < 0)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "whisper_detect_language: no audio or bad arguments");
    if (!w->n_lang)
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "whisper_detect_language: an English-only model");
    wlang L[WHISPER_MAX_LANGS];
    candle_status s = detect(w, samples, n, n_threads, L);
    if (s) return s;
    for (int i = 0; i < n_out && i < w->n_lang; i++) {
        memcpy(codes[i], w->lang_codes[L[i].idx], sizeof codes[i]);
        probs[i] = L[i].p;
    }
    if (n_langs) *n_langs = w->n_lang;
    return CANDLE_OK;
}
