"""HumanEval scoring in the sandbox, with a verdict the program under test cannot forge by exiting.

A program's exit status is its own to choose: ``atexit.register(os._exit, 0)`` turns a failed
``check`` into exit 0. So the harness does not read the verdict from the program at all. Its own
wrapper forks inside the sandbox: the child runs the model's program and answers calls to the entry
point over a pipe (results come back as Python literals, parsed with ``ast.literal_eval``); the
parent, which the child cannot trace or read (non-dumpable, and the namespace's init, which ignores
its signals), runs the dataset's ``check()`` against a proxy of that function. A random per-sample
token reaches the parent through a pipe after the fork, and goes back to the harness through a
second pipe only when ``check()`` returned; the child closes both pipes before any model code runs.
The sample passes when the token came back and the run ended ``ok``. (Dataset helpers that
``check()`` uses, such as ``poly`` in HumanEval/32, come from the prompt, never from the reply.)

Without namespaces (no root, no ``unshare``) the scorer refuses, naming what is missing, unless the
task option ``allow_unsandboxed=true`` is given; every sample records the isolation it ran under.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
from typing import Any

from harness.sandbox import excerpt
from harness.types import Output, Sample, Score

_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)

# The harness's own wrapper (main.py). It forks: the child runs the model's program and answers
# calls to the entry point; the parent (the sandbox's init, made non-dumpable so the child can neither
# read its memory nor reach its descriptors) runs the dataset's check() against a proxy of that
# function and writes the token only when check() returned. The child never holds the token or the
# verdict pipe: it closes both before any model code runs.
WRAPPER = r'''
import ast, ctypes, os, pickle, sys

def _parent_setup():
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no ptrace, no /proc/<pid>/mem or fd access

def _serve(fd_in, fd_out, req_r, res_w):
    os.close(fd_in)
    os.close(fd_out)
    ns = {"__name__": "__main__"}
    try:
        with open("program.py", encoding="utf-8") as fh:
            exec(compile(fh.read(), "program.py", "exec"), ns)
        fn = ns[sys.argv[3]]
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
        args = pickle.loads(rfile.read(int(size)))
        try:
            out = ("ok", repr(fn(*args)))
        except BaseException as exc:
            out = ("raise", "%s: %s" % (type(exc).__name__, exc))
        wfile.write(repr(out) + "\n")
        wfile.flush()
    os._exit(0)

class CandidateError(Exception):
    pass

def _main():
    fd_in, fd_out, entry = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    with open("prompt.py", encoding="utf-8") as fh:
        prompt = fh.read()
    with open("test.py", encoding="utf-8") as fh:
        test = fh.read()
    _parent_setup()
    req_r, req_w = os.pipe()
    res_r, res_w = os.pipe()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        os.close(req_w)
        os.close(res_r)
        _serve(fd_in, fd_out, req_r, res_w)
    os.close(req_r)
    os.close(res_w)
    token = os.read(fd_in, 256)
    os.close(fd_in)
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
        exec(compile(prompt + "\n    pass\n", "prompt.py", "exec"), ns)  # the dataset's helpers (no body)
    except SyntaxError:
        exec(compile(prompt, "prompt.py", "exec"), ns)
    ns[entry] = candidate
    exec(compile(test, "test.py", "exec"), ns)
    ns["check"](candidate)
    os.write(fd_out, token)
    os.close(fd_out)
    try:
        os.kill(pid, 9)
    except OSError:
        pass

_main()
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

    token = secrets.token_hex(16).encode()
    tok_r, tok_w = os.pipe()
    out_r, out_w = os.pipe()
    try:
        os.write(tok_w, token)
        os.close(tok_w)
        tok_w = -1
        files: dict[str, bytes | str] = {"main.py": WRAPPER, "program.py": program, "prompt.py": prompt,
                                         "test.py": test}
        result = run_sandboxed([_python(), "-I", "main.py", str(tok_r), str(out_w), entry], timeout_s=timeout_s,
                               memory_mb=memory_mb, cwd_files=files, pass_fds=(tok_r, out_w))  # fmt: skip
        os.close(out_w)
        out_w = -1
        os.set_blocking(out_r, False)
        try:
            returned = os.read(out_r, 256)
        except BlockingIOError:
            returned = b""
    finally:
        for fd in (tok_r, tok_w, out_r, out_w):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
    passed = secrets.compare_digest(returned, token) and result.status == "ok"
    return passed, result


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
