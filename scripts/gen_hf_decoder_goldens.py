#!/usr/bin/env python3
"""Reference data for loading decoder LLMs from Hugging Face directories (issue 18 part 5).

For each family (llama, qwen2, qwen3, gemma2, gemma3 text, phi3) this builds a
randomly initialised, tiny model with `transformers` from a config shaped like
a real model of the family, saves it as a Hugging Face directory (config.json,
model.safetensors, a small tokenizer) under tests/data/hf/<name>/, computes the
golden logits with transformers (eager attention, f32), and converts the
directory to GGUF with llama.cpp's own converter (convert_hf_to_gguf.py).

Run (from the repository root, with the reference venv of
scripts/requirements-ref.txt):

    python3 -m venv /work/venv-ref
    /work/venv-ref/bin/pip install -r scripts/requirements-ref.txt
    pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d /tmp/lcp
    tar xzf /tmp/lcp/llama_cpp_python-0.3.36.tar.gz -C /tmp/lcp
    /work/venv-ref/bin/pip install /tmp/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp/gguf-py
    /work/venv-ref/bin/python scripts/gen_hf_decoder_goldens.py \
        --llama-cpp /tmp/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp

Options: --out DIR (default tests/data/hf), --only NAME[,NAME...].

What each folder holds:
  config.json, generation_config.json, model.safetensors   save_pretrained output
  tokenizer.json + tokenizer_config.json    (byte-level BPE folders), or
  tokenizer.model + tokenizer_config.json   (SentencePiece folders)
  golden_logits.bin   raw little-endian f32, [16, n_vocab], row t = logits at position t
  golden.json         tokens, shape, versions, sanity values, GGUF summary
  <name>.gguf         llama.cpp's convert_hf_to_gguf.py output of this folder

Conventions and choices (read before relying on the data):
  * Weights: every matrix ~ N(0, initializer_range = 0.2) (transformers' 0.02
    gives near-uniform logits); every norm weight = its default (1 for llama-
    style RMSNorm, 0 for Gemma's (1+w) RMSNorm) + N(0, 0.1), every bias
    ~ N(0, 0.2), so that norms and biases all matter.  torch.manual_seed per model.
  * Golden logits are computed from the model *reloaded from the saved folder*
    (from_pretrained, dtype=float32, attn_implementation="eager"), so the folder
    and the golden agree by construction.  For the -bf16/-f16 folders the
    half weights are upcast to f32 on load: the golden is the f32 model whose
    weights were rounded to bf16/f16, which is what Candle computes.
  * config.json style: the f32 folders are rewritten to the legacy layout the
    Hub's real configs use (rope_theta / rope_scaling / rope_local_base_freq at
    top level, torch_dtype); the -bf16/-f16 folders keep transformers 5's own
    layout (rope_parameters, dtype).  A loader must accept both.  The script
    checks that transformers reloads each rewritten config to the same
    rope_parameters.
  * Tokenizers: tiny, trained here on a fixed English text (see CORPUS).
    - "bpe": byte-level BPE (tokenizers library, GPT-2 ByteLevel pre-tokenizer),
      for llama (Llama 3 style), qwen2, qwen3.  llama.cpp's converter identifies
      BPE pre-tokenizers by a hash of the tokenization of a fixed text and
      raises for unknown ones; the converter is run with
      TextModel.get_vocab_base_pre monkeypatched to return "gpt-2" (true: the
      pre-tokenizer is GPT-2's ByteLevel regex).  The converter file is not edited.
    - "spm": SentencePiece BPE with byte fallback (sentencepiece trainer,
      Llama-2 settings: unk=0, <s>=1, </s>=2), for llama2, gemma2, gemma3,
      phi3, whose converter paths read tokenizer.model (gemma2 and phi3 have
      no other path).  These folders carry no tokenizer.json.
  * The converter runs with --outtype f32 for the f32 folders and with the
    matching half type for -bf16 (--outtype bf16) and -f16 (--outtype f16), so
    the GGUF holds the same half values as the safetensors (the converter keeps
    1-D tensors (norms) in F32 in every case).
  * golden.json "sensitivity": NMSE between the golden and the logits of the
    same weights with one feature switched off (sliding window, softcapping),
    to show how strongly the test can see that feature.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

N_TOKENS = 16
INIT_STD = 0.2
NORM_JITTER = 0.1

CORPUS = """\
Once upon a time there was a little girl named Lily. She loved to play outside in the park.
One day she saw a big red ball under a tree, and she ran to get it. Her mother said: "Be careful!"
The quick brown fox jumps over the lazy dog. 0123456789 3.14159 2024-05-17 12:30 100% $42.
def forward(self, x): return self.norm(x + self.attn(x)) if x is not None else None
The model reads a config file, loads the weights and computes the logits for every position.
A tokenizer turns text into numbers; a decoder turns numbers back into text. Tests compare them.
It was a bright cold day in April, and the clocks were striking thirteen.
In the beginning the Universe was created. This has made a lot of people very angry.
All happy families are alike; each unhappy family is unhappy in its own way.
Call me Ishmael. Some years ago, never mind how long precisely, I thought I would sail about.
The sun rose over the hills and the birds began to sing; the children woke and ran to the window.
Numbers: one two three four five six seven eight nine ten eleven twelve. Colours: red green blue.
"""


def corpus_lines():
    lines = [l for l in CORPUS.splitlines() if l.strip()]
    # a few deterministic variations so the trainers see repeated pairs
    out = []
    for i in range(8):
        for j, l in enumerate(lines):
            out.append(l if (i + j) % 2 == 0 else l.lower())
    return out


# ----------------------------------------------------------------------------- tokenizers

BPE_VOCAB = 384
SPM_VOCAB = 400


def make_bpe_tokenizer(d: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    # <|endoftext|> is Qwen's eos/pad: transformers 5 loads qwen2/qwen3 folders with
    # Qwen2Tokenizer whatever tokenizer_class says, and that class adds it when absent
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|endoftext|>"]
    trainer = trainers.BpeTrainer(vocab_size=BPE_VOCAB, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus_lines(), trainer)
    tok.save(str(d / "tokenizer.json"))
    added = {}
    for s in specials:
        added[str(tok.token_to_id(s))] = {"content": s, "lstrip": False, "normalized": False,
                                          "rstrip": False, "single_word": False, "special": True}
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": specials[0],
           "eos_token": specials[1], "clean_up_tokenization_spaces": False,
           "model_max_length": 256, "added_tokens_decoder": added}
    (d / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return {"kind": "bpe", "n_vocab": tok.get_vocab_size(), "bos": tok.token_to_id(specials[0]),
            "eos": tok.token_to_id(specials[1])}


def make_spm_tokenizer(d: Path, tokenizer_class: str, added=()):
    import sentencepiece as spm

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus_lines()), model_writer=buf, vocab_size=SPM_VOCAB,
        model_type="bpe", byte_fallback=True, character_coverage=1.0, split_digits=True,
        normalization_rule_name="identity", add_dummy_prefix=True, remove_extra_whitespaces=False,
        allow_whitespace_only_pieces=True, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        num_threads=1, minloglevel=2)
    (d / "tokenizer.model").write_bytes(buf.getvalue())
    sp = spm.SentencePieceProcessor(model_proto=buf.getvalue())
    n = sp.get_piece_size()
    cfg = {"tokenizer_class": tokenizer_class, "bos_token": "<s>",
           "eos_token": added[0] if added else "</s>",
           "unk_token": "<unk>", "add_bos_token": True, "add_eos_token": False,
           "legacy": False, "model_max_length": 256}
    if added:  # Phi-3 style: added tokens after the SentencePiece pieces
        cfg["added_tokens_decoder"] = {
            str(n + i): {"content": t, "lstrip": False, "normalized": False, "rstrip": True,
                         "single_word": False, "special": True} for i, t in enumerate(added)}
        (d / "added_tokens.json").write_text(
            json.dumps({t: n + i for i, t in enumerate(added)}, indent=2) + "\n")
    (d / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return {"kind": "spm", "n_vocab": n + len(added), "bos": 1, "eos": n if added else 2}


# ----------------------------------------------------------------------------- models

def rope(theta, **extra):
    return {"rope_type": extra.pop("rope_type", "default"), "rope_theta": float(theta), **extra}


COMMON = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
              max_position_embeddings=256, initializer_range=INIT_STD)

# name -> (model_type, tokenizer, seed, config kwargs, what it imitates, sensitivity variants)
MODELS = {
    "llama": ("llama", "bpe", 1, dict(
        COMMON, head_dim=16, num_hidden_layers=2, hidden_act="silu", rms_norm_eps=1e-5,
        tie_word_embeddings=True, attention_bias=False, mlp_bias=False,
        rope_parameters=rope(500000.0, rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                             high_freq_factor=4.0, original_max_position_embeddings=32)),
        "Llama-3.2-1B (tied embeddings, GQA, rope_theta 5e5, llama3 rope scaling; the real "
        "factor 32 / original context 8192 are scaled down to 8 / 32 so that the scaling "
        "changes the logits of a 16-token input)",
        {"no_llama3_rope_scaling": dict(rope_parameters=rope(500000.0))}),
    "llama2": ("llama", "spm", 2, dict(
        COMMON, head_dim=16, num_hidden_layers=2, hidden_act="silu", rms_norm_eps=1e-5,
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
        rope_parameters=rope(10000.0)),
        "Llama-2 / SmolLM style (untied lm_head, rope_theta 1e4, SentencePiece vocab); GQA kept", {}),
    "qwen2": ("qwen2", "bpe", 3, dict(
        COMMON, num_hidden_layers=2, hidden_act="silu", rms_norm_eps=1e-6,
        tie_word_embeddings=True, use_sliding_window=False, sliding_window=256, max_window_layers=2,
        rope_parameters=rope(1000000.0)),
        "Qwen2.5-0.5B (q/k/v biases, tied, rope_theta 1e6, use_sliding_window false)", {}),
    "qwen3": ("qwen3", "bpe", 4, dict(
        COMMON, head_dim=32, num_hidden_layers=2, hidden_act="silu", rms_norm_eps=1e-6,
        tie_word_embeddings=True, attention_bias=False, use_sliding_window=False,
        sliding_window=None, max_window_layers=2, rope_parameters=rope(1000000.0)),
        "Qwen3-0.6B (q_norm/k_norm, explicit head_dim 32 != hidden/heads 16, tied)", {}),
    "gemma2": ("gemma2", "spm", 5, dict(
        COMMON, head_dim=32, num_hidden_layers=2, hidden_activation="gelu_pytorch_tanh",
        rms_norm_eps=1e-6, tie_word_embeddings=True, attention_bias=False,
        query_pre_attn_scalar=32, sliding_window=8, attn_logit_softcapping=50.0,
        final_logit_softcapping=30.0, rope_parameters=rope(10000.0), pad_token_id=None,
        bos_token_id=1, eos_token_id=2),
        "gemma-2-2b (softcaps 50/30, sliding window on even layers, head_dim != hidden/heads, "
        "query_pre_attn_scalar = head_dim as in 2b/9b, (1+w) norms, pre/post norms)",
        {"no_sliding_window": dict(sliding_window=4096),
         "no_attn_softcap": dict(attn_logit_softcapping=None),
         "no_final_softcap": dict(final_logit_softcapping=None)}),
    "gemma3": ("gemma3_text", "spm", 6, dict(
        COMMON, num_key_value_heads=1, head_dim=32, num_hidden_layers=6,
        hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6, tie_word_embeddings=True,
        attention_bias=False, query_pre_attn_scalar=32, sliding_window=8,
        final_logit_softcapping=None, attn_logit_softcapping=None,
        use_bidirectional_attention=False,
        layer_types=["sliding_attention"] * 5 + ["full_attention"],
        rope_parameters={"full_attention": rope(1000000.0), "sliding_attention": rope(10000.0)},
        pad_token_id=None, bos_token_id=1, eos_token_id=2),
        "gemma-3-270m (Gemma3ForCausalLM, 5 sliding : 1 global, 1 kv head, q/k norms, rope 1e6 "
        "global / 1e4 local, head_dim != hidden/heads, (1+w) norms)",
        {"no_sliding_window": dict(sliding_window=4096),
         "local_rope_theta_as_global": dict(rope_parameters={"full_attention": rope(1000000.0),
                                                             "sliding_attention": rope(1000000.0)})}),
    "phi3": ("phi3", "spm", 7, dict(
        COMMON, num_hidden_layers=2, hidden_act="silu", rms_norm_eps=1e-5,
        tie_word_embeddings=False, original_max_position_embeddings=256, sliding_window=127,
        rope_parameters=rope(10000.0), pad_token_id=None),
        "Phi-3-mini-4k (fused qkv_proj and gate_up_proj, untied, vocab_size > tokenizer size, "
        "sliding_window 127 of 256 as the real 2047 of 4096; GQA 4:2 as Phi-3-medium rather "
        "than mini's MHA)",
        # transformers applies Phi-3's sliding window; llama.cpp 0.3.36 deliberately ignores
        # it (src/models/phi3.cpp: "Phi SWA is currently disabled"), so a window that a
        # 16-token input crosses would make the two references disagree (NMSE 0.5 at 8)
        {"no_sliding_window": dict(sliding_window=None)}),
}
HALF_COPIES = {"llama-bf16": ("llama", torch.bfloat16, "bf16"),
               "llama-f16": ("llama", torch.float16, "f16")}
# Phi-3's vocabulary: 32000 SentencePiece pieces, added tokens from 32000
# (<|endoftext|> = eos, <|end|>, ...), and config vocab_size 32064 > tokenizer size,
# so the embedding has unused rows (the converter names them [PAD<i>]).  llama.cpp
# refuses a model named phi3 whose vocabulary lacks <|endoftext|>.
SPM_ADDED = {"phi3": ("<|endoftext|>", "<|end|>")}
VOCAB_SIZE_PAD = {"phi3": 8}  # config vocab_size = tokenizer size + this
SPM_CLASS = {"llama2": "LlamaTokenizer", "gemma2": "GemmaTokenizer",
             "gemma3": "GemmaTokenizer", "phi3": "LlamaTokenizer"}


# Per-model init changes (substring of the parameter name -> std multiplier, or for
# "norm" parameters -> offset added).  gemma2: with the common init, attention scores
# (std ~3) and logits (std ~1.6) sit far below the real softcaps (50, 30), so
# softcapping would change the logits by NMSE ~1e-6 and a test could not see it;
# larger q/k and a larger final norm put both softcaps to work.
INIT_SCALE = {"gemma2": {"q_proj": 3.0, "k_proj": 3.0, "model.norm.weight": 7.0}}


def randomize_(model, seed, scale=None):
    scale = scale or {}
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            mult = 1.0
            for sub, v in scale.items():
                if sub in name and p.dim() >= 2:
                    mult = v
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=g) * INIT_STD * mult)
            elif "norm" in name:
                p.add_(torch.randn(p.shape, generator=g) * NORM_JITTER + scale.get(name, 0.0))
            else:  # biases
                p.copy_(torch.randn(p.shape, generator=g) * INIT_STD)


def legacy_config(d: Path):
    """Rewrite config.json in the layout of the Hub's real configs (see module doc)."""
    p = d / "config.json"
    c = json.loads(p.read_text())
    rp = c.pop("rope_parameters", None)
    if rp is not None:
        if "full_attention" in rp:
            full = dict(rp["full_attention"])
            c["rope_theta"] = full.pop("rope_theta")
            c["rope_local_base_freq"] = rp["sliding_attention"]["rope_theta"]
        else:
            full = dict(rp)
            c["rope_theta"] = full.pop("rope_theta")
        if full.get("partial_rotary_factor") == 1.0:
            full.pop("partial_rotary_factor")
        c["rope_scaling"] = None if full.get("rope_type", "default") == "default" else full
    if "dtype" in c:
        c["torch_dtype"] = c.pop("dtype")
    if "_sliding_window_pattern" in c:  # gemma3: the Hub's configs spell it without "_"
        c["sliding_window_pattern"] = c.pop("_sliding_window_pattern")
    p.write_text(json.dumps(c, indent=2, sort_keys=True) + "\n")


