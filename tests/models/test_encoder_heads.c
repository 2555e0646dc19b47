/* Sequence classification and cross-encoder reranking against
 * transformers / sentence-transformers (goldens by
 * scripts/gen_encoder_head_goldens.py): a tiny random
 * BertForSequenceClassification with 3 labels (softmax; id2label) and a
 * one-label CrossEncoder whose pairs carry token types 1 for the document
 * and one document cut longest-first. Probabilities and scores within
 * 1e-4, rerank order identical; refusals name what is missing. The same
 * for an XLMRobertaForSequenceClassification cross-encoder (token types
 * all 0: its type table has one row). The token-level entry points on
 * candle_encoder_tokenize_pair's ids give the text calls' numbers bit for
 * bit. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candle/candle.h"
#include "core/json-impl.h"
#include "test.h"

static json_doc *load_golden(const char *dir) {
    char path[1200];
    snprintf(path, sizeof path, "%s/golden.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len);
    json_doc *d = NULL;
    if (buf && fread(buf, 1, (size_t)len, f) == (size_t)len) json_parse(&d, buf, (size_t)len, path, NULL);
    free(buf);
    fclose(f);
    return d;
}

static double num(const json_value *v) {
    double d = NAN;
    json_as_f64(v, &d);
    return d;
}

static const char **strings(const json_value *a) {
    const char **v = calloc(a->n, sizeof *v);
    for (size_t i = 0; i < a->n; i++) json_as_str(json_at(a, i), &v[i], NULL);
    return v;
}

/* The classifier written as a GGUF by candle quantize keeps id2label as
 * bert.classifier.output_labels (llama.cpp's key) and classifies alike. */
static void check_classifier_gguf(const char *dir, const json_value *labels,
                                  const char **texts, int64_t n, const float *want) {
    char tmpl[] = "/tmp/candle-cls-XXXXXX", out[1200];
    char *d = mkdtemp(tmpl);
    CHECK(d != NULL);
    if (!d) return;
    snprintf(out, sizeof out, "%s/model.gguf", d);
    candle_quantize_params qp = candle_quantize_default_params();
    qp.n_threads = 1;
    candle_encoder *e = NULL;
    CHECK_MSG(candle_quantize_file(dir, out, CANDLE_FTYPE_ALL_F32, &qp) == CANDLE_OK &&
                  candle_encoder_load(&e, out, NULL) == CANDLE_OK,
              "%s as GGUF: %s", dir, candle_last_errmsg());
    int64_t L = e ? candle_encoder_n_labels(e) : 0;
    CHECK(L == (int64_t)labels->n);
    for (int64_t k = 0; e && k < L; k++)
        CHECK_MSG(json_str_eq(json_at(labels, (size_t)k), candle_encoder_label(e, k)), "GGUF label %lld: %s",
                  (long long)k, candle_encoder_label(e, k));
    float *p = malloc((size_t)(n * (L ? L : 1)) * sizeof *p);
    CHECK(e && p && candle_encoder_classify(e, texts, NULL, n, NULL, p, (size_t)(n * L)) == CANDLE_OK);
    double worst = 0;
    for (int64_t i = 0; e && p && i < n * L; i++) worst = fmax(worst, fabs(p[i] - want[i]));
    CHECK_MSG(worst < 1e-5, "GGUF classifier: max abs diff %.3g from the directory's", worst);
    printf("%-22s as GGUF F32: labels kept, max abs prob diff %.3g\n", "bert-tiny-classifier", worst);
    free(p);
    candle_encoder_free(e);
    unlink(out);
    rmdir(d);
}

/* The token-level entry point on candle_encoder_tokenize_pair's ids (the
 * goldens' ids) gives candle_encoder_classify's probabilities bit for bit
 * (the text call is a wrapper over it); its refusals name the input. */
