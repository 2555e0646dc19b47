#!/usr/bin/env python3
"""Internal code keeps out of the public prefix (issue 17): every identifier
candle_X in the C sources of src/, tools/, tests/, bench/ and examples/ that
include/candle/ does not declare becomes cdl_X. String literals are left as
they are (metric names, file templates). Idempotent: run it again after
merging code that added internal candle_ names; --list prints them, --check
fails (exit 1) when there are any (test_prefix)."""
import os, re, sys

root = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else "."
tok = re.compile(r"\bcandle_[A-Za-z0-9_]+\b")
# string and character literals, and everything else in between
lit = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'')


def code_parts(s):
    """(text, is_code) pieces of a C file: literals are not code."""
    pos = 0
    for m in lit.finditer(s):
        yield s[pos:m.start()], True
        yield m.group(0), False
        pos = m.end()
    yield s[pos:], True


def sources():
    for d in ("src", "tools", "tests", "bench", "examples"):
        for dp, dirs, fs in os.walk(os.path.join(root, d)):
            dirs[:] = [x for x in dirs if x not in ("data", "corpus")]
            for f in fs:
                if f.endswith((".c", ".h", ".cu", ".cuh")):
                    yield os.path.join(dp, f)


def read(p):
    return open(p, encoding="utf-8", errors="surrogateescape").read()


public = set()
for dp, _, fs in os.walk(os.path.join(root, "include")):
    for f in fs:
        public |= set(tok.findall(read(os.path.join(dp, f))))
files = list(sources())
internal, in_strings = set(), set()
for p in files:
    for text, is_code in code_parts(read(p)):
        (internal if is_code else in_strings).update(tok.findall(text))
# a name a string spells (dlsym's lookups) keeps its spelling
internal -= public | in_strings
if "--list" in sys.argv or "--check" in sys.argv:
    print("\n".join(sorted(internal)))
    if "--check" in sys.argv and internal:
        print(f"{len(internal)} internal identifiers use the public prefix candle_ "
              "(python3 scripts/rename_internal.py renames them to cdl_)", file=sys.stderr)
        sys.exit(1)
    sys.exit(0)

changed = 0
for p in files:
    s = read(p)
    out = []
    for text, is_code in code_parts(s):
        if is_code:
            text = tok.sub(lambda m: "cdl_" + m.group(0)[7:] if m.group(0) in internal else m.group(0), text)
            # the quantizers' names made by token pasting (quant-impl.h, traits.c)
            if "/src/quant/" in p.replace(os.sep, "/"):
                text = text.replace("candle_##", "cdl_##")
        out.append(text)
    t = "".join(out)
    if t != s:
        open(p, "w", encoding="utf-8", errors="surrogateescape").write(t)
        changed += 1
print(f"{len(internal)} internal identifiers renamed to cdl_*, {changed} files changed")
