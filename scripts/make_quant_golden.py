#!/usr/bin/env python3
"""Golden vectors for the GGUF block formats, from the `gguf` package's
reference (numpy) quantizers and dequantizers.

Writes tests/data/quant/<type>.deq: random blocks (scales set to finite f16
values) followed by their dequantization as little-endian float32; and
tests/data/quant/<type>.q, for the types the package can quantize: float32
input followed by the quantized blocks. Block counts are derived from the file
size by the reader (tests/unit/test_quant.c). Deterministic (fixed seed).

Usage: pip install gguf numpy; python3 scripts/make_quant_golden.py [outdir]
The K types, q8_1 and iq4_* get their .q files from ggml's reference
quantizers instead: scripts/make_quant_golden_ggml.sh.
"""
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants
from gguf.constants import GGML_QUANT_SIZES

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "quant")

# type -> (candle name, byte offsets of the f16 scales inside a block)
DEQ = {
    T.F16: ("f16", []),
    T.BF16: ("bf16", []),
    T.Q4_0: ("q4_0", [0]),
    T.Q4_1: ("q4_1", [0, 2]),
    T.Q5_0: ("q5_0", [0]),
    T.Q5_1: ("q5_1", [0, 2]),
    T.Q8_0: ("q8_0", [0]),
    T.Q2_K: ("q2_k", [80, 82]),
    T.Q3_K: ("q3_k", [108]),
    T.Q4_K: ("q4_k", [0, 2]),
    T.Q5_K: ("q5_k", [0, 2]),
    T.Q6_K: ("q6_k", [208]),
    T.IQ4_NL: ("iq4_nl", [0]),
    T.IQ4_XS: ("iq4_xs", [0]),
}
QUANT = [T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]


def random_scales(rng, n):
    """Finite f16 scales of both signs, with a zero, a subnormal and a large one."""
    s = (rng.uniform(-1, 1, n) * 10.0 ** rng.uniform(-4, 1, n)).astype(np.float16)
    specials = np.array([0.0, 3e-6, -1234.0, 0.5], dtype=np.float16)
    k = min(n, len(specials))
    s[:k] = specials[:k]
    return s


def dequant_case(rng, qtype, offsets):
    bs, ts = GGML_QUANT_SIZES[qtype]
    nb = (64 if bs == 1 else 9 if bs == 32 else 5)
    raw = rng.integers(0, 256, size=(nb, ts), dtype=np.uint8)
    if qtype == T.F16:
        h = raw.view(np.uint16)
        # keep a few specials (inf, nan, subnormal, -0) and otherwise random finite values
        h[:, 0] = np.where((h[:, 0] & 0x7C00) == 0x7C00, h[:, 0] & 0xBFFF, h[:, 0])
        h[:4, 0] = [0x7C00, 0x7E01, 0x0001, 0x8000]
    if qtype == T.BF16:
        h = raw.view(np.uint16)
        h[:, 0] = np.where((h[:, 0] & 0x7F80) == 0x7F80, h[:, 0] & 0xBFFF, h[:, 0])
        h[:4, 0] = [0x7F80, 0xFF80, 0x0001, 0x8000]
    for off in offsets:
        raw[:, off:off + 2] = random_scales(rng, nb).view(np.uint8).reshape(nb, 2)
    out = quants.dequantize(raw.reshape(1, -1), qtype).astype(np.float32).reshape(-1)
    return raw.reshape(-1), out


def quant_input(rng, bs):
    nb = 64 if bs == 1 else 12
    x = rng.standard_normal(nb * bs).astype(np.float32)
    if bs > 1:
        x[0:bs] = 0                                   # all-zero block: scale 0
        x[bs:2 * bs] = 0.75                           # constant block
        x[2 * bs:3 * bs] = np.arange(bs) * 0.5 - 7.5  # exact halves: tie rounding
        x[3 * bs:4 * bs] = (np.arange(bs) % 2) * 2 - 1 + 0.01 * np.arange(bs)
        x[4 * bs:5 * bs] *= 1e-3
        x[5 * bs:6 * bs] *= 1e3
        x[6 * bs:7 * bs] = np.linspace(-127, 127, bs)  # max/127 = 1: ties in q8 rounding
    else:
        x[:6] = [0.0, -0.0, 65504.0, 65520.0, 1e-8, 3.0e38]
    return x


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20261130)
    for qtype, (name, offsets) in DEQ.items():
        raw, out = dequant_case(rng, qtype, offsets)
        with open(os.path.join(OUT, name + ".deq"), "wb") as f:
            f.write(raw.tobytes())
            f.write(out.astype("<f4").tobytes())
    for qtype in QUANT:
        name = DEQ[qtype][0]
        bs, _ = GGML_QUANT_SIZES[qtype]
        x = quant_input(rng, bs)
        with np.errstate(over="ignore"):  # 3e38 -> f16 inf is intended
            q = np.asarray(quants.quantize(x.reshape(1, -1), qtype)).view(np.uint8).reshape(-1)
        with open(os.path.join(OUT, name + ".q"), "wb") as f:
            f.write(x.astype("<f4").tobytes())
            f.write(q.tobytes())
    print("wrote", OUT)


if __name__ == "__main__":
    main()
