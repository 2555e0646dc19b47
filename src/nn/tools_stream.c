/* Tool calls read from a reply as it is generated (candle_tool_stream in
 * tools.h): a scanner over the bytes fed so far finds where each call's
 * object opens, the way candle_tool_calls_parse would, and a byte-wise
 * reader of that object learns the name and copies the arguments object's
 * bytes, whitespace outside strings left out (the parser's compact form).
 * When the object closes the parser's own reading of it (cdl_tool_call_read)
 * has the last word. Replies are model output: every byte sequence is
 * accepted. */
#include <stdlib.h>
#include <string.h>

#include "candle/tools.h"
#include "../core/core-impl.h"
#include "../core/json-impl.h"
#include "../core/strbuf-impl.h"
#include "nn-impl.h"

/* Where the scanner is between call objects. */
enum {
    S_START,  /* the reply's first bytes decide its shape */
    S_TAG,    /* looking for the opening (<tool_call>, [TOOL_CALLS]) */
    S_OPENED, /* after <tool_call>: a call object, else look again */
    S_MARKER, /* after [TOOL_CALLS]: the array */
    S_FENCE,  /* after ```json: an object or an array */
    S_BARE,   /* objects one after another (whitespace or ';' between) */
    S_ARRAY,  /* inside an array of objects */
    S_OBJECT, /* reading a call object */
    S_DONE,   /* no more calls in this reply */
};

/* Where the object reader is among the call object's own members. */
enum { M_KEY, M_INKEY, M_COLON, M_VALUE, M_INVALUE };
enum { K_OTHER, K_NAME, K_ARGS };

/* The reply's text outside the calls, as candle_tool_calls_parse's content
 * (pieces trimmed, joined by "\n") once a call has been read, the raw text
 * before. V is what may be given out now; it only grows, so what was given
 * is always a prefix of it (else `lost`). Hermes-style <tool_call> blocks are
 * followed as parse_hermes reads them (tools.c), so text after a call
 * streams; a reply opening with bare JSON or a fence gives its content at
 * the end, and Llama 3 / Mistral give the text before the call's opening. */
enum { C_UNDECIDED, C_TAGS, C_BARE, C_OPENING };
/* tools.c's json_span resumable: the bytes read, nesting, string state */
typedef struct spanst {
    size_t at, result; /* result: 0 not known yet, NONE never closes, else the length */
    int depth;
    bool str, skip;
} spanst;
typedef struct ctext {
    bool on, raw;      /* wanted; no call block read yet (V is the raw text) */
    bool finished, lost;
    int mode;          /* C_*: the reply's shape, for the content */
    size_t i;          /* where the current piece starts (parse_hermes's i) */
    size_t at;         /* the open block's '<', or NONE */
    size_t find;       /* where to look for the next opening */
    size_t x;          /* raw and C_OPENING: V is text[0..x) right-trimmed */
    bool x_done;       /* C_OPENING: x is where the call opens, for good */
    /* the open block, read so far: its object's first byte (NONE: not yet
     * seen, jscan where whitespace goes on), the object's span, and where
     * to look for the closing tag */
    size_t j, jscan, cl_from;
    spanst sp;
    size_t lead;       /* leading whitespace given out raw before the first call */
    cdl_strbuf cert;   /* the parser's content of text[0..i) */
    size_t *bound;     /* [n_blocks]: V's length after block k's piece: later bytes follow call k */
    size_t n_blocks, cap_blocks;
    cdl_strbuf given;  /* every content byte given out */
    cdl_strbuf fin;    /* at the end: V for good */
    cdl_strbuf delta;  /* the last content delta */
} ctext;

#define NONE ((size_t)-1)

typedef struct scall {
    char *name;       /* NULL until known */
    cdl_strbuf args;  /* the arguments' compact text so far */
    size_t vis;       /* bytes of args that end whole, valid UTF-8 characters */
    size_t given;     /* bytes of args the deltas gave out */
    bool visible, head_given, done, broken, stuck;
} scall;

