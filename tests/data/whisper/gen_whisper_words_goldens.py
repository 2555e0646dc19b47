#!/usr/bin/env python3
"""Goldens for the initial prompt and the word timestamps of
tests/models/test_whisper_words.c, from faster-whisper 1.2.1 / CTranslate2
4.8.5 on the same model.bin files Candle reads (float32 on the CPU,
vad_filter=False, temperature 0 alone: deterministic):

  - initial_prompt on jfk.wav: tiny.en greedy and beam 5, base beam 5; on
    jfk.wav three times over (33 s, two windows and more) with tiny.en greedy,
    condition_on_previous_text on and off (off: the prompt reaches the first
    window only);
  - word_timestamps=True on jfk.wav: tiny.en and base, beam 5; on jfk three
    times over with tiny.en greedy (the next window starts at the last word's
    end); with the initial prompt on jfk.wav, tiny.en greedy and beam 5;
    without timestamp tokens on jfk.wav, tiny.en greedy.

Each run: its options and the segments (seek, start, end, text, tokens,
avg_logprob, no_speech_prob, words [start, end, word, probability]), into
whisper_words_goldens.json.

The environment (PyPI):
  python3 -m venv /work/venv-fw && /work/venv-fw/bin/pip install faster-whisper==1.2.1
  (it brings ctranslate2 4.8.5)
usage: /work/venv-fw/bin/python tests/data/whisper/gen_whisper_words_goldens.py
           [--tiny DIR] [--base DIR] [--jfk tests/data/audio/jfk.wav]
"""
import argparse
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
PROMPT = "President Kennedy's inaugural address, January 1961."


def run(model, name, clip, samples, **kw):
    segs, info = model.transcribe(samples, temperature=[0.0], vad_filter=False, **kw)
    segs = list(segs)
    r = {"model": name, "clip": clip, "beam_size": kw.get("beam_size", 5),
         "condition_on_previous_text": kw.get("condition_on_previous_text", True),
         "initial_prompt": kw.get("initial_prompt"), "word_timestamps": kw.get("word_timestamps", False),
         "segments": []}
    if kw.get("without_timestamps"):
        r["without_timestamps"] = True
    for s in segs:
        g = {"seek": s.seek, "start": s.start, "end": s.end, "text": s.text, "tokens": list(s.tokens),
             "avg_logprob": s.avg_logprob, "no_speech_prob": s.no_speech_prob}
        if s.words is not None:
            g["words"] = [[w.start, w.end, w.word, w.probability] for w in s.words]
        r["segments"].append(g)
        print(name, clip, r["beam_size"], r["condition_on_previous_text"], bool(r["initial_prompt"]),
              r["word_timestamps"], "[%.2f %.2f]%s" % (s.start, s.end, s.text))
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", default="/work/main/build-data/models/whisper-tiny-en")
    ap.add_argument("--base", default="/work/main/build-data/models/whisper-base")
    ap.add_argument("--jfk", default=os.path.join(ROOT, "tests/data/audio/jfk.wav"))
    a = ap.parse_args()

    import ctranslate2
    import faster_whisper
    from faster_whisper import WhisperModel, decode_audio

    audio = decode_audio(a.jfk, sampling_rate=16000)
    jfk3 = np.concatenate([audio] * 3)
    tiny = WhisperModel(a.tiny, device="cpu", compute_type="float32", cpu_threads=1)
    base = WhisperModel(a.base, device="cpu", compute_type="float32", cpu_threads=1)
    out = {"faster_whisper": faster_whisper.__version__, "ctranslate2": ctranslate2.__version__,
           "prompt": PROMPT, "runs": []}
    R = out["runs"]
    R.append(run(tiny, "tiny.en", "jfk", audio, beam_size=1, initial_prompt=PROMPT))
    R.append(run(tiny, "tiny.en", "jfk", audio, beam_size=5, initial_prompt=PROMPT))
    R.append(run(base, "base", "jfk", audio, beam_size=5, initial_prompt=PROMPT, language="en"))
    for cond in (True, False):
        R.append(run(tiny, "tiny.en", "jfk3", jfk3, beam_size=1, initial_prompt=PROMPT,
                     condition_on_previous_text=cond))
    R.append(run(tiny, "tiny.en", "jfk", audio, beam_size=5, word_timestamps=True))
    R.append(run(base, "base", "jfk", audio, beam_size=5, word_timestamps=True, language="en"))
    R.append(run(tiny, "tiny.en", "jfk3", jfk3, beam_size=1, word_timestamps=True))
    R.append(run(tiny, "tiny.en", "jfk", audio, beam_size=1, word_timestamps=True, initial_prompt=PROMPT))
    # what `candle serve` decodes (beam 5) for a prompt with word granularity
    R.append(run(tiny, "tiny.en", "jfk", audio, beam_size=5, word_timestamps=True, initial_prompt=PROMPT))
    # without timestamp tokens: each window is one segment, and the next
    # starts at its last word's end (here into the hallucinated tail)
    R.append(run(tiny, "tiny.en", "jfk", audio, beam_size=1, word_timestamps=True, without_timestamps=True))
    with open(os.path.join(HERE, "whisper_words_goldens.json"), "w") as f:
        json.dump(out, f, indent=None, separators=(",", ":"), ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