def save_random_bpe_model(d: Path, model_type: str, seed: int, kw: dict, name: str) -> int:
    """A random-init model of model_type with the BPE test tokenizer, saved in d
    (emptied first) with a legacy config.json; returns the vocabulary size."""
    from transformers import AutoConfig, AutoModelForCausalLM

    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    tinfo = make_bpe_tokenizer(d)
    V = tinfo["n_vocab"]
    kw = copy.deepcopy(kw)
    kw.setdefault("bos_token_id", tinfo["bos"])
    kw.setdefault("eos_token_id", tinfo["eos"])
    cfg = AutoConfig.for_model(model_type, vocab_size=V, **kw)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, attn_implementation="eager")
    randomize_(model, seed)
    model.save_pretrained(d, safe_serialization=True)
    want = copy.deepcopy(AutoConfig.from_pretrained(d).rope_parameters)
    legacy_config(d)
    assert AutoConfig.from_pretrained(d).rope_parameters == want, f"{name}: legacy config"
    return V


def load(d: Path, dtype, **overrides):
    from transformers import AutoModelForCausalLM
    m = AutoModelForCausalLM.from_pretrained(d, dtype=dtype, attn_implementation="eager", **overrides)
    return m.eval()


def logits_of(model, tokens):
    ids = torch.tensor([tokens], dtype=torch.long)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)
    return out.logits[0]


