"""``-T`` options converted to a task factory's annotations, in one place for every task.

The registry's wrapper of every ``@task`` factory calls :func:`typed_options` before the factory
runs, so a factory reads its options as the types it annotates, whoever calls it (``harness eval``,
a sweep, a test, Python), and writes no conversion or range check of its own for what an annotation
can say (``n: Annotated[int, Field(ge=1)]``, ``flag: bool``).
"""

from __future__ import annotations

import math
from typing import Any

from harness.errors import RunConfigError

__all__ = ["hints_of", "is_text", "typed_options"]


_SCALARS: dict[Any, str] = {int: "an integer", float: "a number", bool: "true or false"}


def _scalar_hint(hint: Any) -> Any | None:
    """``int``, ``float`` or ``bool``, alone or with ``None``, bounded or not (``Annotated[int,
    Field(ge=1)]``); anything else is the factory's to check."""
    import types
    import typing

    if typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    if hint in _SCALARS:
        return hint
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(rest) == 1:
            return _scalar_hint(rest[0])
    return None


def _without_none(hint: Any) -> Any:
    import types
    import typing

    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return hint


def is_text(hint: Any) -> bool:
    """``str`` or ``str | None``: an option whose value is text, whatever it looks like."""
    return _without_none(hint) is str


def hints_of(factory: Any) -> dict[str, Any]:
    import inspect
    import typing

    try:
        return typing.get_type_hints(inspect.unwrap(factory), include_extras=True)
    except Exception:  # an annotation that does not resolve here: nothing to convert against
        return {}


def typed_options(name: str, factory: Any, options: dict[str, Any],
                  raw: dict[str, str] | None = None) -> dict[str, Any]:
    """The ``-T`` options converted to the factory's annotations, in one place for every task.

    An integer, number or boolean option (alone or with ``None``, bounded or not: ``n: Annotated[int,
    Field(ge=1)]``) is converted with pydantic (``"5"`` -> 5, ``"true"`` -> True) or refused in one
    line naming the option, the value and what it must be (``-T n=abc`` on ``n: int``), before the
    factory runs. A ``str`` option keeps its text as written: ``raw`` holds the command line's text
    (``-T data_file=007`` is ``"007"``, not the number 7 the typed parser read); from Python, a number
    given to a text option becomes its text. Anything else is handed over as given, the factory's to
    check. None is every option's "not given"."""
    from pydantic import TypeAdapter, ValidationError

    from harness.backend_settings import describe

    hints = hints_of(factory)
    out = dict(options)
    for key, value in options.items():
        hint = hints.get(key)
        if hint is None or value is None:
            continue
        if is_text(hint):
            if raw is not None and key in raw:
                out[key] = raw[key]
            elif isinstance(value, int | float) and not isinstance(value, bool):
                out[key] = str(value)
            continue
        if _scalar_hint(hint) is None:
            continue
        declared = _without_none(hint)  # the scalar with its bounds, if the annotation gives any
        try:
            checked = TypeAdapter(declared).validate_python(value)
        except ValidationError:
            raise RunConfigError(f"task {name!r}: -T {key} must be {describe(declared)}, got {value!r}") from None
        if isinstance(checked, float) and not math.isfinite(checked):
            raise RunConfigError(f"task {name!r}: -T {key} must be a finite number, got {value!r}")
        out[key] = checked
    return out
