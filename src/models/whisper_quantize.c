/* `candle quantize` for Whisper: any Whisper source (whisper-src-impl.h) to
 * a whisper.cpp ggml file (include/candle/ggml_whisper.h).
 *
 * The types follow whisper.cpp's tools, so whisper.cpp loads the file (its
 * loader wants every matrix in the file type): convert-pt-to-ggml.py writes
 * f32, or f16 for every tensor of 2 or more dims except the conv biases and
 * the positional embeddings; examples/quantize then quantizes the 2-D ones
 * among those (the linear weights and the token embedding), leaving the
 * conv kernels in f16. Norms, biases and positional embeddings stay f32.
 * The quantizers are Candle's reference ones (the dtype traits' from_f32),
 * which match ggml's. A quantized source tensor is dequantized first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "candle/audio.h"
#include "candle/ggml_whisper.h"
#include "core/core-impl.h"
#include "whisper-src-impl.h"

/* ggml's file type of a weight dtype (GGML_FTYPE_*), or -1. */
static int ggml_ftype(candle_dtype t) {
    switch (t) {
    case CANDLE_DTYPE_F32: return 0;
    case CANDLE_DTYPE_F16: return 1;
    case CANDLE_DTYPE_Q4_0: return 2;
    case CANDLE_DTYPE_Q4_1: return 3;
    case CANDLE_DTYPE_Q8_0: return 7;
    case CANDLE_DTYPE_Q5_0: return 8;
    case CANDLE_DTYPE_Q5_1: return 9;
    case CANDLE_DTYPE_Q2_K: return 10;
    case CANDLE_DTYPE_Q3_K: return 11;
    case CANDLE_DTYPE_Q4_K: return 12;
    case CANDLE_DTYPE_Q5_K: return 13;
    case CANDLE_DTYPE_Q6_K: return 14;
    default: return -1;
    }
}

const char *candle_whisper_ggml_types(void) {
    return "f32, f16, q8_0, q5_0, q5_1, q4_0, q4_1, q2_k, q3_k, q4_k, q5_k, q6_k (k types: widths of a "
           "multiple of 256, so not tiny)";
}

typedef struct wq {
    whisper_src *s;
    FILE *f;
    const char *out;
    candle_dtype type; /* the matrices' */
    const candle_ggml_whisper_write_params *p;
    candle_quantize_stats *st;
    candle_quantize_progress pr;
    float *f32;     /* a tensor in f32 */
    void *dst;      /* its output bytes */
    size_t cap_f32, cap_dst;
    int64_t n_state;
} wq;

static candle_status werr(const wq *q, const char *what) {
    return cdl_set_error(NULL, CANDLE_ERR_IO, "quantize: %s: %s", q->out, what);
}

static candle_status wput(wq *q, const void *p, size_t n) {
    return fwrite(p, 1, n, q->f) == n ? CANDLE_OK : werr(q, "write failed");
}
static candle_status wput32(wq *q, int32_t v) { return wput(q, &v, 4); }

static candle_status grow(void **p, size_t *cap, size_t n) {
    if (n <= *cap) return CANDLE_OK;
    void *np = realloc(*p, n);
    if (!np) return cdl_set_error(NULL, CANDLE_ERR_OOM, "quantize: out of memory (%zu bytes)", n);
    *p = np;
    *cap = n;
    return CANDLE_OK;
}

/* Rows [r0, r0 + n) of t in f32, each of cols elements, into q->f32; a part
 * without data is zeros. */
static candle_status rows_f32(wq *q, const char *name, const wsrc_tensor *t, int64_t r0, int64_t n, int64_t cols) {
    candle_status r = grow((void **)&q->f32, &q->cap_f32, (size_t)(n * cols) * sizeof(float));
    if (r) return r;
    int64_t base = 0, done = 0;
    for (int i = 0; i < t->n_parts && done < n; i++) {
        const wsrc_part *pt = &t->part[i];
        int64_t lo = r0 + done > base ? r0 + done : base, hi = base + pt->rows < r0 + n ? base + pt->rows : r0 + n;
        for (int64_t row = lo; row < hi; row++, done++) {
            float *o = q->f32 + (row - r0) * cols;
            if (!pt->data) {
                memset(o, 0, (size_t)cols * sizeof *o);
                continue;
            }
            const candle_dtype_traits *dt = candle_dtype_info(pt->dtype);
            if (!dt || !dt->to_f32 || cols % dt->block_size)
                return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "quantize: %s: %s: dtype %s cannot be read",
                                     q->s->path, name, candle_dtype_name(pt->dtype));
            /* through q->dst (malloc'ed, aligned): the file's rows need not
             * be aligned for the type's 16-bit loads */
            size_t rs = candle_dtype_row_size(pt->dtype, cols);
            if ((r = grow(&q->dst, &q->cap_dst, rs))) return r;
            memcpy(q->dst, (const uint8_t *)pt->data + (size_t)(row - base) * rs, rs);
            dt->to_f32(q->dst, o, cols);
        }
        base += pt->rows;
    }
    if (done != n) return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "quantize: %s: %s: fewer rows than its shape", q->s->path, name);
    return CANDLE_OK;
}

