#!/usr/bin/env python3
"""Reference data for LoRA adapters (issue 21 part 5): tests/data/lora/.

The base models are the tiny random Hugging Face folders the decoder tests
already commit (tests/data/hf/llama: Llama-3.2-1B shaped, tied embeddings,
GQA, llama3 RoPE scaling; tests/data/hf/qwen2: Qwen2 shaped, q/k/v biases),
so no base weights are duplicated here. For each, this script

  * makes a random PEFT LoRA on q/k/v/o/gate/up/down (peft.LoraConfig with
    random A and B instead of PEFT's zero B, so the adapter changes the
    logits), saved with save_pretrained as <name>-peft/ (adapter_config.json,
    adapter_model.safetensors);
  * writes golden logits of transformers + peft for the base golden's 16
    tokens at every position, with the adapter at scale 1.0 and 0.5
    (<name>_s1.0_logits.bin, <name>_s0.5_logits.bin: raw little-endian f32
    [16, n_vocab]; lora.json lists tokens, shapes and options);
  * writes the same adapter as a llama.cpp GGUF LoRA, <name>.lora.gguf, laid
    out as convert_lora_to_gguf.py does: general.type "adapter",
    adapter.type "lora", adapter.lora.alpha, "<base>.lora_a" [r, in] and
    ".lora_b" [out, r] (numpy order; GGUF's ne order is the reverse), and for
    Llama the q/k lora_b rows permuted per head as its converter permutes
    the base q/k weights (LlamaModel.permute).

llama: r 4, alpha 8, f32 GGUF tensors. phi3 (tests/data/hf/phi3): r 4, alpha
8 on the fused qkv_proj and gate_up_proj (llama.cpp's attn_qkv, ffn_up), o and
down. qwen2: r 8, alpha 4, use_rslora (PEFT
scale alpha / sqrt(r)); llama.cpp's converter ignores use_rslora and scales
by alpha / r, so the GGUF written here carries alpha * sqrt(r) to mean the
same; its tensors are f16 (the goldens stay the f32 adapter's: the rounding
costs about 1e-7 NMSE).

Also stories260k.lora.gguf: a random GGUF LoRA (r 4, alpha 4, f16) for
../shared/data/models/stories260K.gguf (not committed here; skipped when
absent), read with the gguf package for its shapes, for the server and CLI
tests (tests/server/test_lora.sh): no goldens, the tests compare Candle's
outputs with and without it and between the CLI and the server.

Run from the repository root with the reference venv (torch, transformers,
peft, and the gguf package of llama-cpp-python 0.3.36's vendor/llama.cpp/gguf-py):

    /work/venv-ref/bin/python scripts/gen_lora_goldens.py
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "lora"
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# Phi-3 keeps q/k/v and gate/up fused (qkv_proj, gate_up_proj): the adapter
# adapts the fused products, as llama.cpp's attn_qkv / ffn_up
PHI3_TARGETS = ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]
LORA_STD = 0.15

# name -> (base folder, seed, r, alpha, use_rslora, GGUF dtype)
ADAPTERS = {
    "llama": ("llama", 21, 4, 8.0, False, np.float32),
    "qwen2": ("qwen2", 22, 8, 4.0, True, np.float16),
    "phi3": ("phi3", 23, 4, 8.0, False, np.float32),
}

GGUF_NAMES = {
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down", "self_attn.qkv_proj": "attn_qkv", "mlp.gate_up_proj": "ffn_up",
}


def llama_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """convert_hf_to_gguf.py's LlamaModel.permute on the rows of w."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def logits_of(model, tokens):
    with torch.no_grad():
        return model(torch.tensor([tokens])).logits[0].float().numpy().astype("<f4")


def set_lora_scale(model, factor: float, base_scaling: dict):
    from peft.tuners.lora import LoraLayer
    for name, mod in model.named_modules():
        if isinstance(mod, LoraLayer):
            mod.scaling["default"] = base_scaling[name] * factor


