/* Transcription output shared by `candle transcribe` and the server's
 * /v1/audio endpoints: subtitle cues as openai-whisper writes them. */
#ifndef CANDLE_CLI_SUBTITLES_H
#define CANDLE_CLI_SUBTITLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "candle/whisper.h"

typedef enum cue_format {
    CUE_TXT,       /* the text alone */
    CUE_TXT_TIMES, /* [hh:mm:ss.mmm --> hh:mm:ss.mmm]  text, as whisper.cpp's console */
    CUE_SRT,       /* index, hh:mm:ss,mmm --> ..., text, blank line */
    CUE_VTT,       /* WEBVTT header before cue 1; [hh:]mm:ss.mmm --> ..., text, blank line */
} cue_format;

/* Whitespace Whisper puts before the first word, and any after the last. */
const char *cue_trimmed(const char *s, size_t *len);
/* Segment s as cue number index (from 1) to f. */
void cue_write(FILE *f, const candle_whisper_segment *s, int64_t index, cue_format fmt);

#endif
