/* Word timestamps of Whisper without the model (whisper-impl.h): the
 * attention weights to a time path as CTranslate2's align computes it, and
 * the path to words as faster-whisper 1.2.1's find_alignment and
 * add_word_timestamps do. Times are seconds from the window's start; 50
 * alignment frames a second (the encoder's stride of 2 over 100 mel frames). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core-impl.h"
#include "whisper-impl.h"

#define TOKENS_PER_SECOND 50.0

static candle_status oom(void) { return cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory"); }

double cdl_round2(double x) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.2f", x); /* glibc: the exact value, correctly rounded, as Python's dtoa */
    return strtod(buf, NULL);
}

int64_t cdl_whisper_dtw_neg(const float *x, int64_t N, int64_t M, int64_t *ti, int64_t *fi) {
    size_t W = (size_t)M + 1, cells = ((size_t)N + 1) * W;
    float *cost = malloc(cells * sizeof *cost);
    signed char *trace = malloc(cells);
    if (!cost || !trace) {
        free(cost);
        free(trace);
        return -1;
    }
    for (size_t i = 0; i < cells; i++) {
        cost[i] = INFINITY;
        trace[i] = -1;
    }
    cost[0] = 0;
    for (int64_t j = 1; j <= M; j++)
        for (int64_t i = 1; i <= N; i++) {
            float c0 = cost[(size_t)(i - 1) * W + (size_t)(j - 1)], c1 = cost[(size_t)(i - 1) * W + (size_t)j];
            float c2 = cost[(size_t)i * W + (size_t)(j - 1)], c;
            signed char t;
            if (c0 < c1 && c0 < c2) c = c0, t = 0;
            else if (c1 < c0 && c1 < c2) c = c1, t = 1;
            else c = c2, t = 2;
            cost[(size_t)i * W + (size_t)j] = -x[(size_t)(i - 1) * (size_t)M + (size_t)(j - 1)] + c;
            trace[(size_t)i * W + (size_t)j] = t;
        }
    /* the backtrace: the first row moves left, the first column up */
    for (size_t j = 0; j < W; j++) trace[j] = 2;
    for (int64_t i = 0; i <= N; i++) trace[(size_t)i * W] = 1;
    int64_t i = N, j = M, n = 0;
    while (i > 0 || j > 0) {
        ti[n] = i - 1;
        fi[n++] = j - 1;
        signed char t = trace[(size_t)i * W + (size_t)j];
        if (t == 0) i--, j--;
        else if (t == 1) i--;
        else j--;
    }
    for (int64_t a = 0, b = n - 1; a < b; a++, b--) { /* start first */
        int64_t u = ti[a], v = fi[a];
        ti[a] = ti[b], fi[a] = fi[b];
        ti[b] = u, fi[b] = v;
    }
    free(cost);
    free(trace);
    return n;
}

static float median_of(float *w, int n) {
    for (int a = 1; a < n; a++) {
        float v = w[a];
        int b = a;
        for (; b > 0 && w[b - 1] > v; b--) w[b] = w[b - 1];
        w[b] = v;
    }
    return w[n / 2];
}

