#!/usr/bin/env python3
"""Write the seed corpus for fuzz_server: requests to the server's handlers,
valid ones (completions and chat, string / token-id / batch-of-one prompts,
sampling options, stop sequences, streams with and without usage, clients
that leave) and the invalid ones of tests/server/test_openai.py's bad-input
suite. An input is
  [u8 route][u8 client][body]
route: bits 0-2 the URL (0 /v1/completions, 1 /v1/chat/completions,
2 /completions, 3 /chat/completions, 4 /v1/embeddings, 5 /v1/models,
6 /health, 7 unknown: with a body that begins with '/', "/x" and the
body's bytes up to a NUL or newline), bits 3-4 the method (0/1 POST, 2 GET, 3 DELETE),
bits 5-7 the chat template (0 Qwen's chatml text, 1 chatml, 2 llama2,
3 llama3, 4 zephyr, 5 gemma, 6 phi3, 7 none). client: bits 0-2 the stream
chunks read before the client leaves (0: all), bit 3 the client's socket
closed before the request, bit 4 a stream sent twice (both run at once).

usage: python3 tests/fuzz/gen_server_corpus.py [OUT_DIR]   (default:
corpus/server/ beside this script). The output is committed; rerun after
changing this."""
import hashlib
import json
import os
import sys

COMPL, CHAT, COMPL2, CHAT2, EMB, MODELS, HEALTH, NONE = range(8)
POST, GET, DELETE = 0, 2, 3


def route(url, method=POST, chat=0):
    return bytes([url | (method << 3) | (chat << 5)])


def seed(url, body, method=POST, chat=0, leave=0, gone=False, twice=False):
    if not isinstance(body, bytes):
        body = json.dumps(body).encode()
    return route(url, method, chat) + bytes([leave | (8 if gone else 0) | (16 if twice else 0)]) + body


LONG = "Once upon a time there was a little girl named Lily who liked to play"
USER = [{"role": "user", "content": "Hi"}]
TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}},
    {"type": "function", "function": {"name": "now"}}]
MSGS = [{"role": "system", "content": "You are kind."}, {"role": "user", "content": "Hello"}]

