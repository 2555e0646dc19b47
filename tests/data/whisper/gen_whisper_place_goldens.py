#!/usr/bin/env python3
"""Goldens for tests/unit/test_whisper_align.c: faster-whisper 1.2.1's
WhisperModel.add_word_timestamps (the median duration, the long words cut
at sentence ends, merge_punctuations, the words handed to the segments, the
adjustments after a pause and of the segments' start and end) run on
hand-made alignments, find_alignment replaced by one that returns them, so
no model is needed. Each case: the alignment (word, its token count, start,
end, probability, in seconds from the window), the window's segments (text
token count, start, end), seek, last_speech_timestamp; and what the
reference gives: each segment's start, end and words [start, end, word,
probability], and the last speech timestamp.

  python3 -m venv /work/venv-fw && /work/venv-fw/bin/pip install faster-whisper==1.2.1
usage: /work/venv-fw/bin/python tests/data/whisper/gen_whisper_place_goldens.py
"""
import copy
import json
import os

from faster_whisper.transcribe import WhisperModel

HERE = os.path.dirname(os.path.abspath(__file__))
PREPEND = "\"'“¿([{-"
APPEND = "\"'.。,，!！?？:：”)]}、"

CASES = [
    # punctuation merged both ways; a long "." cut, the long word after it moved
    {"seek": 0, "last": 0.0,
     "words": [[" Hello", 1, 0.00, 0.40, 0.9], [",", 1, 0.40, 0.42, 0.8], [" \"", 1, 0.42, 0.50, 0.7],
               ["world", 2, 0.50, 0.90, 0.6], ["\"", 1, 0.90, 0.92, 0.5], [".", 1, 0.92, 2.50, 0.4],
               [" Then", 1, 2.50, 4.80, 0.3], [" go", 1, 4.80, 5.10, 0.2], ["!", 1, 5.10, 5.12, 0.1]],
     "subs": [[7, 0.0, 2.0], [3, 3.0, 5.2]]},
    # a long first word after a pause, 15 s into the audio
    {"seek": 1500, "last": 2.0,
     "words": [[" A", 1, 0.0, 3.0, 0.9], [" bee", 1, 3.0, 3.3, 0.9], [" sea", 1, 3.3, 3.6, 0.9],
               [" dee", 1, 3.6, 3.9, 0.9]],
     "subs": [[4, 0.0, 19.9]]},
    # the segment's start and end rather than words too long (median capped at 0.7)
    {"seek": 0, "last": 0.0,
     "words": [[" one", 1, 0.0, 1.0, 0.5], [" two", 1, 1.0, 1.2, 0.5], [" three", 1, 1.2, 4.0, 0.5]],
     "subs": [[3, 0.8, 3.0]]},
    # two long words after a pause: the boundary between them moved
    {"seek": 0, "last": 0.0,
     "words": [[" x", 1, 0.0, 5.0, 0.5], [" y", 1, 5.0, 8.0, 0.5], [" z", 1, 8.0, 8.2, 0.5],
               [" w", 1, 8.2, 8.4, 0.5], [" v", 1, 8.4, 8.6, 0.5]],
     "subs": [[5, 0.0, 8.6]]},
    # zero durations only (no median); rounding after an odd offset; a
    # segment whose words are all merged away ("," alone) and one with none left
    {"seek": 1234, "last": 0.0,
     "words": [[" a", 1, 0.015, 0.015, 0.5], [" b", 1, 0.015, 0.015, 0.25], [",", 1, 0.015, 0.015, 0.125]],
     "subs": [[2, 12.0, 12.9], [1, 12.9, 13.0]]},
]


class Tok:
    eot = 50257


def run(case):
    align = [dict(word=w, tokens=[1] * n, start=s, end=e, probability=p) for w, n, s, e, p in case["words"]]
    fake = type("M", (), {})()
    fake.frames_per_second = 100
    fake.find_alignment = lambda tokenizer, text_tokens, enc, num_frames: [copy.deepcopy(align)]
    segs = [[dict(seek=case["seek"], start=s, end=e, tokens=[1] * n) for n, s, e in case["subs"]]]
    last = WhisperModel.add_word_timestamps(fake, segs, Tok(), None, 0, PREPEND, APPEND, case["last"])
    out = dict(case)
    out["want"] = {"last": last, "subs": [[s["start"], s["end"], [[w["start"], w["end"], w["word"],
                                                                   w["probability"]] for w in s["words"]]]
                                         for s in segs[0]]}
    return out


def main():
    import faster_whisper
    out = {"faster_whisper": faster_whisper.__version__, "prepend": PREPEND, "append": APPEND,
           "cases": [run(c) for c in CASES]}
    for c in out["cases"]:
        print(c["want"])
    with open(os.path.join(HERE, "whisper_place_goldens.json"), "w") as f:
        json.dump(out, f, indent=None, separators=(",", ":"), ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
