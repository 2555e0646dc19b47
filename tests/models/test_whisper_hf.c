/* Whisper from a Hugging Face directory: a random-init model of
 * large-v3-turbo's structure (128 mel bins, 51866 tokens, 2 encoder layers
 * and 1 decoder layer; tests/data/whisper/hf-v3-shape, float16) against
 * transformers (tests/data/whisper/gen_whisper_hf.py): the encoder output
 * and the decoder's logits at every position of a prompt, with the weights
 * widened to f32 (NMSE below 1e-8) and kept in f16 (top-1 identical), from
 * model.safetensors and from a sharded index; and the refusals of a config
 * Candle does not implement. The tokenizer is whisper-base's
 * (scripts/fetch-whisper.sh base); the test skips without it. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "candle/candle.h"
#include "core/json-impl.h"
#include "test.h"

static const json_value *G; /* the goldens */
static char dir[256]; /* the model directory the test assembles */

static void mel_input(float *mel, int n_mels) {
    for (int c = 0; c < n_mels; c++)
        for (int t = 0; t < CANDLE_WHISPER_CHUNK_FRAMES; t++)
            mel[(size_t)c * CANDLE_WHISPER_CHUNK_FRAMES + t] = (float)(0.5 * sin(0.013 * t * (c + 1) + 0.7 * c));
}

static void put(const char *name, const char *text) {
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    CHECK_MSG(f && fputs(text, f) >= 0, "%s", p);
    if (f) fclose(f);
}

static void link_in(const char *src, const char *name) {
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    unlink(p);
    CHECK_MSG(!symlink(src, p), "symlink %s -> %s", p, src);
}

static double nmse_json(const float *got, const json_value *want, size_t n) {
    double err = 0, ref = 0;
    for (size_t i = 0; i < n; i++) {
        double y = 0;
        json_as_f64(json_at(want, i), &y);
        err += (got[i] - y) * (got[i] - y);
        ref += y * y;
    }
    return err / (ref + 1e-300);
}

