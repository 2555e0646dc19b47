#!/usr/bin/env python3
"""Cross-check of tests/data/hf: run each <name>.gguf in llama.cpp (through the
llama-cpp-python bindings) on golden.json's tokens and compare its logits with
golden_logits.bin (transformers).  This checks the converter's GGUFs and the
goldens against each other; it is not needed to regenerate the data.

    CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \\
        /work/venv-ref/bin/pip install --no-deps llama_cpp_python-0.3.36.tar.gz
    /work/venv-ref/bin/python scripts/check_hf_goldens_llamacpp.py [tests/data/hf]

KV cache in F32 and flash attention off, so that F32 GGUFs run in f32 end to
end (llama.cpp still rounds activations to the weight type for F16/BF16 matmuls,
so the half GGUFs differ more).
"""
import glob
import json
import os
import sys

import numpy as np
from llama_cpp import Llama

root = sys.argv[1] if len(sys.argv) > 1 else "tests/data/hf"
worst = 0.0
for gj in sorted(glob.glob(os.path.join(root, "*", "golden.json"))):
    d = os.path.dirname(gj)
    g = json.load(open(gj))
    ref = np.fromfile(os.path.join(d, "golden_logits.bin"), "<f4").reshape(g["shape"])
    kw = dict(model_path=os.path.join(d, g["gguf"]["file"]), logits_all=True, n_ctx=64,
              n_batch=64, n_ubatch=64, n_threads=max(1, os.cpu_count() or 1), verbose=False,
              type_k=0, type_v=0)
    try:
        m = Llama(flash_attn=False, **kw)
    except TypeError:
        m = Llama(**kw)
    m.eval(g["tokens"])
    got = np.array(m.scores[: len(g["tokens"])], dtype=np.float64)
    nm = float(((got - ref) ** 2).sum() / (ref.astype(np.float64) ** 2).sum())
    mad = float(np.abs(got - ref).max())
    am = int((got.argmax(1) == ref.argmax(1)).sum())
    print(f"{g['name']:12s} nmse={nm:.2e} max_abs={mad:.2e} argmax_agree={am}/{len(ref)}")
    if g["weights_dtype"] == "float32":
        worst = max(worst, nm)
    del m
print(f"worst f32 nmse {worst:.2e}")
sys.exit(0 if worst < 1e-5 else 1)
