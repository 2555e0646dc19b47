/* Streamed tool calls (candle_tool_stream): replies of every format fed
 * whole, byte by byte (splitting UTF-8 characters), in pieces of 1 to 7
 * bytes, split in two at every byte and in the pieces a real tokenizer
 * makes (the tiny Qwen2's, tests/data/tiny: byte fallback splits characters); the deltas, concatenated per
 * call, must equal what candle_tool_calls_parse gives for the whole reply,
 * each first delta must carry the name and nothing of the arguments, every
 * fragment must be whole UTF-8 characters, and a reply cut off anywhere
 * must have given out only prefixes of the whole reply's calls. */
#include "candle/candle.h"
#include "candle/tools.h"
#include "test.h"

typedef struct got {
    size_t n;
    char name[8][64];
    char args[8][512];
    int fragments[8]; /* argument deltas of each call */
    bool ok;          /* every delta well formed */
    char why[200];
    /* with content: the content deltas concatenated, and the transcript:
     * content with '@' where a call's first delta came; lost at the end */
    char content[1024], trace[1024];
    bool lost;
    const candle_tool_calls *want; /* a call must be whole before content after it */
} got;

static void cat(char *b, size_t cap, const char *s, size_t n) {
    size_t have = strlen(b);
    if (have + n < cap) {
        memcpy(b + have, s, n);
        b[have + n] = 0;
    }
}

static bool utf8_whole(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = (unsigned char)s[i];
        size_t l = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
        if (!l || i + l > n) return false;
        for (size_t k = 1; k < l; k++)
            if (((unsigned char)s[i + k] & 0xC0) != 0x80) return false;
        i += l;
    }
    return true;
}

static void bad(got *g, const char *why) {
    if (g->ok) snprintf(g->why, sizeof g->why, "%s", why);
    g->ok = false;
}

static void drain(candle_tool_stream *s, got *g) {
    candle_tool_delta d;
    while (candle_tool_stream_next(s, &d)) {
        if (d.content) {
            if (d.name || d.arguments || !d.len) bad(g, "a content delta with a name, arguments or nothing");
            if (!utf8_whole(d.content, d.len)) bad(g, "content that is not whole UTF-8 characters");
            if (g->n && g->want && g->n <= g->want->n && strcmp(g->args[g->n - 1], g->want->calls[g->n - 1].arguments))
                bad(g, "content before the end of the call it follows");
            cat(g->content, sizeof g->content, d.content, d.len);
            cat(g->trace, sizeof g->trace, d.content, d.len);
            continue;
        }
        if (d.name) {
            cat(g->trace, sizeof g->trace, "@", 1);
            if (d.index != g->n || g->n == 8) {
                bad(g, "a first delta out of order");
                continue;
            }
            if (d.len) bad(g, "a first delta with arguments");
            snprintf(g->name[g->n], sizeof g->name[0], "%s", d.name);
            g->args[g->n][0] = 0;
            g->n++;
            continue;
        }
        if (d.index + 1 != g->n) {
            bad(g, "a fragment not of the last call");
            continue;
        }
        if (!utf8_whole(d.arguments, d.len)) bad(g, "a fragment that is not whole UTF-8 characters");
        if (d.len == 0) bad(g, "an empty fragment");
        size_t have = strlen(g->args[d.index]);
        if (have + d.len < sizeof g->args[0]) {
            memcpy(g->args[d.index] + have, d.arguments, d.len);
            g->args[d.index][have + d.len] = 0;
        }
        g->fragments[d.index]++;
    }
}

