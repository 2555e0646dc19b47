#!/usr/bin/env python3
"""Goldens for beam search and language detection (tests/models/test_whisper_beam.c),
from faster-whisper (CTranslate2) on the same model.bin files Candle reads, in
float32 on the CPU:

  - transcribe(beam_size=5, patience=1, length_penalty=1, temperature=0,
    vad_filter=False) of jfk.wav with Whisper tiny.en and base, timestamps on
    and off (condition_on_previous_text on, the default);
  - detect_language() of jfk.wav and of de.wav, fr.wav and es.wav (German,
    French and Spanish synthesised by espeak-ng, committed in
    tests/data/audio) with base: the language, its probability and the top
    five;
  - transcribe(beam_size=5) of de.wav, fr.wav and es.wav with base: language
    auto (detected), and de.wav with task translate.

Each run: segments (seek, start, end, text, tokens, avg_logprob,
compression_ratio, no_speech_prob, temperature), language and its
probability, into whisper_beam_goldens.json. Temperature 0 alone: beam search
is deterministic, sampling is not.

usage: /work/venv-wbeam/bin/python tests/data/whisper/gen_whisper_beam_goldens.py
           [--tiny DIR] [--base DIR] [--audio tests/data/audio]
LANG.wav is made (when absent) with:
  espeak-ng -v LANG -s 150 -w LANG.wav "<TEXTS[LANG] below>" then resampled to
  16 kHz mono 16-bit by faster-whisper's decode_audio.
"""
import argparse
import json
import os
import shutil
import subprocess
import tempfile
import wave

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
TEXTS = {"de": "Guten Morgen. Heute ist das Wetter schön, und wir gehen in den Park.",
         "fr": "Bonjour à tous. Aujourd'hui il fait beau, et nous allons au marché.",
         "es": "Buenos días. Hoy hace sol, y vamos a la playa con mis amigos."}


def make_clip(path, lang):
    from faster_whisper import decode_audio
    if not shutil.which("espeak-ng"):
        raise SystemExit("espeak-ng is missing (apt-get install espeak-ng)")
    with tempfile.TemporaryDirectory() as t:
        raw = os.path.join(t, "raw22k.wav")
        subprocess.run(["espeak-ng", "-v", lang, "-s", "150", "-w", raw, TEXTS[lang]], check=True)
        x = decode_audio(raw, sampling_rate=16000)
    pcm = np.clip(np.round(x * 32767), -32768, 32767).astype("<i2")
    with wave.open(path, "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(16000)
        f.writeframes(pcm.tobytes())


def seg_list(segs):
    return [{"seek": s.seek, "start": s.start, "end": s.end, "text": s.text, "tokens": list(s.tokens),
             "avg_logprob": s.avg_logprob, "compression_ratio": s.compression_ratio,
             "no_speech_prob": s.no_speech_prob, "temperature": s.temperature} for s in segs]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", default=os.path.join(ROOT, "build-data/models/whisper-tiny-en"))
    ap.add_argument("--base", default=os.path.join(ROOT, "build-data/models/whisper-base"))
    ap.add_argument("--audio", default=os.path.join(ROOT, "tests/data/audio"))
    a = ap.parse_args()

    import ctranslate2
    from faster_whisper import WhisperModel, decode_audio
    import faster_whisper

    audio = {"jfk": decode_audio(os.path.join(a.audio, "jfk.wav"), sampling_rate=16000)}
    for lang in TEXTS:
        path = os.path.join(a.audio, lang + ".wav")
        if not os.path.exists(path):
            make_clip(path, lang)
        audio[lang] = decode_audio(path, sampling_rate=16000)
    out = {"faster_whisper": faster_whisper.__version__, "ctranslate2": ctranslate2.__version__,
           "runs": [], "detect": []}
    models = {"tiny.en": WhisperModel(a.tiny, device="cpu", compute_type="float32", cpu_threads=1),
              "base": WhisperModel(a.base, device="cpu", compute_type="float32", cpu_threads=1)}
    plan = [("tiny.en", "jfk", None, "transcribe", True), ("tiny.en", "jfk", None, "transcribe", False),
            ("base", "jfk", None, "transcribe", True), ("base", "jfk", None, "transcribe", False),
            ("base", "de", None, "transcribe", True), ("base", "de", "de", "translate", True),
            ("base", "fr", None, "transcribe", True), ("base", "es", None, "transcribe", True)]
    for name, clip, lang, task, ts in plan:
        segs, info = models[name].transcribe(audio[clip], beam_size=5, patience=1.0, length_penalty=1.0,
                                             temperature=[0.0], language=lang, task=task,
                                             without_timestamps=not ts, vad_filter=False)
        segs = seg_list(segs)
        out["runs"].append({"model": name, "clip": clip, "language": lang, "task": task, "timestamps": ts,
                            "detected_language": info.language,
                            "language_probability": info.language_probability, "segments": segs})
        print(name, clip, lang, task, ts, info.language, [(s["start"], s["end"], s["text"]) for s in segs])
    for clip in ("jfk", "de", "fr", "es"):
        lang, prob, all_probs = models["base"].detect_language(audio[clip])
        out["detect"].append({"model": "base", "clip": clip, "language": lang, "probability": prob,
                              "top": [[l, p] for l, p in all_probs[:5]]})
        print("detect", clip, lang, prob, all_probs[:3])
    with open(os.path.join(HERE, "whisper_beam_goldens.json"), "w") as f:
        json.dump(out, f, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
