#!/usr/bin/env python3
"""Write a GGUF llama model with TinyLlama-1.1B's shape and random f16 weights.

    bench/make_synthetic_model.py [OUT.gguf]   (default build-bench/models/tinyllama-shape.F16.gguf)

Shape: n_embd 2048, 22 layers, 32 heads, 4 KV heads (head_dim 64), n_ff 5632,
32000-token SentencePiece-style vocabulary (byte tokens plus placeholder
pieces, so llama.cpp and Candle both load it). The values are random, which
is all a speed benchmark needs; `candle quantize` derives Q8_0/Q4_0/Q4_K_M.

Memory-frugal: tensors are streamed to the file one at a time (the largest,
32000 x 2048 f16, is 131 MB), drawn from one pool of random numbers at random
offsets instead of generating 1.1 billion fresh values.
"""
import os
import sys

import numpy as np
import gguf

N_EMBD, N_LAYER, N_HEAD, N_HEAD_KV, N_FF, N_VOCAB = 2048, 22, 32, 4, 5632, 32000
HEAD_DIM = N_EMBD // N_HEAD
POOL = 1 << 24


def tensors():
    """(name, numpy shape outermost-first, dtype) in file order."""
    kv = N_HEAD_KV * HEAD_DIM
    yield "token_embd.weight", (N_VOCAB, N_EMBD), np.float16
    for i in range(N_LAYER):
        p = f"blk.{i}."
        yield p + "attn_norm.weight", (N_EMBD,), np.float32
        yield p + "attn_q.weight", (N_EMBD, N_EMBD), np.float16
        yield p + "attn_k.weight", (kv, N_EMBD), np.float16
        yield p + "attn_v.weight", (kv, N_EMBD), np.float16
        yield p + "attn_output.weight", (N_EMBD, N_EMBD), np.float16
        yield p + "ffn_norm.weight", (N_EMBD,), np.float32
        yield p + "ffn_gate.weight", (N_FF, N_EMBD), np.float16
        yield p + "ffn_up.weight", (N_FF, N_EMBD), np.float16
        yield p + "ffn_down.weight", (N_EMBD, N_FF), np.float16
    yield "output_norm.weight", (N_EMBD,), np.float32
    yield "output.weight", (N_VOCAB, N_EMBD), np.float16


def vocab(n_vocab=N_VOCAB):
    """SentencePiece-style: <unk> <s> </s>, 256 byte tokens, placeholder pieces."""
    toks, scores, types = [b"<unk>", b"<s>", b"</s>"], [0.0, 0.0, 0.0], [2, 3, 3]
    for b in range(256):
        toks.append(b"<0x%02X>" % b)
        scores.append(0.0)
        types.append(6)
    i = 0
    while len(toks) < n_vocab:
        toks.append(("\u2581t%d" % i).encode())
        scores.append(-float(i))
        types.append(1)
        i += 1
    return toks, scores, types


def data(shape, dtype, rng, pool):
    """Ones for the f32 norm weights, else POOL's f16 values from random offsets."""
    n = int(np.prod(shape))
    if dtype == np.float32:  # norm weights: ones keep activations in range
        return np.ones(shape, dtype=np.float32)
    out = np.empty(n, dtype=np.float16)
    done = 0
    while done < n:
        off = int(rng.integers(0, POOL))
        k = min(n - done, POOL - off)
        out[done:done + k] = pool[off:off + k]
        done += k
    return out.reshape(shape)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build-bench/models/tinyllama-shape.F16.gguf"
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    rng = np.random.default_rng(1234)
    pool = (rng.standard_normal(POOL, dtype=np.float32) * 0.02).astype(np.float16)

    w = gguf.GGUFWriter(out, "llama")
    w.add_name("tinyllama-shape-random")
    w.add_context_length(2048)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(N_VOCAB)
    w.add_file_type(1)  # mostly F16
    toks, scores, types = vocab()
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    spec = list(tensors())
    for name, shape, dtype in spec:
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        w.add_tensor_info(name, shape, np.dtype(dtype), nbytes)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for name, shape, dtype in spec:
        w.write_tensor_data(data(shape, dtype, rng, pool))
    w.close()
    print(f"wrote {out} ({os.path.getsize(out) / 2**30:.2f} GiB)")


if __name__ == "__main__":
    main()
