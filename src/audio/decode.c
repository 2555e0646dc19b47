/* Audio files to 16 kHz mono f32 (include/candle/audio.h): libsndfile
 * decodes, libsoxr resamples. Either may be missing from the build
 * (CANDLE_HAVE_SNDFILE, CANDLE_HAVE_SOXR from CMake's pkg-config checks);
 * the calls that need one then say which. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "candle/audio.h"
#include "core/core-impl.h"

#ifdef CANDLE_HAVE_SNDFILE
#include <sndfile.h>
#endif
#ifdef CANDLE_HAVE_SOXR
#include <soxr.h>
#endif

/* Sample rates outside this are not audio anyone records. */
#define MIN_RATE 1000
#define MAX_RATE 768000

bool candle_audio_can_decode(void) {
#ifdef CANDLE_HAVE_SNDFILE
    return true;
#else
    return false;
#endif
}

bool candle_audio_can_resample(void) {
#ifdef CANDLE_HAVE_SOXR
    return true;
#else
    return false;
#endif
}

static candle_status too_long(const char *name, double seconds) {
    return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                            "audio: %s: %.0f s of audio is more than the limit of %d s", name,
                            seconds, CANDLE_AUDIO_MAX_SECONDS);
}

candle_status candle_audio_resample(const float *in, size_t n, double rate, float **samples,
                                    size_t *n_out) {
    if (!samples || !n_out || (n && !in))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "audio: resample: NULL argument");
    *samples = NULL;
    *n_out = 0;
    if (!(rate >= MIN_RATE && rate <= MAX_RATE))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "audio: resample: rate %g Hz", rate);
    if ((double)n / rate > CANDLE_AUDIO_MAX_SECONDS) return too_long("resample", (double)n / rate);
#ifdef CANDLE_HAVE_SOXR
    size_t cap = (size_t)((double)n * CANDLE_AUDIO_SAMPLE_RATE / rate) + 64;
    float *out = malloc(sizeof *out * cap);
    if (!out) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: resampling %zu samples", n);
    soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0); /* oneshot's default is LQ */
    size_t done = 0;
    soxr_error_t e = soxr_oneshot(rate, CANDLE_AUDIO_SAMPLE_RATE, 1, in, n, NULL, out, cap, &done,
                                  &io, &q, NULL);
    if (e) {
        free(out);
        return cdl_set_error(NULL, CANDLE_ERR_INTERNAL, "audio: libsoxr: %s", e);
    }
    *samples = out;
    *n_out = done;
    return CANDLE_OK;
#else
    return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                            "audio: resampling from %g Hz needs libsoxr, which this build lacks "
                            "(scripts/install-audio-deps.sh, then reconfigure)",
                            rate);
#endif
}

#ifndef CANDLE_HAVE_SNDFILE
static candle_status unsupported(const char *name) {
    return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                            "audio: %s: decoding audio files needs libsndfile, which this build "
                            "lacks (scripts/install-audio-deps.sh, then reconfigure)",
                            name);
}
#endif

#ifdef CANDLE_HAVE_SNDFILE
/* Frames read in steps of this, so a header's frame count (absent or a lie
 * in a broken file) never sizes an allocation. */
#define CHUNK 65536

/* Interleaved frames to mono, averaging the channels. */
static void downmix(const float *in, int ch, sf_count_t frames, float *out) {
    for (sf_count_t i = 0; i < frames; i++) {
        double s = 0;
        for (int c = 0; c < ch; c++) s += in[i * ch + c];
        out[i] = (float)(s / ch);
    }
}

static candle_status read_all(SNDFILE *f, const SF_INFO *info, const char *name, float **mono,
                              size_t *n) {
    int ch = info->channels;
    size_t limit = (size_t)info->samplerate * CANDLE_AUDIO_MAX_SECONDS, cap = 0, len = 0;
    float *buf = malloc(sizeof *buf * (size_t)CHUNK * (size_t)ch), *out = NULL;
    candle_status r = buf ? CANDLE_OK : cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: audio");
    while (!r) {
        sf_count_t got = sf_readf_float(f, buf, CHUNK);
        if (got <= 0) break;
        if (len + (size_t)got > limit) {
            r = too_long(name, (double)(len + (size_t)got) / info->samplerate);
            break;
        }
        if (len + (size_t)got > cap) {
            cap = cap ? 2 * cap : CHUNK;
            float *p = realloc(out, sizeof *out * cap);
            if (!p) {
                r = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: audio %s", name);
                break;
            }
            out = p;
        }
        downmix(buf, ch, got, out + len);
        len += (size_t)got;
    }
    if (!r && sf_error(f))
        r = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "audio: %s: %s", name, sf_strerror(f));
    if (!r && !len) r = cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "audio: %s: no samples", name);
    free(buf);
    if (r) free(out);
    else *mono = out, *n = len;
    return r;
}

