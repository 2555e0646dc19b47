#!/usr/bin/env python3
"""GPTQ-4 and AWQ-4 checkpoints of a Llama-architecture GGUF, made by the two
methods themselves, for the quality table (bench/quality_table.py --extra).

  bench/quantize_gptq_awq.py --base BASE.gguf --out DIR [--candle build/bin/candle]
      [--calib FILE,...] [--seqs 8] [--seq-len 512] [--group 128]

BASE is the table's base (an F32 GGUF of the llama architecture, llama.cpp's
layout). DIR gets three Hugging Face directories:
  f32            the base as transformers' LlamaForCausalLM (q/k rows un-permuted),
                 checked to give Candle the base's perplexity;
  gptq-4bit-g128 GPTQ (Frantar et al. 2022, as AutoGPTQ runs it: Cholesky of the
                 damped inverse Hessian, blocks of 128 columns, error feedback,
                 groups of 128 found on the updated weights, symmetric, v1
                 packing), layer after layer on the already quantized layers'
                 outputs, all linears of a layer from one calibration pass;
  rtn-4bit-g128  with --methods rtn: the GPTQ format by round to nearest, the
                 control that shows what GPTQ's error feedback gains;
  awq-4bit-g128  AWQ (Lin et al. 2023): per-channel scales s = mean|x|^a
                 searched over a in [0, 1) for q/k/v, gate/up and down (o_proj
                 not: with grouped-query attention v_proj cannot absorb them),
                 folded into the norms and up_proj, then asymmetric groups of
                 128 by round to nearest (no clipping search), GEMM packing.
Non-quantized tensors are written in f16, as the methods' checkpoints are; the
tokenizer is transformers' reading of the GGUF's (tokenizer.json).
Calibration: token ids from `candle tokenize` of the files (default: Debian's
Apache-2.0, MPL-2.0 and Artistic licences, none of them the table's text),
--seqs windows of --seq-len tokens. The packings are
scripts/gen_gptq_awq_models.py's. Needs torch, transformers, numpy, safetensors
and the gguf package (scripts/requirements-ref.txt).
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from gen_gptq_awq_models import pack_awq, pack_gptq  # noqa: E402

LINEARS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
CALIB = ["/usr/share/common-licenses/Apache-2.0", "/usr/share/common-licenses/MPL-2.0",
         "/usr/share/common-licenses/Artistic"]


# ---- the base GGUF as a transformers model ----

def gguf_kv(r, key):
    f = r.fields[key]
    v = f.parts[f.data[0]]
    return bytes(v).decode() if f.types[0].name == "STRING" else v[0].item()


def unpermute(w, n_head):
    """Undo llama.cpp's converter's q/k row permutation (its permute(), inverted)."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def load_base(path):
    import gguf
    from transformers import LlamaConfig, LlamaForCausalLM
    r = gguf.GGUFReader(path)
    arch = gguf_kv(r, "general.architecture")
    assert arch == "llama", f"{path}: architecture {arch}, want llama"
    k = lambda s: gguf_kv(r, f"llama.{s}")  # noqa: E731
    t = {x.name: np.array(x.data) for x in r.tensors}
    assert all(v.dtype == np.float32 for v in t.values()), "the base must be an F32 GGUF"
    nh, nkv = k("attention.head_count"), k("attention.head_count_kv")
    cfg = LlamaConfig(hidden_size=k("embedding_length"), intermediate_size=k("feed_forward_length"),
                      num_hidden_layers=k("block_count"), num_attention_heads=nh, num_key_value_heads=nkv,
                      max_position_embeddings=k("context_length"), rms_norm_eps=k("attention.layer_norm_rms_epsilon"),
                      rope_theta=k("rope.freq_base"), vocab_size=t["token_embd.weight"].shape[0],
                      tie_word_embeddings="output.weight" not in t, hidden_act="silu",
                      bos_token_id=gguf_kv(r, "tokenizer.ggml.bos_token_id"),
                      eos_token_id=gguf_kv(r, "tokenizer.ggml.eos_token_id"))
    sd = {"model.embed_tokens.weight": t["token_embd.weight"], "model.norm.weight": t["output_norm.weight"]}
    if "output.weight" in t:
        sd["lm_head.weight"] = t["output.weight"]
    names = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
             "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
             "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}
    for il in range(cfg.num_hidden_layers):
        for g, h in names.items():
            w = t[f"blk.{il}.{g}.weight"]
            if g == "attn_q":
                w = unpermute(w, nh)
            if g == "attn_k":
                w = unpermute(w, nkv)
            sd[f"model.layers.{il}.{h}.weight"] = w
    model = LlamaForCausalLM(cfg)
    missing, unexpected = model.load_state_dict({a: torch.from_numpy(b.copy()) for a, b in sd.items()}, strict=False)
    assert not unexpected and all("lm_head" in m for m in missing), (missing, unexpected)
    model.tie_weights()
    return model.float().eval()


