"""Stable model keys: what arena votes and failures are counted under, whatever the model is called.

A display label can change after votes were cast (``leaderboard/names.py`` gives two specs that
share a short name a suffix each), so a vote names its models twice: by the label the voter saw and
by a key that never changes: ``model:<models.id>`` for a stored run's model, ``pool:<arena_pool.id>``
for a live pool entry, ``label:<label>`` for rows from before keys existed whose model could not be
found. Ratings aggregate by key and show each key under its *current* label (:func:`display_names`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from harness.store.schema_arena_live import ArenaPoolRow

MODEL = "model:"
POOL = "pool:"
LABEL = "label:"


def model_key(model_id: int) -> str:
    return f"{MODEL}{model_id}"


def pool_key(pool_id: int) -> str:
    return f"{POOL}{pool_id}"


def or_label(key: str | None, label: str) -> str:
    """The key, or the label's own key for a row written without one."""
    return key or f"{LABEL}{label}"


def _id(key: str, prefix: str) -> int | None:
    rest = key[len(prefix):]
    return int(rest) if key.startswith(prefix) and rest.isdigit() else None


def legacy_resolver(session: Session) -> Callable[[str, bool], str]:
    """For rows written before keys existed (``label:X``, from battles whose result row was gone, or
    seeded without one): the key of the model whose *current* label is X (a pool entry's for live
    battles), so such votes join the model's later ones; else the label key as it is. Loaded only
    when such a key turns up."""
    tables: dict[bool, dict[str, str]] = {}

    def resolve(key: str, live: bool) -> str:
        if not key.startswith(LABEL):
            return key
        if not tables:
            from ..names import model_labels

            tables[False] = {label: model_key(i) for i, label in model_labels(session).items()}
            tables[True] = {label: pool_key(i) for i, label in session.execute(
                select(ArenaPoolRow.id, ArenaPoolRow.label))}
        return tables[live].get(key[len(LABEL):], key)

    return resolve


def display_names(session: Session, seen: Iterable[tuple[str, str]]) -> dict[str, str]:
    """{key: the name to show} for (key, label as stored) pairs, the last pair of a key winning: a
    stored model's current label, a pool entry's current label, else the last label stored. Names
    are pairwise distinct: two keys that would show the same name get the key appended."""
    stored: dict[str, str] = {}
    for key, label in seen:
        stored[key] = label
    names = dict(stored)
    model_ids = {k: i for k in stored if (i := _id(k, MODEL)) is not None}
    if model_ids:
        from ..names import model_labels

        labels = model_labels(session)
        for k, i in model_ids.items():
            names[k] = labels.get(i, names[k])
    pool_ids = {i: k for k in stored if (i := _id(k, POOL)) is not None}
    if pool_ids:
        rows = session.execute(select(ArenaPoolRow.id, ArenaPoolRow.label).where(ArenaPoolRow.id.in_(pool_ids)))
        for pid, label in rows:
            names[pool_ids[pid]] = label
    count: dict[str, int] = {}
    for name in names.values():
        count[name] = count.get(name, 0) + 1
    return {k: (f"{n} #{k}" if count[n] > 1 else n) for k, n in names.items()}
