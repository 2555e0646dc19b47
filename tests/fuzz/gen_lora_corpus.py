#!/usr/bin/env python3
"""Seeds for fuzz_lora: the committed adapters of tests/data/lora in its input
layout [u8 flags][u16 LE n][n bytes of adapter_config.json][file] (flags bit 0:
a GGUF LoRA). Run from the repository root: python3 tests/fuzz/gen_lora_corpus.py"""
import struct
from pathlib import Path

root = Path(__file__).resolve().parent.parent.parent
data = root / "tests" / "data" / "lora"
out = root / "tests" / "fuzz" / "corpus" / "lora"
out.mkdir(parents=True, exist_ok=True)


def seed(name, flags, cfg: bytes, file: bytes):
    (out / name).write_bytes(bytes([flags]) + struct.pack("<H", len(cfg)) + cfg + file)


seed("llama_gguf.bin", 1, b"", (data / "llama.lora.gguf").read_bytes())
seed("qwen2_gguf.bin", 1, b"", (data / "qwen2.lora.gguf").read_bytes())  # another arch: refused
seed("llama_peft.bin", 0, (data / "llama-peft" / "adapter_config.json").read_bytes(),
     (data / "llama-peft" / "adapter_model.safetensors").read_bytes())
seed("llama_peft_rslora.bin", 0, b'{"r": 4, "lora_alpha": 8, "use_rslora": true}',
     (data / "llama-peft" / "adapter_model.safetensors").read_bytes())