/* text fed in the pieces that cut[] ends (ascending, the last == len). */
static got feed_as(candle_tool_format f, const char *text, const size_t *cut, size_t n_cut,
                   const candle_tool_calls *content) {
    got g = {.ok = true, .want = content};
    candle_tool_stream *s = NULL;
    if (candle_tool_stream_new(f, &s) || (content && candle_tool_stream_with_content(s))) {
        bad(&g, "new failed");
        candle_tool_stream_free(s);
        return g;
    }
    size_t from = 0;
    for (size_t i = 0; i < n_cut; i++) {
        if (candle_tool_stream_feed(s, text + from, cut[i] - from)) bad(&g, "feed failed");
        from = cut[i];
        drain(s, &g);
    }
    if (content) {
        if (candle_tool_stream_finish(s)) bad(&g, "finish failed");
        drain(s, &g);
        g.lost = candle_tool_stream_content_lost(s);
    }
    if (candle_tool_stream_count(s) != g.n) bad(&g, "count differs from the calls given out");
    for (size_t i = 0; i < g.n; i++) {
        candle_tool_stream_call c;
        if (!candle_tool_stream_get(s, i, &c) || strcmp(c.name, g.name[i]) || c.len != strlen(g.args[i]) ||
            memcmp(c.arguments, g.args[i], c.len))
            bad(&g, "get differs from the deltas");
    }
    candle_tool_stream_free(s);
    return g;
}

static got feed(candle_tool_format f, const char *text, const size_t *cut, size_t n_cut) {
    return feed_as(f, text, cut, n_cut, NULL);
}

/* Does g equal the parse (prefix: only prefixes of its calls)? */
static bool same(const got *g, const candle_tool_calls *want, bool prefix) {
    if (prefix ? g->n > want->n : g->n != want->n) return false;
    for (size_t i = 0; i < g->n; i++) {
        size_t m = strlen(g->args[i]);
        if (strcmp(g->name[i], want->calls[i].name)) return false;
        if (prefix ? strncmp(g->args[i], want->calls[i].arguments, m) : strcmp(g->args[i], want->calls[i].arguments))
            return false;
    }
    return true;
}

static size_t cuts[4096];
static int n_cases;

/* With content: the content deltas are the message's content (with calls,
 * the parser's; else the whole text), none lost, and the transcript (where
 * the calls came among the content) is trace when given. */
static bool content_ok(const got *g, const char *text, const candle_tool_calls *want, const char *trace) {
    if (!g->ok || g->lost) return false;
    if (trace && strcmp(g->trace, trace)) return false;
    if (!want->n) return !strcmp(g->content, text);
    const char *c = g->content;
    while (*c == ' ' || *c == '\n' || *c == '\t' || *c == '\r') c++; /* whitespace given before a call */
    return !strcmp(c, want->content ? want->content : "");
}

/* One reply, every way of feeding it, without and with content. */
/* streams: the arguments come as they are written (not: a string holding
 * them, or written before the name, which come whole). */
