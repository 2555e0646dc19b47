/* Hyperparameters from the weight source's metadata (`<arch>.<key>`, GGUF's
 * vocabulary), with llama.cpp's defaults for the optional ones. */
#include <math.h>
#include <stdio.h>
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
    return candle_set_error(NULL, CANDLE_ERR_FORMAT,
                            "model: metadata key '%s.%s' missing or not a positive integer", arch,
                            key);
}

/* Linear RoPE scaling stretches positions by 1/factor. Any other scaling
 * type is refused: running it unscaled would be a different model. */
static candle_status rope_scale(const candle_weights *g, const char *arch, double *scale) {
    char k[128];
    const char *type;
    size_t len;
    double factor = 0;
    *scale = 1.0;
    if (candle_weights_get_str(g, key_of(k, sizeof k, arch, "rope.scaling.type"), &type, &len) &&
        !(len == 4 && !memcmp(type, "none", 4))) {
        if (!(len == 6 && !memcmp(type, "linear", 6)))
            return candle_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                                    "model: RoPE scaling type '%.*s' (%s.rope.scaling.type) is not "
                                    "supported", (int)(len > 32 ? 32 : len), type, arch);
        model_cfg_get_f64(g, arch, "rope.scaling.factor", &factor);
    } else {
        model_cfg_get_f64(g, arch, "rope.scale_linear", &factor);
    }
    if (factor > 0) *scale = 1.0 / factor;
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
    if ((s = rope_scale(g, arch, &c->rope_scale))) return s;
    bool interleaved = false;
    candle_weights_get_bool(g, "candle.rope.interleaved", &interleaved);
    c->rope_mode = interleaved ? CANDLE_ROPE_INTERLEAVED : CANDLE_ROPE_HALF;
    c->embd_scale = 1.0;
    if (c->n_head_kv <= 0 || c->n_head % c->n_head_kv || c->head_dim <= 0 || c->n_rot <= 0 ||
        c->n_rot > c->head_dim || c->n_rot % 2)
        return candle_set_error(NULL, CANDLE_ERR_FORMAT,
                                "model: inconsistent attention shape: %lld heads, %lld kv heads, "
                                "head dim %lld, rope dims %lld",
                                (long long)c->n_head, (long long)c->n_head_kv,
                                (long long)c->head_dim, (long long)c->n_rot);
    /* Every layer has tensors of its own: this bounds the layer table
     * before anything is allocated for it. */
    if (c->n_layer > candle_weights_n_tensors(g))
        return candle_set_error(NULL, CANDLE_ERR_FORMAT,
                                "model: %s.block_count is %lld but the file has %lld tensors", arch,
                                (long long)c->n_layer, (long long)candle_weights_n_tensors(g));
    return CANDLE_OK;
}

candle_status model_cfg_check_values(const char *arch, const candle_model_config *c) {
    bool ok = c->norm_eps > 0 && c->norm_eps < 1;
    ok = ok && c->rope_base > 0 && isfinite(c->rope_base) && c->rope_base_swa > 0 &&
         isfinite(c->rope_base_swa);
    ok = ok && c->rope_scale > 0 && isfinite(c->rope_scale) && isfinite(c->embd_scale);
    if (ok) return CANDLE_OK;
    return candle_set_error(NULL, CANDLE_ERR_FORMAT,
                            "model: %s metadata out of range: norm epsilon %g (want 0 < eps < 1), "
                            "rope base %g / %g and scale %g (want positive), embedding scale %g",
                            arch, c->norm_eps, c->rope_base, c->rope_base_swa, c->rope_scale,
                            c->embd_scale);
}

bool decoder_layer_is_swa(const candle_model_config *c, int64_t il) {
    if (c->n_swa <= 0) return false;
    return c->swa_pattern <= 0 || il % c->swa_pattern < c->swa_pattern - 1;
}
