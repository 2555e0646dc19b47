/* Hyperparameters from the weight source's metadata (`<arch>.<key>`, GGUF's
 * vocabulary), with llama.cpp's defaults for the optional ones. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model-impl.h"

static const char *key_of(char *buf, size_t n, const char *arch, const char *key) {
    snprintf(buf, n, "%s.%s", arch, key);
    return buf;
}

bool model_cfg_get_i64(const candle_weights *w, const char *arch, const char *key, int64_t *out) {
    char k[128];
    return candle_weights_get_i64(w, key_of(k, sizeof k, arch, key), out);
}

bool model_cfg_get_f64(const candle_weights *w, const char *arch, const char *key, double *out) {
    char k[128];
    return candle_weights_get_f64(w, key_of(k, sizeof k, arch, key), out);
}

static candle_status need_i64(const candle_weights *g, const char *arch, const char *key,
                              int64_t *out) {
    if (model_cfg_get_i64(g, arch, key, out) && *out > 0) return CANDLE_OK;
    return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                            "model: metadata key '%s.%s' missing or not a positive integer", arch,
                            key);
}

static bool type_is(const char *t, size_t len, const char *name) {
    return len == strlen(name) && !memcmp(t, name, len);
}

/* YaRN (rope.scaling.type yarn): positions interpolated by 1/factor on the
 * low frequencies and extrapolated on the high ones, cos/sin scaled by the
 * attention factor. rope.scaling.yarn_attn_factor is that magnitude itself
 * (transformers' attention_factor, which llama.cpp's converter writes there;
 * llama.cpp ignores it), else 0.1 ln(factor) + 1 as both references default.
 * The op multiplies by 1 + 0.1 ln(factor) on its own, so it gets the rest. */
static candle_status rope_yarn(const candle_weights *g, const char *arch, double factor,
                               candle_model_config *c) {
    double total = factor > 1 ? 0.1 * log(factor) + 1.0 : 1.0;
    if (!(factor > 0))
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                "model: YaRN RoPE scaling needs %s.rope.scaling.factor > 0 (got %g)",
                                arch, factor);
    model_cfg_get_f64(g, arch, "rope.scaling.yarn_attn_factor", &total);
    c->rope_ext_factor = 1.0;
    model_cfg_get_f64(g, arch, "rope.scaling.yarn_ext_factor", &c->rope_ext_factor);
    model_cfg_get_f64(g, arch, "rope.scaling.yarn_beta_fast", &c->rope_beta_fast);
    model_cfg_get_f64(g, arch, "rope.scaling.yarn_beta_slow", &c->rope_beta_slow);
    c->rope_scale = 1.0 / factor;
    c->rope_attn_factor *= c->rope_ext_factor != 0 ? total / (1.0 + 0.1 * log(factor)) : total;
    return CANDLE_OK;
}

/* A scaling whose per-pair factors are tensors must come with them. */
static candle_status need_tensor(const candle_weights *g, const char *arch, const char *type,
                                 const char *name) {
    if (candle_weights_find_tensor(g, name) >= 0) return CANDLE_OK;
    return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                            "model: %s.rope.scaling.type '%s' needs tensor '%s', which %s lacks",
                            arch, type, name, candle_weights_path(g));
}

/* RoPE scaling: linear stretches positions by 1/factor; yarn as above;
 * dynamic (NTK) raises the base with the sequence's length past the trained
 * context (model_rope_base);
 * llama3 and longrope (Phi-3's "su") divide each pair's frequency by
 * factors the file holds as tensors (rope_freqs.weight; rope_factors_short
 * and _long.weight), which the decoder applies wherever they are present,
 * as llama.cpp does (its converter writes no type for either).
 * rope.scaling.attn_factor multiplies cos/sin on top (Phi-3's long-context
 * magnitude). Any other type is refused: running it unscaled would be a
 * different model. */
