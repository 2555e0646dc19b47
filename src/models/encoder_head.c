/* Sequence classification and cross-encoder reranking (encoder.h): the
 * classifier head on the first token's state, as transformers'
 * BertForSequenceClassification / RobertaForSequenceClassification compute
 * it, with the activations the text-classification pipeline (problem_type)
 * and sentence-transformers' CrossEncoder (activation_fn) apply. The text
 * entry points tokenize (one text, or a pair cut longest-first) and call
 * the token-level ones' core (run_tokens). */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "candle/tokenizer.h"
#include "embedder-impl.h"
#include "tokenizer/tokenizer-impl.h"

/* A linear layer of the model's weights as host f32 (the head is a few
 * vectors per input: a graph would cost more than it computes). */
static candle_status head_linear(const candle_weights *w, const char *name, int64_t n_in, dense_layer *L,
                                 bool tanh_after) {
    char wname[64], bname[64];
    snprintf(wname, sizeof wname, "%s.weight", name);
    snprintf(bname, sizeof bname, "%s.bias", name);
    candle_ctx *ctx = NULL;
    candle_status s = candle_ctx_init(&ctx, NULL);
    if (s) return s;
    candle_tensor *tw = candle_weights_load_tensor(w, ctx, wname);
    candle_tensor *tb = tw && candle_weights_find_tensor(w, bname) >= 0 ? candle_weights_load_tensor(w, ctx, bname)
                                                                        : NULL;
    char src[160];
    candle_weights_src_name(w, wname, src, sizeof src);
    if (!tw || candle_errcode(ctx)) s = cdl_set_error(NULL, candle_errcode(ctx), "%s", candle_errmsg(ctx));
    else if (tw->rank != 2 || tw->shape[1] != n_in || tw->shape[0] <= 0 || tw->shape[0] > (1 << 20) ||
             (tb && (tb->rank != 1 || tb->shape[0] != tw->shape[0])))
        s = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: tensor '%s' (or its bias) is not [labels, %" PRId64 "]",
                             candle_weights_path(w), src, n_in);
    if (!s) {
        L->n_in = n_in;
        L->n_out = tw->shape[0];
        L->tanh = tanh_after;
        L->w = malloc((size_t)(L->n_in * L->n_out) * sizeof *L->w);
        L->b = tb ? malloc((size_t)L->n_out * sizeof *L->b) : NULL;
        if (!L->w || (tb && !L->b)) s = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: classifier");
        if (!s) s = candle_tensor_to_f32(tw, L->w);
        if (!s && tb) s = candle_tensor_to_f32(tb, L->b);
    }
    candle_ctx_free(ctx);
    return s;
}

static candle_status read_dir_json(const char *dir, const char *file, json_doc **d, char *path, size_t n) {
    struct stat st;
    snprintf(path, n, "%s/%s", dir, file);
    *d = NULL;
    return stat(path, &st) ? CANDLE_OK : encoder_read_json(path, d);
}

/* A GGUF's <arch>.classifier.output_labels (llama.cpp's converter writes
 * config.json's id2label there): true when it held the labels. */
static candle_status read_gguf_labels(encoder_head *h, const candle_weights *w, bool *found) {
    const candle_gguf *g = candle_weights_gguf(w);
    const char *arch = NULL;
    char key[160];
    candle_gguf_type et;
    int64_t n = 0;
    size_t alen = 0;
    *found = false;
    if (!g || !candle_gguf_get_str(g, "general.architecture", &arch, &alen)) return CANDLE_OK;
    snprintf(key, sizeof key, "%.*s.classifier.output_labels", (int)(alen < 64 ? alen : 64), arch);
    if (!candle_gguf_get_arr(g, key, &et, &n)) return CANDLE_OK;
    if (et != CANDLE_GGUF_STRING || n != h->out.n_out)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: %s holds %" PRId64 " %s, the classifier %" PRId64 " labels",
                             candle_weights_path(w), key, n, et == CANDLE_GGUF_STRING ? "strings" : "non-strings",
                             h->out.n_out);
    for (int64_t i = 0; i < n; i++) {
        const char *sv;
        size_t len;
        if (!candle_gguf_arr_str(g, key, i, &sv, &len) || !(h->labels[i] = strndup(sv, len)))
            return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: labels");
    }
    *found = true;
    return CANDLE_OK;
}

