/* Subtitle cues as openai-whisper's writers (WriteSRT, WriteVTT) print them. */
#include "subtitles.h"

#include <math.h>
#include <string.h>

const char *cue_trimmed(const char *s, size_t *len) {
    while (*s == ' ' || *s == '\n') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n')) n--;
    *len = n;
    return s;
}

/* openai-whisper's format_timestamp: [hh:]mm:ss<marker>mmm, hours always
 * (SRT) or when there are any (VTT). */
static void write_time(FILE *f, double t, bool hours, char marker) {
    long long ms = llround(t * 1000.0);
    long long h = ms / 3600000, m = ms / 60000 % 60, s = ms / 1000 % 60;
    if (hours || h > 0) fprintf(f, "%02lld:", h);
    fprintf(f, "%02lld:%02lld%c%03lld", m, s, marker, ms % 1000);
}

/* The text of a cue: stripped, "-->" as "->" (openai-whisper). */
static void write_cue_text(FILE *f, const char *text) {
    size_t n;
    const char *t = cue_trimmed(text, &n);
    for (size_t i = 0; i < n; i++) {
        if (i + 3 <= n && !memcmp(t + i, "-->", 3)) {
            fputs("->", f);
            i += 2;
        } else {
            putc(t[i], f);
        }
    }
    putc('\n', f);
}

void cue_write(FILE *f, const candle_whisper_segment *s, int64_t index, cue_format fmt) {
    bool hours = fmt != CUE_VTT;
    char marker = fmt == CUE_SRT ? ',' : '.';
    if (fmt == CUE_VTT && index == 1) fputs("WEBVTT\n\n", f);
    if (fmt == CUE_SRT) fprintf(f, "%lld\n", (long long)index);
    if (fmt == CUE_TXT_TIMES) putc('[', f);
    if (fmt != CUE_TXT) {
        write_time(f, s->t0, hours, marker);
        fputs(" --> ", f);
        write_time(f, s->t1, hours, marker);
        fputs(fmt == CUE_TXT_TIMES ? "]  " : "\n", f);
    }
    write_cue_text(f, s->text);
    if (fmt == CUE_SRT || fmt == CUE_VTT) putc('\n', f);
}
