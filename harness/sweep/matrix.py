"""A sweep's matrix: tasks (with options) × models (with settings) × seeds, expanded into runs.

From the command line (``-t``/``-m``/``-T``/``-M``/``--seeds``) or a small YAML file::

    name: nightly              # optional; default: a hash of the matrix
    tasks:
      - mytask
      - {name: othertask, options: {subset: algebra}}
    models:
      - builtin:number
      - {spec: "openai:gpt-4o-mini", settings: {temperature: 0}, resources: {gpus: 0, memory_gb: 2}}
    seeds: [0, 1]
    epochs: 1
    limit: 200
    judge: {spec: "openai:gpt-4o", settings: {}}

Everything is validated before anything is submitted. The file, the flags and a :class:`Matrix`
built in Python all go through one schema (:mod:`harness.sweep.schema`: sizes bounded before
anything is expanded, strict types, unknown keys refused); then unknown tasks, models or settings,
bad task options and an empty sample list are one-line :class:`SweepError` s naming the entry.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.sweep.schema import MAX_SAMPLES, SweepFile, read_sweep_file, validate_sweep
from harness.sweep.schema import SweepError as SweepError  # re-exported: its home for callers
from harness.types import stable_hash


@dataclass(frozen=True)
class Resources:
    """What one worker for this model needs; mapped onto Ray actor options."""

    gpus: float = 0.0
    cpus: float = 1.0
    memory_gb: float = 0.0

    def ray_options(self) -> dict[str, Any]:
        opts: dict[str, Any] = {"num_cpus": self.cpus, "num_gpus": self.gpus}
        if self.memory_gb:
            opts["memory"] = int(self.memory_gb * 2**30)
        return opts


@dataclass
class RunEntry:
    """One run of the sweep: exactly the fields of an :class:`~harness.runner.EvalConfig` that make
    it this run, plus the sample ids it covers and the resources its model asks for."""

    task: str
    model: str
    task_options: dict[str, Any] = field(default_factory=dict)
    model_settings: dict[str, Any] = field(default_factory=dict)
    judge: str | None = None
    judge_settings: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    epochs: int = 1
    limit: int | None = None
    run_name: str = ""
    sample_ids: list[str] = field(default_factory=list)
    resources: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunEntry:
        return cls(**data)


@dataclass
class Matrix:
    tasks: list[tuple[str, dict[str, Any]]]
    models: list[tuple[str, dict[str, Any], Resources]]
    seeds: list[int] = field(default_factory=lambda: [0])
    epochs: int = 1
    limit: int | None = None
    judge: str | None = None
    judge_settings: dict[str, Any] = field(default_factory=dict)
    name: str | None = None

    def default_name(self) -> str:
        return "sweep-" + stable_hash([self.tasks, [(m, s) for m, s, _ in self.models], self.seeds, self.epochs,
                                       self.limit, self.judge, self.judge_settings])[:10]

    def to_data(self) -> dict[str, Any]:
        """The matrix in the sweep file's shape, for :func:`harness.sweep.schema.validate_sweep`."""
        data: dict[str, Any] = {
            "tasks": [{"name": t, "options": o} for t, o in self.tasks],
            "models": [{"spec": m, "settings": s, "resources": asdict(r) if isinstance(r, Resources) else r}
                       for m, s, r in self.models],
            "seeds": self.seeds, "epochs": self.epochs, "limit": self.limit, "name": self.name,
        }
        if self.judge is not None or self.judge_settings:  # -J without --judge is refused, not dropped
            data["judge"] = {"settings": self.judge_settings}
            if self.judge is not None:
                data["judge"]["spec"] = self.judge
        return data


def _from_schema(sweep: SweepFile) -> Matrix:
    judge = sweep.judge
    return Matrix([(t.name, dict(t.options)) for t in sweep.tasks],
                  [(m.spec, dict(m.settings), Resources(**m.resources.model_dump())) for m in sweep.models],
                  list(sweep.seeds), sweep.epochs, sweep.limit, judge.spec if judge else None,
                  dict(judge.settings) if judge else {}, sweep.name)


