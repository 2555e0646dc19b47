/* The tokenizer that comes with a model's weights: a GGUF file's vocabulary,
 * or a Hugging Face directory's tokenizer.json (with tokenizer_config.json
 * when there is one). */
#include <stdio.h>
#include <sys/stat.h>

#include "candle/tokenizer.h"
#include "model-impl.h"

static candle_status from_weights(candle_tokenizer **out, const candle_weights *w) {
    const candle_gguf *g = candle_weights_gguf(w);
    if (g) return candle_tokenizer_from_gguf(out, g);
    char tok[4096], cfg[4096];
    struct stat st;
    snprintf(tok, sizeof tok, "%s/tokenizer.json", candle_weights_path(w));
    snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", candle_weights_path(w));
    if (stat(tok, &st))
        return cdl_set_error(NULL, CANDLE_ERR_IO, "%s: no tokenizer.json", candle_weights_path(w));
    return candle_tokenizer_from_hf_file(out, tok, stat(cfg, &st) ? NULL : cfg);
}

/* Token ids past the embedding's rows would index outside it: refused,
 * unless they are all added tokens that plain text never yields
 * (EmbeddingGemma's <image_soft_token>, one past its 262144 rows; the
 * forward refuses such an id by range). Fewer tokens than rows is allowed:
 * Hugging Face checkpoints pad the embedding (e.g. Qwen2's 151936 rows for
 * 151665 tokens). */
static candle_status check_rows(const candle_tokenizer *t, const candle_weights *w) {
    int64_t i = candle_weights_find_tensor(w, "token_embd.weight");
    if (i < 0) return CANDLE_OK;
    const candle_weights_tensor_info *ti = candle_weights_tensor(w, i);
    int64_t rows = ti->rank >= 1 ? ti->shape[0] : 0;
    int32_t id = (int32_t)(rows < 0 ? 0 : rows);
    while (id < candle_tokenizer_n_vocab(t) && candle_tokenizer_is_added(t, id) && id - rows < 64) id++;
    if (candle_tokenizer_n_vocab(t) <= id) return CANDLE_OK;
    return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                            "tokenizer: the vocabulary has %d tokens but token_embd.weight has "
                            "%lld rows; the model cannot embed the tokens past its rows",
                            (int)candle_tokenizer_n_vocab(t), (long long)rows);
}

candle_status candle_tokenizer_from_weights(candle_tokenizer **out, const candle_weights *w) {
    if (!out || !w)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tokenizer_from_weights: NULL argument");
    candle_tokenizer *t = NULL;
    candle_status s = from_weights(&t, w);
    if (!s) s = check_rows(t, w);
    if (s) {
        candle_tokenizer_free(t);
        return s;
    }
    *out = t;
    return CANDLE_OK;
}
