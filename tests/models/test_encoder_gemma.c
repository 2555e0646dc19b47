/* The real EmbeddingGemma-300M (scripts/fetch-embeddinggemma.sh; skipped
 * when it is not fetched): Gemma 3 run bidirectionally, sliding-window local
 * layers (|i - j| <= 256), mean pooling, 2_Dense, 3_Dense, Normalize, the
 * query/document prompts, against sentence-transformers (goldens by
 * scripts/gen_encoder_gemma_goldens.py): token ids identical, cosine >=
 * 0.9999 per input in f32, also for Matryoshka dimensions 256 and for an
 * input longer than the window. Sessions on it are refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "candle/candle.h"
#include "core/json-impl.h"
#include "test.h"

static double num(const json_value *v) {
    double d = NAN;
    json_as_f64(v, &d);
    return d;
}

static double cosine(const float *a, const json_value *b, int64_t n) {
    double ab = 0, aa = 0, bb = 0;
    for (int64_t i = 0; i < n; i++) {
        double y = num(json_at(b, (size_t)i));
        ab += a[i] * y;
        aa += (double)a[i] * a[i];
        bb += y * y;
    }
    return ab / sqrt(aa * bb);
}

/* rows [n] of {"token_ids", "embedding"} against embed(texts, p) at dim
 * (the golden's first dim floats: sentence-transformers' truncate_dim). */
static double check_rows(const candle_encoder *e, const char *const *texts, int64_t n, const json_value *rows,
                         candle_embed_params *p, int64_t dim, const char *what) {
    int64_t used[16];
    float *out = malloc((size_t)(n * dim) * sizeof *out);
    p->n_tokens = used;
    p->dimensions = dim == candle_encoder_dim(e) ? 0 : dim;
    double worst = 1;
    CHECK_MSG(n <= 16 && candle_encoder_embed(e, texts, NULL, n, p, out, (size_t)(n * dim)) == CANDLE_OK, "%s: %s",
              what, candle_last_errmsg());
    for (int64_t i = 0; i < n && i < 16; i++) {
        const json_value *row = json_at(rows, (size_t)i), *ids = json_get(row, "token_ids");
        double c = cosine(out + i * dim, json_get(row, "embedding"), dim);
        worst = c < worst ? c : worst;
        CHECK_MSG(c >= 0.9999, "%s %lld: cosine %.7f", what, (long long)i, c);
        CHECK_MSG(used[i] == (int64_t)ids->n, "%s %lld: %lld tokens, want %zu", what, (long long)i,
                  (long long)used[i], ids->n);
    }
    free(out);
    return worst;
}

/* candle quantize to an F16 GGUF as llama.cpp's converter names it
 * (gemma-embedding, the Dense modules as dense_2/dense_3, the pooling
 * type): the same embeddings, L2-normalised by request since a GGUF says
 * nothing of the Normalize module. */
static void check_gguf(const char *dir, const char *const *texts, int64_t n, const json_value *rows) {
    char tmpl[] = "/tmp/candle-egemma-XXXXXX", out[1200];
    char *d = mkdtemp(tmpl);
    CHECK(d != NULL);
    if (!d) return;
    snprintf(out, sizeof out, "%s/model.gguf", d);
    candle_encoder *e = NULL;
    CHECK_MSG(candle_quantize_file(dir, out, CANDLE_FTYPE_MOSTLY_F16, NULL) == CANDLE_OK &&
                  candle_encoder_load(&e, out, NULL) == CANDLE_OK,
              "%s as GGUF: %s", dir, candle_last_errmsg());
    const candle_model_config *mc = e ? candle_model_get_config(candle_encoder_model(e)) : NULL;
    CHECK(mc && mc->arch == CANDLE_ARCH_GEMMA_EMBEDDING && mc->bidirectional && candle_encoder_dim(e) == 768);
    float *v = malloc((size_t)(n * 768) * sizeof *v);
    candle_embed_params p = candle_embed_default_params();
    p.normalize = 1;
    CHECK(e && v && candle_encoder_embed(e, texts, NULL, n, &p, v, (size_t)(n * 768)) == CANDLE_OK);
    double worst = 1;
    for (int64_t i = 0; e && v && i < n; i++) {
        double c = cosine(v + i * 768, json_get(json_at(rows, (size_t)i), "embedding"), 768);
        worst = c < worst ? c : worst;
    }
    printf("EmbeddingGemma-300M as an F16 GGUF: min cosine %.7f\n", worst);
    CHECK_MSG(worst >= 0.999, "F16 GGUF: min cosine %.7f", worst);
    free(v);
    candle_encoder_free(e);
    unlink(out);
    rmdir(d);
}

