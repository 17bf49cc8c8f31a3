"""Backend settings declared once, typed, checked in one place.

A backend declares its ``-M`` keys to ``@model(settings=...)`` as a mapping of name to
:class:`Setting` (a type pydantic understands, the backend's default, one line of meaning)::

    @model("counter", settings={"case": Setting(bool, False, "count upper and lower case apart"),
                                "batch_size": Setting(PositiveInt, 8)})

Before the factory runs, :func:`check` refuses an unknown key (naming the closest declared ones) or
a value of the wrong type or range (one line naming the key, the value and what it must be), and
hands the factory the coerced values (``"8"`` becomes 8 where the type is an int). The generation
keys every backend takes (:data:`GENERATION`) are declared here, once; ``harness models NAME`` lists
both with their types and defaults. A backend may still declare names only (``settings=("a", "b")``):
those keys are known but untyped (:data:`ANY`), which ``harness models NAME`` shows as such.
"""

from __future__ import annotations

import difflib
import math
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

from harness.errors import UserError

PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]
NonNegativeFloat = Annotated[float, Field(ge=0)]
Probability = Annotated[float, Field(ge=0, le=1)]


class SettingError(UserError, ValueError):
    """A ``-M`` key a backend does not take, or a value it cannot take: one line."""


@dataclass(frozen=True, slots=True)
class Setting:
    """One declared ``-M`` key: its type (anything pydantic's ``TypeAdapter`` takes), the backend's
    default (shown by ``harness models NAME``; ``None``: the backend decides), and its meaning."""

    type: Any = Any
    default: Any = None
    doc: str = ""
    expect: str = ""  # what the refusal says the value must be (default: said from the type)

    def coerce(self, backend: str, key: str, value: Any) -> Any:
        if self.type is Any:
            return value
        expected = self.expect or describe(self.type)
        try:
            checked = _adapter(self.type).validate_python(value)
        except ValidationError:
            raise SettingError(f"{backend}: bad setting value: {key}={value!r} must be {expected}") from None
        if isinstance(checked, float) and not math.isfinite(checked):
            raise SettingError(f"{backend}: bad setting value: {key} must be {self.expect or 'a finite number'}, "
                               f"got {value!r}")
        return checked


ANY = Setting()

# the keys of GenerationConfig, which every backend takes (the model client applies them per request)
GENERATION: dict[str, Setting] = {
    "temperature": Setting(NonNegativeFloat, 0.0, "sampling temperature (0: greedy)"),
    "max_tokens": Setting(PositiveInt, 256, "most new tokens per reply"),
    "top_p": Setting(Annotated[float, Field(gt=0, le=1)], 1.0, "nucleus sampling mass"),
    "seed": Setting(int | None, None, "sampling seed (default: the run's seed plus the epoch)"),
    "stop": Setting(str | list[str], [], "stop strings"),
    "logprobs": Setting(bool, False, "return each generated token's log-probability"),
}


def declared(settings: Mapping[str, Setting] | Iterable[str]) -> dict[str, Setting]:
    """A backend's declaration as a mapping (names alone become untyped settings)."""
    if isinstance(settings, Mapping):
        out = dict(settings)
        for key, value in out.items():
            if not isinstance(value, Setting):
                raise TypeError(f"setting {key!r}: declare it as Setting(type, default, doc), not {value!r}")
        return out
    return {name: ANY for name in settings}


def check(backend: str, declared_settings: Mapping[str, Setting], values: Mapping[str, Any], *,
          strict: bool = True) -> dict[str, Any]:
    """``values`` checked against the declaration (plus :data:`GENERATION`) and coerced; an unknown
    key is refused when ``strict``, else only when it is one typo away from a known key (it would be
    passed on and silently ignored). Raises :class:`SettingError` with one line."""
    known = {**GENERATION, **declared_settings}
    out: dict[str, Any] = {}
    for key, value in values.items():
        setting = known.get(key)
        if setting is None:
            close = difflib.get_close_matches(key, list(known), n=3, cutoff=0.6 if strict else 0.9)
            if strict or close:
                hint = (f"; did you mean {', '.join(repr(c) for c in close)}?" if close
                        else f" (it takes: {', '.join(sorted(known))})")
                raise SettingError(f"{backend}: unknown setting {key!r}{hint}; see `harness models {backend}`")
            out[key] = value
            continue
        out[key] = value if value is None and setting.default is None else setting.coerce(backend, key, value)
    return out


def describe(tp: Any) -> str:
    """A type as a reader says it: ``an integer >= 1``, ``one of 'auto', 'cpu'``, ``a string or null``."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, *meta = typing.get_args(tp)
        bounds = []
        for m in meta:
            for item in getattr(m, "metadata", [m]):
                for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
                    if getattr(item, attr, None) is not None:
                        bounds.append(f"{sign} {getattr(item, attr)}")
        return f"{describe(base)} {' and '.join(bounds)}" if bounds else describe(base)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        parts = [a for a in typing.get_args(tp) if a is not type(None)]
        text = " or ".join(describe(a) for a in parts)
        return text + (" or null" if len(parts) < len(typing.get_args(tp)) else "")
    if origin in (list, tuple):
        args = typing.get_args(tp)
        return f"a list of {describe(args[0]).removeprefix('a ').removeprefix('an ')}s" if args else "a list"
    if origin is dict:
        return "a mapping"
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(tp, str(tp))


def type_name(tp: Any) -> str:
    """The type for a settings table (``int >= 1``, ``'auto' | 'cpu'``, ``any``)."""
    if tp is Any:
        return "any"
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, *_ = typing.get_args(tp)
        bounds = describe(tp).removeprefix(describe(base))
        return f"{type_name(base)}{bounds}"
    if origin is Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " | ".join("null" if a is type(None) else type_name(a) for a in typing.get_args(tp))
    if origin in (list, tuple):
        args = typing.get_args(tp)
        return f"list[{type_name(args[0])}]" if args else "list"
    if origin is dict:  # dict[str, Any] as describe() says it, not "dict[str, typing.Any]"
        return "mapping"
    return {int: "int", float: "float", str: "str", bool: "bool", dict: "mapping"}.get(tp, str(tp))


def _adapter(tp: Any) -> TypeAdapter[Any]:
    # a number where text is declared is that text (-M text=42; quote it to keep "007" as written)
    return TypeAdapter(tp, config=ConfigDict(coerce_numbers_to_str=True))


