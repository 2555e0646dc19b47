#!/usr/bin/env python3
"""The subtitles tests/models/test_transcribe.sh expects of
`candle transcribe -o srt|vtt|txt` on jfk.wav: faster-whisper's segments
(whisper_ts_goldens.json, gen_whisper_ts_goldens.py: jfk, temperature
fallback on, condition_on_previous_text on, as the CLI's defaults) written
as openai-whisper's WriteSRT, WriteVTT and WriteTXT write them
(whisper/utils.py: format_timestamp, SubtitlesWriter.iterate_result without
word timestamps), into jfk.srt, jfk.vtt and jfk_ts.txt.

usage: python3 tests/data/whisper/gen_whisper_subtitles.py
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def format_timestamp(seconds, always_include_hours=False, decimal_marker="."):
    assert seconds >= 0, "non-negative timestamp expected"
    milliseconds = round(seconds * 1000.0)
    hours = milliseconds // 3_600_000
    milliseconds -= hours * 3_600_000
    minutes = milliseconds // 60_000
    milliseconds -= minutes * 60_000
    seconds = milliseconds // 1_000
    milliseconds -= seconds * 1_000
    hours_marker = f"{hours:02d}:" if always_include_hours or hours > 0 else ""
    return f"{hours_marker}{minutes:02d}:{seconds:02d}{decimal_marker}{milliseconds:03d}"


def cues(segments, hours, marker):
    for s in segments:
        yield (format_timestamp(s["start"], hours, marker), format_timestamp(s["end"], hours, marker),
               s["text"].strip().replace("-->", "->"))


def main():
    g = json.load(open(os.path.join(HERE, "whisper_ts_goldens.json")))
    run = next(r for r in g["runs"] if r["clip"] == "jfk" and r["condition_on_previous_text"]
               and len(r["temperatures"]) > 1)
    segs = run["segments"]
    with open(os.path.join(HERE, "jfk.srt"), "w") as f:
        for i, (start, end, text) in enumerate(cues(segs, True, ","), start=1):
            print(f"{i}\n{start} --> {end}\n{text}\n", file=f)
    with open(os.path.join(HERE, "jfk.vtt"), "w") as f:
        print("WEBVTT\n", file=f)
        for start, end, text in cues(segs, False, "."):
            print(f"{start} --> {end}\n{text}\n", file=f)
    with open(os.path.join(HERE, "jfk_ts.txt"), "w") as f:
        for s in segs:
            print(s["text"].strip(), file=f)


if __name__ == "__main__":
    main()
