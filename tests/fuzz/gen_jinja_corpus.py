#!/usr/bin/env python3
"""Write the seed corpus for fuzz_jinja: the chat templates of
tests/data/jinja (alone: rendered on the target's own chat context; and with
each conversation of tests/data/jinja/contexts), and small templates for
each construct. An input is
  [template text] \\0 [JSON context]     (no \\0: the template alone)

usage: python3 tests/fuzz/gen_jinja_corpus.py [OUT_DIR]   (default:
corpus/jinja/ beside this script). The output is committed; rerun after
changing this."""
import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "jinja")

SMALL = [
    b"{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 % 3 }} {{ 2 ** 8 }} {{ 0.1 + 0.2 }}",
    b"{% for m in messages %}{{ loop.index }}{{ m.role|upper }}{% if not loop.last %},{% endif %}{% endfor %}",
    b"{% set ns = namespace(n=0) %}{% for i in range(5) if i is odd %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
    b"{% macro f(x, y='d') %}[{{ x }}{{ y }}]{% endmacro %}{{ f(1) }}{{ f(2, y=3) }}",
    b"{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|join(', ') }}",
    b"{{ tools|tojson(indent=2) }}{{ messages[0]['content'][::-1] }}{{ 'a,b'.split(',') }}",
    b"  {%- if x is defined -%} a {%- elif y -%} b {%- else -%} c {%- endif %}\n{# c #}\n",
    b"{% for k, v in {'a': 1, 'b': [1, 2]}.items() %}{{ k }}={{ v }};{% endfor %}{{ {'z': none}|dictsort }}",
    b"{% set s %}x{{ 1 }}{% endset %}{{ s * 3 }}{{ 'x' in s }}{{ s|length }}{{ s.startswith('x') }}",
    b"{{ raise_exception('no') if messages|length > 9 else 'ok' }}{% for i in range(3) %}{% break %}{% endfor %}",
    b"{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}",
    b"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    b"{% set ns = namespace(s='ab') %}{% for i in range(30) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
    b"{{ (((((((((((1))))))))))) }}{{ 'a' ~ 'b' ~ 'c' }}{{ [1, [2, [3]]][1][1][0] }}",
]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus", "jinja")
    os.makedirs(out, exist_ok=True)
    n = 0

    def put(b):
        nonlocal n
        with open(os.path.join(out, "seed%03d" % n), "wb") as f:
            f.write(b)
        n += 1

    templates = sorted(glob.glob(os.path.join(DATA, "*.jinja")))
    contexts = sorted(glob.glob(os.path.join(DATA, "contexts", "*.json")))
    for t in templates:
        src = open(t, "rb").read()
        put(src)
        for c in contexts[:3]:
            put(src + b"\0" + open(c, "rb").read())
    for s in SMALL:
        put(s)
        put(s + b"\0" + b'{"messages": [], "x": 1}')
    print("wrote %d seeds to %s" % (n, out))


if __name__ == "__main__":
    main()
