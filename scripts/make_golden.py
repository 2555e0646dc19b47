#!/usr/bin/env python3
"""Golden logits made with llama.cpp (the llama-cpp-python package).

With an f32 KV cache, for each prompt: the token ids llama.cpp's tokenizer gives, then for every
prompt position the top-10 token ids and logits, then a 32-token greedy
continuation (argmax of the logits, no sampler). The format is plain text so
a C test reads it with fscanf:

    model <name>
    prompt <n_tokens> <text as a JSON string>
    tokens <id> <id> ...
    top <pos> <id>:<logit> ... (10 pairs)
    greedy <n> <id> <id> ...
    margins <top-1 minus top-2 logit at each greedy step>
    text <greedy continuation as a JSON string>

With --dequantize, llama.cpp runs an F32 copy of the model (every weight
dequantized with the gguf package): its matmuls then use f32 activations, as
Candle's reference kernels do, so the comparison is exact up to float
rounding. Without it, llama.cpp multiplies quantized weights by activations
quantized to 8 bits, which moves logits by tenths on a 30-layer model.

Usage: scripts/make_golden.py MODEL.gguf OUT.txt [--dequantize] [--prompt TEXT ...]
"""
import argparse
import json
import sys

import numpy as np

DEFAULT_PROMPTS = [
    "Once upon a time",
    "The little dog ran to the park and",
    "One day, Tom and his mom went to the store. They",
]

TOP_K = 10
N_GREEDY = 32


def dequantized_copy(src, dst):
    """Write src with every tensor as F32 (metadata copied)."""
    import gguf
    from gguf.quants import dequantize

    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(dst, arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = f.types[0]
        sub = f.types[1] if vtype == gguf.GGUFValueType.ARRAY else None
        if name == "general.file_type":
            w.add_key_value(name, 0, vtype)  # all F32
            continue
        w.add_key_value(name, f.contents(), vtype, sub)
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape)]
        data = dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        w.add_tensor(t.name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--prompt", action="append", help="prompt (repeatable)")
    ap.add_argument("--name", default=None)
    ap.add_argument("--dequantize", action="store_true")
    ap.add_argument("--n-greedy", type=int, default=N_GREEDY)
    ap.add_argument("--long-prompt", type=int, default=0,
                    help="add a prompt of about this many tokens (repeated text), "
                         "to pass sliding windows")
    args = ap.parse_args()

    model = args.model
    if args.dequantize:
        import os
        import tempfile

        tmp = tempfile.mkdtemp()
        model = os.path.join(tmp, "f32.gguf")
        dequantized_copy(args.model, model)
        import atexit
        import shutil

        atexit.register(shutil.rmtree, tmp, True)

    from llama_cpp import Llama

    llm = Llama(model_path=model, n_ctx=1024, n_batch=512, logits_all=True,
                n_threads=2, verbose=False, seed=0,
                type_k=0, type_v=0)  # f32 KV cache (0 = GGML_TYPE_F32): no f16 rounding
    n_vocab = llm.n_vocab()
    prompts = list(args.prompt or DEFAULT_PROMPTS)
    if args.long_prompt:
        para = ("The old lighthouse keeper climbed the stairs every evening, counting "
                "each step and listening to the waves below. ")
        text = para
        while len(llm.tokenize(text.encode("utf-8"), add_bos=True)) < args.long_prompt:
            text += para
        prompts.append(text.strip())
    with open(args.out, "w") as f:
        f.write("model %s\n" % (args.name or args.model.split("/")[-1]))
        for p in prompts:
            toks = llm.tokenize(p.encode("utf-8"), add_bos=True, special=False)
            llm.reset()
            llm.eval(toks)
            scores = np.array(llm.scores[: len(toks)], dtype=np.float64)
            assert scores.shape == (len(toks), n_vocab)
            f.write("prompt %d %s\n" % (len(toks), json.dumps(p)))
            f.write("tokens %s\n" % " ".join(str(t) for t in toks))
            for i in range(len(toks)):
                row = scores[i]
                top = np.argsort(-row, kind="stable")[:TOP_K]
                f.write("top %d %s\n" % (i, " ".join("%d:%.6f" % (t, row[t]) for t in top)))
            greedy = []
            margins = []
            last = scores[-1]
            for _ in range(args.n_greedy):
                t = int(np.argmax(last))
                top2 = np.sort(last)[-2:]
                margins.append(float(top2[1] - top2[0]))
                greedy.append(t)
                if llm.token_eos() == t:
                    break
                llm.eval([t])
                last = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
            text = llm.detokenize(greedy).decode("utf-8", errors="replace")
            f.write("greedy %d %s\n" % (len(greedy), " ".join(str(t) for t in greedy)))
            f.write("margins %s\n" % " ".join("%.4f" % m for m in margins))
            f.write("text %s\n" % json.dumps(text))
            print("%s: %r -> %r" % (args.out, p, text), file=sys.stderr)


if __name__ == "__main__":
    main()
