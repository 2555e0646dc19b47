#!/usr/bin/env python3
"""Write the seed corpus for fuzz_tools: tools arrays with replies in each
tool-call format. An input is
  [flags byte] [tools JSON] \\0 [reply]
flags: low bits the format (0 generic, 1 hermes, 2 llama3, 3 mistral),
0x10 parallel calls, 0x20 only the first function.

usage: python3 tests/fuzz/gen_tools_corpus.py [OUT_DIR]   (default:
corpus/tools/ beside this script). The output is committed; rerun after
changing this."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}
ADD = {"type": "function", "function": {"name": "add", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "number"},
                                     "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}},
    "required": ["a", "b"], "additionalProperties": False}}}
NOARGS = {"type": "function", "function": {"name": "now"}}
TOOLS = [
    json.dumps([WEATHER, ADD]).encode(),
    json.dumps([NOARGS]).encode(),
    json.dumps([WEATHER, NOARGS, ADD], separators=(",", ":")).encode(),
    b'[{"type": "function", "function": {"name": "f", "parameters": {"type": "string", "pattern": "^a"}}}]',
    b'{"not": "an array"}',
    b'[{"type": "function", "function": {"name": "q", "parameters": {"$defs": {"n": {"type": "object", '
    b'"properties": {"k": {"$ref": "#/$defs/n"}}}}, "$ref": "#/$defs/n"}}}]',
]
W = '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}'
A = '{"name": "add", "arguments": {"a": 2, "b": 3.5}}'
REPLIES = {
    1: [f"<tool_call>\n{W}\n</tool_call>", f"Let me look.\n<tool_call>\n{W}\n</tool_call>\n<tool_call>\n{A}\n</tool_call>",
        '<tool_call>\n{"name": "add", "arguments": "{\\"a\\": 1, \\"b\\": 2}"}\n</tool_call>',
        "<tool_call>\n{broken\n</tool_call> text", "<tool_c",
        f"```json\n{W}\n```", f"```json\n[{W}, {A}]", "```json\n{\"city\": 1}\n```"],
    0: [f"<tool_call>\n{W}\n</tool_call>", "no call here"],
    2: ['{"name": "get_weather", "parameters": {"city": "Oslo"}}',
        '<|python_tag|>{"name": "add", "parameters": {"a": 1, "b": 2}}; {"name": "now", "parameters": {}}',
        '  {"name": 5}'],
    3: [f'[TOOL_CALLS][{W}, {A}]', '[{"name": "now", "arguments": {}, "id": "abc123DEF"}]', "[TOOL_CALLS]["],
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus", "tools")
    os.makedirs(out, exist_ok=True)
    seeds = {}
    for fmt, replies in sorted(REPLIES.items()):
        for i, r in enumerate(replies):
            for t, tools in enumerate(TOOLS[:3] if i else TOOLS):
                flags = fmt | (0x10 if (i + t) % 2 else 0) | (0x20 if t == 2 else 0)
                seeds[f"f{fmt}_r{i}_t{t}.bin"] = bytes([flags]) + tools + b"\0" + r.encode()
    for name, data in sorted(seeds.items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print(f"{len(seeds)} seeds in {out}")


if __name__ == "__main__":
    main()
