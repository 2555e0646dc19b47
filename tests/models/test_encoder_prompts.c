/* config_sentence_transformers.json prompts against sentence-transformers'
 * encode(prompt_name=..., prompt=...) (goldens by
 * scripts/gen_encoder_prompt_goldens.py): bert-tiny's files in a temporary
 * folder with the golden's prompts config. The default prompt, each named
 * prompt, an explicit prompt (over a prompt_name), no prompt; the ids are
 * the concatenation's, a cut counts the prompt's tokens; an unknown
 * prompt_name, a default_prompt_name that names no prompt and Pooling's
 * include_prompt false are refused with their names. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

static bool write_file(const char *dir, const char *name, const char *text) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

/* dir = bert-tiny's files (symlinked; 1_Pooling a real folder) + cfg as
 * config_sentence_transformers.json, pooling as 1_Pooling/config.json. */
static bool make_dir(const char *src, const char *dir, const char *cfg, const char *pooling) {
    static const char *const files[] = {"2_Normalize", "config.json", "model.safetensors", "modules.json",
                                        "sentence_bert_config.json", "tokenizer.json", "tokenizer_config.json",
                                        "vocab.txt"};
    char a[1200], b[1200];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(a, sizeof a, "%s/%s", src, files[i]);
        snprintf(b, sizeof b, "%s/%s", dir, files[i]);
        if (symlink(a, b)) return false;
    }
    snprintf(b, sizeof b, "%s/1_Pooling", dir);
    return !mkdir(b, 0755) && write_file(dir, "1_Pooling/config.json", pooling) &&
           write_file(dir, "config_sentence_transformers.json", cfg);
}

static void remove_dir(const char *dir) {
    static const char *const files[] = {"2_Normalize", "config.json", "model.safetensors", "modules.json",
                                        "sentence_bert_config.json", "tokenizer.json", "tokenizer_config.json",
                                        "vocab.txt", "1_Pooling/config.json", "config_sentence_transformers.json"};
    char p[1200];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    snprintf(p, sizeof p, "%s/1_Pooling", dir);
    rmdir(p);
    rmdir(dir);
}

static const char pooling_mean[] = "{\"embedding_dimension\": 64, \"pooling_mode\": \"mean\", \"include_prompt\": true}";

static void check_cases(const char *dir, const json_value *g) {
    candle_encoder *e = NULL;
    CHECK_MSG(candle_encoder_load(&e, dir, NULL) == CANDLE_OK, "%s: %s", dir, candle_last_errmsg());
    if (!e) return;
    const json_value *sents = json_get(g, "sentences"), *cases = json_get(g, "cases");
    CHECK(!strcmp(candle_encoder_prompt(e, NULL) ? candle_encoder_prompt(e, NULL) : "", "query: "));
    CHECK(!strcmp(candle_encoder_prompt(e, "document") ? candle_encoder_prompt(e, "document") : "", "passage: "));
    CHECK(!candle_encoder_prompt(e, "nope") && candle_encoder_prompt_name(e, 2) &&
          !strcmp(candle_encoder_prompt_name(e, 2), "classification") && !candle_encoder_prompt_name(e, 3));
    int64_t n = (int64_t)sents->n, dim = candle_encoder_dim(e), used[8];
    const char *texts[8];
    for (int64_t i = 0; i < n && i < 8; i++) json_as_str(json_at(sents, (size_t)i), &texts[i], NULL);
    float *out = malloc((size_t)(n * dim) * sizeof *out);
    double worst = 1;
    for (size_t c = 0; c < cases->n; c++) {
        const json_value *cs = json_at(cases, c), *args = json_get(cs, "args"), *rows = json_get(cs, "rows");
        candle_embed_params p = candle_embed_default_params();
        json_as_str(json_get(args, "prompt_name"), &p.prompt_name, NULL);
        json_as_str(json_get(args, "prompt"), &p.prompt, NULL);
        p.n_tokens = used;
        const char *name = "", *prompt = "";
        json_as_str(json_get(cs, "name"), &name, NULL);
        json_as_str(json_get(cs, "prompt"), &prompt, NULL);
        CHECK_MSG(candle_encoder_embed(e, texts, NULL, n, &p, out, (size_t)(n * dim)) == CANDLE_OK, "%s: %s", name,
                  candle_last_errmsg());
        for (int64_t i = 0; i < n; i++) {
            const json_value *row = json_at(rows, (size_t)i), *ids = json_get(row, "token_ids");
            double cs_i = cosine(out + i * dim, json_get(row, "embedding"), dim);
            worst = cs_i < worst ? cs_i : worst;
            CHECK_MSG(cs_i >= 0.9999, "%s, sentence %lld: cosine %.7f", name, (long long)i, cs_i);
            CHECK_MSG(used[i] == (int64_t)ids->n, "%s, sentence %lld: %lld tokens, want %zu", name, (long long)i,
                      (long long)used[i], ids->n);
            /* the ids of prompt + text, as sentence-transformers tokenizes them */
            char joined[512];
            snprintf(joined, sizeof joined, "%s%s", prompt, texts[i]);
            int32_t got[128];
            int64_t ng = 0;
            CHECK(candle_tokenizer_encode(candle_encoder_tokenizer(e), joined, strlen(joined), true, true, got, 128,
                                          &ng) == CANDLE_OK);
            bool same = ng == (int64_t)ids->n;
            for (int64_t k = 0; same && k < ng; k++) same = got[k] == (int32_t)num(json_at(ids, (size_t)k));
            CHECK_MSG(same, "%s, sentence %lld: token ids differ", name, (long long)i);
        }
    }
    printf("bert-tiny + prompts: %zu cases x %lld sentences, min cosine %.7f\n", cases->n, (long long)n, worst);
    /* a cut counts the prompt's tokens */
    const json_value *tr = json_get(g, "truncated");
    const char *longt = NULL;
    json_as_str(json_get(tr, "text"), &longt, NULL);
    candle_embed_params p = candle_embed_default_params();
    p.prompt_name = "query";
    p.n_tokens = used;
    CHECK(candle_encoder_embed(e, &longt, NULL, 1, &p, out, (size_t)dim) == CANDLE_OK);
    CHECK(used[0] == (int64_t)json_get(tr, "token_ids")->n);
    CHECK(cosine(out, json_get(tr, "embedding"), dim) >= 0.9999);
    p.no_truncate = true;
    CHECK(candle_encoder_embed(e, &longt, NULL, 1, &p, out, (size_t)dim) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "no_truncate");
    /* an unknown name is refused, naming the model's */
    p = candle_embed_default_params();
    p.prompt_name = "search";
    CHECK(candle_encoder_embed(e, texts, NULL, 1, &p, out, (size_t)dim) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "prompt_name 'search' is not one of the model's prompts ('query', "
                                         "'document', 'classification')");
    /* token ids get no prompt: the same as the text without one */
    int32_t ids[128];
    int64_t nid = 0;
    float ref[64];
    CHECK(candle_tokenizer_encode(candle_encoder_tokenizer(e), texts[0], strlen(texts[0]), true, true, ids, 128,
                                  &nid) == CANDLE_OK);
    const int32_t *idp = ids;
    CHECK(dim <= 64 && candle_encoder_embed_tokens(e, &idp, &nid, 1, NULL, ref, 64) == CANDLE_OK);
    CHECK(cosine(ref, json_get(json_at(json_get(json_at(cases, 4), "rows"), 0), "embedding"), dim) >= 0.9999);
    free(out);
    candle_encoder_free(e);
}