static void reply_full(candle_tool_format f, const char *text, bool streams, const char *trace) {
    size_t len = strlen(text);
    candle_tool_calls want;
    CHECK_OK(NULL, candle_tool_calls_parse(f, text, len, &want));
    const char *fmt = candle_tool_format_name(f);
    n_cases++;
    for (int cm = 0; cm < 2; cm++) {
        const candle_tool_calls *cw = cm ? &want : NULL;
        const char *mode = cm ? " (content)" : "";
#define CONTENT_OK(how) \
    CHECK_MSG(!cm || content_ok(&g, text, &want, trace), "%s %s%s [%s]: content [%s] trace [%s] lost %d, want [%s] %s", \
              fmt, how, mode, text, g.content, g.trace, g.lost, want.content ? want.content : "", g.why)
        /* whole */
        cuts[0] = len;
        got g = feed_as(f, text, cuts, 1, cw);
        CHECK_MSG(g.ok && same(&g, &want, false), "%s whole%s [%s]: %zu calls (%s) vs %zu (%s) %s", fmt, mode, text,
                  g.n, g.n ? g.args[0] : "", want.n, want.n ? want.calls[0].arguments : "", g.why);
        CONTENT_OK("whole");
        /* byte by byte: also the arguments arrive in more than one fragment */
        for (size_t i = 0; i < len; i++) cuts[i] = i + 1;
        g = feed_as(f, text, cuts, len, cw);
        CHECK_MSG(g.ok && same(&g, &want, false), "%s bytes%s [%s]: %zu calls vs %zu, %s", fmt, mode, text, g.n,
                  want.n, g.why);
        CONTENT_OK("bytes");
        for (size_t i = 0; i < g.n && i < want.n; i++)
            CHECK_MSG(!streams || strlen(want.calls[i].arguments) <= 2 || g.fragments[i] > 1,
                      "%s bytes [%s]: call %zu's arguments came in %d fragment(s)", fmt, text, i, g.fragments[i]);
        /* pieces of 1..7 bytes */
        for (int start = 1; start <= 7; start++) {
            size_t n = 0, at = 0;
            for (int k = start; at < len; k = k % 7 + 1) {
                at = at + (size_t)k < len ? at + (size_t)k : len;
                cuts[n++] = at;
            }
            g = feed_as(f, text, cuts, n, cw);
            CHECK_MSG(g.ok && same(&g, &want, false), "%s pieces from %d%s [%s]: %s", fmt, start, mode, text, g.why);
            CONTENT_OK("pieces");
        }
        /* in two at every byte; and cut off there (a prefix of the reply) */
        bool two = true, cut = true;
        for (size_t p = 1; p < len; p++) {
            cuts[0] = p;
            cuts[1] = len;
            g = feed_as(f, text, cuts, 2, cw);
            if (!g.ok || !same(&g, &want, false) || (cm && !content_ok(&g, text, &want, trace))) {
                if (two) printf("  split at %zu%s: %zu calls, content [%s] %s\n", p, mode, g.n, g.content, g.why);
                two = false;
            }
            g = feed_as(f, text, cuts, 1, cw);
            if (!g.ok || !same(&g, &want, true)) {
                if (cut) printf("  cut at %zu%s: %zu calls, %s\n", p, mode, g.n, g.why);
                cut = false;
            }
        }
        CHECK_MSG(two, "%s%s [%s]: split in two somewhere, the calls or the content differ", fmt, mode, text);
        CHECK_MSG(cut, "%s%s [%s]: cut off somewhere, a call that is not a prefix of the whole reply's", fmt, mode,
                  text);
#undef CONTENT_OK
    }
    candle_tool_calls_free(&want);
}

static void reply_as(candle_tool_format f, const char *text, bool streams) { reply_full(f, text, streams, NULL); }
static void reply(candle_tool_format f, const char *text) { reply_as(f, text, true); }

