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

  * llama-dynamic: Llama with dynamic NTK scaling (factor 2 over
    max_position_embeddings 8): golden.json is one 16-token forward (base grown
    to the length 16), golden-6.json 6 tokens (the base as trained), and
    golden-steps.json the 16 tokens one per forward through the KV cache.
    llama.cpp has no dynamic NTK, so no llama.cpp GGUF is kept for it.

All are smaller than the decoder goldens (one layer, intermediate 64) to keep
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
    "llama-dynamic": ("llama", "spm", 13, dict(
        SMALL, head_dim=16, hidden_act="silu", rms_norm_eps=1e-5, tie_word_embeddings=False,
        attention_bias=False, mlp_bias=False, max_position_embeddings=8,
        rope_parameters=base.rope(10000.0, rope_type="dynamic", factor=2.0),
        bos_token_id=1, eos_token_id=2, pad_token_id=None),
        "a Llama with dynamic NTK RoPE scaling (rope_scaling dynamic, factor 2, as older "
        "long-context fine-tunes; max_position_embeddings 8, so a 16-token input grows the base)",
        {"no_dynamic": dict(rope_parameters=base.rope(10000.0))}),
}


def steps_golden(d: Path, name: str):
    """golden-steps.json / _logits.bin: golden.json's tokens one forward each
    through the KV cache. Dynamic NTK grows the base with each step's length
    (max(position_ids) + 1) while the cached keys keep the base they were
    rotated with, so these differ from the one 16-token forward."""
    from transformers import DynamicCache
    g = json.loads((d / "golden.json").read_text())
    tokens = g["tokens"]
    m = base.load(d, torch.float32)  # a fresh model: the rotary module keeps its grown base
    cache, rows = DynamicCache(config=m.config), []
    with torch.no_grad():
        for t, tok in enumerate(tokens):
            out = m(input_ids=torch.tensor([[tok]]), position_ids=torch.tensor([[t]]), past_key_values=cache,
                    use_cache=True)
            rows.append(out.logits[0, -1].float().numpy())
    lg = np.stack(rows)
    lg.astype("<f4").tofile(d / "golden-steps_logits.bin")
    full = np.fromfile(d / "golden_logits.bin", "<f4").reshape(g["shape"])
    out = {"name": name, "tokens": tokens, "n_vocab": g["n_vocab"], "shape": list(lg.shape),
           "dtype": "f32 little-endian", "transformers": g["transformers"],
           "nmse_vs_one_forward_golden": base.nmse(lg, full),
           "note": "golden.json's tokens one per forward with a DynamicCache (position t, "
                   "seq_len t + 1): the base grows past max_position_embeddings at every step"}
    (d / "golden-steps.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"{name:12s} golden-steps: nmse vs the one-forward golden {out['nmse_vs_one_forward_golden']:.2e}")


PHI3_SHORT_NOTE = ("max(position_ids) + 1 <= original_max_position_embeddings, so transformers "
                   "uses short_factor (golden.json's 16-token forward uses long_factor)")
DYNAMIC_SHORT_NOTE = ("max(position_ids) + 1 <= max_position_embeddings, so transformers keeps the "
                      "trained base (golden.json's 16-token forward grows it)")


def short_golden(d: Path, name: str, why: str = PHI3_SHORT_NOTE):
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
           "note": f"the first {SHORT_TOKENS} tokens of golden.json in one forward: " + why}
    (d / "golden-6.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"{name:12s} golden-6: nmse vs rows of the 16-token golden {out['nmse_vs_first_rows_of_16_token_golden']:.2e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-cpp", required=True, type=Path,
                    help="vendor/llama.cpp of the llama-cpp-python==0.3.36 sdist")
    ap.add_argument("--out", type=Path, default=Path("tests/data/hf"))
    ap.add_argument("--only", default="", help="comma-separated model names (default: all)")
    a = ap.parse_args()
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    base.MODELS.update(MODELS)
    base.SPM_CLASS["phi3-longrope"] = "LlamaTokenizer"
    base.SPM_CLASS["llama-dynamic"] = "LlamaTokenizer"
    vers = base.versions()
    names = [n for n in a.only.split(",") if n] or list(MODELS)
    for name in names:
        base.build(name, a.out, a.llama_cpp.resolve(), vers)
    if "phi3-longrope" in names:
        short_golden(a.out / "phi3-longrope", "phi3-longrope")
    if "llama-dynamic" in names:
        # llama.cpp has no dynamic NTK: its converter writes no scaling, so
        # its GGUF would run another model; Candle's own GGUF keeps the type
        (a.out / "llama-dynamic" / "llama-dynamic.gguf").unlink()
        short_golden(a.out / "llama-dynamic", "llama-dynamic", DYNAMIC_SHORT_NOTE)
        steps_golden(a.out / "llama-dynamic", "llama-dynamic")


if __name__ == "__main__":
    main()
