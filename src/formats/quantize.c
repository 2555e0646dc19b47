/* candle_quantize_file: plan each tensor's dtype (quantize_rules.c), convert
 * the weight matrices row by row on a few threads, and write the result with
 * the GGUF writer (which writes OUT.tmp and renames it).
 *
 * Rows go through f32: the source row is widened with its dtype's to_f32 and
 * narrowed with the target's from_f32, so every pair of types works with one
 * code path and no intermediate copy of a whole tensor. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "candle/safetensors.h"
#include "core/core-impl.h"
#include "core/json-impl.h"
#include "quantize-impl.h"

#define MAX_THREADS 64
#define CHUNK_BYTES (256u << 10) /* input bytes per claimed chunk of rows */
#define NOTE_LEN 256

typedef struct qtensor {
    const candle_weights_tensor_info *info; /* = &loaded */
    candle_weights_tensor_info loaded;      /* dtype and size as loaded from the source */
    candle_dtype dst;
    const uint8_t *src; /* in the input's mapping, a converted leaf, or src_owned */
    void *src_owned;    /* rows reordered for GGUF's conventions */
    void *out;          /* converted data (owned); NULL when copied as is */
    size_t out_size;
    char note[NOTE_LEN];
} qtensor;

/* One tensor's conversion, shared by the threads that claim its rows. */
typedef struct qjob {
    const uint8_t *src;
    uint8_t *dst;
    const candle_dtype_traits *st, *dt;
    bool src_f32;
    int64_t ne0, n_rows, chunk;
    size_t src_row, dst_row;
    atomic_int_fast64_t next; /* first row not yet claimed */
    atomic_int_fast64_t done; /* rows converted */
    atomic_bool stop;         /* cancelled or out of memory */
    atomic_bool oom;
} qjob;


candle_quantize_params candle_quantize_default_params(void) {
    candle_quantize_params p;
    memset(&p, 0, sizeof p);
    p.output_type = p.token_embd_type = CANDLE_DTYPE_COUNT;
    return p;
}

/* ---- converting rows ---- */

/* Convert one claimed chunk; false when no rows are left. buf: ne0 floats. */
static bool convert_chunk(qjob *j, float *buf) {
    if (atomic_load(&j->stop)) return false;
    int64_t r0 = atomic_fetch_add(&j->next, j->chunk);
    if (r0 >= j->n_rows) return false;
    int64_t r1 = r0 + j->chunk < j->n_rows ? r0 + j->chunk : j->n_rows;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *s = j->src + (size_t)r * j->src_row;
        const float *x = buf;
        /* f32 rows are read in place unless the file misaligns them */
        if (j->src_f32 && (uintptr_t)s % _Alignof(float) == 0) x = (const float *)s;
        else if (j->src_f32) memcpy(buf, s, j->src_row);
        else j->st->to_f32(s, buf, j->ne0);
        j->dt->from_f32(x, j->dst + (size_t)r * j->dst_row, j->ne0);
    }
    atomic_fetch_add(&j->done, r1 - r0);
    return true;
}

static void *worker(void *arg) {
    qjob *j = arg;
    float *buf = malloc((size_t)j->ne0 * sizeof *buf);
    if (!buf) {
        atomic_store(&j->oom, true);
        atomic_store(&j->stop, true);
        return NULL;
    }
    while (convert_chunk(j, buf)) {
    }
    free(buf);
    return NULL;
}

typedef struct qrun { /* state of the whole run, for progress reports */
    const candle_quantize_params *p;
    candle_quantize_progress ev;
    bool cancelled;
} qrun;

static bool report(qrun *r) {
    if (r->p->progress && !r->p->progress(&r->ev, r->p->progress_user)) r->cancelled = true;
    return !r->cancelled;
}

