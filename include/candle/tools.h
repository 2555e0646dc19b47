/* Tool calling: the formats in which chat models write function calls, as
 * their chat templates teach them, recognised from the template text;
 * parsing a reply into calls; and a GBNF grammar that makes a model write a
 * call whose arguments follow the function's JSON schema. */
#ifndef CANDLE_TOOLS_H
#define CANDLE_TOOLS_H

#include <stdbool.h>
#include <stddef.h>

#include "api.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum candle_tool_format {
    /* The template renders no tools: Candle describes them in a system
     * message itself and asks for Hermes' wrapper (below). */
    CANDLE_TOOL_GENERIC = 0,
    /* <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>, one block
     * per call: Hermes 2/3, Qwen 2.5, Qwen 3, SmolLM3 */
    CANDLE_TOOL_HERMES,
    /* {"name": N, "parameters": {...}} as the whole reply (several joined by
     * ';' or newlines), optionally after <|python_tag|>: Llama 3.1/3.2/3.3 */
    CANDLE_TOOL_LLAMA3,
    /* [TOOL_CALLS][{"name": N, "arguments": {...}, "id": "..."}, ...]:
     * Mistral (Nemo, Small); the [TOOL_CALLS] marker may be missing from a
     * reply (a control token the detokenizer does not print) */
    CANDLE_TOOL_MISTRAL,
    CANDLE_TOOL_FORMAT_COUNT
} candle_tool_format;

/* "generic", "hermes", "llama3", "mistral". */
CANDLE_API const char *candle_tool_format_name(candle_tool_format f);
/* The format a chat template's text (Jinja source; may be NULL) teaches:
 * Hermes when it writes <tool_call>, Mistral for [TOOL_CALLS], Llama 3 for
 * <|python_tag|> or a header template that renders tools, else generic
 * (functionary's <function=...> format included: not parsed). */
CANDLE_API candle_tool_format candle_tool_format_detect(const char *tmpl, size_t len);

typedef struct candle_tool_call {
    char *id;        /* as the model wrote it (Mistral), or NULL */
    char *name;      /* the function's name */
    char *arguments; /* a JSON object, compact ("{}" when the model gave none) */
} candle_tool_call;

typedef struct candle_tool_calls {
    candle_tool_call *calls;
    size_t n;
    /* The reply's text outside the calls, whitespace trimmed; NULL when
     * there is none. */
    char *content;
} candle_tool_calls;

/* Splits a model's reply (len bytes, UTF-8) into calls and other text. A
 * reply without any call is CANDLE_OK with n == 0 and content the whole
 * (trimmed) text. A call block that is not valid JSON, has no string
 * "name" or has arguments that are not an object is not a call: its text
 * stays in content. Also accepts "arguments" as a JSON string holding an
 * object (some fine-tunes write that). CANDLE_ERR_OOM only on memory;
 * every other input is a result. Free with candle_tool_calls_free. */
CANDLE_API candle_status candle_tool_calls_parse(candle_tool_format f, const char *text, size_t len,
                                                 candle_tool_calls *out);
CANDLE_API void candle_tool_calls_free(candle_tool_calls *c);

/* Where a call may start in text[0..len): the offset of the format's opening
 * (a complete one, or a prefix of it at the very end of the text, so a
 * stream holds those bytes back until it knows), or len when none. Llama
 * 3's bare JSON counts only at the start of the reply (after whitespace). */
CANDLE_API size_t candle_tool_call_start(candle_tool_format f, const char *text, size_t len);

/* A GBNF grammar whose sentences are calls in format f of the functions of
 * tools_json (an OpenAI "tools" array: [{"type": "function", "function":
 * {"name", "description", "parameters"}}]), arguments constrained by each
 * function's "parameters" schema (candle_json_schema_to_gbnf; a function
 * without one takes any object). only (may be NULL) restricts it to the
 * function of that name; parallel allows one or more calls, else exactly
 * one. Mistral's grammar leaves out the [TOOL_CALLS] marker (a control
 * token, which grammars do not see): the array alone. A schema keyword that cannot be enforced, a bad tools array or an
 * unknown `only` is CANDLE_ERR_INVALID_ARG naming it. *out is freed with
 * candle_free. */
CANDLE_API candle_status candle_tool_grammar(candle_tool_format f, const char *tools_json, size_t len,
                                             const char *only, bool parallel, char **out);