struct candle_tool_stream {
    candle_tool_format f;
    cdl_strbuf text; /* everything fed */
    size_t pos;      /* bytes of text the scanner has read */
    int state, after; /* after: the state an object returns to */
    bool failed;
    /* the object being read: calls[n - 1] */
    size_t at;         /* offset of its '{' */
    int depth;         /* brackets open (the object's own is 1) */
    bool str, esc;     /* in a string; after a backslash in one */
    int member, key;   /* M_*, and the K_* of the member being read */
    size_t key_at;     /* the key's opening quote */
    size_t val_at;     /* the value's first byte */
    bool streaming;    /* bytes go to the call's arguments */
    bool args_seen;    /* an arguments member has been read (the first counts) */
    bool args_str;     /* ... and it is a string */
    scall *calls;
    size_t n, cap;
    size_t emit;       /* the call whose deltas next() gives */
    ctext c;           /* the text outside the calls (candle_tool_stream_with_content) */
};

static bool ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

candle_status candle_tool_stream_new(candle_tool_format f, candle_tool_stream **out) {
    if (!out) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tool stream: NULL argument");
    *out = NULL;
    if ((unsigned)f >= CANDLE_TOOL_FORMAT_COUNT)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tool stream: bad format %d", (int)f);
    candle_tool_stream *s = calloc(1, sizeof *s);
    if (!s) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tool stream");
    s->f = f;
    *out = s;
    return CANDLE_OK;
}

void candle_tool_stream_free(candle_tool_stream *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) {
        free(s->calls[i].name);
        free(s->calls[i].args.s);
    }
    free(s->calls);
    free(s->text.s);
    free(s->c.cert.s);
    free(s->c.bound);
    free(s->c.given.s);
    free(s->c.fin.s);
    free(s->c.delta.s);
    free(s);
}

/* --- UTF-8 ----------------------------------------------------------------------- */

/* The length of the valid UTF-8 character at s[0..n) (as strict as
 * jansson, which writes the deltas: no overlong forms, surrogates or code
 * points past U+10FFFF); 0 when it is incomplete, -1 when invalid. */
static int utf8_char(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : -1;
    if (len < 0) return -1;
    unsigned lo = 0x80, hi = 0xBF; /* the second byte's range */
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n) return 0;
        unsigned b = s[i];
        if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xBF)) return -1;
    }
    return len;
}

/* Advances k->vis over the whole characters of its arguments; an invalid
 * byte stops it for good (the parser refuses such a call anyway). */
static void advance_visible(scall *k) {
    while (!k->stuck && k->vis < k->args.n) {
        int l = utf8_char((const unsigned char *)k->args.s + k->vis, k->args.n - k->vis);
        if (l == 0) return;
        if (l < 0) {
            k->stuck = true;
            return;
        }
        k->vis += (size_t)l;
    }
}

/* --- the call object ---------------------------------------------------------------- */

/* The decoded JSON string literal text[at..end] (the quotes included), or
 * NULL (not a valid string, or OOM: s->failed). */
static char *decode_string(candle_tool_stream *s, size_t at, size_t end) {
    json_doc *d = NULL;
    char *r = NULL;
    if (!json_parse(&d, s->text.s + at, end + 1 - at, "tool call", NULL)) {
        const json_value *v = json_root(d);
        r = malloc(v->n + 1);
        if (r) memcpy(r, v->u.str, v->n + 1);
        else s->failed = true;
    }
    json_free(d);
    return r;
}

static int classify_key(candle_tool_stream *s, size_t at, size_t end) {
    char *k = decode_string(s, at, end);
    int r = !k ? K_OTHER : !strcmp(k, "name") ? K_NAME
            : !strcmp(k, "arguments") || !strcmp(k, "parameters") ? K_ARGS : K_OTHER;
    free(k);
    return r;
}

static void begin_object(candle_tool_stream *s, int after) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 4;
        scall *c = realloc(s->calls, cap * sizeof *c);
        if (!c) {
            s->failed = true;
            return;
        }
        s->calls = c;
        s->cap = cap;
    }
    memset(&s->calls[s->n++], 0, sizeof(scall));
    s->at = s->pos++;
    s->depth = 1;
    s->str = s->esc = s->streaming = s->args_seen = s->args_str = false;
    s->member = M_KEY;
    s->key = K_OTHER;
    s->after = after;
    s->state = S_OBJECT;
}