# ---- calibration ----

def calib_tokens(candle, base, files, seqs, seq_len):
    ids = []
    for f in files:
        out = subprocess.run([candle, "tokenize", "-m", base, "-f", f, "--no-special"], check=True,
                             capture_output=True, text=True).stdout
        ids += [int(x) for x in out.split()]
    n = len(ids) // seq_len
    assert n >= seqs, f"calibration text gives {n} windows of {seq_len}, want {seqs}"
    return torch.tensor(ids[:seqs * seq_len]).reshape(seqs, seq_len)


class Stop(Exception):
    pass


def layer_inputs(model, il, tokens):
    """Inputs of every linear of layer il (and the layer's input), the layers
    before it as they are now: {name: [rows, in]}; the forward stops after it."""
    layer = model.model.layers[il]
    got, hooks = {}, []
    for name in LINEARS:
        mod = layer.get_submodule(name)
        hooks.append(mod.register_forward_hook(
            lambda m, a, o, name=name: got.setdefault(name, []).append(a[0].reshape(-1, a[0].shape[-1]).detach())))

    def stop(m, a, o):
        raise Stop

    hooks.append(layer.register_forward_hook(stop))
    with torch.no_grad():
        for s in tokens:
            try:
                model(input_ids=s[None])
            except Stop:
                pass
    for h in hooks:
        h.remove()
    return {k: torch.cat(v) for k, v in got.items()}


# ---- quantizers ----

def f16(x):
    return x.to(torch.float16).to(torch.float32)