candle_status cdl_whisper_alignment(float *scores, int nh, int64_t N, int64_t F, int width, int64_t offset,
                                    int64_t T, double *jump) {
    if (nh < 1 || N < offset + T + 1 || F < 1 || width < 1 || width > 63)
        return cdl_set_error(NULL, CANDLE_ERR_INTERNAL, "whisper: alignment of %lld rows by %lld frames", (long long)N,
                             (long long)F);
    size_t plane = (size_t)N * (size_t)F;
    /* softmax over the frames */
    for (size_t r = 0; r < (size_t)nh * (size_t)N; r++) {
        float *x = scores + r * (size_t)F, m = -INFINITY, sum = 0;
        for (int64_t f = 0; f < F; f++) m = fmaxf(m, x[f]);
        for (int64_t f = 0; f < F; f++) sum += x[f] = expf(x[f] - m);
        for (int64_t f = 0; f < F; f++) x[f] *= 1.0f / sum;
    }
    /* each frame normalized over the inputs (CTranslate2's layer_norm_axis, epsilon 0) */
    for (int h = 0; h < nh; h++)
        for (int64_t f = 0; f < F; f++) {
            float *x = scores + (size_t)h * plane + (size_t)f, sum = 0, sq = 0;
            for (int64_t t = 0; t < N; t++) {
                float v = x[(size_t)t * (size_t)F];
                sum += v;
                sq += v * v;
            }
            float mean = sum / (float)N, var = fmaxf(sq / (float)N - mean * mean, 0.0f), rstd = 1.0f / sqrtf(var);
            for (int64_t t = 0; t < N; t++) x[(size_t)t * (size_t)F] = (x[(size_t)t * (size_t)F] - mean) * rstd;
        }
    /* the median filter over the frames of rows [offset, offset + T], the mean over the heads */
    int64_t R = T + 1, rank = width / 2;
    float *m = calloc((size_t)R * (size_t)F, sizeof *m), win[64];
    int64_t *ti = malloc((size_t)(R + F) * sizeof *ti), *fi = malloc((size_t)(R + F) * sizeof *fi);
    if (!m || !ti || !fi) {
        free(m);
        free(ti);
        free(fi);
        return oom();
    }
    for (int h = 0; h < nh; h++)
        for (int64_t r = 0; r < R; r++) {
            const float *x = scores + (size_t)h * plane + (size_t)(offset + r) * (size_t)F;
            float *o = m + (size_t)r * (size_t)F;
            for (int64_t j = 0; j < F; j++) {
                float v = x[j];
                if (F > rank) {
                    for (int64_t k = -rank; k <= rank; k++) {
                        int64_t rd = llabs(j + k);
                        if (rd >= F) rd = F - (rd - F) - 2;
                        win[k + rank] = x[rd];
                    }
                    v = median_of(win, width);
                }
                o[j] += v;
            }
        }
    for (size_t k = 0; k < (size_t)R * (size_t)F; k++) m[k] /= (float)nh;
    int64_t n = cdl_whisper_dtw_neg(m, R, F, ti, fi);
    candle_status s = CANDLE_OK;
    if (n < 0) {
        s = oom();
    } else { /* the time where the text index first takes each value */
        int64_t k = 0;
        for (int64_t p = 0; p < n && k <= T; p++)
            if (p == 0 || ti[p] != ti[p - 1]) jump[k++] = (double)fi[p] / TOKENS_PER_SECOND;
        for (; k <= T; k++) jump[k] = k ? jump[k - 1] : 0;
    }
    free(m);
    free(ti);
    free(fi);
    return s;
}

/* ---- words ---- */

/* The offset of the first U+FFFD or malformed UTF-8 in s[0..n), or -1. */
static int64_t first_bad(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!len || i + len > n) return (int64_t)i;
        for (size_t k = 1; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return (int64_t)i;
        if (len == 3 && c == 0xEF && s[i + 1] == 0xBF && s[i + 2] == 0xBD) return (int64_t)i;
        i += len;
    }
    return -1;
}

candle_status cdl_whisper_decode(const candle_tokenizer *tok, int32_t eot, const int32_t *ids, int64_t n, char **out,
                                 size_t *len) {
    int32_t *t = malloc((size_t)(n ? n : 1) * sizeof *t);
    int64_t k = 0;
    if (!t) return oom();
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < eot) t[k++] = ids[i];
    size_t cap = 64 + (size_t)k * 16;
    char *buf = malloc(cap);
    candle_status s = buf ? candle_tokenizer_decode(tok, t, k, false, buf, cap, len) : oom();
    if (s == CANDLE_ERR_INVALID_ARG && buf && *len + 1 > cap) {
        char *b2 = realloc(buf, *len + 1);
        s = b2 ? candle_tokenizer_decode(tok, t, k, false, b2, *len + 1, len) : oom();
        if (b2) buf = b2;
    }
    free(t);
    if (s) {
        free(buf);
        buf = NULL;
    }
    *out = buf;
    return s;
}

static bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* Python's `s.strip() in set` (a substring test; the empty string is in every string). */
static bool stripped_in(const char *s, const char *set) {
    while (is_space(*s)) s++;
    size_t n = strlen(s);
    while (n && is_space(s[n - 1])) n--;
    if (!n) return true;
    for (const char *p = set; *p; p++)
        if (!strncmp(p, s, n)) return true;
    return false;
}

static bool in(const char *s, const char *set) { return !*s || strstr(set, s) != NULL; }

void cdl_whisper_words_free(cdl_wword *a, int64_t n) {
    for (int64_t i = 0; a && i < n; i++) free(a[i].word);
    free(a);
}

/* a[k].word += s (s malloc'ed or not) */
static bool append_text(cdl_wword *w, const char *s) {
    size_t a = strlen(w->word), b = strlen(s);
    char *p = realloc(w->word, a + b + 1);
    if (!p) return false;
    memcpy(p + a, s, b + 1);
    w->word = p;
    return true;
}

candle_status cdl_whisper_split_words(const candle_tokenizer *tok, int32_t eot, const int32_t *text, int64_t T,
                                      bool by_char, cdl_wword **words, int64_t *nw) {
    *words = NULL;
    *nw = 0;
    int64_t n = T + 1;
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    cdl_wword *w = calloc((size_t)n, sizeof *w);
    char *full = NULL;
    size_t full_len = 0, off = 0;
    candle_status s = ids && w ? CANDLE_OK : oom();
    if (!s) {
        memcpy(ids, text, (size_t)T * sizeof *ids);
        ids[T] = eot;
        s = cdl_whisper_decode(tok, eot, ids, n, &full, &full_len);
    }
    /* split_tokens_on_unicode: a piece ends where its tokens decode whole */
    int64_t k = 0, from = 0;
    for (int64_t i = 0; !s && i < n; i++) {
        char *d = NULL;
        size_t len = 0;
        s = cdl_whisper_decode(tok, eot, ids + from, i + 1 - from, &d, &len);
        if (s) break;
        int64_t bad = first_bad((const unsigned char *)d, len);
        size_t at = off + (size_t)bad;
        if (bad >= 0 && !(at < full_len && first_bad((const unsigned char *)full + at, full_len - at) == 0)) {
            free(d);
            continue;
        }
        /* split_tokens_on_spaces: a piece joins the word before it unless
         * it is special, starts with a space or is punctuation */
        bool special = ids[from] >= eot;
        bool starts = by_char || k == 0 || special || d[0] == ' ' ||
                      stripped_in(d, "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~");
        if (starts) {
            w[k].word = d;
            w[k++].ntok = i + 1 - from;
        } else {
            bool ok = append_text(&w[k - 1], d);
            free(d);
            if (!ok) s = oom();
            w[k - 1].ntok += i + 1 - from;
        }
        off += len;
        from = i + 1;
    }
    free(ids);
    free(full);
    if (s) {
        cdl_whisper_words_free(w, k);
        return s;
    }
    *words = w;
    *nw = k;
    return CANDLE_OK;
}

