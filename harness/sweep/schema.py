"""The one schema every sweep goes through: a sweep file, the ``-t/-m/--seeds`` command line and a
:class:`~harness.sweep.matrix.Matrix` built in Python are all validated here before anything is
expanded, built or written.

Two layers, both before any work proportional to what the input *claims*:

- **Size, before expansion.** A file is read up to :data:`MAX_FILE_BYTES`, must be UTF-8, and its
  YAML event stream is walked once (no objects built) to bound nesting depth, the number of
  aliases, and the size of the document *with aliases expanded* (an alias bomb of nine anchors
  referring to each other nine times each is 9^9 nodes from a few hundred bytes). Duplicate keys,
  which YAML would silently resolve to the last one, are refused there too. The run count
  (tasks x models x seeds) is taken from the list lengths and bounded before any entry is
  validated or a task built; :func:`harness.sweep.matrix.expand` bounds the sample ids it collects
  and :func:`harness.sweep.start` the work units, before the sweep is written.
- **Types and ranges.** A strict pydantic model (unknown keys refused with the closest valid name,
  no coercion: ``true`` is not a seed, ``"ten"`` is not a limit, NaN is not a number) whose first
  error becomes one line naming the key, the value and what was expected.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from harness.errors import UserError
from harness.run_config import MAX_RUN_NAME, MAX_SPEC


class SweepError(UserError, ValueError):
    """A sweep cannot be submitted (bad matrix, unknown name, unreachable cluster or database)."""


# A sweep file is a screenful of YAML; these are far above any real one and far below what would
# take the driver seconds or hundreds of megabytes to hold.
MAX_FILE_BYTES = 256 * 1024
MAX_DEPTH = 32  # nesting of mappings and lists (settings are rarely more than three deep)
MAX_ALIASES = 64  # anchors for shared settings are fine; MAX_NODES is what bounds a bomb of few aliases
MAX_NODES = 20_000  # scalars, lists and mappings of the document with every alias expanded
MAX_RUNS = 2_000  # tasks x models x seeds
MAX_SAMPLES = 1_000_000  # sample ids over all runs (the sweep row stores each run's list)
MAX_UNITS = 100_000  # work-unit rows one sweep writes
MAX_EPOCHS = 1_000
MAX_SEED = 2**32 - 1  # what numpy and most model servers take as a seed
MAX_LIMIT = 2**31 - 1  # the results database's integer columns
MAX_TASK_NAME = 200
MAX_WORKERS = 1_024
MAX_LEASE_SECONDS = 86_400.0


# ---------------------------------------------------------------------------------------------
# size, before expansion


@dataclass
class _Frame:
    anchor: str | None
    mapping: bool
    size: int = 1
    children: int = 0
    keys: set[str] = field(default_factory=set)


def _yaml_loader() -> Any:
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser where installed: same grammar


def _scan(text: str) -> None:
    """Walk the YAML events once (nothing constructed) and refuse a document that is too deep, has
    too many aliases, expands beyond :data:`MAX_NODES`, refers to itself or repeats a key or anchor."""
    import yaml

    stack: list[_Frame] = []
    sizes: dict[str, int] = {}  # expanded size of each finished anchored node
    expanded = aliases = 0  # every node counted once, an alias as the whole node it stands for

    def count(n: int, line: int) -> None:
        nonlocal expanded
        expanded += n
        if expanded > MAX_NODES:
            raise SweepError(f"expands to more than {MAX_NODES:,} values (line {line}); a sweep file is a "
                             "short list of tasks and models (are aliases multiplying it?)")

    def anchor(name: str | None, line: int) -> None:
        if name is not None and (name in sizes or any(f.anchor == name for f in stack)):
            raise SweepError(f"anchor &{name[:60]} is defined twice (line {line})")

    def child(size: int, key: str | None, line: int) -> None:
        """A finished child of the innermost open node: its size, and its key if it is one."""
        if not stack:
            return
        parent = stack[-1]
        parent.size += size
        if parent.mapping and parent.children % 2 == 0 and key is not None:
            if key in parent.keys:
                raise SweepError(f"duplicate key `{key[:60]}` (line {line}); YAML would keep only the last one")
            parent.keys.add(key)
        parent.children += 1

    for event in yaml.parse(text, Loader=_yaml_loader()):
        line = event.start_mark.line + 1 if event.start_mark is not None else 0
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            if len(stack) >= MAX_DEPTH:
                raise SweepError(f"nested more than {MAX_DEPTH} levels deep (line {line})")
            anchor(event.anchor, line)
            count(1, line)
            stack.append(_Frame(event.anchor, isinstance(event, yaml.MappingStartEvent)))
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            done = stack.pop()
            if done.anchor is not None:
                sizes[done.anchor] = done.size
            child(done.size, None, line)
        elif isinstance(event, yaml.ScalarEvent):
            anchor(event.anchor, line)
            if event.anchor is not None:
                sizes[event.anchor] = 1
            count(1, line)
            child(1, event.value, line)
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise SweepError(f"more than {MAX_ALIASES} aliases (line {line})")
            name = str(event.anchor)
            if any(f.anchor == name for f in stack):
                raise SweepError(f"alias *{name[:60]} refers to a value that contains it (line {line})")
            size = sizes.get(name, 1)  # an undefined alias: the loader names it below
            count(size, line)
            child(size, f"*{name}", line)


def read_sweep_file(path: Path) -> Any:
    """The parsed YAML of a sweep file, bounded before anything is expanded (see the module doc)."""
    import yaml

    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)  # a bound read: /dev/zero or a 10 GB file cost 256 KiB
    except OSError as exc:
        raise SweepError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise SweepError(f"{path}: larger than {MAX_FILE_BYTES // 1024} KiB; a sweep file is a short list of "
                         "tasks and models")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SweepError(f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None
    try:
        _scan(text)
        return yaml.load(text, Loader=_yaml_loader())  # noqa: S506 -- a safe loader (C or Python)
    except SweepError as exc:
        raise SweepError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        # "while parsing a flow sequence", "expected ',' or ']', but got '<stream end>'": one line together
        problem = " ".join(", ".join(str(p) for p in (getattr(exc, "context", None), getattr(exc, "problem", None))
                                     if p).split())
        raise SweepError(f"{path}: not valid YAML{where}" + (f": {problem[:200]}" if problem else "")) from None


def check_run_count(data: Mapping[str, Any], flags: bool = False) -> None:
    """Refuse a matrix of more than :data:`MAX_RUNS` runs from its list lengths alone: nothing of it
    has been validated or built yet, so 200,000 seeds cost nothing."""
    counts = []
    for key in ("tasks", "models", "seeds"):
        value = data.get(key)
        counts.append(len(value) if isinstance(value, (list, tuple)) else 1)
    runs = math.prod(counts)
    if runs > MAX_RUNS:
        names = "-t x -m x --seeds" if flags else "tasks x models x seeds"
        raise SweepError(f"{names} = {' x '.join(map(str, counts))} = {runs:,} runs; a sweep has at most "
                         f"{MAX_RUNS:,} (split it into several sweeps)")


# ---------------------------------------------------------------------------------------------
# types and ranges


def _json_walk(value: Any, where: str) -> Iterator[tuple[str, Any]]:
    """(path, value) of every value that a JSON column cannot store as it is, depth-first."""
    todo: list[tuple[str, Any]] = [(where, value)]
    while todo:
        path, v = todo.pop()
        if v is None or isinstance(v, (bool, int, str)):
            continue
        if isinstance(v, float):
            if not math.isfinite(v):
                yield path, v
        elif isinstance(v, list):
            todo.extend((f"{path}[{i}]", x) for i, x in reversed(list(enumerate(v))))
        elif isinstance(v, dict):
            for k, x in reversed(list(v.items())):
                if not isinstance(k, str):
                    yield f"{path}[{k!r}]", k
                else:
                    todo.append((f"{path}.{k}" if path else k, x))
        else:
            yield path, v


def _json_mapping(value: dict[str, Any]) -> dict[str, Any]:
    for path, bad in _json_walk(value, ""):
        # the path inside the mapping is carried in ctx and joined to the error's location
        raise PydanticCustomError("json_value", "a string, a finite number, true/false, null, a list or a mapping "
                                                "(quote dates and times)", {"sub": path, "input": bad})
    return value


Settings = Annotated[dict[str, Any], AfterValidator(_json_mapping)]


def _shorthand(value: Any, key: str, what: str) -> Any:
    """``mytask`` is ``{name: mytask}``; anything but a string or a mapping is refused here, so the
    error says what an entry looks like rather than listing both alternatives."""
    if isinstance(value, str):
        return {key: value}
    if isinstance(value, dict) or isinstance(value, BaseModel):
        return value
    raise PydanticCustomError("entry_shape", what)


def _sweep_name(value: str) -> str:
    if any(not c.isprintable() for c in value):
        raise PydanticCustomError("name_chars", "a name without control characters or line breaks")
    if value.isdigit():
        raise PydanticCustomError("name_digits", "a name that is not only digits (those are read as a sweep id)")
    return value


class _Strict(BaseModel):
    # strict: no coercion (a bool is not an int, "5" is not 5); extra="forbid": a typo is an error,
    # not a key silently ignored; allow_inf_nan=False: NaN and infinity are not numbers here
    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)


class TaskEntry(_Strict):
    name: Annotated[str, Field(min_length=1, max_length=MAX_TASK_NAME)]
    options: Settings = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _short(cls, value: Any) -> Any:
        return _shorthand(value, "name", "a task name, or a mapping with `name` and `options`")


class ResourcesEntry(_Strict):
    gpus: Annotated[float, Field(ge=0, le=1024)] = 0.0
    cpus: Annotated[float, Field(ge=0, le=4096)] = 1.0
    memory_gb: Annotated[float, Field(ge=0, le=1024 * 1024)] = 0.0


class ModelEntry(_Strict):
    spec: Annotated[str, Field(min_length=1, max_length=MAX_SPEC)]
    settings: Settings = Field(default_factory=dict)
    resources: ResourcesEntry = Field(default_factory=ResourcesEntry)

    @model_validator(mode="before")
    @classmethod
    def _short(cls, value: Any) -> Any:
        return _shorthand(value, "spec", "a model spec, or a mapping with `spec`, `settings` and `resources`")


class JudgeEntry(_Strict):
    spec: Annotated[str, Field(min_length=1, max_length=MAX_SPEC)]
    settings: Settings = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _short(cls, value: Any) -> Any:
        return _shorthand(value, "spec", "a judge model spec, or a mapping with `spec` and `settings`")


Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]


class SweepFile(_Strict):
    name: Annotated[str, Field(min_length=1, max_length=MAX_RUN_NAME), AfterValidator(_sweep_name)] | None = None
    tasks: Annotated[list[TaskEntry], Field(min_length=1, max_length=MAX_RUNS)]
    models: Annotated[list[ModelEntry], Field(min_length=1, max_length=MAX_RUNS)]
    seeds: Annotated[list[Seed], Field(min_length=1, max_length=MAX_RUNS)] = Field(default_factory=lambda: [0])
    epochs: Annotated[int, Field(ge=1, le=MAX_EPOCHS)] = 1
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] | None = None  # a sweep run of no samples does nothing
    judge: JudgeEntry | None = None

    @field_validator("seeds", mode="before")
    @classmethod
    def _one_seed(cls, value: Any) -> Any:
        return [value] if isinstance(value, int) and not isinstance(value, bool) else value


class OptionsEntry(_Strict):
    """How a sweep runs (:class:`harness.sweep.SweepOptions`), from flags or from Python."""

    workers: Annotated[int, Field(ge=1, le=MAX_WORKERS)]
    unit_size: Annotated[int, Field(ge=1)] | None = None
    lease_seconds: Annotated[float, Field(ge=1.0, le=MAX_LEASE_SECONDS)]
    max_slots: Annotated[int, Field(ge=1, le=1024)]
    max_restarts: Annotated[int, Field(ge=0, le=1000)]
    ray_address: Annotated[str, Field(min_length=1, max_length=500)] | None = None


_MODEL_AT: dict[tuple[str, ...], type[BaseModel]] = {
    (): SweepFile, ("tasks", "*"): TaskEntry, ("models", "*"): ModelEntry,
    ("models", "*", "resources"): ResourcesEntry, ("judge",): JudgeEntry,
}
# how a location reads when the matrix came from flags rather than a file
_FLAG_AT: dict[tuple[str, ...], str] = {
    ("tasks",): "-t", ("tasks", "*"): "-t", ("tasks", "*", "name"): "-t", ("tasks", "*", "options"): "-T",
    ("models",): "-m", ("models", "*"): "-m", ("models", "*", "spec"): "-m", ("models", "*", "settings"): "-M",
    ("judge",): "--judge", ("judge", "spec"): "--judge", ("judge", "settings"): "-J", ("seeds",): "--seeds",
    ("seeds", "*"): "--seeds", ("epochs",): "--epochs", ("limit",): "--limit", ("name",): "--name",
    ("workers",): "--workers", ("unit_size",): "--unit-size", ("lease_seconds",): "--lease", ("ray_address",): "--ray",
}


_EMPTY: dict[tuple[str, ...], str] = {
    ("tasks",): "the sweep has no tasks (-t TASK or `tasks:` in the file)",
    ("models",): "the sweep has no models (-m MODEL or `models:` in the file)",
    ("seeds",): "the sweep has no seeds",
}


def _shape(loc: tuple[int | str, ...]) -> tuple[str, ...]:
    return tuple("*" if isinstance(p, int) else p for p in loc)


def _where(loc: tuple[int | str, ...], flags: bool) -> str:
    if flags:
        for cut in range(len(loc), 0, -1):
            flag = _FLAG_AT.get(_shape(loc[:cut]))
            if flag is not None:
                rest = [str(p) for p in loc[cut:] if not isinstance(p, int)]
                return " ".join([flag, ".".join(rest)]) if rest else flag
    out = ""
    for p in loc:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out or "the sweep"


def show(value: Any) -> str:
    """A value as one short line, in JSON's spelling (``true``, ``null``) where it has one."""
    try:
        text = json.dumps(value, ensure_ascii=True, default=str)
    except (TypeError, ValueError):  # a non-string key, a circular structure
        text = ascii(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _expected(err: Mapping[str, Any]) -> str:
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return "an integer" + (" (true/false is not a number)" if isinstance(err.get("input"), bool) else "")
    if kind in ("float_type", "float_parsing"):
        return "a number" + (" (true/false is not a number)" if isinstance(err.get("input"), bool) else "")
    bounds = {"greater_than_equal": (">=", "ge"), "less_than_equal": ("<=", "le"),
              "greater_than": (">", "gt"), "less_than": ("<", "lt")}
    if kind in bounds:
        op, key = bounds[kind]
        return f"a number {op} {ctx.get(key)}"
    simple = {"string_type": "a string", "dict_type": "a mapping", "model_type": "a mapping",
              "model_attributes_type": "a mapping", "list_type": "a list", "finite_number": "a finite number",
              "bool_type": "true or false"}
    if kind in simple:
        return simple[kind]
    if kind in ("too_short", "string_too_short"):
        least = ctx.get("min_length")
        return "a non-empty string" if kind == "string_too_short" else f"at least {least} item" + "s" * (least != 1)
    if kind == "too_long":
        return f"at most {ctx.get('max_length'):,} items"
    if kind == "string_too_long":
        return f"at most {ctx.get('max_length'):,} characters"
    return str(err.get("msg", kind)).removeprefix("Value error, ")


def describe(exc: ValidationError, source: str | None = None, flags: bool = False) -> str:
    """The first error of a validation as one line: where, the value, what was expected."""
    errors = exc.errors(include_url=False)
    # an unknown key first: a typo (`model:`) is why the key it misspells is "missing"
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc: tuple[int | str, ...] = tuple(err["loc"])
    ctx = err.get("ctx") or {}
    if "sub" in ctx:  # a bad value deep inside settings/options
        loc = loc + tuple(p for p in str(ctx["sub"]).split(".") if p)
    where = _where(loc, flags)
    value = ctx.get("input", err.get("input"))
    if loc and loc[-1] == "[key]":  # pydantic's location of a mapping's key: the key is the value
        text = f"{_where(loc[:-2], flags)}: key {show(value)}: expected a string"
    elif err["type"] == "extra_forbidden":
        model = _MODEL_AT.get(_shape(loc[:-1]))
        known = list(model.model_fields) if model is not None else []
        close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
        hint = f"did you mean `{close[0]}`? " if close else ""
        text = f"{where}: unknown key ({hint}known: {', '.join(known)})"
    elif err["type"] in ("missing", "too_short") and _shape(loc) in _EMPTY:
        text = _EMPTY[_shape(loc)]
    elif err["type"] == "missing":
        text = f"{where}: missing (it is required)"
    else:
        text = f"{where} = {show(value)}: expected {_expected(err)}"
    more = len(errors) - 1
    text += f" (and {more} more problem{'s' * (more != 1)})" if more else ""
    return f"{source}: {text}" if source else text


def validate_sweep(data: Any, source: str | None = None, flags: bool = False) -> SweepFile:
    """A parsed sweep file (or the same mapping built from flags) as a :class:`SweepFile`, or a
    one-line :class:`SweepError`."""
    prefix = f"{source}: " if source else ""
    if not isinstance(data, dict):
        raise SweepError(f"{prefix}a sweep file is a mapping with `tasks` and `models`, got {show(data)}")
    try:
        check_run_count(data, flags)
    except SweepError as exc:
        raise SweepError(f"{prefix}{exc}") from None
    try:
        return SweepFile.model_validate(data)
    except ValidationError as exc:
        raise SweepError(describe(exc, source, flags)) from None


def validate_options(data: dict[str, Any]) -> OptionsEntry:
    try:
        return OptionsEntry.model_validate(data)
    except ValidationError as exc:
        raise SweepError(describe(exc, None, flags=True)) from None
