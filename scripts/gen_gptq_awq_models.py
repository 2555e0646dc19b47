#!/usr/bin/env python3
"""GPTQ and AWQ checkpoints as Hugging Face directories, with goldens (issue 23 part 4).

Tiny random-weight llama models (hidden 128, 2 layers, 4 heads of 32, 2 kv heads,
intermediate 256, tied embeddings, the BPE test tokenizer of
scripts/gen_hf_decoder_goldens.py) whose seven linears per layer are quantized with
round-to-nearest in numpy and written in each variant's packed layout, beside the
other tensors in f16 as real checkpoints keep them. The goldens are transformers'
logits of a plain LlamaForCausalLM holding the reference dequantized weights in f32
(no GPTQ/AWQ library is involved: the packing is written here from the formats'
documentation and the quantizers' sources, below).

The packings (AutoGPTQ qlinear_cuda_old / exllama `pack`, GPTQModel, AutoAWQ
WQLinear_GEMM.from_linear and awq/utils/packing_utils.py):

  GPTQ, per Linear of weight W [out, in], b bits, p = 32 / b codes per int32:
    qweight int32 [in / p, out]: packed along the input; bits (k*b .. k*b+b-1) of
        qweight[r][o] hold the code of input r*p + k, output o.
    qzeros  int32 [groups, out / p]: the zero points packed the same way along the
        output: bits (k*b ..) of qzeros[g][c] hold output c*p + k.
        checkpoint_format "gptq" (v1, the default) stores z - 1 (AutoGPTQ's
        `zeros -= 1` before packing) and every v1 loader adds 1 back, so a z of 0
        comes back as 2^b (AutoGPTQ packs -1 unmasked, spilling into the next
        fields; here the stored value is masked to b bits, which is what a loader
        reads in its own field). "gptq_v2" (GPTQModel) stores z itself.
    scales  f16 [groups, out].
    g_idx   int32 [in]: group of each input; i // group_size, or with desc_act
        (act-order) the group of the input's position in the quantization order:
        g_idx[perm[j]] = j // group_size.
    groups = ceil(in / group_size); group_size -1 = one group (per channel).
    W[o][i] = scales[g][o] * (q[i][o] - z[g][o]), g = g_idx[i].
    Quantizer (GPTQ's Quantizer, round to nearest here instead of the Hessian
    updates, which change the codes but not the format): sym: scale =
    2 max|w| / maxq, z = (maxq + 1) / 2; asym: xmin = min(w, 0), xmax = max(w, 0),
    scale = (xmax - xmin) / maxq, z = round(-xmin / scale); q = clamp(round(w /
    scale) + z, 0, maxq), with the scale rounded to f16 first.

  AWQ, version "gemm" (4 bits, zero_point true):
    qweight int32 [in, out / 8]: packed along the output; nibble k (bits 4k..4k+3)
        of qweight[i][c] holds output 8c + ORDER[k], ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
        (so output 8c + j is nibble REVERSE[j], REVERSE = [0, 4, 1, 5, 2, 6, 3, 7]).
    qzeros  int32 [groups, out / 8], the same packing; z as stored.
    scales  f16 [groups, out]; group = i // group_size.
    Quantizer (AutoAWQ pseudo_quantize_tensor without the activation-aware
    search, which only rescales): scale = (max - min) / 15, z = clamp(-round(min /
    scale), 0, 15), q = clamp(round(w / scale) + z, 0, 15).

Reference dequantization: f32(scale) * (q - z). It is exact in f32 (an f16 scale
times an integer below 2^9), whatever the order of operations; the f16 products of
the CUDA kernels round it, Candle does not.

Each folder tests/data/gptq/<variant> holds config.json (the llama config plus
quantization_config as the quantizers write it), model.safetensors, the tokenizer
files, and:
  golden_logits.bin   [24, n_vocab] f32: transformers' logits (eager, f32) at every
                      prompt position, from the dequantized weights;
  golden.txt          the prompt, top-10 logits at every position, the 32-token
                      greedy continuation and its margins (tests/models/golden.h);
  reference_dequant.bin  f32 [128, 256]: the reference dequantization of
                      blk.0.ffn_down.weight (layer 0's down_proj), as [out, in];
  golden.json         tokens, versions, and per linear (GGUF name) the FNV-1a 64 of
                      its reference dequantized f32 [out, in] bytes, plus the block
                      type Candle is expected to repack it into.

Run (the reference venv of scripts/requirements-ref.txt; deterministic, two runs
give byte-identical files):

    python scripts/gen_gptq_awq_models.py [--only gptq-4bit-g128-sym,...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_hf_decoder_goldens as base  # noqa: E402
import gen_hf_family_goldens as fam  # noqa: E402

N_PROMPT = 24
N_GREEDY = 32
CONFIG = dict(hidden_size=128, intermediate_size=256, num_attention_heads=4, num_key_value_heads=2,
              head_dim=32, num_hidden_layers=2, max_position_embeddings=256, hidden_act="silu",
              rms_norm_eps=1e-5, tie_word_embeddings=True, attention_bias=False, mlp_bias=False,
              initializer_range=base.INIT_STD, rope_parameters=base.rope(10000.0))
SEED = 61

# HF linear -> GGUF name (per layer)
LINEARS = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
           "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
           "mlp.down_proj": "ffn_down"}

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]

# name -> (method, bits, group_size, sym, desc_act, checkpoint_format, Candle's block type)
VARIANTS = {
    "gptq-4bit-g128-sym": ("gptq", 4, 128, True, False, "gptq", "q4_0"),
    "gptq-4bit-g32-asym": ("gptq", 4, 32, False, False, "gptq", "q5_0"),
    "gptq-4bit-perchannel-asym": ("gptq", 4, -1, False, False, "gptq", "q5_0"),
    "gptq-4bit-g64-asym-v2": ("gptq", 4, 64, False, False, "gptq_v2", "q5_0"),
    "gptq-4bit-g32-actorder": ("gptq", 4, 32, True, True, "gptq", "f32"),
    "gptq-4bit-g32-actorder-asym": ("gptq", 4, 32, False, True, "gptq", "f32"),
    "gptq-8bit-g128-sym": ("gptq", 8, 128, True, False, "gptq", "q8_0"),
    "gptq-8bit-g64-asym": ("gptq", 8, 64, False, False, "gptq", "f32"),
    "awq-4bit-g128": ("awq", 4, 128, False, False, None, "q5_0"),
    "awq-4bit-g64": ("awq", 4, 64, False, False, None, "q5_0"),
}


def f16_round(x):
    return np.asarray(x, np.float32).astype(np.float16)


def quantize(W, bits, group, sym, method, perm):
    """Round-to-nearest codes q [in, out], zero points z [groups, out] (the values the
    dequantization subtracts), f16 scales [groups, out] and g_idx [in] for W [out, in]."""
    out_f, in_f = W.shape
    gs = in_f if group == -1 else group
    n_groups = (in_f + gs - 1) // gs
    maxq = (1 << bits) - 1
    order = perm if perm is not None else np.arange(in_f)
    g_idx = np.empty(in_f, np.int64)
    g_idx[order] = np.arange(in_f) // gs
    q = np.zeros((in_f, out_f), np.int64)
    z = np.zeros((n_groups, out_f), np.int64)
    s16 = np.zeros((n_groups, out_f), np.float16)
    for g in range(n_groups):
        cols = order[g * gs:(g + 1) * gs]
        x = W[:, cols].astype(np.float64)  # [out, n]
        if method == "awq":
            mx, mn = x.max(1), x.min(1)
            scale = (mx - mn) / maxq
            scale = np.where(scale == 0, 1.0, scale)
            sc16 = f16_round(scale)
            zz = np.clip(-np.round(mn / sc16.astype(np.float64)), 0, maxq)
        elif sym:
            xmax = np.abs(x).max(1)
            scale = 2 * xmax / maxq
            scale = np.where(scale == 0, 1.0, scale)
            sc16 = f16_round(scale)
            zz = np.full(out_f, (maxq + 1) // 2, np.float64)
        else:
            xmin, xmax = np.minimum(x.min(1), 0), np.maximum(x.max(1), 0)
            scale = (xmax - xmin) / maxq
            scale = np.where(scale == 0, 1.0, scale)
            sc16 = f16_round(scale)
            zz = np.round(-xmin / sc16.astype(np.float64))
        qq = np.clip(np.round(x / sc16.astype(np.float64)[:, None]) + zz[:, None], 0, maxq)
        q[cols, :] = qq.T.astype(np.int64)
        z[g] = zz.astype(np.int64)
        s16[g] = sc16
    return q, z, s16, g_idx


def pack_gptq(q, z, s16, g_idx, bits, v1):
    p = 32 // bits
    in_f, out_f = q.shape
    mask = (1 << bits) - 1
    qw = np.zeros((in_f // p, out_f), np.uint32)
    for k in range(p):
        qw |= (q[k::p, :].astype(np.uint32) & mask) << (bits * k)
    stored = (z - 1) & mask if v1 else z & mask
    qz = np.zeros((z.shape[0], out_f // p), np.uint32)
    for k in range(p):
        qz |= stored[:, k::p].astype(np.uint32) << (bits * k)
    read_z = stored + 1 if v1 else stored  # what a loader subtracts
    return ({"qweight": qw.view(np.int32), "qzeros": qz.view(np.int32), "scales": s16,
             "g_idx": g_idx.astype(np.int32)}, read_z)


def pack_awq(q, z, s16):
    in_f, out_f = q.shape
    qw = np.zeros((in_f, out_f // 8), np.uint32)
    qz = np.zeros((z.shape[0], out_f // 8), np.uint32)
    for k in range(8):
        qw |= q[:, AWQ_ORDER[k]::8].astype(np.uint32) << (4 * k)
        qz |= z[:, AWQ_ORDER[k]::8].astype(np.uint32) << (4 * k)
    return {"qweight": qw.view(np.int32), "qzeros": qz.view(np.int32), "scales": s16}, z


def dequant(q, z, s16, g_idx):
    """The reference: f32(scale) * (q - z), [out, in]."""
    s = s16.astype(np.float32)[g_idx]  # [in, out]
    d = (q - z[g_idx]).astype(np.float32)
    return (s * d).T.copy()


def fnv1a64(b: bytes) -> str:
    h = 0xcbf29ce484222325
    for c in b:
        h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def build(name, out_root: Path, vers):
    from safetensors.numpy import load_file, save_file
    method, bits, group, sym, desc_act, fmt, want_type = VARIANTS[name]
    d = out_root / name
    tmp = Path(tempfile.mkdtemp(prefix="gptq-ref-"))
    try:
        V = base.save_random_bpe_model(tmp, "llama", SEED, CONFIG, name)
        sd = load_file(str(tmp / "model.safetensors"))
        rng = np.random.default_rng(7000 + sum(map(ord, name)))
        qsd, ref, hashes, types = {}, {}, {}, {}
        for k, v in sorted(sd.items()):
            lin = next((l for l in LINEARS if k.endswith(l + ".weight")), None)
            if lin is None:  # embeddings and norms: f16 as a real checkpoint keeps them
                qsd[k] = f16_round(v)
                ref[k] = qsd[k].astype(np.float32)
                continue
            W = v.astype(np.float32).copy()
            layer = int(k.split(".")[2])
            if layer == 0 and lin == "self_attn.q_proj" and not sym:
                # one group of output 0 all positive: its zero point is 0, which a
                # GPTQ v1 checkpoint stores as 2^b - 1 and reads back as 2^b
                gs = W.shape[1] if group == -1 else group
                W[0, :gs] = np.abs(W[0, :gs]) + 0.01
            perm = rng.permutation(W.shape[1]) if desc_act else None
            q, z, s16, g_idx = quantize(W, bits, group, sym, method, perm)
            prefix = k[:-len(".weight")]
            if method == "gptq":
                packed, read_z = pack_gptq(q, z, s16, g_idx, bits, fmt == "gptq")
            else:
                packed, read_z = pack_awq(q, z, s16)
            for t, arr in packed.items():
                qsd[f"{prefix}.{t}"] = arr
            deq = dequant(q, read_z, s16, g_idx)
            ref[k] = deq
            gguf = f"blk.{layer}.{LINEARS[lin]}.weight"
            hashes[gguf] = fnv1a64(deq.astype("<f4").tobytes())
            types[gguf] = want_type
        # the quantized directory
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
            if (tmp / f).exists():
                shutil.copy(tmp / f, d / f)
        cfg = json.loads((tmp / "config.json").read_text())
        cfg["torch_dtype"] = "float16"
        if method == "gptq":
            qc = {"bits": bits, "group_size": group, "damp_percent": 0.01, "desc_act": desc_act,
                  "static_groups": False, "sym": sym, "true_sequential": True, "quant_method": "gptq",
                  "checkpoint_format": fmt, "model_name_or_path": None, "model_file_base_name": None}
        else:
            qc = {"quant_method": "awq", "bits": bits, "group_size": group, "zero_point": True,
                  "version": "gemm", "modules_to_not_convert": None}
        cfg["quantization_config"] = qc
        (d / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
        save_file(qsd, str(d / "model.safetensors"), metadata={"format": "pt"})
        ref["model.layers.0.mlp.down_proj.weight"].astype("<f4").tofile(d / "reference_dequant.bin")
        # transformers on the dequantized weights, as a plain f32 llama
        save_file({k: np.ascontiguousarray(v, np.float32) for k, v in ref.items()},
                  str(tmp / "model.safetensors"), metadata={"format": "pt"})
        m32 = base.load(tmp, torch.float32)
        tokens = [int(x) for x in np.random.default_rng(1000 + SEED).integers(0, V, N_PROMPT)]
        lg = base.logits_of(m32, tokens).float().numpy()
        gr, margins = fam.greedy(m32, tokens, N_GREEDY)
        lg64 = base.logits_of(base.load(tmp, torch.float64), tokens).numpy()
        std = float(lg.std())
        assert 0.1 < std < 20, f"{name}: logits std {std} not O(1)"
        lg.astype("<f4").tofile(d / "golden_logits.bin")
        fam.write_golden_txt(d / "golden.txt", tokens, lg, gr, margins)
        golden = {
            "name": name, "quantization_config": qc, "tokens": tokens, "greedy": gr, "n_vocab": V,
            "shape": [N_PROMPT, V], "dtype": "f32 little-endian", "seed": SEED,
            "transformers": vers["transformers"], "torch": vers["torch"], "numpy": np.__version__,
            "attn_implementation": "eager", "logits_std": std, "min_greedy_margin": min(margins),
            "nmse_f32_vs_f64": base.nmse(lg, lg64),
            "dequant_fnv1a64": hashes, "candle_type": types,
            "reference_dequant": {"tensor": "blk.0.ffn_down.weight", "shape": [128, 256]},
            "note": "logits of transformers (eager, f32) of LlamaForCausalLM holding the reference "
                    "dequantized weights f32(scale) * (q - z) and the f16 embeddings/norms; greedy: "
                    "32 argmax tokens after the prompt",
        }
        (d / "golden.json").write_text(json.dumps(golden, indent=1) + "\n")
        size = sum(f.stat().st_size for f in d.iterdir())
        print(f"{name:28s} V={V} std={std:.3f} min margin={min(margins):.3f} size={size / 1e6:.2f}MB",
              flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("tests/data/gptq"))
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    import transformers
    vers = {"torch": torch.__version__, "transformers": transformers.__version__}
    for n in [n for n in a.only.split(",") if n] or list(VARIANTS):
        build(n, a.out, vers)


if __name__ == "__main__":
    main()
