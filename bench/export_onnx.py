#!/usr/bin/env python3
"""Export a sentence-transformers directory's encoder to ONNX (f32) for
bench/embed_compare.py: inputs input_ids, attention_mask and, where the model
takes them (BERT; not MPNet or EmbeddingGemma), token_type_ids (int64,
[batch, sequence]); output last_hidden_state [batch, sequence, hidden].
Pooling, the Dense modules (EmbeddingGemma's 2_Dense and 3_Dense) and
normalisation stay outside the graph (the compare script does them in numpy,
as sentence-transformers' Pooling, Dense and Normalize modules do).

    /work/venv-ref/bin/python bench/export_onnx.py MODEL_DIR OUT.onnx

torch.onnx.export with the TorchScript exporter (dynamo=False), opset 17;
the result is checked against transformers on one input (max abs error).
"""
import sys

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer


class Encoder(torch.nn.Module):
    """The encoder with positional inputs (BertModel.forward's order differs
    between transformers versions)."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        kw = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        return self.m(input_ids=input_ids, attention_mask=attention_mask, **kw).last_hidden_state


def no_vmap_masks():
    """transformers builds some attention masks with torch.vmap (EmbeddingGemma's
    bidirectional sliding-window mask with padding), which the TorchScript
    exporter cannot trace; the same mask functions broadcast element-wise
    instead."""
    try:
        from transformers import masking_utils as mu
    except ImportError:
        return
    if hasattr(mu, "_vmap_expansion_sdpa") and hasattr(mu, "_non_vmap_expansion_sdpa"):
        def expand(f):
            def go(b, h, q, kv):
                return f(*mu._non_vmap_expansion_sdpa(b, h, q, kv)).expand(b.shape[0], -1, q.shape[0], kv.shape[0])
            return go
        mu._vmap_expansion_sdpa = expand
        if hasattr(mu, "TransformGetItemToIndex"):
            import contextlib
            mu.TransformGetItemToIndex = contextlib.nullcontext


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, out = sys.argv[1], sys.argv[2]
    no_vmap_masks()
    tok = AutoTokenizer.from_pretrained(src)
    model = AutoModel.from_pretrained(src, torch_dtype=torch.float32, attn_implementation="eager").eval()
    enc = tok(["an input to trace the graph with", "a second, longer input to trace the graph with"],
              padding=True, return_tensors="pt")
    names = ["input_ids", "attention_mask"]
    if "token_type_ids" in enc and "token_type_ids" in model.forward.__code__.co_varnames:
        names.append("token_type_ids")
    args = tuple(enc[n] for n in names)
    dyn = {n: {0: "batch", 1: "sequence"} for n in names}
    dyn["last_hidden_state"] = {0: "batch", 1: "sequence"}
    model = Encoder(model).eval()
    with torch.no_grad():
        torch.onnx.export(model, args, out, input_names=names, output_names=["last_hidden_state"],
                          dynamic_axes=dyn, opset_version=17, dynamo=False)
        ref = model(*args).numpy()
    import onnxruntime as ort
    s = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
    got = s.run(None, {n: a.numpy() for n, a in zip(names, args)})[0]
    print(f"{out}: max abs error against transformers {np.abs(got - ref).max():.2e}")


if __name__ == "__main__":
    main()
