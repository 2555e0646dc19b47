/* The gate's check of a request's header block (gate.c hands the rest to
 * libmicrohttpd): pure functions of the peeked bytes, fuzzed by
 * tests/fuzz/fuzz_http_gate.c. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "gate.h"

static bool tchar(unsigned char ch) {
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* The end of the line that starts at s (its LF, or NULL when not all there). */
static const char *line_end(const char *s, const char *end) {
    const char *lf = memchr(s, '\n', (size_t)(end - s));
    return lf;
}

/* Length of the line without its CR LF (or bare LF). */
static size_t line_len(const char *s, const char *lf) {
    size_t n = (size_t)(lf - s);
    return n && s[n - 1] == '\r' ? n - 1 : n;
}

static bool ows(char ch) {
    return ch == ' ' || ch == '\t';
}

/* Validate a complete header block (buf[0..n), ending with its blank line).
 * Returns 0 (hand it on), or the status refusing it with code and msg. */
int srv_gate_check(const char *buf, size_t n, const char **code, char *msg, size_t msg_cap) {
    const char *end = buf + n, *lf = line_end(buf, end);
    *code = "bad_request";
    if (!lf) { /* not a header block: srv_gate_header_len found none */
        snprintf(msg, msg_cap, "incomplete request headers");
        return 400;
    }
    size_t len = line_len(buf, lf);
    /* request line: METHOD SP TARGET SP HTTP/x.y */
    const char *sp1 = memchr(buf, ' ', len);
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', len - (size_t)(sp1 + 1 - buf)) : NULL;
    *code = "bad_request";
    if (!sp1 || !sp2 || sp1 == buf || sp2 == sp1 + 1) {
        snprintf(msg, msg_cap, "malformed request line (want METHOD TARGET HTTP/1.1)");
        return 400;
    }
    for (const char *q = buf; q < sp1; q++)
        if (!tchar((unsigned char)*q)) {
            snprintf(msg, msg_cap, "malformed request line: invalid method");
            return 400;
        }
    size_t tlen = (size_t)(sp2 - sp1 - 1);
    if (tlen > SRV_GATE_URI_MAX) {
        *code = "uri_too_long";
        snprintf(msg, msg_cap, "request target of %zu bytes, over the limit of %d", tlen, SRV_GATE_URI_MAX);
        return 414;
    }
    for (const char *q = sp1 + 1; q < sp2; q++)
        if ((unsigned char)*q <= 0x20 || *q == 0x7f) {
            snprintf(msg, msg_cap, "malformed request line: control character in the target");
            return 400;
        }
    const char *ver = sp2 + 1;
    size_t vlen = len - (size_t)(ver - buf);
    if (vlen != 8 || memcmp(ver, "HTTP/", 5) || ver[5] < '0' || ver[5] > '9' || ver[6] != '.' ||
        ver[7] < '0' || ver[7] > '9') {
        snprintf(msg, msg_cap, "malformed request line: invalid HTTP version");
        return 400;
    }
    bool http11 = !memcmp(ver, "HTTP/1.1", 8);
    if (!http11 && memcmp(ver, "HTTP/1.0", 8)) {
        *code = "http_version_not_supported";
        snprintf(msg, msg_cap, "HTTP version %.8s is not supported: use HTTP/1.1 or HTTP/1.0", ver);
        return 505;
    }
    /* header fields */
    int n_host = 0, n_cl = 0;
    bool te = false;
    unsigned long long cl = 0;
    for (const char *s = lf + 1; s < end;) {
        const char *e = line_end(s, end);
        if (!e) break;
        size_t ll = line_len(s, e);
        if (!ll) break; /* the blank line */
        if (ows(*s)) {
            snprintf(msg, msg_cap, "obsolete header line folding is not accepted");
            return 400;
        }
        const char *colon = memchr(s, ':', ll);
        if (!colon || colon == s) {
            snprintf(msg, msg_cap, "malformed header line (want Name: value)");
            return 400;
        }
        for (const char *q = s; q < colon; q++)
            if (!tchar((unsigned char)*q)) {
                snprintf(msg, msg_cap, "malformed header name");
                return 400;
            }
        const char *v = colon + 1, *ve = s + ll;
        for (const char *q = v; q < ve; q++)
            if (((unsigned char)*q < 0x20 && *q != '\t') || *q == 0x7f) {
                snprintf(msg, msg_cap, "control character in a header value");
                return 400;
            }
        while (v < ve && ows(*v)) v++;
        while (ve > v && ows(ve[-1])) ve--;
        size_t name_len = (size_t)(colon - s);
        if (name_len == 4 && !strncasecmp(s, "host", 4)) {
            n_host++;
        } else if (name_len == 14 && !strncasecmp(s, "content-length", 14)) {
            unsigned long long x = 0;
            bool ok = v < ve && ve - v <= 18;
            for (const char *q = v; ok && q < ve; q++) {
                if (*q < '0' || *q > '9') ok = false;
                else x = x * 10 + (unsigned)(*q - '0');
            }
            if (!ok || (n_cl && x != cl)) {
                *code = "invalid_content_length";
                snprintf(msg, msg_cap, ok ? "conflicting Content-Length headers"
                                          : "invalid Content-Length (want decimal digits)");
                return 400;
            }
            cl = x;
            n_cl++;
        } else if (name_len == 17 && !strncasecmp(s, "transfer-encoding", 17)) {
            if (te || (size_t)(ve - v) != 7 || strncasecmp(v, "chunked", 7)) {
                *code = "unsupported_transfer_encoding";
                snprintf(msg, msg_cap, "only Transfer-Encoding: chunked is supported");
                return 501;
            }
            te = true;
        }
        s = e + 1;
    }
    if (te && n_cl) {
        *code = "invalid_content_length";
        snprintf(msg, msg_cap, "Content-Length and Transfer-Encoding together");
        return 400;
    }
    /* A malformed chunk is found mid-body, past this check, where
     * libmicrohttpd would answer in HTML: a body needs its length up front. */
    if (te) {
        *code = "length_required";
        snprintf(msg, msg_cap, "chunked request bodies are not accepted: send the body with a Content-Length");
        return 411;
    }
    if (http11 && n_host != 1) {
        snprintf(msg, msg_cap, "an HTTP/1.1 request needs exactly one Host header");
        return 400;
    }
    return 0;
}

/* The length of the header block in buf[0..n) (through its blank line), or 0
 * while it is incomplete. */
size_t srv_gate_header_len(const char *buf, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (buf[i] != '\n') continue;
        /* LF LF or LF CR LF ends it */
        if (i + 1 < n && buf[i + 1] == '\n') return i + 2;
        if (i + 2 < n && buf[i + 1] == '\r' && buf[i + 2] == '\n') return i + 3;
    }
    return 0;
}