/* One tensor of whisper.cpp's: name, ne innermost-first, from rows [r0,
 * r0 + n) of the source's ct2 tensor, written as dt. */
static candle_status put_tensor(wq *q, const char *name, const char *ct2, int64_t r0, int n_dims, const int32_t *ne,
                                candle_dtype dt) {
    wsrc_tensor t;
    if (!q->s->find(q->s, ct2, &t))
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "quantize: %s: lacks %s", q->s->path, ct2);
    int64_t rows = 1, cols = ne[0];
    for (int i = 1; i < n_dims; i++) rows *= ne[i];
    /* a conv kernel [O, C, 3] is O rows of C x 3; a conv bias [n, 1] n rows of 1 */
    if (n_dims == 3) rows = ne[2], cols = (int64_t)ne[0] * ne[1];
    if (n_dims == 2 && ne[0] == 1) rows = ne[1], cols = 1;
    if (n_dims == 1) rows = ne[0], cols = 1;
    int64_t numel = 1, src_rows = t.shape[0], src_numel = 1;
    for (int i = 0; i < n_dims; i++) numel *= ne[i];
    for (int i = 0; i < t.rank; i++) src_numel *= t.shape[i];
    if (src_numel / src_rows * rows != numel || r0 + rows > src_rows)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "quantize: %s: %s: shape unlike Whisper's", q->s->path, ct2);
    candle_status r = rows_f32(q, ct2, &t, r0, rows, cols);
    if (r) return r;
    if (q->p && q->p->progress) {
        q->pr.name = name;
        q->pr.bytes_done = (uint64_t)q->pr.i_tensor + 1;
        q->pr.src_dtype = t.part[0].data ? t.part[0].dtype : CANDLE_DTYPE_F32;
        q->pr.dst_dtype = dt;
        if (!q->p->progress(&q->pr, q->p->progress_user))
            return cdl_set_error(NULL, CANDLE_ERR_CANCELLED, "quantize: cancelled");
    }
    const candle_dtype_traits *tr = candle_dtype_info(dt);
    size_t bytes = candle_dtype_row_size(dt, ne[0]) * (size_t)(numel / ne[0]);
    if ((r = grow(&q->dst, &q->cap_dst, bytes))) return r;
    if (dt == CANDLE_DTYPE_F32) memcpy(q->dst, q->f32, bytes);
    else tr->from_f32(q->f32, q->dst, numel);
    size_t len = strlen(name);
    int ggml_type = tr->gguf_id;
    if ((r = wput32(q, n_dims)) || (r = wput32(q, (int32_t)len)) || (r = wput32(q, ggml_type))) return r;
    for (int i = 0; i < n_dims; i++)
        if ((r = wput32(q, ne[i]))) return r;
    if ((r = wput(q, name, len)) || (r = wput(q, q->dst, bytes))) return r;
    if (q->st) {
        q->st->n_tensors++;
        q->st->n_by_dtype[dt]++;
        q->st->n_elements += (uint64_t)numel;
        q->st->bytes_out += bytes;
        q->st->bytes_in += candle_dtype_row_size(t.part[0].dtype, cols) * (size_t)rows;
        if (t.part[0].dtype == dt) q->st->n_copied++;
        else q->st->n_converted++;
    }
    q->pr.i_tensor++;
    return CANDLE_OK;
}

