#!/usr/bin/env bash
# The CLI on Hugging Face directories (tests/data/hf): `candle tokenize -m DIR`
# reads tokenizer.json and gives the ids the GGUF llama.cpp's converter made
# of it gives; `candle run -m DIR` generates what the GGUF generates (greedy);
# `candle info DIR` shows GGUF names and keys; `candle quantize DIR` writes a
# GGUF that generates the same.
set -u
: "${CANDLE:?CANDLE must point at the candle binary}"
: "${CANDLE_SOURCE_DIR:?}"
hf="$CANDLE_SOURCE_DIR/tests/data/hf"
fail=0
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

expect() { # name got want
    if [ "$2" != "$3" ] || [ -z "$2" ]; then
        echo "FAIL $1: got '$2', want '$3'" >&2
        fail=1
    fi
}

for m in qwen2 qwen3 llama2 phi3; do
    dir="$hf/$m"
    for text in "Hello world, this is a test" "  two  spaces and	tab" "numbers 12345 and émoji 🙂"; do
        [ -r "$dir/tokenizer.json" ] || break
        expect "$m tokenize '$text'" "$("$CANDLE" tokenize -m "$dir" -p "$text" --no-special)" \
            "$("$CANDLE" tokenize -m "$dir/$m.gguf" -p "$text" --no-special)"
    done
    got="$("$CANDLE" run -m "$dir" -p "Hello" -n 8 --temp 0 2>/dev/null | od -An -tx1)"
    want="$("$CANDLE" run -m "$dir/$m.gguf" -p "Hello" -n 8 --temp 0 2>/dev/null | od -An -tx1)"
    [ -r "$dir/tokenizer.json" ] && expect "$m run" "$got" "$want"
done

info="$("$CANDLE" info "$hf/qwen2")"
for want in "Hugging Face directory" "qwen2.block_count" "blk.0.attn_q.bias" \
    "model.safetensors:model.layers.0.self_attn.q_proj.bias"; do
    case "$info" in *"$want"*) ;; *) echo "FAIL info lacks '$want'" >&2; fail=1 ;; esac
done

for m in qwen2 qwen3; do
    "$CANDLE" quantize -q "$hf/$m" "$tmp/$m-f32.gguf" f32 >/dev/null || { echo "FAIL quantize $m" >&2; fail=1; }
    expect "$m quantize f32 run" "$("$CANDLE" run -m "$tmp/$m-f32.gguf" -p "Hello" -n 8 --temp 0 2>/dev/null | od -An -tx1)" \
        "$("$CANDLE" run -m "$hf/$m" -p "Hello" -n 8 --temp 0 2>/dev/null | od -An -tx1)"
done
"$CANDLE" quantize -q "$hf/qwen2" "$tmp/q8.gguf" q8_0 >/dev/null || { echo "FAIL quantize q8_0" >&2; fail=1; }
expect "q8_0 weights" "$("$CANDLE" info "$tmp/q8.gguf" | grep -cE '^ +[0-9]+ .* q8_0 ')" 15

# a directory that is not a model
mkdir -p "$tmp/empty"
msg="$("$CANDLE" run -m "$tmp/empty" -p hi -n 1 2>&1)"
case "$msg" in *"no config.json"*) ;; *) echo "FAIL empty dir: $msg" >&2; fail=1 ;; esac

[ $fail -eq 0 ] && echo "test_hf_cli: passed"
exit $fail
