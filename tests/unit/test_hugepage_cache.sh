#!/usr/bin/env bash
# scripts/hugepage_cache.py (re-caches model files as 2 MiB page-cache folios):
# the files' bytes are unchanged, each gets a report line whose 2 MiB-mapped
# share is at most its size (how much depends on the machine's transparent
# huge page settings), a missing file is an error that names it.
set -euo pipefail

SRC="${CANDLE_SOURCE_DIR:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_hugepage_cache: $*" >&2; exit 1; }

head -c $((5 * 1024 * 1024 + 123)) /dev/urandom >"$tmp/a.bin"
printf 'x' >"$tmp/b.bin"
: >"$tmp/empty.bin"
sum_before=$(cat "$tmp/a.bin" "$tmp/b.bin" | sha256sum)

python3 "$SRC/scripts/hugepage_cache.py" "$tmp/a.bin" "$tmp/b.bin" "$tmp/empty.bin" >"$tmp/out" ||
    fail "exited $? ($(cat "$tmp/out"))"
[ "$(cat "$tmp/a.bin" "$tmp/b.bin" | sha256sum)" = "$sum_before" ] || fail "file contents changed"
[ "$(wc -l <"$tmp/out")" -eq 2 ] || fail "want one line per non-empty file: $(cat "$tmp/out")"
python3 - "$tmp/out" "$tmp/a.bin" <<'PY' || fail "report: $(cat "$tmp/out")"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
m = re.fullmatch(re.escape(sys.argv[2]) + r": ([0-9.]+) MiB, ([0-9.]+) MiB in 2 MiB pages", lines[0])
assert m, lines[0]
size, huge = float(m.group(1)), float(m.group(2))
assert abs(size - (5 * 2**20 + 123) / 2**20) < 0.05, size
assert 0 <= huge <= size, (huge, size)
PY

if python3 "$SRC/scripts/hugepage_cache.py" "$tmp/missing.bin" 2>"$tmp/err"; then
    fail "a missing file exited 0"
fi
grep -q "missing.bin" "$tmp/err" || fail "the error does not name the file: $(cat "$tmp/err")"
echo "test_hugepage_cache: ok"