static void check_classify_tokens(const candle_encoder *e, const json_value *g, const char **texts, int64_t n,
                                  const float *want) {
    int64_t L = candle_encoder_n_labels(e), max = candle_encoder_max_tokens(e), bad_ids = 0;
    int32_t **ids = calloc((size_t)n, sizeof *ids), types[512];
    int64_t *n_ids = calloc((size_t)n, sizeof *n_ids), *used = calloc((size_t)n, sizeof *used);
    float *got = calloc((size_t)(n * L), sizeof *got);
    for (int64_t i = 0; i < n; i++) {
        ids[i] = malloc((size_t)max * sizeof **ids);
        CHECK_MSG(candle_encoder_tokenize_pair(e, texts[i], SIZE_MAX, NULL, 0, NULL, ids[i], types, (size_t)max,
                                               &n_ids[i]) == CANDLE_OK, "%s", candle_last_errmsg());
        const json_value *w = json_at(json_get(g, "token_ids"), (size_t)i);
        bool same = n_ids[i] == (int64_t)w->n;
        for (int64_t k = 0; same && k < n_ids[i]; k++)
            same = ids[i][k] == (int32_t)num(json_at(w, (size_t)k)) && !types[k];
        bad_ids += !same;
    }
    CHECK_MSG(!bad_ids, "tokenize_pair: %lld texts' ids differ from transformers'", (long long)bad_ids);
    candle_head_params hp = {.n_tokens = used};
    CHECK_MSG(candle_encoder_classify_tokens(e, (const int32_t *const *)ids, n_ids, n, &hp, got, (size_t)(n * L)) ==
                  CANDLE_OK, "%s", candle_last_errmsg());
    CHECK_MSG(!memcmp(got, want, (size_t)(n * L) * sizeof *got), "classify_tokens differs from classify");
    for (int64_t i = 0; i < n; i++) CHECK(used[i] == n_ids[i]);
    printf("%-22s classify_tokens on tokenize_pair's ids: ids as transformers', probabilities bit for bit\n", "");
    /* a long input: cut to its first max_tokens, or refused with no_truncate */
    int32_t *lng = calloc((size_t)max + 5, sizeof *lng);
    const int32_t *one[2] = {ids[0], lng};
    int64_t nl[2] = {n_ids[0], max + 5};
    for (int64_t k = 0; k < max + 5; k++) lng[k] = ids[1][k % n_ids[1]];
    CHECK(candle_encoder_classify_tokens(e, one, nl, 2, &hp, got, (size_t)(2 * L)) == CANDLE_OK && used[1] == max);
    hp.no_truncate = true;
    CHECK(candle_encoder_classify_tokens(e, one, nl, 2, &hp, got, (size_t)(2 * L)) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "classify: input 1: ");
    CHECK_CONTAINS(candle_last_errmsg(), "(no_truncate)");
    lng[3] = (int32_t)candle_model_get_config(candle_encoder_model(e))->n_vocab;
    nl[1] = 4;
    CHECK(candle_encoder_classify_tokens(e, one, nl, 2, NULL, got, (size_t)(2 * L)) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "at index 3 out of range");
    nl[1] = 0;
    CHECK(candle_encoder_classify_tokens(e, one, nl, 2, NULL, got, (size_t)(2 * L)) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "input 1: an empty input");
    CHECK(candle_encoder_classify_tokens(e, one, nl, 1, NULL, got, 2) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "too small");
    CHECK(candle_encoder_rerank_tokens(e, one, NULL, nl, 1, NULL, got) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "a reranker has one score");
    CHECK(candle_encoder_tokenize_pair(e, texts[1], SIZE_MAX, NULL, 0, NULL, lng, NULL, 2, &nl[1]) ==
          CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "room for 2");
    for (int64_t i = 0; i < n; i++) free(ids[i]);
    free(lng);
    free(ids);
    free(n_ids);
    free(used);
    free(got);
}

