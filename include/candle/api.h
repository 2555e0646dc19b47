/* The exported ABI. libcandle.so is built with hidden visibility: only the
 * functions declared with CANDLE_API in include/candle/ are exported, so
 * internal helpers stay free to change (and cannot collide with another
 * library's symbols in the same process). Shared-library versions follow
 * the SOVERSION: it changes when an exported function or a public struct
 * changes incompatibly. */
#ifndef CANDLE_API_H
#define CANDLE_API_H

#if defined(__GNUC__) || defined(__clang__)
#define CANDLE_API __attribute__((visibility("default")))
#else
#define CANDLE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Frees memory the library allocated and handed to the caller
 * (candle_chat_apply's string, candle_gguf_writer_write_memory's image).
 * A host whose malloc is not the library's (another C runtime, a language
 * binding) must use this rather than free(). NULL is a no-op. */
CANDLE_API void candle_free(void *p);

#ifdef __cplusplus
}
#endif
#endif
