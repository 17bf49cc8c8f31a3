"""Model specs: ``backend:path``, aliases from YAML cards, and operator expressions.

Grammar (whitespace ignored)::

    spec     := operator | leaf
    operator := NAME "(" arg ("," arg)* ")"        e.g. vote(qwen, n=5)
    arg      := spec | NAME "=" VALUE
    leaf     := BACKEND ":" PATH | ALIAS            e.g. hf:./my-model, openai:gpt-4o, smollm2

Aliases are small YAML cards in ``harness/models/aliases/NAME.yaml``::

    description: Qwen2.5-Omni 7B (video+audio), Qwen2.5 7B Instruct for text-only tasks
    variants:
      - {modalities: [text, image, video, audio], spec: "vllm:Qwen/Qwen2.5-Omni-7B"}
      - {modalities: [text], spec: "vllm:Qwen/Qwen2.5-7B-Instruct"}
    settings: {max_tokens: 512}

The first variant whose modalities cover the task's is taken.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.backend_settings import Setting, SettingError, check, declared
from harness.errors import UserError
from harness.options import check_bounds, split_top
from harness.options import parse_value as _parse_value
from harness.registry import ModelKind, UnknownNameError, entries, lookup
from harness.resources import package_data


def alias_dir() -> Path:
    """The installed package's cards (harness/models/aliases), wherever the wheel was installed.
    Found on first use, not at import: a command that needs no card (``harness serve``) must report
    what *it* is missing from an incomplete installation, not the cards. ``ALIAS_DIR`` reads it too
    (a test may set that attribute to another folder)."""
    found = globals().get("ALIAS_DIR")
    if found is None:
        found = globals()["ALIAS_DIR"] = package_data("harness.models", "aliases")
    return Path(found)


def __getattr__(name: str) -> Any:
    if name == "ALIAS_DIR":
        return alias_dir()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ModelSpecError(UserError, ValueError):
    pass


@dataclass(slots=True)
class SpecNode:
    name: str  # operator name, backend name, or alias
    path: str | None = None  # for backend:path leaves
    args: list[SpecNode] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def is_operator(self) -> bool:
        return self.path is None and (bool(self.args) or bool(self.params))


def parse_value(raw: str) -> Any:
    """``-M``/``-T``/operator values, typed by :func:`harness.options.parse_value` (a ``#`` is kept)."""
    return _parse_value(raw)


def parse_spec(text: str) -> SpecNode:
    text = text.strip()
    if not text:
        raise ModelSpecError("empty model spec")
    check_bounds(text, "the model spec")  # parsing recurses per nested operator: 5,000 deep is one line
    paren = text.find("(")
    colon = text.find(":")
    if paren > 0 and (colon < 0 or paren < colon) and text.endswith(")"):
        name = text[:paren].strip()
        node = SpecNode(name)
        for arg in split_top(text[paren + 1 : -1]):
            key, eq, val = arg.partition("=")
            if eq and key.strip().isidentifier() and "(" not in key:
                node.params[key.strip()] = parse_value(val)
            else:
                node.args.append(parse_spec(arg))
        return node  # no models inside: a backend called with settings (checked in build_model)
    if colon > 0:
        return SpecNode(text[:colon].strip(), path=text[colon + 1 :].strip())
    return SpecNode(text)


def load_alias(name: str) -> dict[str, Any] | None:
    card = alias_dir() / f"{name}.yaml"
    if not card.exists():
        return None
    import yaml

    data = yaml.safe_load(card.read_text()) or {}
    if "spec" not in data and "variants" not in data:
        raise ModelSpecError(f"alias card {card} has neither 'spec' nor 'variants'")
    return data


def alias_names() -> list[str]:
    folder = alias_dir()
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.exists() else []


def resolve_alias(name: str, modalities: set[str]) -> tuple[str, dict[str, Any]]:
    data = load_alias(name)
    if data is None:
        raise UnknownNameError(name)
    settings = dict(data.get("settings") or {})
    if "variants" in data:
        for variant in data["variants"]:
            if modalities <= set(variant.get("modalities", ["text"])):
                return variant["spec"], {**settings, **(variant.get("settings") or {})}
        raise ModelSpecError(
            f"alias {name!r} has no variant for modalities {sorted(modalities)}"
        )
    return data["spec"], settings


def build_model(
    spec: str | SpecNode, settings: dict[str, Any] | None = None, modalities: set[str] | None = None
) -> Any:
    """Turn a spec into a live model. ``settings`` (from ``-M``) go to every leaf backend."""
    node = parse_spec(spec) if isinstance(spec, str) else spec
    settings = dict(settings or {})
    modalities = modalities or {"text"}
    if node.is_operator:
        entry = lookup("model", node.name)
        if not entry.operator and not node.args:
            # `backend(key=value, ...)`: the backend with those settings, e.g.
            # agent(controller=openai:m, vision=openai:v)
            merged = check_settings(entry, {**settings, **node.params})
            return entry.factory(None, **merged)
        if not entry.operator:
            raise ModelSpecError(f"{node.name!r} is a backend, not an operator; write {node.name}:PATH")
        if not node.args:
            raise ModelSpecError(f"operator {node.name!r} needs at least one model: {spec!r}")
        inner = [build_model(a, settings, modalities) for a in node.args]
        return entry.factory(*inner, **dict(node.params))
    if node.path is None:
        # an alias, or a backend with no path (e.g. "builtin" defaults)
        if load_alias(node.name) is not None:
            target, alias_settings = resolve_alias(node.name, modalities)
            return build_model(target, {**alias_settings, **settings}, modalities)
        try:
            entry = lookup("model", node.name)
        except UnknownNameError:
            import difflib

            known = alias_names() + [e.name for e in entries("model")]
            close = difflib.get_close_matches(node.name, known, n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise UnknownNameError(
                f"unknown model {node.name!r}{hint} (see `harness models`; or write BACKEND:PATH)"
            ) from None
        if entry.operator:
            raise ModelSpecError(f"operator {node.name!r} needs models: {node.name}(MODEL, ...)")
        return entry.factory(None, **check_settings(entry, settings))
    entry = lookup("model", node.name)
    return entry.factory(node.path, **check_settings(entry, settings))


def validate_settings(backend: str, settings: dict[str, Any],
                      known: Mapping[str, Setting] | Iterable[str], *, strict: bool = True) -> dict[str, Any]:
    """``-M`` settings checked against a declaration (:func:`harness.backend_settings.check`): an
    unknown key is refused naming the closest known ones (``strict``: every unknown key; otherwise
    only a near miss such as ``temprature``, which would be passed on and silently ignored), a value
    of the wrong type or range in one line; returns the coerced values. Generation keys are always
    known. Backends whose settings depend on their path call this themselves."""
    try:
        return check(backend, declared(known), settings, strict=strict)
    except SettingError as exc:
        raise ModelSpecError(str(exc)) from None


def check_settings(entry: Any, settings: dict[str, Any]) -> dict[str, Any]:
    """The registry's check before a factory runs: the settings the backend declared to ``@model``,
    coerced to their declared types."""
    return validate_settings(entry.name, settings, entry.settings, strict=entry.strict)


def alias_settings(spec: str, modalities: set[str]) -> dict[str, Any]:
    """The settings an alias card adds (e.g. ``max_tokens: 512``) when ``spec`` is an alias, so the
    runner can apply its generation keys to every request like ``-M`` ones; {} otherwise."""
    node = parse_spec(spec)
    if node.is_operator or node.path is not None or load_alias(node.name) is None:
        return {}
    return resolve_alias(node.name, modalities)[1]


def spec_kind(spec: str) -> ModelKind | None:
    """The declared kind of a model spec (``hf:x``, an alias, ``vote(qwen, n=5)``), None when a
    backend in it is not registered here or the spec does not parse. An operator takes the kind its
    models share (``vote`` over agents ranks with agents), else its own declaration. Here, not in the
    registry: like :func:`build_model`, it reads a spec (grammar, alias cards) and looks its backends up."""

    def of(node: SpecNode) -> ModelKind | None:
        if node.is_operator and node.args:
            inner = {of(a) for a in node.args}
            if len(inner) == 1:
                return inner.pop()
        elif node.path is None:
            card = load_alias(node.name)
            if card is not None:  # every variant of an alias is the same kind of model: the first says it
                target = card.get("spec") or (card.get("variants") or [{}])[0].get("spec")
                return of(parse_spec(str(target))) if target else None
        try:
            return lookup("model", node.name).model_kind
        except UnknownNameError:
            return None

    try:
        return of(parse_spec(spec))
    except (ModelSpecError, UnknownNameError, ImportError, OSError, ValueError):
        return None