static void check_classifier(void) {
    char dir[1024];
    test_path("tests/data/encoders/bert-tiny-classifier", dir, sizeof dir);
    json_doc *d = load_golden(dir);
    candle_encoder *e = NULL;
    CHECK_MSG(d && candle_encoder_load(&e, dir, NULL) == CANDLE_OK, "%s: %s", dir, candle_last_errmsg());
    if (!e || !d) goto done;
    const json_value *g = json_root(d), *labels = json_get(g, "labels"), *probs = json_get(g, "probs");
    int64_t L = candle_encoder_n_labels(e), n = (int64_t)json_get(g, "sentences")->n;
    CHECK(L == 3 && (int64_t)labels->n == L);
    for (int64_t k = 0; k < L; k++) CHECK(json_str_eq(json_at(labels, (size_t)k), candle_encoder_label(e, k)));
    CHECK(!candle_encoder_label(e, L) && !candle_encoder_label(e, -1));
    const char **texts = strings(json_get(g, "sentences"));
    float *out = malloc((size_t)(n * L) * sizeof *out);
    CHECK_MSG(candle_encoder_classify(e, texts, NULL, n, NULL, out, (size_t)(n * L)) == CANDLE_OK, "%s",
              candle_last_errmsg());
    double worst = 0;
    int top_ok = 0;
    for (int64_t i = 0; i < n; i++) {
        const json_value *want = json_at(probs, (size_t)i);
        int64_t best = 0;
        for (int64_t k = 0; k < L; k++) {
            worst = fmax(worst, fabs(out[i * L + k] - num(json_at(want, (size_t)k))));
            if (out[i * L + k] > out[i * L + best]) best = k;
        }
        const char *top = NULL;
        json_as_str(json_get(json_at(json_get(g, "pipeline_top"), (size_t)i), "label"), &top, NULL);
        top_ok += top && !strcmp(top, candle_encoder_label(e, best));
    }
    CHECK_MSG(worst <= 1e-4, "classifier: max abs probability diff %.3g", worst);
    CHECK_MSG(top_ok == n, "classifier: %d of %lld top labels agree", top_ok, (long long)n);
    printf("%-22s %lld sentences, %lld labels: max abs prob diff %.3g, top labels %d/%lld\n",
           "bert-tiny-classifier", (long long)n, (long long)L, worst, top_ok, (long long)n);
    /* per-input token counts as transformers tokenizes */
    int64_t *used = calloc((size_t)n, sizeof *used);
    candle_head_params hp = {.no_truncate = true, .n_tokens = used};
    CHECK(candle_encoder_classify(e, texts, NULL, n, &hp, out, (size_t)(n * L)) == CANDLE_OK);
    for (int64_t i = 0; i < n; i++)
        CHECK(used[i] == (int64_t)json_at(json_get(g, "token_ids"), (size_t)i)->n);
    free(used);
    CHECK(candle_encoder_classify(e, texts, NULL, n, NULL, out, 5) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "too small, need 72");
    float s;
    CHECK(candle_encoder_rerank(e, "q", SIZE_MAX, texts, NULL, 1, NULL, &s) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "has 3 labels; a reranker has one score");
    check_classify_tokens(e, g, texts, n, out);
    check_classifier_gguf(dir, labels, texts, n, out);
    free(out);
    free(texts);
done:
    candle_encoder_free(e);
    json_free(d);
}

