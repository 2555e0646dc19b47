#!/usr/bin/env python3
"""A Llama-3.2-1B-shaped random decoder, as a Hugging Face directory and as
the GGUF llama.cpp's converter makes of the same weights, for
bench/load_compare.sh (loading time and peak RSS, safetensors vs GGUF).

    python3 bench/make_llama1b.py OUT_DIR OUT.gguf LLAMA_CPP_DIR

OUT_DIR gets config.json + model.safetensors (bfloat16, ~2.5 GB) and a tiny
trained byte-level BPE tokenizer.json (the converter wants one; Candle's
loader does not). LLAMA_CPP_DIR is vendor/llama.cpp of the llama-cpp-python
source package (pip download --no-deps --no-binary :all:
llama-cpp-python==0.3.36). Needs torch, transformers, tokenizers and the
vendored gguf-py. The shape is Llama 3.2 1B's (hidden 2048, 16 layers, 32
heads, 8 KV heads, intermediate 8192, vocab 128256, tied embeddings,
rope_theta 500000) without its llama3 rope scaling, which Candle does not
implement yet. The tokenizer has 384 tokens; the converter pads the GGUF
vocabulary to the model's 128256 with [PAD<i>] entries.
"""
import json
import subprocess
import sys
from pathlib import Path

CONVERT = r"""
import sys
sys.path.insert(0, sys.argv[1])
import convert_hf_to_gguf
import conversion.base
# a tiny trained byte-level BPE: its pre-tokenizer hash is unknown to the
# converter, so name one (the weights, not the vocabulary, are measured)
conversion.base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "llama-bpe"
sys.argv = ["convert_hf_to_gguf.py"] + sys.argv[2:]
convert_hf_to_gguf.main()
"""


def make_tokenizer(d: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    specials = ["<|begin_of_text|>", "<|end_of_text|>"]
    trainer = trainers.BpeTrainer(vocab_size=384, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    text = ["Once upon a time there was a little girl who loved to play outside.",
            "The quick brown fox jumps over the lazy dog. 0123456789"] * 50
    tok.train_from_iterator(text, trainer)
    tok.save(str(d / "tokenizer.json"))
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": specials[0],
           "eos_token": specials[1], "model_max_length": 131072}
    (d / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return tok.token_to_id(specials[0]), tok.token_to_id(specials[1])


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    out, gguf_out, llama_cpp = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    bos, eos = make_tokenizer(out)
    cfg = LlamaConfig(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32,
                      num_key_value_heads=8, head_dim=64, intermediate_size=8192,
                      vocab_size=128256, tie_word_embeddings=True, rope_theta=500000.0,
                      max_position_embeddings=131072, rms_norm_eps=1e-5, hidden_act="silu",
                      bos_token_id=bos, eos_token_id=eos, torch_dtype="bfloat16")
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)  # initialised in bf16: no 5 GB f32 copy
    model = LlamaForCausalLM(cfg)
    model.save_pretrained(out, safe_serialization=True)
    del model
    r = subprocess.run([sys.executable, "-c", CONVERT, str(llama_cpp), str(out),
                        "--outtype", "bf16", "--outfile", str(gguf_out)])
    if r.returncode:
        sys.exit("convert_hf_to_gguf failed")


if __name__ == "__main__":
    main()
