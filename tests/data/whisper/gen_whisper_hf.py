#!/usr/bin/env python3
"""A random-init Hugging Face Whisper directory and its goldens from
transformers, for tests/models/test_whisper_hf.c.

The model has large-v3-turbo's structure -- 128 mel bins, the 51866-token
vocabulary, more encoder layers than decoder layers (turbo: 32 and 4) -- at
a width and depth that keep the file small (the vocabulary's embedding is
most of it) and the test quick: d_model 32, 2 heads, 2 encoder layers, 1
decoder layer, FFN 128. Its weights are stored
in float16 (as the hub's checkpoints are) with a wider init than the default
(std 0.1), so the logits differ visibly between tokens; transformers computes
the goldens in float32 from the same float16 values.

Written to tests/data/whisper/hf-v3-shape/ (config.json,
generation_config.json, model.safetensors: no tokenizer, the test copies
whisper-base's tokenizer.json beside them) and tests/data/whisper/
whisper_hf_goldens.json:
  - the encoder output at frames [0, 4) and [1000, 1004) for the mel
    mel[c][t] = 0.5 sin(0.013 t (c + 1) + 0.7 c) (float64, then float32;
    test_whisper_hf.c computes it the same way);
  - for the decoder prompt TOKENS: at every position, the logits of IDS and
    the top-5 ids.

usage: /work/venv-ref/bin/python tests/data/whisper/gen_whisper_hf.py
"""
import json
import os

import numpy as np
import torch
from transformers import GenerationConfig, WhisperConfig, WhisperForConditionalGeneration

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "hf-v3-shape")
TOKENS = [50258, 50259, 50360, 50364, 440, 1723, 7125, 295, 264, 1002, 13]
IDS = [0, 13, 220, 264, 440, 1002, 5000, 20000, 50257, 50258, 50359, 50364, 50365, 51865]
SLICES = [(0, 4), (1000, 1004)]


def mel_input(n_mels):
    t = np.arange(3000, dtype=np.float64)[None, :]
    c = np.arange(n_mels, dtype=np.float64)[:, None]
    return (0.5 * np.sin(0.013 * t * (c + 1) + 0.7 * c)).astype(np.float32)


def main():
    torch.manual_seed(0)
    cfg = WhisperConfig(
        vocab_size=51866, num_mel_bins=128, d_model=32, encoder_layers=2, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=128, decoder_ffn_dim=128,
        max_source_positions=1500, max_target_positions=448, init_std=0.1,
        decoder_start_token_id=50258, eos_token_id=50257, pad_token_id=50256, bos_token_id=50257,
        begin_suppress_tokens=[220, 50257])
    model = WhisperForConditionalGeneration(cfg).eval()
    with torch.no_grad():  # the layer norms and biases random too, so a mix-up shows
        for name, p in model.named_parameters():
            if "layer_norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.2 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
    model = model.half().float()  # the float16 values, computed in float32
    os.makedirs(OUT, exist_ok=True)
    model.half().save_pretrained(OUT, safe_serialization=True)
    model.float()
    gen = GenerationConfig(
        decoder_start_token_id=50258, eos_token_id=50257, pad_token_id=50256, bos_token_id=50257,
        begin_suppress_tokens=[220, 50257], suppress_tokens=[1, 2, 7, 8, 9, 10, 14, 25, 26, 27],
        alignment_heads=[[0, 1]], is_multilingual=True,
        lang_to_id={"<|en|>": 50259, "<|de|>": 50261, "<|zh|>": 50260},
        task_to_id={"transcribe": 50360, "translate": 50359}, no_timestamps_token_id=50364)
    gen.save_pretrained(OUT)

    mel = mel_input(128)
    with torch.no_grad():
        enc = model.model.encoder(torch.from_numpy(mel)[None]).last_hidden_state
        logits = model(encoder_outputs=(enc,), decoder_input_ids=torch.tensor([TOKENS])).logits[0]
    enc = enc[0].numpy()
    logits = logits.numpy().astype(np.float64)
    out = {
        "model": "hf-v3-shape (random init, seed 0; gen_whisper_hf.py)",
        "transformers": __import__("transformers").__version__,
        "encoder_slices": SLICES,
        "encoder": [[float(v) for v in enc[s:e].reshape(-1)] for s, e in SLICES],
        "tokens": TOKENS,
        "ids": IDS,
        "logits": [[float(logits[i, j]) for j in IDS] for i in range(len(TOKENS))],
        "top5": [[int(j) for j in np.argsort(-logits[i], kind="stable")[:5]] for i in range(len(TOKENS))],
    }
    with open(os.path.join(HERE, "whisper_hf_goldens.json"), "w") as f:
        json.dump(out, f)
        f.write("\n")


if __name__ == "__main__":
    main()