/* whisper.cpp's key has no bias: refuse a source whose isn't zero. */
static candle_status check_key_bias(wq *q, const char *ct2, int64_t r0) {
    wsrc_tensor t;
    if (!q->s->find(q->s, ct2, &t)) return CANDLE_OK;
    candle_status r = rows_f32(q, ct2, &t, r0, q->n_state, 1);
    for (int64_t i = 0; !r && i < q->n_state; i++)
        if (q->f32[i] != 0.0f)
            return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                                 "quantize: %s: %s has a non-zero key bias; whisper.cpp's format has none", q->s->path, ct2);
    return r;
}

static int32_t count_layers(const whisper_src *s, const char *side) {
    int32_t n = 0;
    char name[128];
    wsrc_tensor t;
    for (;; n++) {
        snprintf(name, sizeof name, "%s/layer_%d/ffn/linear_0/weight", side, (int)n);
        if (!s->find(s, name, &t)) return n;
    }
}

/* whisper.cpp name pre.oa from ct2 name cp/c2, rows from r0. */
static candle_status put2(wq *q, const char *pre, const char *oa, const char *cp, const char *c2, int64_t r0, int nd,
                          const int32_t *ne, candle_dtype dt) {
    char name[192], ct2[192];
    snprintf(name, sizeof name, "%s.%s", pre, oa);
    snprintf(ct2, sizeof ct2, "%s/%s", cp, c2);
    return put_tensor(q, name, ct2, r0, nd, ne, dt);
}

/* Self-attention (a = 0: linear_0 = Q|K|V, linear_1 = out) or
 * cross-attention (a = 1: linear_0 = Q, linear_1 = K|V, linear_2 = out). */
static candle_status put_attn(wq *q, const char *pre, const char *cp, int a, int32_t n, candle_dtype mat) {
    const int32_t sq[2] = {n, n}, vec[1] = {n};
    const candle_dtype F = CANDLE_DTYPE_F32;
    const char *at = a ? "cross_attn" : "attn";
    const char *qn = a ? "attention/linear_0" : "self_attention/linear_0";
    const char *kv = a ? "attention/linear_1" : "self_attention/linear_0";
    const char *on = a ? "attention/linear_2" : "self_attention/linear_1";
    const char *ln = a ? "attention/layer_norm" : "self_attention/layer_norm";
    int64_t k0 = a ? 0 : n, v0 = a ? n : 2 * n;
    char o[64], w[96];
    candle_status r;
#define P(suffix, base, leaf, r0, nd, ne, dt)                          \
    snprintf(o, sizeof o, "%s%s", at, suffix);                       \
    snprintf(w, sizeof w, "%s/%s", base, leaf);                      \
    if ((r = put2(q, pre, o, cp, w, r0, nd, ne, dt))) return r
    P(".query.weight", qn, "weight", 0, 2, sq, mat);
    P(".query.bias", qn, "bias", 0, 1, vec, F);
    P(".key.weight", kv, "weight", k0, 2, sq, mat);
    snprintf(w, sizeof w, "%s/%s/bias", cp, kv);
    if ((r = check_key_bias(q, w, k0))) return r;
    P(".value.weight", kv, "weight", v0, 2, sq, mat);
    P(".value.bias", kv, "bias", v0, 1, vec, F);
    P(".out.weight", on, "weight", 0, 2, sq, mat);
    P(".out.bias", on, "bias", 0, 1, vec, F);
    P("_ln.weight", ln, "gamma", 0, 1, vec, F);
    P("_ln.bias", ln, "beta", 0, 1, vec, F);
#undef P
    return CANDLE_OK;
}

static candle_status write_layer(wq *q, const char *side, int32_t l, int32_t n, candle_dtype mat) {
    char pre[64], cp[64];
    snprintf(pre, sizeof pre, "%s.blocks.%d", side, (int)l);
    snprintf(cp, sizeof cp, "%s/layer_%d", side, (int)l);
    candle_status r;
    const int32_t vec[1] = {n}, up[2] = {n, 4 * n}, down[2] = {4 * n, n}, vup[1] = {4 * n};
    const candle_dtype F = CANDLE_DTYPE_F32;
    for (int a = 0; a < 1 + (side[0] == 'd'); a++)
        if ((r = put_attn(q, pre, cp, a, n, mat))) return r;
    if ((r = put2(q, pre, "mlp.0.weight", cp, "ffn/linear_0/weight", 0, 2, up, mat)) ||
        (r = put2(q, pre, "mlp.0.bias", cp, "ffn/linear_0/bias", 0, 1, vup, F)) ||
        (r = put2(q, pre, "mlp.2.weight", cp, "ffn/linear_1/weight", 0, 2, down, mat)) ||
        (r = put2(q, pre, "mlp.2.bias", cp, "ffn/linear_1/bias", 0, 1, vec, F)) ||
        (r = put2(q, pre, "mlp_ln.weight", cp, "ffn/layer_norm/gamma", 0, 1, vec, F)) ||
        (r = put2(q, pre, "mlp_ln.bias", cp, "ffn/layer_norm/beta", 0, 1, vec, F)))
        return r;
    return CANDLE_OK;
}

