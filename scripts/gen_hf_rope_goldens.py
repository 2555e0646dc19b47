#!/usr/bin/env python3
"""Goldens for RoPE scaling from Hugging Face directories (issue 23 part 1).

Two tiny random models in tests/data/hf, made with the functions of
scripts/gen_hf_decoder_goldens.py (imported, not edited: its model table is
extended here and its build() makes each folder, GGUF and golden):

  * qwen2-yarn: Qwen2 with rope_scaling yarn, factor 4, original context 8
    (max_position_embeddings 32 = 4 x 8, so transformers' and llama.cpp's
    factor agree), so that a 16-token input runs past the original context.
  * phi3-longrope: Phi-3 with longrope short/long factors and
    original_max_position_embeddings 8 (max_position_embeddings 256, so the
    attention factor sqrt(1 + ln 32 / ln 8) applies).  transformers switches
    the factor set on max(position_ids) + 1 of each forward: golden.json
    (16 tokens) is the long regime; golden-6.json (the first 6 tokens, one
    forward) is the short one.  Candle switches on the session's context,
    which the test sets to the golden's length, so both regimes are checked.

Both are smaller than the decoder goldens (one layer, intermediate 64) to keep
the committed data small.  Run as gen_hf_decoder_goldens.py is run:

    /work/venv-ref/bin/python scripts/gen_hf_rope_goldens.py \
        --llama-cpp /tmp/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_hf_decoder_goldens as base  # noqa: E402

SMALL = dict(base.COMMON, intermediate_size=64, num_hidden_layers=1)
SHORT_TOKENS = 6

# Phi-3's real lists rise from ~1 (high frequencies) to tens (low ones);
# these keep that shape over the 8 pairs of head_dim 16.
LONG_FACTOR = [1.0, 1.1, 1.4, 2.0, 3.5, 6.0, 9.0, 12.0]
SHORT_FACTOR = [1.0, 1.0, 1.05, 1.1, 1.2, 1.4, 1.7, 2.0]

MODELS = {
    "qwen2-yarn": ("qwen2", "bpe", 11, dict(
        SMALL, max_position_embeddings=32, hidden_act="silu", rms_norm_eps=1e-6,
        tie_word_embeddings=True, use_sliding_window=False, sliding_window=32, max_window_layers=1,
        rope_parameters=base.rope(10000.0, rope_type="yarn", factor=4.0,
                                  original_max_position_embeddings=8)),
        "Qwen2.5 with YaRN (rope_scaling yarn as Qwen2.5's long-context configs, factor 4 over an "
        "original context of 8 instead of 32768, beta_fast/beta_slow at their defaults 32/1)",
        {"no_yarn": dict(rope_parameters=base.rope(10000.0))}),
    "phi3-longrope": ("phi3", "spm", 12, dict(
        SMALL, hidden_act="silu", rms_norm_eps=1e-5, tie_word_embeddings=False,
        original_max_position_embeddings=8, sliding_window=None,
        rope_parameters=base.rope(10000.0, rope_type="longrope", short_factor=SHORT_FACTOR,
                                  long_factor=LONG_FACTOR),
        bos_token_id=1, eos_token_id=2, pad_token_id=None),
        "Phi-3-mini-128k (longrope short/long factors, original context 8 instead of 4096, "
        "max_position_embeddings 256 for the attention factor)",
        {"short_factors_only": dict(rope_parameters=base.rope(
            10000.0, rope_type="longrope", short_factor=SHORT_FACTOR, long_factor=SHORT_FACTOR))}),
}


def short_golden(d: Path, name: str):
    """golden-6.json / golden-6_logits.bin: the first SHORT_TOKENS tokens as one forward."""
    g = json.loads((d / "golden.json").read_text())
    tokens = g["tokens"][:SHORT_TOKENS]
    m = base.load(d, torch.float32)
    lg = base.logits_of(m, tokens).float().numpy()
    lg64 = base.logits_of(base.load(d, torch.float64), tokens).numpy()
    lg.astype("<f4").tofile(d / "golden-6_logits.bin")
    full = np.fromfile(d / "golden_logits.bin", "<f4").reshape(g["shape"])[:SHORT_TOKENS]
    out = {"name": name, "tokens": tokens, "n_vocab": g["n_vocab"], "shape": [SHORT_TOKENS, g["n_vocab"]],
           "dtype": "f32 little-endian", "transformers": g["transformers"],
           "nmse_f32_vs_f64": base.nmse(lg, lg64),
           "nmse_vs_first_rows_of_16_token_golden": base.nmse(lg, full),
           "note": f"the first {SHORT_TOKENS} tokens of golden.json in one forward: "
                   "max(position_ids) + 1 <= original_max_position_embeddings, so transformers "
                   "uses short_factor (golden.json's 16-token forward uses long_factor)"}
    (d / "golden-6.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"{name:12s} golden-6: nmse vs rows of the 16-token golden {out['nmse_vs_first_rows_of_16_token_golden']:.2e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-cpp", required=True, type=Path,
                    help="vendor/llama.cpp of the llama-cpp-python==0.3.36 sdist")
    ap.add_argument("--out", type=Path, default=Path("tests/data/hf"))
    a = ap.parse_args()
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    base.MODELS.update(MODELS)
    base.SPM_CLASS["phi3-longrope"] = "LlamaTokenizer"
    vers = base.versions()
    for name in MODELS:
        base.build(name, a.out, a.llama_cpp.resolve(), vers)
    short_golden(a.out / "phi3-longrope", "phi3-longrope")


if __name__ == "__main__":
    main()