/* config.json's id2label ({"0": "negative", ...}), a GGUF's output_labels;
 * LABEL_i where absent. */
static candle_status read_labels(encoder_head *h, const candle_weights *w, const json_value *cfg, const char *path) {
    int64_t n = h->out.n_out;
    h->labels = calloc((size_t)n, sizeof *h->labels);
    if (!h->labels) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: labels");
    bool found = false;
    candle_status st = read_gguf_labels(h, w, &found);
    if (st || found) return st;
    const json_value *map = cfg ? json_get(cfg, "id2label") : NULL;
    if (map && map->type != JSON_OBJECT && map->type != JSON_NULL)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: id2label is %s, want an object", path,
                                json_type_name(map->type));
    if (map && map->type == JSON_OBJECT && map->n != (size_t)n)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: id2label has %zu labels, the classifier %" PRId64,
                                path, map->n, n);
    for (int64_t i = 0; i < n; i++) {
        char key[32], def[32];
        snprintf(key, sizeof key, "%" PRId64, i);
        snprintf(def, sizeof def, "LABEL_%" PRId64, i);
        const char *s = def;
        if (map && map->type == JSON_OBJECT && !json_as_str(json_get(map, key), &s, NULL))
            return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: id2label has no string for id %s", path, key);
        if (!(h->labels[i] = strdup(s))) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: labels");
    }
    return CANDLE_OK;
}

/* A CrossEncoder activation_fn ("torch.nn.modules.activation.Sigmoid"). */
static candle_status parse_act(const json_value *v, const char *path, const char *field, head_act *out) {
    if (encoder_type_is(v, "Sigmoid")) *out = HEAD_SIGMOID;
    else if (encoder_type_is(v, "Identity")) *out = HEAD_IDENTITY;
    else
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "%s: %s '%s' is not supported (Sigmoid or Identity)",
                                path, field, v->type == JSON_STRING ? v->u.str : json_type_name(v->type));
    return CANDLE_OK;
}

/* The score activation: config_sentence_transformers.json's activation_fn
 * (sentence-transformers 5+), else config.json's sentence_transformers
 * .activation_fn (4.x) or sbert_ce_default_activation_function (older),
 * else CrossEncoder's default: sigmoid for one label, identity otherwise. */
static candle_status read_score_act(encoder_head *h, const char *dir, const json_value *cfg, const char *cfg_path) {
    char path[4096];
    json_doc *d;
    h->score = h->out.n_out == 1 ? HEAD_SIGMOID : HEAD_IDENTITY;
    candle_status s = read_dir_json(dir, "config_sentence_transformers.json", &d, path, sizeof path);
    const json_value *v = d ? json_get(json_root(d), "activation_fn") : NULL;
    bool given = v && v->type != JSON_NULL;
    if (!s && given) s = parse_act(v, path, "activation_fn", &h->score);
    json_free(d);
    if (s || given || !cfg) return s;
    const json_value *st = json_get(cfg, "sentence_transformers");
    if ((v = st ? json_get(st, "activation_fn") : NULL) && v->type != JSON_NULL)
        return parse_act(v, cfg_path, "sentence_transformers.activation_fn", &h->score);
    if ((v = json_get(cfg, "sbert_ce_default_activation_function")) && v->type != JSON_NULL)
        return parse_act(v, cfg_path, "sbert_ce_default_activation_function", &h->score);
    return CANDLE_OK;
}

