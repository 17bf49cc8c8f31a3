"""What a sandboxed program writes: its output streams kept to a capped head and tail, read through
pipes by one thread (``pump``), and the short single-line excerpt scorers may show on public pages.

A program that floods its output must fill neither the host's memory nor its disk, and a scorer's
explanation must not be a channel that carries a file's contents out of the sandbox."""

from __future__ import annotations

import os
import re
import selectors
import subprocess
import time

# stdout/stderr are each kept to their first OUTPUT_LIMIT_BYTES and last OUTPUT_TAIL_BYTES (read through
# pipes, the rest dropped): a print loop must fill neither our RAM nor our disk
OUTPUT_LIMIT_BYTES = 1_000_000
OUTPUT_TAIL_BYTES = 64_000
EXCERPT_CHARS = 160  # enough to see why a run failed, too short to carry a file's contents out
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """A short, single-line excerpt of what a sandboxed program wrote (its last non-empty line,
    control characters removed), for scorer explanations that public pages show."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    last = _CONTROL.sub("", lines[-1]) if lines else ""
    return last if len(last) <= limit else last[: limit - 1] + "…"


class CappedOutput:
    """One output stream of a sandboxed program, kept to its first ``head`` and last ``tail`` bytes:
    the beginning usually says what the program did, the end why it stopped (a traceback, a final
    JSON line). Memory stays under ``head + 2 * tail`` however much the program writes."""

    def __init__(self, head: int = OUTPUT_LIMIT_BYTES, tail: int = OUTPUT_TAIL_BYTES) -> None:
        self.head_limit, self.tail_limit = head, tail
        self.head, self.tail = bytearray(), bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > 2 * self.tail_limit:  # trim now and then, not on every chunk
                del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def truncated(self) -> bool:
        return self.total > self.head_limit + self.tail_limit

    def text(self) -> str:
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace")
        dropped = self.total - self.head_limit - self.tail_limit
        tail = bytes(self.tail[-self.tail_limit :])
        return (self.head.decode("utf-8", "replace") + f"\n[output truncated: {dropped} bytes not kept]\n"
                + tail.decode("utf-8", "replace"))


_DRAIN_S = 2.0
_CHUNK = 1 << 16


def _pump(popen: subprocess.Popen[bytes], stdin: bytes | None, out: CappedOutput, err: CappedOutput, *,
          deadline: float) -> bool:
    """Feed ``stdin`` and read both output pipes into their caps until the process ended and its pipes
    closed, or ``_DRAIN_S`` after it ended (True), or until ``deadline`` while it still runs (False).
    One thread, no temporary files."""
    sel = selectors.DefaultSelector()
    try:
        for pipe, sink in ((popen.stdout, out), (popen.stderr, err)):
            if pipe is not None and not pipe.closed:
                os.set_blocking(pipe.fileno(), False)
                sel.register(pipe.fileno(), selectors.EVENT_READ, sink)
        pending = memoryview(stdin or b"")
        if popen.stdin is not None and not popen.stdin.closed:
            if stdin is None:
                popen.stdin.close()
            else:
                os.set_blocking(popen.stdin.fileno(), False)
                sel.register(popen.stdin.fileno(), selectors.EVENT_WRITE, None)
        ended_at: float | None = None
        while True:
            now = time.monotonic()
            if ended_at is None and popen.poll() is not None:
                ended_at = now
            readers = [k for k in sel.get_map().values() if k.data is not None]
            # done when the pipes closed after the process ended, or a moment after it ended (in
            # best-effort mode a process that left its session may hold them open)
            if ended_at is not None and (not readers or now - ended_at >= _DRAIN_S):
                return True
            left = deadline - now
            if left <= 0:
                return False
            if ended_at is not None:
                left = min(left, ended_at + _DRAIN_S - now)
            if not sel.get_map():  # nothing left to read or write: only the process to wait for
                try:
                    popen.wait(timeout=left)
                    return True
                except subprocess.TimeoutExpired:
                    return False
            for key, _ in sel.select(timeout=min(left, 0.1)):
                if key.data is None:  # stdin
                    try:
                        sent = os.write(key.fd, pending[:_CHUNK])
                    except BlockingIOError:
                        continue
                    except OSError:  # the program closed its stdin (EPIPE): the rest is not wanted
                        sent = len(pending)
                    pending = pending[sent:]
                    if not pending:
                        sel.unregister(key.fd)
                        assert popen.stdin is not None
                        popen.stdin.close()
                    continue
                try:
                    chunk = os.read(key.fd, _CHUNK)
                except BlockingIOError:
                    continue
                if chunk:
                    key.data.add(chunk)
                else:
                    sel.unregister(key.fd)
    finally:
        sel.close()