static candle_status rope_scaling(const candle_weights *g, const char *arch,
                                  candle_model_config *c) {
    char k[128];
    const char *type = "none";
    size_t len = 4;
    double factor = 0;
    c->rope_scale = 1.0;
    c->rope_attn_factor = 1.0;
    model_cfg_get_f64(g, arch, "rope.scaling.attn_factor", &c->rope_attn_factor);
    if (!model_cfg_get_i64(g, arch, "rope.scaling.original_context_length", &c->rope_n_ctx_orig))
        c->rope_n_ctx_orig = c->n_ctx_train;
    candle_weights_get_str(g, key_of(k, sizeof k, arch, "rope.scaling.type"), &type, &len);
    /* without a type, only the old key says linear */
    model_cfg_get_f64(g, arch, type_is(type, len, "none") ? "rope.scale_linear" : "rope.scaling.factor",
                      &factor);
    if (type_is(type, len, "none") || type_is(type, len, "linear")) {
        if (factor > 0) c->rope_scale = 1.0 / factor;
        return CANDLE_OK;
    }
    if (type_is(type, len, "yarn")) return rope_yarn(g, arch, factor, c);
    if (type_is(type, len, "dynamic")) {
        if (!(factor >= 1) || !isfinite(factor) || c->n_rot <= 2)
            return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                 "model: dynamic NTK RoPE scaling needs %s.rope.scaling.factor >= 1 (got %g) "
                                 "and more than 2 rotated dimensions (got %lld)",
                                 arch, factor, (long long)c->n_rot);
        c->rope_dyn_factor = factor;
        return CANDLE_OK;
    }
    if (type_is(type, len, "llama3")) return need_tensor(g, arch, "llama3", "rope_freqs.weight");
    if (type_is(type, len, "longrope") || type_is(type, len, "su")) {
        candle_status s = need_tensor(g, arch, "longrope", "rope_factors_short.weight");
        return s ? s : need_tensor(g, arch, "longrope", "rope_factors_long.weight");
    }
    return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                            "model: RoPE scaling type '%.*s' (%s.rope.scaling.type) is not "
                            "supported", (int)(len > 32 ? 32 : len), type, arch);
}

/* The highest N of a "blk.N." tensor, or -1: a block_count below it would
 * run a truncated model without a word. */
static int64_t highest_layer(const candle_weights *g) {
    int64_t hi = -1;
    for (int64_t i = 0, n = candle_weights_n_tensors(g); i < n; i++) {
        const char *name = candle_weights_tensor(g, i)->name;
        if (strncmp(name, "blk.", 4) || !isdigit((unsigned char)name[4])) continue;
        char *end;
        long long l = strtoll(name + 4, &end, 10);
        if (*end == '.' && l > hi) hi = l;
    }
    return hi;
}

/* Layer count and attention shape against the tensors: what the metadata
 * says must describe the whole file. */
static candle_status check_layers(const candle_weights *g, const char *arch,
                                  const candle_model_config *c) {
    /* Every layer has tensors of its own: this bounds the layer table
     * before anything is allocated for it. */
    if (c->n_layer > candle_weights_n_tensors(g))
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                "model: %s.block_count is %lld but the file has %lld tensors", arch,
                                (long long)c->n_layer, (long long)candle_weights_n_tensors(g));
    int64_t hi = highest_layer(g);
    if (hi >= c->n_layer)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                "model: %s.block_count is %lld but the file has layers up to "
                                "blk.%lld (%lld layers)",
                                arch, (long long)c->n_layer, (long long)hi, (long long)hi + 1);
    int64_t v_len;
    /* Every attention kernel here takes V rows as wide as K rows (MLA-style
     * models with a distinct value width are not implemented). */
    if (model_cfg_get_i64(g, arch, "attention.value_length", &v_len) && v_len != c->head_dim)
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                                "model: %s.attention.value_length %lld differs from the key "
                                "length %lld (%s.attention.key_length or embedding_length / "
                                "head_count); not supported",
                                arch, (long long)v_len, (long long)c->head_dim, arch);
    return CANDLE_OK;
}

/* expert_count experts of which expert_used_count run per token (as
 * llama.cpp's converter writes them; Mixtral stays "llama"). The chosen
 * weights are renormalised unless expert_weights_norm says false (the
 * Qwen2-MoE family defaults it to false on its own). */
static candle_status read_experts(const candle_weights *g, const char *arch, candle_model_config *c) {
    c->n_expert = c->n_expert_used = 0;
    c->expert_norm = true;
    char k[128];
    candle_weights_get_bool(g, key_of(k, sizeof k, arch, "expert_weights_norm"), &c->expert_norm);
    bool has = model_cfg_get_i64(g, arch, "expert_count", &c->n_expert);
    bool used = model_cfg_get_i64(g, arch, "expert_used_count", &c->n_expert_used);
    if (!model_cfg_get_i64(g, arch, "expert_feed_forward_length", &c->n_ff_exp)) c->n_ff_exp = c->n_ff;
    if (!model_cfg_get_i64(g, arch, "expert_shared_feed_forward_length", &c->n_ff_shexp))
        c->n_ff_shexp = c->n_ff_exp;
    if (!has && !used) return CANDLE_OK;
    if (!has)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                "model: %s.expert_used_count is given but %s.expert_count is missing",
                                arch, arch);
    if (c->n_expert <= 0 || c->n_expert > 4096)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                "model: %s.expert_count is %lld, want 1..4096", arch,
                                (long long)c->n_expert);
    if (!used || c->n_expert_used <= 0 || c->n_expert_used > c->n_expert)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                "model: %s.expert_used_count (experts per token) is %s%lld, want "
                                "1..%lld (%s.expert_count)", arch, used ? "" : "missing, ",
                                (long long)c->n_expert_used, (long long)c->n_expert, arch);
    if (c->n_ff_exp <= 0 || c->n_ff_shexp <= 0)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                "model: %s.expert_feed_forward_length %lld / "
                                "expert_shared_feed_forward_length %lld, want positive", arch,
                                (long long)c->n_ff_exp, (long long)c->n_ff_shexp);
    return CANDLE_OK;
}

