#!/usr/bin/env python3
"""Golden log-mel spectrograms for tests/unit/test_mel.c, from the two
references Candle's candle_whisper_log_mel must match:

  - faster-whisper's numpy FeatureExtractor (faster_whisper/feature_extractor.py,
    padding=160 as its transcribe() calls it), loaded from the installed
    package without importing faster_whisper itself (which needs ctranslate2
    and PyAV), or from --fe PATH to that one file;
  - openai-whisper's log_mel_spectrogram (padding=480000, 30 s of zeros),
    written out here with torch.stft as whisper/audio.py has it, with the
    mel filters faster-whisper computes (the values of whisper's
    mel_filters.npz, which librosa.filters.mel made). Skipped without torch.

Inputs: ../shared/data/audio/jfk.wav (16-bit PCM, read with the wave module
and divided by 32768, as libsndfile's float reads do) and synthetic signals
whose samples are stored beside the goldens (so C needs no sin() of its own
to agree with numpy's). Output: f32 little-endian .bin files and mel_goldens.json
describing them, in this folder.

usage: /work/venv-ref/bin/python tests/data/whisper/gen_mel_goldens.py
           [--fe PATH/feature_extractor.py] [--jfk PATH/jfk.wav]
"""
import argparse
import importlib.util
import json
import os
import wave

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def load_fe(path):
    if path is None:
        spec = importlib.util.find_spec("faster_whisper")  # does not run its __init__
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("faster_whisper not installed: pip install faster-whisper, or --fe")
        path = os.path.join(list(spec.submodule_search_locations)[0], "feature_extractor.py")
    spec = importlib.util.spec_from_file_location("fw_feature_extractor", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.FeatureExtractor


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1 and w.getframerate() == 16000
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return (pcm.astype(np.float32) / 32768.0).astype(np.float32)


def whisper_torch(audio, filters, padding):
    """openai-whisper's log_mel_spectrogram (whisper/audio.py)."""
    import torch
    x = torch.from_numpy(audio)
    if padding > 0:
        x = torch.nn.functional.pad(x, (0, padding))
    window = torch.hann_window(400)
    stft = torch.stft(x, 400, 160, window=window, return_complex=True)
    magnitudes = stft[..., :-1].abs() ** 2
    mel_spec = torch.from_numpy(filters) @ magnitudes
    log_spec = torch.clamp(mel_spec, min=1e-10).log10()
    log_spec = torch.maximum(log_spec, log_spec.max() - 8.0)
    return ((log_spec + 4.0) / 4.0).numpy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fe")
    ap.add_argument("--jfk", default=os.path.join(HERE, "../../../../shared/data/audio/jfk.wav"))
    args = ap.parse_args()
    FE = load_fe(args.fe)
    entries = []

    def save(name, arr, **meta):
        arr = np.ascontiguousarray(arr, dtype="<f4")
        arr.tofile(os.path.join(HERE, name + ".bin"))
        entries.append(dict(name=name, file=name + ".bin", shape=list(arr.shape), **meta))

    jfk = read_wav(args.jfk)
    rng = np.random.default_rng(20)
    t = np.arange(16000) / 16000.0
    tone = (0.5 * np.sin(2 * np.pi * 440 * t) + 0.1 * np.sin(2 * np.pi * 3000 * t)).astype(np.float32)
    tiny = (rng.standard_normal(100) * 0.1).astype(np.float32)
    save("tone_input", tone, kind="input")
    save("tiny_input", tiny, kind="input")

    for n_mels in (80, 128):
        fe = FE(feature_size=n_mels)
        save(f"filters_{n_mels}", fe.mel_filters, kind="filters", n_mels=n_mels)
        mel = fe(jfk, padding=160)
        save(f"jfk_fw_{n_mels}", mel[:, :50], kind="mel", source="faster-whisper",
             input="jfk.wav", n_mels=n_mels, padding=160, frame_start=0, n_frames=mel.shape[1])
    fe = FE(feature_size=80)
    mel = fe(tone, padding=160)
    save("tone_fw_80", mel, kind="mel", source="faster-whisper", input="tone_input",
         n_mels=80, padding=160, frame_start=0, n_frames=mel.shape[1])
    mel = fe(tiny, padding=100)  # 200 samples: numpy reflects the 200 of padding twice
    save("tiny_fw_80", mel, kind="mel", source="faster-whisper", input="tiny_input",
         n_mels=80, padding=100, frame_start=0, n_frames=mel.shape[1])
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch missing: no openai-whisper goldens")
    else:
        filters = FE.get_mel_filters(16000, 400, n_mels=80).astype(np.float32)
        mel = whisper_torch(jfk, filters, 480000)
        for start in (0, 1080):  # the speech's start, and its end into the padding
            save(f"jfk_whisper_80_{start}", mel[:, start:start + 50], kind="mel",
                 source="openai-whisper (torch)", input="jfk.wav", n_mels=80, padding=480000,
                 frame_start=start, n_frames=mel.shape[1])
    with open(os.path.join(HERE, "mel_goldens.json"), "w") as f:
        json.dump({"generator": "tests/data/whisper/gen_mel_goldens.py",
                   "numpy": np.__version__, "goldens": entries}, f, indent=1)
        f.write("\n")
    print("wrote", len(entries), "files")


if __name__ == "__main__":
    main()
