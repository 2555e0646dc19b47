/* Sequence classification and cross-encoder reranking (encoder.h): the
 * classifier head on the first token's state, as transformers'
 * BertForSequenceClassification / RobertaForSequenceClassification compute
 * it, with the activations the text-classification pipeline (problem_type)
 * and sentence-transformers' CrossEncoder (activation_fn) apply. */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "candle/tokenizer.h"
#include "embedder-impl.h"

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

/* Tokenized inputs scored together: one candle_model_forward packs them. */
#define HEAD_CHUNK 256
typedef struct head_batch {
    int32_t *ids[HEAD_CHUNK], *types[HEAD_CHUNK]; /* types NULL: all 0 (owned with ids) */
    int64_t n_ids[HEAD_CHUNK];
    int n;
} head_batch;

static void batch_clear(head_batch *hb) {
    for (int k = 0; k < hb->n; k++) free(hb->ids[k]);
    hb->n = 0;
}

/* The head's logits [hb->n, n_labels] of the batch's inputs. */
static candle_status head_logits(const candle_encoder *e, const head_batch *hb, float *logits) {
    const candle_model *m = e->model;
    int64_t n_embd = m->cfg.n_embd, L = e->head.out.n_out, n = hb->n;
    /* a model with one token type (RoBERTa) takes no segments */
    bool typed = m->type_embd && m->type_embd->shape[0] > 1;
    float *pooled = malloc((size_t)(n * n_embd) * sizeof *pooled), *buf = malloc((size_t)n_embd * sizeof *buf);
    candle_status s = pooled && buf ? encoder_forward_pooled(m, (const int32_t *const *)hb->ids,
                                                             typed ? (const int32_t *const *)hb->types : NULL,
                                                             hb->n_ids, n, CANDLE_OUTPUT_POOLED_CLS, pooled)
                                    : cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: classify");
    for (int k = 0; !s && k < n; k++) {
        const float *x = pooled + k * n_embd;
        if (e->head.pre.n_out) {
            encoder_dense_apply(&e->head.pre, x, buf);
            x = buf;
        }
        encoder_dense_apply(&e->head.out, x, logits + k * L);
    }
    free(pooled);
    free(buf);
    return s;
}

static candle_status need_head(const candle_encoder *e, const char *who) {
    if (!e) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "%s: NULL encoder", who);
    if (!e->head.out.n_out)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "%s: %s has no classifier head (classifier.* / cls.output.* tensors)", who,
                                candle_weights_path(e->model->weights));
    return CANDLE_OK;
}

candle_status candle_encoder_classify(const candle_encoder *e, const char *const *texts, const size_t *lens,
                                      int64_t n, const candle_head_params *p, float *probs_out, size_t cap) {
    candle_head_params def = {0};
    if (!p) p = &def;
    candle_status s = need_head(e, "classify");
    if (s) return s;
    int64_t L = e->head.out.n_out;
    if (!texts || !probs_out || n <= 0)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "classify: NULL argument or no texts");
    if (cap / (size_t)L < (size_t)n)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "classify: output of %zu floats too small, need %zu",
                                cap, (size_t)n * (size_t)L);
    head_batch *hb = calloc(1, sizeof *hb);
    if (!hb) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: classify");
    for (int64_t i = 0; i < n && !s; i++) {
        const char *t = texts[i] ? texts[i] : "";
        s = encoder_tokenize(e, t, lens ? lens[i] : strlen(t), p->no_truncate, &hb->ids[hb->n], &hb->n_ids[hb->n]);
        if (s) {
            s = cdl_set_error(NULL, s, "classify: input %" PRId64 ": %s", i, candle_last_errmsg());
            break;
        }
        if (p->n_tokens) p->n_tokens[i] = hb->n_ids[hb->n];
        hb->types[hb->n] = NULL;
        if (++hb->n < HEAD_CHUNK && i < n - 1) continue;
        int64_t i0 = i + 1 - hb->n;
        s = head_logits(e, hb, probs_out + i0 * L);
        for (int64_t k = i0; !s && k <= i; k++) activate(e->head.classify, probs_out + k * L, L);
        if (s) s = cdl_set_error(NULL, s, "classify: inputs %" PRId64 "..%" PRId64 ": %s", i0, i, candle_last_errmsg());
        batch_clear(hb);
    }
    batch_clear(hb);
    free(hb);
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
static candle_status pair_tokenize(const candle_encoder *e, const char *a, size_t alen, const char *b, size_t blen,
                                   bool no_truncate, int32_t *all, int32_t *types, int64_t cap, int64_t *n) {
    candle_status s = candle_tokenizer_encode_pair(e->tok, a, alen, b, blen, true, all, cap, n, types);
    if (s || *n <= e->max_tokens) return s;
    if (no_truncate)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "the pair's %" PRId64 " tokens exceed the model's %" PRId64
                                " (no_truncate)", *n, e->max_tokens);
    int32_t *pa = malloc((size_t)cap * 2 * sizeof *pa), *pb = pa ? pa + cap : NULL;
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
    free(pa);
    return s;
}

