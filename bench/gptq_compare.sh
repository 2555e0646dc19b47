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
# prompt and generation t/s over all samples, and the ratio of those medians
# to the first model's.
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
python3 - "$tmp" "${models[@]}" <<'EOF'
import glob, json, statistics, sys, os
tmp, models = sys.argv[1], sys.argv[2:]
rows = []
for i, m in enumerate(models):
    pp, tg, size = [], [], 0
    for f in glob.glob(f"{tmp}/{i}.*.json"):
        try:
            runs = json.load(open(f))
        except ValueError:
            continue
        for x in runs:
            size = x["model_size"]
            (pp if x["n_prompt"] else tg).extend(x["samples_ts"])
    rows.append((os.path.basename(m.rstrip("/")), size, statistics.median(pp) if pp else 0,
                 statistics.median(tg) if tg else 0))
print("| model | weights MiB | pp t/s | tg t/s | pp vs first | tg vs first |")
print("|---|---:|---:|---:|---:|---:|")
for name, size, pp, tg in rows:
    print(f"| {name} | {size / 2**20:.0f} | {pp:.1f} | {tg:.2f} | {pp / rows[0][2]:.2f}x | {tg / rows[0][3]:.2f}x |"
          if rows[0][2] and rows[0][3] else f"| {name} | {size / 2**20:.0f} | {pp:.1f} | {tg:.2f} | - | - |")
EOF
