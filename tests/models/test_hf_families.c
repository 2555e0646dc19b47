/* The Mistral family (a sliding window in every layer; head_dim apart from
 * hidden / heads), OLMoE (q/k RMSNorm over the whole projection, softmax
 * top-k routing without renormalisation), Granite and GraniteMoE (embedding,
 * residual, attention and logit multipliers; experts stored stacked, gate
 * and up in one tensor) from Hugging Face directories
 * against transformers: tiny random models in tests/data/hf made by
 * scripts/gen_hf_family_goldens.py. Checked per model:
 *   - the 24 prompt tokens' logits at every position, in one prefill and one
 *     token per step, within 1e-5 NMSE of transformers' (golden_logits.bin);
 *   - golden.txt: the top-10 logits at every position within 1e-3, the
 *     top-1 the same, and the 32-token greedy continuation;
 *   - the batch path, with per-session caches and with a paged pool: a
 *     prompt longer than the window in two chunks beside a short one, then
 *     the greedy continuation one token per step; each step's logits those
 *     of the session path (the window of 8 is passed many times over);
 *   - the GGUF `candle quantize` writes from the directory gives the
 *     directory's logits (f32 within 1e-5, Q8_0 within 3e-2), and keeps the
 *     window key. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "candle/batch.h"
#include "candle/candle.h"
#include "candle/kv_pool.h"
#include "core/json-impl.h"
#include "golden.h"
#include "test.h"

#define N_TOK 24
#define MAX_NMSE 1e-5
#define TOL 1e-3 /* top-10 logits, absolute */

#include "hf_golden.h" /* after N_TOK */

/* Sequence a: the prompt as 10 + 14 tokens, then the greedy continuation
 * one token per step; beside it b: 3 prompt tokens, then one per step. Each
 * step's last logits against a session fed the same tokens. paged: through
 * a block pool (the server's path), else the sessions' own caches. */
static void check_batch(const char *name, candle_model *m, const golden_prompt *p, bool paged) {
    int64_t nv = candle_model_get_config(m)->n_vocab, n_ctx = N_TOK + 32;
    int32_t seq[N_TOK + 32];
    memcpy(seq, p->tokens, N_TOK * sizeof *seq);
    memcpy(seq + N_TOK, p->greedy, 32 * sizeof *seq);
    candle_session_params sp = candle_session_default_params();
    sp.n_ctx = n_ctx;
    candle_session *a = NULL, *b = NULL, *ra = NULL, *rb = NULL;
    candle_batch *bt = NULL;
    candle_kv_pool *pool = NULL;
    candle_kv_seq pa = {0}, pb = {0};
    float *la = malloc((size_t)nv * sizeof *la), *lb = malloc((size_t)nv * sizeof *lb);
    float *ea = malloc((size_t)nv * sizeof *ea), *eb = malloc((size_t)nv * sizeof *eb);
    bool ok = la && lb && ea && eb && !candle_session_init(&ra, m, &sp) &&
              !candle_session_init(&rb, m, &sp) && !candle_batch_init(&bt, m, 0);
    if (paged)
        ok = ok && !candle_kv_pool_init(&pool, m, 2 * (n_ctx / CANDLE_KV_BLOCK + 2), CANDLE_DTYPE_F32) &&
             !candle_kv_seq_init(&pa, n_ctx) && !candle_kv_seq_init(&pb, n_ctx);
    else
        ok = ok && !candle_session_init(&a, m, &sp) && !candle_session_init(&b, m, &sp);
    CHECK_MSG(ok, "%s: batch setup: %s", name, candle_last_errmsg());
    /* chunks of a: [0,10) [10,24) then single tokens; of b: [0,3) then single */
    int64_t at = 0, bt_at = 0, steps = 0;
    double worst = 0;
    while (ok && at < n_ctx - 1) {
        int64_t na = at == 0 ? 10 : at == 10 ? N_TOK - 10 : 1;
        int64_t nb = bt_at == 0 ? 3 : 1;
        candle_batch_seq q[2] = {{a, seq + at, na, la, pool, paged ? &pa : NULL, 0},
                                 {b, seq + bt_at, nb, lb, pool, paged ? &pb : NULL, 0}};
        ok = !candle_batch_eval(bt, q, 2);
        CHECK_MSG(ok, "%s: batch step %lld: %s", name, (long long)steps, candle_batch_errmsg(bt));
        ok = ok && !candle_session_eval(ra, seq + at, na, ea, false) &&
             !candle_session_eval(rb, seq + bt_at, nb, eb, false);
        if (!ok) break;
        double e1 = test_nmse_f32(la, ea, (size_t)nv), e2 = test_nmse_f32(lb, eb, (size_t)nv);
        if (e1 > worst) worst = e1;
        if (e2 > worst) worst = e2;
        at += na;
        bt_at += nb;
        steps++;
    }
    printf("%-12s batched (%s), %lld steps to position %lld: worst NMSE vs session %.2e\n", name,
           paged ? "paged pool" : "sessions", (long long)steps, (long long)at, worst);
    CHECK_MSG(ok && worst < 1e-9, "%s: batch (%s) NMSE %.3g", name, paged ? "paged" : "sessions", worst);
    if (paged) {
        candle_kv_seq_free(pool, &pa);
        candle_kv_seq_free(pool, &pb);
    }
    candle_kv_pool_free(pool);
    candle_batch_free(bt);
    candle_session_free(a);
    candle_session_free(b);
    candle_session_free(ra);
    candle_session_free(rb);
    free(la);
    free(lb);
    free(ea);
    free(eb);
}

