#!/usr/bin/env python3
"""Fail when a library file includes a header of a higher layer.

The layers of src/, lowest first (docs/ARCHITECTURE.md): a file may include
headers of its own layer and of lower ones, and the public headers
(include/candle/) anywhere. Includes are resolved as the compiler does: next
to the including file first, then src/, then include/.

usage: check_layers.py [SOURCE_DIR]   (exit 1 listing each violation)
"""
import os
import re
import sys

LAYERS = [
    ("core",),
    ("quant",),
    ("backend",),
    ("graph",),
    ("ops",),
    ("formats", "tokenizer", "audio"),
    ("nn",),
    ("models",),
]
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(path, src):
    rel = os.path.relpath(path, src)
    top = rel.split(os.sep)[0]
    return top if top in RANK else None


def resolve(name, here, src, inc):
    for base in (here, src, inc):
        p = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(p):
            return p
    return None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    src, inc = os.path.join(root, "src"), os.path.join(root, "include")
    bad, files, edges = [], 0, 0
    for dirpath, _, names in os.walk(src):
        for n in sorted(names):
            if not n.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, n)
            mine = layer_of(path, src)
            if mine is None:
                bad.append(f"{os.path.relpath(path, root)}: in no layer (add its folder to scripts/check_layers.py)")
                continue
            files += 1
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            for name in INCLUDE.findall(text):
                target = resolve(name, dirpath, src, inc)
                if target is None:
                    bad.append(f"{os.path.relpath(path, root)}: includes \"{name}\", which is not in the tree")
                    continue
                edges += 1
                if target.startswith(inc + os.sep):
                    continue
                theirs = layer_of(target, src)
                if theirs is not None and RANK[theirs] > RANK[mine]:
                    bad.append(f"{os.path.relpath(path, root)} ({mine}) includes {os.path.relpath(target, root)} "
                               f"({theirs}, a higher layer)")
    if files == 0 or edges == 0:
        print(f"check_layers: found {files} files and {edges} includes under {src}: nothing checked")
        return 1
    for b in bad:
        print(b)
    print(f"check_layers: {files} files, {edges} includes, {len(bad)} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
