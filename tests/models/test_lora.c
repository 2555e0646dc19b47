/* LoRA adapters (lora.h) against transformers + peft: tests/data/lora, made
 * by scripts/gen_lora_goldens.py over the tiny models of tests/data/hf.
 * llama, qwen2 (rsLoRA) and phi3 (fused qkv and gate-up projections).
 * Each adapter, as a PEFT directory and as llama.cpp's GGUF LoRA, on the
 * model's Hugging Face directory and on llama.cpp's GGUF of it (Llama's q/k
 * rows permuted), at scale 1.0 and 0.5, must give transformers' logits at
 * every position within 1e-5 NMSE; no adapters must give the base model's
 * logits bit for bit. Two sessions with different adapters share one model;
 * the generic forward and the batch take a set too. Malformed adapters are
 * errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "candle/candle.h"
#include "core/json-impl.h"
#include "test.h"

#define N_TOK 16
#define MAX_NMSE 1e-5

typedef struct golden {
    int32_t tokens[N_TOK];
    int64_t n_vocab;
    float *s1, *s05; /* [N_TOK, n_vocab] at scale 1.0 and 0.5 */
    float *base;     /* the base model's golden */
} golden;

static float *read_floats(const char *path, size_t want) {
    size_t n;
    float *v = (float *)test_read_file(path, &n);
    if (v && n != want * sizeof(float)) {
        free(v);
        v = NULL;
    }
    CHECK_MSG(v, "%s: unreadable", path);
    return v;
}

static bool read_golden(const char *dir, const char *name, const char *base_dir, golden *g) {
    char path[1400];
    size_t n;
    snprintf(path, sizeof path, "%s/lora.json", dir);
    char *text = test_read_file(path, &n);
    json_doc *d = NULL;
    bool ok = text && !json_parse(&d, text, n, path, NULL);
    const json_value *a = json_get(json_get(json_root(d), "adapters"), name);
    const json_value *toks = json_get(a, "tokens");
    ok = ok && toks && toks->n == N_TOK && json_as_i64(json_get(a, "n_vocab"), &g->n_vocab);
    for (size_t i = 0; ok && i < N_TOK; i++) {
        int64_t t;
        ok = json_as_i64(json_at(toks, i), &t);
        g->tokens[i] = (int32_t)t;
    }
    json_free(d);
    free(text);
    CHECK_MSG(ok, "%s: no adapter '%s'", path, name);
    if (!ok) return false;
    size_t nf = (size_t)(N_TOK * g->n_vocab);
    snprintf(path, sizeof path, "%s/%s_s1.0_logits.bin", dir, name);
    g->s1 = read_floats(path, nf);
    snprintf(path, sizeof path, "%s/%s_s0.5_logits.bin", dir, name);
    g->s05 = read_floats(path, nf);
    snprintf(path, sizeof path, "%s/golden_logits.bin", base_dir);
    g->base = read_floats(path, nf);
    return g->s1 && g->s05 && g->base;
}

/* Logits [N_TOK, n_vocab] of the golden tokens through a session using set. */
static float *run(const candle_model *m, const golden *g, const candle_lora_use *set, int n) {
    candle_session *s = NULL;
    candle_session_params sp = candle_session_default_params();
    sp.n_ctx = N_TOK;
    float *lg = malloc((size_t)(N_TOK * g->n_vocab) * sizeof *lg);
    bool ok = lg && !candle_session_init(&s, m, &sp);
    ok = ok && !candle_session_set_lora(s, set, n) && !candle_session_eval(s, g->tokens, N_TOK, lg, true);
    CHECK_MSG(ok, "session: %s", s ? candle_session_errmsg(s) : candle_last_errmsg());
    candle_session_free(s);
    if (!ok) free(lg);
    return ok ? lg : NULL;
}

static void check_logits(const char *what, const float *got, const float *ref, size_t n) {
    if (!got) return;
    double e = test_nmse_f32(got, ref, n);
    printf("  %-44s NMSE %.2e\n", what, e);
    CHECK_MSG(e < MAX_NMSE, "%s: NMSE %.3g", what, e);
}

