#!/usr/bin/env python3
"""Write the seed corpus for fuzz_safetensors: a few small safetensors files,
valid and invalid, built with struct and json (no dependency on the
safetensors package).

usage: python3 tests/fuzz/gen_safetensors_corpus.py [OUT_DIR]   (default:
beside this script, corpus/safetensors/). The output is committed; rerun
after changing this."""
import json
import os
import struct
import sys

SIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
        "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4,
        "I64": 8, "U64": 8, "F64": 8}


def st(tensors, metadata=None, align=8, header=None):
    """tensors: [(name, dtype, shape, data bytes)], laid out in order. The
    header is padded with spaces to `align`, as the reference writer does."""
    h, off, blobs = {}, 0, b""
    if metadata is not None:
        h["__metadata__"] = metadata
    for name, dtype, shape, data in tensors:
        h[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        blobs += data
        off += len(data)
    text = (header if header is not None else json.dumps(h, separators=(",", ":"))).encode()
    text += b" " * ((-len(text)) % align)
    return struct.pack("<Q", len(text)) + text + blobs


def f32s(*xs):
    return struct.pack("<%df" % len(xs), *xs)


def seeds():
    yield "empty", st([])
    yield "metadata", st([], {"format": "pt", "note": "h\u00e9llo \"q\"", "nul": "a\u0000b"})
    yield "every_dtype", st([(d, d, [2], bytes(range(2 * n))) for d, n in SIZE.items()])
    yield "tiny_model", st([
        ("model.embed_tokens.weight", "F32", [4, 2], f32s(*range(8))),
        ("model.norm.weight", "BF16", [2], b"\x80\x3f\x00\x40"),
        ("lm_head.weight", "F16", [4, 2], bytes(16)),
        ("scale", "F64", [], struct.pack("<d", 0.125)),
        ("fp8", "F8_E4M3", [1, 4], b"\x38\x7e\x7f\x01")], {"format": "pt"})
    yield "zero_sized", st([("z", "F32", [0, 3], b""), ("s", "U8", [], b"\x07")])
    yield "unaligned", st([("a", "U8", [1], b"\x01"), ("b", "F32", [2], f32s(1.5, -2))], align=1)
    good = st([("w", "F32", [2, 2], f32s(1, 2, 3, 4))])
    yield "truncated", good[: len(good) - 4]
    yield "bad_size", st([], header='{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}}') + bytes(12)
    yield "overlap", st([], header='{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},'
                                   '"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}') + b"xyz"
    yield "header_too_long", struct.pack("<Q", 1 << 40) + b"{}"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus", "safetensors")
    os.makedirs(out, exist_ok=True)
    for name, data in seeds():
        with open(os.path.join(out, name + ".safetensors"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