def write_gguf(path: Path, arch: str, cfg, alpha: float, pairs, dtype):
    import gguf
    w = gguf.GGUFWriter(str(path), arch)
    w.add_type(gguf.GGUFType.ADAPTER)
    w.add_string(gguf.Keys.Adapter.TYPE, "lora")
    w.add_float32(gguf.Keys.Adapter.LORA_ALPHA, alpha)
    for name, a, b in pairs:
        w.add_tensor(name + ".lora_a", a.astype(dtype))
        w.add_tensor(name + ".lora_b", b.astype(dtype))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def make(name: str):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base_dir, seed, r, alpha, rslora, gdt = ADAPTERS[name]
    base_path = ROOT / "tests" / "data" / "hf" / base_dir
    golden = json.loads((base_path / "golden.json").read_text())
    tokens = golden["tokens"]
    base = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch.float32,
                                                attn_implementation="eager")
    base.eval()
    cfg = base.config
    base_logits = logits_of(base, tokens)
    ref = np.fromfile(base_path / "golden_logits.bin", dtype="<f4").reshape(base_logits.shape)
    base_err = float(np.mean((base_logits - ref) ** 2) / np.mean(ref ** 2))
    assert base_err < 1e-10, f"{name}: base model does not reproduce its golden ({base_err})"

    targets = PHI3_TARGETS if cfg.model_type == "phi3" else TARGETS
    lc = LoraConfig(r=r, lora_alpha=alpha, target_modules=targets, lora_dropout=0.0,
                    bias="none", use_rslora=rslora, task_type="CAUSAL_LM")
    model = get_peft_model(base, lc)
    torch.manual_seed(seed)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "lora_A" in pname or "lora_B" in pname:
                p.copy_(torch.randn_like(p) * LORA_STD)
    model.eval()
    peft_dir = OUT / f"{name}-peft"
    if peft_dir.exists():
        shutil.rmtree(peft_dir)
    model.save_pretrained(peft_dir)
    (peft_dir / "README.md").unlink(missing_ok=True)  # PEFT's model-card template

    from peft.tuners.lora import LoraLayer
    scaling = {n: m.scaling["default"] for n, m in model.named_modules() if isinstance(m, LoraLayer)}
    files = {}
    for s in (1.0, 0.5):
        set_lora_scale(model, s, scaling)
        lg = logits_of(model, tokens)
        f = f"{name}_s{s}_logits.bin"
        lg.tofile(OUT / f)
        files[str(s)] = {"file": f, "nmse_vs_base": float(np.mean((lg - base_logits) ** 2) /
                                                          np.mean(base_logits ** 2))}
    set_lora_scale(model, 1.0, scaling)

    # the GGUF LoRA, from the saved tensors
    from safetensors.numpy import load_file
    st = load_file(peft_dir / "adapter_model.safetensors")
    pairs = []
    n_head, n_kv = cfg.num_attention_heads, cfg.num_key_value_heads
    for il in range(cfg.num_hidden_layers):
        for hf, gg in GGUF_NAMES.items():
            pre = f"base_model.model.model.layers.{il}.{hf}"
            if pre + ".lora_A.weight" not in st:
                continue
            a = st[pre + ".lora_A.weight"]
            b = st[pre + ".lora_B.weight"]
            if cfg.model_type == "llama" and gg in ("attn_q", "attn_k"):
                b = llama_permute(b, n_head if gg == "attn_q" else n_kv)
            pairs.append((f"blk.{il}.{gg}.weight", a, b))
    g_alpha = alpha * math.sqrt(r) if rslora else alpha
    write_gguf(OUT / f"{name}.lora.gguf", cfg.model_type, cfg, g_alpha, pairs, gdt)

    return {
        "base": f"tests/data/hf/{base_dir}", "tokens": tokens, "n_vocab": int(base_logits.shape[1]),
        "shape": list(base_logits.shape), "r": r, "lora_alpha": alpha, "use_rslora": rslora,
        "target_modules": targets, "lora_std": LORA_STD, "seed": seed,
        "gguf": {"file": f"{name}.lora.gguf", "adapter.lora.alpha": g_alpha,
                 "dtype": np.dtype(gdt).name},
        "scales": files,
    }


STORIES = ROOT.parent / "shared" / "data" / "models" / "stories260K.gguf"


def make_stories(path: Path = STORIES):
    import gguf
    if not path.exists():
        print(f"skip stories260k: {path} absent")
        return None
    r = gguf.GGUFReader(str(path))
    rng = np.random.default_rng(260)
    pairs = []
    for t in r.tensors:
        parts = t.name.split(".")
        if parts[0] != "blk" or parts[2] not in {v for v in GGUF_NAMES.values()}:
            continue
        n_in, n_out = (int(x) for x in t.shape)  # GGUF ne order: [in, out]
        a = rng.standard_normal((4, n_in)) * 0.15
        b = rng.standard_normal((n_out, 4)) * 0.15
        pairs.append((t.name, a, b))
    write_gguf(OUT / "stories260k.lora.gguf", "llama", None, 4.0, pairs, np.float16)
    return {"file": "stories260k.lora.gguf", "base": "../shared/data/models/stories260K.gguf",
            "r": 4, "adapter.lora.alpha": 4.0, "std": 0.15, "pairs": len(pairs), "dtype": "float16"}


def main():
    import peft
    import transformers
    OUT.mkdir(parents=True, exist_ok=True)
    info = {"generator": "scripts/gen_lora_goldens.py", "torch": torch.__version__,
            "transformers": transformers.__version__, "peft": peft.__version__, "adapters": {}}
    for name in ADAPTERS:
        info["adapters"][name] = make(name)
        print(name, json.dumps(info["adapters"][name]["scales"]))
    info["stories260k"] = make_stories()
    (OUT / "lora.json").write_text(json.dumps(info, indent=1) + "\n")


if __name__ == "__main__":
    main()
