#!/usr/bin/env python3
"""Write the seed corpus for fuzz_multipart: multipart/form-data bodies as
OpenAI's clients send them to /v1/audio/transcriptions (file, model,
response_format, timestamp_granularities[]), RFC 2046's corner cases (a
quoted boundary, a preamble and an epilogue, transport padding, an empty
form) and the malformed bodies of tests/models/test_server_transcribe.sh.
An input is
  [u8 n][n bytes: the Content-Type header][the body]   (n 255: no header)

usage: python3 tests/fuzz/gen_multipart_corpus.py [OUT_DIR]   (default:
corpus/multipart/ beside this script). The output is committed; rerun after
changing this."""
import hashlib
import os
import sys

RIFF = b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x80>\x00\x00\x00}\x00\x00\x02\x00\x10\x00data\x00\x00\x00\x00"


def form(fields, b="b0undary"):
    out = b""
    for name, value, fn in fields:
        value = value.encode() if isinstance(value, str) else value
        disp = f'form-data; name="{name}"' + (f'; filename="{fn}"' if fn is not None else "")
        out += f"--{b}\r\nContent-Disposition: {disp}\r\n".encode()
        if fn is not None:
            out += b"Content-Type: audio/wav\r\n"
        out += b"\r\n" + value + b"\r\n"
    return out + f"--{b}--\r\n".encode()


def entry(ctype, body):
    if ctype is None:
        return b"\xff" + body
    c = ctype.encode()
    return bytes([len(c)]) + c + body


CT = "multipart/form-data; boundary=b0undary"
base = [("file", RIFF, "jfk.wav"), ("model", "whisper-1", None)]
good = form(base)
seeds = [
    (CT, good),
    (CT, form(base + [("response_format", "verbose_json", None), ("timestamp_granularities[]", "segment", None),
                      ("timestamp_granularities[]", "word", None)])),
    (CT, form(base + [("language", "en", None), ("prompt", "", None), ("temperature", "0.2", None)])),
    ('multipart/form-data; boundary="a b\'c"; charset=utf-8', b"preamble\r\n" + form(base, "a b'c") + b"epilogue"),
    ("Multipart/Form-Data;boundary=b0undary", good),
    (CT, b"--b0undary  \t\r\n" + good[len(b"--b0undary\r\n"):]),  # transport padding
    (CT, b"--b0undary--\r\n"),  # an empty form
    (CT, b'--b0undary\r\nContent-Disposition: form-data; name="a\\"b\\\\c"; filename=""\r\n\r\n\r\n--b0undary--'),
    (CT, b'--b0undary\r\ncontent-disposition: FORM-DATA ; NAME=model ; filename*=UTF-8\'\'x\r\n\r\nm\r\n--b0undary--'),
    # malformed
    (None, good),
    ("application/json", good),
    ("multipart/form-data", good),
    ("multipart/form-data; boundary=" + "x" * 71, good),
    ("multipart/form-data; boundary=other", good),
    ('multipart/form-data; boundary="b0undary', good),
    (CT, good[: len(good) // 2]),
    (CT, good[: -len(b"--b0undary--\r\n")]),
    (CT, good.replace(b"\r\n", b"\n")),
    (CT, b"--b0undary\r\nContent-Type: text/plain\r\n\r\nx\r\n--b0undary--\r\n"),
    (CT, b'--b0undary\r\nContent-Disposition: form-data; filename="a.wav"\r\n\r\nx\r\n--b0undary--\r\n'),
    (CT, b'--b0undary\r\nContent-Disposition: attachment; name="file"\r\n\r\nx\r\n--b0undary--\r\n'),
    (CT, b'--b0undary\r\nContent-Disposition: form-data; name="file\r\n\r\nx\r\n--b0undary--\r\n'),
    (CT, b'--b0undary\r\nContent-Disposition: form-data; name="file"\r\n' + b"X: y\r\n" * 700),
    (CT, form(base + [("model", "again", None)])),
    (CT, form(base + [(f"x{i}[]", "1", None) for i in range(40)])),
    (CT, form([("model", "m" * 100, None)])),
    (CT, b'--b0undary\r\nContent-Disposition: form-data; name="a"; name="b"\r\n\r\nx\r\n--b0undary--\r\n'),
    (CT, b'--b0undary\r\n Content-Disposition: form-data; name="a"\r\n\r\nx\r\n--b0undary--\r\n'),
    (CT, b'--b0undary\r\nContent-Disposition: form-data; name="a"\r\n\tfolded\r\n\r\nx\r\n--b0undary--\r\n'),
]

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "multipart")
os.makedirs(out, exist_ok=True)
for ctype, body in seeds:
    e = entry(ctype, body)
    with open(os.path.join(out, hashlib.sha1(e).hexdigest()[:16]), "wb") as f:
        f.write(e)
print(f"{len(seeds)} seeds in {out}")
