/* The base-logits file of the KL-divergence mode (include/candle/kld.h has
 * the format). The reader trusts nothing in the file: every size is checked
 * against limits and the file's length before anything is allocated. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "candle/kld.h"
#include "core/core-impl.h"

static const char kld_magic[8] = {'C', 'D', 'L', 'K', 'L', 'D', 'B', 0};
#define KLD_HEADER 56
#define KLD_ROW_FIXED 16
/* The widest span below the top the u16 codes cover: a clamped token's
 * probability is under e^-64 of the top's, while the step stays at or below
 * 64 / 65535 nats (the error of a code at most half that). */
#define KLD_RANGE 64.0
#define KLD_MAX_VOCAB (1 << 24)
#define KLD_MAX_TOKENS (1 << 30)

int64_t candle_kld_n_rows(const candle_kld_header *h) {
    return h->n_chunk * (h->n_ctx - 1 - h->first);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define FNV_INIT 0xcbf29ce484222325ull

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> 8 * i);
}
static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> 8 * i);
}
static uint32_t get_u32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << 8 * i;
    return v;
}
static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << 8 * i;
    return v;
}
static float get_f32(const unsigned char *p) {
    uint32_t u = get_u32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static void put_f32(unsigned char *p, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    put_u32(p, u);
}

/* The header's fields against each other; the file size they imply. */
static candle_status check_header(const candle_kld_header *h, uint64_t *size) {
    if (h->n_vocab < 2 || h->n_vocab > KLD_MAX_VOCAB)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "kld base: n_vocab %lld out of range [2, %d]",
                             (long long)h->n_vocab, KLD_MAX_VOCAB);
    if (h->n_tokens < 4 || h->n_tokens > KLD_MAX_TOKENS)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "kld base: n_tokens %lld out of range [4, %d]",
                             (long long)h->n_tokens, KLD_MAX_TOKENS);
    if (h->n_ctx < 4 || h->n_ctx > h->n_tokens)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                             "kld base: n_ctx %lld out of range [4, n_tokens %lld]",
                             (long long)h->n_ctx, (long long)h->n_tokens);
    if (h->n_chunk < 1 || h->n_chunk > h->n_tokens / h->n_ctx)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                             "kld base: n_chunk %lld out of range [1, %lld] for %lld tokens "
                             "in chunks of %lld",
                             (long long)h->n_chunk, (long long)(h->n_tokens / h->n_ctx),
                             (long long)h->n_tokens, (long long)h->n_ctx);
    if (h->first != h->n_ctx / 2)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "kld base: first %lld is not n_ctx/2 = %lld",
                             (long long)h->first, (long long)(h->n_ctx / 2));
    /* at most 2^30 rows of at most 2^25 + 12 bytes: no overflow */
    uint64_t rows = (uint64_t)candle_kld_n_rows(h), row = KLD_ROW_FIXED + 2 * (uint64_t)h->n_vocab;
    *size = KLD_HEADER + 4 * (uint64_t)h->n_tokens + rows * row + 8;
    return CANDLE_OK;
}

/* ---- reading ---- */

struct candle_kld_reader {
    FILE *f;                  /* NULL: reading mem */
    const unsigned char *mem; /* [size] */
    size_t size, pos;
    uint64_t hash;
    candle_kld_header h;
    int32_t *tokens;    /* [n_tokens] */
    unsigned char *buf; /* [KLD_ROW_FIXED + 2 * n_vocab] one row */
    int64_t row;        /* rows read */
};

static candle_status rd(candle_kld_reader *r, void *dst, size_t n, const char *what) {
    if (r->f) {
        if (fread(dst, 1, n, r->f) != n)
            return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "kld base: truncated in %s", what);
    } else {
        if (n > r->size - r->pos)
            return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "kld base: truncated in %s", what);
        memcpy(dst, r->mem + r->pos, n);
    }
    r->pos += n;
    r->hash = fnv(r->hash, dst, n);
    return CANDLE_OK;
}

