#!/usr/bin/env python3
"""Word error rate of each transcript in TEXT_DIR (bench/whisper_compare.sh's
OUTDIR/text) against a reference text: lower case, punctuation dropped,
hyphens as spaces, then the word-level edit distance over the reference's
word count. A check that the engines transcribed the same audio alike, not an
accuracy benchmark (the clip is synthetic speech).

    python3 bench/whisper_wer.py REFERENCE.txt TEXT_DIR"""
import os
import re
import sys


def words(s):
    return re.sub(r"[^a-z0-9' ]", " ", s.lower().replace("-", " ")).split()


def dist(a, b):
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    ref = words(open(sys.argv[1], encoding="utf-8").read())
    print("| transcript | words | WER |\n|---|---:|---:|")
    for n in sorted(os.listdir(sys.argv[2])):
        if n.endswith(".txt"):
            hyp = words(open(os.path.join(sys.argv[2], n), encoding="utf-8").read())
            print(f"| {n[:-4]} | {len(hyp)} | {dist(ref, hyp) / len(ref):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
