/* Lists of input texts for the encoder commands (embed, classify, rerank):
 * -p values and the lines of a -f file. */
#ifndef CANDLE_CLI_TEXTS_H
#define CANDLE_CLI_TEXTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct texts {
    char **v;
    int64_t n, cap;
} texts;

/* Append a copy of s[0..len); false when out of memory. */
bool texts_push(texts *t, const char *s, size_t len);
/* Append every non-empty line of path (newlines stripped); false when it
 * cannot be read. */
bool texts_read_lines(texts *t, const char *path);
void texts_free(texts *t);
/* s as a JSON string (UTF-8 passed through). */
void texts_json_str(FILE *f, const char *s);

#endif