static candle_status open_common(candle_kld_reader *r, uint64_t size) {
    unsigned char hd[KLD_HEADER];
    candle_status s = rd(r, hd, sizeof hd, "the header");
    if (s) return s;
    if (memcmp(hd, kld_magic, 8))
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "kld base: not a Candle KLD base file (bad magic)");
    uint32_t ver = get_u32(hd + 8), fixed = get_u32(hd + 12);
    if (ver != CANDLE_KLD_VERSION)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "kld base: version %u, this build reads version %d",
                             ver, CANDLE_KLD_VERSION);
    if (fixed != KLD_ROW_FIXED)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "kld base: row fixed part %u bytes, not %d", fixed,
                             KLD_ROW_FIXED);
    uint64_t f[5];
    for (int i = 0; i < 5; i++) {
        f[i] = get_u64(hd + 16 + 8 * i);
        if (f[i] > (uint64_t)INT64_MAX) f[i] = (uint64_t)INT64_MAX; /* refused below */
    }
    r->h = (candle_kld_header){(int64_t)f[0], (int64_t)f[1], (int64_t)f[2], (int64_t)f[3], (int64_t)f[4]};
    uint64_t want;
    if ((s = check_header(&r->h, &want))) return s;
    if (size != want)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                             "kld base: %llu bytes, the header implies %llu (%s)",
                             (unsigned long long)size, (unsigned long long)want,
                             size < want ? "truncated" : "trailing data");
    r->tokens = malloc((size_t)r->h.n_tokens * sizeof *r->tokens);
    r->buf = malloc(KLD_ROW_FIXED + 2 * (size_t)r->h.n_vocab);
    if (!r->tokens || !r->buf) return cdl_set_error(NULL, CANDLE_ERR_OOM, "kld base: out of memory");
    for (int64_t i = 0; i < r->h.n_tokens; i++) {
        unsigned char b[4];
        if ((s = rd(r, b, 4, "the token ids"))) return s;
        uint32_t t = get_u32(b);
        if (t >= (uint64_t)r->h.n_vocab)
            return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "kld base: token %lld is %u, not below n_vocab %lld",
                                 (long long)i, t, (long long)r->h.n_vocab);
        r->tokens[i] = (int32_t)t;
    }
    return CANDLE_OK;
}

static candle_status open_done(candle_kld_reader **out, candle_kld_reader *r, candle_status s) {
    if (s) {
        candle_kld_close(r);
        return s;
    }
    *out = r;
    return CANDLE_OK;
}

candle_status candle_kld_open(candle_kld_reader **out, const char *path) {
    if (!out || !path) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "kld base: NULL argument");
    *out = NULL;
    candle_kld_reader *r = calloc(1, sizeof *r);
    if (!r) return cdl_set_error(NULL, CANDLE_ERR_OOM, "kld base: out of memory");
    r->hash = FNV_INIT;
    struct stat st;
    if (!(r->f = fopen(path, "rb")) || fstat(fileno(r->f), &st) || !S_ISREG(st.st_mode)) {
        candle_kld_close(r);
        return cdl_set_error(NULL, CANDLE_ERR_IO, "kld base: cannot read %s (not a readable regular file)", path);
    }
    return open_done(out, r, open_common(r, (uint64_t)st.st_size));
}

candle_status candle_kld_open_memory(candle_kld_reader **out, const void *data, size_t size) {
    if (!out || (!data && size)) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "kld base: NULL argument");
    *out = NULL;
    candle_kld_reader *r = calloc(1, sizeof *r);
    if (!r) return cdl_set_error(NULL, CANDLE_ERR_OOM, "kld base: out of memory");
    r->hash = FNV_INIT;
    r->mem = data;
    r->size = size;
    return open_done(out, r, open_common(r, size));
}

const candle_kld_header *candle_kld_header_of(const candle_kld_reader *r) { return &r->h; }
const int32_t *candle_kld_tokens(const candle_kld_reader *r) { return r->tokens; }