/* Indices sorted by descending score (stable, as numpy's argsort of -score). */
static void order_of(const float *s, int64_t n, int64_t *idx) {
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    for (int64_t i = 1; i < n; i++)
        for (int64_t j = i; j > 0 && s[idx[j]] > s[idx[j - 1]]; j--) {
            int64_t t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
}

/* candle_encoder_tokenize_pair gives each pair's ids and token types as
 * the CrossEncoder's tokenizer (the cut pair too), and
 * candle_encoder_rerank_tokens on them candle_encoder_rerank's scores bit
 * for bit; the cut pair is refused with no_truncate, naming why. */
static void check_rerank_tokens(const candle_encoder *e, const json_value *qs, const char **docs, int64_t n) {
    int64_t max = candle_encoder_max_tokens(e), n_ids[64], bad = 0, used[64];
    int32_t *ids[64], *types[64];
    float want[64], got[64];
    for (int64_t i = 0; i < n; i++) {
        ids[i] = malloc((size_t)max * sizeof **ids);
        types[i] = malloc((size_t)max * sizeof **types);
    }
    for (size_t qi = 0; qi < qs->n; qi++) {
        const json_value *q = json_at(qs, qi), *pairs = json_get(q, "pairs");
        const char *query = NULL;
        json_as_str(json_get(q, "query"), &query, NULL);
        for (int64_t i = 0; i < n; i++) {
            CHECK_MSG(candle_encoder_tokenize_pair(e, query, SIZE_MAX, docs[i], SIZE_MAX, NULL, ids[i], types[i],
                                                   (size_t)max, &n_ids[i]) == CANDLE_OK, "%s", candle_last_errmsg());
            const json_value *pi = json_at(pairs, (size_t)i), *wi = json_get(pi, "token_ids"),
                             *wt = json_get(pi, "token_type_ids");
            bool same = n_ids[i] == (int64_t)wi->n;
            for (int64_t k = 0; same && k < n_ids[i]; k++)
                same = ids[i][k] == (int32_t)num(json_at(wi, (size_t)k)) &&
                       (!wt || types[i][k] == (int32_t)num(json_at(wt, (size_t)k)));
            bad += !same;
        }
        CHECK(candle_encoder_rerank(e, query, SIZE_MAX, docs, NULL, n, NULL, want) == CANDLE_OK);
        candle_head_params hp = {.n_tokens = used};
        CHECK_MSG(candle_encoder_rerank_tokens(e, (const int32_t *const *)ids, (const int32_t *const *)types, n_ids, n,
                                               &hp, got) == CANDLE_OK, "%s", candle_last_errmsg());
        CHECK_MSG(!memcmp(got, want, (size_t)n * sizeof *got), "query %zu: rerank_tokens differs from rerank", qi);
        for (int64_t i = 0; i < n; i++) CHECK(used[i] == n_ids[i]);
    }
    CHECK_MSG(!bad, "tokenize_pair: %lld pairs' ids or types differ from the CrossEncoder's", (long long)bad);
    const char *query = NULL;
    json_as_str(json_get(json_at(qs, 0), "query"), &query, NULL);
    candle_head_params nt = {.no_truncate = true};
    CHECK(candle_encoder_tokenize_pair(e, query, SIZE_MAX, docs[n - 1], SIZE_MAX, &nt, ids[0], types[0], (size_t)max,
                                       &n_ids[0]) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "the pair's");
    CHECK_CONTAINS(candle_last_errmsg(), "(no_truncate)");
    printf("%-22s tokenize_pair: ids and types as the CrossEncoder's; rerank_tokens bit for bit\n", "");
    for (int64_t i = 0; i < n; i++) {
        free(ids[i]);
        free(types[i]);
    }
}

static void check_reranker(const char *name) {
    char dir[1024], rel[256];
    snprintf(rel, sizeof rel, "tests/data/encoders/%s", name);
    test_path(rel, dir, sizeof dir);
    json_doc *d = load_golden(dir);
    candle_encoder *e = NULL;
    CHECK_MSG(d && candle_encoder_load(&e, dir, NULL) == CANDLE_OK, "%s: %s", dir, candle_last_errmsg());
    if (!e || !d) goto done;
    const json_value *g = json_root(d), *qs = json_get(g, "queries");
    const char **docs = strings(json_get(g, "documents"));
    int64_t n = (int64_t)json_get(g, "documents")->n, idx[64];
    float scores[64];
    CHECK(candle_encoder_n_labels(e) == 1 && n <= 64);
    double worst = 0;
    int orders = 0;
    for (size_t qi = 0; qi < qs->n; qi++) {
        const json_value *q = json_at(qs, qi), *want = json_get(q, "scores"), *order = json_get(q, "order");
        const char *query = NULL;
        json_as_str(json_get(q, "query"), &query, NULL);
        CHECK_MSG(candle_encoder_rerank(e, query, SIZE_MAX, docs, NULL, n, NULL, scores) == CANDLE_OK, "%s",
                  candle_last_errmsg());
        for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(scores[i] - num(json_at(want, (size_t)i))));
        order_of(scores, n, idx);
        bool same = true;
        for (int64_t i = 0; i < n; i++) same = same && (int64_t)num(json_at(order, (size_t)i)) == idx[i];
        orders += same;
        CHECK_MSG(same, "reranker: query %zu ranked differently", qi);
    }
    CHECK_MSG(worst <= 1e-4, "reranker: max abs score diff %.3g", worst);
    check_rerank_tokens(e, qs, docs, n);
    printf("%-22s %zu queries x %lld docs: max abs score diff %.3g, orders identical %d/%zu\n",
           name, qs->n, (long long)n, worst, orders, qs->n);
    /* the pair template's segments: the document's tokens are type 1 */
    const json_value *p0 = json_at(json_get(json_at(qs, 0), "pairs"), 0);
    int32_t ids[128], types[128];
    int64_t nt = 0;
    const char *query = NULL;
    json_as_str(json_get(json_at(qs, 0), "query"), &query, NULL);
    CHECK(candle_tokenizer_encode_pair(candle_encoder_tokenizer(e), query, strlen(query), docs[0],
                                       strlen(docs[0]), true, ids, 128, &nt, types) == CANDLE_OK);
    const json_value *want_t = json_get(p0, "token_type_ids");
    CHECK(nt == (int64_t)want_t->n);
    for (int64_t i = 0; i < nt && i < 128; i++) CHECK(types[i] == (int32_t)num(json_at(want_t, (size_t)i)));
    /* the tokens each pair ran with; no_truncate refuses the pair that was cut */
    int64_t used[64];
    candle_head_params hp = {.n_tokens = used};
    const json_value *pairs = json_get(json_at(qs, 0), "pairs");
    CHECK(candle_encoder_rerank(e, query, SIZE_MAX, docs, NULL, n, &hp, scores) == CANDLE_OK);
    int64_t cut = -1;
    for (int64_t i = 0; i < n; i++) {
        const json_value *pi = json_at(pairs, (size_t)i);
        CHECK(used[i] == (int64_t)json_get(pi, "token_ids")->n);
        if (num(json_get(pi, "untruncated_length")) > (double)json_get(pi, "token_ids")->n) cut = i;
    }
    CHECK(cut >= 0);
    hp.no_truncate = true;
    if (cut >= 0) {
        CHECK(candle_encoder_rerank(e, query, SIZE_MAX, docs, NULL, cut, &hp, scores) == CANDLE_OK);
        CHECK(candle_encoder_rerank(e, query, SIZE_MAX, docs, NULL, cut + 1, &hp, scores) == CANDLE_ERR_INVALID_ARG);
        CHECK_CONTAINS(candle_last_errmsg(), "(no_truncate)");
    }
    free(docs);
done:
    candle_encoder_free(e);
    json_free(d);
}