/* problem_type as transformers' text-classification pipeline reads it. */
static candle_status read_problem_type(encoder_head *h, const json_value *cfg, const char *path) {
    const json_value *pt = cfg ? json_get(cfg, "problem_type") : NULL;
    h->classify = h->out.n_out > 1 ? HEAD_SOFTMAX : h->score;
    if (!pt || pt->type == JSON_NULL) return CANDLE_OK;
    if (json_str_eq(pt, "single_label_classification")) h->classify = HEAD_SOFTMAX;
    else if (json_str_eq(pt, "multi_label_classification")) h->classify = HEAD_SIGMOID;
    else if (json_str_eq(pt, "regression")) h->classify = HEAD_IDENTITY;
    else
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                                "%s: problem_type '%s' is not single_label_classification, "
                                "multi_label_classification or regression",
                                path, pt->type == JSON_STRING ? pt->u.str : json_type_name(pt->type));
    return CANDLE_OK;
}

candle_status encoder_head_load(candle_encoder *e, const char *dir) {
    const candle_weights *w = e->model->weights;
    encoder_head *h = &e->head;
    int64_t n_embd = e->model->cfg.n_embd;
    if (candle_weights_find_tensor(w, "cls.output.weight") < 0) return CANDLE_OK;
    candle_status s = CANDLE_OK;
    if (candle_weights_find_tensor(w, "cls.weight") >= 0) s = head_linear(w, "cls", n_embd, &h->pre, true);
    if (!s && h->pre.n_out && h->pre.n_out != n_embd)
        s = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: the classifier's dense layer has %" PRId64
                             " outputs, want %" PRId64, candle_weights_path(w), h->pre.n_out, n_embd);
    if (!s) s = head_linear(w, "cls.output", n_embd, &h->out, false);
    if (s) return s;
    bool hf = candle_weights_get_format(w) == CANDLE_WEIGHTS_HF_DIR;
    char path[4096];
    json_doc *cfg = NULL;
    if (hf) s = read_dir_json(dir, "config.json", &cfg, path, sizeof path);
    const json_value *root = cfg ? json_root(cfg) : NULL;
    if (!s) s = read_labels(h, w, root, path);
    if (!s && hf) s = read_score_act(h, dir, root, path);
    if (!s) s = read_problem_type(h, root, path);
    json_free(cfg);
    return s;
}

void encoder_head_free(encoder_head *h) {
    free(h->pre.w);
    free(h->pre.b);
    free(h->out.w);
    free(h->out.b);
    for (int64_t i = 0; h->labels && i < h->out.n_out; i++) free(h->labels[i]);
    free(h->labels);
}

int64_t candle_encoder_n_labels(const candle_encoder *e) { return e ? e->head.out.n_out : 0; }

const char *candle_encoder_label(const candle_encoder *e, int64_t i) {
    return e && i >= 0 && i < e->head.out.n_out ? e->head.labels[i] : NULL;
}

static void activate(head_act a, float *x, int64_t n) {
    if (a == HEAD_SIGMOID)
        for (int64_t i = 0; i < n; i++) x[i] = (float)(1.0 / (1.0 + exp(-(double)x[i])));
    if (a != HEAD_SOFTMAX) return;
    float mx = x[0];
    double sum = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > mx) mx = x[i];
    for (int64_t i = 0; i < n; i++) sum += exp((double)x[i] - mx);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(exp((double)x[i] - mx) / sum);
}

/* The head's logits [n, n_labels] of n tokenized inputs, packed into one
 * candle_model_forward. */
