#!/bin/bash
# Every benchmark behind the "Latest" section of bench/RESULTS.md, one pass,
# back to back: kernels, attention, models against llama.cpp (llama-cpp-python),
# latency/allocations, serving against llama-cpp-python's server (8 requests per
# client, so a level is more than one request's few milliseconds); then the charts.
# Usage: bench/run_all.sh BUILD_DIR OUT_DIR   (BUILD_DIR: a Release build with
# bin/candle and lib/libcandle_malloc_count.so; models from `make run` and
# bench/make_bench_models.sh). Run it on a quiet machine.
set -u
B=$(realpath "$1"); O=$(realpath -m "$2"); mkdir -p "$O"; cd "$(dirname "$0")/.."
C="$B/bin/candle"
log() { echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg) $*" | tee -a "$O/log"; }
# Both engines map the same page cache: every model cached as 2 MiB pages
# first (scripts/hugepage_cache.py), whatever copied or wrote it before.
log page cache; python3 scripts/hugepage_cache.py models/*.gguf build-bench/models/*.gguf > "$O/page-cache.txt" 2>&1
log ops; $C bench ops -t 2 > "$O/ops.txt" 2>&1
log attn; $C bench attn -t 2 > "$O/attn.txt" 2>&1
CMP="-t 2 --rounds 1 --modes mmap --omp-wait default --greedy-check 0 --torch off --candle $C"
M=build-bench/models
log compare smol; bench/compare $CMP -p 128 -n 64 -r 3 --out "$O/cmp-smol" models/SmolLM2-135M-Instruct.Q4_1.gguf \
    $M/SmolLM2-135M.{Q8_0,Q4_0,Q4_K_M,F16}.gguf > "$O/cmp-smol.txt" 2>&1
log compare tiny; bench/compare $CMP -p 64 -n 32 -r 2 --out "$O/cmp-tiny" $M/tinyllama-shape.{Q4_0,Q8_0,Q4_K_M,F16}.gguf \
    > "$O/cmp-tiny.txt" 2>&1
log compare gemma; bench/compare $CMP -p 64 -n 32 -r 2 --out "$O/cmp-gemma" $M/gemma-3-270m.{Q4_K_M,Q8_0,Q4_0,F16}.gguf \
    > "$O/cmp-gemma.txt" 2>&1
# tg at depth (llama-bench's -d): tg64 at d0 / d512 / d2048, no pp; both engines f16 KV (~1 min)
log compare depth; bench/compare $CMP -p 0 -n 64 -r 3 --rounds 2 --depth 512,2048 --out "$O/cmp-depth" \
    $M/SmolLM2-135M.Q4_0.gguf > "$O/cmp-depth.txt" 2>&1
# the same with a q8_0 KV cache in both engines (llama.cpp then with flash attention)
log compare depth q8_0; bench/compare $CMP -p 0 -n 64 -r 3 --rounds 2 --depth 512,2048 --cache-type q8_0 \
    --out "$O/cmp-depth-q8" $M/SmolLM2-135M.Q4_0.gguf > "$O/cmp-depth-q8.txt" 2>&1
LAT="-m models/SmolLM2-135M-Instruct.Q4_1.gguf -p 0 -n 0 -r 1 --latency 1000"
log latency; LD_PRELOAD=$B/lib/libcandle_malloc_count.so $C bench $LAT --roofline > "$O/latency.txt" 2>&1
LD_PRELOAD=$B/lib/libcandle_malloc_count.so $C bench $LAT --latency-fixed > "$O/latency-fixed.txt" 2>&1
log serve candle; python3 bench/serve_bench.py --start candle --candle "$C" --parallel 16 --levels 1,4,16,64 \
    --max-tokens 24 --chat --requests-per-client 8 > "$O/serve-candle.txt" 2>&1
log serve llama; python3 bench/serve_bench.py --start llama-cpp --levels 1,4,16 --max-tokens 24 --chat \
    --requests-per-client 8 > "$O/serve-llama.txt" 2>&1
log plot; python3 bench/plot.py --out "$O/charts" "$O/cmp-smol/compare.json" "$O/cmp-tiny/compare.json" \
    "$O/cmp-gemma/compare.json" > /dev/null 2>&1
log done