static void check_refusals(void) {
    char dir[1024];
    test_path("tests/data/encoders/bert-tiny", dir, sizeof dir);
    candle_encoder *e = NULL;
    CHECK(candle_encoder_load(&e, dir, NULL) == CANDLE_OK);
    CHECK(candle_encoder_n_labels(e) == 0);
    const char *t = "hello";
    float p[4];
    CHECK(candle_encoder_classify(e, &t, NULL, 1, NULL, p, 4) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "has no classifier head");
    CHECK(candle_encoder_rerank(e, "q", SIZE_MAX, &t, NULL, 1, NULL, p) == CANDLE_ERR_INVALID_ARG);
    /* token types past the table are refused, not read out of bounds */
    int32_t tok[3] = {2, 40, 3}, ty[3] = {0, 2, 0};
    float h[64];
    candle_forward_input in = {.tokens = tok, .n_seq = 1, .n_tokens = 3, .type_ids = ty};
    CHECK(candle_model_forward(candle_encoder_model(e), &in, CANDLE_OUTPUT_POOLED_CLS, h, 64) ==
          CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "token type 2 at index 1 out of range [0, 2)");
    candle_encoder_free(e);
}

/* An encoder directory written as a GGUF by candle quantize carries what
 * llama.cpp's bert loader needs (tokenizer.ggml.* keys, the token type
 * count) and the Pooling module's mode, which the GGUF encoder then pools
 * by: bert-tiny-cls-dense pools CLS (its Dense layers stay behind). */