/* One adapter file on one base model at both scales, and with no adapter. */
static void check_adapter(const char *label, candle_model *m, const char *path, const golden *g, int per_layer) {
    candle_lora *l = NULL;
    if (candle_lora_load(&l, m, path)) {
        CHECK_MSG(false, "%s: %s", path, candle_last_errmsg());
        return;
    }
    CHECK(candle_lora_n_pairs(l) == per_layer * candle_model_get_config(m)->n_layer);
    CHECK(candle_lora_model(l) == m && !strcmp(candle_lora_path(l), path));
    size_t nf = (size_t)(N_TOK * g->n_vocab);
    char what[160];
    candle_lora_use u = {l, 1.0f};
    float *a = run(m, g, &u, 1);
    snprintf(what, sizeof what, "%s scale 1.0", label);
    check_logits(what, a, g->s1, nf);
    u.scale = 0.5f;
    float *b = run(m, g, &u, 1);
    snprintf(what, sizeof what, "%s scale 0.5", label);
    check_logits(what, b, g->s05, nf);
    /* the same adapter twice at 0.25 each is the adapter at 0.5 */
    candle_lora_use two[2] = {{l, 0.25f}, {l, 0.25f}};
    float *c = run(m, g, two, 2);
    snprintf(what, sizeof what, "%s 2 x scale 0.25", label);
    check_logits(what, c, g->s05, nf);
    free(a);
    free(b);
    free(c);
    candle_lora_free(l);
}

/* Two sessions on one model, one with the adapter and one without, stepped
 * in turn: each gets its own logits (nothing of the adapter is model state). */
static void check_shared(candle_model *m, candle_lora *l, const golden *g, const float *plain) {
    candle_session_params sp = candle_session_default_params();
    sp.n_ctx = N_TOK;
    candle_session *a = NULL, *b = NULL;
    size_t nv = (size_t)g->n_vocab;
    float *la = malloc(nv * sizeof *la), *lb = malloc(nv * sizeof *lb);
    candle_lora_use u = {l, 1.0f};
    bool ok = !candle_session_init(&a, m, &sp) && !candle_session_init(&b, m, &sp) &&
              !candle_session_set_lora(a, &u, 1);
    double ea = 0, eb = 0;
    for (int t = 0; ok && t < N_TOK; t++) {
        ok = !candle_session_eval(a, g->tokens + t, 1, la, false) && !candle_session_eval(b, g->tokens + t, 1, lb, false);
        double x = test_nmse_f32(la, g->s1 + t * nv, nv), y = test_nmse_f32(lb, plain + t * nv, nv);
        ea = x > ea ? x : ea;
        eb = y > eb ? y : eb;
    }
    CHECK_MSG(ok, "shared: %s", a ? candle_session_errmsg(a) : candle_last_errmsg());
    printf("  shared model, decode steps: with adapter %.2e, without %.2e\n", ea, eb);
    CHECK(ea < MAX_NMSE && eb < 1e-10);
    candle_session_free(a);
    candle_session_free(b);
    free(la);
    free(lb);
}

/* candle_model_forward and candle_batch_eval_lora with the adapter. */
static void check_forward_batch(candle_model *m, candle_lora *l, const golden *g) {
    size_t nf = (size_t)(N_TOK * g->n_vocab), nv = (size_t)g->n_vocab;
    float *out = malloc(nf * sizeof *out);
    candle_lora_use u = {l, 0.5f};
    candle_forward_input in = {.tokens = g->tokens, .n_seq = 1, .n_tokens = N_TOK, .lora = &u, .n_lora = 1};
    candle_status st = candle_model_forward(m, &in, CANDLE_OUTPUT_LOGITS, out, nf);
    CHECK_MSG(!st, "forward: %s", candle_last_errmsg());
    if (!st) check_logits("candle_model_forward scale 0.5", out, g->s05, nf);
    free(out);

    candle_batch *b = NULL;
    candle_session *s[2] = {NULL, NULL};
    candle_session_params sp = candle_session_default_params();
    sp.n_ctx = N_TOK;
    float *lg = malloc(2 * nv * sizeof *lg);
    bool ok = !candle_batch_init(&b, m, 0) && !candle_session_init(&s[0], m, &sp) &&
              !candle_session_init(&s[1], m, &sp);
    candle_batch_seq q[2] = {{.sess = s[0], .tokens = g->tokens, .n = 10, .logits = lg},
                             {.sess = s[1], .tokens = g->tokens, .n = 16, .logits = lg + nv}};
    ok = ok && !candle_batch_eval_lora(b, q, 2, &u, 1);
    CHECK_MSG(ok, "batch: %s", b ? candle_batch_errmsg(b) : candle_last_errmsg());
    if (ok) {
        double e0 = test_nmse_f32(lg, g->s05 + 9 * nv, nv), e1 = test_nmse_f32(lg + nv, g->s05 + 15 * nv, nv);
        printf("  batch of 2 scale 0.5: NMSE %.2e, %.2e\n", e0, e1);
        CHECK(e0 < MAX_NMSE && e1 < MAX_NMSE);
    }
    /* an adapter of another model is refused, not applied */
    candle_lora_use bad = {NULL, 1.0f};
    CHECK(candle_batch_eval_lora(b, q, 1, &bad, 1) == CANDLE_ERR_INVALID_ARG);
    CHECK(candle_session_set_lora(s[0], &bad, 1) == CANDLE_ERR_INVALID_ARG);
    candle_session_free(s[0]);
    candle_session_free(s[1]);
    candle_batch_free(b);
    free(lg);
}

