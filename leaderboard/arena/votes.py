"""Vote intake: token check, rate limits and the single-use write.

Order matters on SQLite: the transaction's first statement is the UPDATE that claims the battle, so
the connection takes the write lock before it reads anything (a read-then-write transaction can
fail with SQLITE_BUSY under concurrency instead of waiting). The rate-limit counts are then read
inside that lock, so they are exact; on PostgreSQL a transaction-scoped advisory lock per voter
gives the same guarantee. The unique ``battle_id`` on votes is the last line against reuse.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import case, func, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from harness.store.schema_arena import ArenaBattleRow, ArenaVoteRow

from . import tokens
from .battles import naive_utc
from .config import ArenaConfig

OUTCOMES = ("left", "right", "tie", "both_bad")


class VoteRefused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class VoteResult:
    battle: str
    task: str
    left_model: str
    right_model: str
    outcome: str

    def to_dict(self) -> dict[str, Any]:
        return {"battle": self.battle, "task": self.task, "left_model": self.left_model,
                "right_model": self.right_model, "outcome": self.outcome}


def _recent(session: Session, column: Any, value: str, minute: Any, day: Any) -> tuple[int, int]:
    """Votes by this voter (or IP) in the last minute and the last day, one indexed query."""
    in_minute = func.sum(case((ArenaVoteRow.created_at >= minute, 1), else_=0))
    q = select(in_minute, func.count()).where(column == value, ArenaVoteRow.created_at >= day)
    last_minute, last_day = session.execute(q).one()
    return int(last_minute or 0), int(last_day or 0)


def cast_vote(
    sessions: sessionmaker[Session], cfg: ArenaConfig, secret: bytes, token: str | None, outcome: str | None,
    voter_hash: str, ip_hash: str,
) -> VoteResult:
    if not token:
        raise VoteRefused(400, "missing battle token")
    parsed = tokens.parse(token)
    if parsed is None:
        raise VoteRefused(403, "invalid battle token")
    public_id, expires, mac = parsed
    if outcome not in OUTCOMES:
        raise VoteRefused(400, f"outcome must be one of {', '.join(OUTCOMES)}")
    now = cfg.clock()
    with sessions() as s:
        battle = s.scalar(select(ArenaBattleRow).where(ArenaBattleRow.public_id == public_id))
    if battle is None:
        raise VoteRefused(403, "invalid battle token")
    fields = tokens.battle_fields(public_id, battle.sample_id, battle.epoch, battle.left_model, battle.right_model,
                                  voter_hash, expires)
    if not tokens.check(secret, fields, mac):
        raise VoteRefused(403, "invalid battle token")
    if expires < now or naive_utc(now) > battle.expires_at:
        raise VoteRefused(403, "battle token expired")
    if battle.voted_at is not None:
        raise VoteRefused(409, "battle token already used")

    stamp = naive_utc(now)
    with sessions() as s:
        try:
            claimed = s.execute(
                update(ArenaBattleRow)
                .where(ArenaBattleRow.id == battle.id, ArenaBattleRow.voted_at.is_(None))
                .values(voted_at=stamp)
            ).rowcount
            if claimed != 1:
                s.rollback()
                raise VoteRefused(409, "battle token already used")
            if s.get_bind().dialect.name == "postgresql":
                s.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": zlib.crc32(voter_hash.encode())})
            minute, day = stamp - timedelta(minutes=1), stamp - timedelta(days=1)
            voter_minute, voter_day = _recent(s, ArenaVoteRow.voter_hash, voter_hash, minute, day)
            ip_minute, ip_day = _recent(s, ArenaVoteRow.ip_hash, ip_hash, minute, day)
            over = (
                voter_minute >= cfg.votes_per_minute
                or voter_day >= cfg.votes_per_day
                or ip_minute >= cfg.votes_per_minute * cfg.ip_multiplier
                or ip_day >= cfg.votes_per_day * cfg.ip_multiplier
            )
            if over:
                s.rollback()  # the battle stays open: the voter may come back later
                raise VoteRefused(429, "vote limit reached: try again later")
            s.add(ArenaVoteRow(
                battle_id=battle.id, task=battle.task, sample_id=battle.sample_id, left_model=battle.left_model,
                right_model=battle.right_model, outcome=outcome, voter_hash=voter_hash, ip_hash=ip_hash,
                served_at=battle.created_at, created_at=stamp, features=battle.features or {}, flagged=False,
            ))
            s.commit()
        except IntegrityError:
            s.rollback()
            raise VoteRefused(409, "battle token already used") from None
    return VoteResult(public_id, battle.task, battle.left_model, battle.right_model, outcome)