static void test_formats(void) {
    const candle_tool_format H = CANDLE_TOOL_HERMES, G = CANDLE_TOOL_GENERIC, L = CANDLE_TOOL_LLAMA3,
                             M = CANDLE_TOOL_MISTRAL;
    reply(H, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Z\xc3\xbcrich\", \"unit\": "
             "\"celsius\"}}\n</tool_call>");
    reply(H, "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": [1, 2], \"s\": \"two words \\\" }\"}}"
             "\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"t\": \"\xe6\x9d\xb1\xe4\xba\xac "
             "\xf0\x9f\x8c\xa7\"}}\n</tool_call>");
    reply(H, "<tool_call>{\"name\": \"a\", \"arguments\": {}}");                      /* no closing tag */
    reply_as(H, "<tool_call>{\"name\": \"a\", \"arguments\": \"{\\\"k\\\": 1}\"}</tool_call>", false); /* a string */
    reply(H, "<tool_call>{\"name\": \"a\"}</tool_call>");                             /* no arguments */
    reply_as(H, "<tool_call>{\"arguments\": {\"q\": 1, \"r\": [true, null]}, \"name\": \"a\"}</tool_call>", false);
    reply(H, "<tool_call>\n{\"name\": \"get\\u005fweather\", \"id\": \"x\", \"arguments\": {\"a\": {\"b\": [1, "
             "{\"c\": \"d\\n e\"}]}, \"e\": \"\\\\\", \"f\": \"\\u00e9\"}}\n</tool_call>");
    reply(H, "<tool_call>{\"n\\u0061me\": \"a\", \"arguments\": {\"s\": \"</tool_call> <tool_call>\"}}</tool_call>");
    reply(H, "<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": 1}}</tool_call><tool_call>{\"name\": \"b\", "
             "\"arguments\": {\"y\": 2}}</tool_call><tool_call>{\"name\": \"c\", \"arguments\": {}}</tool_call>");
    /* not calls */
    reply(H, "<tool_call>{\"arguments\": {}}</tool_call> tail");
    reply(H, "<tool_call>{\"name\": \"a\", \"arguments\": 3}</tool_call>");
    reply(H, "<tool_call>{\"name\": 7, \"arguments\": {}}</tool_call>");
    reply(H, "  The weather is fine.  ");
    reply(H, "");
    reply(H, "<tool_c");
    reply(H, "```python\nprint(1)\n```");
    reply(H, "```json\n{\"city\": \"Paris\"}\n```");
    reply(H, "Here:\n```json\n{\"name\": \"a\"}\n```");
    /* the bare JSON of a call, and ```json fences */
    reply(H, " {\"name\": \"a\", \"arguments\": {\"q\": true}} ");
    reply(H, "```json\n{\"name\": \"a\", \"arguments\": {\"q\": \"x```\"}}\n```\n");
    reply(H, " ```json\n[{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\"}]\n```");
    reply(H, "```json\n{\"name\": \"a\", \"arguments\": {\"n\": 1}}");
    reply(G, "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"k\": \"v v\"}}\n</tool_call>");

    reply(L, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"unit\": \"celsius\"}}");
    reply(L, "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"n\": -1.5e3}}");
    reply(L, "  {\"name\":\"a\",\"parameters\":{\"x\":\"\xc3\xa9\"}}\n{\"name\":\"b\",\"parameters\":{}}");
    reply(L, "It is sunny in Oslo.");
    reply(L, "<|python_tag|>");

    reply(M, "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}, \"id\": \"abc123XYZ\"}]");
    reply(M, "[{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {\"y\": null}}]");
    reply(M, "Sure.[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"city\": \"S\xc3\xa3o Paulo\"}}]");
    reply(M, "No tools needed.");
}

/* A reply cut before its end (max_tokens): what was given out is a prefix
 * of the call; the parser, which sees no whole call, finds none. */
static void test_cut_off(void) {
    const char *t = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par";
    size_t c = strlen(t);
    got g = feed(CANDLE_TOOL_HERMES, t, &c, 1);
    CHECK_MSG(g.ok && g.n == 1 && !strcmp(g.name[0], "get_weather") && !strcmp(g.args[0], "{\"city\":\"Par"),
              "cut off: %zu calls [%s] %s", g.n, g.n ? g.args[0] : "", g.why);
    candle_tool_stream *s = NULL;
    CHECK_OK(NULL, candle_tool_stream_new(CANDLE_TOOL_HERMES, &s));
    CHECK_OK(NULL, candle_tool_stream_feed(s, t, c));
    candle_tool_stream_call k;
    CHECK(candle_tool_stream_get(s, 0, &k) && !k.done && !k.broken);
    CHECK(!candle_tool_stream_get(s, 1, &k));
    /* a broken object after its name and arguments showed: marked so */
    const char *rest = "is\"} oops}";
    CHECK_OK(NULL, candle_tool_stream_feed(s, rest, strlen(rest)));
    CHECK(candle_tool_stream_get(s, 0, &k) && k.broken && !k.done);
    candle_tool_stream_free(s);
    /* bad arguments */
    CHECK(candle_tool_stream_new(CANDLE_TOOL_FORMAT_COUNT, &s) == CANDLE_ERR_INVALID_ARG);
    CHECK(candle_tool_stream_new(CANDLE_TOOL_HERMES, NULL) == CANDLE_ERR_INVALID_ARG);
    candle_tool_stream_free(NULL);
    CHECK(candle_tool_stream_count(NULL) == 0);
}

/* Text after and between calls streams as content, in order with the
 * calls' deltas ('@' in the transcript: a call's first delta), and
 * concatenates to the parser's content. */
