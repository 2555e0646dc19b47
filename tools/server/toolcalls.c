/* Tool calling in /v1/chat/completions: the request's tools, tool_choice and
 * parallel_tool_calls checked into srv_tools, assistant messages' tool_calls
 * for the chat template, and a reply's calls (candle_tool_calls_parse) in
 * OpenAI's message.tool_calls shape. */
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

/* OpenAI's rule for function names: ^[a-zA-Z0-9_-]{1,64}$ */
static bool good_name(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 64) return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
              ch == '-'))
            return false;
    }
    return true;
}

static bool has_tool(json_t *tools, const char *name) {
    size_t i;
    json_t *v;
    json_array_foreach(tools, i, v) {
        json_t *nm = json_object_get(json_object_get(v, "function"), "name");
        if (json_is_string(nm) && !strcmp(json_string_value(nm), name)) return true;
    }
    return false;
}

bool srv_tools_parse(json_t *o, bool chat, srv_tools *t, srv_reply *out) {
    memset(t, 0, sizeof *t);
    t->parallel = true;
    /* the deprecated forms of tools: named so a client knows what to send */
    static const char *const old[] = {"functions", "function_call"};
    for (size_t i = 0; i < 2; i++) {
        json_t *v = json_object_get(o, old[i]);
        /* what the server does anyway (none, an empty list) passes */
        if (v && !json_is_null(v) && !json_is_false(v) && !(json_is_array(v) && !json_array_size(v)) &&
            !(json_is_string(v) && !strcmp(json_string_value(v), "none"))) {
            srv_reply_error(out, 400, old[i], "unsupported_parameter",
                            "'%s' (deprecated by OpenAI) is not supported; send 'tools' and 'tool_choice'", old[i]);
            return false;
        }
    }
    json_t *tools = json_object_get(o, "tools");
    json_t *choice = json_object_get(o, "tool_choice");
    if (tools && json_is_null(tools)) tools = NULL;
    if (choice && json_is_null(choice)) choice = NULL;
    if (!chat) {
        const char *k = tools && !(json_is_array(tools) && !json_array_size(tools)) ? "tools"
                        : choice && !(json_is_string(choice) && !strcmp(json_string_value(choice), "none"))
                            ? "tool_choice"
                            : NULL;
        if (k) {
            srv_reply_error(out, 400, k, "unsupported_parameter", "'%s' is only taken by /v1/chat/completions", k);
            return false;
        }
        return true;
    }
    if (!srv_get_bool(o, "parallel_tool_calls", &t->parallel, out)) return false;
    if (tools && !json_is_array(tools)) {
        srv_reply_error(out, 400, "tools", "invalid_type", "'tools' must be an array of {type: function, function}");
        return false;
    }
    size_t i;
    json_t *v;
    if (tools) json_array_foreach(tools, i, v) {
        json_t *type = json_object_get(v, "type"), *fn = json_object_get(v, "function");
        json_t *nm = json_object_get(fn, "name"), *params = json_object_get(fn, "parameters");
        if (!json_is_object(v) || !json_is_string(type) || strcmp(json_string_value(type), "function")) {
            srv_reply_error(out, 400, "tools", "invalid_value", "tools[%zu] must be an object with type 'function'", i);
            return false;
        }
        if (!json_is_object(fn) || !json_is_string(nm) || !good_name(json_string_value(nm))) {
            srv_reply_error(out, 400, "tools", "invalid_value",
                            "tools[%zu].function needs a 'name' of 1 to 64 letters, digits, '_' or '-'", i);
            return false;
        }
        if (params && !json_is_null(params) && !json_is_object(params)) {
            srv_reply_error(out, 400, "tools", "invalid_value",
                            "tools[%zu].function.parameters must be a JSON schema object", i);
            return false;
        }
        for (size_t k = 0; k < i; k++)
            if (!strcmp(json_string_value(json_object_get(json_object_get(json_array_get(tools, k), "function"),
                                                           "name")),
                        json_string_value(nm))) {
                srv_reply_error(out, 400, "tools", "invalid_value", "tools[%zu]: function '%s' is given twice",
                                i, json_string_value(nm));
                return false;
            }
    }
    size_t n_tools = tools ? json_array_size(tools) : 0;
    bool none = false;
    if (choice) {
        const char *cs = json_is_string(choice) ? json_string_value(choice) : NULL;
        if (cs && !strcmp(cs, "none")) {
            none = true;
        } else if (cs && !strcmp(cs, "auto")) {
        } else if (cs && !strcmp(cs, "required")) {
            t->required = true;
        } else if (json_is_object(choice)) {
            json_t *type = json_object_get(choice, "type");
            json_t *nm = json_object_get(json_object_get(choice, "function"), "name");
            if (!json_is_string(type) || strcmp(json_string_value(type), "function") || !json_is_string(nm)) {
                srv_reply_error(out, 400, "tool_choice", "invalid_value",
                                "'tool_choice' as an object must be {type: function, function: {name}}");
                return false;
            }
            if (!tools || !has_tool(tools, json_string_value(nm))) {
                srv_reply_error(out, 400, "tool_choice", "invalid_value",
                                "'tool_choice' names function '%s', which is not in 'tools'", json_string_value(nm));
                return false;
            }
            t->required = true;
            if (!(t->only = strdup(json_string_value(nm)))) goto oom;
        } else {
            srv_reply_error(out, 400, "tool_choice", "invalid_value",
                            "'tool_choice' must be none, auto, required or {type: function, function: {name}}");
            return false;
        }
        if (t->required && !n_tools) {
            srv_reply_error(out, 400, "tool_choice", "invalid_value", "'tool_choice' requires a call but 'tools' is empty");
            return false;
        }
    }
    if (n_tools && !none && !(t->tools = srv_json_dumps(tools, JSON_COMPACT))) goto oom;
    return true;
oom:
    srv_tools_free(t);
    srv_reply_error(out, 500, NULL, NULL, "out of memory");
    return false;
}

