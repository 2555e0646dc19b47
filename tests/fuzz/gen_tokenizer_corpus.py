#!/usr/bin/env python3
"""Write the seed corpus for fuzz_tokenizer: small GGUF vocabularies shaped
like real models' (SentencePiece llama/gemma/phi-3, byte-level BPE with the
pre-tokenizer names the code knows, WordPiece bert), each with a few texts.

An input is [u32 LE length of the GGUF][GGUF][u8 flags][text], flags as
fuzz_tokenizer.c reads them (bit 0 add_special, bit 1 parse_special, bit 2
render_special). The vocabularies are trained here by a tiny BPE over a
sample text, so merges, tokens and scores agree as in a real file.

usage: python3 tests/fuzz/gen_tokenizer_corpus.py [OUT_DIR]   (default:
corpus/tokenizer/ beside this script). The output is committed; rerun after
changing this."""
import os
import re
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_gguf_corpus import ARR, BOOL, F32, I32, STR, U32, gguf  # noqa: E402

NORMAL, UNKNOWN, CONTROL, USER, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

SAMPLE = (
    "Once upon a time, there was a little girl named Lily. She loved to play "
    "outside in the park. One day, she saw a big, red ball. It's the best "
    "thing we've seen, isn't it? They'll say I'm right and you'd agree.\n\n"
    "def main():\n    return 1234567 + 89\n"
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00dcber stra\u00dfe. "
    "\u4f60\u597d\uff0c\u4e16\u754c\u3002 \u3053\u3093\u306b\u3061\u306f "
    "\ud55c\uad6d\uc5b4 \u041f\u0440\u0438\u0432\u0435\u0442 \U0001f600!\n"
)

TEXTS = [
    b"Hello world",
    b" Hello  World!\n\nThe quick brown fox, isn't it? 12345 3.14159",
    "Caf\u00e9 r\u00e9sum\u00e9 \u4f60\u597d\u4e16\u754c \ud55c\uad6d\uc5b4 \U0001f600\t\u00a0\u2581x".encode(),
    b"<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    b"<s>[INST] Say hi [/INST] hi</s>",
    b"\xff\xfe bad \xc3 utf8 \xe2\x82 \xf0\x9f\x98 end\x00nul",
    b"def f(x):\r\n    return x**2  # don't   \n\n\n   ",
]


