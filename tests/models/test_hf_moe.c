/* Mixture-of-experts decoders (Mixtral, Qwen3-MoE, Qwen2-MoE) from Hugging
 * Face directories against transformers: tiny random models in
 * tests/data/hf made by scripts/gen_hf_moe_goldens.py. Checked per model:
 * the 16 golden tokens' logits at every position (prefill) within 1e-5
 * NMSE; the same tokens one at a time (decode); the batched step; the GGUF
 * `candle quantize` writes from the directory (f32 within 1e-5, Q8_0 and
 * Q4_0 loosely, against the directory); and refusals of inconsistent
 * configs (top-k above the expert count, an expert the files lack). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "candle/batch.h"
#include "candle/candle.h"
#include "core/json-impl.h"
#include "test.h"

#define N_TOK 16
#define MAX_NMSE 1e-5

#include "hf_golden.h" /* after N_TOK */

static float *run_path(const char *path, const golden *g) {
    candle_model *m = NULL;
    if (candle_model_load(&m, path, NULL)) {
        CHECK_MSG(false, "%s: %s", path, candle_last_errmsg());
        return NULL;
    }
    float *lg = run(m, g, false);
    candle_model_free(m);
    return lg;
}

/* Two sessions through candle_batch_eval: a prefill of 5 beside one of 3,
 * then one decode token each; the last logits must be the session path's. */
static void check_batch(const char *name, candle_model *m, const golden *g, const float *hf) {
    int64_t nv = g->n_vocab;
    candle_session_params sp = candle_session_default_params();
    sp.n_ctx = N_TOK;
    candle_session *a = NULL, *b = NULL;
    candle_batch *bt = NULL;
    float *la = malloc((size_t)nv * sizeof *la), *lb = malloc((size_t)nv * sizeof *lb);
    bool ok = !candle_session_init(&a, m, &sp) && !candle_session_init(&b, m, &sp) &&
              !candle_batch_init(&bt, m, 0);
    candle_batch_seq q[2] = {{a, g->tokens, 5, la, NULL, NULL, 0}, {b, g->tokens, 3, lb, NULL, NULL, 0}};
    ok = ok && !candle_batch_eval(bt, q, 2);
    q[0] = (candle_batch_seq){a, g->tokens + 5, 1, la, NULL, NULL, 0};
    q[1] = (candle_batch_seq){b, g->tokens + 3, 1, lb, NULL, NULL, 0};
    ok = ok && !candle_batch_eval(bt, q, 2);
    CHECK_MSG(ok, "%s: batch: %s", name, bt ? candle_batch_errmsg(bt) : candle_last_errmsg());
    if (ok) {
        double ea = test_nmse_f32(la, hf + 5 * nv, (size_t)nv), eb = test_nmse_f32(lb, hf + 3 * nv, (size_t)nv);
        printf("%-10s batched step: NMSE vs session %.2e / %.2e\n", name, ea, eb);
        CHECK_MSG(ea < 1e-9 && eb < 1e-9, "%s: batch NMSE %.3g / %.3g", name, ea, eb);
    }
    candle_batch_free(bt);
    candle_session_free(a);
    candle_session_free(b);
    free(la);
    free(lb);
}

/* The GGUF at `path` rewritten with each stacked ffn_*_exps.weight split
 * into llama.cpp's older per-expert tensors (blk.N.ffn_gate.E.weight), the
 * layout of early Mixtral GGUF files: it must give the stacked file's
 * logits (`ref`) through the loader's per-expert path. */
static void check_split(const char *name, const char *tname, const char *path, const golden *g,
                        const float *ref) {
    char out[600];
    snprintf(out, sizeof out, "%s.split.gguf", path);
    size_t n;
    char *bytes = test_read_file(path, &n);
    candle_gguf *src = NULL;
    candle_gguf_writer *w = NULL;
    bool ok = bytes && !candle_gguf_open(&src, path, NULL) && !candle_gguf_writer_init(&w) &&
              !candle_gguf_writer_copy_kv(w, src);
    int split = 0;
    for (int64_t i = 0; ok && i < candle_gguf_n_tensors(src); i++) {
        const candle_gguf_tensor_info *t = candle_gguf_tensor(src, i);
        size_t nl = strlen(t->name);
        const char *tail = "_exps.weight";
        if (t->rank == 3 && nl > strlen(tail) && !strcmp(t->name + nl - strlen(tail), tail)) {
            size_t part = t->size / (size_t)t->shape[0];
            for (int64_t e = 0; ok && e < t->shape[0]; e++) {
                char pn[128];
                snprintf(pn, sizeof pn, "%.*s.%lld.weight", (int)(nl - strlen(tail)), t->name, (long long)e);
                ok = !candle_gguf_writer_add_tensor(w, pn, t->dtype, 2, t->shape + 1,
                                                    bytes + t->offset + (size_t)e * part);
            }
            split++;
        } else {
            ok = !candle_gguf_writer_add_tensor(w, t->name, t->dtype, t->rank, t->shape, bytes + t->offset);
        }
    }
    ok = ok && split > 0 && !candle_gguf_writer_write(w, out);
    CHECK_MSG(ok, "%s: splitting %s: %s", name, path, candle_last_errmsg());
    candle_gguf_writer_free(w);
    candle_gguf_close(src);
    free(bytes);
    float *q = ok ? run_path(out, g) : NULL;
    if (q) {
        double e = test_nmse_f32(q, ref, (size_t)(N_TOK * g->n_vocab));
        printf("%-10s %s, experts split into %d x n_expert tensors: NMSE vs stacked %.2e\n", name, tname,
               split, e);
        CHECK_MSG(e < 1e-6, "%s: split %s GGUF NMSE %.3g", name, tname, e);
    }
    free(q);
    unlink(out);
}

