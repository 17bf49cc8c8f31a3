"""Vote intake: token check, rate limits and the single-use write.

Order matters on SQLite: the transaction's first statement is the UPDATE that claims the battle, so
the connection takes the write lock before it reads anything (a read-then-write transaction can
fail with SQLITE_BUSY under concurrency instead of waiting). The rate-limit counts are then read
inside that lock, so they are exact; on PostgreSQL transaction-scoped advisory locks per voter and per IP
give the same guarantee. The unique ``battle_id`` on votes is the last line against reuse.

A token is good for the kind of battle it was issued for only (``kind``: stored battles through
``/api/arena/vote`` and ``/arena/vote``, live ones through ``/api/arena/chat/{battle}/vote``). A
live vote also passes :func:`.live.admit_vote` inside the same transaction, after the claim has
locked the battle row: no turn may be running, and a reply that names its own model flags the vote
as it is written. Either kind is refused when a side did not answer (a stored output with an error,
a failed live reply: leaderboard/arena/failures.py): a failure is counted, never rated.

A vote names each model by its display label and by its stable key (leaderboard/arena/keys.py): the
battle's own key (live battles), else its stored result row's model, else the label.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from sqlalchemy import Boolean, DateTime, String, Table, Text, bindparam, case, func, insert, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from harness.store.schema import RunRow, SampleResultRow
from harness.store.schema_arena import ArenaBattleRow, ArenaVoteRow

from . import failures, tokens
from .battles import naive_utc
from .config import ArenaConfig
from .keys import model_key, or_label

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
    flagged: bool = False  # stored, but left out of the ratings (e.g. a reply named its own model)

    def to_dict(self) -> dict[str, Any]:
        return {"battle": self.battle, "task": self.task, "left_model": self.left_model,
                "right_model": self.right_model, "outcome": self.outcome}


# Statements built once: vote intake is the hot path, and SQLAlchemy's per-call statement
# construction cost more than the SQL itself (bench/ratings.py measures intake).
_B = ArenaBattleRow.__table__.c
_V = ArenaVoteRow.__table__.c
_BATTLE = select(_B.id, _B.task, _B.sample_id, _B.epoch, _B.left_model, _B.right_model, _B.expires_at,
                 _B.voted_at, _B.left_key, _B.right_key, _B.left_result_id,
                 _B.right_result_id).where(_B.public_id == bindparam("pid"))
_S = SampleResultRow.__table__.c
_R = RunRow.__table__.c
_RESULTS = (select(_S.id, _R.model_id, _S.error, _S.output, _S.prediction).join_from(
    SampleResultRow.__table__, RunRow.__table__, _R.id == _S.run_id).where(_S.id.in_(bindparam("ids", expanding=True))))
_CLAIM = (update(cast(Table, ArenaBattleRow.__table__)).where(_B.id == bindparam("bid"), _B.voted_at.is_(None))
          .values(voted_at=bindparam("stamp", type_=DateTime)))


def _recent_stmt(column: Any) -> Any:
    """Votes by one voter (or IP) in the last minute and the last day, one indexed query."""
    in_minute = func.sum(case((_V.created_at >= bindparam("minute", type_=DateTime), 1), else_=0))
    return select(in_minute, func.count()).where(column == bindparam("key"),
                                                 _V.created_at >= bindparam("day", type_=DateTime))


_RECENT_VOTER = _recent_stmt(_V.voter_hash)
_RECENT_IP = _recent_stmt(_V.ip_hash)
_COPY = insert(cast(Table, ArenaVoteRow.__table__)).from_select(
    ["battle_id", "task", "sample_id", "left_model", "right_model", "left_key", "right_key", "outcome", "voter_hash",
     "ip_hash", "served_at", "created_at", "features", "categories", "flagged", "flag_reason"],
    select(_B.id, _B.task, _B.sample_id, _B.left_model, _B.right_model, bindparam("left_key", type_=String),
           bindparam("right_key", type_=String), bindparam("outcome", type_=String),
           bindparam("voter", type_=String), bindparam("ip", type_=String), _B.created_at,
           bindparam("stamp", type_=DateTime), _B.features, _B.categories, bindparam("flagged", type_=Boolean),
           bindparam("reason", type_=Text)).where(_B.id == bindparam("bid")),
)
_PG_LOCK = text("SELECT pg_advisory_xact_lock(:k)")


def _stored_sides(conn: Any, battle: Any) -> tuple[str, str]:
    """A stored battle's model keys; refuses the vote when a side's output did not answer (an error,
    nothing at all, or a result row that is gone)."""
    ids = [i for i in (battle.left_result_id, battle.right_result_id) if i is not None]
    rows = {r.id: r for r in conn.execute(_RESULTS, {"ids": ids})} if ids else {}
    keys = []
    for rid, key in ((battle.left_result_id, battle.left_key), (battle.right_result_id, battle.right_key)):
        row = rows.get(rid)
        if row is None or not failures.answered(row.error, row.output, row.prediction):
            raise VoteRefused(409, failures.FAILED_OUTPUT)
        keys.append(key or model_key(row.model_id))
    return keys[0], keys[1]


def cast_vote(
    sessions: sessionmaker[Session], cfg: ArenaConfig, secret: bytes, token: str | None, outcome: str | None,
    voter_hash: str, ip_hash: str, *, kind: str = tokens.STORED,
) -> VoteResult:
    """Check the token (for a battle of ``kind``), the limits and, for live battles, the
    conversation; write the vote. Raises VoteRefused."""
    if not token:
        raise VoteRefused(400, "missing battle token")
    parsed = tokens.parse(token)
    if parsed is None:
        raise VoteRefused(403, "invalid battle token")
    public_id, expires, mac = parsed
    if outcome not in OUTCOMES:
        raise VoteRefused(400, f"outcome must be one of {', '.join(OUTCOMES)}")
    now = cfg.clock()
    engine = sessions.kw["bind"]
    with engine.connect() as conn:
        battle = conn.execute(_BATTLE, {"pid": public_id}).first()
    if battle is None:
        raise VoteRefused(403, "invalid battle token")
    fields = tokens.battle_fields(public_id, battle.sample_id, battle.epoch, battle.left_model, battle.right_model,
                                  voter_hash, expires, kind=kind)
    if not tokens.check(secret, fields, mac):
        raise VoteRefused(403, "invalid battle token")
    if expires < now or naive_utc(now) > battle.expires_at:
        raise VoteRefused(403, "battle token expired")
    if battle.voted_at is not None:
        raise VoteRefused(409, "battle token already used")
    if kind == tokens.STORED:
        with engine.connect() as conn:
            left_key, right_key = _stored_sides(conn, battle)
    else:  # a live battle's keys were set when it started; its replies are checked inside the transaction
        left_key, right_key = or_label(battle.left_key, battle.left_model), or_label(battle.right_key,
                                                                                      battle.right_model)

    stamp = naive_utc(now)
    window = {"minute": stamp - timedelta(minutes=1), "day": stamp - timedelta(days=1)}
    try:
        with engine.begin() as conn:  # any refusal raised inside rolls the claim back
            if conn.execute(_CLAIM, {"bid": battle.id, "stamp": stamp}).rowcount != 1:
                raise VoteRefused(409, "battle token already used")
            reason = None
            if kind == tokens.LIVE:  # imported here: the live module builds on this one
                from .live import admit_vote

                reason = admit_vote(conn, battle.id, battle.left_model, battle.right_model, cfg)
            if conn.dialect.name == "postgresql":  # voter, then IP: one order everywhere, so no deadlock
                conn.execute(_PG_LOCK, {"k": zlib.crc32(voter_hash.encode())})
                conn.execute(_PG_LOCK, {"k": zlib.crc32(b"ip:" + ip_hash.encode())})
            voter_minute, voter_day = conn.execute(_RECENT_VOTER, {**window, "key": voter_hash}).one()
            ip_minute, ip_day = conn.execute(_RECENT_IP, {**window, "key": ip_hash}).one()
            if (
                (voter_minute or 0) >= cfg.votes_per_minute
                or voter_day >= cfg.votes_per_day
                or (ip_minute or 0) >= cfg.votes_per_minute * cfg.ip_multiplier
                or ip_day >= cfg.votes_per_day * cfg.ip_multiplier
            ):  # the battle stays open: the voter may come back later
                raise VoteRefused(429, "vote limit reached: try again later")
            conn.execute(_COPY, {"bid": battle.id, "outcome": outcome, "voter": voter_hash, "ip": ip_hash,
                                 "stamp": stamp, "flagged": reason is not None, "reason": reason,
                                 "left_key": left_key, "right_key": right_key})
    except IntegrityError:
        raise VoteRefused(409, "battle token already used") from None
    return VoteResult(public_id, battle.task, battle.left_model, battle.right_model, outcome, reason is not None)