static candle_status write_vocab(wq *q, candle_tokenizer *tok, int32_t n_vocab, int32_t *eot_out) {
    int32_t eot = candle_tokenizer_find(tok, "<|endoftext|>");
    int32_t want = n_vocab >= 51865 ? 50257 : 50256; /* whisper.cpp's, by n_vocab */
    if (eot != want)
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                             "quantize: %s: <|endoftext|> is id %d; whisper.cpp assumes %d for n_vocab %d", q->s->path,
                             (int)eot, (int)want, (int)n_vocab);
    *eot_out = eot;
    candle_status r = wput32(q, eot);
    char buf[1024];
    for (int32_t i = 0; i < eot && !r; i++) {
        size_t len = 0;
        r = candle_tokenizer_token_bytes(tok, i, false, buf, sizeof buf, &len);
        if (!r && len > sizeof buf) r = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "quantize: token %d too long", (int)i);
        if (!r) r = wput32(q, (int32_t)len);
        if (!r) r = wput(q, buf, len);
    }
    return r;
}

static candle_status write_model(wq *q, candle_dtype type) {
    whisper_src *s = q->s;
    wsrc_tensor conv1, epos, dpos, emb;
    if (!s->find(s, "encoder/conv1/weight", &conv1) || !s->find(s, "encoder/position_encodings/encodings", &epos) ||
        !s->find(s, "decoder/position_encodings/encodings", &dpos) || !s->find(s, "decoder/embeddings/weight", &emb) ||
        conv1.rank != 3 || epos.rank != 2 || dpos.rank != 2 || emb.rank != 2)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "quantize: %s: not a Whisper model", s->path);
    int32_t n = (int32_t)conv1.shape[0], n_mels = (int32_t)conv1.shape[1], n_vocab = (int32_t)emb.shape[0];
    int32_t n_audio_layer = count_layers(s, "encoder"), n_text_layer = count_layers(s, "decoder");
    q->n_state = n;
    candle_dtype mat = type == CANDLE_DTYPE_F32 ? CANDLE_DTYPE_F32 : type;
    candle_dtype conv = type == CANDLE_DTYPE_F32 ? CANDLE_DTYPE_F32 : CANDLE_DTYPE_F16;
    const candle_dtype_traits *tr = candle_dtype_info(type);
    if (n % tr->block_size || (4 * n) % tr->block_size)
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                             "quantize: %s: %s wants rows of a multiple of %lld elements; this model's width is %d "
                             "(whisper.cpp keeps every matrix in the file type)",
                             s->path, candle_dtype_name(type), (long long)tr->block_size, (int)n);
    int32_t ftype = ggml_ftype(type) + (type == CANDLE_DTYPE_F32 || type == CANDLE_DTYPE_F16 ? 0 : 2000);
    int32_t hp[12] = {(int32_t)CANDLE_GGML_WHISPER_MAGIC, n_vocab, (int32_t)epos.shape[0], n, (int32_t)s->n_head,
                      n_audio_layer, (int32_t)dpos.shape[0], n, (int32_t)s->n_head, n_text_layer, n_mels, ftype};
    candle_status r = wput(q, hp, sizeof hp);
    /* the filters whisper.cpp computes its log-mel with: openai-whisper's mel_filters.npz */
    float *mel = r ? NULL : malloc((size_t)n_mels * 201 * sizeof *mel);
    if (!r && !mel) r = cdl_set_error(NULL, CANDLE_ERR_OOM, "quantize: out of memory");
    if (!r) r = candle_whisper_mel_filters(n_mels, mel);
    if (!r && !(r = wput32(q, n_mels)) && !(r = wput32(q, 201))) r = wput(q, mel, (size_t)n_mels * 201 * sizeof *mel);
    free(mel);
    candle_tokenizer *tok = NULL;
    int32_t eot = 0;
    if (!r) r = s->tokenizer(s, &tok);
    if (!r) r = write_vocab(q, tok, n_vocab, &eot);
    candle_tokenizer_free(tok);
    if (r) return r;
    q->pr.n_tensors = 11 + 15 * (int64_t)n_audio_layer + 24 * (int64_t)n_text_layer;
    q->pr.bytes_total = (uint64_t)q->pr.n_tensors;
    const int32_t vec[1] = {n};
