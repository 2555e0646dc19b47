#!/usr/bin/env python3
"""Reference data for encoder heads and more encoder architectures (issue 19
parts 1, 2, 5): tiny random transformers models with their outputs.

Run from the repository root with the reference venv:

    /work/venv-ref/bin/python scripts/gen_encoder_head_goldens.py [--out DIR] [--only NAME]

It writes (under tests/data/encoders):
  bert-tiny-classifier/  random BertForSequenceClassification (3 labels with
                         id2label, no problem_type: softmax) on the bert-tiny
                         tokenizer; golden.json: logits, softmax and sigmoid
                         probabilities of every sentence (transformers, one
                         sentence per forward), the text-classification
                         pipeline's top label
  bert-tiny-reranker/    random BertForSequenceClassification with one label,
                         saved by sentence-transformers' CrossEncoder;
                         golden.json: pair ids and token types, CrossEncoder
                         .predict scores (Sigmoid) one pair per forward, and
                         .rank order per query; one document is longer than
                         max_seq_length (longest-first truncation)

Helpers (tokenizer, randomisation, sentences) come from gen_encoder_goldens.py.
Everything is float32 on the CPU and deterministic.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_encoder_goldens as base  # noqa: E402

LABELS = {0: "negative", 1: "neutral", 2: "positive"}

QUERIES = [
    "What is the capital of France?",
    "How do transformers mix information?",
    "a",
]
DOCS = [
    "Paris is the capital and most populous city of France.",
    "The cat sat on the mat. The dog sat on the log.",
    "Transformers use self-attention to mix information between all positions.",
    "The weather today is sunny with a light breeze from the west.",
    "France",
    "Sentence embeddings map text to vectors so that similar meanings are close.",
    "Numbers like 3.14159, 42 and 2024-06-01 get split into pieces.",
    # longer than max_seq_length with any query: truncated longest-first
    " ".join(["word%d is here and there," % (i % 10) for i in range(14)]),
]


def tidy(d):
    for junk in ("README.md",):
        p = os.path.join(d, junk)
        if os.path.exists(p):
            os.remove(p)
    for root, _, files in os.walk(d):
        for fn in files:
            os.chmod(os.path.join(root, fn), 0o644)


def bert_cls_model(n_vocab, num_labels, id2label=None):
    from transformers import BertConfig, BertForSequenceClassification
    kw = dict(vocab_size=n_vocab, hidden_size=64, num_hidden_layers=2,
              num_attention_heads=4, intermediate_size=128, hidden_act="gelu",
              max_position_embeddings=base.TINY_MAX_SEQ, type_vocab_size=2, layer_norm_eps=1e-12,
              pad_token_id=0, num_labels=num_labels, architectures=["BertForSequenceClassification"])
    if id2label:
        kw["id2label"] = id2label
        kw["label2id"] = {v: k for k, v in id2label.items()}
    m = BertForSequenceClassification(BertConfig(**kw)).eval()
    # the classifier and pooler get the matrices' scale too (names without
    # "embeddings"/"LayerNorm" are N(0, 0.2)), so the logits spread out
    base.randomise(m)
    return m


def write(path, g):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(g, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print("wrote %s (%d bytes)" % (path, os.path.getsize(path)))


def build_classifier(out_root):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline
    base.set_seed(base.SEED + 10)
    d = os.path.join(out_root, "bert-tiny-classifier")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    n_vocab = base.train_tokenizer(d)
    bert_cls_model(n_vocab, 3, LABELS).save_pretrained(d, safe_serialization=True)
    tidy(d)
    m = AutoModelForSequenceClassification.from_pretrained(d, dtype=torch.float32,
                                                           attn_implementation="eager").eval()
    tok = AutoTokenizer.from_pretrained(d)
    logits, ids = [], []
    with torch.no_grad():
        for s in base.SENTENCES:
            enc = tok(s, return_tensors="pt", truncation=True, max_length=base.TINY_MAX_SEQ)
            ids.append(enc["input_ids"][0].tolist())
            logits.append(m(**enc).logits[0].numpy().astype(np.float32))
    logits = np.stack(logits)
    soft = torch.softmax(torch.tensor(logits), dim=-1).numpy()
    sig = torch.sigmoid(torch.tensor(logits)).numpy()
    pipe = pipeline("text-classification", model=m, tokenizer=tok, device="cpu", top_k=1)
    top = []
    for s in base.SENTENCES:
        r = pipe(s)
        while isinstance(r, list):  # [[{label, score}]] or [{...}] by version
            r = r[0]
        top.append(r)
    for i, t in enumerate(top):
        assert t["label"] == LABELS[int(np.argmax(soft[i]))] and abs(t["score"] - soft[i].max()) < 1e-5
    write(os.path.join(d, "golden.json"), {
        "model": "bert-tiny-classifier",
        "generator": "scripts/gen_encoder_head_goldens.py",
        "versions": base.versions(),
        "labels": [LABELS[i] for i in range(3)],
        "problem_type": None,
        "activation": "softmax (num_labels > 1, no problem_type)",
        "sentences": base.SENTENCES,
        "token_ids": ids,
        "logits": [base.f32list(r) for r in logits],
        "probs": [base.f32list(r) for r in soft],
        "probs_sigmoid": [base.f32list(r) for r in sig],
        "pipeline_top": [{"label": t["label"], "score": float(t["score"])} for t in top],
    })


def build_reranker(out_root):
    from sentence_transformers import CrossEncoder
    base.set_seed(base.SEED + 20)
    tmp = tempfile.mkdtemp(prefix="bert-reranker-src-")
    n_vocab = base.train_tokenizer(tmp)
    bert_cls_model(n_vocab, 1).save_pretrained(tmp, safe_serialization=True)
    d = os.path.join(out_root, "bert-tiny-reranker")
    shutil.rmtree(d, ignore_errors=True)
    CrossEncoder(tmp, device="cpu", max_length=base.TINY_MAX_SEQ).save(d, safe_serialization=True)
    shutil.rmtree(tmp)
    tidy(d)
    # BertTokenizer feeds token_type_ids (1 for the second segment); the
    # generic fast tokenizer train_tokenizer saves would not, and BERT would
    # see type 0 everywhere
    tc_path = os.path.join(d, "tokenizer_config.json")
    with open(tc_path, encoding="utf-8") as f:
        tc = json.load(f)
    tc["model_input_names"] = ["input_ids", "token_type_ids", "attention_mask"]
    with open(tc_path, "w", encoding="utf-8") as f:
        json.dump(tc, f, indent=2, sort_keys=True)
        f.write("\n")
    write_rerank_golden(d, "bert-tiny-reranker", base.TINY_MAX_SEQ, typed=True)


def write_rerank_golden(d, name, max_len, typed):
    from sentence_transformers import CrossEncoder
    ce = CrossEncoder(d, device="cpu")
    assert ce.max_seq_length == max_len, ce.max_seq_length
    assert ("token_type_ids" in ce.preprocess([("a", "b")])) == typed
    tok = ce.tokenizer
    queries = []
    for q in QUERIES:
        pairs, scores = [], []
        for doc in DOCS:
            enc = tok(q, doc, truncation=True, max_length=max_len, return_token_type_ids=True)
            full = tok(q, doc)["input_ids"]
            pairs.append({"token_ids": enc["input_ids"], "token_type_ids": enc["token_type_ids"],
                          "untruncated_length": len(full)})
            scores.append(float(ce.predict([(q, doc)], batch_size=1)[0]))
        ranked = ce.rank(q, DOCS, batch_size=1)
        order = [r["corpus_id"] for r in ranked]
        assert all(abs(r["score"] - scores[r["corpus_id"]]) < 1e-6 for r in ranked)
        batched = ce.predict([(q, doc) for doc in DOCS], batch_size=32)
        queries.append({"query": q, "pairs": pairs, "scores": base.f32list(scores),
                        "order": order,
                        "batched_vs_single_max_abs_diff": float(np.max(np.abs(batched - scores)))})
    assert any(p["untruncated_length"] > max_len for p in queries[0]["pairs"])
    write(os.path.join(d, "golden.json"), {
        "model": name,
        "generator": "scripts/gen_encoder_head_goldens.py",
        "versions": base.versions(),
        "activation": "Sigmoid (CrossEncoder's activation_fn)",
        "max_length": max_len,
        "token_types_fed": typed,
        "truncation": "longest_first to max_length, counting the special tokens",
        "documents": DOCS,
        "queries": queries,
    })


# --------------------------------------------------------------------------- RoBERTa
ROBERTA_MAX_SEQ = 128  # byte-level BPE with few merges: long sentences take ~100 tokens
ROBERTA_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def save_fast_tokenizer(tok, d, max_len):
    from transformers import PreTrainedTokenizerFast
    path = os.path.join(d, "tokenizer.json")
    tok.save(path)
    hf = PreTrainedTokenizerFast(tokenizer_file=path, bos_token="<s>", eos_token="</s>",
                                 sep_token="</s>", cls_token="<s>", unk_token="<unk>",
                                 pad_token="<pad>", mask_token="<mask>", model_max_length=max_len)
    hf.save_pretrained(d)
    return tok.get_vocab_size()


def bpe_tokenizer(d, max_len):
    """Byte-level BPE as RoBERTa's (GPT-2 alphabet, RobertaProcessing)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=500, special_tokens=ROBERTA_SPECIALS, show_progress=False,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(base.TRAIN_TEXT, trainer=tr)
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    return save_fast_tokenizer(tok, d, max_len)


