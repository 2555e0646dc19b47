/* GPTQ and AWQ checkpoints from Hugging Face directories (tests/data/gptq,
 * made by scripts/gen_gptq_awq_models.py: tiny random llamas quantized in
 * each variant, written in the documented packings). Checked per variant:
 *   - every linear's weight, as repacked at load, dequantizes to the script's
 *     reference f32(scale) * (q - z) bit for bit (FNV-1a of all of them in
 *     golden.json; layer 0's down_proj compared whole with
 *     reference_dequant.bin), and is of the block type expected (Q4_0 for
 *     symmetric 4 bits, Q5_0 for asymmetric 4 bits, Q8_0 for symmetric 8
 *     bits, f32 where no block type holds the values exactly), and the forms
 *     the model takes (inputs sorted by group; asymmetric 4 bits as Q4_0 plus
 *     a correction per group) hold the same values bit for bit;
 *   - on the reference kernels (exact products) the logits at every prompt
 *     position are transformers' on the dequantized weights within 1e-5
 *     NMSE, the top-10 within 1e-3 and the 32-token greedy continuation the
 *     same;
 *   - on the default (integer) kernels, prefill and one token per step, the
 *     logits within the bound of quantized activations;
 *   - batched rows (candle_batch_eval, prefills of 5 and 3 then a token
 *     each) give the session's logits;
 *   - a malformed or unsupported quantization_config, and tensors whose
 *     shapes disagree with it, are refused with a message naming the field
 *     or tensor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "candle/candle.h"
#include "core/json-impl.h"
#include "golden.h"
#include "test.h"

#define N_TOK 24
#define MAX_NMSE 1e-5
#define TOL 1e-3
/* the integer kernels quantize activations to q8 per 32 (as llama.cpp):
 * these tiny random models' logits move by NMSE ~2e-3 with them, the same
 * with the exact Q8_0 weights of the 8-bit variant as with 4-bit ones */
#define MAX_NMSE_INT 5e-3

#include "hf_golden.h"