/* Convert tensor q on nth threads; the caller is one of them and reports. */
static candle_status convert_tensor(qrun *r, qtensor *q, int nth) {
    const candle_weights_tensor_info *t = q->info;
    int64_t ne0 = t->rank ? t->shape[t->rank - 1] : 1;
    qjob j = {.src = q->src, .dst = q->out, .st = candle_dtype_info(t->dtype),
              .dt = candle_dtype_info(q->dst), .src_f32 = t->dtype == CANDLE_DTYPE_F32,
              .ne0 = ne0};
    j.src_row = candle_dtype_row_size(t->dtype, ne0);
    j.dst_row = candle_dtype_row_size(q->dst, ne0);
    j.n_rows = ne0 && j.src_row ? (int64_t)(t->size / j.src_row) : 0;
    int64_t per_chunk = (int64_t)(CHUNK_BYTES / (j.src_row ? j.src_row : 1));
    int64_t balanced = (j.n_rows + 4 * nth - 1) / (4 * nth);
    j.chunk = per_chunk < balanced ? per_chunk : balanced;
    if (j.chunk < 1) j.chunk = 1;
    atomic_init(&j.next, 0);
    atomic_init(&j.done, 0);
    atomic_init(&j.stop, false);
    atomic_init(&j.oom, false);
    if (j.n_rows == 0) return CANDLE_OK;

    float *buf = malloc((size_t)ne0 * sizeof *buf);
    if (!buf) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: quantize row buffer");
    pthread_t tid[MAX_THREADS];
    int started = 0;
    if (nth > j.n_rows) nth = (int)j.n_rows;
    for (int i = 1; i < nth; i++)
        if (!pthread_create(&tid[started], NULL, worker, &j)) started++;
    uint64_t base = r->ev.bytes_done;
    while (convert_chunk(&j, buf)) {
        r->ev.bytes_done = base + (uint64_t)atomic_load(&j.done) * j.src_row;
        if (!report(r)) atomic_store(&j.stop, true);
    }
    for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
    free(buf);
    r->ev.bytes_done = base + t->size;
    if (atomic_load(&j.oom))
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: quantize row buffer");
    return CANDLE_OK;
}

/* ---- planning ---- */

/* Fail before converting (minutes for a large model) if the output's
 * directory cannot take the file; the write may still fail later (disk
 * full), and then leaves nothing either. */
static candle_status check_dir_writable(const char *out) {
    const char *slash = strrchr(out, '/');
    size_t n = slash ? (size_t)(slash - out) : 1;
    char *d = malloc(n + 2);
    if (!d) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: quantize path");
    if (!slash) memcpy(d, ".", 2);
    else if (n == 0) memcpy(d, "/", 2);
    else {
        memcpy(d, out, n);
        d[n] = 0;
    }
    candle_status s = CANDLE_OK;
    if (access(d, W_OK | X_OK) != 0)
        s = cdl_set_error(NULL, CANDLE_ERR_IO, "quantize: cannot write '%s': %s: %s", out, d,
                             strerror(errno));
    free(d);
    return s;
}

/* Refuse an output that is the input (writing it would truncate the mapped
 * input under us), or that is not a regular file (the final rename would
 * replace a device node or a FIFO), before any work is done. */
static candle_status check_output(const char *in, const char *out) {
    struct stat si, so;
    if (stat(in, &si) != 0)
        return cdl_set_error(NULL, CANDLE_ERR_IO, "quantize: %s: %s", in, strerror(errno));
    candle_status s = check_dir_writable(out);
    if (!s) s = cdl_out_file_check(out, "quantize");
    if (!s && stat(out, &so) == 0 && so.st_dev == si.st_dev && so.st_ino == si.st_ino)
        s = cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                             "quantize: output '%s' is the input file '%s' (same file, link or "
                             "symlink); refusing to overwrite the input",
                             out, in);
    return s;
}

/* llama.cpp's Llama GGUFs pair RoPE dimensions (2i, 2i+1) (weights.h):
 * q/k rows of a source that pairs halves are reordered, per head, as its
 * converter does. */
