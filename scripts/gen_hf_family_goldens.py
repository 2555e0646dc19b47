#!/usr/bin/env python3
"""Goldens for the Mistral family, OLMoE, Granite and GraniteMoE from Hugging Face directories (issue 23
parts 2 and 3).

Tiny random models in tests/data/hf, from the real configs' shapes, made with the
helpers of scripts/gen_hf_decoder_goldens.py (tokenizer, init, legacy config layout,
reload and logits; imported, not edited):

  * mistral: MistralForCausalLM as Mistral-7B-v0.1 (sliding_window in every layer,
    rope_theta 1e4, untied); the window is 8 so that the 24-token prompt and the
    greedy continuation run far past it.
  * mistral-nemo: MistralForCausalLM as Mistral-Nemo / Mistral-Small (head_dim 32
    independent of hidden_size / num_attention_heads = 16, as 128 != 5120 / 32;
    sliding_window null; rope_theta 1e6).
  * olmoe: OlmoeForCausalLM as OLMoE-1B-7B (q/k RMSNorm over the whole projection,
    softmax routing, top-k not renormalised: norm_topk_prob false; 8 experts top-3
    instead of 64 top-8).
  * granite: GraniteForCausalLM as granite-3.1-2b-instruct (the same four multipliers on
    llama's block; logits_scaling 8, rope_theta 5e6).
  * granitemoe: GraniteMoeForCausalLM as granite-3.1-1b-a400m (embedding_multiplier,
    residual_multiplier, attention_multiplier, logits_scaling; experts stored stacked
    as input_linear / output_linear; 6 experts top-2 instead of 32 top-8).

Each folder holds config.json, model.safetensors, the tokenizer files,
golden_logits.bin ([24, n_vocab] f32 little-endian: transformers' logits at every
prompt position, eager, f32, the model reloaded from the folder), golden.txt (the
format of tests/models/golden.h: the prompt's tokens, the top-10 logits at every
position, a 32-token greedy continuation and its top-1 minus top-2 margins) and
golden.json (tokens, versions, sensitivity).  The greedy continuation recomputes
the whole sequence at each step (no KV cache).

Run (the reference venv of scripts/requirements-ref.txt):

    python scripts/gen_hf_family_goldens.py [--only mistral,olmoe]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_hf_decoder_goldens as base  # noqa: E402

N_PROMPT = 24
N_GREEDY = 32
SMALL = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
             max_position_embeddings=256, initializer_range=base.INIT_STD, num_hidden_layers=2)

# name -> (model_type, seed, config kwargs, what it imitates, sensitivity variants)
MODELS = {
    "mistral": ("mistral", 41, dict(
        SMALL, intermediate_size=128, hidden_act="silu", rms_norm_eps=1e-5,
        tie_word_embeddings=False, sliding_window=8, rope_parameters=base.rope(10000.0)),
        "Mistral-7B-v0.1 (sliding window in every layer, 8 instead of 4096; GQA; untied)",
        {"no_window": dict(sliding_window=None)}),
    "mistral-nemo": ("mistral", 42, dict(
        SMALL, head_dim=32, intermediate_size=128, hidden_act="silu", rms_norm_eps=1e-5,
        tie_word_embeddings=False, sliding_window=None, rope_parameters=base.rope(1000000.0)),
        "Mistral-Nemo-12B / Mistral-Small (head_dim 32 != hidden/heads 16, as 128 != 5120/32; "
        "no window; rope_theta 1e6)", {}),
    "olmoe": ("olmoe", 43, dict(
        SMALL, intermediate_size=32, num_experts=8, num_experts_per_tok=3, norm_topk_prob=False,
        hidden_act="silu", rms_norm_eps=1e-5, tie_word_embeddings=False, clip_qkv=None,
        attention_bias=False, rope_parameters=base.rope(10000.0), router_aux_loss_coef=0.01),
        "OLMoE-1B-7B (q/k RMSNorm over the whole projection, softmax top-k without "
        "renormalisation; 8 experts top-3 instead of 64 top-8)",
        {"norm_topk_prob": dict(norm_topk_prob=True), "top2": dict(num_experts_per_tok=2)}),
    "granite": ("granite", 45, dict(
        SMALL, intermediate_size=128, hidden_act="silu", rms_norm_eps=1e-5,
        tie_word_embeddings=True, embedding_multiplier=12.0, residual_multiplier=0.22,
        attention_multiplier=0.015625, logits_scaling=8.0, attention_bias=False, mlp_bias=False,
        rope_parameters=base.rope(5000000.0)),
        "granite-3.1-2b-instruct (embedding x12, residual x0.22, attention scale 1/64, logits / 8, "
        "tied, rope_theta 5e6)",
        {"residual_1": dict(residual_multiplier=1.0), "embedding_1": dict(embedding_multiplier=1.0)}),
    "granitemoe": ("granitemoe", 44, dict(
        SMALL, intermediate_size=32, num_local_experts=6, num_experts_per_tok=2, hidden_act="silu",
        rms_norm_eps=1e-6, tie_word_embeddings=True, embedding_multiplier=12.0,
        residual_multiplier=0.22, attention_multiplier=0.015625, logits_scaling=6.0,
        rope_parameters=base.rope(10000.0), router_aux_loss_coef=0.0),
        "granite-3.1-1b-a400m (embedding x12, residual x0.22, attention scale 1/64, logits / 6, "
        "tied; top-k of the router logits softmaxed over the chosen; 6 experts top-2 instead "
        "of 32 top-8)",
        {"residual_1": dict(residual_multiplier=1.0), "logits_1": dict(logits_scaling=1.0),
         "attention_default": dict(attention_multiplier=0.25)}),
}


def load(d: Path, dtype, **overrides):
    return base.load(d, dtype, experts_implementation="eager", **overrides)


def greedy(model, tokens, n):
    seq, out, margins = list(tokens), [], []
    for _ in range(n):
        row = base.logits_of(model, seq)[-1].double()
        top2 = torch.topk(row, 2)
        t = int(top2.indices[0])
        out.append(t)
        margins.append(float(top2.values[0] - top2.values[1]))
        seq.append(t)
    return out, margins


def write_golden_txt(path: Path, tokens, lg, gr, margins):
    lines = [f"prompt {len(tokens)} \"\"", "tokens " + " ".join(str(t) for t in tokens)]
    for i in range(len(tokens)):
        idx = np.argsort(-lg[i], kind="stable")[:10]
        lines.append(f"top {i} " + " ".join(f"{int(j)}:{lg[i, j]:.6f}" for j in idx))
    lines.append(f"greedy {len(gr)} " + " ".join(str(t) for t in gr))
    lines.append("margins " + " ".join(f"{m:.6f}" for m in margins))
    path.write_text("\n".join(lines) + "\n")


def build(name, out_root: Path, vers):
    model_type, seed, kw, imitates, variants = MODELS[name]
    d = out_root / name
    V = base.save_random_bpe_model(d, model_type, seed, kw, name)

    rng = np.random.default_rng(1000 + seed)
    tokens = [int(x) for x in rng.integers(0, V, N_PROMPT)]
    m32 = load(d, torch.float32)
    lg = base.logits_of(m32, tokens).float().numpy()
    assert lg.shape == (N_PROMPT, V)
    gr, margins = greedy(m32, tokens, N_GREEDY)
    lg64 = base.logits_of(load(d, torch.float64), tokens).numpy()
    sens = {v: base.nmse(base.logits_of(load(d, torch.float32, **copy.deepcopy(ov)), tokens)
                         .float().numpy(), lg) for v, ov in variants.items()}
    std = float(lg.std())
    # granitemoe divides its logits by 6 (logits_scaling), hence the lower bound
    assert 0.1 < std < 20, f"{name}: logits std {std} not O(1)"
    lg.astype("<f4").tofile(d / "golden_logits.bin")
    write_golden_txt(d / "golden.txt", tokens, lg, gr, margins)
    golden = {
        "name": name, "imitates": imitates, "model_type": model_type,
        "architecture": json.loads((d / "config.json").read_text())["architectures"][0],
        "tokens": tokens, "greedy": gr, "n_vocab": V, "shape": [N_PROMPT, V],
        "dtype": "f32 little-endian", "weights_dtype": "float32", "tokenizer": "bpe", "seed": seed,
        "transformers": vers["transformers"], "torch": vers["torch"],
        "attention_mask": "all ones", "attn_implementation": "eager", "logits_std": std,
        "min_greedy_margin": min(margins),
        "nmse_f32_vs_f64": base.nmse(lg, lg64), "sensitivity_nmse_vs_golden": sens,
        "note": "logits of transformers (eager, f32) for `tokens` at all positions, model "
                "reloaded from this folder; greedy: 32 argmax tokens after them",
    }
    (d / "golden.json").write_text(json.dumps(golden, indent=1) + "\n")
    size = sum(f.stat().st_size for f in d.iterdir())
    print(f"{name:12s} V={V} std={std:.3f} sens={ {k: f'{v:.1e}' for k, v in sens.items()} } "
          f"min margin={min(margins):.3f} size={size / 1e6:.2f}MB", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("tests/data/hf"))
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    import transformers
    vers = {"torch": torch.__version__, "transformers": transformers.__version__}
    for n in [n for n in a.only.split(",") if n] or list(MODELS):
        build(n, a.out, vers)


if __name__ == "__main__":
    main()
