/* libFuzzer target for the server's gate (tools/server/gate_parse.c): the
 * header block of a request, as peeked from a client's socket, found and
 * checked before libmicrohttpd sees it. An input is the bytes a client sent.
 * Beyond "no crash":
 * - srv_gate_header_len is 0 or a length within the input that ends with a
 *   blank line (LF LF or LF CR LF), and no shorter prefix holds one;
 * - srv_gate_check answers 0 or one of 400, 411, 414, 501, 505, with a code and a
 *   non-empty message for a refusal;
 * - a block it accepts has a request line METHOD SP TARGET SP HTTP/1.x, a
 *   target of at most SRV_GATE_URI_MAX bytes without control characters,
 *   header lines free of CR/LF/NUL inside, and no Transfer-Encoding line
 *   (a chunked body's framing would be checked by libmicrohttpd, in HTML).
 * Seeds: tests/fuzz/gen_http_gate_corpus.py. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "fuzz-check.h"
#include "gate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *buf = (const char *)data;
    size_t hl = srv_gate_header_len(buf, size);
    check(hl <= size);
    if (!hl) return 0;
    check(buf[hl - 1] == '\n' && (buf[hl - 2] == '\n' || (hl >= 3 && buf[hl - 2] == '\r' && buf[hl - 3] == '\n')));
    check(srv_gate_header_len(buf, hl - 1) == 0);
    const char *code = NULL;
    char msg[160];
    msg[0] = 0;
    int st = srv_gate_check(buf, hl, &code, msg, sizeof msg);
    check(st == 0 || st == 400 || st == 411 || st == 414 || st == 501 || st == 505);
    if (st) {
        check(code && *code && msg[0] && memchr(msg, 0, sizeof msg));
        return 0;
    }
    const char *lf = memchr(buf, '\n', hl);
    check(lf);
    size_t len = (size_t)(lf - buf);
    if (len && buf[len - 1] == '\r') len--;
    const char *sp1 = memchr(buf, ' ', len);
    check(sp1 && sp1 > buf);
    const char *sp2 = memchr(sp1 + 1, ' ', len - (size_t)(sp1 + 1 - buf));
    check(sp2 && sp2 > sp1 + 1 && (size_t)(sp2 - sp1 - 1) <= SRV_GATE_URI_MAX);
    for (const char *q = sp1 + 1; q < sp2; q++) check((unsigned char)*q > 0x20 && *q != 0x7f);
    check(buf + len - sp2 - 1 == 8 && (!memcmp(sp2 + 1, "HTTP/1.1", 8) || !memcmp(sp2 + 1, "HTTP/1.0", 8)));
    /* inside the header lines: no NUL, no CR but before an LF */
    for (size_t i = (size_t)(lf - buf) + 1; i < hl; i++) {
        check(buf[i] != 0);
        if (buf[i] == '\r') check(i + 1 < hl && buf[i + 1] == '\n');
        if (buf[i - 1] == '\n') check(hl - i < 18 || strncasecmp(buf + i, "transfer-encoding:", 18));
    }
    return 0;
}