/* The call's name is known and its arguments have opened (an object, or a
 * string holding one, read at the close): it shows. */
static void show_if_ready(candle_tool_stream *s, scall *k) {
    if (!k->visible && k->name && (k->args.n || s->args_str)) k->visible = true;
}

/* The object text[at..end] has closed: the parser's reading decides. */
static void end_object(candle_tool_stream *s, size_t end) {
    scall *k = &s->calls[s->n - 1];
    candle_tool_call c;
    bool oom = false;
    bool ok = cdl_tool_call_read(s->text.s + s->at, end + 1 - s->at, &c, &oom);
    if (oom) s->failed = true;
    s->state = s->after;
    if (!ok && !k->visible) { /* not a call, and nothing of it given out */
        free(k->name);
        free(k->args.s);
        s->n--;
        return;
    }
    k->done = true;
    if (ok && !k->visible) {
        free(k->name);
        free(k->args.s);
        memset(&k->args, 0, sizeof k->args);
        k->name = c.name;
        c.name = NULL;
        cdl_strbuf_str(&k->args, c.arguments);
        k->visible = true;
    } else if (ok) {
        /* what was copied is the parser's text so far (equal, unless an
         * odd object, see tools.h): the rest, if any */
        size_t m = strlen(c.arguments);
        if (k->args.n <= m && !memcmp(k->args.s ? k->args.s : "", c.arguments, k->args.n))
            cdl_strbuf_put(&k->args, c.arguments + k->args.n, m - k->args.n);
        else
            k->broken = true;
    } else {
        k->broken = true;
    }
    if (k->args.failed) s->failed = true;
    advance_visible(k);
    free(c.name);
    free(c.arguments);
    free(c.id);
}

/* A value of the call object's own member starts at i with c. */
static void value_start(candle_tool_stream *s, scall *k, size_t i, char c) {
    s->val_at = i;
    s->member = M_INVALUE;
    if (s->key == K_ARGS && !s->args_seen) {
        s->args_seen = true;
        if (c == '{') {
            s->streaming = true;
            cdl_strbuf_put(&k->args, "{", 1);
        }
        /* a string holding the object is read when the call closes */
        s->args_str = c == '"';
    }
}

/* A string at the object's own level closed at i. */
static void string_closed(candle_tool_stream *s, scall *k, size_t i) {
    if (s->member == M_INKEY) {
        s->key = classify_key(s, s->key_at, i);
        s->member = M_COLON;
    } else if (s->key == K_NAME && !k->name && i > s->val_at + 1) {
        k->name = decode_string(s, s->val_at, i);
    }
}

/* One byte of the call object. */
static void object_byte(candle_tool_stream *s, size_t i) {
    scall *k = &s->calls[s->n - 1];
    char c = s->text.s[i];
    if (s->str) {
        if (s->streaming) cdl_strbuf_put(&k->args, &c, 1);
        if (s->esc) s->esc = false;
        else if (c == '\\') s->esc = true;
        else if (c == '"') {
            s->str = false;
            if (s->depth == 1) string_closed(s, k, i);
            show_if_ready(s, k);
        }
        return;
    }
    if (s->streaming && !ws(c)) cdl_strbuf_put(&k->args, &c, 1);
    switch (c) {
    case '"':
        s->str = true;
        if (s->depth == 1 && s->member == M_KEY) {
            s->member = M_INKEY;
            s->key_at = i;
        } else if (s->depth == 1 && s->member == M_VALUE) {
            value_start(s, k, i, c);
        }
        break;
    case '{':
    case '[':
        if (s->depth == 1 && s->member == M_VALUE) value_start(s, k, i, c);
        s->depth++;
        break;
    case '}':
    case ']':
        if (--s->depth == 0) {
            end_object(s, i);
            return;
        }
        if (s->depth == 1) s->streaming = false;
        break;
    case ',':
        if (s->depth == 1) s->member = M_KEY;
        break;
    case ':':
        if (s->depth == 1 && s->member == M_COLON) s->member = M_VALUE;
        break;
    default:
        if (s->depth == 1 && s->member == M_VALUE && !ws(c)) value_start(s, k, i, c);
        break;
    }
    show_if_ready(s, k);
}