int main(void) {
    char dir[1024], gpath[1200];
    const char *cache = getenv("CANDLE_DATA_CACHE");
    snprintf(dir, sizeof dir, "%s/models/embeddinggemma-300m/model.safetensors", cache ? cache : "build-data");
    if (!test_need_file("EmbeddingGemma-300M (scripts/fetch-embeddinggemma.sh)", dir))
        return test_done("test_encoder_gemma");
    *strrchr(dir, '/') = 0;
    test_path("tests/data/encoders/embeddinggemma-300m-golden.json", gpath, sizeof gpath);
    json_doc *d = NULL;
    CHECK_MSG(json_parse_file(&d, gpath, NULL, (size_t)1 << 24) == CANDLE_OK, "%s", candle_last_errmsg());
    candle_encoder_params ep = candle_encoder_default_params();
    ep.n_threads = 2;
    candle_encoder *e = NULL;
    CHECK_MSG(candle_encoder_load(&e, dir, &ep) == CANDLE_OK, "%s: %s", dir, candle_last_errmsg());
    if (!d || !e) goto done;
    const json_value *g = json_root(d), *sents = json_get(g, "sentences");
    const candle_model_config *mc = candle_model_get_config(candle_encoder_model(e));
    CHECK(mc->kind == CANDLE_MODEL_DECODER_LM && mc->bidirectional && mc->n_swa == 512 && mc->swa_pattern == 6);
    CHECK(candle_encoder_dim(e) == 768 && candle_encoder_max_tokens(e) == 2048);
    const char *query = NULL;
    json_as_str(json_get(g, "query_prompt"), &query, NULL);
    CHECK(query && candle_encoder_prompt(e, "query") && !strcmp(candle_encoder_prompt(e, "query"), query));
    int64_t n = (int64_t)sents->n;
    const char *texts[16];
    for (int64_t i = 0; i < n && i < 16; i++) json_as_str(json_at(sents, (size_t)i), &texts[i], NULL);
    candle_embed_params p = candle_embed_default_params();
    double w1 = check_rows(e, texts, n, json_get(g, "embeddings"), &p, 768, "plain");
    p = candle_embed_default_params();
    double w256 = check_rows(e, texts, n, json_get(g, "embeddings"), &p, 256, "dimensions 256");
    p = candle_embed_default_params();
    p.prompt_name = "query";
    double wq = check_rows(e, texts, 4, json_get(g, "embeddings_query"), &p, 768, "query prompt");
    p = candle_embed_default_params();
    p.prompt_name = "document";
    double wd = check_rows(e, texts + 2, 2, json_get(g, "embeddings_document"), &p, 768, "document prompt");
    const json_value *lg = json_get(g, "embeddings_long");
    const char *longt = NULL;
    json_as_str(json_get(g, "long_text"), &longt, NULL);
    p = candle_embed_default_params();
    double wl = check_rows(e, &longt, 1, lg, &p, 768, "long input");
    printf("EmbeddingGemma-300M: %lld sentences, min cosine plain %.7f, dimensions 256 %.7f, query %.7f, "
           "document %.7f, long (%zu tokens) %.7f\n",
           (long long)n, w1, w256, wq, wd, json_get(json_at(lg, 0), "token_ids")->n, wl);
    /* it generates nothing */
    candle_session *s = NULL;
    CHECK(candle_session_init(&s, candle_encoder_model(e), NULL) == CANDLE_ERR_INVALID_ARG);
    CHECK(strstr(candle_last_errmsg(), "bidirectional") != NULL);
    candle_session_free(s);
    check_gguf(dir, texts, n, json_get(g, "embeddings"));
done:
    candle_encoder_free(e);
    json_free(d);
    return test_done("test_encoder_gemma");
}
