/* libFuzzer target for tool calling (src/nn/tools.c): an input is
 *   [flags byte] [tools JSON] \0 [a model's reply]
 * (no \0: all tools JSON, no reply); the flags' low bits pick the format,
 * bit 4 parallel calls, bit 5 `only` the first function's name. Beyond "no
 * crash":
 * - candle_tool_calls_parse never fails but on memory; every call has a
 *   name and arguments that are a JSON object, and content is NULL or
 *   trimmed, non-empty text (for a reply without NUL bytes);
 * - candle_tool_call_start is at most the reply's length;
 * - candle_tool_grammar either gives a GBNF that parses, or fails with a
 *   message and no output;
 * - a reply the grammar accepts parses back into one call or more (one
 *   without parallel), each of a function of the tools;
 * - candle_tool_stream gives the same calls fed whole and in pieces (bytes,
 *   or 1..7 bytes), first deltas with a name and nothing else, fragments of
 *   whole valid UTF-8, and a call it marks done has object arguments; with
 *   content deltas on, the same calls, nothing lost fed whole, and content
 *   given out a prefix of the message's (the parser's with calls, else the
 *   reply).
 * Seeds: tests/fuzz/gen_tools_corpus.py. Built with -DCANDLE_FUZZ=ON. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "candle/candle.h"
#include "candle/grammar.h"
#include "core/json-impl.h"
#include "fuzz-check.h"

#define MAX_REPLY 4096 /* longer replies cost time per input more than they find */

static bool is_space(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; }

/* The first "name": "..." of the tools text, for `only` (NULL: none found). */
static char *first_name(const char *t, size_t n) {
    static const char key[] = "\"name\"";
    for (size_t i = 0; i + sizeof key - 1 < n; i++) {
        if (memcmp(t + i, key, sizeof key - 1)) continue;
        size_t j = i + sizeof key - 1;
        while (j < n && (is_space(t[j]) || t[j] == ':')) j++;
        if (j >= n || t[j] != '"') return NULL;
        size_t k = ++j;
        while (k < n && t[k] != '"' && t[k] != '\\') k++;
        if (k >= n || t[k] != '"') return NULL;
        char *s = malloc(k - j + 1);
        if (!s) return NULL;
        memcpy(s, t + j, k - j);
        s[k - j] = 0;
        return s;
    }
    return NULL;
}

/* Strict UTF-8 (as jansson, which writes the deltas, wants it). */
static bool utf8_ok(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t l = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!l || i + l > n) return false;
        unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
        for (size_t k = 1; k < l; k++)
            if (s[i + k] < (k == 1 ? lo : 0x80) || s[i + k] > (k == 1 ? hi : 0xBF)) return false;
        i += l;
    }
    return true;
}

/* The reply streamed in pieces of `step` bytes (0: whole); the calls' names
 * and arguments joined as "name\1args\2..." into *out (malloc'ed; NULL on
 * OOM, which ends the check). With cont (content deltas on): the content
 * concatenated into *cont (malloc'ed), *lost as the stream says. */
static void stream_calls(candle_tool_format f, const char *reply, size_t rlen, size_t step, char **out, char **cont,
                         bool *lost) {
    *out = NULL;
    if (cont) *cont = NULL;
    candle_tool_stream *s = NULL;
    if (candle_tool_stream_new(f, &s)) return;
    size_t cap = 2 * rlen + 64, n = 0, calls = 0, cn = 0;
    char *b = malloc(cap), *cb = cont ? malloc(rlen + 1) : NULL;
    bool ok = b != NULL && (!cont || (cb && !candle_tool_stream_with_content(s)));
    for (size_t at = 0; ok && at <= rlen;) {
        size_t k = step ? step : rlen;
        if (k > rlen - at) k = rlen - at;
        if (at < rlen) ok = !candle_tool_stream_feed(s, reply + at, k);
        else if (cont) ok = !candle_tool_stream_finish(s);
        at = at < rlen ? at + k : rlen + 1;
        candle_tool_delta d;
        while (ok && candle_tool_stream_next(s, &d)) {
            if (d.content) {
                /* never more content than the reply's bytes */
                check(cont && !d.name && !d.arguments && d.len > 0 && cn + d.len <= rlen);
                memcpy(cb + cn, d.content, d.len);
                cn += d.len;
                continue;
            }
            if (d.name) {
                check(d.index == calls && d.len == 0 && d.name[0]);
                calls++;
            } else {
                check(d.index + 1 == calls && d.len > 0 && utf8_ok((const unsigned char *)d.arguments, d.len));
            }
            const char *t = d.name ? d.name : d.arguments;
            size_t tl = d.name ? strlen(d.name) : d.len;
            if (n + tl + 2 > cap) {
                char *nb = realloc(b, (cap = 2 * (n + tl + 2)));
                if (!nb) {
                    ok = false;
                    break;
                }
                b = nb;
            }
            if (d.name && d.index) b[n++] = 2;
            memcpy(b + n, t, tl);
            n += tl;
            if (d.name) b[n++] = 1;
        }
    }
    check(!ok || candle_tool_stream_count(s) == calls);
    for (size_t i = 0; ok && i < calls; i++) {
        candle_tool_stream_call c;
        check(candle_tool_stream_get(s, i, &c));
        if (c.done) {
            json_doc *d = NULL;
            candle_status st = json_parse(&d, c.arguments, c.len, "arguments", NULL);
            check(st == CANDLE_ERR_OOM || (!st && json_root(d)->type == JSON_OBJECT));
            json_free(d);
        }
    }
    if (lost) *lost = candle_tool_stream_content_lost(s);
    candle_tool_stream_free(s);
    if (!ok) {
        free(b);
        free(cb);
        return;
    }
    b[n] = 0;
    *out = b;
    if (cont) {
        cb[cn] = 0;
        *cont = cb;
    }
}

