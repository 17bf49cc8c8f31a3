"""The live pool: models that answer voters' own prompts (``harness arena pool add SPEC ...``).

Any model spec works (openai, vLLM, hf, operators). Clients are built on first use in the serving
process and kept (a vLLM or hf backend loads once), without the response cache: a live battle must
show a fresh reply.

A pool entry's id is its models' key on votes (``pool:<id>``, leaderboard/arena/keys.py): adding the
same spec under the same label again (new settings, new kinds, or after ``remove``) keeps the entry
and its history; another spec under an existing label is another model, a new entry. ``remove``
only disables an entry, so its id can come back. :func:`probe` is what ``pool add`` checks a model
with before it joins: the model is built (an unknown backend or setting is refused, naming the
closest one) and sent one short request under a time limit.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from harness import families
from harness.errors import UserError
from harness.modelspec import ModelSpecError, SpecNode, parse_spec
from harness.store.schema_arena_live import ArenaPoolRow

CHAT = families.CHAT
PROBE_PROMPT = "Reply with one word: ready"
PROBE_TIMEOUT_S = 15.0


class PoolError(ValueError):
    """Bad pool input (unknown spec syntax or backend or setting, a model that does not answer): one line."""


def known_kinds() -> tuple[str, ...]:
    """The live kinds: ``chat`` and every kind a family adds (its manifest's ``live``)."""
    return (CHAT, *families.live_kinds())


def add(session: Session, spec: str, settings: dict[str, Any] | None = None, *, label: str | None = None,
        kinds: tuple[str, ...] = ("chat",), probed: Probe | None = None) -> ArenaPoolRow:
    """Add (or update) the entry ``label`` (default the spec); ``probed``: the probe to record as its health."""
    try:
        parse_spec(spec)
    except ModelSpecError as exc:
        raise PoolError(str(exc)) from None
    known = known_kinds()
    bad = [k for k in kinds if k not in known]
    if bad:
        raise PoolError(f"unknown kind {bad[0]!r} (one of {', '.join(known)})")
    name = (label or spec).strip()
    existing = session.scalar(select(ArenaPoolRow).where(ArenaPoolRow.label == name))
    if existing is not None and existing.spec != spec:
        # another model under this label: its own entry (and key); the old one's votes keep theirs
        session.delete(existing)
        session.flush()
        existing = None
    if existing is not None:
        existing.settings = dict(settings or {})
        existing.kinds, existing.enabled = list(kinds), True
        row = existing
    else:
        row = ArenaPoolRow(label=name, spec=spec, settings=dict(settings or {}), kinds=list(kinds), enabled=True,
                           failures_in_row=0)
        session.add(row)
    if probed is not None:
        row.probed_at = probed.at
        row.probe_error = probed.error
        if probed.ok:
            row.failures_in_row = 0
    session.commit()
    return row


def remove(session: Session, label: str) -> bool:
    """Take the entry out of the pool (disabled, not deleted: its id is its votes' key)."""
    row = session.scalar(select(ArenaPoolRow).where(ArenaPoolRow.label == label, ArenaPoolRow.enabled.is_(True)))
    if row is None:
        return False
    row.enabled = False
    session.commit()
    return True


@dataclass
class Probe:
    ok: bool
    error: str | None  # one line, None when the model answered
    seconds: float
    at: datetime
    text: str = ""


def check(spec: str, settings: dict[str, Any] | None = None) -> None:
    """Without building anything: every backend the spec names exists and knows every setting
    (PoolError naming the closest one otherwise). Aliases and operators are checked as far as their
    names; their inner settings only when the model is built."""
    from harness.modelspec import check_settings, load_alias
    from harness.registry import lookup

    try:
        node = parse_spec(spec)
        stack = [node]
        while stack:
            n = stack.pop()
            if n.is_operator:
                lookup("model", n.name)
                stack.extend(n.args)
            elif n.path is None and load_alias(n.name) is not None:
                continue
            else:
                check_settings(lookup("model", n.name), dict(settings or {}))
    except UserError as exc:
        raise PoolError(" ".join(str(exc).split())) from None


def build_client(spec: str, settings: dict[str, Any] | None = None, label: str | None = None) -> Any:
    """The model client the serving process uses for an entry; PoolError (one line) for a spec,
    backend or setting that cannot be built."""
    from harness.client import ModelClient

    try:
        try:
            return ModelClient.build(spec, dict(settings or {}), {"text", "image"}, use_cache=False,
                                     label=label or spec)
        except ModelSpecError:  # an alias without an image variant: text only
            return ModelClient.build(spec, dict(settings or {}), {"text"}, use_cache=False, label=label or spec)
    except UserError as exc:
        raise PoolError(" ".join(str(exc).split())) from None
    except Exception as exc:  # a backend that fails to start (a missing package, a bad path, ...)
        raise PoolError(f"{spec}: the model cannot be built: {type(exc).__name__}: {' '.join(str(exc).split())}"[:500]
                        ) from None


def probe(spec: str, settings: dict[str, Any] | None = None, timeout_s: float = PROBE_TIMEOUT_S) -> Probe:
    """Build the model and send it one short request, within ``timeout_s`` seconds (retries
    included); PoolError when it cannot be built. Run outside an event loop (the CLI)."""
    client = build_client(spec, _probe_settings(spec, settings))
    return asyncio.run(_probe(client, timeout_s))


def _probe_settings(spec: str, settings: dict[str, Any] | None) -> dict[str, Any]:
    """The entry's settings, with at most one retry where the backend retries (``max_retries``): a
    dead server's probe should say why (connection refused) rather than back off until its time is up."""
    from harness.registry import lookup

    out = dict(settings or {})
    try:
        node = parse_spec(spec)
        known = set(lookup("model", node.name).settings or ()) if node.path is not None else set()
    except (UserError, LookupError):
        return out
    if "max_retries" in known:
        try:
            out["max_retries"] = min(int(out.get("max_retries", 1)), 1)
        except (TypeError, ValueError):
            pass  # the backend refuses it when it is built, naming the setting
    return out


async def _probe(client: Any, timeout_s: float) -> Probe:
    from harness.types import GenerationConfig, Message, Request

    started = time.perf_counter()
    at = datetime.now(UTC).replace(tzinfo=None)  # naive UTC, as the store keeps times
    request = Request([Message.text("user", PROBE_PROMPT)], GenerationConfig(temperature=0.0, max_tokens=16))
    stream = client.stream(request).limit(4000)
    try:
        async with asyncio.timeout(timeout_s):
            async for _ in stream:
                pass
    except TimeoutError:
        await stream.aclose()
        return Probe(False, f"no reply within {timeout_s:g} s", time.perf_counter() - started, at)
    except Exception as exc:
        return Probe(False, _line(f"{type(exc).__name__}: {exc}"), time.perf_counter() - started, at)
    finally:
        try:
            await client.aclose()
        except Exception:  # closing is best effort: the probe's answer is what counts
            pass
    out = stream.output
    seconds = time.perf_counter() - started
    if out is None:
        return Probe(False, "no reply", seconds, at)
    if out.error is not None:
        kind = (out.details or {}).get("error_kind")
        return Probe(False, _line(f"{kind}: {out.error}" if kind else out.error), seconds, at)
    return Probe(True, None, seconds, at, out.text)


def _line(text: str) -> str:
    return " ".join(str(text).split())[:300]


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


def members(session: Session, kind: str = CHAT) -> list[ArenaPoolRow]:
    rows = session.scalars(select(ArenaPoolRow).where(ArenaPoolRow.enabled.is_(True)).order_by(ArenaPoolRow.id))
    return [r for r in rows if kind in (r.kinds or [CHAT])]


def every_member(session: Session) -> list[ArenaPoolRow]:
    """Every enabled entry once, whatever its kinds: ``chat`` models first, then each other kind's."""
    out: dict[int, ArenaPoolRow] = {}
    for kind in known_kinds():
        for r in members(session, kind):
            out.setdefault(r.id, r)
    return list(out.values())


class Clients:
    """label -> ModelClient, built once per serving process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[tuple[str, str], Any] = {}

    def get(self, row: ArenaPoolRow) -> Any:
        import json

        key = (row.spec, json.dumps(row.settings or {}, sort_keys=True))
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                client = build_client(row.spec, dict(row.settings or {}), row.label)
                self._clients[key] = client
        return client


def health(session: Session, now: datetime, window_s: float = 3600.0) -> list[dict[str, Any]]:
    """Each enabled entry's health, for the operator (``pool list``, ``GET /api/arena/pool``): never
    on a page a voter sees, since a failure's time would tell which side of an open battle failed."""
    from datetime import timedelta

    from .failures import recent
    from .keys import pool_key

    counts = recent(session, now - timedelta(seconds=window_s))
    out: list[dict[str, Any]] = []
    for kind in known_kinds():
        for r in members(session, kind):
            if any(o["label"] == r.label for o in out):
                continue
            down = (r.failures_in_row or 0) > 0  # the last reply failed (and maybe more before it)
            out.append({
                "label": r.label, "spec": r.spec, "kinds": list(r.kinds or []), "key": pool_key(r.id),
                "status": ("failing" if down else "ok" if r.last_ok_at or (r.probed_at and not r.probe_error)
                           else "probe failed" if r.probe_error else "untested"),
                "probed_at": _iso(r.probed_at), "probe_error": r.probe_error,
                "last_ok_at": _iso(r.last_ok_at), "last_error_at": _iso(r.last_error_at), "last_error": r.last_error,
                "failures_in_row": int(r.failures_in_row or 0), "recent_failures": counts.get(pool_key(r.id), 0),
                "recent_window_s": int(window_s),
            })
    return out


def _iso(when: datetime | None) -> str | None:
    return when.isoformat(timespec="seconds") if when else None
