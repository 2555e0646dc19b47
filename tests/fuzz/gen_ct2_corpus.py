#!/usr/bin/env python3
"""Write the seed corpus for fuzz_ct2: small CTranslate2 model.bin files,
valid and invalid, built with struct as ctranslate2's model_spec.py
_serialize writes them (no dependency on the ctranslate2 package).

usage: python3 tests/fuzz/gen_ct2_corpus.py [OUT_DIR]   (default: beside
this script, corpus/ct2/). The output is committed; rerun after changing
this."""
import os
import struct
import sys

SIZE = {0: 4, 1: 1, 2: 2, 3: 4, 4: 2, 5: 2}  # dtype id -> bytes per element


def string(s):
    b = s.encode() + b"\0"
    return struct.pack("<H", len(b)) + b


def model(variables, aliases=(), version=6, spec="WhisperSpec", revision=3):
    """variables: [(name, shape, dtype id, data bytes or None for zeros)]."""
    out = struct.pack("<I", version)
    if version >= 2:
        out += string(spec) + struct.pack("<I", revision)
    out += struct.pack("<I", len(variables))
    for name, shape, dt, data in variables:
        n = 1
        for d in shape:
            n *= d
        if data is None:
            data = bytes(n * SIZE[dt])
        out += string(name) + struct.pack("<B", len(shape))
        out += b"".join(struct.pack("<I", d) for d in shape)
        if version >= 4:
            out += struct.pack("<BI", dt, len(data))
        else:
            out += struct.pack("<BI", SIZE[dt], len(data) // SIZE[dt])
        out += data
    if version >= 3:
        out += struct.pack("<I", len(aliases))
        for a, t in aliases:
            out += string(a) + string(t)
    return out


def seeds():
    yield "empty", model([])
    yield "whisper_like", model([
        ("decoder/embeddings/weight", [8, 4], 4, None),
        ("decoder/num_heads", [], 2, struct.pack("<h", 6)),
        ("decoder/activation", [], 1, b"\x01"),
        ("encoder/conv1/weight", [4, 2, 3], 4, None),
        ("encoder/conv1/bias", [4], 0, struct.pack("<4f", 1, 2, 3, 4)),
        ("encoder/layer_0/ffn/linear_0/weight", [2, 2], 5, None),
        ("x/i32", [2], 3, struct.pack("<2i", -1, 7))],
        [("decoder/projection/weight", "decoder/embeddings/weight")])
    yield "aliases", model([("a", [1], 0, None), ("b", [0, 3], 1, b"")],
                           [("p", "a"), ("q", "p"), ("a", "b"), ("r", "missing"), ("p", "b")])
    yield "v1", model([("w", [3], 2, None)], version=1)
    yield "v3", model([("w", [2], 0, None)], [("v", "w")], version=3)
    good = model([("w", [2, 2], 0, None)], [("v", "w")])
    yield "truncated", good[:-5]
    yield "trailing", good + b"\0"
    yield "bad_nbytes", good.replace(struct.pack("<BI", 0, 16), struct.pack("<BI", 0, 12))
    yield "huge_count", struct.pack("<I", 6) + string("WhisperSpec") + struct.pack("<II", 3, 1 << 31)
    yield "version7", struct.pack("<I", 7) + string("WhisperSpec") + struct.pack("<II", 3, 0)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus", "ct2")
    os.makedirs(out, exist_ok=True)
    for name, data in seeds():
        with open(os.path.join(out, name + ".bin"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