/* Content given out (not lost) is a prefix of the message's: with calls the
 * parser's content, after whitespace given before the first call; without,
 * the reply. */
static void check_content(const char *cont, bool lost, const candle_tool_calls *c, const char *reply, size_t rlen) {
    if (!cont || lost || memchr(reply, 0, rlen)) return;
    size_t n = strlen(cont);
    if (!c->n) {
        check(n <= rlen && !memcmp(cont, reply, n));
        return;
    }
    while (*cont && is_space(*cont)) cont++, n--;
    const char *want = c->content ? c->content : "";
    check(n <= strlen(want) && !memcmp(cont, want, n));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t flags = data[0];
    candle_tool_format f = (candle_tool_format)((flags & 0x0f) % CANDLE_TOOL_FORMAT_COUNT);
    bool parallel = flags & 0x10;
    data++;
    size--;
    const uint8_t *nul = memchr(data, 0, size);
    size_t tlen = nul ? (size_t)(nul - data) : size;
    const char *tools = (const char *)data;
    const char *reply = nul ? (const char *)nul + 1 : "";
    size_t rlen = nul ? size - tlen - 1 : 0;
    if (rlen > MAX_REPLY) rlen = MAX_REPLY;

    candle_tool_calls c = {0};
    candle_status st = candle_tool_calls_parse(f, reply, rlen, &c);
    check(st == CANDLE_OK || st == CANDLE_ERR_OOM);
    for (size_t i = 0; !st && i < c.n; i++) {
        check(c.calls[i].name && c.calls[i].arguments);
        json_doc *d = NULL;
        st = json_parse(&d, c.calls[i].arguments, strlen(c.calls[i].arguments), "arguments", NULL);
        check(st == CANDLE_ERR_OOM || (!st && json_root(d)->type == JSON_OBJECT));
        json_free(d);
        if (st) break;
    }
    st = st == CANDLE_ERR_OOM ? st : CANDLE_OK;
    /* content is a C string: a reply holding NUL bytes ends it early */
    if (!st && c.content && !memchr(reply, 0, rlen)) {
        size_t n = strlen(c.content);
        check(n > 0 && !is_space(c.content[0]) && !is_space(c.content[n - 1]));
    }
    check(candle_tool_call_start(f, reply, rlen) <= rlen);

    char *whole = NULL, *pieces = NULL, *cw = NULL, *cwc = NULL, *cp = NULL, *cpc = NULL;
    size_t step = rlen <= 512 ? 1 : (size_t)(flags >> 5) + 1;
    bool lw = false, lp = false;
    stream_calls(f, reply, rlen, 0, &whole, NULL, NULL);
    stream_calls(f, reply, rlen, step, &pieces, NULL, NULL);
    if (whole && pieces) check(!strcmp(whole, pieces));
    /* with content: the same calls; fed whole, nothing is lost */
    if (!st) {
        stream_calls(f, reply, rlen, 0, &cw, &cwc, &lw);
        stream_calls(f, reply, rlen, step, &cp, &cpc, &lp);
        if (whole && cw) check(!strcmp(whole, cw) && (!lw || memchr(reply, 0, rlen)));
        if (pieces && cp) check(!strcmp(pieces, cp));
        check_content(cwc, lw, &c, reply, rlen);
        check_content(cpc, lp, &c, reply, rlen);
    }
    candle_tool_calls_free(&c);
    free(whole);
    free(pieces);
    free(cw);
    free(cwc);
    free(cp);
    free(cpc);

    char *only = flags & 0x20 ? first_name(tools, tlen) : NULL;
    char *gbnf = NULL;
    /* the builder takes a length: the tools text need not end in NUL */
    st = candle_tool_grammar(f, tools, tlen, only, parallel, &gbnf);
    if (st) {
        check(gbnf == NULL && candle_last_errmsg()[0]);
    } else {
        candle_grammar *g = NULL;
        check(gbnf && !candle_grammar_parse(&g, gbnf, strlen(gbnf)));
        if (g && rlen && candle_grammar_match(g, reply, rlen)) {
            candle_tool_calls back = {0};
            if (!candle_tool_calls_parse(f, reply, rlen, &back)) {
                check(back.n >= 1 && (parallel || back.n == 1));
                for (size_t i = 0; only && i < back.n; i++) check(!strcmp(back.calls[i].name, only));
            }
            candle_tool_calls_free(&back);
        }
        candle_grammar_free(g);
    }
    candle_free(gbnf);
    free(only);
    return 0;
}
