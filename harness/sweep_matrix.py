"""A sweep's matrix: tasks (with options) × models (with settings) × seeds, expanded into runs.

From the command line (``-t``/``-m``/``-T``/``-M``/``--seeds``) or a small YAML file::

    name: nightly              # optional; default: a hash of the matrix
    tasks:
      - gsm8k
      - {name: qa_mmlu_redux, options: {subset: abstract_algebra}}
    models:
      - builtin:number
      - {spec: "openai:gpt-4o-mini", settings: {temperature: 0}, resources: {gpus: 0, memory_gb: 2}}
    seeds: [0, 1]
    epochs: 1
    limit: 200
    judge: {spec: "openai:gpt-4o", settings: {}}

Everything is validated before anything is submitted: unknown tasks, models or settings, bad task
options and an empty sample list are one-line :class:`SweepError` s naming the entry.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.types import stable_hash


class SweepError(UserError, ValueError):
    """A sweep cannot be submitted (bad matrix, unknown name, unreachable cluster or database)."""


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


def _mapping(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise SweepError(f"{what} must be a mapping of names to values")
    return dict(value)


def matrix_from_yaml(path: Path) -> Matrix:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SweepError(f"cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise SweepError(f"{path}: not valid YAML{where}") from None
    if not isinstance(data, dict):
        raise SweepError(f"{path}: a sweep file is a mapping with `tasks` and `models`")
    unknown = set(data) - {"name", "tasks", "models", "seeds", "epochs", "limit", "judge"}
    if unknown:
        raise SweepError(f"{path}: unknown key(s) {', '.join(sorted(unknown))} "
                         "(known: name, tasks, models, seeds, epochs, limit, judge)")
    tasks: list[tuple[str, dict[str, Any]]] = []
    for item in data.get("tasks") or []:
        if isinstance(item, str):
            tasks.append((item, {}))
        elif isinstance(item, dict) and isinstance(item.get("name"), str):
            tasks.append((item["name"], _mapping(item.get("options"), f"task {item['name']!r} options")))
        else:
            raise SweepError(f"{path}: a task is a name or {{name: ..., options: {{...}}}}, got {item!r}")
    models: list[tuple[str, dict[str, Any], Resources]] = []
    for item in data.get("models") or []:
        if isinstance(item, str):
            models.append((item, {}, Resources()))
        elif isinstance(item, dict) and isinstance(item.get("spec"), str):
            res = _mapping(item.get("resources"), f"model {item['spec']!r} resources")
            try:
                resources = Resources(**{k: float(v) for k, v in res.items()})
            except (TypeError, ValueError):
                raise SweepError(f"model {item['spec']!r}: resources are gpus, cpus, memory_gb (numbers)") from None
            models.append((item["spec"], _mapping(item.get("settings"), f"model {item['spec']!r} settings"),
                           resources))
        else:
            raise SweepError(f"{path}: a model is a spec or {{spec: ..., settings: {{...}}}}, got {item!r}")
    judge = data.get("judge")
    judge_spec, judge_settings = (judge, {}) if isinstance(judge, str) or judge is None else (
        judge.get("spec"), _mapping(judge.get("settings"), "judge settings"))
    seeds = data.get("seeds", [0])
    if isinstance(seeds, int):
        seeds = [seeds]
    if not isinstance(seeds, list) or not all(isinstance(s, int) for s in seeds):
        raise SweepError(f"{path}: seeds is an integer or a list of integers")
    return Matrix(tasks, models, seeds, int(data.get("epochs", 1)), data.get("limit"), judge_spec, judge_settings,
                  data.get("name"))


def expand(matrix: Matrix) -> list[RunEntry]:
    """Validate every entry and expand the matrix into runs, with their sample ids. Builds the tasks
    (which checks their options and loads their samples) but no model: a model's factory is only
    checked for its name and settings, so the driver never loads weights."""
    from harness.modelspec import ModelSpecError
    from harness.runner import EvalConfig, build_task, default_run_name, select_samples

    if not matrix.tasks:
        raise SweepError("the sweep has no tasks (-t TASK or `tasks:` in the file)")
    if not matrix.models:
        raise SweepError("the sweep has no models (-m MODEL or `models:` in the file)")
    if matrix.epochs < 1:
        raise SweepError("epochs must be at least 1")
    if not matrix.seeds:
        raise SweepError("the sweep has no seeds")
    for spec, settings, _ in matrix.models:
        try:
            check_model(spec, settings)
        except (ModelSpecError, UserError) as exc:
            raise SweepError(f"model {spec!r}: {exc}") from None
    entries = []
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
