#!/usr/bin/env bash
# GPTQ-4 / AWQ-4 speed against Q4_0 on the same shape, in one run:
#   bench/gptq_compare.sh CANDLE MODEL [MODEL ...]
# MODEL: a GGUF file or a Hugging Face directory (bench/make_gptq_model.py
# makes TinyLlama-shaped GPTQ and AWQ ones; `candle quantize DIR q4_0.gguf
# q4_0` of the symmetric GPTQ one is the Q4_0 reference, written first).
# Env: THREADS (2), ROUNDS (3), REPS (2), TG (64), PP (128).
#
# ROUNDS rounds of `candle bench -o json` over every model, the order rotating
# from round to round so each sees the same machine state on average. Prints
# per model: the bytes of the weights as loaded (model_size), the median
# prompt and generation t/s, and the median over rounds of its rate divided by
# the first model's in the same round.
set -u
candle="$1"
shift
t="${THREADS:-2}" rounds="${ROUNDS:-3}" reps="${REPS:-2}" tg="${TG:-64}" pp="${PP:-128}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
models=("$@")
echo "# GPTQ/AWQ vs Q4_0: candle bench -t $t -p $pp -n $tg, $rounds rounds x $reps reps; $(date -u '+%F %H:%M UTC')"
echo "cpu: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1), $(nproc) cores"
for ((r = 0; r < rounds; r++)); do
    for ((k = 0; k < ${#models[@]}; k++)); do
        i=$(((k + r) % ${#models[@]}))
        "$candle" bench -m "${models[$i]}" -t "$t" -p "$pp" -n "$tg" -r "$reps" -o json \
            >"$tmp/$i.$r.json" 2>"$tmp/$i.$r.err" || { echo "failed: ${models[$i]}"; cat "$tmp/$i.$r.err"; }
    done
done
python3 - "$tmp" "$rounds" "${models[@]}" <<'EOF'
import json, statistics, sys, os
tmp, rounds, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def run(i, r):
    """(pp t/s, tg t/s, model bytes) of model i in round r (medians of its reps)."""
    try:
        runs = json.load(open(f"{tmp}/{i}.{r}.json"))
    except (OSError, ValueError):
        return None, None, 0
    pp = [t for x in runs if x["n_prompt"] for t in x["samples_ts"]]
    tg = [t for x in runs if not x["n_prompt"] for t in x["samples_ts"]]
    size = runs[0]["model_size"] if runs else 0
    return (statistics.median(pp) if pp else None), (statistics.median(tg) if tg else None), size

def med(v):
    v = [x for x in v if x]
    return statistics.median(v) if v else 0

res = [[run(i, r) for r in range(rounds)] for i in range(len(models))]
print("| model | weights MiB | pp t/s | tg t/s | pp vs first | tg vs first |")
print("|---|---:|---:|---:|---:|---:|")
for i, m in enumerate(models):
    size = max(x[2] for x in res[i])
    # each round's rate over the first model's in the same round: a drifting machine
    # (bandwidth, load) moves both alike
    ratio = [med([a[k] / b[k] for a, b in zip(res[i], res[0]) if a[k] and b[k]]) for k in (0, 1)]
    print(f"| {os.path.basename(m.rstrip('/'))} | {size / 2**20:.0f} | {med(x[0] for x in res[i]):.1f} | "
          f"{med(x[1] for x in res[i]):.2f} | {ratio[0]:.3f}x | {ratio[1]:.3f}x |")
EOF
