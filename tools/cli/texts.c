/* Input text lists of the encoder commands (texts.h). */
#include "texts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

bool texts_push(texts *t, const char *s, size_t len) {
    if (t->n == t->cap) {
        int64_t cap = t->cap ? 2 * t->cap : 16;
        char **v = realloc(t->v, (size_t)cap * sizeof *v);
        if (!v) return false;
        t->v = v;
        t->cap = cap;
    }
    char *c = malloc(len + 1);
    if (!c) return false;
    memcpy(c, s, len);
    c[len] = 0;
    t->v[t->n++] = c;
    return true;
}

bool texts_read_lines(texts *t, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    bool ok = true;
    while (ok && (len = getline(&line, &cap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
        if (len > 0) ok = texts_push(t, line, (size_t)len);
    }
    free(line);
    fclose(f);
    return ok;
}

void texts_free(texts *t) {
    for (int64_t i = 0; i < t->n; i++) free(t->v[i]);
    free(t->v);
    t->v = NULL;
    t->n = t->cap = 0;
}

void texts_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}
