"""A sandboxed program's output costs the host a small, bounded amount (pipes read to a byte cap, no
temporary files), and the program cannot read the caller's kernel keys (its own empty session
keyring)."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path

import pytest
from requirements import needs

import harness.sandbox as sandbox
from harness.sandbox import OUTPUT_LIMIT_BYTES, OUTPUT_TAIL_BYTES, CappedOutput, namespaces_available, run_python

REPO = Path(__file__).resolve().parents[1]
full_isolation = needs(namespaces_available(), "user namespaces (root + unshare)", "full isolation uses them")
root_only = needs(os.geteuid() == 0, "root", "the test mounts a small tmpfs as the temporary folder")

_FLOOD_MB = 100
_FLOOD = (
    "import sys\n"
    "sys.stdout.buffer.write(b'FIRST\\n')\n"
    "block = b'x' * (1 << 20)\n"
    f"for _ in range({_FLOOD_MB}):\n"
    "    sys.stdout.buffer.write(block)\n"
    "    sys.stderr.buffer.write(block)\n"
    "sys.stdout.buffer.write(b'\\nLAST\\n')\n"
    "raise ValueError('the end')\n"
)


def test_capped_output_keeps_head_and_tail_in_bounded_memory() -> None:
    cap = CappedOutput(head=10, tail=4)
    for _ in range(1000):
        cap.add(b"0123456789")
    cap.add(b"TAIL")
    assert cap.total == 10_004 and cap.truncated
    assert len(cap.head) == 10 and len(cap.tail) <= 8  # never more than head + 2 * tail bytes held
    text = cap.text()
    assert text.startswith("0123456789\n[output truncated: 9990 bytes not kept]\n") and text.endswith("TAIL")
    small = CappedOutput(head=10, tail=4)
    small.add(b"0123456789abcd")
    assert not small.truncated and small.text() == "0123456789abcd"


@root_only
@pytest.mark.parametrize("mode", ["full", "best-effort"])
def test_flooding_output_uses_no_host_disk(mode: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if mode == "full" and not namespaces_available():
        pytest.skip("full isolation needs namespaces")
    if mode == "best-effort":
        monkeypatch.setitem(sandbox._NS_CACHE, "ok", False)
    # the temporary folder is a 24 MB tmpfs: 2 x 100 MB of output written to temporary files would
    # fill it (and fail the program with ENOSPC); through capped pipes it stays empty
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.mount(b"tmpfs", str(scratch).encode(), b"tmpfs", ctypes.c_ulong(2 | 4), b"size=24m,mode=0755") == 0
    peak = [0]
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], shutil.disk_usage(scratch).used)
            stop.wait(0.005)

    watcher = threading.Thread(target=watch)
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(scratch))
        watcher.start()
        result = run_python(_FLOOD, timeout_s=120, memory_mb=512)
        stop.set()
        watcher.join()
        result.cleanup()
    finally:
        stop.set()
        libc.umount2(str(scratch).encode(), 2)
    assert peak[0] < 1 << 20, peak  # the work dir is its own tmpfs on top: nothing of the output landed here
    assert result.status == "error" and result.returncode != 0  # the program ran to its end, not out of space
    assert "ValueError: the end" in result.stderr  # the tail (the traceback) is kept ...
    assert result.stdout.startswith("FIRST\n") and result.stdout.endswith("LAST\n")  # ... and the head
    assert result.details["stdout_truncated"] is True and result.details["stderr_truncated"] is True
    assert result.details["stdout_bytes"] == _FLOOD_MB * (1 << 20) + len("FIRST\n\nLAST\n")
    stderr_bytes = result.details["stderr_bytes"]
    assert isinstance(stderr_bytes, int) and stderr_bytes > _FLOOD_MB * (1 << 20)
    bound = OUTPUT_LIMIT_BYTES + OUTPUT_TAIL_BYTES + 100
    assert len(result.stdout) <= bound and len(result.stderr) <= bound


def test_small_output_is_whole_and_not_marked() -> None:
    result = run_python("import sys\nprint('x' * 5000)\nsys.stderr.write('e' * 3000)\n", timeout_s=20,
                        memory_mb=512)  # fmt: skip
    result.cleanup()
    assert result.status == "ok", result.stderr
    assert result.stdout == "x" * 5000 + "\n" and result.stderr == "e" * 3000
    assert "stdout_truncated" not in result.details and "stderr_truncated" not in result.details


def test_large_stdin_and_output_both_ways_do_not_deadlock() -> None:
    # 4 MB in while 4 MB comes out: feeding and reading happen together
    code = "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line)\n"
    data = ("y" * 1023 + "\n") * 4096
    result = run_python(code, timeout_s=60, memory_mb=512, stdin=data)
    result.cleanup()
    assert result.status == "ok", result.stderr[-500:]
    assert result.details["stdout_bytes"] == len(data)
    assert result.stdout.startswith("y" * 1023) and result.stdout.endswith("y\n")


def test_stdin_the_program_does_not_read_is_dropped() -> None:
    result = run_python("print('hi')", timeout_s=20, memory_mb=512, stdin="z" * 8_000_000)
    result.cleanup()
    assert result.status == "ok" and result.stdout == "hi\n", result.stderr[-500:]


def test_a_detached_child_holding_the_pipes_does_not_hang_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # best-effort mode: a grandchild in its own session keeps stdout open after the program exited;
    # the run still ends (the output drain gives up after a moment) and keeps what was written
    monkeypatch.setitem(sandbox._NS_CACHE, "ok", False)
    code = ("import os, sys, time\nprint('parent', flush=True)\n"
            "if os.fork() == 0:\n    os.setsid()\n    time.sleep(8)\n    os._exit(0)\n")
    result = run_python(code, timeout_s=20, memory_mb=512)
    result.cleanup()
    assert result.status == "ok" and result.stdout == "parent\n"
    assert result.seconds < 7


# ---- the caller's session keyring ------------------------------------------------------------------

_KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219), "riscv64": (217, 219)}.get(os.uname().machine)

# Run in a child (so that the test process keeps its own keyring): join a fresh session keyring, put
# a key in it, then run the sandboxed program, which tries every way to read it.
_CALLER = r'''
import ctypes, json, os, sys
from harness.sandbox import run_python
ADD_KEY, KEYCTL = int(sys.argv[1]), int(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
session = libc.syscall(KEYCTL, 1, None)  # KEYCTL_JOIN_SESSION_KEYRING
payload = sys.argv[3].encode()
desc = sys.argv[4].encode()
key = libc.syscall(ADD_KEY, b"user", desc, payload, len(payload), ctypes.c_long(-3))  # into @s
assert session > 0 and key > 0, os.strerror(ctypes.get_errno())
buf = ctypes.create_string_buffer(256)
assert libc.syscall(KEYCTL, 11, ctypes.c_long(key), buf, 256) == len(payload)  # readable here
program = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
buf = ctypes.create_string_buffer(256)
seen = []
n = libc.syscall(%(keyctl)d, 11, ctypes.c_long(%(key)d), buf, 256)  # KEYCTL_READ by serial
seen.append(buf.raw[:n].decode() if n > 0 else "read:" + os.strerror(ctypes.get_errno()))
found = libc.syscall(%(keyctl)d, 10, ctypes.c_long(-3), b"user", %(desc)r, 0)  # KEYCTL_SEARCH in @s
seen.append("search:" + (str(found) if found >= 0 else os.strerror(ctypes.get_errno())))
ring = libc.syscall(%(keyctl)d, 0, ctypes.c_long(-3), 0)  # KEYCTL_GET_KEYRING_ID of @s
seen.append("session:%%d" %% ring)
try:
    seen.append("proc-keys:" + str(%(desc)r.decode() in open("/proc/keys").read()))
except OSError as exc:
    seen.append("proc-keys:" + type(exc).__name__)
print("|".join(seen))
""" % {"keyctl": KEYCTL, "key": key, "desc": desc}
result = run_python(program, timeout_s=20, memory_mb=512)
result.cleanup()
print(json.dumps({"status": result.status, "stdout": result.stdout, "stderr": result.stderr[-2000:],
                  "session": session, "key": key}))
'''


@full_isolation
@needs(_KEYCTL is not None, "a known keyctl syscall number", "the test calls add_key/keyctl through ctypes")
def test_the_callers_session_keyring_is_out_of_reach() -> None:
    import json

    assert _KEYCTL is not None
    secret, desc = f"secret-{uuid.uuid4().hex}", f"harness-test-{uuid.uuid4().hex[:8]}"
    proc = subprocess.run([sys.executable, "-c", _CALLER, str(_KEYCTL[0]), str(_KEYCTL[1]), secret, desc],
                          capture_output=True, text=True, timeout=120, cwd=REPO)  # fmt: skip
    if proc.returncode != 0 and "Operation not permitted" in proc.stderr:
        pytest.skip("keyctl is not permitted here (seccomp): no keyring to reach")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["status"] == "ok", out["stderr"]
    assert secret not in out["stdout"]
    fields = dict(f.split(":", 1) for f in out["stdout"].strip().split("|"))
    assert fields["read"] in ("Permission denied", "Required key not available")
    assert fields["search"] in ("Required key not available", "Permission denied")
    assert fields["session"] not in (str(out["session"]), "-1")  # a session keyring of its own, not ours
    assert fields["proc-keys"] in ("False", "FileNotFoundError", "PermissionError")
