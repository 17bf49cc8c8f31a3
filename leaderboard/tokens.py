"""API tokens for writes: create (printed once), verify by hash, list, revoke.

A token has a scope: ``push`` (the default) may create runs and push more into the runs it created;
``admin`` may also push into any run (and the static token given to ``create_app(write_token=)`` is
an admin token: it is the operator's own).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, String, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from harness.store.schema import utcnow
from harness.store.schema_leaderboard import ApiTokenRow

PREFIX = "hlb_"
SCOPES = ("push", "admin")
STATIC_NAME = "static"


class TokenError(ValueError):
    """A token cannot be created or revoked (duplicate or unknown name)."""


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# the column's width, checked here so SQLite (which does not enforce VARCHAR lengths) refuses what
# PostgreSQL would, with the same message
NAME_MAX: int = cast(String, ApiTokenRow.__table__.c["name"].type).length or 200


def check_name(name: str) -> str:
    """The name as stored (stripped), or :class:`TokenError`; callers may check before opening anything."""
    name = name.strip()
    if not name:
        raise TokenError("a token needs a non-empty name")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):  # a line break would forge lines in listings and logs
        raise TokenError("a token name may not contain line breaks or other control characters")
    if len(name) > NAME_MAX:
        raise TokenError(f"a token name is at most {NAME_MAX} characters, this one has {len(name):,}")
    return name


def create_token(sessions: sessionmaker[Session], name: str, scope: str = "push") -> str:
    name = check_name(name)
    if scope not in SCOPES:
        raise TokenError(f"token scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    if name == STATIC_NAME:
        raise TokenError(f"the name {STATIC_NAME!r} is reserved for the server's configured token")
    token = PREFIX + secrets.token_urlsafe(32)
    try:
        with sessions.begin() as s:
            s.add(ApiTokenRow(name=name, token_hash=hash_token(token), scope=scope))
    except IntegrityError:
        raise TokenError(f"a token named {name!r} exists already (revoke it or pick another name)") from None
    return token


@dataclass(slots=True)
class TokenInfo:
    name: str
    revoked: bool
    created_at: datetime
    last_used_at: datetime | None
    scope: str = "push"


@dataclass(frozen=True, slots=True)
class Identity:
    """Who is writing: the token's name and whether it may write into runs it does not own."""

    name: str
    admin: bool


def list_tokens(sessions: sessionmaker[Session]) -> list[TokenInfo]:
    with sessions() as s:
        rows = s.scalars(select(ApiTokenRow).order_by(ApiTokenRow.id)).all()
        return [TokenInfo(r.name, r.revoked, r.created_at, r.last_used_at, r.scope) for r in rows]


def revoke_token(sessions: sessionmaker[Session], name: str) -> None:
    with sessions.begin() as s:
        # an UPDATE's result is a CursorResult (Session.execute is typed as returning the base Result)
        done = cast(CursorResult[Any], s.execute(update(ApiTokenRow).where(ApiTokenRow.name == name)
                                                .values(revoked=True))).rowcount
    if not done:
        raise TokenError(f"no token named {name!r}")


def identify(sessions: sessionmaker[Session], token: str, static_token: str | None = None) -> Identity | None:
    """Who this token is if it may write, else None. ``static_token`` is the one given to
    ``create_app(write_token=...)`` (compared in constant time; an admin)."""
    if static_token and hmac.compare_digest(token.encode(), static_token.encode()):
        return Identity(STATIC_NAME, True)
    digest = hash_token(token)
    with sessions.begin() as s:
        row = s.scalar(select(ApiTokenRow).where(ApiTokenRow.token_hash == digest))
        if row is None or row.revoked:
            return None
        row.last_used_at = utcnow()
        return Identity(row.name, row.scope == "admin")


def check_token(sessions: sessionmaker[Session], token: str, static_token: str | None = None) -> str | None:
    """The token's name if it may write, else None (see :func:`identify`)."""
    who = identify(sessions, token, static_token)
    return who.name if who else None
