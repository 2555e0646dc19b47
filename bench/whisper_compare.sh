#!/usr/bin/env bash
# Whisper: Candle against whisper.cpp and faster-whisper (CTranslate2, float32
# and int8) on the same weights and the same audio, in one run (issue 20):
#   bench/whisper_compare.sh BUILD WHISPER_CLI AUDIO OUTDIR
# BUILD: Candle's build directory (bin/candle, bin/bench_whisper_encode).
# WHISPER_CLI: whisper.cpp's whisper-cli, built outside the repository.
# For each model ($MODELS), thread count ($THREADS) and beam size ($BEAMS: 1
# greedy, 5 beam), each engine transcribes AUDIO once with its defaults
# otherwise (timestamps, condition on previous text, temperature fallback;
# language en; no VAD), the engines interleaved per configuration. Measured:
#   - transcription seconds, model load excluded (Candle: its "transcribe:"
#     line; whisper.cpp: total - load time; faster-whisper: around
#     transcribe() and its generator), and RTF = seconds / audio seconds;
#   - encoder time of one 30 s window (Candle: bench_whisper_encode, median
#     of 5; whisper.cpp: its "encode time ... per run" over the run's windows;
#     faster-whisper: model.encode on the first window's features, median
#     of 5);
#   - peak RSS, CPU time (user + system) and wall time of the whole process
#     (/usr/bin/time -v). On a shared machine the CPU time is the steadier
#     figure; an engine whose threads spin while they wait (OpenMP) shows
#     that spinning in it.
# whisper.cpp runs ggml files converted from the same CTranslate2 model.bin
# (bench/whisper_ct2_to_ggml.py; made under OUTDIR when absent). Texts go to
# OUTDIR/text/, raw figures to OUTDIR/results.tsv, the table to stdout.
# Env: MODELS ("tiny-en base"), THREADS ("1 2"), BEAMS ("1 5"),
#      MODEL_ROOT (/work/ci10/build-data/models: whisper-tiny-en, whisper-base),
#      PY (python with faster-whisper: /work/venv-fw/bin/python), REPS (5),
#      TABLE_ONLY=1: print the table of an earlier run in OUTDIR again,
#      CANDLE_OPTS: more options of candle transcribe (e.g. "--dtype f16", whisper.cpp's
#      precision; the encoder timer stays f32).
set -u
build="$1" wcli="$2" audio="$3" out="$4"
here="$(cd "$(dirname "$0")" && pwd)"
models="${MODELS:-tiny-en base}" threads="${THREADS:-1 2}" beams="${BEAMS:-1 5}"
root="${MODEL_ROOT:-/work/ci10/build-data/models}" py="${PY:-/work/venv-fw/bin/python}" reps="${REPS:-5}"
candle="$build/bin/candle" enc="$build/bin/bench_whisper_encode" candle_opts="${CANDLE_OPTS:-}"
mkdir -p "$out/text" "$out/log"
res="$out/results.tsv"
dur=$(soxi -D "$audio" 2>/dev/null || "$py" -c "import wave,sys; w=wave.open(sys.argv[1]); print(w.getnframes()/w.getframerate())" "$audio")