static void test_content(void) {
    const candle_tool_format H = CANDLE_TOOL_HERMES, G = CANDLE_TOOL_GENERIC, L = CANDLE_TOOL_LLAMA3,
                             M = CANDLE_TOOL_MISTRAL;
    const char *a = "{\"name\": \"a\", \"arguments\": {\"x\": 1, \"s\": \"</tool_call>\"}}";
    const char *b = "{\"name\": \"b\", \"arguments\": {}}";
    char t[512];
    snprintf(t, sizeof t, "<tool_call>\n%s\n</tool_call>\nDone: it is 18 \xc3\xa9""C.", a);
    reply_full(H, t, true, "@Done: it is 18 \xc3\xa9""C.");
    reply_full(G, t, true, "@Done: it is 18 \xc3\xa9""C.");
    snprintf(t, sizeof t, "Let me look.\n<tool_call>%s</tool_call>\nBetween.  <tool_call> %s </tool_call> After "
             "\xe6\x9d\xb1 \n", a, b);
    reply_full(H, t, true, "Let me look.@\nBetween.@\nAfter \xe6\x9d\xb1");
    snprintf(t, sizeof t, "<tool_call>%s</tool_call><tool_call>%s</tool_call>\n\n", a, b);
    reply_full(H, t, true, "@@");
    snprintf(t, sizeof t, "<tool_call>%s</tool_call> tail <tool_c", a); /* an opening that never came */
    reply_full(H, t, true, "@tail <tool_c");
    snprintf(t, sizeof t, "<tool_call>%s</tool_call> x <tool_call>%s", a, b); /* the last block not closed */
    reply_full(H, t, true, "@x@");
    /* leading whitespace: given raw when the text comes before the call is
     * read (as the transcript depends on the pieces, it is not compared) */
    snprintf(t, sizeof t, "  Hi\n<tool_call>%s</tool_call>", a);
    reply_full(H, t, true, NULL);
    reply_full(H, " No calls here. ", true, " No calls here. ");
    reply_full(H, "<tool_call>{\"arguments\": {}}</tool_call> tail", true, "<tool_call>{\"arguments\": {}}</tool_call> tail");
    reply_full(L, "Checking.<|python_tag|>{\"name\": \"a\", \"parameters\": {}}", true, NULL);
    reply_full(M, "Sure. [TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"n\": 1}}]", true, "Sure.@");
    reply_full(H, "```json\n{\"name\": \"a\", \"arguments\": {\"n\": 1}}\n```", true, "@");

    /* a refused block before the first call: the raw text given out is not
     * the parser's content, so no more content comes (the calls still do) */
    snprintf(t, sizeof t, "<tool_call>oops</tool_call> x <tool_call>%s</tool_call> after", b);
    size_t len = strlen(t);
    candle_tool_calls want;
    CHECK_OK(NULL, candle_tool_calls_parse(H, t, len, &want));
    for (size_t i = 0; i < len; i++) cuts[i] = i + 1; /* byte by byte: the raw text goes out first */
    got g = feed_as(H, t, cuts, len, &want);
    CHECK_MSG(g.ok && g.lost && same(&g, &want, false) && !strcmp(g.content, "<tool_call>oops</tool_call> x"),
              "refused block first: lost %d content [%s] %s", g.lost, g.content, g.why);
    candle_tool_calls_free(&want);

    /* the API's edges */
    candle_tool_stream *s = NULL;
    CHECK_OK(NULL, candle_tool_stream_new(H, &s));
    CHECK_OK(NULL, candle_tool_stream_feed(s, "x", 1));
    CHECK(candle_tool_stream_with_content(s) == CANDLE_ERR_INVALID_ARG); /* after a feed */
    CHECK_OK(NULL, candle_tool_stream_finish(s));
    candle_tool_delta d;
    CHECK(!candle_tool_stream_next(s, &d)); /* no content asked for */
    CHECK_OK(NULL, candle_tool_stream_finish(s));
    candle_tool_stream_free(s);
    CHECK(candle_tool_stream_with_content(NULL) == CANDLE_ERR_INVALID_ARG);
    CHECK(candle_tool_stream_finish(NULL) == CANDLE_ERR_INVALID_ARG);
    CHECK(!candle_tool_stream_content_lost(NULL));
    /* nothing fed */
    CHECK_OK(NULL, candle_tool_stream_new(H, &s));
    CHECK_OK(NULL, candle_tool_stream_with_content(s));
    CHECK_OK(NULL, candle_tool_stream_finish(s));
    CHECK(!candle_tool_stream_next(s, &d) && !candle_tool_stream_content_lost(s));
    candle_tool_stream_free(s);
}