def nmse(a, b):
    a = np.asarray(a, np.float64); b = np.asarray(b, np.float64)
    return float(((a - b) ** 2).sum() / (b ** 2).sum())


# ----------------------------------------------------------------------------- GGUF

CONVERT_WRAPPER = r"""
import sys
llama_cpp, bpe = sys.argv[1], sys.argv[2] == "1"
sys.path.insert(0, llama_cpp)
import convert_hf_to_gguf
import conversion.base
if bpe:
    # tiny trained byte-level BPE with the GPT-2 ByteLevel pre-tokenizer: its chktxt
    # hash is unknown to the converter, so name the pre-tokenizer it really is
    conversion.base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
sys.argv = ["convert_hf_to_gguf.py"] + sys.argv[3:]
convert_hf_to_gguf.main()
"""


def convert(llama_cpp: Path, d: Path, out: Path, outtype: str, bpe: bool):
    cmd = [sys.executable, "-c", CONVERT_WRAPPER, str(llama_cpp), "1" if bpe else "0",
           str(d), "--outtype", outtype, "--outfile", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        raise SystemExit(f"convert_hf_to_gguf failed for {d}")


def gguf_summary(path: Path):
    import gguf
    r = gguf.GGUFReader(str(path))
    meta = {}
    for k, f in r.fields.items():
        if k.startswith("GGUF."):
            continue
        t = f.types[0] if f.types else None
        if t == gguf.GGUFValueType.ARRAY:
            n = len(f.data)
            meta[k] = f"[array of {n}]"
        else:
            v = f.contents()
            meta[k] = v
    tensors = [[t.name, t.tensor_type.name, [int(x) for x in t.shape]] for t in r.tensors]
    return r, meta, tensors


def gguf_f32(t):
    import gguf
    a = np.asarray(t.data)
    if t.tensor_type == gguf.GGMLQuantizationType.BF16:
        a = (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    elif t.tensor_type == gguf.GGMLQuantizationType.F16:
        a = a.view(np.float16).astype(np.float32)
    return a.reshape([int(x) for x in reversed(t.shape)])


def check_gguf(r, name, hf_sd, fam):
    """Spot checks of the converter's conventions against the HF weights."""
    tens = {t.name: t for t in r.tensors}
    emb = gguf_f32(tens["token_embd.weight"])
    ref = hf_sd["model.embed_tokens.weight"].float().numpy()
    assert emb.shape == ref.shape and np.array_equal(emb, ref), f"{name}: token_embd differs"
    onorm = gguf_f32(tens["output_norm.weight"])
    rnorm = hf_sd["model.norm.weight"].float().numpy()
    shift = 1.0 if fam.startswith("gemma") else 0.0
    assert np.allclose(onorm, rnorm + shift, atol=1e-6), f"{name}: output_norm convention"
    if fam.startswith("llama"):  # llama.cpp's q/k row permutation (LlamaModel.permute)
        def permute(w, n_head):
            return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
        hq = hf_sd["model.layers.0.self_attn.q_proj.weight"].float().numpy()
        hk = hf_sd["model.layers.0.self_attn.k_proj.weight"].float().numpy()
        assert np.array_equal(gguf_f32(tens["blk.0.attn_q.weight"]), permute(hq, 4)), f"{name}: q permutation"
        assert np.array_equal(gguf_f32(tens["blk.0.attn_k.weight"]), permute(hk, 2)), f"{name}: k permutation"
    if fam == "gemma3":
        qn = hf_sd["model.layers.0.self_attn.q_norm.weight"].float().numpy()
        assert np.allclose(gguf_f32(tens["blk.0.attn_q_norm.weight"]), qn + 1, atol=1e-6), f"{name}: q_norm"


# ----------------------------------------------------------------------------- main

def versions():
    import transformers, tokenizers, safetensors, sentencepiece, gguf  # noqa: E401
    import importlib.metadata as md
    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__, "safetensors": safetensors.__version__,
            "sentencepiece": sentencepiece.__version__, "numpy": np.__version__,
            "gguf": md.version("gguf"), "llama_cpp_converter": "llama-cpp-python==0.3.36 sdist, "
            "vendor/llama.cpp/convert_hf_to_gguf.py"}


def build(name, out_root: Path, llama_cpp: Path, vers):
    from transformers import AutoConfig, AutoModelForCausalLM

    half = HALF_COPIES.get(name)
    base = half[0] if half else name
    model_type, tk, seed, kw, imitates, variants = MODELS[base]
    d = out_root / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)

    tinfo = (make_bpe_tokenizer(d) if tk == "bpe" else
             make_spm_tokenizer(d, SPM_CLASS[base], SPM_ADDED.get(base, ())))
    n_tok = tinfo["n_vocab"]
    V = n_tok + VOCAB_SIZE_PAD.get(base, 0)
    kw = copy.deepcopy(kw)
    kw.setdefault("bos_token_id", tinfo["bos"])
    kw.setdefault("eos_token_id", tinfo["eos"])
    cfg = AutoConfig.for_model(model_type, vocab_size=V, **kw)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, attn_implementation="eager")
    randomize_(model, seed, INIT_SCALE.get(base))
    if half:
        model = model.to(half[1])
    model.save_pretrained(d, safe_serialization=True)
    if not half:
        want = copy.deepcopy(AutoConfig.from_pretrained(d).rope_parameters)
        legacy_config(d)
        got = AutoConfig.from_pretrained(d).rope_parameters
        assert got == want, f"{name}: legacy config reloads differently: {got} vs {want}"

    if tk == "bpe":  # the folder's tokenizer loads through transformers as the converter does
        from transformers import AutoTokenizer
        from tokenizers import Tokenizer
        s = "Once upon a time, 3.14 apples!"
        a = AutoTokenizer.from_pretrained(d).encode(s, add_special_tokens=False)
        b = Tokenizer.from_file(str(d / "tokenizer.json")).encode(s, add_special_tokens=False).ids
        assert a == b, f"{name}: AutoTokenizer {a} != tokenizers {b}"
        n_auto = len(AutoTokenizer.from_pretrained(d))
        assert n_auto == V, f"{name}: AutoTokenizer has {n_auto} tokens, tokenizer.json {V}"

    rng = np.random.default_rng(1000 + seed)
    tokens = [int(x) for x in rng.integers(0, n_tok, N_TOKENS)]

    m32 = load(d, torch.float32)
    lg = logits_of(m32, tokens).float().numpy()
    assert lg.shape == (N_TOKENS, V)
    m64 = load(d, torch.float64)
    lg64 = logits_of(m64, tokens).numpy()
    sd = {k: v.detach().clone() for k, v in m32.state_dict().items()}
    del m64
    sens = {}
    for vname, ov in variants.items():
        if half:
            break
        mv = load(d, torch.float32, **copy.deepcopy(ov))
        sens[vname] = nmse(logits_of(mv, tokens).float().numpy(), lg)
    std = float(lg.std())
    maxdiff64 = float(np.abs(lg.astype(np.float64) - lg64).max())
    assert 0.3 < std < 20, f"{name}: logits std {std} not O(1)"
    lg.astype("<f4").tofile(d / "golden_logits.bin")

    outtype = half[2] if half else "f32"
    gpath = d / f"{name}.gguf"
    convert(llama_cpp, d, gpath, outtype, tk == "bpe")
    r, meta, tensors = gguf_summary(gpath)
    check_gguf(r, name, sd, base)

    golden = {
        "name": name, "imitates": imitates, "model_type": model_type,
        "architecture": json.loads((d / "config.json").read_text())["architectures"][0],
        "tokens": tokens, "n_vocab": V, "n_tokenizer_tokens": n_tok, "shape": [N_TOKENS, V], "dtype": "f32 little-endian",
        "weights_dtype": str(half[1]).replace("torch.", "") if half else "float32",
        "tokenizer": tinfo["kind"], "seed": seed,
        "transformers": vers["transformers"], "torch": vers["torch"], "versions": vers,
        "attention_mask": "all ones", "attn_implementation": "eager",
        "logits_std": std, "max_abs_diff_f32_vs_f64": maxdiff64,
        "nmse_f32_vs_f64": nmse(lg, lg64),
        "sensitivity_nmse_vs_golden": sens,
        "gguf": {"file": gpath.name, "converter_outtype": outtype,
                 "made_by": "llama.cpp convert_hf_to_gguf.py" +
                            (" (get_vocab_base_pre monkeypatched to 'gpt-2')" if tk == "bpe" else ""),
                 "metadata": meta, "tensors": tensors},
        "note": ("logits of transformers (eager, f32) for `tokens` at all positions, model "
                 "reloaded from this folder" + ("; weights stored in half precision, logits of "
                 "the f32 model with those rounded weights" if half else "")),
    }
    (d / "golden.json").write_text(json.dumps(golden, indent=1, default=str) + "\n")
    size = sum(f.stat().st_size for f in d.iterdir())
    print(f"{name:12s} V={V} std={std:.3f} maxdiff_f64={maxdiff64:.2e} "
          f"sens={ {k: f'{v:.1e}' for k, v in sens.items()} } gguf_tensors={len(tensors)} "
          f"size={size/1e6:.2f}MB", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-cpp", required=True, type=Path,
                    help="vendor/llama.cpp of the llama-cpp-python==0.3.36 sdist")
    ap.add_argument("--out", type=Path, default=Path("tests/data/hf"))
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    names = list(MODELS) + list(HALF_COPIES)
    if a.only:
        names = [n for n in a.only.split(",") if n]
    vers = versions()
    print(json.dumps(vers))
    for n in names:
        build(n, a.out, a.llama_cpp.resolve(), vers)


if __name__ == "__main__":
    main()