/* candle quantize DIR -> GGUF of type ft, reloaded. */
static void check_gguf(const char *name, const char *dir, const golden *g, const float *ref,
                       int64_t n_swa, candle_ftype ft, const char *tname, double bound) {
    char out[512];
    snprintf(out, sizeof out, "%s/candle-fam-%s-%s-%d.gguf", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             name, tname, (int)getpid());
    candle_status s = candle_quantize_file(dir, out, ft, NULL);
    CHECK_MSG(!s, "quantize %s: %s", dir, candle_last_errmsg());
    candle_model *m = NULL;
    if (!s && candle_model_load(&m, out, NULL)) CHECK_MSG(false, "%s: %s", out, candle_last_errmsg());
    if (m) {
        const candle_model_config *c = candle_model_get_config(m);
        CHECK_MSG(c->n_swa == n_swa, "%s GGUF: window %lld, want %lld", name, (long long)c->n_swa,
                  (long long)n_swa);
        float *q = run(m, g, false);
        if (q) {
            double e = test_nmse_f32(q, ref, (size_t)(N_TOK * g->n_vocab));
            printf("%-12s candle quantize DIR %s: NMSE vs directory %.2e\n", name, tname, e);
            CHECK_MSG(e < bound, "%s: %s GGUF NMSE %.3g", name, tname, e);
        }
        free(q);
        candle_model_free(m);
    }
    unlink(out);
}

typedef struct expect {
    const char *name;
    int64_t n_swa, head_dim, n_expert, n_expert_used;
} expect;

static void check_model(const expect *x) {
    char rel[128], dir[1024], path[1200];
    snprintf(rel, sizeof rel, "tests/data/hf/%s", x->name);
    test_path(rel, dir, sizeof dir);
    golden g = {0};
    static golden_prompt gp;
    snprintf(path, sizeof path, "%s/golden.txt", dir);
    if (!read_golden(dir, &g)) return;
    bool have_txt = golden_read(path, &gp, 1) == 1 && gp.n == N_TOK && gp.n_greedy == 32;
    CHECK_MSG(have_txt, "%s: unreadable golden.txt", x->name);
    candle_model *m = NULL;
    if (candle_model_load(&m, dir, NULL)) {
        CHECK_MSG(false, "%s: %s", dir, candle_last_errmsg());
        free(g.logits);
        return;
    }
    const candle_model_config *c = candle_model_get_config(m);
    CHECK_MSG(c->n_swa == x->n_swa && c->head_dim == x->head_dim && c->n_expert == x->n_expert &&
                  c->n_expert_used == x->n_expert_used &&
                  (!c->n_expert || c->expert_norm == !strcmp(x->name, "granitemoe")),
              "%s: window %lld, head_dim %lld, %lld experts, %lld used, norm %d", x->name,
              (long long)c->n_swa, (long long)c->head_dim, (long long)c->n_expert,
              (long long)c->n_expert_used, (int)c->expert_norm);
    if (c->n_expert) {
        /* GraniteMoE's input_linear [6, 64, 64] split into gate and up [6, 32, 64] */
        const candle_weights *w = candle_model_weights(m);
        int64_t ig = candle_weights_find_tensor(w, "blk.1.ffn_gate_exps.weight");
        int64_t iu = candle_weights_find_tensor(w, "blk.1.ffn_up_exps.weight");
        CHECK_MSG(ig >= 0 && iu >= 0 && candle_weights_tensor(w, ig)->rank == 3 &&
                      candle_weights_tensor(w, ig)->shape[0] == x->n_expert &&
                      candle_weights_tensor(w, iu)->shape[1] == c->n_ff_exp &&
                      candle_weights_find_tensor(w, "blk.1.ffn_gate_up_exps.weight") < 0,
                  "%s: no stacked gate / up experts", x->name);
    }
    size_t n = (size_t)(N_TOK * g.n_vocab);
    float *pre = run(m, &g, false), *dec = run(m, &g, true);
    if (pre && dec) {
        double e = test_nmse_f32(pre, g.logits, n), ed = test_nmse_f32(dec, g.logits, n);
        printf("%-12s NMSE vs transformers: prefill %.2e, decode %.2e\n", x->name, e, ed);
        CHECK_MSG(e < MAX_NMSE, "%s: prefill NMSE %.3g", x->name, e);
        CHECK_MSG(ed < MAX_NMSE, "%s: decode NMSE %.3g", x->name, ed);
        check_gguf(x->name, dir, &g, pre, x->n_swa, CANDLE_FTYPE_ALL_F32, "f32", MAX_NMSE);
        /* the tiny random models are sensitive: dense llama2 / qwen2 folders
         * give 1e-3 / 2e-3 at Q8_0 (notes/issue-23.md) */
        check_gguf(x->name, dir, &g, pre, x->n_swa, CANDLE_FTYPE_MOSTLY_Q8_0, "q8_0", 3e-2);
    }
    if (have_txt) {
        candle_session *s = NULL;
        candle_session_params sp = candle_session_default_params();
        sp.n_ctx = N_TOK + 32;
        CHECK(!candle_session_init(&s, m, &sp));
        if (s) {
            double worst = check_golden(s, c->n_vocab, &gp, TOL, 32);
            printf("%-12s top-10 logits: worst abs diff %.2e\n", x->name, worst);
        }
        candle_session_free(s);
        check_batch(x->name, m, &gp, false);
        check_batch(x->name, m, &gp, true);
    }
    free(pre);
    free(dec);
    candle_model_free(m);
    free(g.logits);
}

