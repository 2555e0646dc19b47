#!/usr/bin/env python3
"""Goldens for mixture-of-experts decoders from Hugging Face directories (issue 23 part 3).

Tiny random models in tests/data/hf, made with the helpers of
scripts/gen_hf_decoder_goldens.py (tokenizer, init, legacy config layout,
reload and logits; imported, not edited):

  * mixtral: MixtralForCausalLM, 4 experts top-2 (the real model: 8 top-2),
    router softmax over all experts, top-k, renormalised over the chosen.
  * qwen3-moe: Qwen3MoeForCausalLM, 4 experts top-2, norm_topk_prob true,
    no shared expert, moe_intermediate_size != intermediate_size, and
    mlp_only_layers [1] so that layer 1 is a dense MLP of intermediate_size.
  * qwen2-moe: Qwen2MoeForCausalLM, 4 experts top-2, norm_topk_prob false
    (the weights of the chosen experts are not renormalised), a shared
    expert of its own width with a sigmoid gate.

No GGUF is made here (llama.cpp's converter is not needed): the test writes
one with `candle quantize` from the directory.  Each folder holds config.json,
model.safetensors, the tokenizer files, golden_logits.bin ([16, n_vocab] f32
little-endian: transformers' logits at every position, eager, f32, the model
reloaded from the folder) and golden.json (tokens, versions, sensitivity).

Run (the reference venv of scripts/requirements-ref.txt):

    /work/venv-ref/bin/python scripts/gen_hf_moe_goldens.py
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

N_TOKENS = base.N_TOKENS
SMALL = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
             max_position_embeddings=256, initializer_range=base.INIT_STD, num_hidden_layers=2)

# name -> (model_type, seed, config kwargs, what it imitates, sensitivity variants)
MODELS = {
    "mixtral": ("mixtral", 31, dict(
        SMALL, intermediate_size=64, num_local_experts=4, num_experts_per_tok=2,
        hidden_act="silu", rms_norm_eps=1e-5, tie_word_embeddings=False, sliding_window=None,
        rope_parameters=base.rope(1000000.0), router_jitter_noise=0.0),
        "Mixtral-8x7B (4 experts top-2 instead of 8, untied, rope_theta 1e6, no window)",
        {"top1": dict(num_experts_per_tok=1), "top3": dict(num_experts_per_tok=3)}),
    "qwen3-moe": ("qwen3_moe", 32, dict(
        SMALL, head_dim=16, intermediate_size=96, moe_intermediate_size=32, num_experts=4,
        num_experts_per_tok=2, norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[1],
        hidden_act="silu", rms_norm_eps=1e-6, tie_word_embeddings=True, attention_bias=False,
        use_sliding_window=False, sliding_window=None, rope_parameters=base.rope(1000000.0)),
        "Qwen3-30B-A3B (norm_topk_prob, q/k norms, no shared expert; 4 experts top-2 instead "
        "of 128 top-8; mlp_only_layers [1] makes layer 1 dense)",
        {"no_norm_topk_prob": dict(norm_topk_prob=False)}),
    "qwen2-moe": ("qwen2_moe", 33, dict(
        SMALL, intermediate_size=96, moe_intermediate_size=32, shared_expert_intermediate_size=48,
        num_experts=4, num_experts_per_tok=2, norm_topk_prob=False, decoder_sparse_step=1,
        mlp_only_layers=[], hidden_act="silu", rms_norm_eps=1e-6, tie_word_embeddings=False,
        use_sliding_window=False, sliding_window=None, rope_parameters=base.rope(1000000.0)),
        "Qwen1.5-MoE-A2.7B (q/k/v biases, shared expert with sigmoid gate, norm_topk_prob false; "
        "4 experts top-2 instead of 60 top-4)",
        {"norm_topk_prob": dict(norm_topk_prob=True)}),
}


def load(d: Path, dtype, **overrides):
    # the per-expert loop, not torch's grouped_mm (f32/bf16/f16 only)
    return base.load(d, dtype, experts_implementation="eager", **overrides)


def build(name, out_root: Path, vers):
    model_type, seed, kw, imitates, variants = MODELS[name]
    d = out_root / name
    V = base.save_random_bpe_model(d, model_type, seed, kw, name)

    rng = np.random.default_rng(1000 + seed)
    tokens = [int(x) for x in rng.integers(0, V, N_TOKENS)]
    lg = base.logits_of(load(d, torch.float32), tokens).float().numpy()
    assert lg.shape == (N_TOKENS, V)
    lg64 = base.logits_of(load(d, torch.float64), tokens).numpy()
    sens = {v: base.nmse(base.logits_of(load(d, torch.float32, **copy.deepcopy(ov)), tokens)
                         .float().numpy(), lg) for v, ov in variants.items()}
    std = float(lg.std())
    assert 0.3 < std < 20, f"{name}: logits std {std} not O(1)"
    lg.astype("<f4").tofile(d / "golden_logits.bin")
    golden = {
        "name": name, "imitates": imitates, "model_type": model_type,
        "architecture": json.loads((d / "config.json").read_text())["architectures"][0],
        "tokens": tokens, "n_vocab": V, "shape": [N_TOKENS, V], "dtype": "f32 little-endian",
        "weights_dtype": "float32", "tokenizer": "bpe", "seed": seed,
        "transformers": vers["transformers"], "torch": vers["torch"],
        "attention_mask": "all ones", "attn_implementation": "eager", "logits_std": std,
        "nmse_f32_vs_f64": base.nmse(lg, lg64), "sensitivity_nmse_vs_golden": sens,
        "note": "logits of transformers (eager, f32) for `tokens` at all positions, model "
                "reloaded from this folder",
    }
    (d / "golden.json").write_text(json.dumps(golden, indent=1) + "\n")
    size = sum(f.stat().st_size for f in d.iterdir())
    print(f"{name:10s} V={V} std={std:.3f} sens={ {k: f'{v:.1e}' for k, v in sens.items()} } "
          f"size={size / 1e6:.2f}MB", flush=True)


def bench_model(d: Path, top_k: int):
    """A larger random Mixtral for timing (no golden): hidden 512, 8 experts of
    width 1408, 4 layers; top_k experts per token (8: every expert, to time
    what reading all experts costs against reading the chosen two)."""
    from transformers import MixtralConfig, MixtralForCausalLM
    d.mkdir(parents=True, exist_ok=True)
    tinfo = base.make_bpe_tokenizer(d)
    cfg = MixtralConfig(vocab_size=tinfo["n_vocab"], hidden_size=512, intermediate_size=1408,
                        num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
                        num_local_experts=8, num_experts_per_tok=top_k, max_position_embeddings=512,
                        tie_word_embeddings=False, bos_token_id=tinfo["bos"], eos_token_id=tinfo["eos"])
    torch.manual_seed(40)
    model = MixtralForCausalLM(cfg)
    base.randomize_(model, 40)
    model.save_pretrained(d, safe_serialization=True)
    print(f"bench model in {d}: top-{top_k} of 8 experts")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("tests/data/hf"))
    ap.add_argument("--only", default="")
    ap.add_argument("--bench", type=Path, help="write only the timing model (see bench_model) here")
    ap.add_argument("--bench-top-k", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    if a.bench:
        bench_model(a.bench, a.bench_top_k)
        return
    import transformers
    vers = {"torch": torch.__version__, "transformers": transformers.__version__}
    for n in [n for n in a.only.split(",") if n] or list(MODELS):
        build(n, a.out, vers)


if __name__ == "__main__":
    main()