/* Decode an opened file and bring it to 16 kHz. */
static candle_status decode(SNDFILE *f, const SF_INFO *info, const char *name, float **samples,
                            size_t *n) {
    if (info->channels < 1 || info->samplerate < MIN_RATE || info->samplerate > MAX_RATE)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "audio: %s: %d channels at %d Hz", name,
                                info->channels, info->samplerate);
    if (info->frames > 0 && (double)info->frames / info->samplerate > CANDLE_AUDIO_MAX_SECONDS &&
        info->frames != SF_COUNT_MAX)
        return too_long(name, (double)info->frames / info->samplerate);
    float *mono = NULL;
    size_t len = 0;
    candle_status r = read_all(f, info, name, &mono, &len);
    if (r) return r;
    if (info->samplerate == CANDLE_AUDIO_SAMPLE_RATE) {
        *samples = mono, *n = len;
        return CANDLE_OK;
    }
    r = candle_audio_resample(mono, len, info->samplerate, samples, n);
    free(mono);
    return r;
}

static candle_status open_err(SNDFILE *f, const char *name) {
    int e = sf_error(f);
    const char *msg = sf_strerror(f);
    return cdl_set_error(NULL, e == SF_ERR_SYSTEM ? CANDLE_ERR_IO : CANDLE_ERR_FORMAT,
                            "audio: %s: %s", name, msg);
}

/* ---- libsndfile's virtual I/O over a memory image ---- */
typedef struct mem_io {
    const uint8_t *p;
    sf_count_t size, pos;
} mem_io;

static sf_count_t m_len(void *u) { return ((mem_io *)u)->size; }
static sf_count_t m_seek(sf_count_t off, int whence, void *u) {
    mem_io *m = u;
    sf_count_t base = whence == SEEK_CUR ? m->pos : whence == SEEK_END ? m->size : 0;
    if (off < -base || off > m->size - base) return -1;
    return m->pos = base + off;
}
static sf_count_t m_read(void *dst, sf_count_t count, void *u) {
    mem_io *m = u;
    sf_count_t k = count < m->size - m->pos ? count : m->size - m->pos;
    if (k <= 0) return 0;
    memcpy(dst, m->p + m->pos, (size_t)k);
    m->pos += k;
    return k;
}
static sf_count_t m_write(const void *src, sf_count_t count, void *u) {
    (void)src, (void)count, (void)u;
    return 0;
}
static sf_count_t m_tell(void *u) { return ((mem_io *)u)->pos; }
#endif

candle_status candle_audio_load(const char *path, float **samples, size_t *n) {
    if (samples) *samples = NULL;
    if (n) *n = 0;
    if (!path || !samples || !n)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "audio: load: NULL argument");
#ifdef CANDLE_HAVE_SNDFILE
    SF_INFO info = {0};
    struct stat st;
    int se = stat(path, &st) ? errno : 0;
    if (se || !S_ISREG(st.st_mode))
        return cdl_set_error(NULL, CANDLE_ERR_IO, "audio: %s: %s", path, se ? strerror(se) : "not a regular file");
    SNDFILE *f = sf_open(path, SFM_READ, &info);
    /* the file is there: libsndfile's failure is about its contents (for some
     * it says "File does not exist") */
    if (!f)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "audio: %s: not audio libsndfile decodes (WAV, FLAC, OGG, MP3; libsndfile: %s)",
                             path, sf_strerror(NULL));
    candle_status r = decode(f, &info, path, samples, n);
    sf_close(f);
    return r;
#else
    return unsupported(path);
#endif
}

candle_status candle_audio_from_memory(const void *data, size_t size, const char *name,
                                       float **samples, size_t *n) {
    if (samples) *samples = NULL;
    if (n) *n = 0;
    if (!name) name = "audio";
    if ((!data && size) || !samples || !n)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "audio: from_memory: NULL argument");
#ifdef CANDLE_HAVE_SNDFILE
    if (!size) return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "audio: %s: empty file", name);
    SF_VIRTUAL_IO io = {m_len, m_seek, m_read, m_write, m_tell};
    mem_io m = {data, (sf_count_t)size, 0};
    SF_INFO info = {0};
    SNDFILE *f = sf_open_virtual(&io, SFM_READ, &info, &m);
    if (!f) return open_err(NULL, name);
    candle_status r = decode(f, &info, name, samples, n);
    sf_close(f);
    return r;
#else
    return unsupported(name);
#endif
}