candle_status model_cfg_read_common(const candle_weights *g, const char *arch,
                                    candle_model_config *c) {
    candle_status s;
    if ((s = need_i64(g, arch, "block_count", &c->n_layer)) ||
        (s = need_i64(g, arch, "embedding_length", &c->n_embd)) ||
        (s = need_i64(g, arch, "feed_forward_length", &c->n_ff)) ||
        (s = need_i64(g, arch, "attention.head_count", &c->n_head)))
        return s;
    if (!model_cfg_get_i64(g, arch, "attention.head_count_kv", &c->n_head_kv))
        c->n_head_kv = c->n_head;
    if (!model_cfg_get_i64(g, arch, "attention.key_length", &c->head_dim))
        c->head_dim = c->n_embd / c->n_head;
    if (!model_cfg_get_i64(g, arch, "rope.dimension_count", &c->n_rot)) c->n_rot = c->head_dim;
    if (!model_cfg_get_i64(g, arch, "context_length", &c->n_ctx_train)) c->n_ctx_train = 2048;
    if (!model_cfg_get_f64(g, arch, "attention.layer_norm_rms_epsilon", &c->norm_eps))
        c->norm_eps = 1e-5;
    if (!model_cfg_get_f64(g, arch, "rope.freq_base", &c->rope_base)) c->rope_base = 10000.0;
    c->rope_base_swa = c->rope_base;
    if ((s = rope_scaling(g, arch, c)) || (s = read_experts(g, arch, c))) return s;
    bool interleaved = false;
    candle_weights_get_bool(g, "candle.rope.interleaved", &interleaved);
    c->rope_mode = interleaved ? CANDLE_ROPE_INTERLEAVED : CANDLE_ROPE_HALF;
    c->embd_scale = 1.0;
    c->residual_scale = 1.0;
    c->logit_scale = 1.0;
    /* the bounds keep n_head * head_dim and the row sizes far from int64 overflow */
    if (c->n_head_kv <= 0 || c->n_head > 65536 || c->n_head % c->n_head_kv || c->head_dim <= 0 ||
        c->head_dim > 65536 || c->n_rot <= 0 || c->n_rot > c->head_dim || c->n_rot % 2)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                "model: inconsistent attention shape: %lld heads, %lld kv heads, "
                                "head dim %lld, rope dims %lld",
                                (long long)c->n_head, (long long)c->n_head_kv,
                                (long long)c->head_dim, (long long)c->n_rot);
    return check_layers(g, arch, c);
}

candle_status model_cfg_check_values(const char *arch, const candle_model_config *c) {
    bool ok = c->norm_eps > 0 && c->norm_eps < 1;
    ok = ok && c->rope_base > 0 && isfinite(c->rope_base) && c->rope_base_swa > 0 &&
         isfinite(c->rope_base_swa);
    ok = ok && c->rope_scale > 0 && isfinite(c->rope_scale) && isfinite(c->embd_scale);
    if (!(c->rope_attn_factor > 0 && isfinite(c->rope_attn_factor)) ||
        !isfinite(c->rope_ext_factor) || !(c->rope_beta_fast >= 0) || !(c->rope_beta_slow >= 0) ||
        !isfinite(c->rope_beta_fast) || !isfinite(c->rope_beta_slow) ||
        (c->rope_ext_factor != 0 && c->rope_n_ctx_orig <= 0))
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                "model: %s RoPE scaling out of range: attention factor %g (want "
                                "positive), YaRN ext factor %g, betas %g / %g, original context %lld",
                                arch, c->rope_attn_factor, c->rope_ext_factor, c->rope_beta_fast,
                                c->rope_beta_slow, (long long)c->rope_n_ctx_orig);
    if (ok) return CANDLE_OK;
    return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                            "model: %s metadata out of range: norm epsilon %g (want 0 < eps < 1), "
                            "rope base %g / %g and scale %g (want positive), embedding scale %g",
                            arch, c->norm_eps, c->rope_base, c->rope_base_swa, c->rope_scale,
                            c->embd_scale);
}

bool decoder_layer_is_swa(const candle_model_config *c, int64_t il) {
    if (c->n_swa <= 0) return false;
    return c->swa_pattern <= 0 || il % c->swa_pattern < c->swa_pattern - 1;
}
