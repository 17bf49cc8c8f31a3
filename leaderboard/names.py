"""Unique display names for models: one name never stands for two specs on any page or in the arena.

A model's short name is what it was run as (``--model``); several specs can share it (the built-in
constant model with different ``text``, one method with different hyper-parameters). Such models
are told apart by the settings their spec carries (``builtin:constant (text=A)``); a model whose
short name is its own keeps it unchanged.

Labels are per owner (:mod:`harness.store.schema`): the operator's models are labelled among
themselves only, exactly as if nothing had been pushed, and a push token's model carries its token's
name (``gpt-x [alice]``). A push can neither rename the operator's model nor pass for it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from harness.store.schema import OPERATOR, ModelRow


def settings_of(spec: str, short: str) -> str:
    """What the spec says beyond the short name: its ``?k=v&...`` part, or the whole spec."""
    base, _, query = spec.partition("?")
    if query and (base == short or base == short.partition("?")[0]):
        return query.replace("&", ", ")
    return spec


def unique_labels(models: Iterable[tuple[int, str, str]]) -> dict[int, str]:
    """{model id: label} for (id, display name, spec) rows; labels are pairwise distinct."""
    rows = sorted(models)
    groups: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for mid, display, spec in rows:
        groups[display or spec].append((mid, spec))
    out: dict[int, str] = {}
    for short, members in groups.items():
        if len(members) == 1:
            out[members[0][0]] = short
            continue
        for mid, spec in members:
            extra = settings_of(spec, short)
            out[mid] = f"{short} ({extra})" if extra and extra != short else short
    # a label that still collides (degenerate specs) gets the model id: never two models, one name
    seen: dict[str, int] = defaultdict(int)
    for label in out.values():
        seen[label] += 1
    return {mid: (f"{label} #{mid}" if seen[label] > 1 else label) for mid, label in out.items()}


def owner_labels(models: Iterable[tuple[int, str, str, str]]) -> dict[int, str]:
    """{model id: label} for (id, display name, spec, owner) rows: the operator's labels are those of
    :func:`unique_labels` over the operator's rows alone; a pushed model's label names its owner and
    gets the model id if it still equals any other label."""
    by_owner: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
    for mid, display, spec, owner in models:
        by_owner[owner].append((mid, display, spec))
    out = unique_labels(by_owner.pop(OPERATOR, []))
    taken = set(out.values())
    for owner in sorted(by_owner):
        for mid, label in sorted(unique_labels(by_owner[owner]).items()):
            label = f"{label} [{owner}]"
            out[mid] = f"{label} #{mid}" if label in taken else label
            taken.add(out[mid])
    return out


def model_labels(s: Session) -> dict[int, str]:
    """Labels of every stored model (computed over all of them, so a page listing a subset shows
    the same names as every other page)."""
    return owner_labels((mid, disp or "", spec, owner) for mid, disp, spec, owner in
                        s.execute(select(ModelRow.id, ModelRow.display_name, ModelRow.spec, ModelRow.owner)))