static void check_encoder_gguf(void) {
    char dir[1024], tmpl[] = "/tmp/candle-enc-XXXXXX", out[1200];
    test_path("tests/data/encoders/bert-tiny-cls-dense", dir, sizeof dir);
    char *d = mkdtemp(tmpl);
    CHECK(d != NULL);
    if (!d) return;
    snprintf(out, sizeof out, "%s/model.gguf", d);
    candle_quantize_params qp = candle_quantize_default_params();
    qp.n_threads = 1;
    CHECK_MSG(candle_quantize_file(dir, out, CANDLE_FTYPE_ALL_F32, &qp) == CANDLE_OK, "%s", candle_last_errmsg());
    candle_gguf *g = NULL;
    CHECK_OK(NULL, candle_gguf_open(&g, out, NULL));
    const char *model = NULL;
    size_t ml = 0;
    uint32_t types = 0, pooling = 0;
    int64_t n_tok = 0;
    candle_gguf_type et;
    CHECK(g && candle_gguf_get_str(g, "tokenizer.ggml.model", &model, &ml) && ml == 4 && !memcmp(model, "bert", 4));
    CHECK(g && candle_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n_tok) && n_tok > 100);
    CHECK(g && candle_gguf_get_u32(g, "tokenizer.ggml.token_type_count", &types) && types == 2);
    CHECK(g && candle_gguf_get_u32(g, "bert.pooling_type", &pooling) && pooling == 2);
    candle_gguf_close(g);
    candle_encoder *e = NULL;
    CHECK_MSG(candle_encoder_load(&e, out, NULL) == CANDLE_OK, "%s: %s", out, candle_last_errmsg());
    const char *texts[] = {"a short sentence", "another, longer sentence to embed"};
    int64_t dim = e ? candle_encoder_dim(e) : 0;
    float *got[3];
    for (int k = 0; k < 3; k++) {
        got[k] = calloc((size_t)(2 * (dim ? dim : 1)), sizeof *got[k]);
        candle_embed_params ep = candle_embed_default_params();
        ep.pooling = k == 0 ? CANDLE_POOLING_DEFAULT : k == 1 ? CANDLE_POOLING_CLS : CANDLE_POOLING_MEAN;
        CHECK(e && candle_encoder_embed(e, texts, NULL, 2, &ep, got[k], (size_t)(2 * dim)) == CANDLE_OK);
    }
    CHECK_MSG(dim && !memcmp(got[0], got[1], (size_t)(2 * dim) * sizeof *got[0]) &&
                  memcmp(got[0], got[2], (size_t)(2 * dim) * sizeof *got[0]),
              "the GGUF encoder does not pool by bert.pooling_type (CLS)");
    for (int k = 0; k < 3; k++) free(got[k]);
    candle_encoder_free(e);
    unlink(out);
    rmdir(d);
}

int main(void) {
    check_classifier();
    check_reranker("bert-tiny-reranker");
    /* RoBERTa's classifier.dense / out_proj under roberta., Unigram, no token types */
    check_reranker("xlm-roberta-tiny-reranker");
    check_refusals();
    check_encoder_gguf();
    return test_done("test_encoder_heads");
}