/* The pieces a real tokenizer makes: every token's bytes (a character
 * split over byte-fallback tokens included), fed one by one. */
static void test_tokens(const char *src) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/tiny/qwen2.gguf", src);
    candle_gguf *gg = NULL;
    candle_tokenizer *tok = NULL;
    if (candle_gguf_open(&gg, path, NULL) || candle_tokenizer_from_gguf(&tok, gg)) {
        test_skip("tools_stream tokens", "cannot read the tokenizer of %s: %s", path, candle_last_errmsg());
        candle_gguf_close(gg);
        return;
    }
    const char *texts[] = {
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"K\xc3\xb8""benhavn \xe6\x9d\xb1\xe4\xba\xac"
        " \xf0\x9f\x8c\xa7\", \"unit\": \"celsius\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"add\", \"arguments\": "
        "{\"a\": 2, \"b\": -3}}\n</tool_call>",
        "```json\n[{\"name\": \"add\", \"arguments\": {\"a\": 40, \"b\": 2}}]\n```",
        "Checking.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}}\n</tool_call>\nIt is "
        "18 \xc2\xb0""C in K\xc3\xb8""benhavn \xf0\x9f\x8c\xa7 today.\n",
    };
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
        const char *text = texts[t];
        int32_t ids[512];
        int64_t n = 0;
        CHECK_OK(NULL, candle_tokenizer_encode(tok, text, strlen(text), false, false, ids, 512, &n));
        size_t at = 0, nc = 0;
        bool spells = true;
        for (int64_t i = 0; i < n; i++) {
            char piece[64];
            size_t pl = 0;
            if (candle_tokenizer_token_bytes(tok, ids[i], false, piece, sizeof piece, &pl)) spells = false;
            if (i == 0 && pl == 1 && piece[0] == ' ' && text[0] != ' ') continue; /* its SentencePiece space prefix */
            if (at + pl > strlen(text) || memcmp(text + at, piece, pl)) spells = false;
            at += pl;
            if (pl) cuts[nc++] = at;
        }
        CHECK_MSG(spells && at == strlen(text), "tokens spell the reply %zu (%zu of %zu bytes)", t, at, strlen(text));
        if (!spells) continue;
        candle_tool_calls want;
        CHECK_OK(NULL, candle_tool_calls_parse(CANDLE_TOOL_HERMES, text, strlen(text), &want));
        got g = feed(CANDLE_TOOL_HERMES, text, cuts, nc);
        CHECK_MSG(g.ok && want.n >= 1 && same(&g, &want, false), "tokens %zu (%lld): %zu calls vs %zu, %s", t,
                  (long long)n, g.n, want.n, g.why);
        /* with content: the same calls, and the parser's content */
        g = feed_as(CANDLE_TOOL_HERMES, text, cuts, nc, &want);
        CHECK_MSG(g.ok && same(&g, &want, false) && content_ok(&g, text, &want, NULL),
                  "tokens %zu (content): [%s] want [%s] lost %d %s", t, g.content, want.content ? want.content : "",
                  g.lost, g.why);
        candle_tool_calls_free(&want);
    }
    candle_tokenizer_free(tok);
    candle_gguf_close(gg);
}

int main(void) {
    const char *src = getenv("CANDLE_SOURCE_DIR");
    test_formats();
    test_cut_off();
    test_content();
    test_tokens(src ? src : ".");
    printf("%d replies\n", n_cases);
    return test_done("tools_stream");
}
