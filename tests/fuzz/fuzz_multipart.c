/* libFuzzer target for the audio endpoints' multipart/form-data parser
 * (tools/server/multipart.c, compiled into this target). An input is
 *   [u8 n][n bytes: the Content-Type header][the body]
 * (n 255: no Content-Type at all). Beyond "no crash" (ASan/UBSan):
 * - a refusal has a message;
 * - an accepted body has at most SRV_MP_MAX_PARTS parts, in order, each
 *   inside the body, not overlapping, each followed by CRLF "--"; names
 *   non-empty and filenames within their limits; text fields within
 *   max_field; no name twice but for "x[]" arrays;
 * - parsing again gives the same parts;
 * - the parts written back as a form (names quoted with backslash escapes)
 *   parse to the same parts.
 * Seeds: tests/fuzz/corpus/multipart/ (gen_multipart_corpus.py). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-check.h"
#include "multipart.h"

#define MAX_FIELD 64

static bool same(const srv_multipart *a, const srv_multipart *b) {
    if (a->n != b->n) return false;
    for (int i = 0; i < a->n; i++) {
        const srv_mp_part *p = &a->parts[i], *q = &b->parts[i];
        if (strcmp(p->name, q->name) || strcmp(p->filename, q->filename) || p->has_filename != q->has_filename ||
            p->len != q->len || memcmp(p->data, q->data, p->len))
            return false;
    }
    return true;
}

static size_t put(char *o, const char *s, size_t n) {
    memcpy(o, s, n);
    return n;
}

static size_t put_quoted(char *o, const char *s) {
    size_t k = 0;
    o[k++] = '"';
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') o[k++] = '\\';
        o[k++] = *s;
    }
    o[k++] = '"';
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    size_t n = data[0];
    char ctype[256];
    const char *ct = NULL;
    if (n != 255) {
        if (size < 1 + n) return 0;
        memcpy(ctype, data + 1, n);
        ctype[n] = 0;
        ct = ctype;
    } else {
        n = 0;
    }
    const char *body = (const char *)data + 1 + n;
    size_t len = size - 1 - n;
    static srv_multipart m, m2, m3;
    char err[256] = "";
    bool ok = srv_multipart_parse(ct, body, len, MAX_FIELD, &m, err, sizeof err);
    char err2[256] = "";
    check(ok == srv_multipart_parse(ct, body, len, MAX_FIELD, &m2, err2, sizeof err2));
    if (!ok) {
        check(err[0] && memchr(err, 0, sizeof err));
        check(!strcmp(err, err2));
        return 0;
    }
    check(same(&m, &m2));
    check(m.n >= 0 && m.n <= SRV_MP_MAX_PARTS);
    const char *prev_end = body;
    for (int i = 0; i < m.n; i++) {
        const srv_mp_part *p = &m.parts[i];
        check(p->data >= prev_end && p->data + p->len <= body + len);
        check(p->data + p->len + 4 <= body + len && !memcmp(p->data + p->len, "\r\n--", 4));
        prev_end = p->data + p->len;
        check(p->name[0] && strlen(p->name) <= SRV_MP_MAX_NAME && strlen(p->filename) <= SRV_MP_MAX_FILENAME);
        check(p->has_filename || (!p->filename[0] && p->len <= MAX_FIELD));
        size_t nl = strlen(p->name);
        bool array = nl > 2 && !strcmp(p->name + nl - 2, "[]");
        for (int j = 0; !array && j < i; j++) check(strcmp(m.parts[j].name, p->name));
        check(srv_multipart_get(&m, p->name) != NULL);
    }
    /* Written back with a boundary no part holds, it reads the same. */
    static const char B[] = "zQ9fuzzB0undary";
    for (int i = 0; i < m.n; i++)
        if (memmem(m.parts[i].data, m.parts[i].len, B, sizeof B - 1)) return 0;
    size_t cap = len + (size_t)m.n * (2 * (SRV_MP_MAX_NAME + SRV_MP_MAX_FILENAME) + 128) + 64;
    char *o = malloc(cap);
    if (!o) return 0;
    size_t k = 0;
    for (int i = 0; i < m.n; i++) {
        const srv_mp_part *p = &m.parts[i];
        k += put(o + k, "--", 2);
        k += put(o + k, B, sizeof B - 1);
        k += put(o + k, "\r\nContent-Disposition: form-data; name=", 39);
        k += put_quoted(o + k, p->name);
        if (p->has_filename) {
            k += put(o + k, "; filename=", 11);
            k += put_quoted(o + k, p->filename);
        }
        k += put(o + k, "\r\n\r\n", 4);
        k += put(o + k, p->data, p->len);
        k += put(o + k, "\r\n", 2);
    }
    k += put(o + k, "--", 2);
    k += put(o + k, B, sizeof B - 1);
    k += put(o + k, "--\r\n", 4);
    check(k <= cap);
    char ct3[64];
    snprintf(ct3, sizeof ct3, "multipart/form-data; boundary=%s", B);
    char err3[256] = "";
    bool ok3 = srv_multipart_parse(ct3, o, k, MAX_FIELD, &m3, err3, sizeof err3);
    if (!ok3) fprintf(stderr, "round trip refused: %s\n", err3);
    check(ok3 && same(&m, &m3));
    free(o);
    return 0;
}