/* per_layer: the adapted linears of a layer (7, or Phi-3's fused 4). */
static void check_model(const char *name, const char *base_rel, bool shared_checks, int per_layer) {
    char dir[1024], base_dir[1024], gguf[1200], peft[1200], lgguf[1200], rel[128];
    test_path("tests/data/lora", dir, sizeof dir);
    test_path(base_rel, base_dir, sizeof base_dir);
    const char *leaf = strrchr(base_rel, '/') + 1;
    snprintf(gguf, sizeof gguf, "%s/%s.gguf", base_dir, leaf);
    snprintf(peft, sizeof peft, "%s/%s-peft", dir, name);
    snprintf(lgguf, sizeof lgguf, "%s/%s.lora.gguf", dir, name);
    golden g = {0};
    printf("%s:\n", name);
    if (!read_golden(dir, name, base_dir, &g)) goto done;
    size_t nf = (size_t)(N_TOK * g.n_vocab);
    const char *bases[2] = {base_dir, gguf};
    for (int bi = 0; bi < 2; bi++) {
        candle_model *m = NULL;
        if (candle_model_load(&m, bases[bi], NULL)) {
            CHECK_MSG(false, "%s: %s", bases[bi], candle_last_errmsg());
            continue;
        }
        const char *bn = bi ? "GGUF base" : "directory base";
        float *plain = run(m, &g, NULL, 0);
        snprintf(rel, sizeof rel, "%s, no adapter", bn);
        check_logits(rel, plain, g.base, nf);
        snprintf(rel, sizeof rel, "%s, PEFT dir", bn);
        check_adapter(rel, m, peft, &g, per_layer);
        snprintf(rel, sizeof rel, "%s, GGUF LoRA", bn);
        check_adapter(rel, m, lgguf, &g, per_layer);
        candle_lora *l = NULL;
        if (shared_checks && plain && !candle_lora_load(&l, m, peft)) {
            /* an adapter loaded and unused changes nothing, bit for bit */
            float *again = run(m, &g, NULL, 0);
            CHECK(again && !memcmp(again, plain, nf * sizeof *plain));
            free(again);
            check_shared(m, l, &g, plain);
            check_forward_batch(m, l, &g);
        }
        candle_lora_free(l);
        free(plain);
        candle_model_free(m);
    }
done:
    free(g.s1);
    free(g.s05);
    free(g.base);
}

/* ---- malformed adapters ---- */

static char tmpdir[512];

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f && fwrite(data, 1, n, f) == n, "%s: cannot write", path);
    if (f) fclose(f);
}

typedef struct st_tensor {
    const char *name;
    int64_t rows, cols;
} st_tensor;