/* The model in dir against the goldens; strict: f32 weights. */
static void check_model(const char *what, candle_dtype dtype) {
    candle_whisper_params wp = candle_whisper_default_params();
    wp.weight_dtype = dtype;
    candle_whisper *w = NULL;
    CHECK_MSG(candle_whisper_load(&w, dir, &wp) == CANDLE_OK, "%s: %s", what, candle_last_errmsg());
    if (!w) return;
    candle_whisper_dims d = candle_whisper_get_dims(w);
    CHECK_MSG(d.n_mels == 128 && d.n_vocab == 51866 && d.n_state == 32 && d.n_head == 2 && d.n_audio_layer == 2 &&
                  d.n_text_layer == 1 && d.n_audio_ctx == 1500 && d.n_text_ctx == 448,
              "%s: dims %lld mels, %lld vocab, %lld state, %lld heads, %lld/%lld layers", what, (long long)d.n_mels,
              (long long)d.n_vocab, (long long)d.n_state, (long long)d.n_head, (long long)d.n_audio_layer,
              (long long)d.n_text_layer);
    CHECK_MSG(candle_whisper_is_multilingual(w), "%s: lang_to_id read from generation_config.json", what);
    float *mel = malloc((size_t)128 * CANDLE_WHISPER_CHUNK_FRAMES * sizeof *mel);
    float *enc = malloc((size_t)(d.n_audio_ctx * d.n_state) * sizeof *enc);
    const json_value *toks = json_get(G, "tokens"), *ids = json_get(G, "ids"), *lg = json_get(G, "logits"),
                     *top = json_get(G, "top5"), *sl = json_get(G, "encoder_slices"), *ge = json_get(G, "encoder");
    int64_t n = toks ? (int64_t)toks->n : 0;
    float *logits = malloc((size_t)(n * d.n_vocab) * sizeof *logits);
    int32_t tk[64];
    CHECK(mel && enc && logits && n > 0 && n <= 64 && ids && lg && top && sl && ge);
    if (!mel || !enc || !logits || n < 1 || n > 64 || !ids || !lg || !top || !sl || !ge) goto out;
    mel_input(mel, 128);
    CHECK_MSG(candle_whisper_encode(w, mel, 0, enc, (size_t)(d.n_audio_ctx * d.n_state)) == CANDLE_OK, "%s",
              candle_last_errmsg());
    for (size_t i = 0; i < sl->n; i++) {
        int64_t a = 0, b = 0;
        json_as_i64(json_at(json_at(sl, i), 0), &a);
        json_as_i64(json_at(json_at(sl, i), 1), &b);
        const json_value *want = json_at(ge, i);
        CHECK(want && (int64_t)want->n == (b - a) * d.n_state);
        if (!want || (int64_t)want->n != (b - a) * d.n_state) continue;
        double e = nmse_json(enc + a * d.n_state, want, want->n);
        printf("%s: encoder frames [%lld, %lld): NMSE %.3g\n", what, (long long)a, (long long)b, e);
        CHECK_MSG(e < (dtype == CANDLE_DTYPE_F32 ? 1e-8 : 1e-4), "%s: encoder NMSE %.3g", what, e);
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t v = 0;
        json_as_i64(json_at(toks, (size_t)i), &v);
        tk[i] = (int32_t)v;
    }
    CHECK_MSG(candle_whisper_logits(w, mel, tk, n, 0, logits, (size_t)(n * d.n_vocab)) == CANDLE_OK, "%s",
              candle_last_errmsg());
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        const float *row = logits + i * d.n_vocab;
        float at[64];
        for (size_t j = 0; j < ids->n && j < 64; j++) {
            int64_t id = 0;
            json_as_i64(json_at(ids, j), &id);
            at[j] = row[id];
        }
        double e = nmse_json(at, json_at(lg, (size_t)i), ids->n < 64 ? ids->n : 64);
        worst = e > worst ? e : worst;
        int64_t best = 0, want = -1;
        for (int64_t j = 1; j < d.n_vocab; j++)
            if (row[j] > row[best]) best = j;
        json_as_i64(json_at(json_at(top, (size_t)i), 0), &want);
        CHECK_MSG(best == want, "%s: position %lld: top-1 %lld, transformers' %lld", what, (long long)i,
                  (long long)best, (long long)want);
    }
    printf("%s: logits at %zu ids x %lld positions: worst NMSE %.3g\n", what, ids->n, (long long)n, worst);
    if (dtype == CANDLE_DTYPE_F32) CHECK_MSG(worst < 1e-8, "%s: logits NMSE %.3g", what, worst);
    /* a token outside the vocabulary is refused, not read past the table */
    tk[0] = (int32_t)d.n_vocab;
    CHECK(candle_whisper_logits(w, mel, tk, 1, 0, logits, (size_t)(n * d.n_vocab)) == CANDLE_ERR_INVALID_ARG);
out:
    free(mel);
    free(enc);
    free(logits);
    candle_whisper_free(w);
}

/* model.safetensors.index.json over one shard of another name. */
static void make_sharded(const char *st_path) {
    candle_safetensors *st = NULL;
    CHECK_MSG(candle_safetensors_open(&st, st_path, NULL) == CANDLE_OK, "%s", candle_last_errmsg());
    if (!st) return;
    size_t cap = 1 << 16, len = 0;
    char *json = malloc(cap);
    len += (size_t)snprintf(json + len, cap - len, "{\"metadata\": {}, \"weight_map\": {");
    for (int64_t i = 0; i < candle_safetensors_n_tensors(st) && len + 256 < cap; i++)
        len += (size_t)snprintf(json + len, cap - len, "%s\"%s\": \"model-00001-of-00001.safetensors\"", i ? ", " : "",
                                candle_safetensors_tensor(st, i)->name);
    snprintf(json + len, cap - len, "}}\n");
    candle_safetensors_close(st);
    char p[4400];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    unlink(p);
    link_in(st_path, "model-00001-of-00001.safetensors");
    put("model.safetensors.index.json", json);
    free(json);
}

