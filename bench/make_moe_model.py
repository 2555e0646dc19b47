#!/usr/bin/env python3
"""Write a mixture-of-experts GGUF with random f16 weights, for speed benchmarks.

    bench/make_moe_model.py mixtral|qwen3moe OUT.gguf [--layers N]

mixtral:  arch "llama" as llama.cpp's converter writes Mixtral: n_embd 4096,
          32 heads, 8 KV heads (head_dim 128), 8 experts of n_ff 14336, 2 used
          per token, 32000-token vocabulary; 4 layers by default (Mixtral-8x7B
          has 32). 11.9 GB in F16.
qwen3moe: Qwen3-30B-A3B's shape: n_embd 2048, 32 heads / 4 KV heads of
          head_dim 128, RMSNorm on q and k per head, 128 experts of n_ff 768,
          8 used, norm_topk_prob (llama.cpp always renormalises for qwen3moe;
          expert_weights_norm is written for Candle), 151936-token vocabulary,
          untied output; 8 layers by default (the original has 48). 10.9 GB.

The experts are stacked, as llama.cpp writes them: ffn_{gate,up}_exps
[n_expert, n_ff, n_embd] and ffn_down_exps [n_expert, n_embd, n_ff], with the
router ffn_gate_inp [n_expert, n_embd] in f32 (the converter keeps it f32,
and llama-quantize leaves it so). Random routing weights spread the tokens
over the experts. `candle quantize` derives Q8_0/Q4_0/Q4_K_M.

Memory-frugal as make_synthetic_model.py (whose vocabulary and random pool
this reuses): one tensor in memory at a time (the largest, a Mixtral stack,
is 940 MB), filled from one pool of random f16 values at random offsets.
"""
import argparse
import os
import sys

import numpy as np
import gguf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_synthetic_model as syn  # noqa: E402

SHAPES = {
    # n_embd, n_head, n_head_kv, head_dim, n_ff (dense, metadata only for
    # qwen3moe), n_ff_exp, n_expert, n_used, n_vocab, layers, qk_norm
    "mixtral": dict(arch="llama", n_embd=4096, n_head=32, n_kv=8, head_dim=128, n_ff=14336,
                    n_ff_exp=14336, n_expert=8, n_used=2, n_vocab=32000, layers=4, qk_norm=False,
                    rope_base=1e6, eps=1e-5, ctx=32768),
    "qwen3moe": dict(arch="qwen3moe", n_embd=2048, n_head=32, n_kv=4, head_dim=128, n_ff=6144,
                     n_ff_exp=768, n_expert=128, n_used=8, n_vocab=151936, layers=8, qk_norm=True,
                     rope_base=1e6, eps=1e-6, ctx=40960),
}


def tensors(s):
    """(name, numpy shape outermost-first, dtype, random) in file order; random
    f32 tensors are routers, the other f32 ones norm weights (ones)."""
    d, q, kv, ne, ff = s["n_embd"], s["n_head"] * s["head_dim"], s["n_kv"] * s["head_dim"], \
        s["n_expert"], s["n_ff_exp"]
    yield "token_embd.weight", (s["n_vocab"], d), np.float16, True
    for i in range(s["layers"]):
        p = f"blk.{i}."
        yield p + "attn_norm.weight", (d,), np.float32, False
        yield p + "attn_q.weight", (q, d), np.float16, True
        yield p + "attn_k.weight", (kv, d), np.float16, True
        yield p + "attn_v.weight", (kv, d), np.float16, True
        yield p + "attn_output.weight", (d, q), np.float16, True
        if s["qk_norm"]:
            yield p + "attn_q_norm.weight", (s["head_dim"],), np.float32, False
            yield p + "attn_k_norm.weight", (s["head_dim"],), np.float32, False
        yield p + "ffn_norm.weight", (d,), np.float32, False
        yield p + "ffn_gate_inp.weight", (ne, d), np.float32, True
        yield p + "ffn_gate_exps.weight", (ne, ff, d), np.float16, True
        yield p + "ffn_up_exps.weight", (ne, ff, d), np.float16, True
        yield p + "ffn_down_exps.weight", (ne, d, ff), np.float16, True
    yield "output_norm.weight", (d,), np.float32, False
    yield "output.weight", (s["n_vocab"], d), np.float16, True


def data(shape, dtype, rand, rng, pool):
    if dtype == np.float32 and rand:  # a router: random, in f32
        return syn.data(shape, np.float16, rng, pool).astype(np.float32)
    return syn.data(shape, dtype, rng, pool)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("shape", choices=sorted(SHAPES))
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=0, help="layers (default: the shape's)")
    a = ap.parse_args()
    s = dict(SHAPES[a.shape])
    if a.layers > 0:
        s["layers"] = a.layers
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    rng = np.random.default_rng(1234)
    pool = (rng.standard_normal(syn.POOL, dtype=np.float32) * 0.02).astype(np.float16)

    w = gguf.GGUFWriter(a.out, s["arch"])
    w.add_name(f"{a.shape}-shape-random")
    w.add_context_length(s["ctx"])
    w.add_embedding_length(s["n_embd"])
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(s["n_ff"])
    w.add_head_count(s["n_head"])
    w.add_head_count_kv(s["n_kv"])
    w.add_key_length(s["head_dim"])
    w.add_value_length(s["head_dim"])
    w.add_rope_dimension_count(s["head_dim"])
    w.add_rope_freq_base(s["rope_base"])
    w.add_layer_norm_rms_eps(s["eps"])
    w.add_expert_count(s["n_expert"])
    w.add_expert_used_count(s["n_used"])
    if s["n_ff_exp"] != s["n_ff"]:
        w.add_expert_feed_forward_length(s["n_ff_exp"])
    w.add_expert_weights_norm(True)
    w.add_vocab_size(s["n_vocab"])
    w.add_file_type(1)  # mostly F16
    toks, scores, types = syn.vocab(s["n_vocab"])
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    spec = list(tensors(s))
    for name, shape, dtype, _ in spec:
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        w.add_tensor_info(name, shape, np.dtype(dtype), nbytes)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for name, shape, dtype, rand in spec:
        w.write_tensor_data(data(shape, dtype, rand, rng, pool))
    w.close()
    print(f"wrote {a.out} ({os.path.getsize(a.out) / 2**30:.2f} GiB)")


if __name__ == "__main__":
    main()
