#!/usr/bin/env python3
"""Reference token ids for tests/unit/test_tokenizer.c from llama.cpp
(the llama-cpp-python package), printed as C initialisers.

Usage: python3 scripts/gen_tokenizer_refs.py MODEL.gguf
Each text is tokenized twice: with special handling (BOS/EOS as the model
says, special-token text parsed) and without (--no-special).
"""
import sys

import llama_cpp

TEXTS = {
    "stories260K": [
        "Once upon a time, there was a little girl named Lily.",
        "Hello <s> world",
        "caf\u00e9 \U0001F680 \u00bd\n\tx",
    ],
    "smollm2": [
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
        "<|im_end|>\n<|im_start|>user\nWhat is 2+2? Answer in 3 words.<|im_end|>\n"
        "<|im_start|>assistant\n",
        "def fib(n):\n    return n if n < 2 else fib(n-1) + fib(n-2)\n",
        "H\u00e9llo w\u00f6rld \u2014 na\u00efve caf\u00e9, 12345 items; it's 3.14159!  \U0001F680",
    ],
}


def c_str(s):
    out = []
    for b in s.encode():
        if b == 0x22 or b == 0x5C:
            out.append("\\" + chr(b))
        elif 32 <= b < 127:
            out.append(chr(b))
        else:
            out.append("\\x%02x\"\"" % b)
    return '"' + "".join(out) + '"'


def main():
    path = sys.argv[1]
    key = "stories260K" if "stories" in path else "smollm2"
    m = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    for text in TEXTS[key]:
        for special in (True, False):
            ids = m.tokenize(text.encode(), add_bos=special, special=special)
            print("    {%s, %s, {%s}, %d}," % (c_str(text), "true" if special else "false",
                                              ", ".join(map(str, ids)), len(ids)))


main()
