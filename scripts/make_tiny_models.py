#!/usr/bin/env python3
"""Tiny random-weight models of each supported architecture, for tests.

No real weights of qwen2, qwen3, gemma2 or phi3 are available here, so each
architecture gets a small GGUF (F32, seeded random weights, the stories260K
SentencePiece vocabulary so llama.cpp can load it) that exercises its
specific parts: biases, q/k norms, post norms, soft-capping, sliding windows
shorter than the prompts, fused projections. scripts/make_golden.py then
records llama.cpp's logits on them.

Usage: scripts/make_tiny_models.py VOCAB.gguf OUT_DIR
"""
import os
import sys

import numpy as np
import gguf

E, H, HKV, D, FF = 32, 4, 2, 16, 64


def rnd(rng, *shape, scale=None):
    fan_in = shape[-1]
    s = scale if scale is not None else 1.0 / np.sqrt(fan_in)
    return (rng.standard_normal(shape) * s).astype(np.float32)


def norm_w(rng, n):
    return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)


def make(arch, vocab_path, out, n_layer, extra_kv, opts, seed):
    rng = np.random.default_rng(seed)
    v = gguf.GGUFReader(vocab_path)
    w = gguf.GGUFWriter(out, arch)
    for name, f in v.fields.items():
        if name.startswith("tokenizer."):
            vt = f.types[0]
            sub = f.types[1] if vt == gguf.GGUFValueType.ARRAY else None
            w.add_key_value(name, f.contents(), vt, sub)
    n_vocab = len(v.fields["tokenizer.ggml.tokens"].contents())
    hd = opts.get("head_dim", E // H)
    w.add_uint32(f"{arch}.block_count", n_layer)
    w.add_uint32(f"{arch}.context_length", 256)
    w.add_uint32(f"{arch}.embedding_length", E)
    w.add_uint32(f"{arch}.feed_forward_length", FF)
    w.add_uint32(f"{arch}.attention.head_count", H)
    w.add_uint32(f"{arch}.attention.head_count_kv", HKV)
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_uint32(f"{arch}.rope.dimension_count", opts.get("n_rot", hd))
    if "head_dim" in opts:
        w.add_uint32(f"{arch}.attention.key_length", hd)
        w.add_uint32(f"{arch}.attention.value_length", hd)
    for k, (val, kind) in extra_kv.items():
        getattr(w, "add_" + kind)(f"{arch}.{k}", val)
    # Scaled embeddings (gemma) need small tables to keep activations sane.
    w.add_tensor("token_embd.weight", rnd(rng, n_vocab, E, scale=opts.get("embd_scale", 1.0)))
    w.add_tensor("output_norm.weight", norm_w(rng, E))
    if opts.get("output"):
        w.add_tensor("output.weight", rnd(rng, n_vocab, E))
    nq, nkv = H * hd, HKV * hd
    for il in range(n_layer):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", norm_w(rng, E))
        if opts.get("fused"):
            w.add_tensor(p + "attn_qkv.weight", rnd(rng, nq + 2 * nkv, E))
        else:
            w.add_tensor(p + "attn_q.weight", rnd(rng, nq, E))
            w.add_tensor(p + "attn_k.weight", rnd(rng, nkv, E))
            w.add_tensor(p + "attn_v.weight", rnd(rng, nkv, E))
        if opts.get("bias"):
            w.add_tensor(p + "attn_q.bias", rnd(rng, nq, scale=0.5))
            w.add_tensor(p + "attn_k.bias", rnd(rng, nkv, scale=0.5))
            w.add_tensor(p + "attn_v.bias", rnd(rng, nkv, scale=0.5))
        if opts.get("qk_norm"):
            w.add_tensor(p + "attn_q_norm.weight", norm_w(rng, hd))
            w.add_tensor(p + "attn_k_norm.weight", norm_w(rng, hd))
        w.add_tensor(p + "attn_output.weight", rnd(rng, E, nq))
        if opts.get("post_norms"):
            w.add_tensor(p + "post_attention_norm.weight", norm_w(rng, E))
        w.add_tensor(p + "ffn_norm.weight", norm_w(rng, E))
        if opts.get("fused"):
            w.add_tensor(p + "ffn_up.weight", rnd(rng, 2 * FF, E))
        else:
            w.add_tensor(p + "ffn_gate.weight", rnd(rng, FF, E))
            w.add_tensor(p + "ffn_up.weight", rnd(rng, FF, E))
        w.add_tensor(p + "ffn_down.weight", rnd(rng, E, FF))
        if opts.get("post_norms"):
            w.add_tensor(p + "post_ffw_norm.weight", norm_w(rng, E))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    vocab, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    f32 = "float32"
    make("qwen2", vocab, f"{out_dir}/qwen2.gguf", 2,
         {"rope.freq_base": (1000000.0, f32)}, {"bias": True, "output": True}, 1)
    make("qwen3", vocab, f"{out_dir}/qwen3.gguf", 2,
         {"rope.freq_base": (1000000.0, f32)}, {"qk_norm": True, "head_dim": 24}, 2)
    make("gemma2", vocab, f"{out_dir}/gemma2.gguf", 2,
         {"attention.sliding_window": (4, "uint32"), "attn_logit_softcapping": (5.0, f32),
          "final_logit_softcapping": (3.0, f32)},
         {"post_norms": True, "embd_scale": 0.2}, 3)
    make("gemma3", vocab, f"{out_dir}/gemma3.gguf", 6,
         {"attention.sliding_window": (4, "uint32"), "rope.freq_base": (1000000.0, f32)},
         {"post_norms": True, "qk_norm": True, "embd_scale": 0.2}, 4)
    make("phi3", vocab, f"{out_dir}/phi3.gguf", 2, {"rope.freq_base": (10000.0, f32)},
         {"fused": True, "output": True, "n_rot": 8}, 5)


if __name__ == "__main__":
    main()
