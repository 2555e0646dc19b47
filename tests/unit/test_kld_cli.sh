#!/usr/bin/env bash
# candle perplexity's KL-divergence mode (issue 23, item 5): a base file
# written from stories260K and read back against the same model gives KLD 0
# and 100% top-1 agreement; against its Q8_0 and Q4_0 quantizations a KLD
# above 0, Q4_0's the larger; the mean KLD, top-1 agreement and PPL ratio
# agree with a naive double-precision computation on `candle logits` (all 512
# logits per position); a truncated, corrupted or foreign-version file, a
# different vocabulary, text or context are refused (exit 1) naming what differs.
set -u
CANDLE="${CANDLE:-${CANDLE_BINARY_DIR:?}/bin/candle}"
SRC="${CANDLE_SOURCE_DIR:-$(dirname "$0")/../..}"
MODEL="${CANDLE_SHARED_DIR:-$SRC/../shared}/data/models/stories260K.gguf"
[ -f "$MODEL" ] || { echo "SKIP: $MODEL absent"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
say() { echo "FAIL: $*"; fail=1; }

for t in q8_0 q4_0; do
    "$CANDLE" quantize "$MODEL" "$T/$t.gguf" "$t" >/dev/null 2>&1 || say "quantize $t"
done
python3 - "$T/text" <<'PY'
import random, sys
random.seed(1)
w = "once upon a time there was a little girl named lily she liked to play with her ball in the park one day".split()
open(sys.argv[1], "w").write(" ".join(random.choice(w) for _ in range(600)) + "\n")
PY
ppl() { timeout 120 "$CANDLE" perplexity -t 2 "$@" 2>"$T/err"; }
field() { sed -n "s/^$1 *: *\([-0-9.]*\).*/\1/p" "$2"; }

ppl -m "$MODEL" -f "$T/text" -c 128 --kl-divergence-base "$T/base.kld" >"$T/save" ||
    { say "saving the base:"; cat "$T/err"; }
ppl -m "$MODEL" -f "$T/text" --kl-divergence-base "$T/base.kld" --kl-divergence >"$T/self" ||
    { say "self comparison:"; cat "$T/err"; }
python3 - "$T/self" <<'PY' || fail=1
import re, sys
s = open(sys.argv[1]).read()
kld = float(re.search(r"Mean    KLD: *([-0-9.e]+)", s).group(1))
top = float(re.search(r"Same top p: *([-0-9.e]+)", s).group(1))
ratio = float(re.search(r"Mean PPL\(Q\)/PPL\(base\) *: *([-0-9.e]+)", s).group(1))
pos = int(re.search(r"positions *: *(\d+)", s).group(1))
ok = abs(kld) <= 1e-6 and top == 100.0 and abs(ratio - 1) <= 1e-6 and pos >= 4 * 63 and pos % 63 == 0
print(f"self: {pos} positions, KLD {kld}, same top {top}%, PPL ratio {ratio}")
if not ok: print("FAIL: the model against its own base file"); sys.exit(1)
PY
for t in q8_0 q4_0; do
    ppl -m "$T/$t.gguf" --kl-divergence-base "$T/base.kld" --kl-divergence >"$T/$t" ||
        { say "$t comparison:"; cat "$T/err"; }
done
python3 - "$T/q8_0" "$T/q4_0" <<'PY' || fail=1
import re, sys
k = [float(re.search(r"Mean    KLD: *([-0-9.e]+)", open(f).read()).group(1)) for f in sys.argv[1:]]
print(f"KLD q8_0 {k[0]}, q4_0 {k[1]}")
if not (0 < k[0] < k[1]): print("FAIL: want 0 < KLD(q8_0) < KLD(q4_0)"); sys.exit(1)
PY

# The numbers against a naive computation: one chunk of the whole short text.
echo "Once upon a time there was a little girl named Lily. She loved to play outside in the park with her ball." >"$T/short"
"$CANDLE" logits -m "$MODEL" -p "$(cat "$T/short")" --top 512 >"$T/la.json" 2>"$T/err" || { say "logits"; cat "$T/err"; }
"$CANDLE" logits -m "$T/q4_0.gguf" -p "$(cat "$T/short")" --top 512 >"$T/lb.json" 2>"$T/err" || { say "logits q4_0"; cat "$T/err"; }
n=$(wc -l <"$T/la.json")
ppl -m "$MODEL" -f "$T/short" -c "$n" --kl-divergence-base "$T/short.kld" >/dev/null || { say "short base"; cat "$T/err"; }
ppl -m "$T/q4_0.gguf" -f "$T/short" --kl-divergence-base "$T/short.kld" --kl-divergence >"$T/short.out" ||
    { say "short comparison"; cat "$T/err"; }
python3 - "$T/la.json" "$T/lb.json" "$T/short.out" <<'PY' || fail=1
import json, math, re, sys
def rows(p):
    out = []
    for line in open(p):
        d = json.loads(line)
        v = [0.0] * 512
        for i, l in d["top"]: v[i] = l
        assert len(d["top"]) == 512
        out.append((d["token"], v))
    return out
A, B = rows(sys.argv[1]), rows(sys.argv[2])
n = len(A)
def logp(v):
    m = max(v); s = math.log(sum(math.exp(x - m) for x in v)) + m
    return [x - s for x in v]
kl, same, dn = [], 0, []
for j in range(n // 2, n - 1):
    a, b, nxt = logp(A[j][1]), logp(B[j][1]), A[j + 1][0]
    kl.append(sum(math.exp(x) * (x - y) for x, y in zip(a, b)))
    same += max(range(512), key=lambda i: a[i]) == max(range(512), key=lambda i: b[i])
    dn.append(-b[nxt] + a[nxt])
s = open(sys.argv[3]).read()
got = float(re.search(r"Mean    KLD: *([-0-9.e]+)", s).group(1))
top = float(re.search(r"Same top p: *([-0-9.e]+)", s).group(1))
lnr = float(re.search(r"Mean ln\(PPL\(Q\)/PPL\(base\)\) *: *([-0-9.e]+)", s).group(1))
want, wtop, wlnr = sum(kl) / len(kl), 100.0 * same / len(kl), sum(dn) / len(dn)
print(f"naive over {len(kl)} positions: KLD {want:.6f} (candle {got}), same top {wtop:.4f}% ({top}), "
      f"ln PPL ratio {wlnr:.6f} ({lnr})")
# the base's log-probs are kept to 64/65535 nats at worst, logits printed to 1e-6
if not (abs(got - want) <= 2e-4 + 1e-3 * want and abs(top - wtop) < 1e-3 and abs(lnr - wlnr) <= 2e-5):
    print("FAIL: candle's statistics differ from the naive computation"); sys.exit(1)
PY

refused() { # refused WANT_MESSAGE ARGS...: exit 1 with the message on stderr
    local want="$1"; shift
    timeout 60 "$CANDLE" perplexity "$@" >/dev/null 2>"$T/err"; local rc=$?
    if [ $rc != 1 ] || ! grep -qF -- "$want" "$T/err"; then
        say "candle perplexity $*: rc $rc, want 1 and '$want':"; cat "$T/err"
    fi
}
B="$T/base.kld"
size=$(stat -c %s "$B")
head -c $((size - 1)) "$B" >"$T/trunc.kld"
refused "truncated" -m "$MODEL" --kl-divergence-base "$T/trunc.kld" --kl-divergence
head -c 40 "$B" >"$T/trunc2.kld"
refused "truncated in the header" -m "$MODEL" --kl-divergence-base "$T/trunc2.kld" --kl-divergence
# one byte in the last row's codes flipped: only the checksum sees it
cp "$B" "$T/flip.kld"
printf '\x5a' | dd of="$T/flip.kld" bs=1 seek=$((size - 20)) conv=notrunc status=none
refused "checksum mismatch" -m "$MODEL" --kl-divergence-base "$T/flip.kld" --kl-divergence
cp "$B" "$T/ver.kld"
printf '\x09' | dd of="$T/ver.kld" bs=1 seek=8 conv=notrunc status=none
refused "version 9, this build reads version 1" -m "$MODEL" --kl-divergence-base "$T/ver.kld" --kl-divergence
printf 'GGUF\0\0\0\0' >"$T/magic.kld"; cat "$B" >>"$T/magic.kld"
refused "bad magic" -m "$MODEL" --kl-divergence-base "$T/magic.kld" --kl-divergence
refused "cannot read" -m "$MODEL" --kl-divergence-base "$T/none.kld" --kl-divergence
# The same file rewritten (checksum included): a vocabulary of 600 (each row
# padded with clamped codes), or token 5 of the text changed.
rewrite() { # rewrite IN OUT VOCAB TOKEN5
    python3 - "$@" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
nv, tok5 = int(sys.argv[3]), int(sys.argv[4])
V, ctx, nch, first, ntok = struct.unpack_from("<5Q", d, 16)
rows = nch * (ctx - 1 - first)
toks = bytearray(d[56:56 + 4 * ntok])
if tok5 >= 0: struct.pack_into("<i", toks, 20, tok5)
out = bytearray(d[:16] + struct.pack("<5Q", nv, ctx, nch, first, ntok) + toks)
off = 56 + 4 * ntok
for r in range(rows):
    out += d[off:off + 16 + 2 * V] + b"\xff\xff" * (nv - V); off += 16 + 2 * V
h = 0xcbf29ce484222325
for b in out: h = ((h ^ b) * 0x100000001b3) & (2**64 - 1)
open(sys.argv[2], "wb").write(bytes(out) + struct.pack("<Q", h))
PY
}
rewrite "$B" "$T/v600.kld" 600 -1
refused "the model's vocabulary has 512 tokens, $T/v600.kld was written with 600" -m "$MODEL" --kl-divergence-base "$T/v600.kld" --kl-divergence
rewrite "$B" "$T/tok.kld" 512 7
refused "differs from the tokens of $T/tok.kld at token 5" -m "$MODEL" -f "$T/text" --kl-divergence-base "$T/tok.kld" --kl-divergence
# (the tiny models in tests/data/tiny share stories260K's tokenizer: no other
# tokenizer of 512 tokens is at hand)
echo "Something else entirely." >"$T/other"
refused "tokenizes to" -m "$MODEL" -f "$T/other" --kl-divergence-base "$B" --kl-divergence
refused "-c 64 differs from the context" -m "$MODEL" -c 64 --kl-divergence-base "$B" --kl-divergence
timeout 60 "$CANDLE" perplexity -m "$MODEL" --kl-divergence >/dev/null 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q "needs --kl-divergence-base" "$T/err" || { say "--kl-divergence alone: rc $rc"; cat "$T/err"; }
# a directory in place of the base file is refused before any work
mkdir "$T/out"
refused "exists and is not a regular file" -m "$MODEL" -f "$T/text" --kl-divergence-base "$T/out"

[ $fail = 0 ] && echo "PASS test_kld_cli"
exit $fail