/* A copy of folder `name` with config.json's "field": value set to `value`
 * must be refused with a message containing `want`. */
static void check_refused(const char *name, const char *field, const char *value, const char *want) {
    char rel[128], src[1024], dir[512], path[1200];
    snprintf(rel, sizeof rel, "tests/data/hf/%s", name);
    test_path(rel, src, sizeof src);
    snprintf(dir, sizeof dir, "%s/candle-fam-bad-%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    CHECK_MSG(!mkdir(dir, 0700), "mkdir %s", dir);
    size_t ncfg, nst;
    snprintf(path, sizeof path, "%s/config.json", src);
    char *cfg = test_read_file(path, &ncfg);
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    char *st = test_read_file(path, &nst);
    char key[64];
    snprintf(key, sizeof key, "\"%s\":", field);
    char *at = cfg ? strstr(cfg, key) : NULL;
    CHECK_MSG(at && st, "%s: config.json has no %s", name, key);
    bool ok = false;
    if (at && st) {
        char *end = strpbrk(at + strlen(key), ",\n}");
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        FILE *f = fopen(path, "wb");
        ok = f && fwrite(st, 1, nst, f) == nst;
        if (f) ok = fclose(f) == 0 && ok;
        snprintf(path, sizeof path, "%s/config.json", dir);
        f = ok ? fopen(path, "wb") : NULL;
        ok = f && fwrite(cfg, 1, (size_t)(at - cfg), f) == (size_t)(at - cfg) &&
             fprintf(f, "%s %s", key, value) > 0 && fputs(end, f) >= 0;
        if (f) ok = fclose(f) == 0 && ok;
    }
    free(cfg);
    free(st);
    candle_model *m = NULL;
    candle_status s = ok ? candle_model_load(&m, dir, NULL) : CANDLE_OK;
    CHECK_MSG(ok && s != CANDLE_OK, "%s with %s %s: loaded", name, field, value);
    CHECK_MSG(s == CANDLE_OK || strstr(candle_last_errmsg(), want), "%s: message '%s' lacks '%s'", name,
              candle_last_errmsg(), want);
    if (s) printf("refused (%s, %s = %s): %s\n", name, field, value, candle_last_errmsg());
    candle_model_free(m);
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    rmdir(dir);
}

int main(void) {
    static const expect models[] = {
        {"mistral", 8, 16, 0, 0},
        {"mistral-nemo", 0, 32, 0, 0},
        {"olmoe", 0, 16, 8, 3},
        {"granite", 0, 16, 0, 0},
        {"granitemoe", 0, 16, 6, 2},
    };
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) check_model(&models[i]);
    check_refused("olmoe", "clip_qkv", "8.0", "clip_qkv");
    check_refused("olmoe", "num_experts_per_tok", "9", "expert_used_count");
    /* the experts' width against input_linear's halves */
    check_refused("granitemoe", "intermediate_size", "16", "ffn_gate_exps");
    check_refused("granitemoe", "logits_scaling", "0", "logit_scale");
    return test_done("test_hf_families");
}
