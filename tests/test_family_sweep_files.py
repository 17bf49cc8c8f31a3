"""Every task family ships its paper-scale experiment as sweep files (``tasks/<family>/sweep*.yaml``),
and each one is a matrix ``harness sweep run`` accepts unchanged (the files as they are; running them
cut down is ``test_family_sweep_runs.py``).

1. **The files as they are.** Every family folder has a ``sweep.yaml``. Every sweep file passes the
   sweep schema; its task names exist, its option keys are the factories' and their values
   type-check; its models (and judge) are registered backends whose settings are accepted, and the
   method and agent backends are built (no weights: an unknown variant fails); every absolute path
   in an option, a setting or a model spec is a placeholder under ``/data/`` that the file's
   comments name. A file whose data is all here (no placeholder) has its tasks built, and unless its
   tasks are costly to load (noted at :data:`NOT_EXPANDED`) it is expanded as the command expands it
   before anything is submitted: every task built, every sample id listed, the run and sample
   bounds checked.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from family_sweeps import (  # noqa: F401 (a fixture)
    PLACEHOLDER_ROOT,
    TASKS,
    _families,
    _family_of,
    _files,
    _has_placeholder,
    _require_blender,
    _strings,
    family_fixtures,
)
from requirements import require

from harness.sweep.schema import MAX_SAMPLES

# ---------------------------------------------------------------------------------------------
# 1. the files as they are


# Files whose data is here but whose tasks cost too much to load for a unit test; their tasks are
# still built (option values checked) and their names, options and models checked like every file's.
NOT_EXPANDED = {
    # the synthetic set is rendered by Blender on first load (about a minute of CPU per seed)
    "reid": "renders its data set with Blender when loaded",
    # lm-eval reads the standard tasks' data from the hub (or the datasets cache), which is offline here
    "lmeval": "its tasks' data come from the Hugging Face hub",
    # loading solves every problem's sharp LP bounds and PAG class: tens of seconds on two cores
    "causal": "loading computes each problem's PAG and sharp bounds",
}
# make_blobs' 200,000 points are 200,000 samples per run: listing them takes tens of seconds per
# file, so for these files the sample bound is checked from the task option (one sample per point)
POINT_SAMPLES = {"methods_cluster_blobs": "n"}


def test_every_family_has_a_sweep_file():
    missing = [f for f in _families() if not (TASKS / f / "sweep.yaml").is_file()]
    assert not missing, f"families without tasks/<family>/sweep.yaml: {missing}"
    # and nothing else of the families is a sweep file by accident
    assert {_family_of(p) for p in _files()} == set(_families())


def _check_task_entry(family: str, name: str, options: dict[str, Any], lmeval_names: Callable[[], set[str]]) -> None:
    from harness.option_types import typed_options
    from harness.options_task import check_task_options, task_options
    from harness.registry import lookup
    from harness.run_config import build_task

    entry = lookup("task", name)  # an unknown name: UnknownNameError naming the closest ones
    if entry.family:
        assert entry.family == family, f"task {name!r} belongs to family {entry.family!r}, not {family!r}"
    check_task_options(name, options)  # unknown keys of a closed factory, missing required ones
    typed_options(name, entry.factory, options)  # int/float/bool options of the wrong type or range
    if ":" in name:  # a parametric task: the value after ':' must be one its library knows
        base, _, value = name.partition(":")
        assert base == "lmeval", f"{name}: only lmeval's parametric names are checked here"
        assert value in lmeval_names(), f"lm-eval 0.4.13 has no task {value!r}"
        return
    _, open_ended = task_options(entry.factory)
    if _has_placeholder(options):
        # a placeholder names data that is not here: the factory would refuse the missing path, so
        # only an open-ended factory (which checks its own keys) is built, without those paths
        if open_ended:
            if family == "code3d":
                _require_blender()
            build_task(name, {k: v for k, v in options.items() if not _has_placeholder(v)})
        return
    if family == "code3d":
        _require_blender()
    build_task(name, options)  # the factory's own checks of the values (choices, ranges, files)


def _check_model(spec: str, settings: dict[str, Any]) -> None:
    from harness.modelspec import build_model, spec_kind
    from harness.sweep.matrix import check_model

    check_model(spec, settings)  # the name and every setting, as `harness sweep run` checks them
    if spec_kind(spec) in ("method", "agent"):
        # a method's variant is read by its factory: building one loads no weights and starts no fit
        build_model(spec, settings)



@pytest.fixture(scope="module")
def lmeval_names(fixtures: Callable[[str], Path]) -> Callable[[], set[str]]:
    """lm-eval's task names, read once, through the index the smoke's lmeval task uses too (it
    takes seconds to build; lm-eval's own tasks are in it beside the fixture's)."""
    box: dict[str, set[str]] = {}

    def names() -> set[str]:
        if "names" not in box:
            require("lm_eval", "the lmeval extra (tests/setup.d/00-python.sh installs it through the lock)")
            from harness.tasks.lmeval.library import available

            box["names"] = set(available(str(fixtures("lmeval"))))
        return box["names"]

    return names


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(TASKS)))
def test_sweep_file_is_a_valid_matrix_of_real_tasks_and_models(path: Path, lmeval_names: Callable[[], set[str]]):
    from harness.sweep.matrix import expand, matrix_from_yaml

    family = _family_of(path)
    matrix = matrix_from_yaml(path)  # the schema: unknown keys, types, ranges, sizes
    assert matrix.name, f"{path}: give the sweep a name (rerunning it then resumes it by name)"
    for name, options in matrix.tasks:
        _check_task_entry(family, name, options, lmeval_names)
    for spec, settings, _ in matrix.models:
        _check_model(spec, settings)
    if matrix.judge is not None:
        _check_model(matrix.judge, matrix.judge_settings)
    # the paths a file names (option and setting values, model specs): absolute placeholders under
    # /data/, each explained in a comment of the file
    comments = "\n".join(line for line in path.read_text().splitlines() if line.lstrip().startswith("#"))
    values = [*(o for _, o in matrix.tasks), *(s for _, s, _ in matrix.models), matrix.judge_settings]
    specs = [s for s, _, _ in matrix.models] + [matrix.judge or ""]
    named = [s for v in values for s in _strings(v) if s.startswith("/")]
    named += [m.group(0) for spec in specs for m in re.finditer(r"(?<=:)/[^,)\s]+", spec)]
    for text in named:
        assert text.startswith(PLACEHOLDER_ROOT), f"{path}: {text!r} is not a placeholder under {PLACEHOLDER_ROOT}"
        assert text in comments, f"{path}: the placeholder {text} is not explained in a comment"
    placeholders = any(_has_placeholder(v) for v in values)
    if not placeholders and family not in NOT_EXPANDED:
        if any(t in POINT_SAMPLES for t, _ in matrix.tasks):
            total = sum(int(o[POINT_SAMPLES[t]]) for t, o in matrix.tasks if t in POINT_SAMPLES) * len(matrix.models)
            assert total <= MAX_SAMPLES, f"{path}: {total:,} sample ids over its runs (at most {MAX_SAMPLES:,})"
            return
        runs = expand(matrix)  # what `harness sweep run` does before it opens the database
        assert len(runs) == len(matrix.tasks) * len(matrix.models) * len(matrix.seeds)
        assert all(r.sample_ids for r in runs)