/* --- the scanner -------------------------------------------------------------------- */

/* Does text[pos..) start with lit? 1 yes, 0 no, -1 not known yet (the text
 * so far is a proper prefix of lit). */
static int starts(const candle_tool_stream *s, const char *lit) {
    size_t m = strlen(lit), have = s->text.n - s->pos;
    size_t k = have < m ? have : m;
    if (memcmp(s->text.s + s->pos, lit, k)) return 0;
    return k == m ? 1 : -1;
}

static const char *opening(candle_tool_format f) {
    return f == CANDLE_TOOL_MISTRAL ? "[TOOL_CALLS]" : "<tool_call>";
}

/* The reply's first bytes (whitespace skipped): which shape it has. false
 * while they do not tell yet. */
static bool scan_start(candle_tool_stream *s) {
    char c = s->text.s[s->pos];
    int st;
    switch (s->f) {
    case CANDLE_TOOL_LLAMA3:
        if ((st = starts(s, "<|python_tag|>")) < 0) return false;
        if (st) s->pos += 14;
        s->state = st || c == '{' ? S_BARE : S_DONE;
        return true;
    case CANDLE_TOOL_MISTRAL:
        if ((st = starts(s, "[TOOL_CALLS]")) < 0) return false;
        if (st) s->pos += 12;
        else if (c == '[') s->pos++;
        s->state = st ? S_MARKER : c == '[' ? S_ARRAY : S_TAG;
        return true;
    default:
        if (c == '{') {
            s->state = S_BARE;
            return true;
        }
        if ((st = starts(s, "```json")) < 0) return false;
        if (st) s->pos += 7;
        s->state = st ? S_FENCE : S_TAG;
        return true;
    }
}

static void scan_tag(candle_tool_stream *s) {
    const char *open = opening(s->f);
    size_t m = strlen(open), len = s->text.n;
    for (size_t i = s->pos; i + m <= len; i++) {
        if (!memcmp(s->text.s + i, open, m)) {
            s->pos = i + m;
            s->state = s->f == CANDLE_TOOL_MISTRAL ? S_MARKER : S_OPENED;
            return;
        }
    }
    /* the opening may still begin within the last m - 1 bytes */
    if (len >= m && s->pos < len - (m - 1)) s->pos = len - (m - 1);
    s->state = S_TAG;
}

/* Reads as far as the text fed allows. */
static void scan(candle_tool_stream *s) {
    while (!s->failed && s->pos < s->text.n) {
        int state = s->state;
        if (state == S_OBJECT) {
            object_byte(s, s->pos++);
            continue;
        }
        if (state == S_TAG) {
            scan_tag(s);
            if (s->state == S_TAG) return; /* wait for more */
            continue;
        }
        if (state == S_DONE) {
            s->pos = s->text.n;
            return;
        }
        char c = s->text.s[s->pos];
        if (ws(c) || (c == ';' && state == S_BARE) || (c == ',' && state == S_ARRAY)) {
            s->pos++;
            continue;
        }
        switch (state) {
        case S_START:
            if (!scan_start(s)) return;
            break;
        case S_OPENED:
            if (c == '{') begin_object(s, S_TAG);
            else s->state = S_TAG;
            break;
        case S_MARKER:
        case S_FENCE:
            if (c == '{' && state == S_FENCE) {
                s->state = S_BARE;
            } else if (c == '[') {
                s->pos++;
                s->state = S_ARRAY;
            } else {
                s->state = S_DONE;
            }
            break;
        case S_BARE:
        case S_ARRAY:
            if (c == '{') begin_object(s, state);
            else s->state = S_DONE;
            break;
        default:
            s->state = S_DONE;
            break;
        }
    }
}

/* --- the text outside the calls ---------------------------------------------------- */

static const char open_tag[] = "<tool_call>", close_tag[] = "</tool_call>";
#define OPEN_N (sizeof open_tag - 1)
#define CLOSE_N (sizeof close_tag - 1)

