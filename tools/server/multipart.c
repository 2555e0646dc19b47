/* multipart/form-data, strictly: CRLF line ends (RFC 2046 5.1.1; a bare LF
 * is refused rather than guessed at), a boundary of 1-70 of its allowed
 * characters, a Content-Disposition of form-data with a name on every part,
 * quoted strings with backslash escapes (quoted-pair). A preamble before the
 * first delimiter and an epilogue after the last are ignored, as RFC 2046
 * says; a body without the closing delimiter is refused (a truncated upload
 * would otherwise pass as a shorter file). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include "multipart.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define FAIL(...) (snprintf(err, err_len, __VA_ARGS__), false)

static bool is_tchar(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* RFC 2046's bchars: DIGIT / ALPHA / ' ( ) + _ , - . / : = ? and space. */
static bool is_bchar(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("'()+_,-./:=? ", c));
}

/* A token or a quoted-string at s[*i..n) into out (cap bytes with the NUL).
 * false: malformed, too long or holding a NUL or control byte. */
static bool param_value(const char *s, size_t n, size_t *i, char *out, size_t cap) {
    size_t k = 0, p = *i;
    if (p < n && s[p] == '"') {
        for (p++;; p++) {
            if (p >= n) return false; /* unterminated */
            unsigned char c = (unsigned char)s[p];
            if (c == '"') break;
            if (c == '\\') {
                if (++p >= n) return false;
                c = (unsigned char)s[p];
            }
            if (c < 0x20 && c != '\t') return false;
            if (c == 0x7f || k + 1 >= cap) return false;
            out[k++] = (char)c;
        }
        p++;
    } else {
        while (p < n && is_tchar((unsigned char)s[p])) {
            if (k + 1 >= cap) return false;
            out[k++] = s[p++];
        }
        if (!k) return false;
    }
    out[k] = 0;
    *i = p;
    return true;
}

static void skip_ows(const char *s, size_t n, size_t *i) {
    while (*i < n && (s[*i] == ' ' || s[*i] == '\t')) (*i)++;
}

/* The header value's ";"-separated parameters after its first token; calls
 * back with each (name lower-cased). v: the value, n bytes. */
typedef bool (*param_fn)(const char *name, const char *value, void *user);