static bool needs_permute(const candle_weights *w, const char *name, int64_t *n_head) {
    bool interleaved = true;
    const char *arch;
    size_t len;
    candle_weights_get_bool(w, "candle.rope.interleaved", &interleaved);
    if (interleaved || !candle_weights_get_str(w, "general.architecture", &arch, &len) || len != 5 ||
        memcmp(arch, "llama", 5))
        return false;
    size_t n = strlen(name);
    bool q = n >= 14 && !strcmp(name + n - 14, ".attn_q.weight");
    bool k = n >= 14 && !strcmp(name + n - 14, ".attn_k.weight");
    if (!q && !k) return false;
    if (!candle_weights_get_i64(w, "llama.attention.head_count", n_head)) return false;
    if (k) candle_weights_get_i64(w, "llama.attention.head_count_kv", n_head);
    return true;
}

static candle_status permute_rows(qtensor *q, int64_t n_head) {
    const candle_weights_tensor_info *t = q->info;
    int64_t rows = t->rank == 2 ? t->shape[0] : 0;
    if (n_head <= 0 || rows % (2 * n_head))
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                "quantize: tensor '%s' has %lld rows, not a whole number of %lld "
                                "heads of even size", t->name, (long long)rows, (long long)n_head);
    size_t row = t->size / (size_t)rows;
    int64_t hd = rows / n_head, half = hd / 2;
    uint8_t *out = malloc(t->size ? t->size : 1);
    if (!out) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: quantize: %zu bytes", t->size);
    for (int64_t h = 0; h < n_head; h++)
        for (int64_t i = 0; i < half; i++)
            for (int64_t j = 0; j < 2; j++)
                memcpy(out + (size_t)(h * hd + 2 * i + j) * row,
                       q->src + (size_t)(h * hd + j * half + i) * row, row);
    q->src = q->src_owned = out;
    return CANDLE_OK;
}

/* Tensor i as the source gives it (norms as f32, ...), in ctx. */
static candle_status load_source(const candle_weights *w, candle_ctx *ctx, int64_t i, qtensor *q) {
    const candle_weights_tensor_info *ti = candle_weights_tensor(w, i);
    candle_tensor *t = candle_weights_load_tensor(w, ctx, ti->name);
    if (!t) return cdl_set_error(NULL, candle_errcode(ctx), "quantize: %s", candle_errmsg(ctx));
    q->loaded = *ti;
    q->loaded.dtype = t->dtype;
    q->loaded.size = candle_tensor_nbytes(t);
    q->info = &q->loaded;
    q->src = candle_tensor_data(t);
    int64_t n_head;
    return needs_permute(w, ti->name, &n_head) ? permute_rows(q, n_head) : CANDLE_OK;
}

static candle_status plan(const candle_weights *g, candle_ctx *ctx, candle_ftype ftype,
                          const candle_quantize_params *p, qtensor *qt) {
    quant_model m;
    quant_model_init(&m, g);
    for (int64_t i = 0; i < candle_weights_n_tensors(g); i++) {
        qtensor *q = &qt[i];
        candle_status s = load_source(g, ctx, i, q);
        if (s) return s;
        q->dst = q->info->dtype;
        bool fallback = false;
        if (quant_is_weight(q->info))
            q->dst = quant_tensor_type(&m, ftype, p, q->info, q->note, NOTE_LEN, &fallback);
        if (fallback && p->stats) p->stats->n_fallback++;
        if (q->dst == q->info->dtype) continue;
        const candle_dtype_traits *st = candle_dtype_info(q->info->dtype);
        if (st->is_quantized && !p->allow_requantize)
            return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                                    "quantize: tensor '%s' is already %s; quantizing it again "
                                    "compounds the error: start from an f32/f16/bf16 file or "
                                    "allow requantizing (--allow-requantize)",
                                    q->info->name, st->name);
        if (!st->to_f32 || !candle_dtype_info(q->dst)->from_f32)
            return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                                    "quantize: tensor '%s': no conversion from %s to %s",
                                    q->info->name, st->name, candle_dtype_name(q->dst));
        if (st->is_quantized && p->stats) p->stats->n_requantized++;
        if (st->is_quantized && !q->note[0])
            snprintf(q->note, NOTE_LEN, "%s: requantizing %s to %s", q->info->name, st->name,
                     candle_dtype_name(q->dst));
    }
    return CANDLE_OK;
}

