#!/usr/bin/env python3
"""Goldens for the segment timestamps of tests/models/test_whisper_ts.c, from
faster-whisper (CTranslate2) on the same model.bin Candle reads (Whisper
tiny.en, computed in float32 on the CPU): transcribe(beam_size=1,
without_timestamps=False, vad_filter=False) of jfk.wav and of jfk.wav three
times over (33 s: seek moves to the last complete timestamp), with
condition_on_previous_text on and off, at temperature 0 alone (no fallback)
and with the default fallback temperatures; and 5 s of zeros (the
no-speech check: no segment). The first window of jfk3 falls back (its
greedy text compresses 3.4 times): those runs draw samples unseeded, so they
differ from run to run; only their temperature above 0 is compared. Each segment: start, end, text,
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


def no_speech_first(model, samples):
    """P(no speech) of the first window, which transcribe() does not report when it skips it."""
    import ctranslate2
    from faster_whisper.tokenizer import Tokenizer
    mel = model.feature_extractor(samples)
    win = np.zeros((mel.shape[0], 3000), dtype=np.float32)
    n = min(3000, mel.shape[1] - 1)
    win[:, :n] = mel[:, :n]
    tok = Tokenizer(model.hf_tokenizer, model.model.is_multilingual, task="transcribe", language="en")
    enc = model.model.encode(ctranslate2.StorageView.from_array(win[None]))
    res = model.model.generate(enc, [list(tok.sot_sequence)], beam_size=1, max_length=448, return_scores=True,
                               return_no_speech_prob=True, suppress_blank=True,
                               suppress_tokens=[-1],  # config.json's suppress_ids, the same ids
                               max_initial_timestamp_index=50)[0]
    return res.no_speech_prob


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "build-data/models/whisper-tiny-en"))
    ap.add_argument("--jfk", default=os.path.join(ROOT, "tests/data/audio/jfk.wav"))
    a = ap.parse_args()

    import ctranslate2
    from faster_whisper import WhisperModel, decode_audio

    model = WhisperModel(a.model, device="cpu", compute_type="float32", cpu_threads=1)
    audio = decode_audio(a.jfk, sampling_rate=16000)
    clips = {"jfk": audio, "jfk3": np.concatenate([audio] * 3),
             # 5 s of silence then jfk: the first window is still speech; silence
             # alone is the no-speech case
             "silence": np.zeros(16000 * 5, dtype=np.float32)}
    out = {"model": "whisper-tiny-en (CTranslate2 float16)", "ctranslate2": ctranslate2.__version__, "runs": []}
    for clip, samples in clips.items():
        for cond in ((True,) if clip == "silence" else (False, True)):
            for fallback in ((True,) if clip == "silence" else (False, True)):
                temps = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0] if fallback else [0.0]
                segs, _ = model.transcribe(samples, beam_size=1, temperature=temps, without_timestamps=False,
                                           condition_on_previous_text=cond, vad_filter=False)
                run = {"clip": clip, "condition_on_previous_text": cond, "temperatures": temps, "segments": [
                    {"seek": s.seek, "start": s.start, "end": s.end, "text": s.text, "tokens": list(s.tokens),
                     "avg_logprob": s.avg_logprob, "compression_ratio": s.compression_ratio,
                     "no_speech_prob": s.no_speech_prob, "temperature": s.temperature} for s in segs]}
                out["runs"].append(run)
                if clip == "silence":
                    run["no_speech_prob_first"] = float(no_speech_first(model, samples))
                print(clip, cond, temps[-1], [(round(s["start"], 2), round(s["end"], 2), s["text"])
                                              for s in run["segments"]])
    with open(os.path.join(HERE, "whisper_ts_goldens.json"), "w") as f:
        json.dump(out, f, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
