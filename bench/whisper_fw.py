#!/usr/bin/env python3
"""faster-whisper's side of bench/whisper_compare.sh: one transcription of
AUDIO with transcribe()'s defaults (condition_on_previous_text, temperature
fallback, timestamps, no VAD) but the given beam size and language, then the
encoder alone on the first 30 s window (median of REPS after a warm-up).

    python whisper_fw.py CT2_DIR AUDIO THREADS BEAM COMPUTE_TYPE TEXT_OUT [REPS]

Prints `key value` lines: transcribe_s (model load excluded; features,
encoder and decoding included), audio_s, encode_ms_median, load_s."""
import sys
import time

import numpy as np
from faster_whisper import WhisperModel
from faster_whisper.audio import decode_audio


def main():
    if len(sys.argv) < 7:
        print(__doc__, file=sys.stderr)
        return 2
    model_dir, audio_path, threads, beam, ctype, text_out = sys.argv[1:7]
    reps = int(sys.argv[7]) if len(sys.argv) > 7 else 5
    t0 = time.perf_counter()
    model = WhisperModel(model_dir, device="cpu", compute_type=ctype, cpu_threads=int(threads), num_workers=1)
    t1 = time.perf_counter()
    audio = decode_audio(audio_path, sampling_rate=16000)
    t2 = time.perf_counter()
    segments, info = model.transcribe(audio, beam_size=int(beam), language="en", vad_filter=False)
    lines = [s.text.strip() for s in segments]  # the generator does the work
    t3 = time.perf_counter()
    with open(text_out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")

    feats = model.feature_extractor(audio[:480000])[:, :3000]
    if feats.shape[1] < 3000:
        feats = np.pad(feats, ((0, 0), (0, 3000 - feats.shape[1])))
    ts = []
    for r in range(reps + 1):
        a = time.perf_counter()
        out = model.encode(feats)
        np.asarray(out)  # force the result to host memory, as a caller would
        b = time.perf_counter()
        if r:
            ts.append((b - a) * 1e3)
    ts.sort()
    print(f"load_s {t1 - t0:.3f}")
    print(f"audio_s {len(audio) / 16000:.3f}")
    print(f"transcribe_s {t3 - t2:.3f}")
    print(f"encode_ms_median {ts[len(ts) // 2]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
