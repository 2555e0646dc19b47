/* Speculative decoding (speculative.h) on the tiny random models,
 * stories260K and SmolLM2-135M Q4_1 (quantized: the multi-row steps' rows
 * must have the one-row steps' bits; not under the sanitizers, where it is
 * slow): greedy output token for token equal to plain greedy decoding, with prompt lookup (several n-gram sizes and draft lengths) and
 * with the model itself as its draft (every draft accepted); a draft model
 * of another vocabulary refused; sampling reproducible for a seed; the
 * context's end. */
#include "common/tiny_variant.h"
#include "test.h"

#define N_GEN 48

typedef struct lm {
    const char *name;
    candle_model *m;
    candle_tokenizer *tok;
} lm;

static bool lm_open(lm *l, const char *name, const char *rel) {
    char path[512];
    l->name = name;
    l->m = NULL;
    l->tok = NULL;
    if (access(test_path(rel, path, sizeof path), R_OK)) {
        test_skip(name, "%s absent", path);
        return false;
    }
    CHECK_OK(NULL, candle_model_load(&l->m, path, NULL));
    if (l->m) CHECK_OK(NULL, candle_tokenizer_from_weights(&l->tok, candle_model_weights(l->m)));
    return l->m && l->tok;
}

static void lm_close(lm *l) {
    candle_tokenizer_free(l->tok);
    candle_model_free(l->m);
}

/* Plain decoding: sample, record, evaluate; stops at an end of generation. */
static int plain(const lm *l, const int32_t *prompt, int np, const candle_sampler_params *sp, int n_gen,
                 int64_t n_ctx, int32_t *out) {
    int64_t nv = candle_model_get_config(l->m)->n_vocab;
    candle_session *s = NULL;
    candle_sampler *smp = NULL;
    float *logits = malloc((size_t)nv * sizeof *logits);
    CHECK_OK(NULL, candle_session_init(&s, l->m, &(candle_session_params){.n_ctx = n_ctx}));
    CHECK_OK(NULL, candle_sampler_init(&smp, (int32_t)nv, sp));
    for (int i = 0; i < np; i++) candle_sampler_accept(smp, prompt[i]);
    CHECK_OK(NULL, candle_session_eval(s, prompt, np, logits, false));
    int n = 0;
    while (n < n_gen) {
        int32_t id = candle_sampler_sample(smp, logits);
        candle_sampler_accept(smp, id);
        out[n++] = id;
        if (candle_tokenizer_is_eog(l->tok, id) || candle_session_pos(s) >= n_ctx) break;
        if (candle_session_eval(s, &id, 1, logits, false)) break;
    }
    candle_session_free(s);
    candle_sampler_free(smp);
    free(logits);
    return n;
}

/* The same through candle_spec_step; *st gets the statistics. */
static int speculative(const lm *l, const int32_t *prompt, int np, const candle_sampler_params *sp,
                       int n_gen, int64_t n_ctx, const candle_spec_params *pp, int32_t *out,
                       candle_spec_stats *st) {
    int64_t nv = candle_model_get_config(l->m)->n_vocab;
    candle_session *s = NULL;
    candle_sampler *smp = NULL;
    candle_spec *spec = NULL;
    float *logits = malloc((size_t)nv * sizeof *logits);
    CHECK_OK(NULL, candle_session_init(&s, l->m, &(candle_session_params){.n_ctx = n_ctx}));
    CHECK_OK(NULL, candle_sampler_init(&smp, (int32_t)nv, sp));
    candle_status ist = candle_spec_init(&spec, l->m, l->tok, pp);
    CHECK_MSG(ist == CANDLE_OK, "%s: spec_init: %s", l->name, candle_last_errmsg());
    for (int i = 0; i < np; i++) candle_sampler_accept(smp, prompt[i]);
    CHECK_OK(NULL, candle_session_eval(s, prompt, np, logits, false));
    CHECK_OK(NULL, candle_spec_set_context(spec, prompt, np));
    int n = 0;
    int32_t id = candle_sampler_sample(smp, logits), buf[CANDLE_SPEC_MAX_DRAFT + 1];
    candle_sampler_accept(smp, id);
    out[n++] = id;
    while (spec && n < n_gen && !candle_tokenizer_is_eog(l->tok, id) && candle_session_pos(s) < n_ctx) {
        int32_t got = 0;
        candle_status r = candle_spec_step(spec, s, smp, id, buf, &got);
        CHECK_MSG(r == CANDLE_OK, "%s: step: %s", l->name, candle_last_errmsg());
        if (r) break;
        CHECK(got >= 1);
        CHECK(candle_session_pos(s) <= n_ctx);
        for (int i = 0; i < got && n < n_gen; i++) out[n++] = id = buf[i];
    }
    if (spec) *st = candle_spec_get_stats(spec);
    candle_spec_free(spec);
    candle_session_free(s);
    candle_sampler_free(smp);
    free(logits);
    return n;
}