static uint64_t fnv1a(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* The f32 values of a loaded weight [out, in] (malloc'd). */
static float *weight_f32(candle_tensor *t) {
    const candle_dtype_traits *tr = candle_dtype_info(t->dtype);
    int64_t n = candle_tensor_numel(t);
    size_t nb = candle_tensor_nbytes(t);
    void *raw = malloc(nb);
    float *f = malloc((size_t)n * sizeof *f);
    if (!raw || !f || candle_tensor_get_bytes(t, 0, raw, nb) || !tr->to_f32) {
        free(raw);
        free(f);
        return NULL;
    }
    tr->to_f32(raw, f, n);
    free(raw);
    return f;
}

/* The fast forms of linear tname hold the values of its plain form f
 * [out, in] bit for bit. candle_weights_load_linear: in the same order, or
 * with column j holding input order[j] as a block type (act-order); never
 * a split form. candle_weights_load_linear_split: the same, a 4-bit linear
 * whose 128-input blocks lie in one group each as q4_z128, and another
 * asymmetric 4-bit linear as Q4_0 whose values plus its correction
 * corr[o][j / group] are f's. Bit 0 of the result: it came sorted; bit 1:
 * split; bit 2: q4_z128. */
static int check_linear_form(const char *name, const candle_weights *w, candle_ctx *ctx, const char *tname,
                             const candle_tensor *plain, const float *f) {
    candle_tensor *order = NULL, *corr = NULL, *t = candle_weights_load_linear(w, ctx, tname, &order);
    CHECK_MSG(t, "%s: %s: %s", name, tname, candle_errmsg(ctx));
    if (!t) return 0;
    CHECK_MSG(order || t->dtype == plain->dtype, "%s: %s: the fast form is %s, the plain %s", name, tname,
              candle_dtype_name(t->dtype), candle_dtype_name(plain->dtype));
    int64_t group = 0;
    t = candle_weights_load_linear_split(w, ctx, tname, &order, &corr, &group);
    CHECK_MSG(t, "%s: %s: %s", name, tname, candle_errmsg(ctx));
    if (!t) return 0;
    int64_t out = t->shape[0], in = t->shape[1];
    bool z128 = t->dtype == CANDLE_DTYPE_Q4_Z128 && !corr;
    if (!order && !corr && !z128) {
        CHECK_MSG(t->dtype == plain->dtype, "%s: %s: the split form is %s, the plain %s", name, tname,
                  candle_dtype_name(t->dtype), candle_dtype_name(plain->dtype));
        return 0;
    }
    CHECK_MSG((t->dtype == CANDLE_DTYPE_Q4_0 || z128) &&
                  (!order || (order->dtype == CANDLE_DTYPE_I32 && order->shape[0] == in)),
              "%s: %s: fast form %s with an order of %lld, want q4_0 or q4_z128 and %lld", name, tname,
              candle_dtype_name(t->dtype), order ? (long long)order->shape[0] : -1LL, (long long)in);
    CHECK_MSG(!corr || (corr->dtype == CANDLE_DTYPE_F32 && corr->rank == 2 && corr->shape[0] == out && group > 0 &&
                        group % 32 == 0 && corr->shape[1] * group == in),
              "%s: %s: correction %s [%lld, %lld] of groups of %lld for [%lld, %lld]", name, tname,
              corr ? candle_dtype_name(corr->dtype) : "-", corr ? (long long)corr->shape[0] : -1LL,
              corr && corr->rank > 1 ? (long long)corr->shape[1] : -1LL, (long long)group, (long long)out,
              (long long)in);
    int32_t *ord = malloc((size_t)in * sizeof *ord);
    float *g = weight_f32(t), *c = corr ? weight_f32(corr) : NULL;
    bool perm = ord && g && (!corr || c);
    if (perm && order) perm = !candle_tensor_get_bytes(order, 0, ord, (size_t)in * sizeof *ord);
    for (int64_t j = 0; perm && !order && j < in; j++) ord[j] = (int32_t)j;
    char *seen = calloc((size_t)in, 1);
    for (int64_t j = 0; perm && seen && j < in; j++) perm = ord[j] >= 0 && ord[j] < in && !seen[ord[j]]++;
    CHECK_MSG(perm && seen, "%s: %s: the order is no permutation of the inputs", name, tname);
    int64_t bad = 0;
    for (int64_t o = 0; perm && o < out; o++)
        for (int64_t j = 0; j < in; j++) {
            /* s * (q - 8) + s * (8 - z) is s * (q - z) exactly in f32 */
            float v = c ? g[o * in + j] + c[o * (in / group) + j / group] : g[o * in + j];
            bad += memcmp(&v, &f[o * in + ord[j]], sizeof *f) != 0;
        }
    CHECK_MSG(!bad, "%s: %s: %lld values of the fast form differ from the plain form's", name, tname, (long long)bad);
    free(seen);
    free(ord);
    free(g);
    free(c);
    return (order ? 1 : 0) | (corr ? 2 : 0) | (z128 ? 4 : 0);
}

static void check_dequant(const char *name, const char *dir) {
    char path[1200];
    size_t n;
    snprintf(path, sizeof path, "%s/golden.json", dir);
    char *text = test_read_file(path, &n);
    json_doc *d = NULL;
    CHECK_MSG(text && !json_parse(&d, text, n, path, NULL), "%s: golden.json", name);
    const json_value *hashes = json_get(json_root(d), "dequant_fnv1a64");
    const json_value *types = json_get(json_root(d), "candle_type");
    candle_weights *w = NULL;
    CHECK_MSG(!candle_weights_open(&w, dir, NULL), "%s: %s", name, candle_last_errmsg());
    candle_ctx *ctx = NULL;
    CHECK(!candle_ctx_init(&ctx, NULL));
    int checked = 0, sorted = 0, split = 0, z128 = 0;
    char type[16] = "?";
    for (size_t i = 0; w && ctx && hashes && i < hashes->n; i++) {
        const char *tn, *want, *ty;
        size_t len, wl, tl;
        json_as_str(json_obj_key(hashes, i), &tn, &len);
        json_as_str(json_obj_val(hashes, i), &want, &wl);
        char tname[128];
        snprintf(tname, sizeof tname, "%.*s", (int)len, tn);
        CHECK_MSG(json_as_str(json_get(types, tname), &ty, &tl), "%s: no type for %s", name, tname);
        snprintf(type, sizeof type, "%.*s", (int)tl, ty);
        candle_tensor *t = candle_weights_load_tensor(w, ctx, tname);
        CHECK_MSG(t, "%s: %s: %s", name, tname, candle_errmsg(ctx));
        if (!t) continue;
        CHECK_MSG(!strcmp(candle_dtype_name(t->dtype), type), "%s: %s loads as %s, want %s", name, tname,
                  candle_dtype_name(t->dtype), type);
        float *f = weight_f32(t);
        CHECK_MSG(f, "%s: %s: no f32", name, tname);
        if (!f) continue;
        size_t nb = (size_t)candle_tensor_numel(t) * sizeof *f;
        char got[24];
        snprintf(got, sizeof got, "%016llx", (unsigned long long)fnv1a(f, nb));
        CHECK_MSG(wl == 16 && !memcmp(got, want, 16), "%s: %s dequantizes to FNV %s, reference %.*s", name, tname,
                  got, (int)wl, want);
        int form = check_linear_form(name, w, ctx, tname, t, f);
        sorted += form & 1;
        split += form >> 1 & 1;
        z128 += form >> 2;
        if (!strcmp(tname, "blk.0.ffn_down.weight")) {
            size_t nr;
            snprintf(path, sizeof path, "%s/reference_dequant.bin", dir);
            float *ref = (float *)test_read_file(path, &nr);
            CHECK_MSG(ref && nr == nb && !memcmp(ref, f, nb), "%s: %s differs from reference_dequant.bin", name,
                      tname);
            free(ref);
        }
        free(f);
        checked++;
    }
    CHECK_MSG(checked == 14, "%s: %d linears checked, want 14", name, checked);
    bool act_order = strstr(name, "actorder") != NULL;
    CHECK_MSG(sorted == (act_order ? 14 : 0), "%s: %d linears load with their inputs sorted, want %d", name, sorted,
              act_order ? 14 : 0);
    /* the model takes 4-bit groups of 128 (or per channel: every input
     * count here is a multiple of 128) as q4_z128, other asymmetric 4-bit as
     * Q4_0 plus a correction per group (all of these variants' groups are
     * whole blocks of one size) */
    bool four = strstr(name, "4bit") != NULL, z = four && (strstr(name, "g128") || strstr(name, "perchannel"));
    bool asym4 = !z && (!strcmp(type, "q5_0") || strstr(name, "actorder-asym"));
    CHECK_MSG(z128 == (z ? 14 : 0), "%s: %d linears load as q4_z128, want %d", name, z128, z ? 14 : 0);
    CHECK_MSG(split == (asym4 ? 14 : 0), "%s: %d linears split into q4_0 and a correction, want %d", name, split,
              asym4 ? 14 : 0);
    printf("%-26s %d linears dequantize bit-exactly (as %s; %d with inputs sorted by group; the model's form: "
           "%s%s)\n", name, checked, type, sorted, sorted ? "sorted, " : "",
           z ? "q4_z128" : asym4 ? "q4_0 + f32 correction per group" : sorted ? "q4_0" : type);
    candle_ctx_free(ctx);
    candle_weights_close(w);
    json_free(d);
    free(text);
}

static candle_model *load_with(const char *dir, bool reference, candle_backend **be) {
    candle_cpu_params cp = candle_cpu_default_params();
    cp.reference_only = reference;
    *be = NULL;
    CHECK(!candle_backend_cpu_init_params(be, &cp));
    candle_model_params mp = candle_model_default_params();
    mp.backend = *be;
    candle_model *m = NULL;
    CHECK_MSG(!candle_model_load(&m, dir, &mp), "%s: %s", dir, candle_last_errmsg());
    return m;
}

/* Two sessions through candle_batch_eval (the batched step's graph): a
 * prefill of 5 beside one of 3, then one token each, against the session
 * path's logits at those positions (pre: the prefill's [N_TOK, n_vocab]). */
static void check_batch(const char *name, candle_model *m, const golden *g, const float *pre, bool ref) {
    int64_t nv = g->n_vocab;
    candle_session_params sp = candle_session_default_params();
    sp.n_ctx = N_TOK;
    candle_session *a = NULL, *b = NULL;
    candle_batch *bt = NULL;
    float *la = malloc((size_t)(6 * nv) * sizeof *la), *lb = malloc((size_t)(4 * nv) * sizeof *lb);
    bool ok = la && lb && !candle_session_init(&a, m, &sp) && !candle_session_init(&b, m, &sp) &&
              !candle_batch_init(&bt, m, 0);
    candle_batch_seq q[2] = {{a, g->tokens, 5, la, NULL, NULL, 5}, {b, g->tokens, 3, lb, NULL, NULL, 3}};
    ok = ok && !candle_batch_eval(bt, q, 2);
    q[0] = (candle_batch_seq){a, g->tokens + 5, 1, la + 5 * nv, NULL, NULL, 0};
    q[1] = (candle_batch_seq){b, g->tokens + 3, 1, lb + 3 * nv, NULL, NULL, 0};
    ok = ok && !candle_batch_eval(bt, q, 2);
    CHECK_MSG(ok, "%s: batch: %s", name, bt ? candle_batch_errmsg(bt) : candle_last_errmsg());
    if (ok) {
        double ea = test_nmse_f32(la, pre, (size_t)(6 * nv)), eb = test_nmse_f32(lb, pre, (size_t)(4 * nv));
        double eh = test_nmse_f32(la, g->logits, (size_t)(6 * nv));
        printf("%-26s %s kernels: batched rows NMSE vs the session %.2e / %.2e, vs transformers %.2e\n", name,
               ref ? "reference" : "default", ea, eb, eh);
        /* the rows of a batch run the products of a prefill's row count */
        double bound = ref ? 1e-9 : MAX_NMSE_INT;
        CHECK_MSG(ea < bound && eb < bound && eh < (ref ? MAX_NMSE : MAX_NMSE_INT), "%s: batch NMSE %.3g / %.3g / %.3g",
                  name, ea, eb, eh);
    }
    candle_batch_free(bt);
    candle_session_free(a);
    candle_session_free(b);
    free(la);
    free(lb);
}

static void check_model(const char *name) {
    char rel[128], dir[1024], path[1200];
    snprintf(rel, sizeof rel, "tests/data/gptq/%s", name);
    test_path(rel, dir, sizeof dir);
    golden g = {0};
    static golden_prompt gp;
    if (!read_golden(dir, &g)) return;
    snprintf(path, sizeof path, "%s/golden.txt", dir);
    bool have_txt = golden_read(path, &gp, 1) == 1 && gp.n == N_TOK && gp.n_greedy == 32;
    CHECK_MSG(have_txt, "%s: unreadable golden.txt", name);
    check_dequant(name, dir);
    size_t n = (size_t)(N_TOK * g.n_vocab);
    for (int ref = 1; ref >= 0; ref--) {
        candle_backend *be = NULL;
        candle_model *m = load_with(dir, ref, &be);
        if (!m) {
            candle_backend_free(be);
            continue;
        }
        float *pre = run(m, &g, false), *dec = run(m, &g, true);
        if (pre && dec) {
            double e = test_nmse_f32(pre, g.logits, n), ed = test_nmse_f32(dec, g.logits, n), bound = ref ? MAX_NMSE : MAX_NMSE_INT;
            printf("%-26s %s kernels: NMSE vs transformers prefill %.2e, decode %.2e\n", name,
                   ref ? "reference" : "default", e, ed);
            CHECK_MSG(e < bound && ed < bound, "%s (%s kernels): NMSE %.3g / %.3g", name, ref ? "reference" : "default",
                      e, ed);
        }
        if (pre) check_batch(name, m, &g, pre, ref);
        if (have_txt && ref) {
            candle_session *s = NULL;
            candle_session_params sp = candle_session_default_params();
            sp.n_ctx = N_TOK + 32;
            CHECK(!candle_session_init(&s, m, &sp));
            /* exact products: transformers' top-10 and greedy tokens (the
             * integer kernels' activation rounding moves these tiny random
             * models' logits by ~0.3, past their greedy margins) */
            if (s) {
                double worst = check_golden(s, candle_model_get_config(m)->n_vocab, &gp, TOL, 32);
                printf("%-26s reference kernels: top-10 logits worst abs diff %.2e\n", name, worst);
            }
            candle_session_free(s);
        }
        free(pre);
        free(dec);
        candle_model_free(m);
        candle_backend_free(be);
    }
    free(g.logits);
}

/* `candle quantize` from the directory: to the type its linears already
 * are exactly (Q4_0 for 4-bit symmetric GPTQ) the 14 linears are copied as
 * they are; to another, converted or requantized. The embeddings and the
 * output (f32 here) are quantized either way, so on the reference kernels
 * the logits are within MAX_NMSE_INT of transformers' (measured: 1.4e-3 to
 * Q4_0 from 4-bit, 2e-3 to Q8_0 from 4- or 8-bit), not the directory's. */
static void check_quantize(const char *name, candle_ftype ft, bool exact) {
    char rel[128], dir[1024], out[1200];
    snprintf(rel, sizeof rel, "tests/data/gptq/%s", name);
    test_path(rel, dir, sizeof dir);
    golden g = {0};
    if (!read_golden(dir, &g)) return;
    snprintf(out, sizeof out, "/tmp/candle-gptq-%d-%s.gguf", (int)getpid(), name);
    candle_quantize_params qp = candle_quantize_default_params();
    qp.n_threads = 1;
    qp.allow_requantize = true;
    candle_quantize_stats st = {0};
    qp.stats = &st;
    CHECK_MSG(!candle_quantize_file(dir, out, ft, &qp), "%s -> %s: %s", name, candle_ftype_name(ft),
              candle_last_errmsg());
    candle_backend *b1 = NULL, *b2 = NULL;
    candle_model *md = load_with(dir, true, &b1), *mq = load_with(out, true, &b2);
    float *ld = md ? run(md, &g, false) : NULL, *lq = mq ? run(mq, &g, false) : NULL;
    size_t n = (size_t)(N_TOK * g.n_vocab);
    if (ld && lq) {
        double e = test_nmse_f32(lq, g.logits, n), ed = test_nmse_f32(lq, ld, n);
        printf("%-26s quantized to %s: %lld copied, %lld requantized; NMSE vs transformers %.2e, vs the "
               "directory %.2e\n", name, candle_ftype_name(ft), (long long)st.n_copied,
               (long long)st.n_requantized, e, ed);
        CHECK_MSG(!exact || (st.n_requantized == 0 && st.n_copied >= 14), "%s -> %s: %lld copied, %lld requantized",
                  name, candle_ftype_name(ft), (long long)st.n_copied, (long long)st.n_requantized);
        CHECK_MSG(e < MAX_NMSE_INT, "%s -> %s: NMSE %.3g", name, candle_ftype_name(ft), e);
    }
    free(ld);
    free(lq);
    candle_model_free(md);
    candle_model_free(mq);
    candle_backend_free(b1);
    candle_backend_free(b2);
    free(g.logits);
    unlink(out);
}

/* A copy of folder `name` with the text `from` of config.json replaced by
 * `to` must be refused with a message containing `want`. */
static void check_refused(const char *name, const char *from, const char *to, const char *want) {
    char rel[128], src[1024], dir[512], path[1200];
    snprintf(rel, sizeof rel, "tests/data/gptq/%s", name);
    test_path(rel, src, sizeof src);
    snprintf(dir, sizeof dir, "%s/candle-gptq-bad-%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    CHECK_MSG(!mkdir(dir, 0700), "mkdir %s", dir);
    size_t ncfg, nst;
    snprintf(path, sizeof path, "%s/config.json", src);
    char *cfg = test_read_file(path, &ncfg);
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    char *st = test_read_file(path, &nst);
    char *at = cfg ? strstr(cfg, from) : NULL;
    CHECK_MSG(at && st, "%s: config.json has no '%s'", name, from);
    bool ok = false;
    if (at && st) {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        FILE *f = fopen(path, "wb");
        ok = f && fwrite(st, 1, nst, f) == nst;
        if (f) ok = fclose(f) == 0 && ok;
        snprintf(path, sizeof path, "%s/config.json", dir);
        f = ok ? fopen(path, "wb") : NULL;
        ok = f && fwrite(cfg, 1, (size_t)(at - cfg), f) == (size_t)(at - cfg) && fputs(to, f) >= 0 &&
             fputs(at + strlen(from), f) >= 0;
        if (f) ok = fclose(f) == 0 && ok;
    }
    free(cfg);
    free(st);
    candle_model *m = NULL;
    candle_status s = ok ? candle_model_load(&m, dir, NULL) : CANDLE_OK;
    CHECK_MSG(ok && s != CANDLE_OK, "%s with '%s': loaded", name, to);
    CHECK_MSG(s == CANDLE_OK || strstr(candle_last_errmsg(), want), "%s: message '%s' lacks '%s'", name,
              candle_last_errmsg(), want);
    if (s) printf("refused (%s, %s): %s\n", name, to, candle_last_errmsg());
    candle_model_free(m);
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    rmdir(dir);
}

int main(void) {
    static const char *const variants[] = {
        "gptq-4bit-g128-sym",     "gptq-4bit-g32-asym", "gptq-4bit-perchannel-asym",
        "gptq-4bit-g64-asym-v2",  "gptq-4bit-g32-actorder", "gptq-4bit-g32-actorder-asym", "gptq-8bit-g128-sym",
        "gptq-8bit-g64-asym",     "awq-4bit-g128",      "awq-4bit-g64",
    };
    char dir[1024];
    test_path("tests/data/gptq/gptq-4bit-g128-sym", dir, sizeof dir);
    struct stat sb;
    if (stat(dir, &sb)) {
        printf("SKIP: no %s (scripts/gen_gptq_awq_models.py)\n", dir);
        return 77;
    }
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) check_model(variants[i]);
    check_quantize("gptq-4bit-g128-sym", CANDLE_FTYPE_MOSTLY_Q4_0, true);
    check_quantize("gptq-8bit-g64-asym", CANDLE_FTYPE_MOSTLY_Q8_0, false);
    check_quantize("awq-4bit-g128", CANDLE_FTYPE_MOSTLY_Q8_0, false);
    check_refused("gptq-4bit-g128-sym", "\"bits\": 4", "\"bits\": 3", "quantization_config.bits 3");
    check_refused("gptq-4bit-g128-sym", "\"bits\": 4", "\"bits\": \"4\"", "quantization_config.bits");
    check_refused("gptq-4bit-g128-sym", "\"quant_method\": \"gptq\"", "\"quant_method\": \"bitsandbytes\"",
                  "'bitsandbytes' is not supported");
    check_refused("gptq-4bit-g128-sym", "\"checkpoint_format\": \"gptq\"", "\"checkpoint_format\": \"marlin\"",
                  "checkpoint_format 'marlin'");
    check_refused("gptq-4bit-g128-sym", "\"group_size\": 128", "\"group_size\": 0", "group_size 0");
    /* the zeros and scales have 1 and 2 groups, not 2 and 4 */
    check_refused("gptq-4bit-g128-sym", "\"group_size\": 128", "\"group_size\": 64", "qzeros' is I32");
    check_refused("gptq-4bit-g32-actorder", "\"desc_act\": true", "\"desc_act\": false", "desc_act is false");
    check_refused("awq-4bit-g128", "\"version\": \"gemm\"", "\"version\": \"gemv\"", "version 'gemv'");
    check_refused("awq-4bit-g128", "\"zero_point\": true", "\"zero_point\": false", "zero_point false");
    check_refused("awq-4bit-g128", "\"bits\": 4", "\"bits\": 8", "AWQ: 4");
    check_refused("awq-4bit-g128", "\"quantization_config\": {", "\"quantization_config\": \"awq\", \"x\": {",
                  "want an object");
    return test_done("test_gptq_awq");
}
