/* Word timestamps of Whisper (whisper_align.c), used by whisper.c: the
 * parts of CTranslate2's WhisperReplica::align and faster-whisper's
 * find_alignment / add_word_timestamps that need no model, on plain arrays. */
#ifndef CANDLE_WHISPER_IMPL_H
#define CANDLE_WHISPER_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "candle/status.h"
#include "candle/tokenizer.h"
#include "candle/whisper.h"

/* A word of the alignment: its text (malloc'ed), the number of its tokens,
 * start and end in seconds from the window's start, the mean probability of
 * its tokens. */
typedef struct cdl_wword {
    char *word;
    int64_t ntok;
    double start, end, prob;
} cdl_wword;

/* A segment of a window being placed: its text tokens' count, start and
 * end (updated from its words), and its words (malloc'ed). */
typedef struct cdl_wsub {
    int64_t n_text;
    double start, end;
    candle_whisper_word *words;
    int64_t n_words;
} cdl_wsub;

/* scores [nh][N][F]: the raw (scaled) cross-attention scores of the
 * alignment heads for the N decoder inputs against the window's F content
 * frames (consumed). As CTranslate2's align: the softmax over the frames,
 * each frame's weights normalized over the inputs (mean 0, variance 1), a
 * median filter of width `width` over the frames (reflected at the ends),
 * the mean over the heads; then the DTW of minus rows [offset, offset + T]
 * (the rows that predict the T text tokens and <|endoftext|>). jump[k] for
 * k <= T: the time in seconds (frame / 50) where the path reaches row k. */
candle_status cdl_whisper_alignment(float *scores, int nh, int64_t N, int64_t F, int width, int64_t offset,
                                    int64_t T, double *jump);

/* openai-whisper's dtw_cpu on x [rows][cols] (the cost of -x, ties to
 * the left move as it breaks them): the path's pairs into ti, fi (at most
 * rows + cols each), their count returned; -1 out of memory. */
int64_t cdl_whisper_dtw_neg(const float *x, int64_t rows, int64_t cols, int64_t *ti, int64_t *fi);

/* faster-whisper's split_to_word_tokens of the text tokens then
 * <|endoftext|> (the last word): on spaces and punctuation, or at every
 * whole character (by_char: languages written without spaces). *words
 * malloc'ed, *n their count. */
candle_status cdl_whisper_split_words(const candle_tokenizer *tok, int32_t eot, const int32_t *text, int64_t T,
                                      bool by_char, cdl_wword **words, int64_t *n);

/* faster-whisper's add_word_timestamps after the alignment: the long words
 * at sentence ends cut to twice the median duration, merge_punctuations,
 * the words handed to the segments in order (times rounded to 0.01 s after
 * time_offset), the first words after a pause and the segments' start and
 * end adjusted; *last_speech the end of the last segment with words. */
candle_status cdl_whisper_place_words(cdl_wword *a, int64_t na, cdl_wsub *subs, int64_t nsub, double time_offset,
                                      const char *prepend, const char *append, double *last_speech);

void cdl_whisper_words_free(cdl_wword *a, int64_t n);

/* The text of ids (the ids from eot on, specials and timestamps, dropped),
 * malloc'ed and NUL-terminated into *out, *len its bytes. */
candle_status cdl_whisper_decode(const candle_tokenizer *tok, int32_t eot, const int32_t *ids, int64_t n, char **out,
                                 size_t *len);

/* Python's round(x, 2) (the decimal nearest the exact value). */
double cdl_round2(double x);

#endif