static int first_diff(const int32_t *a, int na, const int32_t *b, int nb) {
    for (int i = 0; i < na && i < nb; i++)
        if (a[i] != b[i]) return i;
    return na == nb ? -1 : (na < nb ? na : nb);
}

/* Prompts: text, and one repeating itself (lookup's case); tokenized. */
static int prompt_tokens(const lm *l, int which, int32_t *ids, int cap) {
    static const char *texts[] = {
        "Once upon a time",
        "Lily had a red ball. Tom had a red ball. Lily had a red ball. Tom had a",
        "the cat sat on the mat. the cat sat on the mat. the cat sat on the",
    };
    int64_t n = 0;
    const char *t = texts[which];
    CHECK_OK(NULL, candle_tokenizer_encode(l->tok, t, strlen(t), true, false, ids, cap, &n));
    return (int)(n < cap ? n : cap);
}

/* Drafts of at most max_k tokens: past 16 a quantized model's verification
 * rows no longer take the one-row attention path (fast_attention.c). */
static void greedy_identity(const lm *l, int max_k) {
    candle_sampler_params greedy = candle_sampler_default_params();
    greedy.temp = 0;
    struct {
        int ngram, k;
    } lk[] = {{1, 4}, {2, 8}, {3, 16}, {1, CANDLE_SPEC_MAX_DRAFT}};
    int64_t accepted_total = 0;
    for (int pi = 0; pi < 3; pi++) {
        int32_t prompt[64], ref[N_GEN], got[N_GEN];
        int np = prompt_tokens(l, pi, prompt, 64);
        int nr = plain(l, prompt, np, &greedy, N_GEN, 128, ref);
        /* the lengths from measured times (greedy's default) and from the acceptance alone */
        for (size_t c = 0; c < 2 * (sizeof lk / sizeof lk[0]); c++) {
            size_t i = c / 2;
            if (lk[i].k > max_k) continue;
            candle_spec_params pp = candle_spec_default_params();
            pp.lookup_ngram = lk[i].ngram;
            pp.n_draft = lk[i].k;
            pp.cost_aware = c % 2 == 0;
            candle_spec_stats st = {0};
            int ng = speculative(l, prompt, np, &greedy, N_GEN, 128, &pp, got, &st);
            int d = first_diff(ref, nr, got, ng);
            CHECK_MSG(d < 0, "%s prompt %d lookup n=%d k=%d%s: differs from plain greedy at token %d", l->name,
                      pi, lk[i].ngram, lk[i].k, pp.cost_aware ? "" : " (no timing)", d);
            CHECK(st.n_accepted <= st.n_drafted);
            accepted_total += st.n_accepted;
        }
        /* the model as its own draft: every draft is what it would say */
        candle_spec_params pp = candle_spec_default_params();
        pp.draft_model = l->m;
        pp.draft_session.n_ctx = 128;
        pp.draft_sampling = greedy;
        pp.n_draft = 5;
        candle_spec_stats st = {0};
        int ng = speculative(l, prompt, np, &greedy, N_GEN, 128, &pp, got, &st);
        int d = first_diff(ref, nr, got, ng);
        CHECK_MSG(d < 0, "%s prompt %d self-draft: differs from plain greedy at token %d", l->name, pi, d);
        CHECK_MSG(st.n_drafted > 0 && st.n_accepted == st.n_drafted,
                  "%s prompt %d self-draft: %lld of %lld drafts accepted", l->name, pi,
                  (long long)st.n_accepted, (long long)st.n_drafted);
        /* a context that ends inside the generation: drafts shrink to the room */
        int64_t n_ctx = np + 7;
        nr = plain(l, prompt, np, &greedy, N_GEN, n_ctx, ref);
        pp = candle_spec_default_params();
        pp.lookup_ngram = 1;
        ng = speculative(l, prompt, np, &greedy, N_GEN, n_ctx, &pp, got, &st);
        CHECK_MSG(first_diff(ref, nr, got, ng) < 0, "%s prompt %d: at the context's end", l->name, pi);
    }
    CHECK_MSG(accepted_total > 0, "%s: prompt lookup accepted nothing on repetitive prompts", l->name);
    printf("%s: greedy identity checked, %lld lookup drafts accepted\n", l->name, (long long)accepted_total);
}

