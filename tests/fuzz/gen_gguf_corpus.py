#!/usr/bin/env python3
"""Write the seed corpus for fuzz_gguf: a few small GGUF files, valid and
invalid, built with struct (no dependency on the gguf package).

usage: python3 tests/fuzz/gen_gguf_corpus.py [OUT_DIR]   (default: beside this
script, corpus/gguf/). The output is committed; rerun after changing this."""
import os
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i",
          F32: "<f", BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def value(t, v):
    if t == STR:
        return gstr(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(value(et, x) for x in items)
    return struct.pack(SCALAR[t], v)


def gguf(kvs, tensors, version=3, align=32):
    """kvs: [(key, type, value)]; tensors: [(name, dims innermost-first,
    ggml type id, data bytes)]."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += gstr(k) + struct.pack("<I", t) + value(t, v)
    off, blobs = 0, b""
    for name, dims, tid, data in tensors:
        out += gstr(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", tid, off)
        pad = (-len(data)) % align
        blobs += data + b"\0" * pad
        off += len(data) + pad
    if tensors:  # no data section to align otherwise
        out += b"\0" * ((-len(out)) % align)
    return out + blobs


def f32s(*xs):
    return struct.pack("<%df" % len(xs), *xs)


def seeds():
    yield "empty_v3", gguf([], [])
    yield "empty_v2", gguf([], [], version=2)
    yield "scalars", gguf([
        ("general.architecture", STR, "llama"), ("u8", U8, 200), ("i8", I8, -3),
        ("u16", U16, 65535), ("i16", I16, -2), ("u32", U32, 7), ("i32", I32, -7),
        ("f32", F32, 0.5), ("bool", BOOL, True), ("u64", U64, 2**64 - 1),
        ("i64", I64, -2**63), ("f64", F64, 1e-300)], [])
    yield "arrays", gguf([
        ("tokenizer.ggml.tokens", ARR, (STR, ["<unk>", "<s>", "</s>", "a", ""])),
        ("tokenizer.ggml.scores", ARR, (F32, [0.0, -1.0, -2.5, 3.0, 1e9])),
        ("tokenizer.ggml.token_type", ARR, (I32, [2, 3, 3, 1, 1])),
        ("flags", ARR, (BOOL, [True, False])),
        ("nested", ARR, (ARR, [(U16, [1, 2]), (STR, ["x"]), (ARR, [])])),
        ("empty", ARR, (U64, []))], [])
    yield "tensors_align64", gguf([("general.alignment", U32, 64), ("general.name", STR, "t")], [
        ("w.f32", [3, 2], 0, f32s(1, 2, 3, 4, 5, 6)),
        ("w.q4_0", [32, 1], 2, bytes(range(18))),
        ("w.i8", [5], 24, bytes([1, 2, 3, 4, 5])),
        ("w.f16", [2, 1, 1, 1], 1, b"\x00\x3c\x00\xc0")], align=64)
    tiny = gguf([("general.architecture", STR, "llama"), ("llama.block_count", U32, 1),
                 ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5)], [
        ("token_embd.weight", [4, 8], 0, f32s(*range(32))),
        ("output_norm.weight", [4], 0, f32s(1, 1, 1, 1)),
        ("blk.0.attn_q.weight", [32, 4], 8, bytes(34 * 4))])
    yield "tiny_llama", tiny
    yield "truncated", tiny[: len(tiny) - 40]
    yield "bad_dtype", gguf([], [("w", [4], 99, f32s(1, 2, 3, 4))])
    # a valid power of two far beyond the file: fine without tensors (found
    # by the fuzzer: the writer used to pad the copy up to it)
    yield "huge_alignment", gguf([("general.alignment", U32, 1 << 30)], [])
    yield "bad_alignment", gguf([("general.alignment", U32, 48)], [("w", [1], 0, f32s(1))])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus", "gguf")
    os.makedirs(out, exist_ok=True)
    for name, data in seeds():
        with open(os.path.join(out, name + ".gguf"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
