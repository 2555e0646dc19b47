#!/usr/bin/env python3
"""Goldens for the segment timestamps of tests/models/test_whisper_ts.c, from
faster-whisper (CTranslate2) on the same model.bin Candle reads (Whisper
tiny.en, computed in float32 on the CPU): transcribe(beam_size=1,
without_timestamps=False, vad_filter=False) of jfk.wav and of jfk.wav three
times over (33 s: seek moves to the last complete timestamp), with
condition_on_previous_text on and off, at temperature 0 alone (no fallback)
and with the default fallback temperatures. Each segment: start, end, text,
tokens, avg_logprob, compression_ratio, no_speech_prob, temperature, into
whisper_ts_goldens.json.

usage: /work/venv-ref/bin/python tests/data/whisper/gen_whisper_ts_goldens.py
           [--model build-data/models/whisper-tiny-en] [--jfk tests/data/audio/jfk.wav]
"""
import argparse
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "build-data/models/whisper-tiny-en"))
    ap.add_argument("--jfk", default=os.path.join(ROOT, "tests/data/audio/jfk.wav"))
    a = ap.parse_args()

    import ctranslate2
    from faster_whisper import WhisperModel, decode_audio

    model = WhisperModel(a.model, device="cpu", compute_type="float32", cpu_threads=1)
    audio = decode_audio(a.jfk, sampling_rate=16000)
    clips = {"jfk": audio, "jfk3": np.concatenate([audio] * 3)}
    out = {"model": "whisper-tiny-en (CTranslate2 float16)", "ctranslate2": ctranslate2.__version__, "runs": []}
    for clip, samples in clips.items():
        for cond in (False, True):
            for fallback in (False, True):
                temps = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0] if fallback else [0.0]
                segs, _ = model.transcribe(samples, beam_size=1, temperature=temps, without_timestamps=False,
                                           condition_on_previous_text=cond, vad_filter=False)
                run = {"clip": clip, "condition_on_previous_text": cond, "temperatures": temps, "segments": [
                    {"seek": s.seek, "start": s.start, "end": s.end, "text": s.text, "tokens": list(s.tokens),
                     "avg_logprob": s.avg_logprob, "compression_ratio": s.compression_ratio,
                     "no_speech_prob": s.no_speech_prob, "temperature": s.temperature} for s in segs]}
                out["runs"].append(run)
                print(clip, cond, temps[-1], [(round(s["start"], 2), round(s["end"], 2), s["text"])
                                              for s in run["segments"]])
    with open(os.path.join(HERE, "whisper_ts_goldens.json"), "w") as f:
        json.dump(out, f, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