/* Sampling with penalties: the same seed gives the same tokens; valid ids. */
static void sampling_runs(const lm *l) {
    candle_sampler_params sp = candle_sampler_default_params();
    sp.temp = 0.9f;
    sp.repeat_penalty = 1.2f;
    sp.seed = 7;
    int32_t prompt[64], a[N_GEN], b[N_GEN];
    int np = prompt_tokens(l, 1, prompt, 64);
    candle_spec_params pp = candle_spec_default_params();
    pp.lookup_ngram = 1;
    candle_spec_stats st;
    int na = speculative(l, prompt, np, &sp, N_GEN, 128, &pp, a, &st);
    int nb = speculative(l, prompt, np, &sp, N_GEN, 128, &pp, b, &st);
    CHECK(first_diff(a, na, b, nb) < 0);
    pp.draft_model = l->m;
    pp.draft_session.n_ctx = 128;
    pp.draft_sampling = sp;
    na = speculative(l, prompt, np, &sp, N_GEN, 128, &pp, a, &st);
    CHECK(na > 0 && st.n_drafted > 0);
    int64_t nv = candle_model_get_config(l->m)->n_vocab;
    for (int i = 0; i < na; i++) CHECK(a[i] >= 0 && a[i] < nv);
}

/* A copy of a tiny model's vocabulary: the first `keep` tokens, token 300's
 * text changed when `rename` (same size, another vocabulary). */
typedef struct vocab_edit {
    const candle_gguf *g;
    int64_t keep;
    bool rename;
} vocab_edit;

static candle_status edit_vocab(candle_gguf_writer *w, void *user) {
    const vocab_edit *e = user;
    candle_gguf_type t;
    int64_t n = 0;
    if (!candle_gguf_get_arr(e->g, "tokenizer.ggml.tokens", &t, &n) || e->keep > n) return CANDLE_ERR_FORMAT;
    char **toks = calloc((size_t)e->keep, sizeof *toks);
    candle_status s = toks ? CANDLE_OK : CANDLE_ERR_OOM;
    for (int64_t i = 0; !s && i < e->keep; i++) {
        const char *tx = NULL;
        size_t len = 0;
        candle_gguf_arr_str(e->g, "tokenizer.ggml.tokens", i, &tx, &len);
        if (e->rename && i == 300) tx = "zzzz-renamed", len = strlen(tx);
        if (!(toks[i] = malloc(len + 1))) s = CANDLE_ERR_OOM;
        else memcpy(toks[i], tx, len), toks[i][len] = 0;
    }
    if (!s) s = candle_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", CANDLE_GGUF_STRING,
                                           (const char *const *)toks, e->keep);
    const void *sc = candle_gguf_arr_data(e->g, "tokenizer.ggml.scores");
    const void *ty = candle_gguf_arr_data(e->g, "tokenizer.ggml.token_type");
    if (!s && sc) s = candle_gguf_writer_set_arr(w, "tokenizer.ggml.scores", CANDLE_GGUF_FLOAT32, sc, e->keep);
    if (!s && ty) s = candle_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", CANDLE_GGUF_INT32, ty, e->keep);
    for (int64_t i = 0; toks && i < e->keep; i++) free(toks[i]);
    free(toks);
    return s;
}

/* tiny_rel rewritten by e (and its vocabulary rows cut to e->keep), loaded
 * as a draft for tiny: refused with a message containing want. */
