/* A Jinja2 interpreter for chat templates: the subset Hugging Face chat
 * templates use (tokenizer_config.json's chat_template, GGUF's
 * tokenizer.chat_template), rendered as transformers' apply_chat_template
 * does (jinja2's ImmutableSandboxedEnvironment with trim_blocks and
 * lstrip_blocks, the loopcontrols extension, raise_exception, tojson,
 * strftime_now). Templates are untrusted input: parsing and rendering are
 * bounded (nesting depth, loop iterations, output and memory), and every
 * error names the line and column of the template. */
#ifndef CANDLE_JINJA_H
#define CANDLE_JINJA_H

#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct candle_jinja candle_jinja;

/* Limits of one render; a zero field takes the default. */
typedef struct candle_jinja_limits {
    size_t max_output;       /* bytes of rendered text, captures (macro calls, set blocks) included (0: 1 MiB) */
    size_t max_memory;       /* bytes of values made while rendering (0: 64 MiB) */
    uint64_t max_iterations; /* loop iterations and macro calls in all (0: 1000000) */
    int max_depth;           /* macro calls nested (0 and at most: 16) */
} candle_jinja_limits;

/* Compiles the len bytes of src. A syntax error is CANDLE_ERR_FORMAT
 * ("jinja: line L, column C: ..."); a construct this interpreter does not
 * implement is CANDLE_ERR_UNSUPPORTED, worded the same way. */
CANDLE_API candle_status candle_jinja_parse(const char *src, size_t len, candle_jinja **out);
CANDLE_API void candle_jinja_free(candle_jinja *t);

/* Renders with the members of a JSON object as the template's variables
 * (messages, tools, add_generation_prompt, bos_token, ...). *out is
 * NUL-terminated (*out_len bytes, out_len may be NULL); the caller frees it
 * with candle_free. lim may be NULL. raise_exception(msg) in the template is
 * CANDLE_ERR_INVALID_ARG with msg in the message; an exceeded limit is
 * CANDLE_ERR_INVALID_ARG naming the limit. */
CANDLE_API candle_status candle_jinja_render(const candle_jinja *t, const char *context_json,
                                             size_t context_len, const candle_jinja_limits *lim,
                                             char **out, size_t *out_len);

#ifdef __cplusplus
}
#endif
#endif
