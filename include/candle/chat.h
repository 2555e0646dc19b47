/* Chat templates of the supported model families. A GGUF file carries its
 * template as Jinja text (tokenizer.chat_template); Candle does not run
 * Jinja but recognises the family's format from that text and renders it
 * with a small C formatter. */
#ifndef CANDLE_CHAT_H
#define CANDLE_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "api.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum candle_chat_format {
    CANDLE_CHAT_CHATML = 0, /* <|im_start|>role ... <|im_end|>: SmolLM2, Qwen */
    CANDLE_CHAT_LLAMA2,     /* [INST] ... [/INST]: Llama 2, Mistral */
    CANDLE_CHAT_LLAMA3,     /* <|start_header_id|>role<|end_header_id|> */
    CANDLE_CHAT_ZEPHYR,     /* <|user|>\n...</s>: TinyLlama chat */
    CANDLE_CHAT_GEMMA,      /* <start_of_turn>user ... <end_of_turn> */
    CANDLE_CHAT_PHI3,       /* <|user|>\n...<|end|> */
    CANDLE_CHAT_FORMAT_COUNT
} candle_chat_format;

typedef struct candle_chat_msg {
    const char *role; /* "system", "user", "assistant" */
    const char *content;
} candle_chat_msg;

/* "chatml", "llama2", ... */
CANDLE_API const char *candle_chat_format_name(candle_chat_format f);
/* By name; CANDLE_ERR_INVALID_ARG listing the known names if unknown. */
CANDLE_API candle_status candle_chat_format_from_name(const char *name, candle_chat_format *out);
/* Recognise a Jinja template; CANDLE_ERR_UNSUPPORTED if it is none of the
 * known formats (the message says how to name one). */
CANDLE_API candle_status candle_chat_format_detect(const char *tmpl, size_t len,
                                                   candle_chat_format *out);

typedef struct candle_chat_template {
    candle_chat_format format;
    /* System prompt the template inserts when the conversation has none
     * (SmolLM2, Qwen 2.5), or NULL. Owned by the template. */
    char *default_system;
} candle_chat_template;

/* From a GGUF template text; name (may be NULL) forces a format. */
CANDLE_API candle_status candle_chat_template_init(candle_chat_template *t, const char *tmpl,
                                                   size_t len, const char *name);
CANDLE_API void candle_chat_template_free(candle_chat_template *t);

/* Render messages (and the assistant's opening when add_generation_prompt)
 * into a NUL-terminated string the caller frees with candle_free; *out NULL
 * on OOM. BOS is not written: the tokenizer adds it. */
CANDLE_API candle_status candle_chat_apply(const candle_chat_template *t,
                                           const candle_chat_msg *msgs, size_t n,
                                           bool add_generation_prompt, char **out);

#ifdef __cplusplus
}
#endif
#endif