static size_t tensor_bytes(candle_dtype dt, const candle_weights_tensor_info *t) {
    if (!t->rank) return candle_dtype_row_size(dt, 1);
    size_t n = candle_dtype_row_size(dt, t->shape[t->rank - 1]);
    for (int d = 0; d < t->rank - 1; d++) n *= (size_t)t->shape[d];
    return n;
}

/* ---- the whole run ---- */

static candle_status convert_all(qrun *r, qtensor *qt, int64_t n, int nth) {
    candle_quantize_stats *st = r->p->stats;
    double t0 = cdl_now_s();
    for (int64_t i = 0; i < n; i++) {
        qtensor *q = &qt[i];
        r->ev.i_tensor = i;
        r->ev.name = q->info->name;
        r->ev.src_dtype = q->info->dtype;
        r->ev.dst_dtype = q->dst;
        if (q->note[0]) {
            r->ev.note = q->note;
            bool go = report(r);
            r->ev.note = NULL;
            if (!go) break;
        }
        if (q->dst == q->info->dtype) {
            r->ev.bytes_done += q->info->size;
            q->out_size = q->info->size;
            if (st) st->n_copied++;
            if (!report(r)) break;
            continue;
        }
        q->out_size = tensor_bytes(q->dst, q->info);
        if (!(q->out = malloc(q->out_size ? q->out_size : 1)))
            return cdl_set_error(NULL, CANDLE_ERR_OOM,
                                    "out of memory: quantize: %zu bytes for tensor '%s'",
                                    q->out_size, q->info->name);
        candle_status s = convert_tensor(r, q, nth);
        if (s) return s;
        if (st) st->n_converted++;
        if (r->cancelled) break;
    }
    if (st) st->seconds_convert = cdl_now_s() - t0;
    if (r->cancelled)
        return cdl_set_error(NULL, CANDLE_ERR_IO, "quantize: cancelled; nothing written");
    return CANDLE_OK;
}

/* EmbeddingGemma (Gemma 3 attending both ways), which llama.cpp names
 * gemma-embedding, with its keys under that name. */
static bool embedding_gemma(const candle_weights *w) {
    const char *arch = NULL;
    size_t n = 0;
    bool causal = true;
    return candle_weights_get_str(w, "general.architecture", &arch, &n) && n == 6 && !memcmp(arch, "gemma3", 6) &&
           candle_weights_get_bool(w, "gemma3.attention.causal", &causal) && !causal;
}

/* A directory's metadata as llama.cpp types it: counts as u32, reals as f32.
 * The source's own "candle.*" facts are what GGUF already implies. */
static candle_status write_source_kv(candle_gguf_writer *out, const candle_weights *w) {
    candle_status s = CANDLE_OK;
    bool emb = embedding_gemma(w);
    for (int64_t i = 0; i < candle_weights_n_kv(w) && !s; i++) {
        const char *key = candle_weights_key(w, i), *str;
        char renamed[200];
        size_t len;
        int64_t v;
        double f;
        bool b;
        if (!strncmp(key, "candle.", 7)) continue;
        if (emb && !strcmp(key, "general.architecture")) {
            s = candle_gguf_writer_set_str(out, key, "gemma-embedding");
            continue;
        }
        if (emb && !strncmp(key, "gemma3.", 7)) {
            snprintf(renamed, sizeof renamed, "gemma-embedding.%s", key + 7);
            key = renamed;
        }
        const char *src = candle_weights_key(w, i);
        switch (candle_weights_kv_type(w, i)) {
        case CANDLE_GGUF_INT64:
            candle_weights_get_i64(w, src, &v);
            s = v >= 0 && v <= UINT32_MAX ? candle_gguf_writer_set_u32(out, key, (uint32_t)v)
                : v >= INT32_MIN && v < 0 ? candle_gguf_writer_set_i32(out, key, (int32_t)v)
                                          : cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                                                             "quantize: %s = %lld does not fit 32 bits",
                                                             key, (long long)v);
            break;
        case CANDLE_GGUF_FLOAT64:
            candle_weights_get_f64(w, src, &f);
            s = candle_gguf_writer_set_f32(out, key, (float)f);
            break;
        case CANDLE_GGUF_BOOL:
            candle_weights_get_bool(w, src, &b);
            s = candle_gguf_writer_set_bool(out, key, b);
            break;
        default:
            candle_weights_get_str(w, src, &str, &len);
            (void)len;
            s = candle_gguf_writer_set_str(out, key, str);
        }
    }
    return s;
}

