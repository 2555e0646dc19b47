#!/usr/bin/env python3
"""Write the seed corpus for fuzz_server_encoder: requests to the encoder
endpoints, valid ones (embeddings as strings, token ids, base64, dimensions,
truncate, prompt_name; rerank in Jina/Cohere's and TEI's shapes with top_n,
return_documents, document objects; classify and TEI's /predict with one and
several inputs) and invalid ones (the bad requests of
tests/models/test_server_heads.sh and test_server_embeddings.sh). An input is
  [u8 route][body]
route: bits 0-2 the URL (0 /v1/embeddings, 1 /v1/rerank, 2 /rerank,
3 /v1/classify, 4 /classify, 5 /predict, 6 /v1/chat/completions,
7 /v1/models), bits 3-4 the model (0 bert-tiny, 1 bert-tiny-reranker,
2 bert-tiny-classifier, 3 qwen3-embedding-tiny), bit 5 GET.

usage: python3 tests/fuzz/gen_server_encoder_corpus.py [OUT_DIR]   (default:
corpus/server_encoder/ beside this script). The output is committed; rerun
after changing this."""
import hashlib
import json
import os
import sys

EMB, RERANK, RERANK2, CLASSIFY, CLASSIFY2, PREDICT, CHAT, MODELS = range(8)
EMBEDDER, RERANKER, CLASSIFIER, QWEN3 = range(4)


def seed(url, model, body, get=False):
    if not isinstance(body, bytes):
        body = json.dumps(body).encode()
    return bytes([url | (model << 3) | (32 if get else 0)]) + body


DOCS = ["Paris is the capital of France.", "The cat sat on the mat.", "France", "Numbers like 3.14 and 42."]
LONG = "word0 is here and there, " * 20

SEEDS = [
    seed(EMB, EMBEDDER, {"input": "Hello world!"}),
    seed(EMB, EMBEDDER, {"input": ["a", "b c"], "encoding_format": "base64", "dimensions": 8}),
    seed(EMB, EMBEDDER, {"input": [[2, 40, 3]], "encoding_format": "float"}),
    seed(EMB, EMBEDDER, {"input": "hi", "prompt_name": "query"}),
    seed(EMB, EMBEDDER, {"input": "hi", "prompt_name": "nope"}),
    seed(EMB, EMBEDDER, {"input": LONG, "truncate": True}),
    seed(EMB, EMBEDDER, {"input": LONG}),
    seed(EMB, QWEN3, {"input": ["Explain gravity", "a"], "prompt_name": "query"}),
    seed(EMB, QWEN3, {"input": [[42, 267, 2]], "dimensions": 16}),
    seed(RERANK, RERANKER, {"model": "x", "query": "What is the capital of France?", "documents": DOCS}),
    seed(RERANK, RERANKER, {"query": "capital", "documents": [{"text": d} for d in DOCS], "top_n": 2,
                            "return_documents": True}),
    seed(RERANK, RERANKER, {"query": "q", "documents": [LONG], "truncate": True}),
    seed(RERANK, RERANKER, {"query": "q", "documents": [LONG]}),
    seed(RERANK2, RERANKER, {"query": "France", "texts": DOCS, "return_text": True}),
    seed(RERANK2, RERANKER, {"query": "France", "documents": DOCS, "top_n": 100}),
    seed(RERANK, RERANKER, {"query": "", "documents": DOCS}),
    seed(RERANK, RERANKER, {"query": "q", "documents": "a"}),
    seed(RERANK, RERANKER, {"query": "q", "documents": ["a", 3]}),
    seed(RERANK, RERANKER, {"query": "q", "documents": ["a"], "top_n": 0}),
    seed(RERANK, RERANKER, {"query": "q", "documents": ["a"], "raw_scores": True}),
    seed(RERANK, CLASSIFIER, {"query": "q", "documents": ["a"]}),
    seed(RERANK, EMBEDDER, {"query": "q", "documents": ["a"]}),
    seed(CLASSIFY, CLASSIFIER, {"input": ["I love it", "terrible", "ok"]}),
    seed(CLASSIFY2, CLASSIFIER, {"model": "x", "input": "Hello world!"}),
    seed(CLASSIFY, CLASSIFIER, {"inputs": ["a"], "truncate": False}),
    seed(CLASSIFY, CLASSIFIER, {"input": [LONG], "truncate": True}),
    seed(CLASSIFY, CLASSIFIER, {"input": [["a", "b"]]}),
    seed(CLASSIFY, CLASSIFIER, {"input": [""]}),
    seed(CLASSIFY, RERANKER, {"input": "hello"}),
    seed(PREDICT, CLASSIFIER, {"inputs": "Hello world!"}),
    seed(PREDICT, CLASSIFIER, {"inputs": ["a", "b"]}),
    seed(CHAT, EMBEDDER, {"messages": [{"role": "user", "content": "hi"}]}),
    seed(MODELS, QWEN3, b"", get=True),
    seed(RERANK, RERANKER, b"", get=True),
    seed(CLASSIFY, CLASSIFIER, b"{\"input\": \"a\", \"input\": \"b\"}"),
    seed(RERANK, RERANKER, b"[1, 2]"),
]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                             "corpus", "server_encoder")
    os.makedirs(out, exist_ok=True)
    for s in SEEDS:
        with open(os.path.join(out, hashlib.sha1(s).hexdigest()[:16]), "wb") as f:
            f.write(s)
    print(f"{len(SEEDS)} seeds in {out}")


if __name__ == "__main__":
    main()
