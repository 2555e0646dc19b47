#!/usr/bin/env bash
# Speculative decoding, Candle against llama.cpp, in one run:
#   bench/spec_compare.sh CANDLE LLAMA_BIN_DIR TARGET DRAFT PROMPT_FILE N REPS [LOOKUP_MODEL]
# Candle: bench/speculative.sh (plain vs --draft-model DRAFT --draft-max 8, and
# vs --lookup 3 on LOOKUP_MODEL, default TARGET). llama.cpp: plain decoding is
# llama-lookup with --spec-draft-n-max 0 (the same loop with nothing drafted),
# llama-speculative -m TARGET -md DRAFT --spec-draft-n-max 8, and llama-lookup
# --spec-draft-n-max 8 on LOOKUP_MODEL (its n-gram cache of the context); each
# speculative run right after a plain one, greedy (--temp 0), -t ${THREADS:-2}.
# Prints each engine's median decode rates, their ratio, acceptance, and whether
# the speculative text equals the plain one. Set OMP_WAIT_POLICY=PASSIVE in the
# environment to stop llama.cpp's OpenMP threads spinning between kernels;
# LLAMA_ONLY=1 skips the Candle runs.
set -u
candle="$1" lbin="$2" target="$3" draft="$4" prompt="$5" n="$6" reps="$7" lmodel="${8:-$3}"
here="$(cd "$(dirname "$0")" && pwd)"
t="${THREADS:-2}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
lrate() { sed -n 's/.*decoded *[0-9]* tokens in .* speed: *\([0-9.]*\) t\/s.*/\1/p' "$1" | tail -1; }
lacc() { sed -n 's/^.*accept *= *\([0-9.]*\)%.*/\1%/p' "$1" | tail -1; }
common=(-f "$prompt" -n "$n" --temp 0 -t "$t" -tb "$t" -c 4096 --seed 1)

if [ -z "${LLAMA_ONLY:-}" ]; then
echo "### Candle ($(basename "$target"), $(basename "$prompt"), -n $n, $reps reps; load $(cut -d' ' -f1-3 /proc/loadavg))"
THREADS="$t" "$here/speculative.sh" "$candle" "$target" "$prompt" "$n" "$reps" "--draft-model $draft --draft-max 8"
if [ "$lmodel" != "$target" ]; then
    echo "(lookup on $(basename "$lmodel"))"
fi
THREADS="$t" "$here/speculative.sh" "$candle" "$lmodel" "$prompt" "$n" "$reps" "--lookup 3"
fi

echo
echo "### llama.cpp ($(basename "$target"), $(basename "$prompt"), -n $n, $reps reps; OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}; load $(cut -d' ' -f1-3 /proc/loadavg))"
printf "| mode | tok/s (runs) | median | vs plain | acceptance | same text |\n|---|---|---:|---:|---:|---|\n"
lcpp() { # NAME MODEL PLAIN_CMD... -- SPEC_CMD...
    local name="$1" model="$2"; shift 2
    : >"$tmp/p.r"; : >"$tmp/s.r"
    for _ in $(seq "$reps"); do
        "$lbin/llama-lookup" -m "$model" "${common[@]}" --spec-draft-n-max 0 >"$tmp/p.out" 2>"$tmp/p.err"
        lrate "$tmp/p.err" >>"$tmp/p.r"
        "$@" "${common[@]}" >"$tmp/s.out" 2>"$tmp/s.err"
        lrate "$tmp/s.err" >>"$tmp/s.r"
    done
    local mp ms same
    mp=$(median <"$tmp/p.r") ms=$(median <"$tmp/s.r")
    same=$(cmp -s "$tmp/p.out" "$tmp/s.out" && echo yes || echo "no ($(cmp "$tmp/p.out" "$tmp/s.out" | sed 's/.*byte \([0-9]*\).*/byte \1/'))")
    printf "| plain (%s) | %s | %.1f | | | |\n" "$(basename "$model")" "$(paste -sd' ' "$tmp/p.r")" "$mp"
    printf "| %s | %s | %.1f | %.2fx | %s | %s |\n" "$name" "$(paste -sd' ' "$tmp/s.r")" "$ms" \
        "$(echo "$ms $mp" | awk '{print $1/$2}')" "$(lacc "$tmp/s.err")" "$same"
    [ -n "${KEEP:-}" ] && cp "$tmp/p.out" "$KEEP.$name.plain.txt" && cp "$tmp/s.out" "$KEEP.$name.spec.txt" && cp "$tmp/s.err" "$KEEP.$name.spec.err"
}
lcpp "draft-model" "$target" "$lbin/llama-speculative" -m "$target" -md "$draft" --spec-draft-n-max 8 -td "$t" -tbd "$t"
lcpp "lookup" "$lmodel" "$lbin/llama-lookup" -m "$lmodel" --spec-draft-n-max 8
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