static candle_status head_logits(const candle_encoder *e, model_ws *ws, const int32_t *const *ids,
                                 const int32_t *const *types, const int64_t *n_ids, int64_t n, float *logits) {
    const candle_model *m = e->model;
    int64_t n_embd = m->cfg.n_embd, L = e->head.out.n_out;
    /* a model with one token type (RoBERTa) takes no segments */
    bool typed = m->type_embd && m->type_embd->shape[0] > 1;
    /* pooled [n, n_embd], then one vector */
    float *pooled = model_ws_buf(ws, WS_EMB_OUT, (size_t)((n + 1) * n_embd) * sizeof *pooled, "classify");
    float *buf = pooled ? pooled + n * n_embd : NULL;
    candle_status s = pooled ? encoder_forward_pooled(m, ws, ids, typed ? types : NULL, n_ids, n,
                                                      CANDLE_OUTPUT_POOLED_CLS, pooled)
                             : cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: classify");
    for (int64_t k = 0; !s && k < n; k++) {
        const float *x = pooled + k * n_embd;
        if (e->head.pre.n_out) {
            encoder_dense_apply(&e->head.pre, x, buf);
            x = buf;
        }
        encoder_dense_apply(&e->head.out, x, logits + k * L);
    }
    return s;
}

/* What every entry point checks: a head (one label for rerank), inputs,
 * and room for n rows of the head's labels in cap floats. */
static candle_status head_begin(const candle_encoder *e, bool rerank, const void *in, const void *out, int64_t n,
                                size_t cap) {
    const char *who = rerank ? "rerank" : "classify";
    if (!e) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "%s: NULL encoder", who);
    int64_t L = e->head.out.n_out;
    if (!L)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                             "%s: %s has no classifier head (classifier.* / cls.output.* tensors)", who,
                             candle_weights_path(e->model->weights));
    if (!in || !out || n <= 0)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "%s: NULL argument or no %s", who,
                             rerank ? "documents" : "texts");
    if (rerank && L != 1)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                             "rerank: the classifier has %" PRId64 " labels; a reranker has one score", L);
    if (cap / (size_t)L < (size_t)n)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "%s: output of %zu floats too small, need %zu", who, cap,
                             (size_t)n * (size_t)L);
    return CANDLE_OK;
}

/* One tokenized input as the token-level entry points take it: non-empty,
 * in the vocabulary, cut to max_tokens (*cut) unless no_truncate. */
static candle_status check_input(const candle_encoder *e, const int32_t *ids, int64_t n, bool no_truncate,
                                 int64_t *cut) {
    int64_t V = e->model->cfg.n_vocab;
    if (!ids || n <= 0) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "an empty input");
    for (int64_t j = 0; j < n; j++)
        if (ids[j] < 0 || ids[j] >= V)
            return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                 "token %d at index %" PRId64 " out of range [0, %" PRId64 ")", (int)ids[j], j, V);
    if (n > e->max_tokens && no_truncate)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                             "%" PRId64 " tokens exceed the model's %" PRId64 " (no_truncate)", n, e->max_tokens);
    *cut = n > e->max_tokens ? e->max_tokens : n;
    return CANDLE_OK;
}

/* Inputs per candle_model_forward: it packs them without padding, but the
 * id matrix it is handed is padded to the longest. */
#define HEAD_CHUNK ENCODER_CHUNK

/* n tokenized inputs (input i0 first, for messages) through the head into
 * out [n, n_labels], HEAD_CHUNK per forward, activated as classify (the
 * problem_type) or rerank (the CrossEncoder's activation_fn) says. Both
 * the token-level and the text entry points end here. */
static candle_status run_tokens(const candle_encoder *e, model_ws *ws, bool rerank, const int32_t *const *ids,
                                const int32_t *const *types, const int64_t *n_ids, int64_t n, int64_t i0,
                                const candle_head_params *p, float *out) {
    const char *who = rerank ? "rerank: document" : "classify: input";
    int64_t L = e->head.out.n_out, cut[HEAD_CHUNK];
    head_act act = rerank ? e->head.score : e->head.classify;
    candle_status s;
    for (int64_t c0 = 0; c0 < n; c0 += HEAD_CHUNK) {
        int64_t m = n - c0 < HEAD_CHUNK ? n - c0 : HEAD_CHUNK;
        for (int64_t k = 0; k < m; k++) {
            if ((s = check_input(e, ids[c0 + k], n_ids[c0 + k], p->no_truncate, &cut[k])))
                return cdl_set_error(NULL, s, "%s %" PRId64 ": %s", who, i0 + c0 + k, candle_last_errmsg());
            if (p->n_tokens) p->n_tokens[c0 + k] = cut[k];
        }
        if ((s = head_logits(e, ws, ids + c0, types ? types + c0 : NULL, cut, m, out + c0 * L)))
            return cdl_set_error(NULL, s, "%ss %" PRId64 "..%" PRId64 ": %s", who, i0 + c0, i0 + c0 + m - 1,
                                 candle_last_errmsg());
        for (int64_t k = 0; k < m; k++) activate(act, out + (c0 + k) * L, L);
    }
    return CANDLE_OK;
}

