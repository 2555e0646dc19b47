#!/usr/bin/env python3
"""Write the seed corpus for fuzz_kld: small KL-divergence base files (the
format in include/candle/kld.h), valid and invalid, built with struct.

usage: python3 tests/fuzz/gen_kld_corpus.py [OUT_DIR]   (default: beside this
script, corpus/kld/). The output is committed; rerun after changing this."""
import math
import os
import random
import struct
import sys

MAGIC = b"CDLKLDB\0"


def fnv(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & (2**64 - 1)
    return h


def row(logits, nxt):
    """A row as candle_kld_write_row makes it."""
    mx, mn = max(logits), min(logits)
    am = logits.index(mx)
    lse = math.log(sum(math.exp(x - mx) for x in logits))
    step = min(mx - mn, 64.0) / 65535 or 1 / 65535
    step = struct.unpack("<f", struct.pack("<f", step))[0]
    q = [min(65535, round((mx - x) / step)) for x in logits]
    return struct.pack("<iff", am, -lse, logits[nxt] - mx - lse) + struct.pack("<f", step) + \
        struct.pack(f"<{len(q)}H", *q)


def kld(n_vocab, n_ctx, n_chunk, n_tokens, rng, checksum=True, version=1, fixed=16):
    toks = [rng.randrange(n_vocab) for _ in range(n_tokens)]
    first = n_ctx // 2
    b = MAGIC + struct.pack("<II5Q", version, fixed, n_vocab, n_ctx, n_chunk, first, n_tokens)
    b += struct.pack(f"<{n_tokens}i", *toks)
    for c in range(n_chunk):
        for j in range(first, n_ctx - 1):
            logits = [rng.gauss(0, 3) for _ in range(n_vocab)]
            b += row(logits, toks[c * n_ctx + j + 1])
    return b + (struct.pack("<Q", fnv(b)) if checksum else b"\0" * 8)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "kld")
    os.makedirs(out, exist_ok=True)
    rng = random.Random(1)
    seeds = {
        "valid_v8": kld(8, 4, 1, 4, rng),
        "valid_v16_2chunks": kld(16, 6, 2, 13, rng),
        "valid_v100": kld(100, 8, 1, 8, rng),
        "bad_checksum": kld(8, 4, 1, 4, rng, checksum=False),
        "bad_version": kld(8, 4, 1, 4, rng, version=2),
        "bad_fixed": kld(8, 4, 1, 4, rng, fixed=12),
    }
    v = bytearray(kld(8, 4, 1, 4, rng))
    seeds["truncated"] = bytes(v[:-3])
    v[56] = 200  # a token id past n_vocab
    seeds["bad_token"] = bytes(v)
    seeds["header_only"] = bytes(kld(8, 4, 1, 4, rng)[:56])
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
