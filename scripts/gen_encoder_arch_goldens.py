#!/usr/bin/env python3
"""Reference data for the RoPE encoders of issue 19 item 1: ModernBERT (and NomicBERT).

    /work/venv-mistral/bin/python scripts/gen_encoder_arch_goldens.py [--out DIR]

Needs torch, transformers (5.x: ModernBertModel is in transformers itself), numpy.
sentence-transformers is not needed: the sentence-transformers folder files
(modules.json, 1_Pooling, 2_Normalize) are written as sentence-transformers 6
writes them (copied from tests/data/encoders/bert-tiny), and the embeddings are
what that pipeline computes: the mean of ModernBertModel's last_hidden_state over
all tokens (one sentence per forward pass, no padding), L2-normalised.

modernbert-tiny/: a random ModernBertModel with ModernBERT-base's structure
(no biases, GELU-erf GeGLU Wi/Wo, pre-norm with layer 0's attn_norm the identity,
embedding norm, final norm, global attention every 3 layers with
global_rope_theta 160000, local layers with local_rope_theta 10000) at a tiny size:
hidden 64, 4 heads, 4 layers (0 and 3 global), intermediate 96, and
local_attention 8 (each token sees +-4 tokens in layers 1 and 2), so sentences
longer than 5 tokens exercise the local mask. config.json is rewritten in the
Hub's key layout (global_rope_theta, local_rope_theta, global_attn_every_n_layers,
as answerdotai/ModernBERT-base has it) and the golden is computed from the folder
reloaded from disk, which proves transformers reads it as meant.
The tokenizer is bert-tiny's WordPiece (pad 0, cls 2, sep 3 in config.json).
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SEED = 1901
MAX_SEQ = 64

sys.path.insert(0, HERE)
# the 24 sentences and the long text of the other encoder goldens
SENTENCES = None
LONG_TEXT = None


def load_inputs():
    global SENTENCES, LONG_TEXT
    g = json.load(open(os.path.join(ROOT, "tests/data/encoders/bert-tiny/golden.json")))
    SENTENCES = g["sentences"]
    LONG_TEXT = g["truncated"]["text"]


def f32list(a):
    a = np.asarray(a, dtype=np.float32).reshape(-1)
    return [float("%.9g" % float(x)) for x in a]


def copy_st_files(dst, dim):
    src = os.path.join(ROOT, "tests/data/encoders/bert-tiny")
    for f in ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json",
              "tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        shutil.copy(os.path.join(src, f), os.path.join(dst, f))
    os.makedirs(os.path.join(dst, "1_Pooling"), exist_ok=True)
    os.makedirs(os.path.join(dst, "2_Normalize"), exist_ok=True)
    with open(os.path.join(dst, "1_Pooling", "config.json"), "w") as f:
        json.dump({"embedding_dimension": dim, "pooling_mode": "mean", "include_prompt": True}, f, indent=4)
    shutil.copy(os.path.join(src, "2_Normalize", "config.json"), os.path.join(dst, "2_Normalize", "config.json"))


def randomise(model):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif "norm" in name:
                p.copy_(0.1 * torch.randn_like(p))
            elif "embeddings" in name:
                p.copy_(0.5 * torch.randn_like(p))
            else:
                p.copy_(0.2 * torch.randn_like(p))


def tokenize(tok, text, cut):
    ids = tok(text, add_special_tokens=True)["input_ids"]
    if cut and len(ids) > MAX_SEQ:  # sentence-transformers' cut: the tail goes, [SEP] stays
        ids = ids[:MAX_SEQ - 1] + [ids[-1]]
    return ids


def write_golden(d, name, model_cls, extra_cfg):
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(d)
    m = model_cls.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
    for k, v in extra_cfg.items():
        got = getattr(m.config, k)
        if isinstance(v, dict):
            got = {kk: got[kk] for kk in v}
        assert got == v, (k, got, v)
    ids = [tokenize(tok, s, False) for s in SENTENCES]
    for s, r in zip(SENTENCES, ids):
        assert len(r) <= MAX_SEQ, (s, len(r))

    def run(row):
        t = torch.tensor([row])
        with torch.no_grad():
            return m(input_ids=t, attention_mask=torch.ones_like(t)).last_hidden_state[0].numpy()

    hs = [run(r) for r in ids]
    mean = np.stack([h.mean(0) for h in hs]).astype(np.float32)
    emb = mean / np.linalg.norm(mean, axis=1, keepdims=True)
    # a padded batch of all sentences must agree (the mask path of transformers)
    n = max(len(r) for r in ids)
    pad = tok.pad_token_id
    batch = torch.tensor([r + [pad] * (n - len(r)) for r in ids])
    mask = torch.tensor([[1] * len(r) + [0] * (n - len(r)) for r in ids])
    with torch.no_grad():
        hb = m(input_ids=batch, attention_mask=mask).last_hidden_state.numpy()
    bdiff = max(float(np.abs(hb[i, :len(r)] - hs[i]).max()) for i, r in enumerate(ids))
    # the local window and the two RoPE bases matter: the same weights with every
    # layer global (or one base) give other embeddings
    effects = {}
    for what, kw in (("all_global", {"local_attention": 4 * MAX_SEQ}),
                     ("one_rope_base", {"rope_parameters": {
                         "full_attention": {"rope_type": "default", "rope_theta": 10000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}})):
        if extra_cfg.get("layer_types") is None:
            break
        alt = model_cls.from_pretrained(d, dtype=torch.float32, attn_implementation="eager", **kw).eval()
        with torch.no_grad():
            t = torch.tensor([ids[-2]])
            h = alt(input_ids=t, attention_mask=torch.ones_like(t)).last_hidden_state[0].numpy().mean(0)
        cos = float(h @ mean[-2] / np.linalg.norm(h) / np.linalg.norm(mean[-2]))
        assert cos < 0.999, (what, cos)
        effects[what] = cos
    long_ids = tokenize(tok, LONG_TEXT, True)
    lh = run(long_ids).mean(0)
    g = {
        "model": name,
        "generator": "scripts/gen_encoder_arch_goldens.py",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "numpy": np.__version__, "python": sys.version.split()[0]},
        "dtype": "float32", "device": "cpu",
        "max_seq_length": MAX_SEQ,
        "pipeline": "mean of last_hidden_state over all tokens, then L2 normalisation "
                    "(what Pooling(mean) + Normalize compute); one sentence per forward",
        "embedding_dim": int(emb.shape[1]),
        "n_sentences": len(SENTENCES),
        "sentences": SENTENCES,
        "token_ids": ids,
        "last_hidden_state": [{"index": i, "shape": list(hs[i].shape), "values": f32list(hs[i])}
                              for i in range(2)],
        "embeddings": [f32list(e) for e in emb],
        "golden_mean_nonorm": [f32list(e) for e in mean],
        "batched_vs_single_max_abs_diff": bdiff,
        "ablation_cosine_sentence_22": effects,
        "truncated": {"text": LONG_TEXT, "token_ids": long_ids,
                      "embedding": f32list(lh / np.linalg.norm(lh))},
    }
    with open(os.path.join(d, "golden.json"), "w") as f:
        json.dump(g, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(name, "ablations", effects)
    print(name, "sentences", len(ids), "lengths", min(map(len, ids)), "..", max(map(len, ids)),
          "batched vs single", bdiff)


def build_modernbert(out):
    from transformers import ModernBertConfig, ModernBertModel
    torch.manual_seed(SEED)
    np.random.seed(SEED)
    d = os.path.join(out, "modernbert-tiny")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    copy_st_files(d, 64)
    cfg = ModernBertConfig(vocab_size=500, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                           num_attention_heads=4, hidden_activation="gelu",
                           max_position_embeddings=MAX_SEQ, norm_eps=1e-5, norm_bias=False,
                           pad_token_id=0, bos_token_id=2, eos_token_id=3, cls_token_id=2, sep_token_id=3,
                           global_attn_every_n_layers=3, local_attention=8,
                           global_rope_theta=160000.0, local_rope_theta=10000.0,
                           attention_bias=False, mlp_bias=False, classifier_pooling="mean",
                           architectures=["ModernBertModel"])
    m = ModernBertModel(cfg).eval()
    randomise(m)
    m.save_pretrained(d, safe_serialization=True)
    os.chmod(os.path.join(d, "model.safetensors"), 0o644)
    # the Hub's layout of the keys transformers 5 folds into layer_types / rope_parameters
    c = json.load(open(os.path.join(d, "config.json")))
    for k in ("layer_types", "rope_parameters"):
        c.pop(k, None)
    c.update(global_attn_every_n_layers=3, global_rope_theta=160000.0, local_rope_theta=10000.0)
    c.pop("dtype", None)
    c["torch_dtype"] = "float32"
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f, indent=2, sort_keys=True)
        f.write("\n")
    write_golden(d, "modernbert-tiny", ModernBertModel,
                 {"layer_types": ["full_attention", "sliding_attention", "sliding_attention", "full_attention"],
                  "local_attention": 8,
                  "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 160000.0},
                                      "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/data/encoders"))
    ap.add_argument("--only", choices=["modernbert"], default=None)
    a = ap.parse_args()
    load_inputs()
    torch.set_num_threads(1)
    build_modernbert(a.out)


if __name__ == "__main__":
    main()