#define T(name, ct2, nd, ne, dt) \
    if ((r = put_tensor(q, name, ct2, 0, nd, ne, dt))) return r
    T("encoder.positional_embedding", "encoder/position_encodings/encodings", 2, ((int32_t[]){n, (int32_t)epos.shape[0]}),
      CANDLE_DTYPE_F32);
    T("encoder.conv1.weight", "encoder/conv1/weight", 3, ((int32_t[]){3, n_mels, n}), conv);
    T("encoder.conv1.bias", "encoder/conv1/bias", 2, ((int32_t[]){1, n}), CANDLE_DTYPE_F32);
    T("encoder.conv2.weight", "encoder/conv2/weight", 3, ((int32_t[]){3, n, n}), conv);
    T("encoder.conv2.bias", "encoder/conv2/bias", 2, ((int32_t[]){1, n}), CANDLE_DTYPE_F32);
    for (int32_t l = 0; l < n_audio_layer; l++)
        if ((r = write_layer(q, "encoder", l, n, mat))) return r;
    T("encoder.ln_post.weight", "encoder/layer_norm/gamma", 1, vec, CANDLE_DTYPE_F32);
    T("encoder.ln_post.bias", "encoder/layer_norm/beta", 1, vec, CANDLE_DTYPE_F32);
    T("decoder.positional_embedding", "decoder/position_encodings/encodings", 2, ((int32_t[]){n, (int32_t)dpos.shape[0]}),
      CANDLE_DTYPE_F32);
    T("decoder.token_embedding.weight", "decoder/embeddings/weight", 2, ((int32_t[]){n, n_vocab}), mat);
    for (int32_t l = 0; l < n_text_layer; l++)
        if ((r = write_layer(q, "decoder", l, n, mat))) return r;
    T("decoder.ln.weight", "decoder/layer_norm/gamma", 1, vec, CANDLE_DTYPE_F32);
    T("decoder.ln.bias", "decoder/layer_norm/beta", 1, vec, CANDLE_DTYPE_F32);
#undef T
    return CANDLE_OK;
}


candle_status candle_whisper_write_ggml(const char *model, const char *out, candle_dtype type,
                                        const candle_ggml_whisper_write_params *p) {
    if (!model || !out) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "quantize: NULL argument");
    if (ggml_ftype(type) < 0)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "quantize: %s is not a whisper.cpp file type (%s)",
                             candle_dtype_name(type), candle_whisper_ggml_types());
    double t0 = cdl_now_s();
    struct stat si, so;
    if (!stat(model, &si) && !stat(out, &so) && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "quantize: %s: the output is the input", out);
    whisper_src s;
    candle_status r = whisper_src_open(&s, model, p && p->no_mmap);
    if (r) return r;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    wq q = {.s = &s, .out = out, .type = type, .p = p, .st = p ? p->stats : NULL};
    if (q.st) memset(q.st, 0, sizeof *q.st);
    q.f = fopen(tmp, "wb");
    if (!q.f) r = cdl_set_error(NULL, CANDLE_ERR_IO, "quantize: %s: cannot create", tmp);
    if (!r) r = write_model(&q, type);
    if (q.f && fclose(q.f) && !r) r = werr(&q, "close failed");
    if (!r && rename(tmp, out)) r = werr(&q, "rename failed");
    if (r) unlink(tmp);
    s.close(&s);
    free(q.f32);
    free(q.dst);
    if (!r && q.st) {
        struct stat sf;
        q.st->file_in = S_ISDIR(si.st_mode) ? q.st->bytes_in : (uint64_t)si.st_size;
        q.st->file_out = stat(out, &sf) ? 0 : (uint64_t)sf.st_size;
        q.st->seconds_total = q.st->seconds_convert = cdl_now_s() - t0;
    }
    return r;
}
