"""The server tests' HTTP helpers (tests/slow/test_server_lookup.sh and
test_server_draft.sh import them through PYTHONPATH=tests/common)."""
import json
import urllib.request


def post(port, path, body, timeout=900):
    """The JSON reply to a JSON POST to 127.0.0.1:port."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def metric(port, name):
    """One unlabelled series of /metrics; exits with a FAIL when it is missing."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise SystemExit(f"FAIL: {name} not in /metrics")