/* A directory's tokenizer.json, whole, as the GGUF spec's
 * tokenizer.huggingface.json, which Candle reads first; and as the
 * tokenizer.ggml.* keys llama.cpp needs, where they express it. */
static candle_status write_hf_tokenizer(candle_gguf_writer *out, const candle_weights *w) {
    char path[4096], cfg[4096], why[160];
    snprintf(path, sizeof path, "%s/tokenizer.json", candle_weights_path(w));
    snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", candle_weights_path(w));
    FILE *f = fopen(path, "rb");
    if (!f) return CANDLE_OK;
    int64_t emb = candle_weights_find_tensor(w, "token_embd.weight"), n_vocab = 0;
    if (emb >= 0) n_vocab = candle_weights_tensor(w, emb)->shape[0];
    candle_status s = cquant_write_ggml_vocab(out, path, access(cfg, R_OK) ? NULL : cfg, n_vocab, why, sizeof why);
    if (!s && why[0])
        cdl_log_msg(CANDLE_LOG_WARN,
                    "quantize: %s: %s, so the file has no tokenizer.ggml.* keys; llama.cpp cannot "
                    "tokenize with it (Candle reads its tokenizer.huggingface.json)",
                    path, why);
    long n = s || fseek(f, 0, SEEK_END) ? -1 : ftell(f);
    char *buf = n >= 0 && n < (64L << 20) ? malloc((size_t)n + 1) : NULL;
    if (!s && (!buf || fseek(f, 0, SEEK_SET) || fread(buf, 1, (size_t)n, f) != (size_t)n))
        s = cdl_set_error(NULL, CANDLE_ERR_IO, "quantize: cannot read %s", path);
    fclose(f);
    if (!s) {
        buf[n] = 0;
        s = candle_gguf_writer_set_str(out, "tokenizer.huggingface.json", buf);
    }
    free(buf);
    return s;
}

/* A classifier's config.json id2label as <arch>.classifier.output_labels,
 * where llama.cpp's converter writes them (the weight view keeps no string
 * arrays). Nothing for other models or without id2label. */
static candle_status write_hf_labels(candle_gguf_writer *out, const candle_weights *w) {
    char path[4096], key[160];
    const char *arch = NULL;
    size_t alen = 0;
    if (!candle_weights_get_str(w, "general.architecture", &arch, &alen) ||
        candle_weights_find_tensor(w, "cls.output.weight") < 0) /* not a classifier */
        return CANDLE_OK;
    snprintf(path, sizeof path, "%s/config.json", candle_weights_path(w));
    json_doc *d = NULL;
    if (access(path, R_OK) || json_parse_file(&d, path, NULL, (size_t)16 << 20)) {
        candle_clear_last_error();
        return CANDLE_OK; /* the weights' open read it already: nothing to add */
    }
    const json_value *map = json_get(json_root(d), "id2label");
    size_t n = map && map->type == JSON_OBJECT ? map->n : 0;
    const char **labels = n ? calloc(n, sizeof *labels) : NULL;
    bool ok = labels != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        char k[32];
        snprintf(k, sizeof k, "%zu", i);
        ok = json_as_str(json_get(map, k), &labels[i], NULL);
    }
    snprintf(key, sizeof key, "%.*s.classifier.output_labels", (int)(alen < 64 ? alen : 64), arch);
    candle_status s = ok ? candle_gguf_writer_set_arr(out, key, CANDLE_GGUF_STRING, labels, (int64_t)n) : CANDLE_OK;
    free(labels);
    json_free(d);
    return s;
}