def matrix_from_yaml(path: Path) -> Matrix:
    """A sweep file as a :class:`Matrix`: bounded, parsed and validated (see :mod:`harness.sweep.schema`)."""
    return _from_schema(validate_sweep(read_sweep_file(path), str(path)))


def check_matrix(matrix: Matrix) -> None:
    """The schema's checks on a matrix from flags or Python: sizes first, then types and ranges."""
    validate_sweep(matrix.to_data(), flags=True)


def expand(matrix: Matrix) -> list[RunEntry]:
    """Validate every entry and expand the matrix into runs, with their sample ids. Builds the tasks
    (which checks their options and loads their samples) but no model: a model's factory is only
    checked for its name and settings, so the driver never loads weights."""
    from harness.modelspec import ModelSpecError
    from harness.runner import EvalConfig, build_task, default_run_name, select_samples

    check_matrix(matrix)  # sizes and types before any task is built
    for spec, settings, _ in matrix.models:
        try:
            check_model(spec, settings)
        except (ModelSpecError, UserError) as exc:
            raise SweepError(f"model {spec!r}: {exc}") from None
    if matrix.judge is not None:  # an unknown judge would otherwise fail every sample, on the workers
        try:
            check_model(matrix.judge, matrix.judge_settings)
        except (ModelSpecError, UserError) as exc:
            raise SweepError(f"judge {matrix.judge!r}: {exc}") from None
    entries = []
    n_samples = 0
    for task_name, options in matrix.tasks:
        try:
            task = build_task(task_name, options)
        except UserError as exc:
            raise SweepError(f"task {task_name!r}: {exc}") from None
        for seed in matrix.seeds:
            probe = EvalConfig(task=task_name, model="", task_options=options, limit=matrix.limit, seed=seed)
            try:
                ids = [s.id for s in select_samples(task, probe)]
            except UserError as exc:
                raise SweepError(f"task {task_name!r}: {exc}") from None
            # every run stores its sample ids in the sweep row: bounded before the runs are made
            n_samples += len(ids) * len(matrix.models)
            if n_samples > MAX_SAMPLES:
                raise SweepError(f"the sweep covers more than {MAX_SAMPLES:,} samples over its runs (at task "
                                 f"{task_name!r}, seed {seed}); use --limit / `limit:` or split it")
            for spec, settings, resources in matrix.models:
                cfg = EvalConfig(task=task_name, model=spec, task_options=options, model_settings=settings,
                                 judge=matrix.judge, judge_settings=matrix.judge_settings, seed=seed,
                                 epochs=matrix.epochs, limit=matrix.limit)
                entries.append(RunEntry(task_name, spec, options, settings, matrix.judge, matrix.judge_settings,
                                        seed, matrix.epochs, matrix.limit, default_run_name(task, cfg), ids,
                                        asdict(resources)))
    names = [e.run_name for e in entries]
    if len(set(names)) != len(names):
        raise SweepError("the matrix names the same run twice (a task or model listed twice?)")
    return entries


def check_model(spec: str, settings: dict[str, Any]) -> None:
    """Refuse an unknown model or setting without building the model (no weights are loaded)."""
    from harness.modelspec import parse_spec

    _check_node(parse_spec(spec), settings)


def _check_node(node: Any, settings: dict[str, Any]) -> None:
    from harness.modelspec import check_settings, load_alias, resolve_alias
    from harness.registry import lookup

    if node.is_operator:
        entry = lookup("model", node.name)
        if not entry.operator:
            check_settings(entry, {**settings, **node.params})
        for arg in node.args:
            _check_node(arg, settings)
        return
    if node.path is None and load_alias(node.name) is not None:
        target, alias = resolve_alias(node.name, {"text"})
        from harness.modelspec import parse_spec

        _check_node(parse_spec(target), {**alias, **settings})
        return
    check_settings(lookup("model", node.name), settings)
