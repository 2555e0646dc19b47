#!/usr/bin/env python3
"""Reference data for the RoPE encoders of issue 19 item 1: ModernBERT and NomicBERT.

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

nomic-bert-tiny/: a random NomicBertModel (transformers 5's own port of
nomic-embed-text's remote code: post-norm LayerNorm blocks, RoPE base 1000 over
the whole head, SwiGLU silu(gate) * up, no projection biases, token types, an
embedding LayerNorm) with hidden 64, 4 heads, 2 layers, intermediate 96, saved in
the layout nomic-ai/nomic-embed-text-v1.5 ships for its remote code
(encoder.layers.N.attn.Wqkv fused q|k|v, attn.out_proj, mlp.fc11 = up,
mlp.fc12 = gate, mlp.fc2, norm1, norm2, emb_ln; config.json with n_embd, n_head,
n_layer, n_inner, n_positions, rotary_emb_base, rotary_emb_fraction,
activation_function swiglu, prenorm false, ...). The golden comes from the
transformers-layout save; the script checks that transformers, given the
Hub-layout weights (its conversion mapping renames and splits Wqkv), computes
the same hidden states, which checks the renaming.
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


def write_golden(d, name, model_cls, extra_cfg, out_dir=None, extra=None):
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
    g.update(extra or {})
    with open(os.path.join(out_dir or d, "golden.json"), "w") as f:
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


def nomic_hub_state(sd):
    """transformers' NomicBertModel state dict -> the remote code's names."""
    out = {}
    n_layer = 1 + max(int(k.split(".")[1]) for k in sd if k.startswith("layers."))
    ren = {"self_attn.o_proj": "attn.out_proj", "post_attention_layernorm": "norm1",
           "post_mlp_layernorm": "norm2", "mlp.up_proj": "mlp.fc11", "mlp.gate_proj": "mlp.fc12",
           "mlp.down_proj": "mlp.fc2"}
    for k, v in sd.items():
        if k.startswith("embeddings.LayerNorm."):
            out["emb_ln." + k.split(".")[-1]] = v
        elif k.startswith("layers."):
            il, rest = k.split(".", 2)[1:]
            if rest.startswith("self_attn.") and rest[10] in "qkv" and rest[11:18] == "_proj.w":
                continue
            for a, b in ren.items():
                if rest.startswith(a + "."):
                    rest = b + rest[len(a):]
            out["encoder.layers.%s.%s" % (il, rest)] = v
        else:
            out[k] = v
    for il in range(n_layer):
        p = "layers.%d.self_attn." % il
        out["encoder.layers.%d.attn.Wqkv.weight" % il] = torch.cat(
            [sd[p + "q_proj.weight"], sd[p + "k_proj.weight"], sd[p + "v_proj.weight"]], 0)
    return {k: v.contiguous() for k, v in sorted(out.items())}


def build_nomic(out):
    import tempfile
    from safetensors.torch import save_file
    from transformers import NomicBertConfig, NomicBertModel
    torch.manual_seed(SEED + 1)
    d = os.path.join(out, "nomic-bert-tiny")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    copy_st_files(d, 64)
    cfg = NomicBertConfig(vocab_size=500, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                          intermediate_size=96, hidden_act="silu", max_position_embeddings=MAX_SEQ,
                          type_vocab_size=2, layer_norm_eps=1e-12, pad_token_id=0,
                          rope_parameters={"rope_type": "default", "rope_theta": 1000.0},
                          architectures=["NomicBertModel"])
    m = NomicBertModel(cfg).eval()
    randomise(m)
    tmp = tempfile.mkdtemp(prefix="nomic-tiny-")
    m.save_pretrained(tmp, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(d, f), os.path.join(tmp, f))
    sd = {k: v for k, v in m.state_dict().items()}
    hub = nomic_hub_state(sd)
    save_file(hub, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    os.chmod(os.path.join(d, "model.safetensors"), 0o644)
    # transformers given the Hub-layout weights (its own config): the same model
    chk = tempfile.mkdtemp(prefix="nomic-hub-")
    shutil.copy(os.path.join(tmp, "config.json"), os.path.join(chk, "config.json"))
    shutil.copy(os.path.join(d, "model.safetensors"), os.path.join(chk, "model.safetensors"))
    m = NomicBertModel.from_pretrained(tmp, dtype=torch.float32, attn_implementation="eager").eval()
    m2 = NomicBertModel.from_pretrained(chk, dtype=torch.float32, attn_implementation="eager").eval()
    t = torch.tensor([list(range(2, 40))])
    with torch.no_grad():
        a = m(input_ids=t).last_hidden_state
        b = m2(input_ids=t).last_hidden_state
    layout_diff = float((a - b).abs().max())
    assert layout_diff == 0.0, layout_diff
    hub_cfg = {
        "activation_function": "swiglu", "architectures": ["NomicBertModel"],
        "auto_map": {"AutoConfig": "nomic-ai/nomic-bert-2048--configuration_hf_nomic_bert.NomicBertConfig",
                     "AutoModel": "nomic-ai/nomic-bert-2048--modeling_hf_nomic_bert.NomicBertModel"},
        "bos_token_id": None, "causal": False, "dense_seq_output": True, "embd_pdrop": 0.0,
        "eos_token_id": None, "fused_bias_fc": True, "fused_dropout_add_ln": True,
        "initializer_range": 0.02, "layer_norm_epsilon": 1e-12, "max_trained_positions": MAX_SEQ,
        "mlp_fc1_bias": False, "mlp_fc2_bias": False, "model_type": "nomic_bert",
        "n_embd": 64, "n_head": 4, "n_inner": 96, "n_layer": 2, "n_positions": MAX_SEQ,
        "pad_vocab_size_multiple": 1, "parallel_block": False, "parallel_block_tied_norm": False,
        "prenorm": False, "qkv_proj_bias": False, "reorder_and_upcast_attn": False, "resid_pdrop": 0.0,
        "rotary_emb_base": 1000, "rotary_emb_fraction": 1.0, "rotary_emb_interleaved": False,
        "rotary_emb_scale_base": None, "rotary_scaling_factor": None, "scale_attn_by_inverse_layer_idx": False,
        "scale_attn_weights": True, "summary_activation": None, "summary_first_dropout": 0.0,
        "summary_proj_to_labels": True, "summary_type": "cls_index", "summary_use_proj": True,
        "torch_dtype": "float32", "type_vocab_size": 2, "use_cache": True, "use_flash_attn": True,
        "use_rms_norm": False, "use_xentropy": True, "vocab_size": 500,
    }
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(hub_cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    write_golden(tmp, "nomic-bert-tiny", NomicBertModel, {}, out_dir=d,
                 extra={"layout_check_max_abs_diff": layout_diff})
    shutil.rmtree(tmp)
    shutil.rmtree(chk)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/data/encoders"))
    ap.add_argument("--only", choices=["modernbert", "nomic"], default=None)
    a = ap.parse_args()
    load_inputs()
    torch.set_num_threads(1)
    if a.only in (None, "modernbert"):
        build_modernbert(a.out)
    if a.only in (None, "nomic"):
        build_nomic(a.out)


if __name__ == "__main__":
    main()