/* Tensors written from outside the weights' view (EmbeddingGemma's Dense
 * modules), alive until the file is written. */
typedef struct extra_tensors {
    candle_ctx *ctx;
    candle_safetensors *st[2];
} extra_tensors;

static void extra_free(extra_tensors *x) {
    candle_ctx_free(x->ctx);
    candle_safetensors_close(x->st[0]);
    candle_safetensors_close(x->st[1]);
}

/* Dense module k (an Identity activation) as llama.cpp's EmbeddingGemma
 * tensors name it, dense_2 and dense_3, with their feature counts. */
static candle_status write_dense(candle_gguf_writer *out, const char *dir, const char *sub, int k,
                                 extra_tensors *x) {
    char path[4096], name[32], key[64];
    snprintf(path, sizeof path, "%s/%s/config.json", dir, sub);
    json_doc *d = NULL;
    if (json_parse_file(&d, path, NULL, (size_t)1 << 20)) return candle_last_error();
    const json_value *act = json_get(json_root(d), "activation_function");
    const char *a = NULL;
    size_t al = 0;
    bool identity = !act || act->type == JSON_NULL ||
                    (json_as_str(act, &a, &al) && al >= 8 && !strcmp(a + al - 8, "Identity"));
    json_free(d);
    if (!identity || k > 1) {
        cdl_log_msg(CANDLE_LOG_WARN, "quantize: %s: the Dense module %s (%s) is not written; the GGUF embeds without it",
                    dir, sub, identity ? "a third one" : "an activation llama.cpp does not apply");
        return CANDLE_OK;
    }
    snprintf(path, sizeof path, "%s/%s/model.safetensors", dir, sub);
    candle_status s = x->ctx ? CANDLE_OK : candle_ctx_init(&x->ctx, NULL);
    if (!s) s = candle_safetensors_open(&x->st[k], path, NULL);
    const char *const parts[2] = {"weight", "bias"};
    for (int p = 0; p < 2 && !s; p++) {
        char tn[32];
        snprintf(tn, sizeof tn, "linear.%s", parts[p]);
        if (candle_safetensors_find_tensor(x->st[k], tn) < 0) {
            if (!p) s = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "quantize: %s has no linear.weight", path);
            continue;
        }
        candle_tensor *t = candle_safetensors_load_tensor(x->st[k], x->ctx, tn);
        if (!t) {
            s = cdl_set_error(NULL, candle_errcode(x->ctx), "quantize: %s", candle_errmsg(x->ctx));
            break;
        }
        snprintf(name, sizeof name, "dense_%d.%s", k + 2, parts[p]);
        s = candle_gguf_writer_add_tensor(out, name, t->dtype, t->rank, t->shape, candle_tensor_data(t));
        if (!s && !p && t->rank == 2) {
            snprintf(key, sizeof key, "gemma-embedding.dense_%d_feat_in", k + 2);
            s = candle_gguf_writer_set_u32(out, key, (uint32_t)t->shape[1]);
            snprintf(key, sizeof key, "gemma-embedding.dense_%d_feat_out", k + 2);
            if (!s) s = candle_gguf_writer_set_u32(out, key, (uint32_t)t->shape[0]);
        }
    }
    return s;
}

/* What llama.cpp needs of an encoder beyond the weights' view: config.json's
 * type_vocab_size as tokenizer.ggml.token_type_count (its bert loader
 * refuses a file without it), the sentence-transformers Pooling module's
 * mode as <arch>.pooling_type (1 mean, 2 cls, 3 last), which Candle reads
 * from a GGUF encoder too, and EmbeddingGemma's Dense modules. Nothing for
 * a model without them. */