/* config.json with one field changed is refused, naming it. */
static void check_refused(const char *cfg_text, const char *from, const char *to, const char *needle) {
    const char *at = strstr(cfg_text, from);
    CHECK_MSG(at, "config.json lacks %s", from);
    if (!at) return;
    size_t n = strlen(cfg_text) + strlen(to) + 1;
    char *t = malloc(n);
    snprintf(t, n, "%.*s%s%s", (int)(at - cfg_text), cfg_text, to, at + strlen(from));
    put("config.json", t);
    free(t);
    candle_whisper *w = NULL;
    CHECK_MSG(candle_whisper_load(&w, dir, NULL) != CANDLE_OK, "%s accepted", to);
    CHECK_CONTAINS(candle_last_errmsg(), needle);
    CHECK(candle_whisper_probe(dir) == (strcmp(needle, "model_type") != 0)); /* probe reads model_type only */
    candle_whisper_free(w);
}

int main(void) {
    const char *cache = getenv("CANDLE_DATA_CACHE");
    char tok[4096], src[4096], path[4096];
    snprintf(path, sizeof path, "%s/models/whisper-base/tokenizer.json", cache && cache[0] ? cache : "build-data");
    if (!realpath(path, tok)) {
        printf("SKIP: %s absent (scripts/fetch-whisper.sh base)\n", path);
        return TEST_SKIP;
    }
    char *gtext = NULL;
    size_t glen = 0;
    json_doc *doc = NULL;
    test_path("tests/data/whisper/whisper_hf_goldens.json", path, sizeof path);
    gtext = test_read_file(path, &glen);
    CHECK_MSG(gtext && json_parse(&doc, gtext, glen, path, NULL) == CANDLE_OK, "%s (gen_whisper_hf.py)", path);
    if (!doc) return test_done("test_whisper_hf");
    G = json_root(doc);
    snprintf(dir, sizeof dir, "/tmp/candle-whisper-hf-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    test_path("tests/data/whisper/hf-v3-shape", path, sizeof path);
    CHECK_MSG(realpath(path, src) != NULL, "%s", path); /* the links' targets must be absolute */
    char cfg[4400], gen[4400], st[4400];
    snprintf(cfg, sizeof cfg, "%s/config.json", src);
    snprintf(gen, sizeof gen, "%s/generation_config.json", src);
    snprintf(st, sizeof st, "%s/model.safetensors", src);
    link_in(cfg, "config.json");
    link_in(gen, "generation_config.json");
    link_in(st, "model.safetensors");
    link_in(tok, "tokenizer.json");
    CHECK(candle_whisper_probe(dir));
    check_model("model.safetensors, f32", CANDLE_DTYPE_F32);
    check_model("model.safetensors, f16", CANDLE_DTYPE_F16);
    make_sharded(st);
    check_model("sharded index, f32", CANDLE_DTYPE_F32);

    size_t clen = 0;
    char *ctext = test_read_file(cfg, &clen);
    CHECK(ctext != NULL);
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    if (ctext) {
        check_refused(ctext, "\"model_type\": \"whisper\"", "\"model_type\": \"llama\"", "model_type");
        check_refused(ctext, "\"scale_embedding\": false", "\"scale_embedding\": true", "scale_embedding");
        check_refused(ctext, "\"decoder_attention_heads\": 2", "\"decoder_attention_heads\": 4",
                      "decoder_attention_heads");
    }
    free(ctext);
    const char *names[] = {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                           "model-00001-of-00001.safetensors", "model.safetensors.index.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
    json_free(doc);
    free(gtext);
    return test_done("test_whisper_hf");
}