candle_status candle_encoder_classify_tokens(const candle_encoder *e, const int32_t *const *ids,
                                             const int64_t *n_ids, int64_t n, const candle_head_params *p,
                                             float *probs_out, size_t cap) {
    candle_head_params def = {0};
    candle_status s = head_begin(e, false, n_ids ? (const void *)ids : NULL, probs_out, n, cap);
    model_ws *ws = s ? NULL : model_ws_get(e->model, true);
    if (!s && !ws) s = candle_last_error();
    if (!s) s = run_tokens(e, ws, false, ids, NULL, n_ids, n, 0, p ? p : &def, probs_out);
    if (ws) model_ws_put(e->model, ws);
    return s;
}

candle_status candle_encoder_rerank_tokens(const candle_encoder *e, const int32_t *const *ids,
                                           const int32_t *const *types, const int64_t *n_ids, int64_t n,
                                           const candle_head_params *p, float *scores_out) {
    candle_head_params def = {0};
    candle_status s = head_begin(e, true, n_ids ? (const void *)ids : NULL, scores_out, n, SIZE_MAX);
    model_ws *ws = s ? NULL : model_ws_get(e->model, true);
    if (!s && !ws) s = candle_last_error();
    if (!s) s = run_tokens(e, ws, true, ids, types, n_ids, n, 0, p ? p : &def, scores_out);
    if (ws) model_ws_put(e->model, ws);
    return s;
}

/* Where the two plain encodings pa [na], pb [nb] sit inside the pair's ids
 * all [n]: the first match of pa, then of pb after it. */
static bool locate(const int32_t *all, int64_t n, const int32_t *pa, int64_t na, const int32_t *pb, int64_t nb,
                   int64_t *oa, int64_t *ob) {
    for (*oa = 0; *oa + na <= n; (*oa)++) {
        if (memcmp(all + *oa, pa, (size_t)na * sizeof *pa)) continue;
        for (*ob = *oa + na; *ob + nb <= n; (*ob)++)
            if (!memcmp(all + *ob, pb, (size_t)nb * sizeof *pb)) return true;
        return false;
    }
    return false;
}

/* The lengths both texts keep when budget tokens are left for them, as
 * tokenizers' TruncationStrategy::LongestFirst computes them: the shorter
 * keeps its length if the longer can take the rest, else both are cut to
 * half the budget (the longer gets the odd token). */
static void longest_first(int64_t na, int64_t nb, int64_t budget, int64_t *ka, int64_t *kb) {
    bool swap = na > nb;
    int64_t n1 = swap ? nb : na, n2 = swap ? na : nb;
    n2 = n1 > budget ? n1 : (n1 > budget - n1 ? n1 : budget - n1);
    if (n1 + n2 > budget) {
        n1 = budget / 2;
        n2 = n1 + budget % 2;
    }
    *ka = swap ? n2 : n1;
    *kb = swap ? n1 : n2;
    if (*ka > na) *ka = na;
    if (*kb > nb) *kb = nb;
}

