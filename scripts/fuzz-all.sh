#!/usr/bin/env bash
# Run every built libFuzzer target (build-fuzz/bin/fuzz_*) for TIME seconds
# from SEED, JOBS at a time (each target is one process on one core), each
# from its seeds in tests/fuzz/corpus/NAME (and tests/fuzz/NAME.dict if
# present); found inputs go to build-fuzz/corpus/NAME, crashes to
# build-fuzz/, each target's output to build-fuzz/log/NAME.log. Prints a
# line per target; on a failure its log's tail, and exits 1.
#   scripts/fuzz-all.sh TIME SEED JOBS
set -u
time="$1" seed="$2" jobs="$3"
cd "$(dirname "$0")/.."
mkdir -p build-fuzz/log
one() {
    f="$1" n="${1##*/fuzz_}"
    mkdir -p "build-fuzz/corpus/$n"
    dict=
    [ -f "tests/fuzz/$n.dict" ] && dict="-dict=tests/fuzz/$n.dict"
    # shellcheck disable=SC2086
    if "$f" -seed="$seed" -max_total_time="$time" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix=build-fuzz/ -print_final_stats=1 $dict "build-fuzz/corpus/$n" "tests/fuzz/corpus/$n" \
        >"build-fuzz/log/$n.log" 2>&1; then
        echo "fuzz $n: $(sed -n 's/^stat::number_of_executed_units: *//p' "build-fuzz/log/$n.log") runs in $time s from seed $seed, no finding"
    else
        echo "FAIL: fuzz $n (log build-fuzz/log/$n.log):"
        tail -40 "build-fuzz/log/$n.log"
        return 1
    fi
}
export -f one
export time seed
ls build-fuzz/bin/fuzz_* | xargs -P "$jobs" -I{} bash -c 'one {}'
