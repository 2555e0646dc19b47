/* The Precompiled normalizer (SentencePiece's precompiled_charsmap). */
#include "core/core-impl.h"
#include "hf-impl.h"

candle_status hf_precompiled_load(hf_norm *n, const char *b64, size_t len, const char *file,
                                  const char *path) {
    (void)n, (void)b64, (void)len;
    return candle_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "%s: %s.type 'Precompiled' is not supported yet",
                            file, path);
}

bool hf_precompiled_normalize(const hf_norm *n, hf_str *cur) {
    (void)n, (void)cur;
    return true;
}