/* all/types [n] cut to the kept ka, kb tokens of the segments at oa, ob. */
static int64_t splice(int32_t *all, int32_t *types, int64_t n, int64_t oa, int64_t na, int64_t ka, int64_t ob,
                      int64_t nb, int64_t kb) {
    int64_t from[5] = {0, oa, oa + na, ob, ob + nb}, len[5] = {oa, ka, ob - oa - na, kb, n - ob - nb}, o = 0;
    for (int k = 0; k < 5; k++) {
        memmove(all + o, all + from[k], (size_t)len[k] * sizeof *all);
        memmove(types + o, types + from[k], (size_t)len[k] * sizeof *types);
        o += len[k];
    }
    return o;
}

/* A query/document pair by the tokenizer's pair template, with its token
 * types, cut longest-first to max tokens as a CrossEncoder's tokenizer call
 * (truncation=True) cuts it; the special tokens are kept. */
static candle_status pair_tokenize(const candle_encoder *e, model_ws *ws, const char *a, size_t alen, const char *b,
                                   size_t blen, bool no_truncate, int32_t *all, int32_t *types, int64_t cap,
                                   int64_t *n) {
    candle_status s = candle_tokenizer_encode_pair(e->tok, a, alen, b, blen, true, all, cap, n, types);
    if (s || *n <= e->max_tokens) return s;
    if (no_truncate)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "the pair's %" PRId64 " tokens exceed the model's %" PRId64
                                " (no_truncate)", *n, e->max_tokens);
    int32_t *pa = model_ws_buf(ws, WS_TOK_B, (size_t)cap * 2 * sizeof *pa, "tokens"), *pb = pa ? pa + cap : NULL;
    int64_t na = 0, nb = 0, oa = 0, ob = 0, ka, kb;
    if (!pa) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tokens");
    s = candle_tokenizer_encode(e->tok, a, alen, false, true, pa, cap, &na);
    if (!s) s = candle_tokenizer_encode(e->tok, b, blen, false, true, pb, cap, &nb);
    int64_t budget = e->max_tokens - (*n - na - nb);
    if (!s && (budget < 0 || !locate(all, *n, pa, na, pb, nb, &oa, &ob)))
        s = cdl_set_error(NULL, CANDLE_ERR_INTERNAL, "rerank: cannot truncate the pair around its special tokens");
    if (!s) {
        longest_first(na, nb, budget, &ka, &kb);
        *n = splice(all, types, *n, oa, na, ka, ob, nb, kb);
    }
    return s;
}

/* The ids the head runs for text a (b NULL: *types NULL) or for the pair
 * a, b (*types after the ids), cut as encoder.h says, in ws's tokenization
 * buffers (valid until its next tokenization). */
static candle_status head_tokenize(const candle_encoder *e, model_ws *ws, const char *a, size_t alen, const char *b,
                                   size_t blen, bool no_truncate, const int32_t **ids, const int32_t **types,
                                   int64_t *n) {
    *types = NULL;
    if (!b) return encoder_tokenize(e, ws, a, alen, no_truncate, ids, n);
    int64_t cap = (int64_t)(alen + blen) + 32;
    int32_t *all = model_ws_buf(ws, WS_TOK_A, (size_t)cap * 2 * sizeof *all, "tokens");
    if (!all) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tokens");
    candle_status s = tok_scratch_begin(&ws->tok);
    if (!s) s = pair_tokenize(e, ws, a, alen, b, blen, no_truncate, all, all + cap, cap, n);
    tok_scratch_end(&ws->tok);
    if (!s && *n > cap) s = cdl_set_error(NULL, CANDLE_ERR_INTERNAL, "rerank: %" PRId64 " pair tokens", *n);
    if (s) return s;
    *ids = all;
    *types = all + cap;
    return CANDLE_OK;
}