static void refused_as_draft(const lm *tiny, const char *tiny_rel, vocab_edit *e, const char *want) {
    char path[512], out[512];
    snprintf(out, sizeof out, "/tmp/candle-spec-vocab-%d.gguf", (int)getpid());
    size_t n = 0;
    unsigned char *file = tiny_read_all(test_path(tiny_rel, path, sizeof path), &n);
    candle_gguf *g = NULL;
    CHECK_OK(NULL, candle_gguf_open_memory(&g, file, n));
    e->g = g;
    tiny_variant v = {.edit = edit_vocab, .user = e, .rows_of = {"token_embd.weight", "output.weight"},
                      .rows = e->keep};
    CHECK_OK(NULL, tiny_variant_write(path, out, &v));
    candle_model *m2 = NULL;
    candle_status ls = candle_model_load(&m2, out, NULL);
    CHECK_MSG(ls == CANDLE_OK, "variant: %s", candle_last_errmsg());
    if (m2) {
        candle_spec_params pp = candle_spec_default_params();
        candle_spec *spec = NULL;
        pp.draft_model = m2;
        CHECK(candle_spec_init(&spec, tiny->m, tiny->tok, &pp) == CANDLE_ERR_INVALID_ARG);
        CHECK_CONTAINS(candle_last_errmsg(), want);
        CHECK(spec == NULL);
    }
    candle_model_free(m2);
    candle_gguf_close(g);
    free(file);
    unlink(out);
}

static void vocab_refused(const lm *tiny, const char *tiny_rel) {
    int64_t nv = candle_model_get_config(tiny->m)->n_vocab;
    vocab_edit smaller = {.keep = nv - 12}, renamed = {.keep = nv, .rename = true};
    refused_as_draft(tiny, tiny_rel, &smaller, "vocabulary has 500 tokens, the model's 512");
    refused_as_draft(tiny, tiny_rel, &renamed, "token 300 differs");
    /* parameters out of range */
    candle_spec *spec = NULL;
    candle_spec_params pp = candle_spec_default_params();
    pp.n_draft = 0;
    CHECK(candle_spec_init(&spec, tiny->m, tiny->tok, &pp) == CANDLE_ERR_INVALID_ARG);
    pp.n_draft = CANDLE_SPEC_MAX_DRAFT + 1;
    CHECK(candle_spec_init(&spec, tiny->m, tiny->tok, &pp) == CANDLE_ERR_INVALID_ARG);
    pp = candle_spec_default_params();
    pp.lookup_ngram = 0;
    CHECK(candle_spec_init(&spec, tiny->m, tiny->tok, &pp) == CANDLE_ERR_INVALID_ARG);
}

/* A session out of step with the context is refused, not silently wrong. */
static void out_of_step(const lm *l) {
    candle_session *s = NULL;
    candle_sampler *smp = NULL;
    candle_spec *spec = NULL;
    CHECK_OK(NULL, candle_session_init(&s, l->m, &(candle_session_params){.n_ctx = 32}));
    CHECK_OK(NULL, candle_sampler_init(&smp, (int32_t)candle_model_get_config(l->m)->n_vocab, NULL));
    CHECK_OK(NULL, candle_spec_init(&spec, l->m, l->tok, NULL));
    int32_t toks[3] = {1, 5, 6}, out[CANDLE_SPEC_MAX_DRAFT + 1], n = 0;
    CHECK_OK(NULL, candle_session_eval(s, toks, 3, NULL, false));
    CHECK_OK(NULL, candle_spec_set_context(spec, toks, 2));
    CHECK(candle_spec_step(spec, s, smp, 7, out, &n) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "candle_spec_set_context");
    candle_spec_free(spec);
    candle_sampler_free(smp);
    candle_session_free(s);
}

int main(void) {
    static const char *tiny[] = {"qwen2", "qwen3", "gemma2", "gemma3", "phi3"};
    lm stories;
    bool have_stories = lm_open(&stories, "stories260K", "../shared/data/models/stories260K.gguf");
    for (size_t i = 0; i < sizeof tiny / sizeof tiny[0]; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "tests/data/tiny/%s.gguf", tiny[i]);
        lm l;
        if (lm_open(&l, tiny[i], rel)) {
            greedy_identity(&l, CANDLE_SPEC_MAX_DRAFT);
            if (i == 0) {
                sampling_runs(&l);
                vocab_refused(&l, rel);
                out_of_step(&l);
            }
        }
        lm_close(&l);
    }
    if (have_stories) {
        greedy_identity(&stories, CANDLE_SPEC_MAX_DRAFT);
        sampling_runs(&stories);
    }
    lm_close(&stories);
    if (test_sanitized()) {
        printf("sanitized run: SmolLM2-135M left out\n");
    } else {
        lm smol;
        if (lm_open(&smol, "SmolLM2-135M", "models/SmolLM2-135M-Instruct.Q4_1.gguf")) greedy_identity(&smol, 16);
        lm_close(&smol);
    }
    return test_done("test_speculative");
}