candle_status candle_kld_read_row(candle_kld_reader *r, float *logp, candle_kld_row *row) {
    int64_t V = r->h.n_vocab;
    if (r->row >= candle_kld_n_rows(&r->h))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "kld base: all %lld rows already read",
                             (long long)r->row);
    candle_status s = rd(r, r->buf, KLD_ROW_FIXED + 2 * (size_t)V, "a row");
    if (s) return s;
    uint32_t am = get_u32(r->buf);
    float top = get_f32(r->buf + 4), next = get_f32(r->buf + 8), stepf = get_f32(r->buf + 12);
    long long at = (long long)r->row;
    if (am >= (uint64_t)V)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "kld base: row %lld: argmax %u not below n_vocab %lld",
                             at, am, (long long)V);
    /* the top log-prob lies in [-log V, 0]; the next token's at or below it */
    if (!isfinite(top) || top > 1e-4f || top < -(float)log((double)V) - 1e-3f)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "kld base: row %lld: top log-prob %g out of range", at,
                             (double)top);
    if (!isfinite(next) || next > top + 1e-4f)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                             "kld base: row %lld: next-token log-prob %g not finite or above the top %g",
                             at, (double)next, (double)top);
    if (!isfinite(stepf) || stepf <= 0 || (double)stepf * 65535.0 > KLD_RANGE * (1 + 1e-6))
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "kld base: row %lld: step %g out of range (0, %g]",
                             at, (double)stepf, KLD_RANGE / 65535.0);
    const unsigned char *q = r->buf + KLD_ROW_FIXED;
    if (q[2 * am] | q[2 * am + 1])
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "kld base: row %lld: the argmax's code is not 0", at);
    const double step = stepf;
    double sum = 0;
    for (int64_t i = 0; i < V; i++) {
        double d = (double)(q[2 * i] | q[2 * i + 1] << 8) * step;
        logp[i] = (float)-d; /* relative to the top */
        sum += exp(-d);
    }
    /* renormalized: log p_i = (top - d_i) - log sum_j exp(top - d_j) */
    float lse = (float)log(sum);
    for (int64_t i = 0; i < V; i++) logp[i] -= lse;
    if (row) *row = (candle_kld_row){(int32_t)am, top, next};
    r->row++;
    return CANDLE_OK;
}

candle_status candle_kld_finish(candle_kld_reader *r) {
    if (r->row != candle_kld_n_rows(&r->h))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "kld base: %lld of %lld rows read",
                             (long long)r->row, (long long)candle_kld_n_rows(&r->h));
    uint64_t want = r->hash;
    unsigned char b[8];
    candle_status s = rd(r, b, 8, "the checksum");
    if (s) return s;
    if (get_u64(b) != want)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                             "kld base: checksum mismatch (the file is corrupted)");
    return CANDLE_OK;
}

void candle_kld_close(candle_kld_reader *r) {
    if (!r) return;
    if (r->f) fclose(r->f);
    free(r->tokens);
    free(r->buf);
    free(r);
}

/* ---- writing ---- */

struct candle_kld_writer {
    cdl_out_file o;
    uint64_t hash;
    candle_kld_header h;
    unsigned char *buf; /* [KLD_ROW_FIXED + 2 * n_vocab] */
    int64_t row;
    bool failed;
};

static bool wr(candle_kld_writer *w, const void *p, size_t n) {
    w->hash = fnv(w->hash, p, n);
    return fwrite(p, 1, n, w->o.f) == n;
}

