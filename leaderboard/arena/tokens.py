"""Battle tokens and voter hashes, all keyed by one server secret.

Token = ``<battle public id>.<expiry unix s>.<hmac>`` with the HMAC (SHA-256) over the battle's kind
(:data:`STORED` or :data:`LIVE`), id, sample, epoch, both models in their positions, the voter hash
and the expiry. The models never appear in the token (it sits in the page before the vote): the
server recomputes the MAC from its stored battle row and the kind the endpoint serves, so a token
whose battle, pair, positions, voter, expiry or kind differ is refused: a live battle's token is no
ticket to the stored-battle vote (which would skip the live checks and reveal the names while the
models are still answering). Single use is enforced by the database (unique vote per battle), not here.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from harness.store.schema_arena import ArenaMetaRow

SECRET_KEY = "hmac_secret"


def load_secret(sessions: sessionmaker[Session], configured: str | None) -> bytes:
    """The configured secret, else one stored in ``arena_meta`` (created once; every worker of
    every process reads the same one, so tokens stay valid across workers and restarts)."""
    if configured:
        return configured.encode()
    with sessions() as s:
        value = s.scalar(select(ArenaMetaRow.value).where(ArenaMetaRow.key == SECRET_KEY))
        if value is None:
            s.add(ArenaMetaRow(key=SECRET_KEY, value=secrets.token_hex(32)))
            try:
                s.commit()
            except IntegrityError:  # another worker created it first
                s.rollback()
            value = s.scalar(select(ArenaMetaRow.value).where(ArenaMetaRow.key == SECRET_KEY))
    return str(value).encode()


def keyed_hash(secret: bytes, kind: str, value: str) -> str:
    """Pseudonymous id for a cookie or an IP: stable per server, useless without the secret."""
    return hmac.new(secret, f"{kind}:{value}".encode(), hashlib.sha256).hexdigest()[:32]


def _mac(secret: bytes, fields: list[str]) -> str:
    return hmac.new(secret, "\x1f".join(fields).encode(), hashlib.sha256).hexdigest()


STORED = "stored"  # a battle over two stored outputs (/arena, /api/arena/battle)
LIVE = "live"  # a live battle on the voter's prompt (/arena/chat)
KINDS = (STORED, LIVE)


def battle_fields(
    public_id: str, sample_id: str, epoch: int, left: str, right: str, voter: str, expires: int, *,
    kind: str = STORED,
) -> list[str]:
    """What a token's MAC covers; the kind goes last but one, the expiry last (``sign`` reads both ends)."""
    if kind not in KINDS:
        raise ValueError(f"unknown battle kind {kind!r}")
    return [public_id, sample_id, str(epoch), left, right, voter, f"kind={kind}", str(expires)]


def sign(secret: bytes, fields: list[str]) -> str:
    return f"{fields[0]}.{fields[-1]}.{_mac(secret, fields)}"


def parse(token: str) -> tuple[str, int, str] | None:
    """(public id, expiry, mac) or None when the token is not even well-formed."""
    parts = (token or "").split(".")
    if len(parts) != 3 or not parts[1].isdigit() or len(parts[2]) != 64:
        return None
    return parts[0], int(parts[1]), parts[2]


def check(secret: bytes, fields: list[str], mac: str) -> bool:
    return hmac.compare_digest(_mac(secret, fields), mac)