/* One pair's ids and types into the batch's next slot. */
static candle_status add_pair(const candle_encoder *e, const char *q, size_t qlen, const char *d, size_t dlen,
                              const candle_head_params *p, int64_t i, head_batch *hb) {
    int64_t cap = (int64_t)(qlen + dlen) + 32, n = 0;
    int32_t *ids = malloc((size_t)cap * 2 * sizeof *ids), *types = ids ? ids + cap : NULL;
    if (!ids) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tokens");
    candle_status s = pair_tokenize(e, q, qlen, d, dlen, p->no_truncate, ids, types, cap, &n);
    if (!s && p->n_tokens) p->n_tokens[i] = n;
    if (!s && n > cap) s = cdl_set_error(NULL, CANDLE_ERR_INTERNAL, "rerank: %" PRId64 " pair tokens", n);
    if (s) {
        free(ids);
        return s;
    }
    hb->ids[hb->n] = ids;
    hb->types[hb->n] = types;
    hb->n_ids[hb->n++] = n;
    return CANDLE_OK;
}

candle_status candle_encoder_rerank(const candle_encoder *e, const char *query, size_t qlen,
                                    const char *const *docs, const size_t *lens, int64_t n,
                                    const candle_head_params *p, float *scores_out) {
    candle_head_params def = {0};
    if (!p) p = &def;
    candle_status s = need_head(e, "rerank");
    if (s) return s;
    if (!query || !docs || !scores_out || n <= 0)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "rerank: NULL argument or no documents");
    if (e->head.out.n_out != 1)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "rerank: the classifier has %" PRId64 " labels; a reranker has one score",
                                e->head.out.n_out);
    if (qlen == SIZE_MAX) qlen = strlen(query);
    head_batch *hb = calloc(1, sizeof *hb);
    if (!hb) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: rerank");
    /* each pair's score: the head's one logit, activated as a CrossEncoder */
    for (int64_t i = 0; i < n && !s; i++) {
        const char *d = docs[i] ? docs[i] : "";
        s = add_pair(e, query, qlen, d, lens ? lens[i] : strlen(d), p, i, hb);
        if (s) {
            s = cdl_set_error(NULL, s, "rerank: document %" PRId64 ": %s", i, candle_last_errmsg());
            break;
        }
        if (hb->n < HEAD_CHUNK && i < n - 1) continue;
        int64_t i0 = i + 1 - hb->n;
        s = head_logits(e, hb, scores_out + i0);
        for (int64_t k = i0; !s && k <= i; k++) activate(e->head.score, scores_out + k, 1);
        if (s) s = cdl_set_error(NULL, s, "rerank: documents %" PRId64 "..%" PRId64 ": %s", i0, i, candle_last_errmsg());
        batch_clear(hb);
    }
    batch_clear(hb);
    free(hb);
    return s;
}
