#!/usr/bin/env python3
"""Soak test of `candle serve` (issue 22; `make test-soak`), standard library only.

Starts a server on a small model, then:
  1. 2000 requests from 16 clients, mixing completions and chat replies,
     plain and streamed, requests the client cancels (a stream closed after
     its first event, a request closed before its reply) and bad inputs
     (invalid JSON, wrong types, unknown paths, prompts beyond the context,
     malformed HTTP);
  2. 20 storms of 64 concurrent bad inputs (from 64 client addresses): long
     prompts, malformed and oversized requests, stalled headers, bodies cut
     off midway;
and asserts: no unexpected status or malformed reply, RSS at the end within
1.5x of the idle RSS after warm-up, and the server's threads and open file
descriptors back to their idle counts (/proc/PID/status, /proc/PID/fd).

Usage: soak.py [--bin build/bin/candle] [--model GGUF] [--requests 2000]
               [--clients 16] [--storms 20] [--server-log FILE]
The model defaults to stories260K.gguf (../shared/data/models), else
tests/data/tiny/qwen2.gguf, else SmolLM2-135M under models/ or build-data/;
exits 77 (skip) without one or without the server. Prints the figures."""
import argparse
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pick_model():
    shared = os.environ.get("CANDLE_SHARED_DIR", os.path.join(SRC, "..", "shared"))
    for p in (os.path.join(shared, "data", "models", "stories260K.gguf"),
              os.path.join(SRC, "tests", "data", "tiny", "qwen2.gguf"),
              os.path.join(SRC, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"),
              os.path.join(SRC, "build-data", "SmolLM2-135M-Instruct.Q4_1.gguf"),
              "/work/main/build-data/SmolLM2-135M-Instruct.Q4_1.gguf"):
        if os.path.isfile(p):
            return p
    return None


def proc_figures(pid):
    st = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, v = line.split(":", 1)
            st[k] = v.strip()
    return {"rss_kb": int(st["VmRSS"].split()[0]), "hwm_kb": int(st["VmHWM"].split()[0]),
            "threads": int(st["Threads"]), "fds": len(os.listdir(f"/proc/{pid}/fd"))}


class Soak:
    def __init__(self, port):
        self.port = port
        self.lock = threading.Lock()
        self.counts = {}
        self.failures = []

    def note(self, kind, ok, detail=""):
        with self.lock:
            k = self.counts.setdefault(kind, [0, 0])
            k[0 if ok else 1] += 1
            if not ok and len(self.failures) < 30:
                self.failures.append(f"{kind}: {detail}")

    def connect(self, src="127.0.0.1", timeout=60):
        s = socket.socket()
        s.settimeout(timeout)
        s.bind((src, 0))
        s.connect(("127.0.0.1", self.port))
        return s

    @staticmethod
    def read_all(s):
        out = b""
        try:
            while True:
                d = s.recv(65536)
                if not d:
                    break
                out += d
        except (socket.timeout, ConnectionResetError):
            pass
        return out

    def http(self, method, path, body=b"", src="127.0.0.1", raw=None, timeout=120):
        s = self.connect(src, timeout)
        try:
            s.sendall(raw if raw is not None else
                      b"%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                      % (method.encode(), path.encode(), len(body), body))
        except (BrokenPipeError, ConnectionResetError):
            pass
        r = self.read_all(s)
        s.close()
        head, _, data = r.partition(b"\r\n\r\n")
        try:
            status = int(head.split(b" ", 2)[1])
        except (IndexError, ValueError):
            status = None
        if b"transfer-encoding: chunked" in head.lower():
            data = self.dechunk(data)
        return status, head, data

    @staticmethod
    def dechunk(data):
        out, pos = b"", 0
        while True:
            eol = data.find(b"\r\n", pos)
            if eol < 0:
                return out + b"<cut>"
            n = int(data[pos:eol].split(b";")[0] or b"0", 16)
            if n == 0:
                return out
            out += data[eol + 2:eol + 2 + n]
            pos = eol + 2 + n + 2

    def expect_error(self, kind, want, *a, **k):
        status, head, data = self.http(*a, **k)
        try:
            e = json.loads(data)["error"]
            ok = status in want and isinstance(e["message"], str) and b"application/json" in head
        except (ValueError, KeyError, TypeError):
            ok = False
        self.note(kind, ok, f"{status} {data[:120]!r}")

    def completion(self, kind, chat, stream, rng):
        n = rng.randint(4, 24)
        body = {"max_tokens": n, "temperature": rng.choice([0, 0.8]), "stream": stream}
        if chat:
            body["messages"] = [{"role": "user", "content": rng.choice(["Hi", "Tell me a story", "What is 2+2?"])}]
        else:
            body["prompt"] = rng.choice(["Once upon a time", "The little dog", "Lily saw a"])
        status, head, data = self.http("POST", "/v1/chat/completions" if chat else "/v1/completions",
                                       json.dumps(body).encode())
        ok = status == 200
        if ok and stream:
            ok = data.rstrip().endswith(b"data: [DONE]") and b'"finish_reason":"' in data
        elif ok:
            try:
                j = json.loads(data)
                ok = j["usage"]["completion_tokens"] <= n and j["choices"][0]["finish_reason"] in ("stop", "length")
            except (ValueError, KeyError):
                ok = False
        self.note(kind, ok, f"{status} {data[:120]!r}")

    def cancelled(self, kind, stream):
        body = json.dumps({"prompt": "Once upon a time", "max_tokens": 200, "ignore_eos": True,
                           "stream": stream}).encode()
        s = self.connect()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        if stream:
            d = s.recv(4096)  # the status line and first event, then leave
            ok = d.startswith(b"HTTP/1.1 200")
        else:
            time.sleep(0.05)
            ok = True
        s.close()
        self.note(kind, ok, "no stream start")

    def one(self, i, rng):
        k = i % 16
        if k in (0, 1, 2):
            self.completion("completion", False, False, rng)
        elif k in (3, 4):
            self.completion("completion-stream", False, True, rng)
        elif k == 5:
            self.completion("chat", True, False, rng)
        elif k == 6:
            self.completion("chat-stream", True, True, rng)
        elif k == 7:
            self.cancelled("cancel-stream", True)
        elif k == 8:
            self.cancelled("cancel-request", False)
        elif k == 9:
            self.expect_error("bad-json", (400,), "POST", "/v1/completions", b"{\"prompt\": ")
        elif k == 10:
            self.expect_error("bad-field", (400,), "POST", "/v1/completions",
                              json.dumps({"prompt": "x", "max_tokens": "many"}).encode())
        elif k == 11:
            self.expect_error("not-found", (404,), "GET", "/v1/nothing")
        elif k == 12:
            self.expect_error("too-long", (400,), "POST", "/v1/completions",
                              json.dumps({"prompt": "word " * 4000}).encode())
        elif k == 13:
            self.expect_error("bad-http", (400, 505), "", "", raw=rng.choice([
                b"GET /health HTTP/3.0\r\nHost: x\r\n\r\n",
                b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: x1\r\n\r\n"]))
        elif k == 14:
            status, _, data = self.http("GET", "/health")
            self.note("health", status == 200, f"{status}")
        else:
            self.expect_error("bad-type", (400,), "POST", "/v1/completions", json.dumps([1, 2]).encode())

    def phase_requests(self, n, clients):
        nxt = [0]

        def worker(w):
            rng = random.Random(w)
            while True:
                with self.lock:
                    i = nxt[0]
                    nxt[0] += 1
                if i >= n:
                    return
                try:
                    self.one(i, rng)
                except OSError as e:
                    self.note("socket", False, str(e))
        ts = [threading.Thread(target=worker, args=(w,)) for w in range(clients)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    def storm(self, s_i):
        def bad(i):
            src = f"127.0.9.{1 + i}"
            k = (i + s_i) % 8
            try:
                if k == 0:
                    self.expect_error("storm-long", (400,), "POST", "/v1/completions",
                                      json.dumps({"prompt": "story " * 40000}).encode(), src=src)
                elif k == 1:
                    self.expect_error("storm-431", (431,), "", "", src=src,
                                      raw=b"GET /health HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 20000 + b"\r\n\r\n")
                elif k == 2:
                    self.expect_error("storm-414", (414,), "", "", src=src,
                                      raw=b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
                elif k == 3:
                    self.expect_error("storm-413", (413,), "", "", src=src,
                                      raw=b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99000000\r\n\r\n")
                elif k == 4:  # headers never finished: the client gives up
                    s = self.connect(src)
                    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
                    time.sleep(0.2)
                    s.close()
                    self.note("storm-stall", True)
                elif k == 5:  # a body cut off midway
                    s = self.connect(src)
                    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n{\"pro")
                    time.sleep(0.2)
                    s.close()
                    self.note("storm-cut", True)
                elif k == 6:
                    self.expect_error("storm-json", (400,), "POST", "/v1/chat/completions",
                                      json.dumps({"messages": [{"role": 1}]}).encode(), src=src)
                else:
                    self.expect_error("storm-cl", (400,), "", "", src=src,
                                      raw=b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                                          b"Content-Length: 4\r\n\r\nabcd")
            except OSError as e:
                self.note("storm-socket", False, str(e))
        ts = [threading.Thread(target=bad, args=(i,)) for i in range(64)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(SRC, "build", "bin", "candle"))
    ap.add_argument("--model", default=None)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--storms", type=int, default=20)
    ap.add_argument("--server-log", default=os.devnull, help="the server's stderr (default: discarded)")
    a = ap.parse_args()
    model = a.model or pick_model()
    if not model:
        print("SKIP: no small model (stories260K.gguf, tests/data/tiny/qwen2.gguf or SmolLM2)")
        return 77
    if not os.access(a.bin, os.X_OK):
        print(f"SKIP: {a.bin} absent (make build)")
        return 77
    h = subprocess.run([a.bin, "serve", "--help"], capture_output=True, text=True)
    if "has no server" in h.stdout + h.stderr:
        print("SKIP: candle built without the server (make deps)")
        return 77
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    log = open(a.server_log, "w")
    srv = subprocess.Popen([a.bin, "serve", "-m", model, "--port", str(port), "-c", "512", "--parallel", "4",
                            "--chat-template", "chatml", "--quiet"], stderr=log)
    soak = Soak(port)
    try:
        for _ in range(300):
            try:
                if soak.http("GET", "/health", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            if srv.poll() is not None:
                print("FAIL: the server did not start")
                return 1
            time.sleep(0.1)
        # warm-up: the first requests allocate the scheduler's working memory
        for i in range(32):
            soak.one(i, random.Random(i))
        time.sleep(2.5)
        idle = proc_figures(srv.pid)
        print(f"model {os.path.basename(model)}; idle after warm-up: {idle}")
        t0 = time.time()
        soak.phase_requests(a.requests, a.clients)
        t1 = time.time()
        after_req = proc_figures(srv.pid)
        print(f"{a.requests} requests from {a.clients} clients in {t1 - t0:.1f} s: {after_req}")
        rss = []
        for i in range(a.storms):
            soak.storm(i)
            rss.append(proc_figures(srv.pid)["rss_kb"])
        print(f"{a.storms} storms of 64 bad inputs in {time.time() - t1:.1f} s; RSS after each (MB): "
              f"{[round(r / 1024, 1) for r in rss]}")
        # connection threads exit and the server trims when idle (each second)
        end = None
        for _ in range(40):
            time.sleep(0.5)
            end = proc_figures(srv.pid)
            if end["threads"] <= idle["threads"] and end["fds"] <= idle["fds"] and end["rss_kb"] <= 1.5 * idle["rss_kb"]:
                break
        print(f"end: {end}")
        bad = {k: v for k, v in soak.counts.items() if v[1]}
        print("counts (ok, failed):", dict(sorted(soak.counts.items())))
        fail = False
        if bad:
            print("FAIL: unexpected replies:", bad)
            for f in soak.failures:
                print("  ", f)
            fail = True
        if end["rss_kb"] > 1.5 * idle["rss_kb"]:
            print(f"FAIL: RSS {end['rss_kb']} kB at the end, over 1.5x the idle {idle['rss_kb']} kB")
            fail = True
        if end["threads"] > idle["threads"] or end["fds"] > idle["fds"]:
            print(f"FAIL: threads {end['threads']} / fds {end['fds']} at the end, idle {idle['threads']} / {idle['fds']}")
            fail = True
        if srv.poll() is not None:
            print("FAIL: the server died")
            fail = True
        total = sum(v[0] + v[1] for v in soak.counts.values())
        print(f"{'FAIL' if fail else 'PASS'}: {total} exchanges, RSS {idle['rss_kb'] / 1024:.1f} -> "
              f"{end['rss_kb'] / 1024:.1f} MB (peak {end['hwm_kb'] / 1024:.1f}), threads {idle['threads']} -> "
              f"{end['threads']}, fds {idle['fds']} -> {end['fds']}")
        return 1 if fail else 0
    finally:
        srv.terminate()
        try:
            srv.wait(timeout=30)
        except subprocess.TimeoutExpired:
            srv.kill()


if __name__ == "__main__":
    sys.exit(main())