seeds = [
    # valid completions
    seed(COMPL, {"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}),
    seed(COMPL2, {"prompt": "The little dog", "max_tokens": 6, "temperature": 1.0, "top_p": 0.9,
                  "seed": 1234, "frequency_penalty": 0.5, "presence_penalty": 0.5, "top_k": 40,
                  "min_p": 0.05, "repeat_penalty": 1.1, "repeat_last_n": 8}),
    seed(COMPL, {"prompt": [1, 20, 30], "max_tokens": 4, "temperature": 0}),
    seed(COMPL, {"prompt": ["Tom and Lily"], "max_completion_tokens": 5, "seed": 7}),
    seed(COMPL, {"prompt": "Hi", "ignore_eos": True, "temperature": 0}),  # up to the context
    seed(COMPL, {"prompt": "A", "max_tokens": 95, "ignore_eos": True, "temperature": 5}),
    seed(COMPL, {"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0,
                 "stop": ["a", "zzzz"]}),
    seed(COMPL, {"prompt": "Mia had a red", "max_tokens": 12, "stop": "e", "temperature": 2}),
    seed(COMPL, {"prompt": "x", "max_tokens": 10, "stop": ["\u00e9", "ab", "abc", "b"],
                 "temperature": 10, "seed": 3}),
    seed(COMPL, {"prompt": "\u00e9t\u00e9 \u4e2d\u6587 \U0001f600 <|im_start|>", "max_tokens": 6}),
    seed(COMPL, {"prompt": "x", "max_tokens": 3, "temperature": None, "stop": None,
                 "stream_options": None, "seed": -5}),
    seed(COMPL, {"prompt": "word " * 20, "max_tokens": 4}),
    seed(COMPL, {"prompt": "x", "max_tokens": 90, "temperature": 0, "stop": "the"}),
    # streams
    seed(COMPL, {"prompt": "Once upon a time", "max_tokens": 10, "stream": True}),
    seed(COMPL, {"prompt": "Hi", "max_tokens": 5, "stream": True,
                 "stream_options": {"include_usage": True}}),
    seed(CHAT, {"messages": MSGS, "max_tokens": 8, "stream": True,
                "stream_options": {"include_usage": True}}),
    seed(COMPL, {"prompt": "Once", "max_tokens": 20, "stream": True, "ignore_eos": True}, leave=1),
    seed(CHAT, {"messages": MSGS, "max_tokens": 20, "stream": True}, leave=2),
    seed(COMPL, {"prompt": "Lily", "max_tokens": 12, "stream": True, "stop": ["e", "th"],
                 "temperature": 3}, leave=0),
    # the same stream twice at once: the second shares the first's prompt rows
    seed(COMPL, {"prompt": LONG, "max_tokens": 12, "stream": True, "temperature": 0}, twice=True),
    seed(COMPL, {"prompt": LONG, "max_tokens": 12, "stream": True, "seed": 5}, twice=True, leave=2),
    seed(CHAT, {"messages": MSGS, "max_tokens": 8, "stream": True, "temperature": 0,
                "stream_options": {"include_usage": True}}, twice=True),
    seed(COMPL, {"prompt": list(range(3, 40)), "max_tokens": 4, "stream": True,
                 "temperature": 0}, twice=True),
    # logprobs, logit_bias, n > 1
    seed(COMPL, {"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0, "logprobs": 5}),
    seed(COMPL, {"prompt": "\u00e9t\u00e9 \U0001f600", "max_tokens": 12, "logprobs": 0, "temperature": 3,
                 "stop": ["e", "\u00e9"]}),
    seed(COMPL, {"prompt": "Once", "max_tokens": 12, "logprobs": 2, "stream": True, "stop": "a",
                 "logit_bias": {"10": 100, "11": -100, "12": 0.5}}),
    seed(CHAT, {"messages": MSGS, "max_tokens": 8, "logprobs": True, "top_logprobs": 20, "temperature": 0}),
    seed(CHAT, {"messages": MSGS, "max_tokens": 8, "logprobs": True, "stream": True, "seed": 2}),
    seed(CHAT, {"messages": MSGS, "max_tokens": 8, "logprobs": True, "top_logprobs": 3, "stream": True,
                "response_format": {"type": "json_object"}}, twice=True),
    seed(COMPL, {"prompt": "Lily", "max_tokens": 6, "n": 2, "logprobs": 1, "seed": 9}),
    seed(CHAT, {"messages": USER, "max_tokens": 6, "n": 2, "temperature": 0, "logprobs": False,
                "logit_bias": {"3": -100}}),
    seed(COMPL, {"prompt": "x", "logprobs": 6}),
    seed(COMPL, {"prompt": "x", "logprobs": True}),
    seed(COMPL, {"prompt": "x", "top_logprobs": 2}),
    seed(CHAT, {"messages": USER, "top_logprobs": 2}),
    seed(CHAT, {"messages": USER, "logprobs": True, "top_logprobs": 21}),
    seed(COMPL, {"prompt": "x", "logit_bias": {"abc": 1}}),
    seed(COMPL, {"prompt": "x", "logit_bias": {"5": 101}}),
    seed(COMPL, {"prompt": "x", "logit_bias": {"99999999999": 1}}),
    seed(COMPL, {"prompt": "x", "logit_bias": [1]}),
    seed(COMPL, {"prompt": "x", "n": 2, "stream": True}),
    seed(CHAT, {"messages": MSGS, "max_tokens": 10, "n": 2, "stream": True, "logprobs": True, "top_logprobs": 2,
                "stream_options": {"include_usage": True}, "stop": ["e"]}),
    seed(COMPL, {"prompt": LONG, "max_tokens": 8, "n": 2, "stream": True, "temperature": 0}, twice=True),
    seed(COMPL, {"prompt": "Once", "max_tokens": 30, "n": 2, "stream": True, "ignore_eos": True}, leave=2),
    seed(COMPL, {"prompt": "x", "n": 3}),
    # chat, every template
    seed(CHAT, {"messages": MSGS, "max_tokens": 8, "temperature": 0}),
    seed(CHAT2, {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 6}, chat=1),
    seed(CHAT, {"messages": MSGS, "max_tokens": 6}, chat=2),
    seed(CHAT, {"messages": MSGS + [{"role": "assistant", "content": "Hi!"},
                                    {"role": "user", "content": "More"}], "max_tokens": 6}, chat=2),
    seed(CHAT, {"messages": USER, "max_tokens": 6}, chat=3),
    seed(CHAT, {"messages": USER, "max_tokens": 6}, chat=4),
    seed(CHAT, {"messages": MSGS, "max_tokens": 6}, chat=4),
    seed(CHAT, {"messages": USER, "max_tokens": 6}, chat=5),
    seed(CHAT, {"messages": MSGS, "max_tokens": 6}, chat=5),
    seed(CHAT, {"messages": USER, "max_tokens": 6}, chat=6),
    seed(CHAT, {"messages": MSGS, "max_tokens": 6}, chat=6),
    seed(CHAT, {"messages": MSGS * 4, "max_tokens": 6}, chat=1),  # over the context
    seed(CHAT, {"messages": [{"role": "user", "content": [{"type": "text", "text": "Hel"},
                                                          {"type": "text", "text": "lo"}]}],
                "max_tokens": 4}),
    seed(CHAT, {"messages": [{"role": "tool", "content": ""}], "max_tokens": 4}, chat=2),
    # tool calling: required / named (the tool grammar), auto, the calls and results back
    *[seed(CHAT, {"messages": USER, "tools": TOOLS, "max_tokens": 40, **kw}, chat=ch, leave=lv)
      for kw, ch, lv in (({"tool_choice": "required"}, 0, 0), ({"tool_choice": "required", "stream": True}, 0, 0),
                         ({"tool_choice": {"type": "function", "function": {"name": "add"}},
                           "parallel_tool_calls": False, "stream": True}, 1, 2),
                         ({"tool_choice": "auto", "stream": True, "seed": 3}, 0, 0), ({}, 3, 0),
                         ({"tool_choice": "required", "n": 2}, 2, 0))],
    seed(CHAT, {"messages": USER + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 1, \"b\": 2}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "3"}], "tools": TOOLS, "max_tokens": 8}),
    seed(CHAT, {"messages": USER, "tools": {"type": "function"}}),
    seed(CHAT, {"messages": USER, "tools": [{"type": "function", "function": {"name": "bad name"}}]}),
    seed(CHAT, {"messages": USER, "tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "g"}}}),
    seed(CHAT, {"messages": USER, "functions": [{"name": "f"}]}),
    seed(COMPL, {"prompt": "x", "tools": TOOLS}),
    # clients that leave
    seed(COMPL, {"prompt": "Once upon a time", "max_tokens": 30, "ignore_eos": True}, gone=True),
    seed(COMPL, {"prompt": "Once", "max_tokens": 30, "stream": True}, gone=True, leave=1),
    # the bad-input suite of tests/server/test_openai.py
    seed(COMPL, b"{not json"),
    seed(COMPL, b"[1,2]"),
    seed(COMPL, b'{"prompt": "\\u00\xe2\x96\x81"}'),  # a bad escape before a 3-byte character
    seed(COMPL, b'{"prompt": "\xff"}'),
    seed(COMPL, b""),
    seed(COMPL, b'{"prompt": "x", "prompt": "y"}'),
    seed(COMPL, {"prompt": 5}),
    seed(COMPL, {"prompt": "x", "temperature": "hot"}),
    seed(COMPL, {"prompt": "x", "max_tokens": 10 ** 12}),
    seed(COMPL, {"prompt": "x", "max_tokens": -1}),
    seed(COMPL, {"prompt": "x", "max_tokens": 97}),
    seed(COMPL, {"prompt": "x", "top_p": 7}),
    seed(COMPL, {"prompt": "x", "stop": [""]}),
    seed(COMPL, {"prompt": "x", "stop": ["a", "b", "c", "d", "e"]}),
    seed(COMPL, {"prompt": "x", "stop": 3}),
    seed(COMPL, {"prompt": [1, 99999]}),
    seed(COMPL, {"prompt": [1, -1]}),
    seed(COMPL, {"prompt": [1, 2.5]}),
    seed(COMPL, {"prompt": []}),
    seed(COMPL, {"prompt": ["a", "b"]}),
    seed(COMPL, {"prompt": "word " * 400}),
    seed(COMPL, {"prompt": list(range(96))}),
    seed(COMPL, {"prompt": list(range(95)), "temperature": 0}),  # one token left
    seed(COMPL, {"prompt": "x", "n": 17}),
    seed(COMPL, {"prompt": "x", "stream": "yes"}),
    seed(COMPL, {"prompt": "x", "stream": True, "stream_options": 1}),
    seed(COMPL, {"prompt": "x", "stream_options": {"include_usage": 1}}),
    seed(COMPL, {"prompt": "x", "seed": 1.5}),
    seed(COMPL, {"prompt": "x", "repeat_penalty": 0}),
    seed(CHAT, {"messages": "hi"}),
    seed(CHAT, {"messages": []}),
    seed(CHAT, {"messages": [{"role": "user"}]}),
    seed(CHAT, {"messages": [{"role": 1, "content": "x"}]}),
    seed(CHAT, {"messages": [{"role": "user", "content": [{"type": "image"}]}]}),
    seed(CHAT, {"messages": MSGS}, chat=7),  # no chat template
    seed(EMB, {"input": "hi"}),
    seed(EMB, b"nope"),
    seed(NONE, b"", method=GET),
    # unknown URLs of any bytes, quoted in the error message (cut at 512 bytes)
    seed(NONE, b"/" + b"\xff" * 600, method=GET),
    seed(NONE, b"/" + "\u00e9".encode() * 300 + b"\n", method=POST),
    seed(NONE, b"/a\xe2\x96", method=GET),
    # "no endpoint GET /x" and 334 bytes made U+FFFD fill 1020 bytes: a 4-byte character
    # then ends at the cleaned message's 1024-byte buffer (one past it, before the bound)
    seed(NONE, b"/" + b"\xff" * 334 + "\U0001f600".encode(), method=GET),
    seed(COMPL, b"", method=GET),
    seed(CHAT2, b"{}", method=DELETE),
    seed(MODELS, b"", method=GET),
    seed(MODELS, b"", method=POST),
    seed(HEALTH, b"", method=GET),
    seed(HEALTH, b"", method=DELETE),
]

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "server")
os.makedirs(out, exist_ok=True)
for s in seeds:
    with open(os.path.join(out, hashlib.sha1(s).hexdigest()[:16]), "wb") as f:
        f.write(s)
print(f"{len(seeds)} seeds in {out}")
