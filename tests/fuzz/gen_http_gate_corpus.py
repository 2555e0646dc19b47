#!/usr/bin/env python3
"""Write the seed corpus for fuzz_http_gate: request header blocks a client
may send, valid ones (GET and POST, HTTP/1.0 and 1.1, bare LF line ends)
and the malformed ones tests/server/test_harden.py refuses (versions,
Content-Length forms, Transfer-Encoding, chunked bodies (411), Host,
folding, long targets).
An input is the bytes a client sent.

usage: python3 tests/fuzz/gen_http_gate_corpus.py [OUT_DIR]   (default:
corpus/http_gate/ beside this script). The output is committed; rerun after
changing this."""
import hashlib
import os
import sys

H = b"Host: x\r\n"
SEEDS = [
    b"GET /health HTTP/1.1\r\n" + H + b"\r\n",
    b"GET /health HTTP/1.0\r\n\r\n",
    b"GET /health HTTP/1.1\n" + b"Host: x\n\n",
    b"POST /v1/completions HTTP/1.1\r\n" + H + b"Content-Type: application/json\r\nContent-Length: 30\r\n\r\n"
    b"{\"prompt\":\"hi\",\"max_tokens\":3}",
    b"POST /v1/completions HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"POST /v1/chat/completions HTTP/1.1\r\n" + H + b"Authorization: Bearer k\r\nContent-Length: 2\r\n\r\n{}",
    b"GET /health HTTP/2.0\r\n" + H + b"\r\n",
    b"GET /health HTTP/1.2\r\n" + H + b"\r\n",
    b"GET /health HTTP/x.y\r\n" + H + b"\r\n",
    b"GET /health\r\n\r\n",
    b"GET  /health HTTP/1.1\r\n" + H + b"\r\n",
    b"G\x01T /health HTTP/1.1\r\n" + H + b"\r\n",
    b"GET /he\x7flth HTTP/1.1\r\n" + H + b"\r\n",
    b"GET /" + b"u" * 8200 + b" HTTP/1.1\r\n" + H + b"\r\n",
    b"POST / HTTP/1.1\r\n" + H + b"Content-Length: abc\r\n\r\n",
    b"POST / HTTP/1.1\r\n" + H + b"Content-Length: -1\r\n\r\n",
    b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 1, 2\r\n\r\n",
    b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 99999999999999999999\r\n\r\n",
    b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 5\r\nContent-Length: 7\r\n\r\n",
    b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 5\r\ncontent-length: 5\r\n\r\nhello",
    b"POST / HTTP/1.1\r\n" + H + b"Content-Length:  12 \r\n\r\n",
    b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: gzip\r\n\r\n",
    b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\nxx\r\n0\r\n\r\n",
    b"POST / HTTP/1.1\r\n" + H + b"transfer-encoding:  Chunked \r\n\r\nffffffffffffffffff\r\n",
    b"GET / HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.1\r\n" + H + H + b"\r\n",
    b"GET / HTTP/1.1\r\n" + H + b"Bad Header\r\n\r\n",
    b"GET / HTTP/1.1\r\n" + H + b": empty\r\n\r\n",
    b"GET / HTTP/1.1\r\n" + H + b"X-A: 1\r\n folded\r\n\r\n",
    b"GET / HTTP/1.1\r\n" + H + b"X-A: a\x00b\r\n\r\n",
    b"GET / HTTP/1.1\r\n" + H + b"X-A: a\rb\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
    b"\r\n\r\n",
    b"\n\n",
]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                              "corpus", "http_gate")
    os.makedirs(out, exist_ok=True)
    for s in SEEDS:
        with open(os.path.join(out, hashlib.sha1(s).hexdigest()[:16]), "wb") as f:
            f.write(s)
    print(f"{len(SEEDS)} seeds in {out}")


if __name__ == "__main__":
    main()
