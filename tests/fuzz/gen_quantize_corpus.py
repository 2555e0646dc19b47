#!/usr/bin/env python3
"""Write the seed corpus for fuzz_quantize: tiny llama-shaped GGUF files in
f32, f16 and bf16 (matrices whose rows fit the k-quant blocks and ones that
need the fallback types, norms, an already quantized tensor, metadata the
mixture rules read), and a few type names. An input is
  [u8 file type index][u8 flags][GGUF]   or   [u8 any][0x80][type name]
(flags bit 0 pure, bit 1 allow_requantize).

usage: python3 tests/fuzz/gen_quantize_corpus.py [OUT_DIR]   (default:
corpus/quantize/ beside this script). The output is committed; rerun after
changing this."""
import math
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_gguf_corpus import F32, STR, U32, gguf  # noqa: E402

T_F32, T_F16, T_Q8_0, T_BF16 = 0, 1, 8, 30


def values(n, seed):
    return [math.sin(0.37 * i + seed) * (1 + (i % 7)) for i in range(n)]


def encode(tid, xs):
    if tid == T_F32:
        return struct.pack("<%df" % len(xs), *xs)
    if tid == T_F16:
        return struct.pack("<%de" % len(xs), *xs)
    if tid == T_BF16:
        return b"".join(struct.pack("<f", x)[2:] for x in xs)
    raise ValueError(tid)


def q8_0(xs):
    out = b""
    for b in range(0, len(xs), 32):
        blk = xs[b:b + 32]
        d = max(abs(x) for x in blk) / 127 or 1.0
        out += struct.pack("<e", d) + bytes((round(x / d) & 0xFF) for x in blk)
    return out


def model(tid, n_layer=2, dim=256, ff=64, vocab=8, quantized=False, arch="llama"):
    """dims innermost-first, as GGUF stores them."""
    kv = [("general.architecture", STR, arch), (arch + ".block_count", U32, n_layer),
          (arch + ".attention.head_count", U32, 8), (arch + ".attention.head_count_kv", U32, 2),
          (arch + ".attention.layer_norm_rms_epsilon", F32, 1e-5)]
    tensors = []

    def add(name, dims, t=tid):
        n = 1
        for d in dims:
            n *= d
        xs = values(n, len(tensors))
        tensors.append((name, dims, t, q8_0(xs) if t == T_Q8_0 else encode(t, xs)))

    add("token_embd.weight", [dim, vocab])
    for i in range(n_layer):
        p = "blk.%d." % i
        add(p + "attn_norm.weight", [dim], T_F32)
        add(p + "attn_q.weight", [dim, 2])
        add(p + "attn_k.weight", [dim, 2])
        add(p + "attn_v.weight", [dim, 2], T_Q8_0 if quantized and i == 0 else tid)
        add(p + "attn_output.weight", [dim, 2])
        add(p + "ffn_gate.weight", [dim, 2])
        add(p + "ffn_down.weight", [ff, 2])  # rows of 64: the k-quants fall back
        add(p + "ffn_norm.weight", [dim], T_F32)
    add("output_norm.weight", [dim], T_F32)
    add("output.weight", [dim, 2])
    return gguf(kv, tensors)


def seeds():
    # the index counts the file types in number order: 2 Q4_0, 9 Q3_K_M,
    # 10 Q3_K_L, 12 Q4_K_M, 14 Q5_K_M, 15 Q6_K, 17 IQ4_XS
    yield "f32", 12, 0, model(T_F32)
    yield "f16", 2, 0, model(T_F16, n_layer=3)
    yield "bf16", 10, 1, model(T_BF16)
    yield "q8_0_requant", 9, 2, model(T_F16, quantized=True)
    yield "q8_0_refused", 12, 0, model(T_F16, quantized=True)
    yield "falcon", 14, 0, model(T_F32, arch="falcon", dim=64)
    yield "iq4_xs", 17, 0, model(T_F16, n_layer=1)
    yield "tied", 15, 0, gguf([("general.architecture", STR, "gemma3")], [
        ("token_embd.weight", [96, 4], T_F32, encode(T_F32, values(384, 1)))])
    # a rank-0 tensor (n_dims 0), which the writer stores as [1]
    yield "scalar", 9, 0, gguf([("general.architecture", STR, "llama")], [
        ("token_embd.weight", [256, 2], T_F32, encode(T_F32, values(512, 1))),
        ("output.scale", [], T_F32, encode(T_F32, values(1, 2)))])


NAMES = [b"q4_k_m", b"Q8_0", b"Q4_K", b"iq4_xs", b"Q3_K_L", b"bf16", b"q9_9", b""]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus", "quantize")
    os.makedirs(out, exist_ok=True)
    for name, ft, flags, g in seeds():
        with open(os.path.join(out, name + ".bin"), "wb") as f:
            f.write(bytes([ft, flags]) + g)
    for i, n in enumerate(NAMES):
        with open(os.path.join(out, "name_%d.bin" % i), "wb") as f:
            f.write(b"\0\x80" + n)


if __name__ == "__main__":
    main()
