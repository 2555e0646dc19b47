#!/usr/bin/env bash
# Speculative decoding against plain decoding, interleaved in one run:
#   bench/speculative.sh CANDLE MODEL PROMPT_FILE N_TOKENS REPEATS "OPTS" ["OPTS" ...]
# Each OPTS (e.g. "--lookup 3", "--draft-model D.gguf --draft-max 8") runs
# REPEATS times beside a plain run (greedy, -t ${THREADS:-2}); prints the
# generation rate of each, the ratio of the medians, the acceptance and
# whether the text equals the plain run's.
set -u
candle="$1" model="$2" prompt="$3" n="$4" reps="$5"
shift 5
t="${THREADS:-2}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
rate() { sed -n 's/^generation: .* tokens\/s$/&/p' "$1" | sed 's/.*ms, \([0-9.]*\) tokens\/s/\1/'; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
printf "| mode | tok/s (runs) | median | vs plain | acceptance | tokens/step | same text |\n|---|---|---:|---:|---:|---:|---|\n"
for opts in "$@"; do
    : >"$tmp/plain.r"; : >"$tmp/spec.r"
    for r in $(seq "$reps"); do
        "$candle" run -m "$model" -f "$prompt" -n "$n" --temp 0 -s 1 -t "$t" >"$tmp/plain.out" 2>"$tmp/plain.err"
        rate "$tmp/plain.err" >>"$tmp/plain.r"
        # shellcheck disable=SC2086
        "$candle" run -m "$model" -f "$prompt" -n "$n" --temp 0 -s 1 -t "$t" $opts >"$tmp/spec.out" 2>"$tmp/spec.err"
        rate "$tmp/spec.err" >>"$tmp/spec.r"
    done
    mp=$(median <"$tmp/plain.r") ms=$(median <"$tmp/spec.r")
    acc=$(sed -n 's/^speculative: .* accepted (\([0-9.]*%\)).*/\1/p' "$tmp/spec.err")
    tps=$(sed -n 's/.*, \([0-9.]*\) tokens\/step/\1/p' "$tmp/spec.err")
    same=$(cmp -s "$tmp/plain.out" "$tmp/spec.out" && echo yes || echo "no (first $(cmp "$tmp/plain.out" "$tmp/spec.out" | sed 's/.*byte \([0-9]*\).*/byte \1/'))")
    printf "| plain | %s | %.1f | | | | |\n" "$(paste -sd' ' "$tmp/plain.r")" "$mp"
    printf "| %s | %s | %.1f | %.2fx | %s | %s | %s |\n" "$opts" "$(paste -sd' ' "$tmp/spec.r")" "$ms" \
        "$(echo "$ms $mp" | awk '{print $1/$2}')" "$acc" "$tps" "$same"
done