/* tools.c's json_span, told apart and resumable: the length of the
 * bracketed value at s[0..n) (p: what earlier calls read of it), 0 while it
 * may still close, NONE when it never will. */
static size_t span_resume(spanst *p, const char *s, size_t n) {
    if (p->result) return p->result;
    for (size_t i = p->at; i < n; i++) {
        char c = s[i];
        if (p->skip) {
            p->skip = false;
        } else if (p->str) {
            if (c == '\\') p->skip = true;
            else if (c == '"') p->str = false;
        } else if (c == '"') {
            p->str = true;
        } else if (c == '{' || c == '[') {
            if (++p->depth > 64) return p->result = NONE;
        } else if (c == '}' || c == ']') {
            if (--p->depth == 0) return p->result = i + 1;
            if (p->depth < 0) return p->result = NONE;
        }
    }
    p->at = n;
    return 0;
}

static size_t span_of(const char *s, size_t n) {
    spanst p = {0};
    return span_resume(&p, s, n);
}

static size_t find_lit(const char *t, size_t from, size_t len, const char *lit, size_t m) {
    for (size_t i = from; i + m <= len; i++)
        if (!memcmp(t + i, lit, m)) return i;
    return NONE;
}

static void trim_span(const char *t, size_t *a, size_t *b) {
    while (*a < *b && ws(t[*a])) (*a)++;
    while (*b > *a && ws(t[*b - 1])) (*b)--;
}

/* tools.c's add_content: a piece, trimmed, "\n" between pieces. */
static void add_piece(cdl_strbuf *b, const char *t, size_t a, size_t e) {
    trim_span(t, &a, &e);
    if (a == e) return;
    if (b->n) cdl_strbuf_put(b, "\n", 1);
    cdl_strbuf_put(b, t + a, e - a);
}

/* The block opened at c.at, as parse_hermes reads it: -1 while its end is
 * not known (final: the text ends here), else whether it is a call, with
 * *after where the next piece starts. */
static int block_end(candle_tool_stream *s, bool final, size_t *after) {
    ctext *c = &s->c;
    const char *t = s->text.s;
    size_t len = s->text.n, body = c->at + OPEN_N, span = 0, k = 0, q = NONE;
    if (c->j == NONE) {
        size_t j = c->jscan;
        while (j < len && ws(t[j])) j++;
        c->jscan = j;
        if (j < len) c->j = j;
        else if (!final) return -1;
    }
    size_t j = c->j != NONE ? c->j : len;
    if (j < len && t[j] == '{') {
        size_t sp = span_resume(&c->sp, t + j, len - j);
        if (!sp && !final) return -1;
        if (sp != NONE) span = sp;
    }
    bool whole = false;
    if (span) {
        for (k = j + span; k < len && ws(t[k]); k++) {}
        if (k + CLOSE_N <= len) whole = !memcmp(t + k, close_tag, CLOSE_N);
        else if (!final && !memcmp(t + k, close_tag, len - k)) return -1; /* the tag may be coming */
    }
    if (whole) {
        q = k;
    } else if ((q = find_lit(t, c->cl_from, len, close_tag, CLOSE_N)) == NONE) {
        if (len >= CLOSE_N && c->cl_from < len - (CLOSE_N - 1)) c->cl_from = len - (CLOSE_N - 1);
        if (!final) return -1;
    }
    size_t end = q != NONE ? q : len;
    *after = q != NONE ? q + CLOSE_N : len;
    size_t a = whole ? j : body, b = whole ? j + span : end;
    if (!whole) trim_span(t, &a, &b);
    if (a == b || t[a] != '{' || span_of(t + a, b - a) != b - a) return 0;
    candle_tool_call call;
    bool oom = false, ok = cdl_tool_call_read(t + a, b - a, &call, &oom);
    if (oom) s->failed = true;
    if (ok) {
        free(call.name);
        free(call.arguments);
        free(call.id);
    }
    return ok;
}

static size_t lead_ws(const candle_tool_stream *s) {
    size_t i = 0;
    while (i < s->text.n && ws(s->text.s[i])) i++;
    return i;
}