/* A PEFT directory of f32 tensors (values 0.01) with the given config. */
static void write_peft(const char *cfg, const st_tensor *t, int n) {
    char header[4096], path[700];
    size_t off = 0, len = (size_t)snprintf(header, sizeof header, "{");
    for (int i = 0; i < n; i++) {
        size_t sz = (size_t)(t[i].rows * t[i].cols) * 4;
        len += (size_t)snprintf(header + len, sizeof header - len,
                                "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld,%lld],\"data_offsets\":[%zu,%zu]}",
                                i ? "," : "", t[i].name, (long long)t[i].rows, (long long)t[i].cols, off, off + sz);
        off += sz;
    }
    len += (size_t)snprintf(header + len, sizeof header - len, "}");
    while (len % 8) header[len++] = ' ';
    size_t total = 8 + len + off;
    unsigned char *buf = calloc(1, total);
    uint64_t hl = len;
    for (int b = 0; b < 8; b++) buf[b] = (unsigned char)(hl >> (8 * b));
    memcpy(buf + 8, header, len);
    float v = 0.01f;
    for (size_t i = 8 + len; i + 4 <= total; i += 4) memcpy(buf + i, &v, 4);
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", tmpdir);
    write_file(path, buf, total);
    free(buf);
    snprintf(path, sizeof path, "%s/adapter_config.json", tmpdir);
    write_file(path, cfg, strlen(cfg));
}

static const char *CFG = "{\"peft_type\":\"LORA\",\"r\":4,\"lora_alpha\":8,\"target_modules\":[\"q_proj\",\"v_proj\"]}";
#define QA "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"
#define QB "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"

static void expect_error(candle_model *m, const char *what, const char *path, candle_status want, const char *sub) {
    candle_lora *l = NULL;
    candle_status st = candle_lora_load(&l, m, path);
    printf("  %-34s -> %s: %s\n", what, candle_status_name(st), st ? candle_last_errmsg() : "");
    CHECK_MSG(st == want && !l, "%s: got %s", what, candle_status_name(st));
    if (sub && st) CHECK_CONTAINS(candle_last_errmsg(), sub);
    candle_lora_free(l);
}

