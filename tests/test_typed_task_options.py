"""A `-T` value that its annotation says is an integer, a number or a boolean, and is none, is one line
before the factory runs: on every registered task (``-T n=abc`` on ``methods_cluster_blobs`` used to end
in scikit-learn's traceback)."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from harness.option_types import _scalar_hint
from harness.registry import entries
from harness.run_config import RunConfigError, check_option_types


def _scalar_options() -> list[tuple[str, str, type]]:
    out = []
    for e in entries("task"):
        hints = typing.get_type_hints(inspect.unwrap(e.factory))
        for key in inspect.signature(inspect.unwrap(e.factory)).parameters:
            scalar = _scalar_hint(hints.get(key))
            if scalar is not None:
                out.append((e.name, key, scalar))
    return out


def test_every_scalar_option_of_every_task_refuses_a_word_and_takes_its_default() -> None:
    options = _scalar_options()
    assert len(options) > 50 and sum(t is int for _, _, t in options) > 40  # the check is not vacuous
    factories = {e.name: e.factory for e in entries("task")}
    for task, key, _ in options:
        with pytest.raises(RunConfigError) as info:
            check_option_types(task, factories[task], {key: "abc"})
        assert "\n" not in str(info.value) and f"-T {key} must be " in str(info.value)
        assert str(info.value).endswith("got 'abc'")
        default = inspect.signature(inspect.unwrap(factories[task])).parameters[key].default
        if default is not inspect.Parameter.empty:
            check_option_types(task, factories[task], {key: default})


@pytest.mark.parametrize("value,ok", [(2, True), ("2", True), (2.0, True), (2.5, False), ("nan", False),
                                      (float("inf"), False)])
def test_values_are_checked(value, ok) -> None:
    factory = dict((e.name, e.factory) for e in entries("task"))["methods_cluster_blobs"]
    if ok:
        check_option_types("methods_cluster_blobs", factory, {"n": value, "std": 1.5})
    else:
        with pytest.raises(RunConfigError):
            check_option_types("methods_cluster_blobs", factory, {"n": value})


def test_eval_with_a_word_for_an_int_option_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = subprocess.run([str(Path(sys.executable).parent / "harness"), "eval", "-t", "methods_cluster_blobs",
                           "-T", "n=abc", "-m", "kmeans:lloyd", "--db", f"sqlite:///{tmp_path / 'h.db'}"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=dict(os.environ))
    assert done.returncode == 2
    lines = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
    assert lines == ["error: task 'methods_cluster_blobs': -T n must be an integer, got 'abc'"]


def test_a_registered_factory_gets_its_annotated_types_whoever_calls_it() -> None:
    """The conversion is the registry's: a factory called from Python with text gets an int, and a
    word for an int option is the same one-line refusal as on the command line."""
    from harness.registry import lookup
    from harness.types import Sample

    factory = lookup("task", "reliability_gsm8k").factory
    task = factory(max_tokens="64")
    (sample,) = [s for s in task.load()][:1]
    request = task.prompt(sample) if task.prompt else None
    assert isinstance(sample, Sample) and request is not None
    assert request.config.max_tokens == 64 and isinstance(request.config.max_tokens, int)
    with pytest.raises(RunConfigError, match=r"-T max_tokens must be an integer >= 1, got 'abc'"):
        factory(max_tokens="abc")
    with pytest.raises(ValueError, match=r"split must be 'hard' or 'all', got '7'"):
        factory(split=7)  # a number given to a text option is its text


def test_a_text_option_keeps_its_text_as_written_on_the_command_line(tmp_path: Path) -> None:
    """The typed parser reads ``007`` as the number 7; a ``str`` option gets the text back."""
    done = subprocess.run([str(Path(sys.executable).parent / "harness"), "eval", "-t", "reliability_gsm8k",
                           "-T", "split=007", "-m", "builtin:number", "--db", f"sqlite:///{tmp_path / 'h.db'}"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=dict(os.environ))
    assert done.returncode == 2
    assert "split must be 'hard' or 'all', got '007'" in done.stderr, done.stderr
