#!/usr/bin/env python3
"""Goldens for config_sentence_transformers.json prompts (issue 19 part 2).

    /work/venv-ref/bin/python scripts/gen_encoder_prompt_goldens.py

Writes tests/data/encoders/bert-tiny-prompts.json: the bert-tiny model
(tests/data/encoders/bert-tiny, unchanged) with the prompts and
default_prompt_name of `config` below, as SentenceTransformer loads them from
a copy of the folder whose config_sentence_transformers.json holds them. A
test builds that folder the same way (bert-tiny's files + this "config" as
config_sentence_transformers.json) rather than committing a second copy of
the weights.

Per case (`cases`): the encode() arguments (`prompt_name` / `prompt`, absent
= not passed), and per sentence the token ids sentence-transformers feeds
(prompt + text tokenized together, truncated to max_seq_length) and the
embedding (`encode([s], **args)`, one sentence per forward, float32 '%.9g').
`truncated`: a long text with prompt_name "query", cut with the prompt's
tokens counted.
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

from sentence_transformers import SentenceTransformer  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "tests/data/encoders/bert-tiny")
OUT = os.path.join(ROOT, "tests/data/encoders/bert-tiny-prompts.json")

CONFIG = {
    "prompts": {"query": "query: ", "document": "passage: ", "classification": "Classify the sentiment: "},
    "default_prompt_name": "query",
    "similarity_fn_name": "cosine",
}
SENTENCES = [
    "Hello world!",
    "What is the capital of France?",
    "Paris is the capital and most populous city of France.",
    "",
    "café and naïve résumé",
]
CASES = [
    {"name": "default"},
    {"name": "query", "prompt_name": "query"},
    {"name": "document", "prompt_name": "document"},
    {"name": "classification", "prompt_name": "classification"},
    {"name": "no prompt", "prompt": ""},
    {"name": "custom", "prompt": "Represent this sentence: "},
    {"name": "prompt over prompt_name", "prompt": "custom: ", "prompt_name": "document"},
]
LONG = " ".join(f"word{i % 10} is here and there," for i in range(40))


def main():
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "m")
        shutil.copytree(SRC, d)
        os.remove(os.path.join(d, "golden.json"))
        with open(os.path.join(d, "config_sentence_transformers.json"), "w") as f:
            json.dump(CONFIG, f)
        st = SentenceTransformer(d, device="cpu")
        st.eval()
        assert st.prompts == CONFIG["prompts"] and st.default_prompt_name == "query"
        cases = []
        for c in CASES:
            args = {k: v for k, v in c.items() if k != "name"}
            prompt = args.get("prompt", CONFIG["prompts"][args.get("prompt_name", CONFIG["default_prompt_name"])])
            rows = []
            for s in SENTENCES:
                emb = st.encode([s], convert_to_numpy=True, **args)[0]
                rows.append({"token_ids": st_tokenize(st, [prompt + s])[0], "embedding": f32list(emb)})
            cases.append({"name": c["name"], "args": args, "prompt": prompt, "rows": rows})
        emb = st.encode([LONG], convert_to_numpy=True, prompt_name="query")[0]
        ids = st_tokenize(st, ["query: " + LONG])[0]
        assert len(ids) == st.max_seq_length, len(ids)
        golden = {
            "model": "bert-tiny + prompts",
            "generator": "scripts/gen_encoder_prompt_goldens.py",
            "versions": versions(),
            "config": CONFIG,
            "max_seq_length": st.max_seq_length,
            "sentences": SENTENCES,
            "cases": cases,
            "truncated": {"text": LONG, "prompt_name": "query", "token_ids": ids, "embedding": f32list(emb)},
        }
    with open(OUT, "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print("wrote", OUT, os.path.getsize(OUT), "bytes")


if __name__ == "__main__":
    main()
