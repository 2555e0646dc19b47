#!/usr/bin/env python3
"""Write the seed corpus for fuzz_ggml_whisper: small whisper.cpp ggml files,
valid and invalid, built with struct as whisper.cpp's
models/convert-pt-to-ggml.py and examples/quantize write them (no
dependency on whisper.cpp).

usage: python3 tests/fuzz/gen_ggml_whisper_corpus.py [OUT_DIR]   (default:
beside this script, corpus/ggml_whisper/). The output is committed; rerun
after changing this."""
import os
import struct
import sys

# ggml type -> (block elements, bytes per block)
BLOCK = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
         8: (32, 34), 12: (256, 144), 14: (256, 210), 30: (1, 2)}


def tensor(name, ne, ggml_type, data=None):
    """ne innermost-first, as ggml and the file store it."""
    n = 1
    for d in ne:
        n *= d
    be, bb = BLOCK[ggml_type]
    if data is None:
        data = bytes((i * 13 + 5) & 0xFF for i in range(n // be * bb))
    nb = name.encode()
    out = struct.pack("<3i", len(ne), len(nb), ggml_type)
    out += struct.pack(f"<{len(ne)}i", *ne) + nb + data
    return out


def model(tensors, tokens=(b"a", b"", b" the"), hp=(5, 6, 8, 2, 1, 4, 8, 2, 1, 2, 1), mel=(2, 3)):
    out = struct.pack("<I", 0x67676D6C) + struct.pack("<11i", *hp)
    out += struct.pack("<2i", *mel) + struct.pack(f"<{mel[0] * mel[1]}f", *range(mel[0] * mel[1]))
    out += struct.pack("<i", len(tokens))
    for t in tokens:
        out += struct.pack("<I", len(t)) + t
    return out + b"".join(tensors)


def whisper_like(ggml_type, n_state=32, n_vocab=40):
    """A one-layer model under whisper.cpp's names, 2-D weights in ggml_type."""
    s = n_state
    t = [tensor("encoder.positional_embedding", [s, 6], 0),
         tensor("encoder.conv1.weight", [3, 2, s], 1), tensor("encoder.conv1.bias", [1, s], 0),
         tensor("encoder.conv2.weight", [3, s, s], 1), tensor("encoder.conv2.bias", [1, s], 0),
         tensor("encoder.ln_post.weight", [s], 0), tensor("encoder.ln_post.bias", [s], 0)]
    for side in ("encoder", "decoder"):
        p = f"{side}.blocks.0."
        parts = ["attn"] + (["cross_attn"] if side == "decoder" else [])
        for a in parts:
            t += [tensor(p + a + "_ln.weight", [s], 0), tensor(p + a + "_ln.bias", [s], 0)]
            for w in ("query", "key", "value", "out"):
                t.append(tensor(p + f"{a}.{w}.weight", [s, s], ggml_type))
                if w != "key":
                    t.append(tensor(p + f"{a}.{w}.bias", [s], 0))
        t += [tensor(p + "mlp_ln.weight", [s], 0), tensor(p + "mlp_ln.bias", [s], 0),
              tensor(p + "mlp.0.weight", [s, 4 * s], ggml_type), tensor(p + "mlp.0.bias", [4 * s], 0),
              tensor(p + "mlp.2.weight", [4 * s, s], ggml_type), tensor(p + "mlp.2.bias", [s], 0)]
    t += [tensor("decoder.positional_embedding", [s, 4], 0),
          tensor("decoder.token_embedding.weight", [s, n_vocab], ggml_type),
          tensor("decoder.ln.weight", [s], 0), tensor("decoder.ln.bias", [s], 0)]
    hp = (n_vocab, 6, s, 2, 1, 4, s, 2, 1, 2, 1 if ggml_type == 1 else 2007)
    return model(t, tokens=[bytes([i + 65]) for i in range(n_vocab - 8)], hp=hp)


def seeds():
    yield "empty_model", model([])
    yield "types", model([tensor("f32", [3, 2], 0), tensor("f16", [2], 1), tensor("q4_0", [32, 2], 2),
                          tensor("q4_1", [32], 3), tensor("q5_0", [32], 6), tensor("q5_1", [32], 7),
                          tensor("q8_0", [64, 1, 2], 8), tensor("q4_k", [256], 12),
                          tensor("q6_k", [256], 14), tensor("bf16", [4, 1, 1, 2], 30)])
    yield "whisper_f16", whisper_like(1, n_state=16)
    yield "whisper_q8_0", whisper_like(8)
    good = model([tensor("w", [4, 2], 0)])
    yield "truncated", good[:-3]
    yield "partial_header", good + b"\1\0\0\0"
    yield "bad_type", model([tensor("w", [4], 0)]).replace(struct.pack("<3i", 1, 1, 0), struct.pack("<3i", 1, 1, 16))
    yield "bad_row", model([]) + struct.pack("<3i", 1, 1, 2) + struct.pack("<i", 48) + b"w" + bytes(36)
    yield "dup", model([tensor("w", [1], 0), tensor("w", [1], 0)])
    yield "huge_vocab", struct.pack("<I", 0x67676D6C) + struct.pack("<11i", 5, 6, 8, 2, 1, 4, 8, 2, 1, 2, 1) + \
        struct.pack("<2i", 0, 0) + struct.pack("<i", 1 << 30)
    yield "huge_dims", model([]) + struct.pack("<3i", 4, 1, 0) + struct.pack("<4i", *[0x7FFFFFFF] * 4) + b"w"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus", "ggml_whisper")
    os.makedirs(out, exist_ok=True)
    for name, data in seeds():
        with open(os.path.join(out, name + ".bin"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