candle_status candle_kld_create(candle_kld_writer **out, const char *path, const candle_kld_header *h,
                                const int32_t *tokens) {
    if (!out || !path || !h || !tokens)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "kld base: NULL argument");
    *out = NULL;
    uint64_t size;
    candle_status s = check_header(h, &size);
    if (s) return s;
    for (int64_t i = 0; i < h->n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= h->n_vocab)
            return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "kld base: token %lld is %d, not below n_vocab %lld",
                                 (long long)i, (int)tokens[i], (long long)h->n_vocab);
    candle_kld_writer *w = calloc(1, sizeof *w);
    if (w) w->buf = malloc(KLD_ROW_FIXED + 2 * (size_t)h->n_vocab);
    if (!w || !w->buf) {
        if (w) free(w);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "kld base: out of memory");
    }
    if ((s = cdl_out_file_open(&w->o, path, "kld base"))) {
        free(w->buf);
        free(w);
        return s;
    }
    w->hash = FNV_INIT;
    w->h = *h;
    unsigned char hd[KLD_HEADER];
    memcpy(hd, kld_magic, 8);
    put_u32(hd + 8, CANDLE_KLD_VERSION);
    put_u32(hd + 12, KLD_ROW_FIXED);
    put_u64(hd + 16, (uint64_t)h->n_vocab);
    put_u64(hd + 24, (uint64_t)h->n_ctx);
    put_u64(hd + 32, (uint64_t)h->n_chunk);
    put_u64(hd + 40, (uint64_t)h->first);
    put_u64(hd + 48, (uint64_t)h->n_tokens);
    bool ok = wr(w, hd, sizeof hd);
    for (int64_t i = 0; ok && i < h->n_tokens; i++) {
        unsigned char b[4];
        put_u32(b, (uint32_t)tokens[i]);
        ok = wr(w, b, 4);
    }
    w->failed = !ok;
    *out = w;
    return CANDLE_OK;
}

candle_status candle_kld_write_row(candle_kld_writer *w, const float *logits, int32_t next) {
    int64_t V = w->h.n_vocab;
    if (w->row >= candle_kld_n_rows(&w->h))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "kld base: more than %lld rows written",
                             (long long)candle_kld_n_rows(&w->h));
    if (next < 0 || next >= V)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "kld base: next token %d not below n_vocab %lld",
                             (int)next, (long long)V);
    int64_t am = 0;
    for (int64_t i = 0; i < V; i++) {
        if (!isfinite(logits[i]))
            return cdl_set_error(NULL, CANDLE_ERR_NUMERIC, "kld base: row %lld: logit %lld is not finite",
                                 (long long)w->row, (long long)i);
        if (logits[i] > logits[am]) am = i;
    }
    double mx = logits[am], mn = mx, sum = 0;
    for (int64_t i = 0; i < V; i++) {
        sum += exp((double)logits[i] - mx);
        if (logits[i] < mn) mn = logits[i];
    }
    double lse = log(sum), range = mx - mn > KLD_RANGE ? KLD_RANGE : mx - mn;
    float step = (float)(range / 65535.0);
    if (!(step > 0)) step = (float)(1.0 / 65535.0); /* all logits equal: every code 0 */
    put_f32(w->buf + 12, step);
    put_u32(w->buf, (uint32_t)am);
    put_f32(w->buf + 4, (float)-lse);
    put_f32(w->buf + 8, (float)((double)logits[next] - mx - lse));
    unsigned char *q = w->buf + KLD_ROW_FIXED;
    const double inv = 1.0 / (double)step;
    for (int64_t i = 0; i < V; i++) {
        double d = (mx - (double)logits[i]) * inv;
        unsigned v = d >= 65535.0 ? 65535u : (unsigned)lrint(d);
        q[2 * i] = (unsigned char)v;
        q[2 * i + 1] = (unsigned char)(v >> 8);
    }
    if (!w->failed && !wr(w, w->buf, KLD_ROW_FIXED + 2 * (size_t)V)) w->failed = true;
    w->row++;
    return CANDLE_OK;
}

candle_status candle_kld_commit(candle_kld_writer *w, bool ok) {
    if (!w) return CANDLE_OK;
    candle_status s = CANDLE_OK;
    if (ok && w->row != candle_kld_n_rows(&w->h)) {
        s = cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "kld base: %lld of %lld rows written",
                          (long long)w->row, (long long)candle_kld_n_rows(&w->h));
        ok = false;
    }
    if (ok) {
        unsigned char b[8];
        put_u64(b, w->hash);
        if (w->failed || fwrite(b, 1, 8, w->o.f) != 8) ok = false;
    }
    candle_status c = cdl_out_file_commit(&w->o, ok, "kld base");
    free(w->buf);
    free(w);
    return s ? s : c;
}
