#!/usr/bin/env python3
"""Write the seed corpus for fuzz_grammar: the grammars of tests/data/grammars
and a few small ones, each with texts for the matcher. An input is
  [grammar text] \\0 [bytes for the matcher]

usage: python3 tests/fuzz/gen_grammar_corpus.py [OUT_DIR]   (default:
corpus/grammar/ beside this script). The output is committed; rerun after
changing this."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GRAMMARS = os.path.join(HERE, "..", "data", "grammars")

SMALL = [
    (b'root ::= ("yes" | "no") "."', [b"yes.", b"no", b"maybe"]),
    (b'root ::= [a-z]{2,4} ("-" [0-9]+)* [^\\x00-\\x1F]?', [b"ab-12-3\xc3\xa9", b"a"]),
    (b'root ::= "\\u00e9" . [\\U0001F600-\\U0001F64F]+ # emoji\n', [b"\xc3\xa9x\xf0\x9f\x98\x80"]),
    (b'root ::= x\nx ::= ( "a" x "b" )?', [b"aabb", b"aab"]),
    (b'root ::= a\na ::= b? a "x"\nb ::= "b"', [b"bx"]),  # left recursion: refused
    (b'root ::= "a" undefined', [b"a"]),
    # JSON Schemas (the target converts the text as a schema too)
    (b'{"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}, "b": {"enum": [1, "x", null]}}, "required": ["a"]}', [b'{"a": "x"}']),
    (b'{"type": "array", "items": {"anyOf": [{"type": "integer"}, {"const": {"k": [true]}}]}, "minItems": 1, "maxItems": 2}', [b"[1]"]),
    (b'{"type": ["string", "null"], "pattern": "a+"}', [b"null"]),
    (b'{"$defs": {"n": {"type": "object", "properties": {"k": {"$ref": "#/$defs/n"}, '
     b'"d": {"type": "string", "format": "date-time"}}}}, "$ref": "#/$defs/n"}', [b'{"k": {}}']),
    (b'{"type": "string", "pattern": "^[\\\\w.-]+@(a|b){1,3}\\\\.c[^\\"\\\\\\\\]?$"}', [b'"x.y@ab.c"']),
    (b'{"type": "string", "pattern": "x(?:y|\\\\d)*?\\\\u00e9[\\\\s\\\\]-]|^$"}', [b'"zxy1\\u00e9 "', b'""']),
    (b'{"type": "integer", "multipleOf": 7}', [b"-1001", b"0", b"14"]),
    (b'{"type": "number", "exclusiveMinimum": -2, "maximum": 10}', [b"-1.5", b"10.00", b"10.01"]),
]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus", "grammar")
    os.makedirs(out, exist_ok=True)
    seeds = {}
    texts = {
        "json.gbnf": [b'{"a": [1, true, "x\\n"], "b": {"c": -1.5e3}}', b'{"k": "caf\xc3\xa9"}'],
        "arithmetic.gbnf": [b"a+2= 3\n(x1 )*y/4=z\n"],
        "list.gbnf": [b"- one\n- two\n"],
    }
    for name, feeds in sorted(texts.items()):
        with open(os.path.join(GRAMMARS, name), "rb") as f:
            g = f.read()
        for i, t in enumerate(feeds):
            seeds[f"{name.split('.')[0]}_{i}.bin"] = g + b"\0" + t
    for k, (g, feeds) in enumerate(SMALL):
        for i, t in enumerate(feeds):
            seeds[f"small{k}_{i}.bin"] = g + b"\0" + t
    for name, data in sorted(seeds.items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print(f"{len(seeds)} seeds in {out}")


if __name__ == "__main__":
    main()