/* candle quantize DIR -> GGUF, reloaded: the experts' tensors survive. */
static void check_quantized(const char *name, const char *dir, const golden *g, const float *hf,
                            candle_ftype ft, const char *tname, double bound) {
    char out[512];
    snprintf(out, sizeof out, "%s/candle-moe-%s-%s-%d.gguf", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             name, tname, (int)getpid());
    candle_status s = candle_quantize_file(dir, out, ft, NULL);
    CHECK_MSG(!s, "quantize %s %s: %s", dir, tname, candle_last_errmsg());
    candle_weights *w = NULL;
    if (!s) {
        /* written stacked, as llama.cpp's converter writes experts */
        CHECK(!candle_weights_open(&w, out, NULL));
        int64_t i = w ? candle_weights_find_tensor(w, "blk.0.ffn_up_exps.weight") : -1;
        CHECK_MSG(i >= 0 && candle_weights_tensor(w, i)->rank == 3, "%s %s: no stacked experts", name, tname);
        CHECK_MSG(w && candle_weights_find_tensor(w, "blk.0.ffn_up.0.weight") < 0, "%s: per-expert tensors", name);
        candle_weights_close(w);
    }
    float *q = s ? NULL : run_path(out, g);
    if (q) {
        double e = test_nmse_f32(q, hf, (size_t)(N_TOK * g->n_vocab));
        printf("%-10s candle quantize DIR %s: NMSE vs directory %.2e\n", name, tname, e);
        CHECK_MSG(e < bound, "%s: %s GGUF NMSE %.3g", name, tname, e);
        if (ft != CANDLE_FTYPE_MOSTLY_Q4_0) check_split(name, tname, out, g, q);
    }
    free(q);
    unlink(out);
}

static void check_model(const char *name) {
    char rel[128], dir[1024];
    snprintf(rel, sizeof rel, "tests/data/hf/%s", name);
    test_path(rel, dir, sizeof dir);
    golden g = {0};
    candle_model *m = NULL;
    if (!read_golden(dir, &g)) return;
    if (candle_model_load(&m, dir, NULL)) {
        CHECK_MSG(false, "%s: %s", dir, candle_last_errmsg());
        free(g.logits);
        return;
    }
    const candle_model_config *c = candle_model_get_config(m);
    CHECK_MSG(c->n_expert == 4 && c->n_expert_used == 2, "%s: %lld experts, %lld used", name,
              (long long)c->n_expert, (long long)c->n_expert_used);
    /* the directory's per-expert tensors are presented stacked */
    const candle_weights *w = candle_model_weights(m);
    int64_t ie = candle_weights_find_tensor(w, "blk.0.ffn_gate_exps.weight");
    CHECK_MSG(ie >= 0 && candle_weights_tensor(w, ie)->rank == 3 &&
                  candle_weights_tensor(w, ie)->shape[0] == 4,
              "%s: no stacked blk.0.ffn_gate_exps.weight", name);
    size_t n = (size_t)(N_TOK * g.n_vocab);
    float *pre = run(m, &g, false), *dec = run(m, &g, true);
    if (pre && dec) {
        double e = test_nmse_f32(pre, g.logits, n), ed = test_nmse_f32(dec, g.logits, n);
        printf("%-10s NMSE vs transformers: prefill %.2e, decode %.2e\n", name, e, ed);
        CHECK_MSG(e < MAX_NMSE, "%s: prefill NMSE %.3g", name, e);
        CHECK_MSG(ed < MAX_NMSE, "%s: decode NMSE %.3g", name, ed);
        check_batch(name, m, &g, pre);
        check_quantized(name, dir, &g, pre, CANDLE_FTYPE_ALL_F32, "f32", MAX_NMSE);
        /* The tiny random models are sensitive: the dense llama2 / qwen2 folders
         * give Q8_0 1e-3 / 2e-3 and Q4_0 0.26 / 0.19 against their f32 run; a
         * wrong expert (top-1 instead of top-2) moves the logits by 0.3. */
        check_quantized(name, dir, &g, pre, CANDLE_FTYPE_MOSTLY_Q8_0, "q8_0", 3e-2);
        check_quantized(name, dir, &g, pre, CANDLE_FTYPE_MOSTLY_Q4_0, "q4_0", 0.6);
    }
    free(pre);
    free(dec);
    candle_model_free(m);
    free(g.logits);
}