/* V's parts (at most 4) and its length. */
static size_t v_parts(const candle_tool_stream *s, const char *p[4], size_t n[4]) {
    const ctext *c = &s->c;
    const char *t = s->text.s;
    size_t len = s->text.n;
    for (int i = 0; i < 4; i++) p[i] = "", n[i] = 0;
    if (c->finished) {
        p[0] = c->fin.s ? c->fin.s : "", n[0] = c->fin.n;
        return n[0];
    }
    /* where the text that may be content ends: an open block, or a prefix
     * of the opening at the very end */
    size_t x = 0;
    if (c->mode == C_OPENING) {
        x = c->x;
    } else if (c->mode == C_TAGS) {
        x = c->at != NONE ? c->at : len;
        for (size_t k = OPEN_N - 1; c->at == NONE && k > 0; k--)
            if (k <= len - c->i && !memcmp(t + len - k, open_tag, k)) {
                x = len - k;
                break;
            }
    }
    if (c->raw) {
        size_t a = 0;
        trim_span(t, &a, &x); /* only the end's whitespace goes: a is 0 unless all is blank */
        p[0] = t, n[0] = a == x ? 0 : x;
        return n[0];
    }
    size_t a = c->i, b = x;
    trim_span(t, &a, &b);
    p[0] = t, n[0] = c->lead;
    p[1] = c->cert.s ? c->cert.s : "", n[1] = c->cert.n;
    if (b > a && c->cert.n) p[2] = "\n", n[2] = 1;
    p[3] = t + a, n[3] = b - a;
    return n[0] + n[1] + n[2] + n[3];
}

static unsigned char v_byte(const char *p[4], const size_t n[4], size_t i) {
    for (int k = 0; k < 4; i -= n[k], k++)
        if (i < n[k]) return (unsigned char)p[k][i];
    return 0;
}

static void v_copy(const char *p[4], const size_t n[4], size_t from, size_t to, cdl_strbuf *out) {
    size_t base = 0;
    for (int k = 0; k < 4; base += n[k], k++) {
        size_t a = from > base ? from - base : 0, b = to - base < n[k] ? to - base : n[k];
        if (to > base && a < b) cdl_strbuf_put(out, p[k] + a, b - a);
    }
}

/* Is what was given out a prefix of V? */
static bool given_fits(candle_tool_stream *s) {
    const char *p[4];
    size_t n[4], vl = v_parts(s, p, n), g = s->c.given.n;
    if (g > vl) return false;
    for (size_t i = 0; i < g; i++)
        if ((unsigned char)s->c.given.s[i] != v_byte(p, n, i)) return false;
    return true;
}

/* The first call block has been read: V takes the parser's shape. */
static void to_parsed(candle_tool_stream *s) {
    ctext *c = &s->c;
    c->raw = false;
    c->lead = c->given.n ? lead_ws(s) : 0; /* given out raw; the parser trims it */
    if (!given_fits(s)) c->lost = true;
}

static void add_bound(candle_tool_stream *s) {
    ctext *c = &s->c;
    if (c->n_blocks == c->cap_blocks) {
        size_t cap = c->cap_blocks ? 2 * c->cap_blocks : 8;
        size_t *b = realloc(c->bound, cap * sizeof *b);
        if (!b) {
            s->failed = true;
            return;
        }
        c->bound = b;
        c->cap_blocks = cap;
    }
    c->bound[c->n_blocks++] = c->lead + c->cert.n;
}

/* The reply's shape for the content, once its first bytes tell. */
static void content_mode(candle_tool_stream *s, bool final) {
    ctext *c = &s->c;
    if (s->f == CANDLE_TOOL_LLAMA3 || s->f == CANDLE_TOOL_MISTRAL) {
        c->mode = C_OPENING;
        return;
    }
    static const char fence[] = "```json";
    size_t i = lead_ws(s), len = s->text.n, m = sizeof fence - 1, k = len - i < m ? len - i : m;
    if (i < len && s->text.s[i] == '{') c->mode = C_BARE;
    else if (i < len && memcmp(s->text.s + i, fence, k)) c->mode = C_TAGS;
    else if (k == m) c->mode = C_BARE;
    else if (final) c->mode = C_TAGS;
}

