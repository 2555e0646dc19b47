#!/usr/bin/env python3
"""Golden renderings of the chat templates in tests/data/jinja/*.jinja by the
jinja2 PyPI package, set up as transformers' apply_chat_template sets it up
(ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the
loopcontrols extension, raise_exception, strftime_now and its tojson).

For each template T and each conversation C below it writes
tests/data/jinja/golden/T.C.txt (the rendering) or T.C.err (the exception's
message when the template refuses the conversation: raise_exception, as
Gemma's for a system message, or an error such as iterating over none). The contexts themselves go to
tests/data/jinja/contexts/C.json with the template's special tokens added by
the C test (tests/unit/test_jinja.c), which renders the same and compares
byte for byte.

    python3 -m venv /work/venv-jinja && /work/venv-jinja/bin/pip install jinja2
    /work/venv-jinja/bin/python scripts/gen_jinja_goldens.py
"""
import json
import os
import sys
from datetime import datetime

try:
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from jinja2.ext import loopcontrols
except ImportError:
    print("SKIP: the jinja2 package is not installed")
    sys.exit(77)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "jinja")

# Special tokens as each model's tokenizer_config.json names them; the C test
# reads the same table from tests/data/jinja/tokens.json.
TOKENS = {
    "smollm2": {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"},
    "qwen2.5-coder": {"bos_token": None, "eos_token": "<|im_end|>"},
    "qwen3": {"bos_token": None, "eos_token": "<|im_end|>"},
    "llama-3.1": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "llama-3.2": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "hermes-3": {"bos_token": "<|begin_of_text|>", "eos_token": "<|im_end|>"},
    "mistral-nemo": {"bos_token": "<s>", "eos_token": "</s>"},
    "phi-3.5": {"bos_token": "<s>", "eos_token": "<|endoftext|>"},
    "gemma-2": {"bos_token": "<bos>", "eos_token": "<eos>"},
    "smollm3": {"bos_token": None, "eos_token": "<|im_end|>"},
    "deepseek-r1-distill-qwen": {"bos_token": "<\uff5cbegin\u2581of\u2581sentence\uff5c>",
                                 "eos_token": "<\uff5cend\u2581of\u2581sentence\uff5c>"},
    "functionary-v3.1": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "functionary-v3.2": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
}

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
CALL = {"id": "call9aBc1", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}

CONVERSATIONS = {
    "basic": dict(messages=[{"role": "system", "content": "You are a helpful assistant."},
                            {"role": "user", "content": "What is the capital of France?"}],
                  add_generation_prompt=True),
    "user": dict(messages=[{"role": "user", "content": "Hello!"}], add_generation_prompt=True),
    "multi": dict(messages=[{"role": "system", "content": "Answer briefly."},
                            {"role": "user", "content": "2+2?"},
                            {"role": "assistant", "content": "4"},
                            {"role": "user", "content": "And 3+3?"}],
                  add_generation_prompt=True),
    "multi_nogen": dict(messages=[{"role": "user", "content": "Say hi."},
                                  {"role": "assistant", "content": "Hi there."},
                                  {"role": "user", "content": "Again."},
                                  {"role": "assistant", "content": "Hi again."}],
                        add_generation_prompt=False),
    "text": dict(messages=[{"role": "user",
                            "content": "  Quotes \"x\" and 'y', a tab\t, a newline\nand unicode: caf\u00e9 \u2013 \u65e5\u672c \U0001F600  "}],
                 add_generation_prompt=True),
    "tools": dict(messages=[{"role": "system", "content": "You can call tools."},
                            {"role": "user", "content": "Weather in Paris?"},
                            {"role": "assistant", "content": "", "tool_calls": [CALL]},
                            {"role": "tool", "name": "get_weather", "tool_call_id": "call9aBc1",
                             "content": "{\"temperature\": 18.5, \"sky\": \"clear\"}"}],
                  tools=[WEATHER], add_generation_prompt=True),
    "tools_user": dict(messages=[{"role": "user", "content": "Weather in Oslo?"}],
                       tools=[WEATHER], add_generation_prompt=True),
    "think": dict(messages=[{"role": "user", "content": "Why?"},
                            {"role": "assistant", "content": "<think>\nLet me see.\n</think>\n\nBecause."},
                            {"role": "user", "content": "Ok."}],
                  add_generation_prompt=True),
}


def context(conv, template):
    c = {"tools": None, "date_string": "02 Dec 2026"}
    c.update(conv)
    c.update(TOKENS[template])
    return c


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    env = environment()
    os.makedirs(os.path.join(ROOT, "golden"), exist_ok=True)
    os.makedirs(os.path.join(ROOT, "contexts"), exist_ok=True)
    for name, conv in CONVERSATIONS.items():
        with open(os.path.join(ROOT, "contexts", name + ".json"), "w", encoding="utf-8") as f:
            json.dump(conv, f, ensure_ascii=False, indent=1)
            f.write("\n")
    with open(os.path.join(ROOT, "tokens.json"), "w", encoding="utf-8") as f:
        json.dump(TOKENS, f, indent=1)
        f.write("\n")
    n = 0
    for template in sorted(TOKENS):
        src = open(os.path.join(ROOT, template + ".jinja"), encoding="utf-8").read()
        t = env.from_string(src)
        for name, conv in CONVERSATIONS.items():
            base = os.path.join(ROOT, "golden", "%s.%s" % (template, name))
            for ext in (".txt", ".err"):
                if os.path.exists(base + ext):
                    os.remove(base + ext)
            try:
                out, ext = t.render(**context(conv, template)), ".txt"
            except jinja2.exceptions.TemplateError as e:
                # raise_exception's message: the C test wants it in its error
                out, ext = "raise: " + str(e), ".err"
            except Exception as e:  # the template fails on this input
                out, ext = "error: %s: %s" % (type(e).__name__, e), ".err"
            with open(base + ext, "w", encoding="utf-8", newline="") as f:
                f.write(out)
            n += 1
    print("wrote %d goldens for %d templates" % (n, len(TOKENS)))


if __name__ == "__main__":
    main()
