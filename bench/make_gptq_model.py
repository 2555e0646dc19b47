#!/usr/bin/env python3
"""Write TinyLlama-1.1B-shaped GPTQ and AWQ checkpoints with random weights,
for the speed of GPTQ-4 / AWQ-4 against Q4_0 on the same shape (bench/gptq_compare.sh).

    python3 bench/make_gptq_model.py OUT_ROOT [--layers N]

OUT_ROOT gets four Hugging Face directories (config.json + model.safetensors):
  gptq-4bit-g128-sym       GPTQ v1, symmetric, groups of 128 in order
  gptq-4bit-g128-actorder  the same with desc_act: g_idx from a random order
                           of the inputs, as act-order writes it (each group
                           keeps 128 members; q/k/v share one order, gate/up
                           one, as their Hessians are the same)
  awq-4bit-g128            AWQ GEMM, zero points drawn in [0, 15]
  gptq-4bit-g128-asym      GPTQ v1, sym false: stored zero points drawn in
                           [0, 15] (z in [1, 16])
Shape: n_embd 2048, 32 heads, 4 KV heads, n_ff 5632, 32000-token vocabulary,
22 layers (--layers to change); embeddings and lm_head f16 (GPTQ and AWQ leave
them unquantized). The packings are scripts/gen_gptq_awq_models.py's (the
documented ones); codes and zero points are random words, which is all a
speed benchmark needs. Needs numpy and safetensors.
"""
import argparse
import json
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

N_EMBD, N_HEAD, N_HEAD_KV, N_FF, N_VOCAB = 2048, 32, 4, 5632, 32000
HEAD_DIM = N_EMBD // N_HEAD
GROUP = 128


def linears():
    kv = N_HEAD_KV * HEAD_DIM
    yield "self_attn.q_proj", N_EMBD, N_EMBD
    yield "self_attn.k_proj", N_EMBD, kv
    yield "self_attn.v_proj", N_EMBD, kv
    yield "self_attn.o_proj", N_EMBD, N_EMBD
    yield "mlp.gate_proj", N_EMBD, N_FF
    yield "mlp.up_proj", N_EMBD, N_FF
    yield "mlp.down_proj", N_FF, N_EMBD


def scales(rng, groups, out_f):
    return (rng.uniform(0.002, 0.004, (groups, out_f))).astype(np.float16)


def gptq_linear(rng, in_f, out_f, perm, sym=True):
    groups = in_f // GROUP
    # v1 stores z - 1: 7 in every nibble is the symmetric zero point 8
    qz = (np.full((groups, out_f // 8), 0x77777777, np.uint32) if sym
          else rng.integers(0, 1 << 32, (groups, out_f // 8), dtype=np.uint64).astype(np.uint32))
    t = {
        "qweight": rng.integers(0, 1 << 32, (in_f // 8, out_f), dtype=np.uint64).astype(np.uint32).view(np.int32),
        "qzeros": qz.view(np.int32),
        "scales": scales(rng, groups, out_f),
    }
    g_idx = np.arange(in_f, dtype=np.int32) // GROUP
    if perm is not None:  # the quantization order of the inputs
        g_idx = np.empty(in_f, np.int32)
        g_idx[perm] = np.arange(in_f, dtype=np.int32) // GROUP
    t["g_idx"] = g_idx
    return t


def awq_linear(rng, in_f, out_f):
    groups = in_f // GROUP
    return {
        "qweight": rng.integers(0, 1 << 32, (in_f, out_f // 8), dtype=np.uint64).astype(np.uint32).view(np.int32),
        "qzeros": rng.integers(0, 1 << 32, (groups, out_f // 8), dtype=np.uint64).astype(np.uint32).view(np.int32),
        "scales": scales(rng, groups, out_f),
    }


def config(n_layer, qc):
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
        "hidden_size": N_EMBD, "intermediate_size": N_FF, "num_attention_heads": N_HEAD,
        "num_key_value_heads": N_HEAD_KV, "num_hidden_layers": n_layer, "vocab_size": N_VOCAB,
        "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "tie_word_embeddings": False, "torch_dtype": "float16", "bos_token_id": 1, "eos_token_id": 2,
        "quantization_config": qc,
    }


def write(d: Path, n_layer, kind, seed):
    rng = np.random.default_rng(seed)
    t = {
        "model.embed_tokens.weight": (rng.standard_normal((N_VOCAB, N_EMBD), np.float32) * 0.02).astype(np.float16),
        "lm_head.weight": (rng.standard_normal((N_VOCAB, N_EMBD), np.float32) * 0.02).astype(np.float16),
        "model.norm.weight": np.ones(N_EMBD, np.float16),
    }
    for il in range(n_layer):
        p = f"model.layers.{il}."
        t[p + "input_layernorm.weight"] = np.ones(N_EMBD, np.float16)
        t[p + "post_attention_layernorm.weight"] = np.ones(N_EMBD, np.float16)
        # act-order sorts the inputs by the Hessian's diagonal: linears of one
        # input (q/k/v, gate/up) share it, so they share the order
        perms = {}
        for name, in_f, out_f in linears():
            src = {"self_attn.k_proj": "self_attn.q_proj", "self_attn.v_proj": "self_attn.q_proj",
                   "mlp.up_proj": "mlp.gate_proj"}.get(name, name)
            if kind == "actorder" and src not in perms:
                perms[src] = rng.permutation(in_f)
            parts = (awq_linear(rng, in_f, out_f) if kind == "awq"
                     else gptq_linear(rng, in_f, out_f, perms.get(src), kind != "asym"))
            for k, v in parts.items():
                t[p + name + "." + k] = v
    if kind == "awq":
        qc = {"quant_method": "awq", "bits": 4, "group_size": GROUP, "zero_point": True, "version": "gemm"}
    else:
        qc = {"quant_method": "gptq", "bits": 4, "group_size": GROUP, "sym": kind != "asym", "desc_act": kind == "actorder",
              "checkpoint_format": "gptq"}
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(config(n_layer, qc), indent=2) + "\n")
    save_file(t, str(d / "model.safetensors"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--layers", type=int, default=22)
    ap.add_argument("--only", default="", help="comma-separated names (default: all four)")
    a = ap.parse_args()
    for seed, (name, kind) in enumerate([("gptq-4bit-g128-sym", "sym"), ("gptq-4bit-g128-actorder", "actorder"),
                                         ("awq-4bit-g128", "awq"), ("gptq-4bit-g128-asym", "asym")]):
        if a.only and name not in a.only.split(","):
            continue
        write(a.out / name, a.layers, kind, seed)
        print(a.out / name)


if __name__ == "__main__":
    main()
