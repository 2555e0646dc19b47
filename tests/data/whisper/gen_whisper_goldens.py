#!/usr/bin/env python3
"""Goldens for tests/models/test_whisper.c and tests/models/test_transcribe.sh,
from faster-whisper / CTranslate2 running the same model.bin Candle reads
(Whisper tiny.en, CTranslate2 float16, computed in float32 on the CPU, as
CTranslate2 converts float16 weights there):

  - the encoder output of ../shared/data/audio/jfk.wav's first window (the
    mel of faster-whisper's FeatureExtractor without its last frame, padded
    with zeros to 3000 frames, as its transcribe() makes a window): frames [0, 16) and [1000, 1016), all 384
    dims, as f32 little-endian in whisper_enc_jfk.bin (rows of 384);
  - the greedy transcript (beam_size=1, temperature 0, without_timestamps)
    and its token ids, in whisper_goldens.json, of jfk.wav and of jfk.wav
    three times over (33 s: two windows, condition_on_previous_text off).

usage: /work/venv-ref/bin/python tests/data/whisper/gen_whisper_goldens.py
           [--model build-data/models/whisper-tiny-en] [--jfk PATH/jfk.wav]
"""
import argparse
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
SLICES = [(0, 16), (1000, 1016)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "build-data/models/whisper-tiny-en"))
    ap.add_argument("--jfk", default=os.path.join(ROOT, "../shared/data/audio/jfk.wav"))
    a = ap.parse_args()

    import ctranslate2
    from faster_whisper import WhisperModel, decode_audio

    model = WhisperModel(a.model, device="cpu", compute_type="float32", cpu_threads=1)
    audio = decode_audio(a.jfk, sampling_rate=16000)
    fe = model.feature_extractor
    mel = fe(audio)  # padding 160, as transcribe() computes it
    win = np.zeros((mel.shape[0], 3000), dtype=np.float32)
    n = min(3000, mel.shape[1] - 1)  # transcribe() never feeds the last frame
    win[:, :n] = mel[:, :n]
    enc = model.model.encode(ctranslate2.StorageView.from_array(win[None]), to_cpu=True)
    enc = np.array(enc)[0]  # [1500, 384]
    rows = np.concatenate([enc[s:e] for s, e in SLICES]).astype("<f4")
    rows.tofile(os.path.join(HERE, "whisper_enc_jfk.bin"))

    segs, _ = model.transcribe(a.jfk, beam_size=1, temperature=0.0, without_timestamps=True,
                               condition_on_previous_text=False, vad_filter=False)
    segs = list(segs)
    tokens = [t for s in segs for t in s.tokens]
    text = "".join(s.text for s in segs)
    # long-form: jfk.wav three times (33 s: a full window, then the rest)
    segs3, _ = model.transcribe(np.concatenate([audio] * 3), beam_size=1, temperature=0.0,
                                without_timestamps=True, condition_on_previous_text=False,
                                vad_filter=False)
    segs3 = list(segs3)
    json.dump({"model": "whisper-tiny-en (CTranslate2 float16)",
               "ctranslate2": ctranslate2.__version__,
               "encoder_slices": SLICES, "encoder_dim": int(enc.shape[1]),
               "encoder_file": "whisper_enc_jfk.bin",
               "jfk_tokens": tokens, "jfk_text": text,
               "jfk3_tokens": [t for s in segs3 for t in s.tokens],
               "jfk3_text": "".join(s.text for s in segs3)},
              open(os.path.join(HERE, "whisper_goldens.json"), "w"), indent=1)
    with open(os.path.join(HERE, "jfk_transcript.txt"), "w") as f:
        f.write(text.strip() + "\n")
    print(text)
    print(tokens)


if __name__ == "__main__":
    main()
