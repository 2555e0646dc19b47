#!/usr/bin/env bash
# CLI values out of range are refused with a message naming them (issue 22,
# finding 9): sampler settings (one validator with the server,
# candle_sampler_params_check), -t above 512, perplexity -c below 4 (it
# printed PPL = -nan and exited 0) and a text input without end (-f
# /dev/zero read forever; now bounded at 256 MiB).
set -u
CANDLE="${CANDLE:-${CANDLE_BINARY_DIR:?}/bin/candle}"
MODEL="${CANDLE_SHARED_DIR:-${CANDLE_SOURCE_DIR:-.}/../shared}/data/models/stories260K.gguf"
[ -f "$MODEL" ] || { echo "SKIP: $MODEL absent"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
refused() { # refused WANT_MESSAGE COMMAND...: exit 2 and the message on stderr
    local want="$1"; shift
    timeout 60 "$CANDLE" "$@" >/dev/null 2>"$T/err"; local rc=$?
    if [ $rc != 2 ] || ! grep -qF -- "$want" "$T/err"; then
        echo "FAIL: candle $*: rc $rc, want 2 and '$want':"; cat "$T/err"; fail=1
    fi
}
for v in "--temp nan:temperature nan" "--temp -1:temperature -1" "--top-p 2:top_p 2" \
         "--top-k -3:top_k -3" "--min-p 2:min_p 2" "--repeat-penalty 0:repeat_penalty 0" \
         "--repeat-penalty -1:repeat_penalty -1" "--repeat-last-n -5:repeat_last_n -5" \
         "--presence-penalty 3:presence_penalty 3" "-t 1000:at most 512 threads"; do
    refused "${v#*:}" run -m "$MODEL" -p hi -n 2 ${v%%:*}
done
echo "Once upon a time there was a little girl named Lily who loved to play." > "$T/text"
refused "chunks need at least 4 tokens" perplexity -m "$MODEL" -f "$T/text" -c 1
timeout 60 "$CANDLE" perplexity -m "$MODEL" -f /dev/zero >/dev/null 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -q "over the limit of 256 MiB" "$T/err" ||
    { echo "FAIL: perplexity -f /dev/zero: rc $rc"; tail -c 300 "$T/err"; fail=1; }
# values in range still run
"$CANDLE" run -m "$MODEL" -p hi -n 2 --temp 0.7 --top-p 0.9 --top-k 20 --min-p 0.02 \
    --repeat-penalty 1.1 --repeat-last-n 8 -t 2 >/dev/null 2>"$T/err" ||
    { echo "FAIL: values in range refused"; cat "$T/err"; fail=1; }
[ $fail = 0 ] && echo "test_cli_values: OK"
exit $fail
