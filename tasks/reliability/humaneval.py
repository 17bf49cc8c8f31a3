"""HumanEval scoring in the sandbox: the program under test never sees the tests it is judged by,
and cannot forge the verdict by exiting.

Two rules, each closing a way to pass without implementing anything:

* **The tests stay out of the program's view.** A program that can read ``check()`` can run it
  against a recording stand-in (``==`` records the expected value) and answer every call from that
  table. So nothing of the tests is ever written where the program runs: the harness hands them
  (with the prompt and the token) to its checking wrapper through a pipe; the wrapper (the sandbox's
  init) makes itself non-dumpable *before* reading it, reads it to the end and closes it, and only then
  forks the program's process, which immediately closes every other descriptor and *execs* a fresh
  interpreter (``serve.py``), so not one byte of the wrapper's memory survives into it. The program's
  work dir holds only the harness's own wrapper code and ``program.py``; its argv and environment
  carry descriptor numbers and the entry point's name; the checking process's ``/proc`` entries
  (``mem``, ``maps``, ``fd``, ``environ``) are closed to it (non-dumpable), and it cannot ptrace it.
* **The verdict is not the program's to give.** A program's exit status is its own to choose
  (``atexit.register(os._exit, 0)``), so the verdict is never read from it. The program only answers
  calls to the entry point over a pipe (results come back as Python literals, parsed with
  ``ast.literal_eval``: no object equal to everything); the wrapper runs the dataset's ``check()``
  against a proxy of that function and writes the random per-sample token to a second descriptor
  only when ``check()`` returned. The sample passes when the token came back and the run ended
  ``ok``. (Dataset helpers that ``check()`` uses, such as ``poly`` in HumanEval/32, come from the
  prompt, never from the reply.)

These hold under full isolation (a throwaway uid, own PID namespace). Without namespaces (no root, no
``unshare``) the scorer refuses, naming what is missing, unless the task option
``allow_unsandboxed=true`` is given; then the tests are still never put in the program's folder, but
a program running as your user can read your processes' memory. Every sample records the isolation
it ran under.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import threading
from typing import Any

from harness.sandbox import excerpt
from harness.types import Output, Sample, Score

_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)

# The harness's own checking wrapper (main.py), the sandbox's init. It becomes non-dumpable first,
# then reads the whole spec (prompt, test, entry point, token) from the pipe the harness passed and
# closes it, forks the program's process (which execs serve.py at once, keeping only its two pipe
# ends), runs the dataset's check() against a proxy of the entry point and writes the token only when
# check() returned.
WRAPPER = r'''
import ast, ctypes, json, os, pickle, sys

class CandidateError(Exception):
    pass

def _exec_server(req_r, res_w, entry):
    # the program's process: nothing of this (forked) interpreter may reach model code, so close every
    # descriptor but stdio and the two pipe ends, then replace the whole address space with a new one
    try:
        lo, hi = sorted((req_r, res_w))
        top = os.sysconf("SC_OPEN_MAX")
        os.closerange(3, lo)
        os.closerange(lo + 1, hi)
        os.closerange(hi + 1, max(top, hi + 1))
        os.set_inheritable(req_r, True)
        os.set_inheritable(res_w, True)
        os.execv(sys.executable, [sys.executable, "-I", "serve.py", str(req_r), str(res_w), entry])
    finally:
        os._exit(127)

def _main():
    # PR_SET_DUMPABLE 0 before any secret is in memory: the program (same uid) can neither ptrace this
    # process nor open its /proc/<pid>/mem, maps, fd or environ
    if ctypes.CDLL(None).prctl(4, 0, 0, 0, 0) != 0:
        sys.exit("checker: cannot make itself non-dumpable")
    spec_fd, out_fd = int(sys.argv[1]), int(sys.argv[2])
    with os.fdopen(spec_fd, "rb") as fh:  # a length line, then exactly that many bytes: all that was sent
        size = int(fh.readline())
        data = fh.read(size)
    if len(data) != size:
        sys.exit("checker: the spec ended early")
    spec = json.loads(data.decode("utf-8"))
    os.set_inheritable(out_fd, False)
    entry, token = spec["entry"], spec["token"].encode()
    req_r, req_w = os.pipe()
    res_r, res_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _exec_server(req_r, res_w, entry)
    os.close(req_r)
    os.close(res_w)
    req, res = os.fdopen(req_w, "wb"), os.fdopen(res_r, "r", encoding="utf-8")

    def reply():
        line = res.readline()
        if not line:
            raise CandidateError("the program ended before answering")
        kind, value = ast.literal_eval(line)
        if kind != "ok":
            raise CandidateError(value)
        return value

    def candidate(*args):
        data = pickle.dumps(args)
        req.write(b"%d\n" % len(data) + data)
        req.flush()
        return ast.literal_eval(reply())  # only literals come back from the untrusted side

    reply()  # the program loaded and defines the entry point
    ns = {"__name__": "__check__"}
    try:
        exec(compile(spec["prompt"] + "\n    pass\n", "prompt.py", "exec"), ns)  # the dataset's helpers
    except SyntaxError:
        exec(compile(spec["prompt"], "prompt.py", "exec"), ns)
    ns[entry] = candidate
    exec(compile(spec["test"], "test.py", "exec"), ns)
    ns["check"](candidate)
    os.write(out_fd, token)
    os.close(out_fd)
    try:
        os.kill(pid, 9)
    except OSError:
        pass

_main()
'''

# The program's side (serve.py), run in a fresh interpreter: load program.py, then answer each call
# to the entry point with ("ok", repr(result)) or ("raise", message). It holds nothing to protect.
SERVER = r'''
import builtins, io, os, pickle, sys


class _Args(pickle.Unpickler):
    # the test's arguments are builtin values: no class outside these is ever built here
    ALLOWED = {"set", "frozenset", "complex", "range", "slice", "bytearray"}

    def find_class(self, module, name):
        if module == "builtins" and name in self.ALLOWED:
            return getattr(builtins, name)
        raise pickle.UnpicklingError("argument type %s.%s refused" % (module, name))


def _serve(req_r, res_w, entry):
    ns = {"__name__": "__main__"}
    try:
        with open("program.py", encoding="utf-8") as fh:
            code = compile(fh.read(), "program.py", "exec")
        exec(code, ns)
        fn = ns[entry]
        ready = ("ok", None)
    except BaseException as exc:
        fn, ready = None, ("raise", "%s: %s" % (type(exc).__name__, exc))
    rfile, wfile = os.fdopen(req_r, "rb"), os.fdopen(res_w, "w", encoding="utf-8")
    wfile.write(repr(ready) + "\n")
    wfile.flush()
    while fn is not None:
        size = rfile.readline()
        if not size:
            break
        # the arguments come from the checking process (the test's own calls); a restricted
        # unpickler builds builtin values only, so no stream can make this process run code
        data = rfile.read(int(size))
        try:
            out = ("ok", repr(fn(*_Args(io.BytesIO(data)).load())))
        except BaseException as exc:
            out = ("raise", "%s: %s" % (type(exc).__name__, exc))
        wfile.write(repr(out) + "\n")
        wfile.flush()
    os._exit(0)

_serve(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
'''


class SandboxUnavailable(RuntimeError):
    """No namespaces here and ``allow_unsandboxed`` was not given (the message says what is missing)."""


def refusal(allow_unsandboxed: bool) -> str | None:
    """The one-line reason to refuse running HumanEval here, or None."""
    from harness.sandbox import missing_isolation

    missing = missing_isolation()
    if missing is None or allow_unsandboxed:
        return None
    return (f"HumanEval runs model-written code and {missing}; rerun as root with util-linux unshare, "
            "or pass -T allow_unsandboxed=true to run it without containment")


def humaneval_program(reply: str, prompt: str, entry_point: str) -> str:
    """The program to test: the reply's last code block (or the whole reply); if it does not define
    the entry point itself it is taken as a completion of the prompt (HumanEval's native format)."""
    blocks = _FENCE.findall(reply)
    code = blocks[-1] if blocks else reply
    if re.search(rf"^\s*def\s+{re.escape(entry_point)}\s*\(", code, re.MULTILINE):
        header = "\n".join(ln for ln in prompt.splitlines() if ln.startswith(("import ", "from ")))
        return f"{header}\n{code}" if header else code
    return prompt + code


def run_checked(program: str, prompt: str, test: str, entry: str, timeout_s: float,
                memory_mb: int) -> tuple[bool, Any]:
    """(passed, sandbox result): passed only when the wrapper handed the token back."""
    from harness.sandbox import run_sandboxed

    token = secrets.token_hex(16)
    spec = json.dumps({"prompt": prompt, "test": test, "entry": entry, "token": token}).encode("utf-8")
    spec = b"%d\n" % len(spec) + spec
    spec_r, spec_w = os.pipe()
    out_r, out_w = os.pipe()
    writer = threading.Thread(target=_feed, args=(spec_w, spec), daemon=True)
    try:
        writer.start()
        # the program's folder holds only the harness's wrapper and the program: never the tests
        files: dict[str, bytes | str] = {"main.py": WRAPPER, "serve.py": SERVER, "program.py": program}
        result = run_sandboxed([_python(), "-I", "main.py", str(spec_r), str(out_w)], timeout_s=timeout_s,
                               memory_mb=memory_mb, cwd_files=files, pass_fds=(spec_r, out_w))  # fmt: skip
        os.close(out_w)
        out_w = -1
        os.set_blocking(out_r, False)
        try:
            returned = os.read(out_r, 256)
        except BlockingIOError:
            returned = b""
    finally:
        for fd in (spec_r, out_r, out_w):  # closing spec_r ends a writer still blocked (EPIPE)
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        writer.join(timeout=10)
    passed = secrets.compare_digest(returned, token.encode()) and result.status == "ok"
    return passed, result


def _feed(fd: int, data: bytes) -> None:
    """Write the spec into the pipe and close it. A pipe, not a file: the wrapper reads every byte of it
    before the program's process exists, so by then nothing of it is left in the pipe for anyone to
    read, wherever a descriptor to it may still be open (a file would keep it)."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError:  # the sandbox ended before reading it all (EPIPE): nothing to deliver any more
        pass
    finally:
        os.close(fd)


def _python() -> str:
    import sys

    return sys.executable


async def score_humaneval(sample: Sample, output: Output, timeout_s: float, memory_mb: int, *,
                          allow_unsandboxed: bool = False) -> Score:
    reason = refusal(allow_unsandboxed)
    if reason is not None:
        raise SandboxUnavailable(reason)
    entry = str(sample.target)
    program = humaneval_program(output.text, sample.metadata["prompt"], entry)
    passed, result = await asyncio.to_thread(run_checked, program, sample.metadata["prompt"], sample.metadata["test"],
                                             entry, timeout_s, memory_mb)
    try:
        ok = float(passed)
        verdict = "passed" if passed else ("failed" if result.status == "ok" else result.status)
        why = "" if passed else excerpt(result.stderr) or ("exit 0 without completing check()"
                                                            if result.status == "ok" else "")
        sandbox = {"status": result.status, "returncode": result.returncode, "seconds": round(result.seconds, 3),
                   "isolation": result.isolation, "memory_limit": result.details.get("memory_limit"),
                   "verdict": verdict}
        return Score({"correct": ok, "pass@1": ok}, answer=verdict,
                     explanation=f"sandbox {verdict} ({result.isolation}) {why}".strip(),
                     details={"sandbox": sandbox})
    finally:
        result.cleanup()
