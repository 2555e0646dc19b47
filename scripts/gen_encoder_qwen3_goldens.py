#!/usr/bin/env python3
"""A tiny Qwen3-Embedding-style sentence embedder and its goldens (issue 19 part 1).

    /work/venv-ref/bin/python scripts/gen_encoder_qwen3_goldens.py

Writes tests/data/encoders/qwen3-embedding-tiny/, laid out as
Qwen/Qwen3-Embedding-0.6B is:
  - a random Qwen3Model (no "model." prefix, no lm_head: sentence-transformers'
    Transformer module saves the base model) with the shape of
    tests/data/hf/qwen3 (hidden 64, 2 layers, 4 heads of 32, 2 KV heads,
    q_norm/k_norm, vocabulary 384), seeded: matrices N(0, 0.2), RMSNorm
    weights 1 + N(0, 0.1);
  - tests/data/hf/qwen3's byte-level BPE tokenizer with Qwen3-Embedding's
    post-processor: TemplateProcessing "$A <|endoftext|>" (the EOS whose last
    hidden state is the embedding), padding_side left;
  - modules.json: Transformer, Pooling (the legacy flags,
    pooling_mode_lasttoken true, include_prompt true), Normalize;
  - config_sentence_transformers.json: Qwen3-Embedding's prompts ("query":
    its web-search instruction, "document": ""), default_prompt_name null;
  - sentence_bert_config.json max_seq_length 128 (short, so that a cut is
    tested: the text's tail goes, <|endoftext|> stays last);
  - golden.json: per sentence the token ids sentence-transformers feeds and
    `encode([s])` (one sentence per forward: no padding), the same with
    prompt_name "query", and a long text cut to 128 tokens. Each embedding is
    also checked here against transformers' Qwen3Model last_hidden_state of
    the last token, L2-normalised (causal attention).
Float32 on the CPU; values '%.9g'.
"""
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_encoder_goldens import f32list, st_tokenize, versions  # noqa: E402

import transformers  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402
from sentence_transformers.sentence_transformer import modules as st_modules  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOK_SRC = os.path.join(ROOT, "tests/data/hf/qwen3")
OUT = os.path.join(ROOT, "tests/data/encoders/qwen3-embedding-tiny")
SEED = 49
MAX_SEQ = 128
PROMPTS = {
    "query": "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:",
    "document": "",
}
SENTENCES = [
    "Hello world!",
    "What is the capital of China?",
    "The capital of China is Beijing.",
    "Explain gravity",
    "Gravity is a force that attracts two bodies towards each other.",
    "a",
    "café, naïve and 東京 🙂",
    "<|endoftext|> inside the text",
]
LONG = " ".join(f"word{i % 10} and more" for i in range(40))


def build(tmp):
    cfg = json.load(open(os.path.join(TOK_SRC, "config.json")))
    cfg["architectures"] = ["Qwen3Model"]
    cfg["eos_token_id"] = 2
    cfg["pad_token_id"] = 2
    cfg.pop("transformers_version", None)
    config = transformers.Qwen3Config(**{k: v for k, v in cfg.items() if k not in ("model_type",)})
    torch.manual_seed(SEED)
    model = transformers.Qwen3Model(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.2 * torch.randn_like(p))
    base = os.path.join(tmp, "base")
    model.save_pretrained(base, safe_serialization=True)
    tok = json.load(open(os.path.join(TOK_SRC, "tokenizer.json")))
    tok["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                 {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "<|endoftext|>", "type_id": 1}}],
        "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [2], "tokens": ["<|endoftext|>"]}},
    }
    json.dump(tok, open(os.path.join(base, "tokenizer.json"), "w"), ensure_ascii=False)
    tc = json.load(open(os.path.join(TOK_SRC, "tokenizer_config.json")))
    tc.update({"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "padding_side": "left",
               "model_max_length": 256})
    json.dump(tc, open(os.path.join(base, "tokenizer_config.json"), "w"), indent=2)
    st = SentenceTransformer(modules=[st_modules.Transformer(base, max_seq_length=MAX_SEQ),
                                      st_modules.Pooling(64, pooling_mode="lasttoken"), st_modules.Normalize()],
                             device="cpu", prompts=PROMPTS, default_prompt_name=None)
    if os.path.exists(OUT):
        shutil.rmtree(OUT)
    st.save(OUT)
    # Qwen3-Embedding's Pooling config is the legacy one
    pool_dir = [d for d in os.listdir(OUT) if d.endswith("_Pooling")][0]
    json.dump({"word_embedding_dimension": 64, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False,
               "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
               "pooling_mode_weightedmean_tokens": False, "pooling_mode_lasttoken": True, "include_prompt": True},
              open(os.path.join(OUT, pool_dir, "config.json"), "w"), indent=2)
    json.dump({"max_seq_length": MAX_SEQ, "do_lower_case": False},
              open(os.path.join(OUT, "sentence_bert_config.json"), "w"), indent=2)


def reference(model, ids):
    with torch.no_grad():
        h = model(input_ids=torch.tensor([ids])).last_hidden_state[0, -1]
    return torch.nn.functional.normalize(h, dim=-1).numpy()


def main():
    with tempfile.TemporaryDirectory() as tmp:
        build(tmp)
    st = SentenceTransformer(OUT, device="cpu")
    st.eval()
    assert st.max_seq_length == MAX_SEQ and st.prompts == PROMPTS, (st.max_seq_length, st.prompts)
    hf = transformers.AutoModel.from_pretrained(OUT).eval()
    assert type(hf).__name__ == "Qwen3Model"
    worst = 0.0

    def rows(texts, **kw):
        nonlocal worst
        out = []
        prompt = PROMPTS[kw["prompt_name"]] if "prompt_name" in kw else ""
        for s in texts:
            ids = st_tokenize(st, [prompt + s])[0]
            assert ids[-1] == 2, ids  # <|endoftext|> last
            emb = st.encode([s], convert_to_numpy=True, **kw)[0]
            worst = max(worst, float(np.abs(emb - reference(hf, ids)).max()))
            out.append({"token_ids": ids, "embedding": f32list(emb)})
        return out

    plain = rows(SENTENCES)
    query = rows(SENTENCES, prompt_name="query")
    assert all(len(r["token_ids"]) < MAX_SEQ for r in query)  # the prompt and the text, uncut
    cut = rows([LONG])[0]
    assert len(cut["token_ids"]) == MAX_SEQ
    assert worst < 1e-5, worst
    golden = {
        "model": "qwen3-embedding-tiny",
        "generator": "scripts/gen_encoder_qwen3_goldens.py",
        "versions": versions(),
        "pooling": "lasttoken + Normalize (causal Qwen3Model, <|endoftext|> appended by the tokenizer)",
        "max_seq_length": MAX_SEQ,
        "vs_transformers_max_abs_diff": worst,
        "sentences": SENTENCES,
        "embeddings": plain,
        "query_prompt": PROMPTS["query"],
        "embeddings_query": query,
        "truncated": {"text": LONG, **cut},
    }
    with open(os.path.join(OUT, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1, ensure_ascii=False)
        f.write("\n")
    for junk in ("README.md",):
        if os.path.exists(os.path.join(OUT, junk)):
            os.remove(os.path.join(OUT, junk))
    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(OUT) for f in fs)
    print("wrote", OUT, total, "bytes; vs transformers max abs diff", worst)


if __name__ == "__main__":
    main()