candle_status candle_encoder_tokenize_pair(const candle_encoder *e, const char *a, size_t alen, const char *b,
                                           size_t blen, const candle_head_params *p, int32_t *ids, int32_t *types,
                                           size_t cap, int64_t *n_ids) {
    candle_head_params def = {0};
    if (!p) p = &def;
    if (!e || !a || !ids || !n_ids) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tokenize: NULL argument");
    if (alen == SIZE_MAX) alen = strlen(a);
    if (b && blen == SIZE_MAX) blen = strlen(b);
    const int32_t *all = NULL, *ty = NULL;
    int64_t n = 0;
    model_ws *ws = model_ws_get(e->model, false);
    if (!ws) return candle_last_error();
    candle_status s = head_tokenize(e, ws, a, alen, b, blen, p->no_truncate, &all, &ty, &n);
    if (!s && (size_t)n > cap)
        s = cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tokenize: %" PRId64 " ids, room for %zu", n, cap);
    if (!s) {
        memcpy(ids, all, (size_t)n * sizeof *ids);
        if (types && ty) memcpy(types, ty, (size_t)n * sizeof *types);
        else if (types) memset(types, 0, (size_t)n * sizeof *types);
        *n_ids = n;
    }
    model_ws_put(e->model, ws);
    return s;
}

/* The text entry points: texts[i] (classify) or the pairs (query,
 * texts[i]) (rerank: query non-NULL) tokenized a chunk at a time, then
 * run_tokens on each chunk. */
static candle_status run_texts(const candle_encoder *e, const char *query, size_t qlen, const char *const *texts,
                               const size_t *lens, int64_t n, const candle_head_params *p, float *out) {
    bool rerank = query != NULL;
    int64_t L = e->head.out.n_out;
    model_ws *ws = model_ws_get(e->model, true);
    tok_chunk *hc = ws ? tok_chunk_begin(ws) : NULL;
    candle_status s = CANDLE_OK;
    if (!hc) s = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: %s", rerank ? "rerank" : "classify");
    for (int64_t i = 0; i < n && !s; i++) {
        const char *t = texts[i] ? texts[i] : "";
        size_t len = lens ? lens[i] : strlen(t);
        const int32_t *ids = NULL, *types = NULL;
        int64_t n_ids = 0;
        s = rerank ? head_tokenize(e, ws, query, qlen, t, len, p->no_truncate, &ids, &types, &n_ids)
                   : head_tokenize(e, ws, t, len, NULL, 0, p->no_truncate, &ids, &types, &n_ids);
        if (!s) s = tok_chunk_add(ws, hc, ids, types, n_ids);
        if (s) {
            s = cdl_set_error(NULL, s, "%s %" PRId64 ": %s", rerank ? "rerank: document" : "classify: input", i,
                              candle_last_errmsg());
            break;
        }
        if (hc->n < HEAD_CHUNK && i < n - 1) continue;
        int64_t i0 = i + 1 - hc->n;
        candle_head_params q = *p;
        if (q.n_tokens) q.n_tokens += i0;
        tok_chunk_ptrs(ws, hc);
        s = run_tokens(e, ws, rerank, hc->ids, rerank ? hc->types : NULL, hc->n_ids, hc->n, i0, &q, out + i0 * L);
        hc->n = 0;
        hc->used = 0;
    }
    if (ws) model_ws_put(e->model, ws);
    return s;
}

candle_status candle_encoder_classify(const candle_encoder *e, const char *const *texts, const size_t *lens,
                                      int64_t n, const candle_head_params *p, float *probs_out, size_t cap) {
    candle_head_params def = {0};
    candle_status s = head_begin(e, false, texts, probs_out, n, cap);
    return s ? s : run_texts(e, NULL, 0, texts, lens, n, p ? p : &def, probs_out);
}

candle_status candle_encoder_rerank(const candle_encoder *e, const char *query, size_t qlen,
                                    const char *const *docs, const size_t *lens, int64_t n,
                                    const candle_head_params *p, float *scores_out) {
    candle_head_params def = {0};
    candle_status s = head_begin(e, true, query ? (const void *)docs : NULL, scores_out, n, SIZE_MAX);
    if (s) return s;
    return run_texts(e, query, qlen == SIZE_MAX ? strlen(query) : qlen, docs, lens, n, p ? p : &def, scores_out);
}
