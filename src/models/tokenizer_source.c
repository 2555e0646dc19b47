/* The tokenizer that comes with a model's weights: a GGUF file's vocabulary,
 * or a Hugging Face directory's tokenizer.json (with tokenizer_config.json
 * when there is one). */
#include <stdio.h>
#include <sys/stat.h>

#include "candle/tokenizer.h"
#include "model-impl.h"

candle_status candle_tokenizer_from_weights(candle_tokenizer **out, const candle_weights *w) {
    if (!out || !w)
        return candle_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tokenizer_from_weights: NULL argument");
    const candle_gguf *g = candle_weights_gguf(w);
    if (g) return candle_tokenizer_from_gguf(out, g);
    char tok[4096], cfg[4096];
    struct stat st;
    snprintf(tok, sizeof tok, "%s/tokenizer.json", candle_weights_path(w));
    snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", candle_weights_path(w));
    if (stat(tok, &st))
        return candle_set_error(NULL, CANDLE_ERR_IO, "%s: no tokenizer.json", candle_weights_path(w));
    return candle_tokenizer_from_hf_file(out, tok, stat(cfg, &st) ? NULL : cfg);
}
