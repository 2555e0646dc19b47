#!/usr/bin/env bash
# candle run (issue 22): Ctrl-C (SIGINT) during generation stops it between two
# tokens; the text so far is written, the timings follow and the exit
# status is 130. A second SIGINT before the first took effect ends the
# process at once, by the signal. Stories260K with a grammar that never ends;
# stdout is a 4 KiB pipe read only after the signal, so the signal lands
# inside the generation (its write blocks until then: the test waits for
# that); under the grammar no
# newline is added. Every wait is bounded.
set -u
CANDLE="${CANDLE:-${CANDLE_BINARY_DIR:?}/bin/candle}"
MODEL="${CANDLE_SHARED_DIR:-${CANDLE_SOURCE_DIR:-.}/../shared}/data/models/stories260K.gguf"
[ -f "$MODEL" ] || { echo "SKIP: $MODEL absent"; exit 77; }
SRC="${CANDLE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
python3 - "$CANDLE" "$MODEL" "$SRC" <<'PY'
import os, re, select, signal, subprocess, sys, time
candle, model, src = sys.argv[1:4]
sys.path.insert(0, os.path.join(src, "tests", "common"))
import pipe_child
# --ctx-shift: the text never ends, so it fills the pipe
args = [candle, "run", "-m", model, "-p", "Once upon a time", "--temp", "0", "-n", "-1", "-c", "256",
        "--ctx-shift", "--seed", "1", "--grammar-text", "root ::= [a-z ] root"]
ok = True
def fail(msg):
    global ok
    ok = False
    print("FAIL:", msg)

def start():
    p, r, err = pipe_child.start(args)
    ready, _, _ = select.select([r], [], [], 30)
    first = os.read(r, 1) if ready else b""
    if len(first) != 1:
        fail("no text before the signal")
    # the pipe fills behind the byte read, then the writer blocks
    if not pipe_child.wait_blocked(p, r):
        fail("the generation did not block on its full stdout")
    return p, r, err, bytearray(first)

def drain(p, r, out, secs=30):
    end = time.time() + secs
    while time.time() < end:
        ready, _, _ = select.select([r], [], [], 0.05)
        if ready:
            b = os.read(r, 65536)
            if not b:
                break
            out.extend(b)
    try:
        return p.wait(max(1, end - time.time()))
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return None

# one SIGINT: a clean stop
p, r, err, out = start()
p.send_signal(signal.SIGINT)
rc = drain(p, r, out)
os.close(r)
time.sleep(0.2)
m = re.search(rb"generation: (\d+) tokens in", err)
if rc != 130:
    fail(f"one SIGINT: exit {rc}, want 130: {bytes(err[-300:])!r}")
elif not m or int(m.group(1)) < 1 or b"[generation stopped by Ctrl-C after" not in err:
    fail(f"one SIGINT: no timings or note: {bytes(err[-300:])!r}")
elif len(out) < 4096 or not re.fullmatch(rb"[a-z ]+", bytes(out)):
    fail(f"one SIGINT: stdout {len(out)} bytes, ends {bytes(out[-20:])!r}")
else:
    print(f"one SIGINT: exit 130 after {m.group(1).decode()} tokens, {len(out)} bytes of text")

# two SIGINTs while the first has not taken effect (the write still blocks)
p, r, err, out = start()
p.send_signal(signal.SIGINT)
time.sleep(0.2)
p.send_signal(signal.SIGINT)
try:
    rc = p.wait(10)
except subprocess.TimeoutExpired:
    rc = None
    p.kill()
    p.wait()
os.close(r)
if rc != -signal.SIGINT:
    fail(f"two SIGINTs: exit {rc}, want death by SIGINT")
else:
    print("two SIGINTs: ended by the signal at once")
sys.exit(0 if ok else 1)
PY
