"""A child process whose stdout is a 4 KiB pipe, for the tests of SIGINT
during output (test_chat_cli.sh, test_run_sigint.sh): text that fills the
pipe blocks the child's write until the test reads, so a signal sent then
lands inside the output. Its stderr is collected by a thread."""
import array
import fcntl
import os
import subprocess
import termios
import threading
import time

F_SETPIPE_SZ = 1031


def start(args, stdin=subprocess.DEVNULL):
    """(process, read end of its stdout, bytearray its stderr fills)"""
    r, w = os.pipe()
    fcntl.fcntl(w, F_SETPIPE_SZ, 4096)
    p = subprocess.Popen(args, stdin=stdin, stdout=w, stderr=subprocess.PIPE)
    os.close(w)
    err = bytearray()
    threading.Thread(target=lambda: [err.extend(b) for b in iter(lambda: p.stderr.read1(4096), b"")],
                     daemon=True).start()
    return p, r, err


def blocked_in_write(p, r):
    """Whether p's main thread waits in write(1, ...); where /proc/PID/syscall
    cannot be read, whether the pipe is nearly full."""
    try:
        with open(f"/proc/{p.pid}/syscall") as f:
            return f.read().startswith("1 0x1 ")
    except OSError:
        have = array.array("i", [0])
        fcntl.ioctl(r, termios.FIONREAD, have)
        return have[0] >= 4000


def wait_blocked(p, r, secs=60):
    """Until p blocks in its write (seen twice, 0.1 s apart); False on timeout."""
    end = time.time() + secs
    while time.time() < end:
        if blocked_in_write(p, r):
            time.sleep(0.1)
            if blocked_in_write(p, r):
                return True
        time.sleep(0.01)
    return False
