#!/usr/bin/env bash
# Mixture-of-experts speed, Candle against llama.cpp's llama-bench, in one run:
#   bench/moe_compare.sh CANDLE LLAMA_BIN_DIR MODEL.gguf [MODEL.gguf ...]
# Env: THREADS (2), ROUNDS (3), REPS (2, repetitions per run), TG (64),
# PP (128,512: comma list), OUT (a directory to keep the JSON in), PY (a
# python with the gguf package, default /work/venv-ref/bin/python),
# NO_MMAP=1 (weights read into memory: candle --no-mmap, llama-bench -mmp 0).
#
# Per model, ROUNDS rounds of `candle bench --roofline -o json` and
# `llama-bench -o json` (OMP_WAIT_POLICY=PASSIVE unless set), same -t, -p,
# -n, -r; the order alternates from round to round, so both see the same
# machine state on average. Each Candle run ends with the read-bandwidth
# probe (bench_read_bandwidth: anonymous memory, n_threads threads), so the
# roofline is measured in the same run.
#
# Roofline of generation: bandwidth / bytes of the weights one token reads:
# every tensor's bytes, except the stacked experts (*_exps), counted at
# expert_used_count / expert_count of their bytes (the chosen experts), and
# the token embedding at one row when the model has a separate output
# matrix. Prints a table per model: t/s min / median / max over all samples,
# the ratios of the medians and of the maxima (the least disturbed runs on
# a shared machine), and % of that roofline (medians).
set -u
candle="$1" lbin="$2"
shift 2
t="${THREADS:-2}" rounds="${ROUNDS:-3}" reps="${REPS:-2}" tg="${TG:-64}" pp="${PP:-128,512}"
py="${PY:-/work/venv-ref/bin/python}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
out="${OUT:-}"
cmm=() lmm=()
[ -n "${NO_MMAP:-}" ] && cmm=(--no-mmap) lmm=(-mmp 0)
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
[ -n "$out" ] && mkdir -p "$out"

echo "# MoE: Candle vs llama.cpp, -t $t -p $pp -n $tg, $rounds rounds x $reps reps; $(date -u '+%F %H:%M UTC')"
echo "mode: ${NO_MMAP:+weights in memory (candle --no-mmap, llama-bench -mmp 0)}${NO_MMAP:-mmap}"
echo "cpu: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1), $(nproc) cores; OMP_WAIT_POLICY=$OMP_WAIT_POLICY"
for model in "$@"; do
    name="$(basename "$model" .gguf)"
    d="$tmp/$name"
    mkdir -p "$d"
    cat "$model" >/dev/null # into the page cache, so no run reads the disk
    echo
    echo "## $name (load before $(cut -d' ' -f1-3 /proc/loadavg))"
    for r in $(seq "$rounds"); do
        c=("$candle" bench -m "$model" -t "$t" -p "$pp" -n "$tg" -r "$reps" --roofline -o json "${cmm[@]}")
        l=("$lbin/llama-bench" -m "$model" -t "$t" -p "$pp" -n "$tg" -r "$reps" -o json "${lmm[@]}")
        if [ $((r % 2)) = 1 ]; then
            "${c[@]}" >"$d/candle.$r.json" 2>"$d/candle.$r.err" || echo "candle failed (round $r): $(tail -1 "$d/candle.$r.err")"
            "${l[@]}" >"$d/llama.$r.json" 2>"$d/llama.$r.err" || echo "llama-bench failed (round $r): $(tail -1 "$d/llama.$r.err")"
        else
            "${l[@]}" >"$d/llama.$r.json" 2>"$d/llama.$r.err" || echo "llama-bench failed (round $r): $(tail -1 "$d/llama.$r.err")"
            "${c[@]}" >"$d/candle.$r.json" 2>"$d/candle.$r.err" || echo "candle failed (round $r): $(tail -1 "$d/candle.$r.err")"
        fi
    done
    [ -n "$out" ] && cp -r "$d" "$out/"
    "$py" - "$model" "$d" <<'EOF'
import glob, json, statistics as st, sys
import gguf

model, d = sys.argv[1], sys.argv[2]
r = gguf.GGUFReader(model)
arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
def kv(k):
    f = r.fields.get(f"{arch}.{k}")
    return int(f.parts[-1][0]) if f else 0
n_exp, n_used = kv("expert_count"), kv("expert_used_count")
names = {t.name for t in r.tensors}
per_tok = experts = 0
for t in r.tensors:
    b = int(t.n_bytes)
    if t.name.endswith("_exps.weight") and n_exp:
        b = b * n_used // n_exp
        experts += b
    elif t.name == "token_embd.weight" and "output.weight" in names:
        b //= int(t.shape[-1])  # one row; gguf shape is innermost-first
    per_tok += b

def load(kind):
    rows = []
    for f in sorted(glob.glob(f"{d}/{kind}.*.json")):
        try:
            rows += json.load(open(f))
        except ValueError:
            pass
    return rows

cand, lcpp = load("candle"), load("llama")
bw = [x["bw_read_gbs"] for x in cand if "bw_read_gbs" in x]
bw = sorted(set(bw))
bwm = st.median(bw) * 1e9 if bw else 0
print(f"weights read per generated token: {per_tok / 2**20:.1f} MiB (experts {experts / 2**20:.1f} MiB, "
      f"{n_used} of {n_exp}); read bandwidth {', '.join(f'{b:.1f}' for b in bw)} GB/s "
      f"(median {bwm / 1e9:.1f}): roofline {bwm / per_tok if per_tok else 0:.1f} t/s")
print("| test | Candle t/s min / med / max | llama.cpp t/s min / med / max | ratio (med) | ratio (max) | Candle % roofline | llama.cpp % roofline |")
print("|---|---|---|---:|---:|---:|---:|")
tests = sorted({(x["n_prompt"], x["n_gen"]) for x in cand + lcpp}, key=lambda p: (p[1] > 0, p))
for np_, ng in tests:
    def samples(rows):
        return sorted(s for x in rows if x["n_prompt"] == np_ and x["n_gen"] == ng for s in x["samples_ts"])
    c, l = samples(cand), samples(lcpp)
    fmt = lambda s: f"{s[0]:.2f} / {st.median(s):.2f} / {s[-1]:.2f}" if s else "-"
    ratio = f"{st.median(c) / st.median(l):.2f}x" if c and l else "-"
    rmax = f"{c[-1] / l[-1]:.2f}x" if c and l else "-"
    roof = lambda s: f"{100 * st.median(s) * per_tok / bwm:.0f}%" if s and ng and bwm else ""
    name = f"pp{np_}" if np_ else f"tg{ng}"
    print(f"| {name} | {fmt(c)} | {fmt(l)} | {ratio} | {rmax} | {roof(c)} | {roof(l)} |")
EOF
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