static void check_malformed(void) {
    char base[1024], path[700], lg[1200];
    test_path("tests/data/hf/llama", base, sizeof base);
    candle_model *m = NULL;
    if (candle_model_load(&m, base, NULL)) {
        CHECK_MSG(false, "%s: %s", base, candle_last_errmsg());
        return;
    }
    snprintf(tmpdir, sizeof tmpdir, "%s/candle-lora-%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    mkdir(tmpdir, 0700);
    printf("malformed:\n");
    st_tensor ok[2] = {{QA, 4, 64}, {QB, 64, 4}};
    write_peft(CFG, ok, 2);
    candle_lora *l = NULL;
    CHECK_MSG(!candle_lora_load(&l, m, tmpdir), "valid PEFT: %s", candle_last_errmsg());
    CHECK(candle_lora_n_pairs(l) == 1 && candle_lora_rank(l) == 4);
    candle_lora_free(l);

    st_tensor shape[2] = {{QA, 4, 63}, {QB, 64, 4}};
    write_peft(CFG, shape, 2);
    expect_error(m, "PEFT: A of the wrong width", tmpdir, CANDLE_ERR_FORMAT, "do not fit");
    st_tensor rank[2] = {{QA, 4, 64}, {QB, 64, 3}};
    write_peft(CFG, rank, 2);
    expect_error(m, "PEFT: ranks of A and B differ", tmpdir, CANDLE_ERR_FORMAT, "do not fit");
    st_tensor r8[2] = {{QA, 8, 64}, {QB, 64, 8}};
    write_peft(CFG, r8, 2);
    expect_error(m, "PEFT: rank other than r", tmpdir, CANDLE_ERR_UNSUPPORTED, "rank");
    st_tensor unk[2] = {{"base_model.model.model.layers.0.self_attn.foo_proj.lora_A.weight", 4, 64},
                        {"base_model.model.model.layers.0.self_attn.foo_proj.lora_B.weight", 64, 4}};
    write_peft("{\"r\":4,\"lora_alpha\":8}", unk, 2);
    expect_error(m, "PEFT: unknown module", tmpdir, CANDLE_ERR_FORMAT, "foo_proj");
    st_tensor layer[2] = {{"base_model.model.model.layers.9.self_attn.q_proj.lora_A.weight", 4, 64},
                          {"base_model.model.model.layers.9.self_attn.q_proj.lora_B.weight", 64, 4}};
    write_peft("{\"r\":4,\"lora_alpha\":8}", layer, 2);
    expect_error(m, "PEFT: layer out of range", tmpdir, CANDLE_ERR_FORMAT, "matches no");
    write_peft(CFG, ok, 1);
    expect_error(m, "PEFT: lora_A without lora_B", tmpdir, CANDLE_ERR_FORMAT, "has no");
    st_tensor other[1] = {{"base_model.model.model.layers.0.self_attn.q_proj.weight", 64, 64}};
    write_peft(CFG, other, 1);
    expect_error(m, "PEFT: a non-LoRA tensor", tmpdir, CANDLE_ERR_FORMAT, "not a LoRA tensor");
    write_peft("{\"r\":4,\"lora_alpha\":8,\"target_modules\":[\"k_proj\"]}", ok, 2);
    expect_error(m, "PEFT: module not in target_modules", tmpdir, CANDLE_ERR_FORMAT, "target_modules");
    write_peft("{\"r\":4,\"lora_alpha\":8,\"use_dora\":true}", ok, 2);
    expect_error(m, "PEFT: DoRA", tmpdir, CANDLE_ERR_UNSUPPORTED, "DoRA");
    write_peft("{\"r\":4,\"lora_alpha\":8,\"rank_pattern\":{\"q_proj\":8}}", ok, 2);
    expect_error(m, "PEFT: rank_pattern", tmpdir, CANDLE_ERR_UNSUPPORTED, "rank_pattern");
    write_peft("{\"r\":4,\"lora_alpha\":8,\"modules_to_save\":[\"lm_head\"]}", ok, 2);
    expect_error(m, "PEFT: modules_to_save", tmpdir, CANDLE_ERR_UNSUPPORTED, "modules_to_save");
    write_peft("{\"peft_type\":\"IA3\",\"r\":4}", ok, 2);
    expect_error(m, "PEFT: another method", tmpdir, CANDLE_ERR_UNSUPPORTED, "IA3");
    write_peft("{\"r\":4,", ok, 2);
    expect_error(m, "PEFT: broken JSON", tmpdir, CANDLE_ERR_FORMAT, NULL);
    write_peft("{\"lora_alpha\":8}", ok, 2);
    expect_error(m, "PEFT: no r", tmpdir, CANDLE_ERR_FORMAT, "'r'");
    write_peft(CFG, ok, 2);
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", tmpdir);
    size_t n;
    char *bytes = test_read_file(path, &n);
    if (bytes) write_file(path, bytes, n - 100);
    free(bytes);
    expect_error(m, "PEFT: truncated safetensors", tmpdir, CANDLE_ERR_FORMAT, NULL);
    unlink(path);
    expect_error(m, "PEFT: no safetensors", tmpdir, CANDLE_ERR_IO, NULL);
    snprintf(path, sizeof path, "%s/adapter_config.json", tmpdir);
    unlink(path);
    expect_error(m, "PEFT: empty directory", tmpdir, CANDLE_ERR_IO, NULL);

    /* GGUF LoRAs */
    test_path("tests/data/lora/llama.lora.gguf", lg, sizeof lg);
    bytes = test_read_file(lg, &n);
    snprintf(path, sizeof path, "%s/trunc.gguf", tmpdir);
    if (bytes) {
        size_t cuts[3] = {n - 1, n / 2, 40};
        for (int i = 0; i < 3; i++) {
            write_file(path, bytes, cuts[i]);
            expect_error(m, "GGUF: truncated", path, CANDLE_ERR_FORMAT, NULL);
        }
    }
    free(bytes);
    unlink(path);
    expect_error(m, "a model directory, not an adapter", base, CANDLE_ERR_IO, NULL);
    char model_gguf[1200];
    snprintf(model_gguf, sizeof model_gguf, "%s/llama.gguf", base);
    expect_error(m, "GGUF: a model file", model_gguf, CANDLE_ERR_FORMAT, "general.type");
    test_path("tests/data/lora/qwen2.lora.gguf", lg, sizeof lg);
    expect_error(m, "GGUF: another architecture", lg, CANDLE_ERR_UNSUPPORTED, "qwen2");
    expect_error(m, "missing file", "/nonexistent/x.gguf", CANDLE_ERR_IO, NULL);
    rmdir(tmpdir);
    candle_model_free(m);
}

int main(void) {
    check_model("llama", "tests/data/hf/llama", true, 7);
    check_model("qwen2", "tests/data/hf/qwen2", false, 7);
    check_model("phi3", "tests/data/hf/phi3", false, 4); /* fused qkv and gate-up */
    check_malformed();
    return test_done("test_lora");
}
