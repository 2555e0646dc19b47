#!/usr/bin/env python3
"""Write the seed corpus for fuzz_model: tiny random-weight models of every
family Candle runs (llama, qwen2, qwen3, gemma2, gemma3, phi3, olmoe, granite,
granitemoe), with the
metadata and tensor shapes each loader checks, in f32, f16 and q8_0, plus a
few that must be refused. An input is [u8 flags][GGUF] (flags bit 0 f16 KV
cache, bit 1 two tokens, bit 2 no mmap).

usage: python3 tests/fuzz/gen_model_corpus.py [OUT_DIR]   (default:
corpus/model/ beside this script). The output is committed; rerun after
changing this."""
import math
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_gguf_corpus import F32, STR, U32, gguf  # noqa: E402

T_F32, T_F16, T_Q8_0 = 0, 1, 8
EMBD, HEADS, KV_HEADS, HEAD_DIM, FF, VOCAB, LAYERS = 32, 4, 2, 8, 32, 32, 2


def values(n, seed):
    return [0.2 * math.sin(0.37 * i + seed) for i in range(n)]


def data(tid, xs):
    if tid == T_F32:
        return struct.pack("<%df" % len(xs), *xs)
    if tid == T_F16:
        return struct.pack("<%de" % len(xs), *xs)
    out = b""
    for b in range(0, len(xs), 32):
        blk = xs[b:b + 32]
        d = max(abs(x) for x in blk) / 127 or 1.0
        out += struct.pack("<e", d) + bytes((round(x / d) & 0xFF) for x in blk)
    return out


def model(arch, wt=T_F16, tied=False, drop=None, kv_extra=(), experts=0):
    nq, nkv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    kv = [("general.architecture", STR, arch), (arch + ".block_count", U32, LAYERS),
          (arch + ".embedding_length", U32, EMBD), (arch + ".feed_forward_length", U32, FF),
          (arch + ".attention.head_count", U32, HEADS),
          (arch + ".attention.head_count_kv", U32, KV_HEADS),
          (arch + ".attention.key_length", U32, HEAD_DIM),
          (arch + ".context_length", U32, 64),
          (arch + ".attention.layer_norm_rms_epsilon", F32, 1e-6)] + list(kv_extra)
    if experts:
        kv += [(arch + ".expert_count", U32, experts), (arch + ".expert_used_count", U32, 2)]
    tensors = []

    def add(name, shape, t=wt):  # shape outermost-first, as Candle reads it
        if name == drop:
            return
        n = 1
        for d in shape:
            n *= d
        t = T_F32 if len(shape) == 1 else t
        tensors.append((name, list(reversed(shape)), t, data(t, values(n, len(tensors)))))

    add("token_embd.weight", [VOCAB, EMBD])
    add("output_norm.weight", [EMBD])
    if not tied:
        add("output.weight", [VOCAB, EMBD])
    for i in range(LAYERS):
        p = "blk.%d." % i
        add(p + "attn_norm.weight", [EMBD])
        if arch == "phi3":
            add(p + "attn_qkv.weight", [nq + 2 * nkv, EMBD])
        else:
            add(p + "attn_q.weight", [nq, EMBD])
            add(p + "attn_k.weight", [nkv, EMBD])
            add(p + "attn_v.weight", [nkv, EMBD])
        if arch == "qwen2":
            add(p + "attn_q.bias", [nq])
            add(p + "attn_k.bias", [nkv])
            add(p + "attn_v.bias", [nkv])
        if arch in ("qwen3", "gemma3"):
            add(p + "attn_q_norm.weight", [HEAD_DIM])
            add(p + "attn_k_norm.weight", [HEAD_DIM])
        if arch == "olmoe":  # over the whole projections
            add(p + "attn_q_norm.weight", [nq])
            add(p + "attn_k_norm.weight", [nkv])
        add(p + "attn_output.weight", [EMBD, nq])
        if arch.startswith("gemma"):
            add(p + "post_attention_norm.weight", [EMBD])
            add(p + "post_ffw_norm.weight", [EMBD])
        add(p + "ffn_norm.weight", [EMBD])
        if arch == "phi3":
            add(p + "ffn_up.weight", [2 * FF, EMBD])
        elif experts:  # stacked, as llama.cpp's converter writes them
            add(p + "ffn_gate_inp.weight", [experts, EMBD])
            add(p + "ffn_gate_exps.weight", [experts, FF, EMBD])
            add(p + "ffn_up_exps.weight", [experts, FF, EMBD])
            add(p + "ffn_down_exps.weight", [experts, EMBD, FF])
            continue
        else:
            add(p + "ffn_gate.weight", [FF, EMBD])
            add(p + "ffn_up.weight", [FF, EMBD])
        add(p + "ffn_down.weight", [EMBD, FF])
    return gguf(kv, tensors)


def seeds():
    yield "llama_f16", 0, model("llama")
    yield "llama_q8_0", 3, model("llama", T_Q8_0)
    yield "llama_f32_tied", 6, model("llama", T_F32, tied=True)
    yield "qwen2", 2, model("qwen2")
    yield "qwen3", 1, model("qwen3", T_Q8_0)
    yield "gemma2", 2, model("gemma2", kv_extra=[("gemma2.attention.sliding_window", U32, 4)])
    yield "gemma3", 3, model("gemma3", tied=True,
                             kv_extra=[("gemma3.attention.sliding_window", U32, 4)])
    yield "phi3", 0, model("phi3")
    yield "mistral_window", 1, model("llama", kv_extra=[("llama.attention.sliding_window", U32, 1)])
    yield "olmoe", 2, model("olmoe", T_Q8_0, experts=4)
    yield "granitemoe", 1, model("granitemoe", tied=True, experts=3, kv_extra=[
        ("granitemoe.embedding_scale", F32, 12.0), ("granitemoe.residual_scale", F32, 0.22),
        ("granitemoe.attention.scale", F32, 0.015625), ("granitemoe.logit_scale", F32, 6.0)])
    yield "granite", 0, model("granite", kv_extra=[("granite.logit_scale", F32, 8.0)])
    yield "missing_tensor", 0, model("llama", drop="blk.1.ffn_down.weight")
    yield "unknown_arch", 0, model("mamba")
    yield "rope_scaled", 2, model("llama", kv_extra=[
        ("llama.rope.scaling.type", STR, "linear"), ("llama.rope.scaling.factor", F32, 4.0),
        ("llama.rope.dimension_count", U32, 4)])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus", "model")
    os.makedirs(out, exist_ok=True)
    for name, flags, g in seeds():
        with open(os.path.join(out, name + ".bin"), "wb") as f:
            f.write(bytes([flags]) + g)


if __name__ == "__main__":
    main()
