"""Helpers the server benchmarks share (serve_bench.py, serve_lookup.py,
grammar_compare.py)."""
import socket


def free_port():
    """A TCP port on 127.0.0.1 free at the time of asking."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p
