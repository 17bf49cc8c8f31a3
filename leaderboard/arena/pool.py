"""The live pool: models that answer voters' own prompts (``harness arena pool add SPEC ...``).

Any model spec works (openai, vLLM, hf, operators). Clients are built on first use in the serving
process and kept (a vLLM or hf backend loads once), without the response cache: a live battle must
show a fresh reply.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from harness.modelspec import ModelSpecError, SpecNode, parse_spec
from harness.store.schema_arena_live import ArenaPoolRow

KINDS = ("chat", "code3d")


class PoolError(ValueError):
    """Bad pool input (unknown spec syntax, duplicate label): one line."""


def add(session: Session, spec: str, settings: dict[str, Any] | None = None, *, label: str | None = None,
        kinds: tuple[str, ...] = ("chat",)) -> ArenaPoolRow:
    try:
        parse_spec(spec)
    except ModelSpecError as exc:
        raise PoolError(str(exc)) from None
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise PoolError(f"unknown kind {bad[0]!r} (one of {', '.join(KINDS)})")
    name = (label or spec).strip()
    existing = session.scalar(select(ArenaPoolRow).where(ArenaPoolRow.label == name))
    if existing is not None:
        existing.spec, existing.settings = spec, dict(settings or {})
        existing.kinds, existing.enabled = list(kinds), True
        session.commit()
        return existing
    row = ArenaPoolRow(label=name, spec=spec, settings=dict(settings or {}), kinds=list(kinds), enabled=True)
    session.add(row)
    session.commit()
    return row


def remove(session: Session, label: str) -> bool:
    row = session.scalar(select(ArenaPoolRow).where(ArenaPoolRow.label == label))
    if row is None:
        return False
    session.delete(row)
    session.commit()
    return True


def known_names(label: str, spec: str | None = None) -> set[str]:
    """Every name a pool entry is known by: its label, its spec, and the model part of each (the
    path after ``backend:``, its last path component, alias and operator names inside an operator
    spec). A reply naming any of them unmasks the battle, whatever ``--name`` the entry was added under."""
    names = {label, _short(label)}
    if spec:
        names.add(spec)
        try:
            names |= _spec_names(parse_spec(spec))
        except ModelSpecError:
            pass
    return {n.strip() for n in names if n and n.strip()}


def _short(name: str) -> str:
    # the short name, without the settings a unique label appends ("builtin:constant (text=A)")
    return re.split(r"[:/]", name.split(" (", 1)[0])[-1]


def _spec_names(node: SpecNode) -> set[str]:
    if node.path is None:  # an alias, or an operator around other specs
        names = {node.name} if not node.is_operator else set()
        for arg in node.args:
            names |= _spec_names(arg)
        return names
    path = node.path.rstrip("/")
    return {path, path.rsplit("/", 1)[-1]}


def members(session: Session, kind: str = "chat") -> list[ArenaPoolRow]:
    rows = session.scalars(select(ArenaPoolRow).where(ArenaPoolRow.enabled.is_(True)).order_by(ArenaPoolRow.id))
    return [r for r in rows if kind in (r.kinds or ["chat"])]


class Clients:
    """label -> ModelClient, built once per serving process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[tuple[str, str], Any] = {}

    def get(self, row: ArenaPoolRow) -> Any:
        import json

        from harness.client import ModelClient

        key = (row.spec, json.dumps(row.settings or {}, sort_keys=True))
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                modalities = {"text", "image"}
                try:
                    client = ModelClient.build(row.spec, dict(row.settings or {}), modalities, use_cache=False,
                                               label=row.label)
                except ModelSpecError:
                    client = ModelClient.build(row.spec, dict(row.settings or {}), {"text"}, use_cache=False,
                                               label=row.label)
                self._clients[key] = client
        return client
