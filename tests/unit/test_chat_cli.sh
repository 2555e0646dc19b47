#!/usr/bin/env bash
# candle chat (issue 22, finding 12): Ctrl-C (SIGINT) during a reply stops it
# and the chat goes on with the next message, twice; SIGINT at the prompt
# ends the process by that signal; line editing and history under a
# terminal (a pty: the up arrow brings the last message back, Ctrl-C at the
# prompt leaves) when the build has libedit or readline; the default reply limit (-n 512) and a base
# model's missing template say what happened. Stories260K under the zephyr
# template, replies made endless by a grammar; every wait is bounded.
set -u
CANDLE="${CANDLE:-${CANDLE_BINARY_DIR:?}/bin/candle}"
MODEL="${CANDLE_SHARED_DIR:-${CANDLE_SOURCE_DIR:-.}/../shared}/data/models/stories260K.gguf"
[ -f "$MODEL" ] || { echo "SKIP: $MODEL absent"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
ENDLESS='root ::= [a-z ] root'

# the default reply limit: before, an endless reply ran until the context was full
printf 'Hello\n' | timeout 60 "$CANDLE" chat -m "$MODEL" --chat-template zephyr --temp 0 \
    --grammar-text "$ENDLESS" >"$T/out" 2>"$T/err"; rc=$?
{ [ $rc = 0 ] && grep -q "reply cut at the limit of -n 512 tokens" "$T/err" &&
  ! grep -q "context of .* is full" "$T/err"; } ||
    { echo "FAIL: chat's default -n: rc $rc"; tail -5 "$T/err"; fail=1; }
# a base model (no tokenizer.chat_template): told so, pointed at run
printf 'Hello\n' | timeout 60 "$CANDLE" chat -m "$MODEL" >"$T/out" 2>"$T/err"; rc=$?
{ [ $rc = 1 ] && grep -q "looks like a base model" "$T/err" && grep -q "candle run" "$T/err"; } ||
    { echo "FAIL: base model message: rc $rc"; cat "$T/err"; fail=1; }

SRC="${CANDLE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
python3 - "$CANDLE" "$MODEL" "$ENDLESS" "$SRC" <<'PY' || fail=1
import os, re, select, signal, subprocess, sys, time
candle, model, endless, src = sys.argv[1:5]
sys.path.insert(0, os.path.join(src, "tests", "common"))
import pipe_child
args = [candle, "chat", "-m", model, "--chat-template", "zephyr", "--temp", "0", "-n", "-1",
        "-c", "2048", "--grammar-text", endless]
ok = True
def fail(msg):
    global ok
    ok = False
    print("FAIL:", msg)

# SIGINT during replies. stdout is a 4 KiB pipe of which one byte is read
# before the signal: an endless reply (about 4.7 KB before the context is
# full) blocks in its write until the rest is read, after the signal, so the
# signal always lands inside the reply.
p, r, err = pipe_child.start(args, stdin=subprocess.PIPE)
out = bytearray()
def pump(pred, secs=30):  # read stdout until pred() holds
    end = time.time() + secs
    while time.time() < end and not pred():
        ready, _, _ = select.select([r], [], [], 0.01)
        if ready:
            b = os.read(r, 4096)
            if not b:
                break
            out.extend(b)
    return pred()
for turn, msg in enumerate([b"Hello\n", b"Tell me more\n"]):
    p.stdin.write(msg)
    p.stdin.flush()
    # one byte of the reply, no more: the pipe stays full behind it
    ready, _, _ = select.select([r], [], [], 30)
    if not ready or len(b := os.read(r, 1)) != 1:
        fail(f"turn {turn}: no reply")
        break
    out.extend(b)
    p.send_signal(signal.SIGINT)
    # the reply's end: its newline on stdout, the note and the prompt on stderr
    if not pump(lambda: err.count(b"[reply stopped by Ctrl-C") == turn + 1 and err.endswith(b"> ")
                and out.endswith(b"\n")):
        fail(f"turn {turn}: the reply was not stopped (exit {p.poll()}): {bytes(err[-300:])!r}")
        break
    if p.poll() is not None:
        fail(f"turn {turn}: chat ended ({p.returncode})")
        break
if ok:
    # at the prompt SIGINT leaves, by the signal
    p.send_signal(signal.SIGINT)
    try:
        rc = p.wait(20)
        if rc != -signal.SIGINT:
            fail(f"SIGINT at the prompt: exit {rc}")
        else:
            print("SIGINT: two replies stopped, the chat went on; at the prompt it left")
    except subprocess.TimeoutExpired:
        fail("SIGINT at the prompt: chat still running")
if p.poll() is None:
    p.kill()
    p.wait()
os.close(r)

# line editing and history under a terminal
help_text = subprocess.run([candle, "chat", "--help"], capture_output=True, text=True).stdout
if "Line editing and history: off" in help_text:
    print("SKIP: line editing: built without libedit or readline")
else:
    import pty
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm"
        os.execv(candle, [candle, "chat", "-m", model, "--chat-template", "zephyr", "--temp", "0",
                          "-n", "4"])
    buf = bytearray()
    def read_until(pred, secs=20):
        end = time.time() + secs
        while time.time() < end and not pred():
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                try:
                    buf.extend(os.read(fd, 4096))
                except OSError:
                    return False
        return pred()
    ansi = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|[\r\x07\x08]")
    if not read_until(lambda: buf.count(b"> ") >= 1):
        fail(f"pty: no prompt: {bytes(buf)!r}")
    else:
        os.write(fd, b"Hello\r")
        if not read_until(lambda: buf.count(b"> ") >= 2):
            fail(f"pty: no second prompt: {bytes(buf)!r}")
        else:
            mark = len(buf)
            os.write(fd, b"\x1b[A")  # up: the last message again
            read_until(lambda: b"Hello" in ansi.sub(b"", bytes(buf[mark:])), 5)
            shown = ansi.sub(b"", bytes(buf[mark:]))
            if b"Hello" not in shown:
                fail(f"pty: the up arrow did not recall 'Hello': {bytes(buf[mark:])!r}")
            else:
                print("line editing: the up arrow recalled the last message")
            os.write(fd, b"\r")
            read_until(lambda: buf.count(b"> ") >= 3)
    # Ctrl-C at the editing prompt: the library restores the terminal and
    # passes SIGINT on, which ends chat (sent again each second, in case one
    # lands while the terminal's input is being flushed)
    end = time.time() + 20
    status = None
    last = 0
    while time.time() < end and status is None:
        if time.time() - last > 1:
            os.write(fd, b"\x03")
            last = time.time()
        try:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if ready:
                os.read(fd, 4096)
        except OSError:
            pass
        wpid, st = os.waitpid(pid, os.WNOHANG)
        status = st if wpid else None
    if status is None:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        fail("pty: Ctrl-C at the prompt did not end chat")
    elif not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGINT):
        fail(f"pty: Ctrl-C at the prompt: wait status {status}")
    else:
        print("line editing: Ctrl-C at the prompt ended chat by SIGINT")
    os.close(fd)
sys.exit(0 if ok else 1)
PY
[ $fail = 0 ] && echo "test_chat_cli: OK"
exit $fail
