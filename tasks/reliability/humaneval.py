"""HumanEval scoring in the sandbox, with a verdict the program under test cannot forge by exiting.

A program's exit status is its own to choose: ``atexit.register(os._exit, 0)`` turns a failed
``check`` into exit 0. So the harness does not read the verdict from the exit status. It draws a
random token per sample, hands it to its own check wrapper through a pipe (read and closed before
any model code runs) and gets it back through a second pipe only after ``check(entry_point)``
returned; the sample passes when the token came back *and* the run ended ``ok``. Stdout, stderr and
the exit code cannot produce the token. (Code written to hunt the token in the interpreter's memory
could still find it: the sandbox contains what such code can do, not whether it passes; see
SECURITY.md.)

Without namespaces (no root, no ``unshare``) the scorer refuses, naming what is missing, unless the
task option ``allow_unsandboxed=true`` is given; every sample records the isolation it ran under.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
from typing import Any

from harness.types import Output, Sample, Score

_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)
EXPLANATION_CHARS = 160  # a short excerpt of sandboxed stderr: enough to see why, too short to carry a file
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

# The harness's own wrapper (main.py): token in from fd IN, program + tests exec'd in a fresh
# namespace, token out on fd OUT only once check() has returned.
WRAPPER = r'''
import os, sys
_in, _out = int(sys.argv[1]), int(sys.argv[2])
_tok = os.read(_in, 256)
os.close(_in)
def _run(tok, out):
    with open("program.py", encoding="utf-8") as fh:
        source = fh.read()
    ns = {"__name__": "__main__", "__builtins__": __builtins__}
    exec(compile(source, "program.py", "exec"), ns)
    ns["check"](ns[sys.argv[3]])
    os.write(out, tok)
    os.close(out)
_run(_tok, _out)
del _tok
sys.stdout.flush()
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


def excerpt(stderr: str, limit: int = EXPLANATION_CHARS) -> str:
    """The last non-empty stderr line, control characters removed, cut to ``limit`` characters."""
    lines = [ln.strip() for ln in (stderr or "").splitlines() if ln.strip()]
    last = _CONTROL.sub("", lines[-1]) if lines else ""
    return last if len(last) <= limit else last[: limit - 1] + "…"


def run_checked(program: str, test: str, entry: str, timeout_s: float, memory_mb: int) -> tuple[bool, Any]:
    """(passed, sandbox result): passed only when the wrapper handed the token back."""
    from harness.sandbox import run_sandboxed

    token = secrets.token_hex(16).encode()
    tok_r, tok_w = os.pipe()
    out_r, out_w = os.pipe()
    try:
        os.write(tok_w, token)
        os.close(tok_w)
        tok_w = -1
        files = {"main.py": WRAPPER, "program.py": f"{program}\n\n{test}\n"}
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
    passed, result = await asyncio.to_thread(run_checked, program, sample.metadata["test"], entry, timeout_s,
                                             memory_mb)
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