/* Llama 3 / Mistral: where a call may open (candle_tool_call_start, read
 * on from where the last feed left it). */
static void opening_scan(candle_tool_stream *s) {
    ctext *c = &s->c;
    if (c->x_done) return;
    const char *t = s->text.s, *lit = s->f == CANDLE_TOOL_LLAMA3 ? "<|python_tag|>" : "[TOOL_CALLS]";
    size_t len = s->text.n, m = strlen(lit), i = lead_ws(s);
    c->x = 0;
    if (i == len) return;
    if (t[i] == '{' || (s->f == CANDLE_TOOL_MISTRAL && t[i] == '[')) { /* bare JSON opens the reply */
        c->x_done = true;
        return;
    }
    size_t p = find_lit(t, c->find, len, lit, m);
    if (p != NONE) {
        c->x = p;
        c->x_done = true;
        return;
    }
    if (len >= m && c->find < len - (m - 1)) c->find = len - (m - 1);
    c->x = len;
    for (size_t k = m - 1; k > 0; k--) /* a prefix of the opening at the end */
        if (k <= len && !memcmp(t + len - k, lit, k)) {
            c->x = len - k;
            break;
        }
}

/* Reads the blocks the text fed so far closes (final: the text is all). */
static void content_scan(candle_tool_stream *s, bool final) {
    ctext *c = &s->c;
    if (c->mode == C_UNDECIDED) content_mode(s, final);
    if (c->mode == C_OPENING) opening_scan(s);
    if (c->mode != C_TAGS) return;
    const char *t = s->text.s;
    size_t len = s->text.n;
    while (!s->failed) {
        if (c->at == NONE) {
            c->at = find_lit(t, c->find, len, open_tag, OPEN_N);
            if (c->at == NONE) {
                if (len >= OPEN_N && c->find < len - (OPEN_N - 1)) c->find = len - (OPEN_N - 1);
                break;
            }
            c->j = NONE;
            c->jscan = c->cl_from = c->at + OPEN_N;
            c->sp = (spanst){0};
        }
        size_t after;
        int r = block_end(s, final, &after);
        if (r < 0) break;
        add_piece(&c->cert, t, c->i, r ? c->at : after);
        if (r && c->raw) to_parsed(s);
        if (r) add_bound(s);
        c->i = c->find = after;
        c->at = NONE;
    }
    if (c->cert.failed) s->failed = true;
}

/* The next content delta: V's bytes not given out, up to what may come
 * before the call whose deltas are next (all: every one), whole UTF-8
 * characters (one cut off at the very end is left out). */
static bool content_next(candle_tool_stream *s, candle_tool_delta *d, bool all) {
    ctext *c = &s->c;
    if (!c->on || c->lost || s->failed) return false;
    const char *p[4];
    size_t n[4], lim = v_parts(s, p, n);
    if (!all && s->emit < c->n_blocks && c->bound[s->emit] < lim) lim = c->bound[s->emit];
    for (size_t b = 1; b <= 3 && b <= lim; b++) {
        unsigned char ch = v_byte(p, n, lim - b);
        if ((ch & 0xC0) == 0x80) continue;
        if (ch >= 0xC0 && (size_t)(ch >= 0xF0 ? 4 : ch >= 0xE0 ? 3 : 2) > b) lim -= b;
        break;
    }
    size_t g = c->given.n;
    if (lim <= g) return false;
    c->delta.n = 0;
    v_copy(p, n, g, lim, &c->delta);
    if (c->delta.failed) {
        s->failed = true;
        return false;
    }
    cdl_strbuf_put(&c->given, c->delta.s, c->delta.n);
    if (c->given.failed) s->failed = true;
    *d = (candle_tool_delta){.index = s->emit, .content = c->delta.s, .len = c->delta.n};
    return true;
}

candle_status candle_tool_stream_with_content(candle_tool_stream *s) {
    if (!s) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tool stream: NULL argument");
    if (s->text.n) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tool stream: content asked for after text was fed");
    s->c = (ctext){.on = true, .raw = true, .at = NONE};
    return CANDLE_OK;
}