rss() { sed -n 's/.*Maximum resident set size (kbytes): \([0-9]*\)/\1/p' "$1" | awk '{printf "%.0f", $1/1024}'; }
wall() { sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$1" | awk -F: '{s=0; for(i=1;i<=NF;i++) s=s*60+$i; printf "%.2f", s}'; }
row() { printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$@" >>"$res"; }
rtf() { awk -v s="$1" -v d="$dur" 'BEGIN {printf "%.4f", s/d}'; }

[ "${TABLE_ONLY:-0}" = 1 ] ||
    printf "model\tthreads\tbeam\tengine\ttranscribe_s\trtf\tencode_ms\trss_mb\twall_s\n" >"$res"
[ "${TABLE_ONLY:-0}" = 1 ] || for m in $models; do
    dir="$root/whisper-$m" gg="$out/ggml-$m-ct2.bin"
    [ -f "$gg" ] || "$py" "$here/whisper_ct2_to_ggml.py" "$dir" "$gg" || exit 1
    for t in $threads; do
        e=$("$enc" "$dir" "$audio" "$t" "$reps" | sed -n 's/^encode_ms_median //p')
        for b in $beams; do
            tag="$m-t$t-b$b"
            echo "== $tag (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2

            # shellcheck disable=SC2086
            /usr/bin/time -v "$candle" transcribe -m "$dir" -f "$audio" -t "$t" --beam "$b" --language en $candle_opts \
                >"$out/text/$tag-candle.txt" 2>"$out/log/$tag-candle.err"
            s=$(sed -n 's/^transcribe: .* in \([0-9.]*\) s .*/\1/p' "$out/log/$tag-candle.err")
            row "$m" "$t" "$b" candle "$s" "$(rtf "$s")" "$e" "$(rss "$out/log/$tag-candle.err")" "$(wall "$out/log/$tag-candle.err")"

            /usr/bin/time -v "$wcli" -m "$gg" -f "$audio" -t "$t" -bs "$b" -l en -otxt -of "$out/text/$tag-whispercpp" \
                >"$out/log/$tag-whispercpp.out" 2>"$out/log/$tag-whispercpp.err"
            l=$(sed -n 's/.*load time = *\([0-9.]*\) ms.*/\1/p' "$out/log/$tag-whispercpp.err")
            tot=$(sed -n 's/.*total time = *\([0-9.]*\) ms.*/\1/p' "$out/log/$tag-whispercpp.err")
            we=$(sed -n 's/.*encode time = .*( *\([0-9.]*\) ms per run).*/\1/p' "$out/log/$tag-whispercpp.err")
            s=$(awk -v a="$tot" -v b="$l" 'BEGIN {printf "%.3f", (a-b)/1000}')
            row "$m" "$t" "$b" whisper.cpp "$s" "$(rtf "$s")" "$we" "$(rss "$out/log/$tag-whispercpp.err")" "$(wall "$out/log/$tag-whispercpp.err")"

            for ct in float32 int8; do
                /usr/bin/time -v "$py" "$here/whisper_fw.py" "$dir" "$audio" "$t" "$b" "$ct" "$out/text/$tag-fw-$ct.txt" "$reps" \
                    >"$out/log/$tag-fw-$ct.out" 2>"$out/log/$tag-fw-$ct.err"
                s=$(sed -n 's/^transcribe_s //p' "$out/log/$tag-fw-$ct.out")
                fe=$(sed -n 's/^encode_ms_median //p' "$out/log/$tag-fw-$ct.out")
                row "$m" "$t" "$b" "fw-$ct" "$s" "$(rtf "$s")" "$fe" "$(rss "$out/log/$tag-fw-$ct.err")" "$(wall "$out/log/$tag-fw-$ct.err")"
            done
        done
    done
done

# CPU time of each run, from its log (a column of its own, so that a
# results.tsv without it is still read)
tab="$out/table.tsv"
awk -F'\t' -v OFS='\t' -v out="$out" 'NR == 1 {print $0, "cpu_s"; next} {
    f = sprintf("%s/log/%s-t%s-b%s-%s.err", out, $1, $2, $3, $4 == "whisper.cpp" ? "whispercpp" : $4)
    c = ""; while ((getline l < f) > 0) if (l ~ /(User|System) time/) { split(l, a, ": "); c += a[2] }
    close(f); print $0, c }' "$res" >"$tab"

# The table: each peer's figures with Candle's over them (lower is better for
# all three: a ratio under 1 means Candle is faster or smaller).
echo "audio: $audio, $dur s"
printf "| model | threads | beam | engine | transcribe s | RTF | Candle/this RTF | encode 30 s ms | Candle/this | peak RSS MB | Candle/this | CPU s | Candle/this | wall s |\n"
printf "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
awk -F'\t' 'NR > 1 {
    k = $1 FS $2 FS $3
    if ($4 == "candle") { cr[k] = $6; ce[k] = $7; cm[k] = $8; cc[k] = $10 }
    r = (k in cr && $6 > 0) ? sprintf("%.2f", cr[k] / $6) : ""
    e = (k in ce && $7 > 0) ? sprintf("%.2f", ce[k] / $7) : ""
    m = (k in cm && $8 > 0) ? sprintf("%.2f", cm[k] / $8) : ""
    c = (k in cc && $10 > 0) ? sprintf("%.2f", cc[k] / $10) : ""
    if ($4 == "candle") r = e = m = c = ""
    printf "| %s | %s | %s | %s | %.2f | %.3f | %s | %.0f | %s | %s | %s | %.1f | %s | %s |\n", $1, $2, $3, $4, $5, $6, r, $7, e, $8, m, $10, c, $9
}' "$tab"
