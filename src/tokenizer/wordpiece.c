/* WordPiece (BERT) encoding. */
#include "core/core-impl.h"
#include "tokenizer-impl.h"

candle_status tok_wpm_encode(const candle_tokenizer *t, const char *text, size_t len, tok_out *o) {
    (void)t;
    (void)text;
    (void)o;
    return candle_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "tokenizer: WordPiece not implemented (%zu bytes)", len);
}
