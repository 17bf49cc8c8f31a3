"""How long a voter must wait before the next battle: checked *before* a battle is served, so nobody
reads a battle whose vote would be refused. The binding checks stay where the writes happen
(``battles._insert_within_limits`` for serving, ``votes.cast_vote`` for votes); this only answers
"may this voter be served now, and if not, for how many seconds not"."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from harness.store.schema_arena import ArenaBattleRow, ArenaVoteRow

from .battles import naive_utc
from .config import ArenaConfig


def _wait(session: Session, column: Any, when: Any, key: str, limit: int, window: timedelta,
          now: datetime) -> float:
    """Seconds until fewer than ``limit`` rows with ``column == key`` fall inside ``window``."""
    since = now - window
    times = session.scalars(
        select(when).where(column == key, when >= since).order_by(when.desc()).limit(limit)
    ).all()
    if len(times) < limit:
        return 0.0
    oldest_counted = min(times)  # the limit-th newest: once it leaves the window, one more is allowed
    return max(0.0, (oldest_counted + window - now).total_seconds())


def wait_seconds(session: Session, cfg: ArenaConfig, voter_hash: str, ip_hash: str) -> int:
    """0 when this voter may be served a battle now; else whole seconds until they may (the
    largest wait over the vote limits per minute and per day and the serving limit, each per voter
    cookie and per IP with ``ip_multiplier``)."""
    now = naive_utc(cfg.clock())
    v, b = ArenaVoteRow, ArenaBattleRow
    minute, day = timedelta(minutes=1), timedelta(days=1)
    m = cfg.ip_multiplier
    checks = (
        (v.voter_hash, v.created_at, voter_hash, cfg.votes_per_minute, minute),
        (v.voter_hash, v.created_at, voter_hash, cfg.votes_per_day, day),
        (v.ip_hash, v.created_at, ip_hash, cfg.votes_per_minute * m, minute),
        (v.ip_hash, v.created_at, ip_hash, cfg.votes_per_day * m, day),
        (b.voter_hash, b.created_at, voter_hash, cfg.battles_per_minute, minute),
        (b.ip_hash, b.created_at, ip_hash, cfg.battles_per_minute * m, minute),
    )
    worst = 0.0
    for column, when, key, limit, window in checks:
        worst = max(worst, _wait(session, column, when, key, max(1, int(limit)), window, now))
    return int(math.ceil(worst)) if worst > 0 else 0


def refusal(wait: int) -> str:
    if wait >= 3600:
        when = f"{wait // 3600} h {wait % 3600 // 60} min"
    elif wait >= 60:
        when = f"{wait // 60} min {wait % 60} s"
    else:
        when = f"{wait} s"
    return f"You have reached the voting limit for now: the next battle can be served in {when}."
