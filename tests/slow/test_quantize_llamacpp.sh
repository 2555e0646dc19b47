#!/usr/bin/env bash
# `candle quantize` against llama.cpp's own quantizer (llama_model_quantize
# through the llama-cpp-python package), on two synthetic 8-layer llama
# files (n_gqa 4 and 1, every row a multiple of 256) and on stories260K
# (rows of 64 and 172: the fallbacks), for every file type:
#  - each tensor gets the same dtype (the mixture rules and fallbacks agree);
#  - general.file_type is the same and all other metadata keys match;
#  - tensors in types whose quantizers match llama.cpp's bit for bit
#    (f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0) have identical bytes;
#  - in the other types the error against the f32 weights (through the gguf
#    package's reference dequantizers) is within 10% of llama.cpp's.
# Prints SKIP and exits 77 (a CTest skip) when llama_cpp or gguf cannot be
# imported.
set -euo pipefail

if ! python3 -c 'import llama_cpp, gguf' 2>/dev/null; then
    echo "SKIP: test_quantize_llamacpp: python3 cannot import llama_cpp and gguf"
    exit 77
fi
CANDLE="${CANDLE:-${CANDLE_BINARY_DIR:?}/bin/candle}"
src="${CANDLE_SOURCE_DIR:-.}"
stories=""
for m in "${CANDLE_SHARED_DIR:-$src/../shared}/data/models/stories260K.gguf"; do
    if [ -f "$m" ]; then stories="$m"; break; fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 - "$CANDLE" "$tmp" "$stories" <<'EOF'
import ctypes, os, subprocess, sys
import numpy as np
import gguf, llama_cpp
from gguf import GGUFReader
from gguf.quants import dequantize

candle, tmp, stories = sys.argv[1], sys.argv[2], sys.argv[3]
FTYPES = {"F32": 0, "F16": 1, "BF16": 32, "Q4_0": 2, "Q4_1": 3, "Q5_0": 8, "Q5_1": 9,
          "Q8_0": 7, "Q2_K": 10, "Q3_K_S": 11, "Q3_K_M": 12, "Q3_K_L": 13, "Q4_K_S": 14,
          "Q4_K_M": 15, "Q5_K_S": 16, "Q5_K_M": 17, "Q6_K": 18, "IQ4_NL": 25, "IQ4_XS": 30}
EXACT = {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"}

def make_model(path, n_kv_head):
    D, FF, H, V, L = 256, 256, 8, 256, 8
    kv = D // H * n_kv_head
    w = gguf.GGUFWriter(path, "llama")
    w.add_block_count(L); w.add_embedding_length(D); w.add_feed_forward_length(FF)
    w.add_head_count(H); w.add_head_count_kv(n_kv_head); w.add_context_length(256)
    w.add_rope_dimension_count(D // H); w.add_layer_norm_rms_eps(1e-5)
    rng = np.random.default_rng(n_kv_head)
    m = lambda r, c: rng.standard_normal((r, c), dtype=np.float32) * 0.02
    w.add_tensor("token_embd.weight", m(V, D))
    w.add_tensor("output_norm.weight", np.ones(D, np.float32))
    w.add_tensor("output.weight", m(V, D))
    for l in range(L):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", np.ones(D, np.float32))
        for n, r, c in (("attn_q", D, D), ("attn_k", kv, D), ("attn_v", kv, D),
                        ("attn_output", D, D)):
            w.add_tensor(p + n + ".weight", m(r, c))
        w.add_tensor(p + "ffn_norm.weight", np.ones(D, np.float32))
        for n, r, c in (("ffn_gate", FF, D), ("ffn_up", FF, D), ("ffn_down", D, FF)):
            w.add_tensor(p + n + ".weight", m(r, c))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()

@llama_cpp.llama_log_callback
def quiet(level, text, user_data):  # llama.cpp logs every tensor
    pass
llama_cpp.llama_log_set(quiet, ctypes.c_void_p(0))

def llama_quantize(inp, out, ftype):
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = ftype
    p.nthread = 2
    return llama_cpp.llama_model_quantize(inp.encode(), out.encode(), ctypes.byref(p))

def nmse(t, ref):
    got = dequantize(t.data, t.tensor_type).reshape(-1).astype(np.float64)
    want = ref.reshape(-1).astype(np.float64)
    return ((got - want) ** 2).sum() / max((want ** 2).sum(), 1e-30)

models = [os.path.join(tmp, "gqa4.gguf"), os.path.join(tmp, "mha.gguf")]
make_model(models[0], 2)
make_model(models[1], 8)
if stories:
    models.append(stories)
failures = 0
def fail(msg):
    global failures
    failures += 1
    print("FAIL:", msg, file=sys.stderr)

for model in models:
    ref = {t.name: np.array(t.data, dtype=np.float32) for t in GGUFReader(model).tensors}
    for name, ft in FTYPES.items():
        ours, theirs = os.path.join(tmp, "ours.gguf"), os.path.join(tmp, "theirs.gguf")
        r = subprocess.run([candle, "quantize", "-q", model, ours, name], capture_output=True)
        if r.returncode != 0:
            fail(f"{model} {name}: candle quantize exit {r.returncode}: {r.stderr.decode()[-300:]}")
            continue
        if llama_quantize(model, theirs, ft) != 0:
            fail(f"{model} {name}: llama_model_quantize failed")
            continue
        a, b = GGUFReader(ours), GGUFReader(theirs)
        ka = {k: f for k, f in a.fields.items() if not k.startswith("GGUF.")}
        kb = {k: f for k, f in b.fields.items() if not k.startswith("GGUF.")}
        if set(ka) != set(kb):
            fail(f"{model} {name}: keys differ: {set(ka) ^ set(kb)}")
        if int(ka["general.file_type"].contents()) != int(kb["general.file_type"].contents()):
            fail(f"{model} {name}: general.file_type differs")
        tb = {t.name: t for t in b.tensors}
        e_ours, e_theirs = {}, {}
        for t in a.tensors:
            u = tb[t.name]
            if t.tensor_type != u.tensor_type:
                fail(f"{model} {name}: {t.name} is {t.tensor_type.name}, llama.cpp {u.tensor_type.name}")
                continue
            ty = t.tensor_type.name
            if ty in EXACT:
                if np.asarray(t.data).tobytes() != np.asarray(u.data).tobytes():
                    fail(f"{model} {name}: {t.name} ({ty}) bytes differ from llama.cpp")
            else:
                e_ours.setdefault(ty, []).append(nmse(t, ref[t.name]))
                e_theirs.setdefault(ty, []).append(nmse(u, ref[t.name]))
        for ty in e_ours:
            mo, mt = float(np.mean(e_ours[ty])), float(np.mean(e_theirs[ty]))
            if mo > 1.1 * mt:
                fail(f"{model} {name}: {ty} nmse {mo:.4g} vs llama.cpp {mt:.4g}")
print(f"test_quantize_llamacpp: {len(models)} models x {len(FTYPES)} file types compared")
sys.exit(1 if failures else 0)
EOF