static candle_status write_hf_encoder_kv(candle_gguf_writer *out, const candle_weights *w, extra_tensors *x) {
    const char *arch = NULL, *dir = candle_weights_path(w);
    size_t alen = 0;
    candle_status s = CANDLE_OK;
    if (!candle_weights_get_str(w, "general.architecture", &arch, &alen)) return CANDLE_OK;
    bool emb = embedding_gemma(w);
    if (emb) arch = "gemma-embedding", alen = strlen(arch);
    char path[4096], key[160];
    json_doc *d = NULL;
    int64_t types = 0;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (!access(path, R_OK) && !json_parse_file(&d, path, NULL, (size_t)16 << 20) &&
        json_as_i64(json_get(json_root(d), "type_vocab_size"), &types) && types > 0 && types <= UINT32_MAX)
        s = candle_gguf_writer_set_u32(out, "tokenizer.ggml.token_type_count", (uint32_t)types);
    json_free(d);
    d = NULL;
    snprintf(path, sizeof path, "%s/modules.json", dir);
    if (s || access(path, R_OK) || json_parse_file(&d, path, NULL, (size_t)16 << 20)) {
        candle_clear_last_error(); /* the encoder's own load reports a bad one */
        return s;
    }
    const json_value *mods = json_root(d);
    int n_dense = 0;
    for (size_t i = 0; i < mods->n && mods->type == JSON_ARRAY && !s; i++) {
        const char *type = NULL, *sub = "";
        size_t tl = 0;
        json_as_str(json_get(json_at(mods, i), "type"), &type, &tl);
        json_as_str(json_get(json_at(mods, i), "path"), &sub, NULL);
        if (strstr(sub, "..")) continue;
        if (type && tl > 6 && !strcmp(type + tl - 6, ".Dense")) {
            if (emb) s = write_dense(out, dir, sub, n_dense, x);
            else
                cdl_log_msg(CANDLE_LOG_WARN,
                            "quantize: %s: the Dense module %s is not written; the GGUF embeds without it "
                            "(run the directory for its sentence-transformers embeddings)",
                            dir, sub);
            n_dense++;
            continue;
        }
        if (!type || tl < 8 || strcmp(type + tl - 8, ".Pooling")) continue;
        json_doc *pd = NULL;
        snprintf(path, sizeof path, "%s/%s/config.json", dir, sub);
        if (json_parse_file(&pd, path, NULL, (size_t)16 << 20)) continue;
        static const char *const flags[] = {"pooling_mode_mean_tokens", "pooling_mode_cls_token",
                                            "pooling_mode_lasttoken"};
        static const char *const modes[] = {"mean", "cls", "lasttoken"};
        const json_value *cfg = json_root(pd);
        for (uint32_t k = 0; k < 3 && !s; k++) {
            bool on = false;
            json_as_bool(json_get(cfg, flags[k]), &on);
            if (!on && !json_str_eq(json_get(cfg, "pooling_mode"), modes[k])) continue;
            snprintf(key, sizeof key, "%.*s.pooling_type", (int)(alen < 64 ? alen : 64), arch);
            s = candle_gguf_writer_set_u32(out, key, k + 1);
            break;
        }
        json_free(pd);
    }
    if (!s) candle_clear_last_error();
    json_free(d);
    return s;
}

static candle_status write_output(qrun *r, const candle_weights *g, const qtensor *qt, int64_t n,
                                  candle_ftype ftype, const char *out) {
    candle_gguf_writer *w = NULL;
    extra_tensors extra = {0};
    candle_status s = candle_gguf_writer_init(&w);
    if (!s && candle_weights_gguf(g)) s = candle_gguf_writer_copy_kv(w, candle_weights_gguf(g));
    else if (!s && !(s = write_source_kv(w, g)) && !(s = write_hf_tokenizer(w, g)) && !(s = write_hf_labels(w, g)))
        s = write_hf_encoder_kv(w, g, &extra);
    if (!s) s = candle_gguf_writer_set_u32(w, "general.file_type", (uint32_t)ftype);
    /* the block layouts' version, stamped as llama.cpp does (float types too) */
    if (!s) s = candle_gguf_writer_set_u32(w, "general.quantization_version", 2);
    for (int64_t i = 0; i < n && !s; i++) {
        const candle_weights_tensor_info *t = qt[i].info;
        s = candle_gguf_writer_add_tensor(w, t->name, qt[i].dst, t->rank, t->shape,
                                          qt[i].out ? qt[i].out : qt[i].src);
    }
    if (!s) {
        r->ev.writing = true;
        r->ev.note = NULL;
        if (!report(r))
            s = cdl_set_error(NULL, CANDLE_ERR_IO, "quantize: cancelled; nothing written");
    }
    if (!s) s = candle_gguf_writer_write(w, out);
    candle_gguf_writer_free(w);
    extra_free(&extra);
    return s;
}