candle_status candle_tool_stream_finish(candle_tool_stream *s) {
    if (!s) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tool stream: NULL argument");
    ctext *c = &s->c;
    if (c->on && !c->finished && !s->failed) {
        content_scan(s, true);
        candle_tool_calls tc;
        if (candle_tool_calls_parse(s->f, s->text.s ? s->text.s : "", s->text.n, &tc)) {
            s->failed = true;
        } else {
            /* as the server's message: the calls' content, or all the text */
            size_t lead = c->raw ? (c->given.n ? lead_ws(s) : 0) : c->lead;
            bool cut = false; /* a call shown and never read whole (max_tokens, or broken) */
            for (size_t i = 0; i < s->n; i++) cut |= s->calls[i].visible && (!s->calls[i].done || s->calls[i].broken);
            if (cut) {
                /* its text went out as the call: the content ends here */
                if (c->given.n) cdl_strbuf_put(&c->fin, c->given.s, c->given.n);
            } else if (tc.n) {
                cdl_strbuf_put(&c->fin, s->text.s ? s->text.s : "", lead);
                if (tc.content) cdl_strbuf_str(&c->fin, tc.content);
            } else if (s->text.n) {
                cdl_strbuf_put(&c->fin, s->text.s, s->text.n);
            }
            candle_tool_calls_free(&tc);
            if (c->fin.failed) s->failed = true;
        }
        c->finished = true;
        if (!given_fits(s)) c->lost = true;
    }
    c->finished = true;
    return s->failed ? cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tool stream") : CANDLE_OK;
}

bool candle_tool_stream_content_lost(const candle_tool_stream *s) { return s && s->c.lost; }

candle_status candle_tool_stream_feed(candle_tool_stream *s, const char *text, size_t len) {
    if (!s || (!text && len)) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tool stream: NULL argument");
    if (!s->failed && len) {
        cdl_strbuf_put(&s->text, text, len);
        if (s->text.failed) s->failed = true;
        scan(s);
        if (s->n) {
            scall *k = &s->calls[s->n - 1];
            if (k->args.failed) s->failed = true;
            advance_visible(k);
        }
        if (s->c.on && !s->c.finished) content_scan(s, false);
    }
    return s->failed ? cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tool stream") : CANDLE_OK;
}

/* One step of the calls' deltas: 1 a delta, 0 none until more text, 2
 * the next call's turn (content may come between). */
static int call_step(candle_tool_stream *s, candle_tool_delta *d) {
    if (s->emit >= s->n) return 0;
    scall *k = &s->calls[s->emit];
    if (!k->visible) return 0;
    if (!k->head_given) {
        k->head_given = true;
        *d = (candle_tool_delta){.index = s->emit, .name = k->name, .arguments = "", .len = 0};
        return 1;
    }
    if (k->given < k->vis) {
        *d = (candle_tool_delta){.index = s->emit, .arguments = k->args.s + k->given, .len = k->vis - k->given};
        k->given = k->vis;
        return 1;
    }
    if (!k->done) return 0; /* more may come */
    s->emit++;
    return 2;
}

bool candle_tool_stream_next(candle_tool_stream *s, candle_tool_delta *d) {
    if (!s || !d) return false;
    for (;;) {
        if (content_next(s, d, false)) return true;
        int r = call_step(s, d);
        if (r == 1) return true;
        if (r == 0) break;
    }
    /* at the end, content the calls' order held back (a call the parser
     * reads that the stream did not show) */
    return s->c.finished && content_next(s, d, true);
}

size_t candle_tool_stream_count(const candle_tool_stream *s) {
    if (!s) return 0;
    size_t n = s->n;
    while (n && !s->calls[n - 1].visible) n--;
    return n;
}

bool candle_tool_stream_get(const candle_tool_stream *s, size_t i, candle_tool_stream_call *out) {
    if (!s || !out || i >= candle_tool_stream_count(s)) return false;
    const scall *k = &s->calls[i];
    *out = (candle_tool_stream_call){.name = k->name, .arguments = k->args.s ? k->args.s : "", .len = k->given,
                                     .done = k->done && !k->broken, .broken = k->broken};
    return true;
}