static bool write_file(const char *path, const char *a, size_t na, const char *b, size_t nb) {
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(a, 1, na, f) == na && fwrite(b, 1, nb, f) == nb;
    if (f) ok = fclose(f) == 0 && ok;
    return ok;
}

/* A copy of the mixtral folder with config.json's `field` set to `value`
 * (field NULL: unchanged) and the tensor name `from` in the safetensors
 * header renamed to `to` (same length; NULL: none), the safetensors taken
 * from the folder weights_of: loading it must fail with a message
 * containing `want`. */
static void check_refused_with(const char *weights_of, const char *field, const char *value,
                               const char *from, const char *to, const char *want) {
    char src[1024], wsrc[1024], rel[128], dir[512], path[1200];
    test_path("tests/data/hf/mixtral", src, sizeof src);
    snprintf(rel, sizeof rel, "tests/data/hf/%s", weights_of);
    test_path(rel, wsrc, sizeof wsrc);
    snprintf(dir, sizeof dir, "%s/candle-moe-bad-%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    if (mkdir(dir, 0700) && errno != EEXIST) {
        CHECK_MSG(false, "mkdir %s", dir);
        return;
    }
    size_t ncfg, nst;
    snprintf(path, sizeof path, "%s/config.json", src);
    char *cfg = test_read_file(path, &ncfg);
    snprintf(path, sizeof path, "%s/model.safetensors", wsrc);
    char *st = test_read_file(path, &nst);
    CHECK(cfg && st);
    char key[64];
    snprintf(key, sizeof key, "\"%s\":", field ? field : "model_type");
    char *at = cfg ? strstr(cfg, key) : NULL;
    CHECK_MSG(at != NULL, "config.json has no %s", key);
    if (at && st && from) {
        char *hit = memmem(st, nst < 65536 ? nst : 65536, from, strlen(from));
        CHECK_MSG(hit && strlen(to) == strlen(from), "safetensors header has no %s", from);
        if (hit) memcpy(hit, to, strlen(to));
    }
    bool ok = at && st;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ok = ok && write_file(path, st, nst, "", 0);
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (ok && field) {
        char *end = strpbrk(at + strlen(key), ",\n}");
        char mid[128];
        int nm = snprintf(mid, sizeof mid, "%s %s", key, value);
        FILE *f = fopen(path, "wb");
        ok = f && fwrite(cfg, 1, (size_t)(at - cfg), f) && fwrite(mid, 1, (size_t)nm, f) &&
             fputs(end, f) >= 0;
        if (f) ok = fclose(f) == 0 && ok;
    } else if (ok) {
        ok = write_file(path, cfg, ncfg, "", 0);
    }
    CHECK_MSG(ok, "writing %s", dir);
    free(cfg);
    free(st);
    candle_model *m = NULL;
    candle_status s = ok ? candle_model_load(&m, dir, NULL) : CANDLE_OK;
    CHECK_MSG(!ok || s != CANDLE_OK, "%s %s: loaded", field, value);
    CHECK_MSG(s == CANDLE_OK || strstr(candle_last_errmsg(), want), "%s: message '%s' lacks '%s'",
              dir, candle_last_errmsg(), want);
    if (s) printf("refused (%s = %s, %s): %s\n", field ? field : "-", value ? value : "-",
                  from ? "a renamed tensor" : "-", candle_last_errmsg());
    candle_model_free(m);
    unlink(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    rmdir(dir);
}

static void check_refused(const char *field, const char *value, const char *from, const char *to,
                          const char *want) {
    check_refused_with("mixtral", field, value, from, to, want);
}

int main(void) {
    static const char *const models[] = {"mixtral", "qwen3-moe", "qwen2-moe"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) check_model(models[i]);
    check_refused("num_experts_per_tok", "5", NULL, NULL, "expert_used_count");
    check_refused("num_experts_per_tok", "0", NULL, NULL, "expert_used_count");
    check_refused("num_local_experts", "5", NULL, NULL, "block_sparse_moe.gate.weight");
    check_refused("num_local_experts", "null", NULL, NULL, "expert_count");
    /* expert 3's w1 of layer 1 stored under expert 9's name: missing */
    check_refused(NULL, NULL, "layers.1.block_sparse_moe.experts.3.w1", "layers.1.block_sparse_moe.experts.9.w1",
                  "missing tensor 'model.layers.1.block_sparse_moe.experts.3.w1.weight'");
    /* Mixtral's config over a dense llama's weights (same attention shape):
     * a llama with experts has a router in every layer */
    check_refused_with("llama2", NULL, NULL, NULL, NULL, "layer 0 has no router");
    return test_done("test_hf_moe");
}
