"""When a battle may be voted on, and how failed attempts are counted instead of rated.

A battle is votable only when both sides *answered*: a stored output without an error and with
some text or prediction, a live reply that did not fail (an error, a time-out with nothing said, an
empty reply). What an answer is worth (a Blender script that does not run, a wrong answer) is for
the voter to judge; an answer that is not there is not: rating it would let a dead server "lose"
(or, against another dead one, tie) its way through the ratings. So a failed side disables the
vote buttons, the vote endpoints refuse it (:data:`FAILED_REPLY`, :data:`FAILED_OUTPUT`), and each
failed live reply is a row of ``arena_failures``, shown per model beside the ratings.

Shown publicly only once their battle can no longer be voted on (voted, or its token expired): a
failure count that moved while a battle was open would tell its voter which model the failed side
was, and a regenerated reply would then be voted on with that name known.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from harness import families
from harness.store.schema_arena import ArenaBattleRow
from harness.store.schema_arena_live import ArenaFailureRow

from . import categories

FAILED_REPLY = ("a model's reply failed: this battle cannot be voted on (regenerate the failed reply or start a "
                "new pair)")
FAILED_OUTPUT = "a model's stored output failed: this battle cannot be voted on (skip to a new pair)"


def live_tasks() -> tuple[str, ...]:
    """The tasks live battles are stored under: live.CHAT_TASK and each family kind's (live.task_of;
    live imports this module)."""
    return (families.CHAT, *(kind.task for _, kind in families.live_kinds().values()))


def answered(error: str | None, output: str | None, prediction: Any) -> bool:
    """A stored sample row answered: no error, and some text or a prediction."""
    return error is None and (bool((output or "").strip()) or prediction not in (None, "", [], {}))


def answered_view(side: Mapping[str, Any]) -> bool:
    """The same for a battle view (battles.describe): a failed side with no text did not answer (a
    render task's side with code but no picture did: its code is what is judged)."""
    return not side.get("failed") or bool(str(side.get("text") or "").strip())


def reply_failed(reply: Mapping[str, Any] | None) -> bool:
    return reply is None or bool(reply.get("failed"))


def failed_sides(turns: Iterable[Mapping[str, Any]]) -> list[str]:
    """The sides ("a", "b") with a failed reply in any stored turn of a conversation."""
    bad: set[str] = set()
    for t in turns:
        for side in ("a", "b"):
            if reply_failed(t.get(side)):
                bad.add(side)
    return sorted(bad)


def kind_of(reply: Mapping[str, Any]) -> str:
    """A failed reply's kind: the backend's error kind, ``timeout``, ``empty`` (no text, no error), ..."""
    kind = reply.get("error_kind")
    if kind:
        return str(kind)[:40]
    error = str(reply.get("error") or "")
    if not error:
        return "empty"
    if "timeout" in error.lower() or "timed out" in error.lower():
        return "timeout"
    return "error"


def reason(reply: Mapping[str, Any]) -> str:
    """One line for the server log and the pool's health: the kind and the error's first 300 characters."""
    error = " ".join(str(reply.get("error") or "").split())[:300]
    kind = kind_of(reply)
    return f"{kind}: {error}" if error and error != kind else kind


@dataclass
class Tally:
    failures: int = 0  # failed live replies
    battles: int = 0  # live battles the model was in
    label: str = ""  # the label stored with the last failure or battle


def closed(now: datetime) -> Any:
    """Battles that can no longer be voted on (see the module docstring)."""
    return or_(ArenaBattleRow.voted_at.is_not(None), ArenaBattleRow.expires_at < now)


def tally(session: Session, task: str | None, category: str | None, now: datetime) -> dict[str, Tally]:
    """{model key: failures and battles} over closed live battles (``task``/``category`` as ratings)."""
    from .keys import or_label

    filters = categories.parse_filter(category)
    tasks = [task] if task else list(live_tasks())
    if task and task not in tasks:
        return {}
    out: dict[str, Tally] = {}
    b = ArenaBattleRow
    rows = session.execute(select(b.left_key, b.left_model, b.right_key, b.right_model, b.categories)
                           .where(b.task.in_(tasks), closed(now)).order_by(b.id))
    for lk, lm, rk, rm, cats in rows:
        if filters and not categories.matches(cats, filters):
            continue
        for key, label in ((or_label(lk, lm), lm), (or_label(rk, rm), rm)):
            t = out.setdefault(key, Tally())
            t.battles += 1
            t.label = label
    f = ArenaFailureRow
    q = (select(f.model_key, f.model_label, b.categories).join(b, b.id == f.battle_id)
         .where(f.task.in_(tasks), closed(now)).order_by(f.id))
    for key, label, cats in session.execute(q):
        if filters and not categories.matches(cats, filters):
            continue
        t = out.setdefault(key, Tally(label=label))
        t.failures += 1
        t.label = label
    return {k: t for k, t in out.items() if t.failures}


def recent(session: Session, since: datetime) -> dict[str, int]:
    """{model key: failed live replies since ``since``} (the pool's health, for the operator)."""
    f = ArenaFailureRow
    rows = session.execute(select(f.model_key, func.count()).where(f.created_at >= since).group_by(f.model_key))
    return {str(k): int(n) for k, n in rows}