int main(void) {
    char src[1024], gpath[1200];
    test_path("tests/data/encoders/bert-tiny", src, sizeof src);
    test_path("tests/data/encoders/bert-tiny-prompts.json", gpath, sizeof gpath);
    if (!test_need_file("bert-tiny-prompts golden", gpath)) return test_done("test_encoder_prompts");
    json_doc *d = NULL;
    CHECK_MSG(json_parse_file(&d, gpath, NULL, (size_t)1 << 24) == CANDLE_OK, "%s", candle_last_errmsg());
    char tmpl[] = "/tmp/candle-prompts-XXXXXX";
    char *dir = mkdtemp(tmpl);
    CHECK(dir != NULL);
    if (!d || !dir) return test_done("test_encoder_prompts");
    /* the golden's config, re-serialised as sentence-transformers wrote it */
    const char *cfg = "{\"prompts\": {\"query\": \"query: \", \"document\": \"passage: \", \"classification\": "
                      "\"Classify the sentiment: \"}, \"default_prompt_name\": \"query\", \"similarity_fn_name\": "
                      "\"cosine\"}";
    const json_value *gc = json_get(json_root(d), "config");
    CHECK(json_str_eq(json_get(json_get(gc, "prompts"), "classification"), "Classify the sentiment: ") &&
          json_str_eq(json_get(gc, "default_prompt_name"), "query"));
    CHECK(make_dir(src, dir, cfg, pooling_mean));
    check_cases(dir, json_root(d));
    remove_dir(dir);

    /* refusals */
    candle_encoder *e = NULL;
    char tmpl2[] = "/tmp/candle-prompts-XXXXXX";
    dir = mkdtemp(tmpl2);
    CHECK(dir && make_dir(src, dir, "{\"prompts\": {\"query\": \"q: \"}, \"default_prompt_name\": \"doc\"}",
                          pooling_mean));
    CHECK(candle_encoder_load(&e, dir, NULL) == CANDLE_ERR_FORMAT);
    CHECK_CONTAINS(candle_last_errmsg(), "default_prompt_name 'doc' is not one of the prompts");
    remove_dir(dir);
    char tmpl3[] = "/tmp/candle-prompts-XXXXXX";
    dir = mkdtemp(tmpl3);
    CHECK(dir && make_dir(src, dir, "{\"prompts\": {\"query\": \"q: \", \"none\": \"\"}, \"default_prompt_name\": null}",
                          "{\"embedding_dimension\": 64, \"pooling_mode\": \"mean\", \"include_prompt\": false}"));
    CHECK(candle_encoder_load(&e, dir, NULL) == CANDLE_OK);
    const char *t = "hello";
    float v[64];
    candle_embed_params p = candle_embed_default_params();
    CHECK(e && candle_encoder_embed(e, &t, NULL, 1, &p, v, 64) == CANDLE_OK); /* no default prompt */
    p.prompt_name = "none";
    CHECK(e && candle_encoder_embed(e, &t, NULL, 1, &p, v, 64) == CANDLE_OK);
    p.prompt_name = "query";
    CHECK(e && candle_encoder_embed(e, &t, NULL, 1, &p, v, 64) == CANDLE_ERR_UNSUPPORTED);
    CHECK_CONTAINS(candle_last_errmsg(), "include_prompt false");
    candle_encoder_free(e);
    remove_dir(dir);
    json_free(d);
    return test_done("test_encoder_prompts");
}