/* faster-whisper's merge_punctuations */
static candle_status merge_punct(cdl_wword *a, int64_t n, const char *prepend, const char *append) {
    for (int64_t i = n - 2, j = n - 1; i >= 0; i--) {
        cdl_wword *p = &a[i], *f = &a[j];
        if (p->word[0] == ' ' && stripped_in(p->word, prepend)) {
            char *m = malloc(strlen(p->word) + strlen(f->word) + 1);
            if (!m) return oom();
            strcpy(m, p->word);
            strcat(m, f->word);
            free(f->word);
            f->word = m;
            f->ntok += p->ntok;
            p->word[0] = 0;
            p->ntok = 0;
        } else {
            j = i;
        }
    }
    for (int64_t i = 0, j = 1; j < n; j++) {
        cdl_wword *p = &a[i], *f = &a[j];
        size_t pl = strlen(p->word);
        if (!(pl && p->word[pl - 1] == ' ') && in(f->word, append)) {
            if (!append_text(p, f->word)) return oom();
            p->ntok += f->ntok;
            f->word[0] = 0;
            f->ntok = 0;
        } else {
            i = j;
        }
    }
    return CANDLE_OK;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

candle_status cdl_whisper_place_words(cdl_wword *a, int64_t na, cdl_wsub *subs, int64_t nsub, double time_offset,
                                      const char *prepend, const char *append, double *last_speech) {
    /* the median of the non-zero durations, at most 0.7 s */
    double *d = malloc((size_t)(na ? na : 1) * sizeof *d), median = 0;
    if (!d) return oom();
    int64_t nd = 0;
    for (int64_t i = 0; i < na; i++)
        if (a[i].end - a[i].start != 0) d[nd++] = a[i].end - a[i].start;
    if (nd) {
        qsort(d, (size_t)nd, sizeof *d, cmp_double);
        median = nd % 2 ? d[nd / 2] : (d[nd / 2 - 1] + d[nd / 2]) / 2;
    }
    free(d);
    median = fmin(0.7, median);
    double max_d = median * 2;
    static const char *ends = ".\xe3\x80\x82!\xef\xbc\x81?\xef\xbc\x9f"; /* .。!！?？ */
    if (nd)
        for (int64_t i = 1; i < na; i++)
            if (a[i].end - a[i].start > max_d) {
                if (in(a[i].word, ends)) a[i].end = a[i].start + max_d;
                else if (in(a[i - 1].word, ends)) a[i].start = a[i].end - max_d;
            }
    candle_status s = merge_punct(a, na, prepend, append);
    if (s) return s;
    int64_t wi = 0;
    for (int64_t si = 0; si < nsub; si++) {
        cdl_wsub *g = &subs[si];
        int64_t saved = 0, n = 0;
        g->words = calloc((size_t)(na ? na : 1), sizeof *g->words);
        if (!g->words) return oom();
        for (; wi < na && saved < g->n_text; wi++) {
            const cdl_wword *t = &a[wi];
            if (t->word[0]) {
                candle_whisper_word *w = &g->words[n];
                w->word = malloc(strlen(t->word) + 1);
                if (!w->word) return oom();
                strcpy(w->word, t->word);
                w->t0 = cdl_round2(time_offset + t->start);
                w->t1 = cdl_round2(time_offset + t->end);
                w->probability = (float)t->prob;
                g->n_words = ++n;
            }
            saved += t->ntok;
        }
        if (!n) {
            free(g->words);
            g->words = NULL;
            continue;
        }
        candle_whisper_word *w = g->words;
        /* the first and second word after a pause at most twice the median */
        if (w[0].t1 - *last_speech > median * 4 &&
            (w[0].t1 - w[0].t0 > max_d || (n > 1 && w[1].t1 - w[0].t0 > max_d * 2))) {
            if (n > 1 && w[1].t1 - w[1].t0 > max_d) {
                double boundary = fmax(w[1].t1 / 2, w[1].t1 - max_d);
                w[0].t1 = w[1].t0 = boundary;
            }
            w[0].t0 = fmax(0, w[0].t1 - max_d);
        }
        /* the segment's start rather than a first word too long */
        if (g->start < w[0].t1 && g->start - 0.5 > w[0].t0) w[0].t0 = fmax(0, fmin(w[0].t1 - median, g->start));
        else g->start = w[0].t0;
        /* the segment's end rather than a last word too long */
        if (g->end > w[n - 1].t0 && g->end + 0.5 < w[n - 1].t1) w[n - 1].t1 = fmax(w[n - 1].t0 + median, g->end);
        else g->end = w[n - 1].t1;
        *last_speech = g->end;
    }
    return CANDLE_OK;
}