/* --- streaming ------------------------------------------------------------------
 * Calls read from a reply as it is generated, for a server that streams
 * them as OpenAI's tool_calls deltas: each call's name once it is known,
 * then its arguments' text as it grows. Feed the reply's bytes in order
 * (pieces split anywhere, inside a UTF-8 character too) and take the
 * deltas with candle_tool_stream_next.
 *
 * What is given out is never taken back: a call's arguments, concatenated
 * over its deltas, are a prefix of the compact JSON text that
 * candle_tool_calls_parse gives for it, and equal to it once the call's
 * JSON has closed. The stream reads the calls the parser reads, in the same
 * order (Hermes <tool_call> blocks, a bare or ```json-fenced call object or
 * array of them; Llama 3's bare objects after an optional <|python_tag|>;
 * Mistral's array after [TOOL_CALLS] or opening the reply). It cannot know
 * the whole reply: a call cut off by the end of generation has given out
 * part of its arguments; a call object written in a way the parser then
 * refuses (invalid JSON after a known name and an opened arguments object,
 * text after a bare call) has been given out though the parser finds no
 * call; "parameters" before "arguments" in one object streams the first. A
 * call becomes visible once its name is known and its arguments object has
 * opened (or, for arguments written as a JSON string, when the call closes). */
typedef struct candle_tool_stream candle_tool_stream;

typedef struct candle_tool_delta {
    size_t index;          /* the call's index in the reply: 0, 1, ... in order */
    const char *name;      /* a call's first delta: its function's name (and len 0); else NULL */
    const char *arguments; /* len bytes of the call's arguments, whole UTF-8 characters */
    size_t len;
    /* a content delta (candle_tool_stream_with_content): len bytes of the
     * reply's text outside the calls; name and arguments are NULL, index is
     * the call whose deltas come next */
    const char *content;
} candle_tool_delta;

typedef struct candle_tool_stream_call {
    const char *name;
    const char *arguments; /* len bytes: what the deltas gave out so far */
    size_t len;
    /* the call's JSON has closed and parsed as a call: the arguments are
     * complete (broken: it did not parse, after it had become visible) */
    bool done, broken;
} candle_tool_stream_call;

CANDLE_API candle_status candle_tool_stream_new(candle_tool_format f, candle_tool_stream **out);
CANDLE_API void candle_tool_stream_free(candle_tool_stream *s);
/* The reply's next len bytes. CANDLE_ERR_OOM only on memory (the stream
 * then gives out nothing more); any text is accepted. */
CANDLE_API candle_status candle_tool_stream_feed(candle_tool_stream *s, const char *text, size_t len);
/* The next delta, in order (a call's first, then its fragments, then the
 * next call's); false when there is none until more text is fed. d's
 * pointers stay valid until the next feed or free. */
CANDLE_API bool candle_tool_stream_next(candle_tool_stream *s, candle_tool_delta *d);
/* Calls that have become visible (some of whose deltas may still be to
 * take), and call i's state. */
CANDLE_API size_t candle_tool_stream_count(const candle_tool_stream *s);
/* Content too (call before the first feed): next() also gives the reply's
 * text outside the calls, in the reply's order among the calls' deltas, so
 * that text after a call streams as it comes. Concatenated, the content
 * deltas are what a server's message holds: with calls (as
 * candle_tool_calls_parse reads the whole reply) its content, the text
 * pieces trimmed and joined by "\n"; without, the whole text. Before a
 * call is read the text streams raw, whitespace at its end held back, and
 * from where a call may open nothing is given until that is known; so
 * whitespace opening text that precedes a call is given out (the parser
 * trims it) and stays ahead of the content. Text after a bare or fenced
 * call object, and text around Llama 3 / Mistral calls (the parser finds
 * none then), comes at candle_tool_stream_finish. Where what was given out
 * is not how the content turns out (a <tool_call> block the parser refuses,
 * before the first call), no more content is given
 * (candle_tool_stream_content_lost). A call shown and not read whole (cut
 * off by the end of generation) ends the content: its text is not given
 * again as content. Whole UTF-8 characters: one cut off at the very end is
 * left out. */
CANDLE_API candle_status candle_tool_stream_with_content(candle_tool_stream *s);
/* The reply has ended: next() then gives the rest of the content. */
CANDLE_API candle_status candle_tool_stream_finish(candle_tool_stream *s);
CANDLE_API bool candle_tool_stream_content_lost(const candle_tool_stream *s);
CANDLE_API bool candle_tool_stream_get(const candle_tool_stream *s, size_t i, candle_tool_stream_call *out);

#ifdef __cplusplus
}
#endif
#endif