def unigram_vocab(n_vocab=400):
    """A deterministic Unigram vocabulary (tokenizers' UnigramTrainer is not
    reproducible run to run): the specials, every character with and without
    the word-start marker, then whole words and word pieces of the training
    text by count; scores are log frequencies, so Viterbi prefers long pieces
    of common words."""
    import math
    from collections import Counter
    text = [t.replace("\U0001F642", "").replace("\u27C1", "") for t in base.TRAIN_TEXT]
    words = Counter("\u2581" + w for t in text for w in t.split())
    chars = Counter(c for w, n in words.items() for c in w for _ in range(n))
    pieces = Counter()
    for w, n in words.items():
        pieces[w] += n * len(w)
        for k in range(2, min(6, len(w))):
            pieces[w[:k]] += n * k
            pieces[w[-k:]] += n * k
    total = sum(chars.values())
    vocab = [(t, 0.0) for t in ROBERTA_SPECIALS]
    seen = set(ROBERTA_SPECIALS)
    for c, n in sorted(chars.items(), key=lambda kv: (-kv[1], kv[0])):
        vocab.append((c, math.log(n / total) - 2.0))
        seen.add(c)
    for p, n in sorted(pieces.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(vocab) >= n_vocab:
            break
        if p not in seen:
            vocab.append((p, round(math.log(n / total), 6)))
            seen.add(p)
    return vocab


def unigram_tokenizer(d, max_len):
    """SentencePiece-style Unigram as XLM-R's (Metaspace, <s> A </s></s> B </s>)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors
    tok = Tokenizer(models.Unigram(unigram_vocab(), unk_id=3, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in ROBERTA_SPECIALS])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", 0), ("</s>", 2)])
    return save_fast_tokenizer(tok, d, max_len)


def roberta_config(cls, n_vocab, max_len, **kw):
    return cls(vocab_size=n_vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
               intermediate_size=128, hidden_act="gelu", max_position_embeddings=max_len + 2,
               type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0,
               eos_token_id=2, **kw)


def build_roberta(out_root):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as st_modules
    from transformers import RobertaConfig, RobertaModel
    base.set_seed(base.SEED + 30)
    tmp = tempfile.mkdtemp(prefix="roberta-tiny-src-")
    n_vocab = bpe_tokenizer(tmp, ROBERTA_MAX_SEQ)
    m = RobertaModel(roberta_config(RobertaConfig, n_vocab, ROBERTA_MAX_SEQ,
                                    architectures=["RobertaModel"])).eval()
    base.randomise(m)
    m.save_pretrained(tmp, safe_serialization=True)
    tr = st_modules.Transformer(tmp, max_seq_length=ROBERTA_MAX_SEQ)
    st = SentenceTransformer(modules=[tr, st_modules.Pooling(64, pooling_mode="mean"),
                                      st_modules.Normalize()], device="cpu")
    d = os.path.join(out_root, "roberta-tiny")
    shutil.rmtree(d, ignore_errors=True)
    st.save(d, safe_serialization=True, create_model_card=False)
    shutil.rmtree(tmp)
    tidy(d)
    base.write_golden(d, os.path.join(d, "golden.json"), "roberta-tiny", with_nonorm=True,
                      max_seq=ROBERTA_MAX_SEQ, check_fit=True)


def build_xlmr_reranker(out_root):
    from sentence_transformers import CrossEncoder
    from transformers import XLMRobertaConfig, XLMRobertaForSequenceClassification
    base.set_seed(base.SEED + 40)
    tmp = tempfile.mkdtemp(prefix="xlmr-reranker-src-")
    n_vocab = unigram_tokenizer(tmp, base.TINY_MAX_SEQ)
    m = XLMRobertaForSequenceClassification(roberta_config(
        XLMRobertaConfig, n_vocab, base.TINY_MAX_SEQ, num_labels=1,
        architectures=["XLMRobertaForSequenceClassification"])).eval()
    base.randomise(m)
    m.save_pretrained(tmp, safe_serialization=True)
    d = os.path.join(out_root, "xlm-roberta-tiny-reranker")
    shutil.rmtree(d, ignore_errors=True)
    CrossEncoder(tmp, device="cpu", max_length=base.TINY_MAX_SEQ).save(d, safe_serialization=True)
    shutil.rmtree(tmp)
    tidy(d)
    write_rerank_golden(d, "xlm-roberta-tiny-reranker", base.TINY_MAX_SEQ, typed=False)


def build_mpnet(out_root):
    """MPNet (all-mpnet-base-v2's architecture) with the byte-level BPE tokenizer
    of roberta-tiny (pad id 1, as MPNetEmbeddings' fixed padding_idx)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as st_modules
    from transformers import MPNetConfig, MPNetModel
    base.set_seed(base.SEED + 50)
    tmp = tempfile.mkdtemp(prefix="mpnet-tiny-src-")
    n_vocab = bpe_tokenizer(tmp, ROBERTA_MAX_SEQ)
    cfg = MPNetConfig(vocab_size=n_vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=128, hidden_act="gelu", max_position_embeddings=ROBERTA_MAX_SEQ + 2,
                      layer_norm_eps=1e-5, relative_attention_num_buckets=32, pad_token_id=1,
                      bos_token_id=0, eos_token_id=2, architectures=["MPNetModel"])
    m = MPNetModel(cfg).eval()
    base.randomise(m)
    with torch.no_grad():  # a bias that matters next to N(0, 0.2) projections' scores
        m.encoder.relative_attention_bias.weight.copy_(
            torch.randn_like(m.encoder.relative_attention_bias.weight))
    m.save_pretrained(tmp, safe_serialization=True)
    tr = st_modules.Transformer(tmp, max_seq_length=ROBERTA_MAX_SEQ)
    st = SentenceTransformer(modules=[tr, st_modules.Pooling(64, pooling_mode="mean"),
                                      st_modules.Normalize()], device="cpu")
    d = os.path.join(out_root, "mpnet-tiny")
    shutil.rmtree(d, ignore_errors=True)
    st.save(d, safe_serialization=True, create_model_card=False)
    shutil.rmtree(tmp)
    tidy(d)
    base.write_golden(d, os.path.join(d, "golden.json"), "mpnet-tiny", with_nonorm=True,
                      max_seq=ROBERTA_MAX_SEQ, check_fit=True)


BUILDERS = {"classifier": build_classifier, "reranker": build_reranker, "roberta": build_roberta,
            "xlmr-reranker": build_xlmr_reranker, "mpnet": build_mpnet}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/encoders")
    ap.add_argument("--only", default=None, choices=sorted(BUILDERS))
    a = ap.parse_args()
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    os.makedirs(a.out, exist_ok=True)
    for name, fn in BUILDERS.items():
        if a.only in (None, name):
            fn(a.out)


if __name__ == "__main__":
    main()