def gpt2_bytes():
    """GPT-2's byte -> printable character table."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    table, n = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    return table


def train(words, n_merges):
    """Tiny BPE: words are tuples of symbols; returns the merges in rank order."""
    counts = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    merges = []
    for _ in range(n_merges):
        pairs = {}
        for w, c in counts.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + c
        if not pairs:
            break
        best = max(pairs, key=lambda p: (pairs[p], p))
        if pairs[best] < 2:
            break
        merges.append(best)
        new = {}
        for w, c in counts.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new[tuple(out)] = new.get(tuple(out), 0) + c
        counts = new
    return merges


def bpe_vocab(specials, user=()):
    enc = gpt2_bytes()
    pieces = re.findall(r" ?\w+| ?[^\s\w]+|\s+", SAMPLE)
    words = [tuple(enc[b] for b in p.encode()) for p in pieces]
    merges = train(words, 160)
    tokens = [enc[b] for b in range(256)] + [a + b for a, b in merges]
    types = [NORMAL] * len(tokens)
    for s in specials:
        tokens.append(s)
        types.append(CONTROL)
    for s in user:
        tokens.append(s)
        types.append(USER)
    return tokens, types, [a + " " + b for a, b in merges]


def bpe_gguf(pre, specials, extra=(), user=(), arch="llama", name=None):
    tokens, types, merges = bpe_vocab(specials, user)
    kv = [("general.architecture", STR, arch)]
    if name:
        kv.append(("general.name", STR, name))
    kv += [("tokenizer.ggml.model", STR, "gpt2"),
           ("tokenizer.ggml.tokens", ARR, (STR, tokens)),
           ("tokenizer.ggml.token_type", ARR, (I32, types)),
           ("tokenizer.ggml.merges", ARR, (STR, merges))]
    if pre is not None:
        kv.append(("tokenizer.ggml.pre", STR, pre))
    ids = {t: i for i, t in enumerate(tokens)}
    for key, tok in extra:
        if isinstance(tok, bool):
            kv.append((key, BOOL, tok))
        else:
            kv.append((key, U32, ids[tok] if isinstance(tok, str) else tok))
    return gguf(kv, [])


def spm_gguf(specials, user=(), arch="llama", name=None, extra=(), byte_tokens=True):
    text = "\u2581" + SAMPLE.replace(" ", "\u2581")
    words = [tuple(w) for w in re.findall("\u2581?[^\u2581\\s]+|\\s", text)]
    merges = train(words, 200)
    tokens = ["<unk>", "<s>", "</s>"]
    types = [UNKNOWN, CONTROL, CONTROL]
    scores = [0.0, 0.0, 0.0]
    if byte_tokens:
        for b in range(256):
            tokens.append("<0x%02X>" % b)
            types.append(BYTE)
            scores.append(0.0)
    chars = sorted({c for w in words for c in w})
    for r, (a, b) in enumerate(merges):
        tokens.append(a + b)
        types.append(NORMAL)
        scores.append(-float(r))
    for c in chars:
        if c not in tokens:
            tokens.append(c)
            types.append(NORMAL)
            scores.append(-1000.0)
    for s in specials:
        tokens.append(s)
        types.append(CONTROL)
        scores.append(0.0)
    for s in user:
        tokens.append(s)
        types.append(USER)
        scores.append(0.0)
    kv = [("general.architecture", STR, arch)]
    if name:
        kv.append(("general.name", STR, name))
    kv += [("tokenizer.ggml.model", STR, "llama"),
           ("tokenizer.ggml.tokens", ARR, (STR, tokens)),
           ("tokenizer.ggml.scores", ARR, (F32, scores)),
           ("tokenizer.ggml.token_type", ARR, (I32, types)),
           ("tokenizer.ggml.bos_token_id", U32, 1),
           ("tokenizer.ggml.eos_token_id", U32, 2),
           ("tokenizer.ggml.unknown_token_id", U32, 0)]
    ids = {t: i for i, t in enumerate(tokens)}
    for key, v in extra:
        kv = [e for e in kv if e[0] != key]  # a GGUF key appears once
        if isinstance(v, bool):
            kv.append((key, BOOL, v))
        else:
            kv.append((key, U32, ids[v] if isinstance(v, str) else v))
    return gguf(kv, [])


def wpm_gguf():
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    types = [CONTROL, UNKNOWN, CONTROL, CONTROL, CONTROL]
    words = re.findall(r"\w+|[^\w\s]", SAMPLE.lower())
    seen = set(tokens)
    for w in words:
        for t in ("\u2581" + w, "\u2581" + w[:3], w[3:6], w[-2:]):
            if t and t != "\u2581" and t not in seen:
                seen.add(t)
                tokens.append(t)
                types.append(NORMAL)
    for c in "abcdefghijklmnopqrstuvwxyz0123456789.,!?'":
        for t in ("\u2581" + c, c):
            if t not in seen:
                seen.add(t)
                tokens.append(t)
                types.append(NORMAL)
    kv = [("general.architecture", STR, "bert"),
          ("tokenizer.ggml.model", STR, "bert"),
          ("tokenizer.ggml.tokens", ARR, (STR, tokens)),
          ("tokenizer.ggml.token_type", ARR, (I32, types)),
          ("tokenizer.ggml.cls_token_id", U32, 2),
          ("tokenizer.ggml.seperator_token_id", U32, 3),
          ("tokenizer.ggml.padding_token_id", U32, 0),
          ("tokenizer.ggml.unknown_token_id", U32, 1)]
    return gguf(kv, [])


CHATML = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
LLAMA3 = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
          "<|end_header_id|>", "<|eot_id|>"]


def vocabs():
    yield "gpt2", bpe_gguf("gpt-2", ["<|endoftext|>"],
                           [("tokenizer.ggml.bos_token_id", "<|endoftext|>"),
                            ("tokenizer.ggml.eos_token_id", "<|endoftext|>")])
    yield "llama3", bpe_gguf("llama-bpe", LLAMA3,
                             [("tokenizer.ggml.bos_token_id", "<|begin_of_text|>"),
                              ("tokenizer.ggml.eos_token_id", "<|end_of_text|>"),
                              ("tokenizer.ggml.eot_token_id", "<|eot_id|>")])
    yield "qwen2", bpe_gguf("qwen2", CHATML, [("tokenizer.ggml.eos_token_id", "<|im_end|>"),
                                              ("tokenizer.ggml.add_bos_token", False)],
                            user=["<tool_call>"], arch="qwen2")
    yield "smollm", bpe_gguf("smollm", CHATML,
                             [("tokenizer.ggml.bos_token_id", "<|im_start|>"),
                              ("tokenizer.ggml.eos_token_id", "<|im_end|>")])
    for pre in ("falcon", "deepseek-coder", "deepseek-llm", "deepseek-v3", "tekken", "bloom",
                "default"):
        yield "bpe_" + pre, bpe_gguf(pre, ["<|endoftext|>"])
    yield "bpe_nopre", bpe_gguf(None, ["<|endoftext|>"])
    yield "llama_spm", spm_gguf([], extra=[("tokenizer.ggml.add_bos_token", True)])
    yield "gemma_spm", spm_gguf(["<start_of_turn>", "<end_of_turn>"], arch="gemma3",
                                extra=[("tokenizer.ggml.add_space_prefix", False)])
    yield "phi3_spm", spm_gguf(["<|endoftext|>", "<|user|>", "<|assistant|>", "<|end|>"],
                               arch="phi3", name="Phi-3 mini",
                               extra=[("tokenizer.ggml.eos_token_id", "<|endoftext|>"),
                                      ("tokenizer.ggml.add_eos_token", False)])
    yield "spm_nobytes", spm_gguf(["<|im_start|>", "<|im_end|>"], user=["[TOOL]"],
                                  byte_tokens=False)
    yield "bert", wpm_gguf()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus", "tokenizer")
    os.makedirs(out, exist_ok=True)
    for name, g in vocabs():
        # Every vocabulary with every text would be many near-duplicates:
        # each gets three texts in turn, the flags varying with them.
        k = sum(name.encode()) % len(TEXTS)
        for j in range(3):
            text = TEXTS[(k + 2 * j) % len(TEXTS)]
            flags = (0, 6, 5)[j]  # plain; parse+render specials; add BOS/EOS+render
            with open(os.path.join(out, "%s_%d.bin" % (name, j)), "wb") as f:
                f.write(struct.pack("<I", len(g)) + g + bytes([flags]) + text)


if __name__ == "__main__":
    main()
