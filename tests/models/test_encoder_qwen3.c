/* A Qwen3-Embedding-style embedder (a decoder in a sentence-transformers
 * folder: causal Qwen3Model saved without "model.", the tokenizer appending
 * <|endoftext|>, last-token pooling, Normalize, Qwen3-Embedding's prompts)
 * against sentence-transformers (goldens by
 * scripts/gen_encoder_qwen3_goldens.py, themselves checked against
 * transformers' last hidden state): token ids identical, cosine >= 0.9999
 * with and without the query prompt, a cut keeps <|endoftext|> last. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* rows [n] of {"token_ids", "embedding"} against embed(texts, p). */
static double check_rows(const candle_encoder *e, const char *const *texts, int64_t n, const json_value *rows,
                         candle_embed_params *p, const char *prompt, const char *what) {
    int64_t dim = candle_encoder_dim(e), used[16];
    float *out = malloc((size_t)(n * dim) * sizeof *out);
    p->n_tokens = used;
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
        char joined[1024];
        snprintf(joined, sizeof joined, "%s%s", prompt, texts[i]);
        int32_t got[256];
        int64_t ng = 0;
        CHECK(candle_tokenizer_encode(candle_encoder_tokenizer(e), joined, strlen(joined), true, true, got, 256,
                                      &ng) == CANDLE_OK);
        bool same = ng == (int64_t)ids->n;
        for (int64_t k = 0; same && k < ng; k++) same = got[k] == (int32_t)num(json_at(ids, (size_t)k));
        CHECK_MSG(same || used[i] < ng, "%s %lld: token ids differ", what, (long long)i);
    }
    free(out);
    return worst;
}

int main(void) {
    char dir[1024], gpath[1200];
    test_path("tests/data/encoders/qwen3-embedding-tiny", dir, sizeof dir);
    snprintf(gpath, sizeof gpath, "%s/golden.json", dir);
    if (!test_need_file("qwen3-embedding-tiny", gpath)) return test_done("test_encoder_qwen3");
    json_doc *d = NULL;
    CHECK_MSG(json_parse_file(&d, gpath, NULL, (size_t)1 << 24) == CANDLE_OK, "%s", candle_last_errmsg());
    candle_encoder *e = NULL;
    CHECK_MSG(candle_encoder_load(&e, dir, NULL) == CANDLE_OK, "%s: %s", dir, candle_last_errmsg());
    if (!d || !e) goto done;
    const json_value *g = json_root(d), *sents = json_get(g, "sentences");
    const candle_model_config *mc = candle_model_get_config(candle_encoder_model(e));
    CHECK(mc->kind == CANDLE_MODEL_DECODER_LM && candle_encoder_dim(e) == 64);
    CHECK(candle_encoder_max_tokens(e) == (int64_t)num(json_get(g, "max_seq_length")));
    CHECK(candle_encoder_n_labels(e) == 0);
    const char *query = NULL;
    json_as_str(json_get(g, "query_prompt"), &query, NULL);
    CHECK(query && candle_encoder_prompt(e, "query") && !strcmp(candle_encoder_prompt(e, "query"), query));
    CHECK(!candle_encoder_prompt(e, NULL)); /* default_prompt_name null */
    int64_t n = (int64_t)sents->n;
    const char *texts[16];
    for (int64_t i = 0; i < n && i < 16; i++) json_as_str(json_at(sents, (size_t)i), &texts[i], NULL);
    candle_embed_params p = candle_embed_default_params();
    double w1 = check_rows(e, texts, n, json_get(g, "embeddings"), &p, "", "plain");
    p = candle_embed_default_params();
    p.prompt_name = "query";
    double w2 = check_rows(e, texts, n, json_get(g, "embeddings_query"), &p, query, "query prompt");
    /* the cut: 128 tokens, <|endoftext|> (id 2) last */
    const json_value *tr = json_get(g, "truncated"), *tids = json_get(tr, "token_ids");
    const char *longt = NULL;
    json_as_str(json_get(tr, "text"), &longt, NULL);
    p = candle_embed_default_params();
    CHECK(num(json_at(tids, tids->n - 1)) == 2);
    float v[64];
    int64_t used = 0;
    p.n_tokens = &used;
    CHECK(candle_encoder_embed(e, &longt, NULL, 1, &p, v, 64) == CANDLE_OK);
    double w3 = cosine(v, json_get(tr, "embedding"), 64);
    CHECK_MSG(w3 >= 0.9999 && used == (int64_t)tids->n, "cut: cosine %.7f, %lld tokens", w3, (long long)used);
    p.no_truncate = true;
    CHECK(candle_encoder_embed(e, &longt, NULL, 1, &p, v, 64) == CANDLE_ERR_INVALID_ARG);
    printf("qwen3-embedding-tiny: %lld sentences, min cosine plain %.7f, query prompt %.7f, cut %.7f\n",
           (long long)n, w1, w2, w3);
    /* pooled as the library's own forward gives the last token's state */
    p = candle_embed_default_params();
    p.normalize = 0;
    float raw[64], last[64];
    int32_t ids[64];
    int64_t nid = 0;
    CHECK(candle_tokenizer_encode(candle_encoder_tokenizer(e), texts[0], strlen(texts[0]), true, true, ids, 64,
                                  &nid) == CANDLE_OK);
    const int32_t *idp = ids;
    CHECK(candle_encoder_embed_tokens(e, &idp, &nid, 1, &p, raw, 64) == CANDLE_OK);
    candle_forward_input in = {.tokens = ids, .n_seq = 1, .n_tokens = nid};
    CHECK(candle_model_forward(candle_encoder_model(e), &in, CANDLE_OUTPUT_POOLED_LAST, last, 64) == CANDLE_OK);
    CHECK(!memcmp(raw, last, sizeof raw));
done:
    candle_encoder_free(e);
    json_free(d);
    return test_done("test_encoder_qwen3");
}