static int thread_count(int asked) {
    long n = asked > 0 ? asked : sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    return n > MAX_THREADS ? MAX_THREADS : (int)n;
}

static void finish_stats(candle_quantize_stats *st, const qtensor *qt, int64_t n,
                         const candle_weights *g, const char *out, double t0) {
    for (int64_t i = 0; i < n && qt[i].info; i++) {
        const candle_weights_tensor_info *t = qt[i].info;
        uint64_t ne = 1;
        for (int d = 0; d < t->rank; d++) ne *= (uint64_t)t->shape[d];
        st->n_elements += ne;
        st->bytes_in += t->size;
        st->bytes_out += qt[i].out_size ? qt[i].out_size : tensor_bytes(qt[i].dst, t);
        st->n_by_dtype[qt[i].dst]++;
    }
    st->n_tensors = n;
    st->file_in = candle_weights_file_size(g);
    struct stat so;
    st->file_out = out && stat(out, &so) == 0 ? (uint64_t)so.st_size : 0;
    st->seconds_total = cdl_now_s() - t0;
}

candle_status candle_quantize_file(const char *in_path, const char *out_path, candle_ftype ftype,
                                   const candle_quantize_params *params) {
    candle_quantize_params p = params ? *params : candle_quantize_default_params();
    if (p.stats) memset(p.stats, 0, sizeof *p.stats);
    if (!in_path || !out_path)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "quantize: NULL path");
    candle_dtype base = candle_ftype_dtype(ftype);
    if (base == CANDLE_DTYPE_COUNT)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "quantize: %d is not a file type; valid types: %s", (int)ftype,
                                candle_ftype_names());
    const candle_dtype over[2] = {p.output_type, p.token_embd_type};
    for (int k = 0; k < 2; k++)
        if (over[k] != CANDLE_DTYPE_COUNT &&
            ((unsigned)over[k] >= CANDLE_DTYPE_COUNT || candle_dtype_info(over[k])->gguf_id < 0 ||
             !(candle_dtype_info(over[k])->is_float || candle_dtype_info(over[k])->from_f32)))
            return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "quantize: %s type %d is not a weight type",
                                 k ? "token embedding" : "output tensor", (int)over[k]);
    double t0 = cdl_now_s();
    candle_status s = check_output(in_path, out_path);
    if (s) return s;
    candle_weights *g = NULL;
    candle_ctx *ctx = NULL;
    if ((s = candle_weights_open(&g, in_path, NULL))) return s;
    if ((s = candle_ctx_init(&ctx, NULL))) {
        candle_weights_close(g);
        return s;
    }
    int64_t n = candle_weights_n_tensors(g);
    qtensor *qt = calloc(n ? (size_t)n : 1, sizeof *qt);
    if (!qt) {
        candle_ctx_free(ctx);
        candle_weights_close(g);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: quantize tensor list");
    }
    qrun r = {.p = &p};
    r.ev.n_tensors = n;
    for (int64_t i = 0; i < n; i++) r.ev.bytes_total += candle_weights_tensor(g, i)->size;
    s = plan(g, ctx, ftype, &p, qt);
    if (!s) s = convert_all(&r, qt, n, thread_count(p.n_threads));
    if (!s) s = write_output(&r, g, qt, n, ftype, out_path);
    if (p.stats) finish_stats(p.stats, qt, n, g, s ? NULL : out_path, t0);
    for (int64_t i = 0; i < n; i++) {
        free(qt[i].out);
        free(qt[i].src_owned);
    }
    free(qt);
    candle_ctx_free(ctx);
    candle_weights_close(g);
    return s;
}