bool srv_tools_grammar(const srv_tools *t, candle_tool_format f, candle_grammar **g, srv_reply *out) {
    char *gbnf = NULL;
    candle_status st = candle_tool_grammar(f, t->tools, strlen(t->tools), t->only, t->parallel, &gbnf);
    return srv_grammar_parse(st, gbnf, "tools", g, out);
}

void srv_tools_free(srv_tools *t) {
    free(t->tools);
    free(t->only);
    t->tools = t->only = NULL;
}

bool srv_tools_msg_calls(json_t *msg, size_t index, candle_chat_tool_call **calls, size_t *n, srv_reply *out) {
    *calls = NULL;
    *n = 0;
    json_t *tc = json_object_get(msg, "tool_calls");
    if (!tc || json_is_null(tc)) return true;
    if (!json_is_array(tc)) {
        srv_reply_error(out, 400, "messages", "invalid_type", "messages[%zu].tool_calls must be an array", index);
        return false;
    }
    size_t m = json_array_size(tc), i;
    if (!m) return true;
    *calls = calloc(m, sizeof **calls);
    if (!*calls) {
        srv_reply_error(out, 500, NULL, NULL, "out of memory");
        return false;
    }
    json_t *v;
    json_array_foreach(tc, i, v) {
        json_t *fn = json_object_get(v, "function"), *id = json_object_get(v, "id");
        json_t *nm = json_object_get(fn, "name"), *args = json_object_get(fn, "arguments");
        if (!json_is_string(nm) || (id && !json_is_null(id) && !json_is_string(id)) ||
            !(json_is_string(args) || json_is_object(args))) {
            srv_reply_error(out, 400, "messages", "invalid_value",
                            "messages[%zu].tool_calls[%zu] needs function: {name, arguments (a JSON string)}",
                            index, i);
            goto fail;
        }
        (*calls)[i].id = json_is_string(id) ? json_string_value(id) : NULL;
        (*calls)[i].name = json_string_value(nm);
        char *a = json_is_string(args) ? strdup(json_string_value(args)) : srv_json_dumps(args, JSON_COMPACT);
        if (!a) {
            srv_reply_error(out, 500, NULL, NULL, "out of memory");
            goto fail;
        }
        (*calls)[i].arguments = a;
        *n = i + 1;
    }
    return true;
fail:
    srv_tools_msg_calls_free(*calls, *n);
    *calls = NULL;
    *n = 0;
    return false;
}

void srv_tools_msg_calls_free(candle_chat_tool_call *calls, size_t n) {
    for (size_t i = 0; calls && i < n; i++) free((char *)calls[i].arguments);
    free(calls);
}

/* tool call ids count apart from the request ids (the top bit set), so no
 * call shares a request's id digits */
static atomic_ullong call_seq;

void srv_tool_call_id(char *buf, size_t n) {
    srv_unique_id(buf, n, "call_", atomic_fetch_add(&call_seq, 1) | 1ull << 63);
}

json_t *srv_tool_calls_json(const char *text, size_t len, candle_tool_format f, bool parallel,
                            candle_tool_calls *calls) {
    memset(calls, 0, sizeof *calls);
    if (candle_tool_calls_parse(f, text ? text : "", text ? len : 0, calls) || !calls->n) return NULL;
    size_t n = parallel ? calls->n : 1; /* one call asked for: the first */
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        char id[48];
        srv_tool_call_id(id, sizeof id);
        json_array_append_new(a, json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", id, "type", "function", "function",
                                           "name", calls->calls[i].name, "arguments", calls->calls[i].arguments));
    }
    return a;
}