def sym_params(w, maxq):
    """AutoGPTQ's symmetric quantizer per row of w [out, n]: f16 scale, zero (maxq + 1) / 2."""
    xmax = w.abs().amax(1)
    scale = f16(torch.where(xmax == 0, torch.ones_like(xmax), 2 * xmax / maxq))
    return scale, torch.full_like(scale, (maxq + 1) // 2)


def asym_params(w, maxq):
    """AWQ's: f16 scale (max - min) / maxq, integer zero -round(min / scale) in [0, maxq]."""
    mx, mn = w.amax(1), w.amin(1)
    scale = f16((mx - mn).clamp(min=1e-5) / maxq)
    return scale, (-torch.round(mn / scale)).clamp(0, maxq)


def rtn(w, scale, zero, maxq):
    q = torch.clamp(torch.round(w / scale[:, None]) + zero[:, None], 0, maxq)
    return q, scale[:, None] * (q - zero[:, None])


def gptq(W, H, group, maxq=15, blocksize=128, percdamp=0.01):
    """GPTQ of W [out, in] with Hessian H [in, in]: codes [in, out], zeros and
    f16 scales [groups, out], and the dequantized weight."""
    W, H = W.clone().double(), H.clone().double()
    out_f, in_f = W.shape
    dead = torch.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    H += percdamp * torch.mean(torch.diag(H)) * torch.eye(in_f, dtype=H.dtype)
    Hinv = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(H)), upper=True)
    Q, codes = torch.zeros_like(W), torch.zeros(in_f, out_f)
    n_groups = (in_f + group - 1) // group  # the last one may be short (576 = 4.5 x 128)
    scales, zeros = torch.zeros(n_groups, out_f), torch.zeros(n_groups, out_f)
    for i1 in range(0, in_f, blocksize):
        i2 = min(i1 + blocksize, in_f)
        W1, Err1, Hinv1 = W[:, i1:i2].clone(), torch.zeros(out_f, i2 - i1, dtype=W.dtype), Hinv[i1:i2, i1:i2]
        for i in range(i2 - i1):
            c = i1 + i
            if c % group == 0:
                # the group's parameters from its columns as updated so far
                cols = torch.cat([W1[:, i:], W[:, i2:]], 1)[:, :group].float()
                sc, z = sym_params(cols, maxq)
                scales[c // group], zeros[c // group] = sc, z
            w = W1[:, i]
            q, dq = rtn(w.float()[:, None], scales[c // group], zeros[c // group], maxq)
            codes[c], Q[:, c] = q[:, 0], dq[:, 0].double()
            err = (w - Q[:, c]) / Hinv1[i, i]
            W1[:, i:] -= err[:, None] @ Hinv1[i, i:][None, :]
            Err1[:, i] = err
        W[:, i2:] -= Err1 @ Hinv[i1:i2, i2:]
    return codes, zeros, scales, Q.float()


def awq_quant(W, group, maxq=15):
    """Asymmetric round-to-nearest of W [out, in] in groups along the input."""
    out_f, in_f = W.shape
    q, dq = torch.zeros_like(W), torch.zeros_like(W)
    zs, scs = [], []
    for c0 in range(0, in_f, group):  # the last group may be short
        g = W[:, c0:c0 + group]
        sc, z = asym_params(g, maxq)
        q[:, c0:c0 + group], dq[:, c0:c0 + group] = rtn(g, sc, z, maxq)
        zs.append(z)
        scs.append(sc)
    return q.T.contiguous(), torch.stack(zs), torch.stack(scs), dq


def awq_search(X, Ws, group, grid=20):
    """AWQ's scale search: s = mean|x|^a (normalised) minimising the output error
    of every weight in Ws (which share the input X [rows, in])."""
    xm = X.abs().mean(0)
    ref = [X @ w.T for w in Ws]
    best, best_s = None, torch.ones_like(xm)
    for k in range(grid):
        a = k / grid
        s = xm.pow(a).clamp(min=1e-4)
        s = s / (s.max() * s.min()).sqrt()
        err = sum(((X / s) @ awq_quant(w * s, group)[3].T - r).pow(2).mean().item() for w, r in zip(Ws, ref))
        if best is None or err < best:
            best, best_s = err, s
    return best_s


# ---- writing ----

def save_dir(model, d: Path, tokenizer, qc=None, packed=None):
    from safetensors.torch import save_file
    d.mkdir(parents=True, exist_ok=True)
    model.config.save_pretrained(d)
    if qc:
        cfg = json.loads((d / "config.json").read_text())
        cfg["quantization_config"] = qc
        (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    tokenizer.save_pretrained(d)
    sd = {}
    for k, v in model.state_dict().items():
        if model.config.tie_word_embeddings and k == "lm_head.weight":
            continue
        base = k[:-len(".weight")]
        if packed and base in packed:
            for part, arr in packed[base].items():
                sd[f"{base}.{part}"] = torch.from_numpy(np.ascontiguousarray(arr))
        else:
            sd[k] = v.detach().to(torch.float16 if qc else torch.float32).contiguous()
    save_file(sd, str(d / "model.safetensors"))


def run_gptq(model, tokens, group, rtn_only=False):
    """GPTQ; rtn_only: the same format by round to nearest (GPTQ with H = I,
    whose inverse has no off-diagonal terms to feed errors forward)."""
    packed = {}
    for il, layer in enumerate(model.model.layers):
        X = None if rtn_only else layer_inputs(model, il, tokens)
        for name in LINEARS:
            lin = layer.get_submodule(name)
            if rtn_only:
                H = torch.eye(lin.in_features, dtype=torch.float64)
            else:
                x = X[name].double()
                H = 2 * x.T @ x / x.shape[0]
            codes, z, sc, dq = gptq(lin.weight.data, H, group)
            lin.weight.data = dq
            g_idx = (np.arange(lin.in_features) // group).astype(np.int64)
            packed[f"model.layers.{il}.{name}"], _ = pack_gptq(codes.long().numpy(), z.long().numpy(),
                                                               sc.numpy().astype(np.float16), g_idx, 4, True)
        print(f"gptq: layer {il} done", file=sys.stderr, flush=True)
    return packed


def run_awq(model, tokens, group):
    packed = {}
    for il, layer in enumerate(model.model.layers):
        X = layer_inputs(model, il, tokens)
        att, mlp = layer.self_attn, layer.mlp
        with torch.no_grad():
            s = awq_search(X["self_attn.q_proj"], [att.q_proj.weight, att.k_proj.weight, att.v_proj.weight], group)
            layer.input_layernorm.weight /= s
            for lin in (att.q_proj, att.k_proj, att.v_proj):
                lin.weight *= s
            s = awq_search(X["mlp.gate_proj"], [mlp.gate_proj.weight, mlp.up_proj.weight], group)
            layer.post_attention_layernorm.weight /= s
            for lin in (mlp.gate_proj, mlp.up_proj):
                lin.weight *= s
            s = awq_search(X["mlp.down_proj"], [mlp.down_proj.weight], group)
            mlp.up_proj.weight /= s[:, None]
            mlp.down_proj.weight *= s
            for name in LINEARS:
                lin = layer.get_submodule(name)
                q, z, sc, dq = awq_quant(lin.weight.data.float(), group)
                lin.weight.data = dq
                packed[f"model.layers.{il}.{name}"], _ = pack_awq(q.long().numpy(), z.long().numpy(),
                                                                  sc.numpy().astype(np.float16))
        print(f"awq: layer {il} done", file=sys.stderr, flush=True)
    return packed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--candle", default="build/bin/candle")
    ap.add_argument("--calib", default=",".join(CALIB))
    ap.add_argument("--seqs", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--group", type=int, default=128)
    ap.add_argument("--methods", default="gptq,awq")
    a = ap.parse_args()
    torch.manual_seed(0)
    tokens = calib_tokens(a.candle, a.base, a.calib.split(","), a.seqs, a.seq_len)
    from transformers import AutoTokenizer
    base = Path(a.base).resolve()
    tok = AutoTokenizer.from_pretrained(str(base.parent), gguf_file=base.name)
    save_dir(load_base(a.base), a.out / "f32", tok)
    g = a.group
    if "gptq" in a.methods:
        m = load_base(a.base)
        qc = {"quant_method": "gptq", "bits": 4, "group_size": g, "sym": True, "desc_act": False,
              "checkpoint_format": "gptq", "damp_percent": 0.01, "true_sequential": False}
        save_dir(m, a.out / f"gptq-4bit-g{g}", tok, qc, run_gptq(m, tokens, g))
    if "rtn" in a.methods:  # the control: GPTQ's format without its method
        m = load_base(a.base)
        qc = {"quant_method": "gptq", "bits": 4, "group_size": g, "sym": True, "desc_act": False,
              "checkpoint_format": "gptq"}
        save_dir(m, a.out / f"rtn-4bit-g{g}", tok, qc, run_gptq(m, tokens, g, rtn_only=True))
    if "awq" in a.methods:
        m = load_base(a.base)
        qc = {"quant_method": "awq", "bits": 4, "group_size": g, "zero_point": True, "version": "gemm"}
        save_dir(m, a.out / f"awq-4bit-g{g}", tok, qc, run_awq(m, tokens, g))


if __name__ == "__main__":
    main()