static bool parse_params(const char *v, size_t n, size_t i, param_fn fn, void *user) {
    for (;;) {
        skip_ows(v, n, &i);
        if (i == n) return true;
        if (v[i] != ';') return false;
        i++;
        skip_ows(v, n, &i);
        if (i == n) return true; /* a trailing ';' */
        char name[32], value[SRV_MP_MAX_FILENAME + 1];
        size_t k = 0;
        while (i < n && is_tchar((unsigned char)v[i])) {
            if (k + 1 >= sizeof name) return false;
            char c = v[i++];
            name[k++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        }
        name[k] = 0;
        skip_ows(v, n, &i);
        if (!k || i >= n || v[i] != '=') return false;
        i++;
        skip_ows(v, n, &i);
        if (!param_value(v, n, &i, value, sizeof value)) return false;
        if (!fn(name, value, user)) return false;
    }
}

typedef struct boundary_ctx {
    char *b;
    bool seen;
} boundary_ctx;

static bool boundary_param(const char *name, const char *value, void *user) {
    boundary_ctx *bc = user;
    if (strcmp(name, "boundary")) return true; /* charset and others: ignored */
    if (bc->seen) return false;
    size_t n = strlen(value);
    if (!n || n > SRV_MP_MAX_BOUNDARY || value[n - 1] == ' ') return false;
    for (size_t i = 0; i < n; i++)
        if (!is_bchar((unsigned char)value[i])) return false;
    memcpy(bc->b, value, n + 1);
    bc->seen = true;
    return true;
}

typedef struct disp_ctx {
    srv_mp_part *p;
    bool name, filename; /* seen */
    bool dup;
} disp_ctx;

static bool disp_param(const char *name, const char *value, void *user) {
    disp_ctx *d = user;
    if (!strcmp(name, "name")) {
        d->dup = d->name;
        if (d->name || strlen(value) > SRV_MP_MAX_NAME) return false;
        strcpy(d->p->name, value);
        d->name = true;
    } else if (!strcmp(name, "filename")) {
        d->dup = d->filename;
        if (d->filename || strlen(value) > SRV_MP_MAX_FILENAME) return false;
        strcpy(d->p->filename, value);
        d->p->has_filename = d->filename = true;
    }
    return true; /* filename* (RFC 7578 4.2 says not to send it) and others: ignored */
}

/* The header block h[0..n) of one part (CRLF-separated lines, no final
 * empty line) into p. */
static bool part_headers(const char *h, size_t n, srv_mp_part *p, int idx, char *err, size_t err_len) {
    bool have_disp = false;
    size_t i = 0;
    while (i < n) {
        const char *eol = memmem(h + i, n - i, "\r\n", 2);
        size_t end = eol ? (size_t)(eol - h) : n, k = i;
        while (k < end && is_tchar((unsigned char)h[k])) k++;
        if (k == i || k == end || h[k] != ':')
            return FAIL("multipart part %d: a header line is not 'Name: value'", idx);
        for (size_t j = k + 1; j < end; j++)
            if ((unsigned char)h[j] < 0x20 && h[j] != '\t')
                return FAIL("multipart part %d: a control byte in a header (bare CR or LF?)", idx);
        size_t v = k + 1;
        skip_ows(h, end, &v);
        size_t ve = end;
        while (ve > v && (h[ve - 1] == ' ' || h[ve - 1] == '\t')) ve--;
        if (k - i == 19 && !strncasecmp(h + i, "Content-Disposition", 19)) {
            if (have_disp) return FAIL("multipart part %d: two Content-Disposition headers", idx);
            have_disp = true;
            if (ve - v < 9 || strncasecmp(h + v, "form-data", 9) ||
                (ve - v > 9 && h[v + 9] != ';' && h[v + 9] != ' ' && h[v + 9] != '\t'))
                return FAIL("multipart part %d: Content-Disposition is not form-data", idx);
            disp_ctx d = {.p = p};
            if (!parse_params(h + v, ve - v, 9, disp_param, &d))
                return FAIL("multipart part %d: Content-Disposition: %s", idx,
                            d.dup ? "a parameter given twice"
                                  : "malformed parameters (or a name or filename too long)");
            if (!d.name || !p->name[0])
                return FAIL("multipart part %d: Content-Disposition has no name", idx);
        }
        i = eol ? end + 2 : n;
    }
    if (!have_disp) return FAIL("multipart part %d: no Content-Disposition header", idx);
    return true;
}

bool srv_multipart_parse(const char *content_type, const char *body, size_t len, size_t max_field,
                         srv_multipart *out, char *err, size_t err_len) {
    memset(out, 0, sizeof *out);
    if (!content_type || strncasecmp(content_type, "multipart/form-data", 19) ||
        (content_type[19] && content_type[19] != ';' && content_type[19] != ' ' && content_type[19] != '\t'))
        return FAIL("Content-Type must be multipart/form-data");
    char b[SRV_MP_MAX_BOUNDARY + 1];
    boundary_ctx bc = {.b = b};
    if (!parse_params(content_type, strlen(content_type), 19, boundary_param, &bc) || !bc.seen)
        return FAIL("Content-Type multipart/form-data needs a boundary parameter of 1 to %d allowed "
                    "characters",
                    SRV_MP_MAX_BOUNDARY);
    /* "\r\n--" boundary: the delimiter; the first may start the body. */
    char delim[SRV_MP_MAX_BOUNDARY + 5];
    size_t dn = (size_t)snprintf(delim, sizeof delim, "\r\n--%s", b);
    if (!body) body = "";
    size_t pos;
    if (len >= dn - 2 && !memcmp(body, delim + 2, dn - 2)) {
        pos = dn - 2;
    } else {
        const char *f = memmem(body, len, delim, dn);
        if (!f) return FAIL("multipart body: no boundary delimiter");
        pos = (size_t)(f - body) + dn;
    }
    for (;;) {
        /* pos: just after a delimiter */
        if (len - pos >= 2 && body[pos] == '-' && body[pos + 1] == '-') return true; /* the close */
        while (pos < len && (body[pos] == ' ' || body[pos] == '\t')) pos++;
        if (len - pos < 2 || body[pos] != '\r' || body[pos + 1] != '\n')
            return FAIL("multipart body: the boundary is not followed by CRLF (or the body ends early)");
        pos += 2;
        if (out->n == SRV_MP_MAX_PARTS) return FAIL("multipart body: more than %d parts", SRV_MP_MAX_PARTS);
        srv_mp_part *p = &out->parts[out->n];
        size_t hlen;
        if (len - pos >= 2 && body[pos] == '\r' && body[pos + 1] == '\n') {
            hlen = 0; /* no headers: refused below for want of a Content-Disposition */
        } else {
            size_t window = len - pos < SRV_MP_MAX_HEADER + 4 ? len - pos : SRV_MP_MAX_HEADER + 4;
            const char *e = memmem(body + pos, window, "\r\n\r\n", 4);
            if (!e)
                return FAIL("multipart part %d: headers not ended by an empty line within %d bytes", out->n,
                            SRV_MP_MAX_HEADER);
            hlen = (size_t)(e - (body + pos));
        }
        if (!part_headers(body + pos, hlen, p, out->n, err, err_len)) return false;
        pos += hlen + (hlen ? 4 : 2);
        const char *e = memmem(body + pos, len - pos, delim, dn);
        if (!e) return FAIL("multipart part %d ('%s'): no closing boundary (a truncated body?)", out->n, p->name);
        p->data = body + pos;
        p->len = (size_t)(e - (body + pos));
        if (!p->has_filename && p->len > max_field)
            return FAIL("multipart field '%s': %zu bytes, at most %zu", p->name, p->len, max_field);
        /* A name given twice is refused, but for arrays ("x[]", as OpenAI's
         * clients send timestamp_granularities). */
        size_t nl = strlen(p->name);
        bool array = nl > 2 && !strcmp(p->name + nl - 2, "[]");
        for (int i = 0; !array && i < out->n; i++)
            if (!strcmp(out->parts[i].name, p->name)) return FAIL("multipart field '%s' given twice", p->name);
        out->n++;
        pos = (size_t)(e - body) + dn;
    }
}

const srv_mp_part *srv_multipart_get(const srv_multipart *m, const char *name) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->parts[i].name, name)) return &m->parts[i];
    return NULL;
}
