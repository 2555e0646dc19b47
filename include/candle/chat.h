/* Chat templates of the supported model families. A GGUF file carries its
 * template as Jinja text (tokenizer.chat_template). Plain conversations are
 * rendered by a small C formatter of the family's format, recognised from
 * that text; conversations with tools, tool calls or tool results are
 * rendered by the template itself (candle_jinja) when it renders tools, and
 * otherwise by the formatter with the tools described in a system message
 * (candle_tool_format CANDLE_TOOL_GENERIC). */
#ifndef CANDLE_CHAT_H
#define CANDLE_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "api.h"
#include "status.h"
#include "tools.h"

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

/* A call an assistant message made (OpenAI's tool_calls[i]). */
typedef struct candle_chat_tool_call {
    const char *id;        /* may be NULL */
    const char *name;      /* the function's name */
    const char *arguments; /* JSON text of an object, as OpenAI sends it (a string
                              that is not one is passed to the template as a string) */
} candle_chat_tool_call;

typedef struct candle_chat_msg {
    const char *role;    /* "system", "user", "assistant", "tool" */
    const char *content; /* NULL: none (an assistant message with tool calls) */
    /* assistant messages: the calls it made */
    const candle_chat_tool_call *tool_calls;
    size_t n_tool_calls;
    /* "tool" messages: the call answered and its function (each may be NULL) */
    const char *tool_call_id;
    const char *name;
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
    /* The template compiled (NULL when there is no template text or it does
     * not parse) and the tool-call format it teaches. Owned. */
    struct candle_jinja *jinja;
    candle_tool_format tool_format;
} candle_chat_template;

/* From a GGUF template text; name (may be NULL) forces a format (the text,
 * when given, is still compiled for tool calling). */
CANDLE_API candle_status candle_chat_template_init(candle_chat_template *t, const char *tmpl,
                                                   size_t len, const char *name);
CANDLE_API void candle_chat_template_free(candle_chat_template *t);

/* Render messages (and the assistant's opening when add_generation_prompt)
 * into a NUL-terminated string the caller frees with candle_free; *out NULL
 * on OOM. BOS is not written: the tokenizer adds it. */
CANDLE_API candle_status candle_chat_apply(const candle_chat_template *t,
                                           const candle_chat_msg *msgs, size_t n,
                                           bool add_generation_prompt, char **out);

typedef struct candle_chat_options {
    bool add_generation_prompt;
    /* JSON text of an OpenAI "tools" array ([{"type": "function", "function":
     * {"name", "description", "parameters"}}]), or NULL for none */
    const char *tools;
    /* The texts of the template's bos_token and eos_token variables (NULL:
     * ""). With strip_bos (set it when the tokenizer adds BOS itself) a
     * rendering that starts with bos_token has it removed, so BOS is not
     * doubled. */
    const char *bos_token, *eos_token;
    bool strip_bos;
    /* Render plain conversations with the Jinja template as well (they take
     * the family formatter otherwise). */
    bool jinja_always;
} candle_chat_options;

/* candle_chat_apply with tools. The template renders (context: messages,
 * tools, add_generation_prompt, bos_token, eos_token) when it has a tool
 * format of its own and the conversation has tools, tool calls or "tool"
 * messages, or when jinja_always; an error of the template (its
 * raise_exception, a limit) is returned. Without a tool format Candle adds a
 * system message that lists the tools and asks for
 * <tool_call>{"name", "arguments"}</tool_call>, writes earlier calls that
 * way and "tool" messages as user turns in <tool_response>. o may be NULL
 * (add_generation_prompt true, nothing else). */
CANDLE_API candle_status candle_chat_render(const candle_chat_template *t, const candle_chat_msg *msgs,
                                            size_t n, const candle_chat_options *o, char **out);

#ifdef __cplusplus
}
#endif
#endif
