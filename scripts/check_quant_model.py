#!/usr/bin/env python3
"""Checks Candle's block kernels on the tensors of a real GGUF model.

For every quantized tensor: dequantization through Candle's to_f32 must equal
the gguf package's bit for bit; and for a few rows, vec_dot against a random
activation quantized to the paired type must match the double-precision dot
of the dequantized rows (relative to sum |x*y|).

Usage: python3 scripts/check_quant_model.py MODEL.gguf path/to/libcandle.so
(a build without sanitizers, e.g. -DCMAKE_BUILD_TYPE=Release). Needs gguf, numpy.
"""
import ctypes
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader, quants

ROW_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
DOT_FN = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


class Traits(ctypes.Structure):
    # mirrors candle_dtype_traits in include/candle/dtype.h
    _fields_ = [("name", ctypes.c_char_p), ("block_size", ctypes.c_int64), ("type_size", ctypes.c_size_t),
                ("is_float", ctypes.c_bool), ("is_int", ctypes.c_bool), ("is_quantized", ctypes.c_bool),
                ("gguf_id", ctypes.c_int), ("to_f32", ROW_FN), ("from_f32", ROW_FN), ("vec_dot", DOT_FN),
                ("vec_dot_type", ctypes.c_int)]


def main():
    lib = ctypes.CDLL(sys.argv[2])
    lib.candle_dtype_info.restype = ctypes.POINTER(Traits)
    lib.candle_dtype_row_size.restype = ctypes.c_size_t
    lib.candle_dtype_row_size.argtypes = [ctypes.c_int, ctypes.c_int64]
    rng = np.random.default_rng(1)
    bad, seen, worst = 0, {}, {}
    for t in GGUFReader(sys.argv[1]).tensors:
        if t.tensor_type in (T.F32, T.F16, T.BF16):
            continue
        dt = lib.candle_dtype_from_gguf(int(t.tensor_type))
        tr = lib.candle_dtype_info(dt).contents
        raw = np.ascontiguousarray(t.data).view(np.uint8).reshape(-1)
        n = int(np.prod(t.shape))
        out = np.empty(n, np.float32)
        tr.to_f32(raw.ctypes.data, out.ctypes.data, n)
        ref = quants.dequantize(raw, t.tensor_type).astype(np.float32).reshape(-1)
        if not np.array_equal(out.view(np.uint32), ref.view(np.uint32)):
            print("dequant mismatch:", t.name, t.tensor_type.name)
            bad += 1
        seen[t.tensor_type.name] = seen.get(t.tensor_type.name, 0) + 1

        K = int(t.shape[0])
        ty = lib.candle_dtype_info(tr.vec_dot_type).contents
        y = rng.standard_normal(K).astype(np.float32)
        yq = np.zeros(lib.candle_dtype_row_size(tr.vec_dot_type, K), np.uint8)
        ty.from_f32(y.ctypes.data, yq.ctypes.data, K)
        yd = np.empty(K, np.float32)
        ty.to_f32(yq.ctypes.data, yd.ctypes.data, K)
        rs = lib.candle_dtype_row_size(dt, K)
        for r in range(min(4, raw.size // rs)):
            row = np.ascontiguousarray(raw[r * rs:(r + 1) * rs])
            xd = out[r * K:(r + 1) * K].astype(np.float64)
            got = ctypes.c_float()
            tr.vec_dot(K, ctypes.byref(got), row.ctypes.data, yq.ctypes.data)
            err = abs(got.value - float(xd @ yd)) / max(float(np.abs(xd * yd).sum()), 1e-30)
            worst[t.tensor_type.name] = max(worst.get(t.tensor_type.name, 0.0), err)
    print("tensors per type (dequant bit-exact unless listed above):", seen)
    print("worst relative vec_dot error:", {k: f"{v:.1e}" for k, v in worst.items()})
    # q4_1/q5_1 take the minimum's term from q8_1's f16 sum, as ggml does: ~1e-4
    sys.exit(1 if bad or any(v > 1e-3 for v in worst.values()) else 0)


if __name__ == "__main__":
    main()
