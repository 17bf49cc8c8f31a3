"""Live battles: the voter's own prompt, two anonymous pool models streaming their replies.

A live battle is an ``arena_battles`` row (task :data:`CHAT_TASK`, or ``<kind>-live`` for a kind a
family adds, see :func:`task_of`; sample id = the battle's random public id, no stored results) plus
an ``arena_chats`` row holding every turn. So the vote uses the same signed single-use token, limits
and vote table as stored battles. Each turn streams as server-sent events whose payloads never carry
a model name, spec or backend error text:

    {"type": "battle", "battle": ID, "token": T, "max_turns": N}      first event of a new battle
    {"type": "delta", "side": "a"|"b", "text": "..."}                  as the tokens come
    {"type": "done", "side": "a"|"b", "failed": bool}                   a side has finished
    {"type": "render", "side": ..., "status": "OK"|..., "images": [URL]} a rendered kind: the side's renders
    {"type": "end", "turn": n, "can_continue": bool}                    the turn is stored

A turn runs as a task of its own, not as part of the request: a voter who closes the page mid-turn
does not stop it, the replies are stored and the conversation is free again when both sides have
finished. Every claim of a turn also carries a deadline (``updated_at`` + :func:`turn_deadline_s`): a
turn whose process died is taken over after it, so no conversation stays busy for ever. Each side's
reply is bounded (:func:`reply_cap` characters, however much the server sends) and sanitised (no
NUL, no lone surrogate) by the stream that reads it, and so is every event sent.

The token is a live one (:data:`tokens.LIVE`): the stored-battle vote endpoints refuse it, and the
live vote is taken only when no turn is running and both sides answered every turn (checked in the
vote's own transaction). A failed reply (leaderboard/arena/failures.py) is logged in one line naming
the model and the reason, counted in ``arena_failures`` and in its pool entry's health, and may be
regenerated (:func:`claim_retry`: the same prompt to the failed side only, at most
``live_retries`` times a turn); a model whose last :data:`DOWN_AFTER` replies all failed is left out
of new pairs for :data:`DOWN_FOR_S` seconds, so a dead server does not fail battle after battle.

    {"type": "retry", "sides": ["a"]}                                   first event of a regeneration
    {"type": "failed", "sides": ["a"], "can_retry": bool}               before ``end`` when a reply failed:
                                                                        no vote, no next turn until regenerated
"""

from __future__ import annotations

import base64
import binascii
import logging
import random
import secrets
import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, select, update
from sqlalchemy.orm import Session, sessionmaker

from harness import families
from harness.store.schema_arena import ArenaBattleRow
from harness.store.schema_arena_live import ArenaChatRow, ArenaPoolRow
from harness.streaming import clean_text

from . import battles, categories, failures, media, pool, sampler, tokens
from .config import ArenaConfig, live_media_dir
from .fold import mentions
from .keys import pool_key
from .live_common import (
    CHAT_TASK,
    DOWN_AFTER,
    DOWN_FOR_S,
    FIX_FIRST,
    IMAGE_TYPES,
    LIVE_MEDIA_GRACE_S,
    SELF_NAMING,
    STORE_MARGIN_S,
    SWEEP_EVERY_S,
    Battle,
    LiveRefused,
    _now,
    _stale_before,
    reply_cap,
    task_of,
    turn_deadline_s,
)
from .live_turns import history, run_turn, sse
from .votes import VoteRefused

__all__ = [  # the live battle's API (routes_live.py, votes.py and the tests use these names)
    "CHAT_TASK", "LIVE_MEDIA_GRACE_S", "STORE_MARGIN_S", "Battle", "LiveRefused", "admit_vote", "check_prompt",
    "check_token", "claim_retry", "claim_turn", "decode_image", "empty_pool_message", "history", "reply_cap",
    "reveal", "run_turn", "sse", "start", "sweep_media", "task_of", "turn_deadline_s",
]

log = logging.getLogger(__name__)

def decode_image(data_url: str | None, cfg: ArenaConfig) -> tuple[bytes, str] | None:
    """A prompt image from a ``data:`` URL: PNG or JPEG only, at most ``max_image_bytes``."""
    if not data_url:
        return None
    head, _, payload = data_url.partition(",")
    if not head.startswith("data:") or ";base64" not in head:
        raise LiveRefused(400, "the image must be a base64 data URL")
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise LiveRefused(400, "the image is not valid base64") from None
    if len(raw) > cfg.max_image_bytes:
        raise LiveRefused(413, f"the image is larger than {cfg.max_image_bytes // 1024} KiB")
    for magic, (ext, _) in IMAGE_TYPES.items():
        if raw.startswith(magic):
            return raw, ext
    raise LiveRefused(415, "the image must be a PNG or a JPEG")


def check_prompt(prompt: str | None, cfg: ArenaConfig) -> str:
    # NUL and lone surrogates (a JSON body may carry "\\ud800") could not be stored or sent: U+FFFD
    text = clean_text((prompt or "").strip())[0]
    if not text:
        raise LiveRefused(400, "write a prompt first")
    if len(text) > cfg.max_prompt_chars:
        raise LiveRefused(413, f"the prompt is longer than {cfg.max_prompt_chars} characters")
    return text


def answering(members: list[ArenaPoolRow], now: datetime) -> list[ArenaPoolRow]:
    """The members not down: fewer than DOWN_AFTER failures in a row, or the last one long enough ago
    that it is worth trying again."""
    since = now - timedelta(seconds=DOWN_FOR_S)
    return [m for m in members if (m.failures_in_row or 0) < DOWN_AFTER or m.last_error_at is None
            or m.last_error_at < since]


def choose_pair(session: Session, cfg: ArenaConfig, cache: battles.StatsCache, kind: str,
                rng: random.Random) -> tuple[pool.ArenaPoolRow, pool.ArenaPoolRow]:
    members = pool.members(session, kind)
    if len(members) < 2:
        raise LiveRefused(404, empty_pool_message(kind, len(members)))
    members = answering(members, _now(cfg))
    if len(members) < 2:
        raise LiveRefused(503, "Fewer than two models of the live pool are answering right now: try again in a "
                               "few minutes.", int(DOWN_FOR_S))
    by_label = {m.label: m for m in members}
    task = task_of(kind)
    labels = sorted(by_label)
    stats = battles.load_pair_stats(session, task, labels) if cfg.sampling == "active" else None
    a, b = sampler.pair_order(labels, rng, ratings=stats.rating if stats else None, se=stats.se if stats else None,
                              votes=stats.votes if stats else None, uniform_share=cfg.uniform_share,
                              votes_power=cfg.active_votes_power, active=stats is not None)[0]
    if rng.random() < 0.5:
        a, b = b, a
    return by_label[a], by_label[b]


def empty_pool_message(kind: str, n: int) -> str:
    what = f"{kind} " if kind != pool.CHAT else ""
    kinds = f" --kind {kind}" if kind != pool.CHAT else ""
    return (f"The live {what}pool has {n} model{'s' if n != 1 else ''}; a battle needs two. Add models with "
            f"`harness arena pool add SPEC{kinds}` (any model spec, e.g. openai:MODEL -M base_url=...).")


def start(sessions: sessionmaker[Session], cfg: ArenaConfig, cache: battles.StatsCache, secret: bytes,
          voter_hash: str, ip_hash: str, prompt: str, image: tuple[bytes, str] | None, kind: str) -> Battle:
    """Choose the pair, store the battle and its conversation (its first turn claimed: it starts at
    once); raises LiveRefused. The prompt image is written only once the battle is accepted."""
    sweep_media(cfg)
    rng = random.Random(secrets.randbits(64))
    public_id = secrets.token_hex(12)  # hex: a random id never spells a model's name
    now = cfg.clock()
    expires = int(now + cfg.token_ttl_s)
    media_slots: dict[str, str] = {}
    image_path = live_media_dir(cfg) / f"{public_id}-p0.{image[1]}" if image is not None else None
    if image_path is not None:
        media_slots["p0"] = str(image_path)
    with sessions() as s:
        left_row, right_row = choose_pair(s, cfg, cache, kind, rng)
        left, right = left_row.label, right_row.label  # plain strings: the limit check expires ORM rows
        found = families.live_kinds().get(kind)
        # a family's kind: its battles are that family's ("chat" otherwise), in the kind's category
        family, category = (found[0].name, found[1].category) if found is not None else (pool.CHAT, None)
        row = ArenaBattleRow(
            public_id=public_id, task=task_of(kind), sample_id=public_id, epoch=0,
            left_model=left, right_model=right, left_key=pool_key(left_row.id), right_key=pool_key(right_row.id),
            left_result_id=None, right_result_id=None, media=media_slots,
            features={}, categories=categories.categorize(prompt, family, category),
            voter_hash=voter_hash, ip_hash=ip_hash, created_at=battles.naive_utc(now),
            expires_at=battles.naive_utc(expires),
        )
        try:
            battles._insert_within_limits(s, cfg, row)
        except battles.Limited:
            raise LiveRefused(429, "Too many battles requested: wait a minute.", 60) from None
        s.add(ArenaChatRow(battle_id=row.id, kind=kind, turns=[], n_turns=0, busy=True,
                           updated_at=battles.naive_utc(now)))
        try:
            if image is not None and image_path is not None:  # accepted: now the image may go to disk
                image_path.write_bytes(image[0])
            s.commit()
        except BaseException:
            if image_path is not None:
                image_path.unlink(missing_ok=True)
            raise
    fields = tokens.battle_fields(public_id, public_id, 0, left, right, voter_hash, expires, kind=tokens.LIVE)
    return Battle(public_id, tokens.sign(secret, fields), left, right, kind)


_swept: dict[Path, float] = {}
_sweep_lock = threading.Lock()


def sweep_media(cfg: ArenaConfig, *, force: bool = False) -> int:
    """Delete live media (prompt images, renders) older than a battle can be voted on, plus a grace
    period; at most once a minute per process and folder. Returns how many entries went."""
    folder = live_media_dir(cfg)
    now = cfg.clock()
    with _sweep_lock:
        last = _swept.get(folder)
        if not force and last is not None and 0 <= now - last < SWEEP_EVERY_S:
            return 0
        _swept[folder] = now
    return media.sweep_live(folder, cfg.token_ttl_s + LIVE_MEDIA_GRACE_S, now)


def check_token(session: Session, secret: bytes, cfg: ArenaConfig, public_id: str, token: str | None,
                voter_hash: str) -> tuple[ArenaBattleRow, ArenaChatRow]:
    parsed = tokens.parse(token or "")
    battle = session.scalar(select(ArenaBattleRow).where(ArenaBattleRow.public_id == public_id))
    if parsed is None or battle is None or parsed[0] != public_id:
        raise LiveRefused(403, "invalid battle token")
    fields = tokens.battle_fields(public_id, battle.sample_id, battle.epoch, battle.left_model, battle.right_model,
                                  voter_hash, parsed[1], kind=tokens.LIVE)
    if not tokens.check(secret, fields, parsed[2]):  # a stored battle's token is refused here too
        raise LiveRefused(403, "invalid battle token")
    if parsed[1] < cfg.clock():
        raise LiveRefused(403, "battle token expired")
    chat = session.scalar(select(ArenaChatRow).where(ArenaChatRow.battle_id == battle.id))
    if chat is None:
        raise LiveRefused(404, "not a live battle")
    return battle, chat


def _lock_open_battle(session: Session, battle_id: int) -> None:
    """Take the battle row's lock (a no-op write, as the vote takes it) while it is still unvoted, or
    refuse. The read transaction ends first: SQLite must take its write lock with the first write."""
    session.rollback()
    open_ = session.execute(update(ArenaBattleRow).where(ArenaBattleRow.id == battle_id,
                                                         ArenaBattleRow.voted_at.is_(None))
                            .values(voted_at=None)).rowcount  # type: ignore[attr-defined]
    if open_ != 1:
        session.rollback()
        raise LiveRefused(409, "this battle has been voted on: start a new one")


def claim_turn(session: Session, battle: ArenaBattleRow, chat: ArenaChatRow, cfg: ArenaConfig) -> None:
    """Mark the conversation busy (one turn at a time, none after the vote or past max_turns; a claim
    past its deadline is void). The battle row is locked first, as the vote locks it: a vote and a
    turn cannot both pass (on PostgreSQL the second waits for the first and then sees it)."""
    battle_id, chat_id, kind = battle.id, chat.id, chat.kind
    _lock_open_battle(session, battle_id)
    free = ArenaChatRow.busy.is_(False) | (ArenaChatRow.updated_at < _stale_before(cfg, kind))
    done = session.execute(
        update(ArenaChatRow).where(ArenaChatRow.id == chat_id, free, ArenaChatRow.n_turns < cfg.max_turns)
        .values(busy=True, updated_at=_now(cfg))
    ).rowcount  # type: ignore[attr-defined]
    if done == 1:  # checked under the claim: no turn can be stored meanwhile
        turns = session.scalar(select(ArenaChatRow.turns).where(ArenaChatRow.id == chat_id)) or []
        if failures.failed_sides(turns):  # a conversation goes on only from answers, not from a failure
            session.rollback()
            raise LiveRefused(409, FIX_FIRST)
    session.commit()
    if done != 1:
        n_turns = session.scalar(select(ArenaChatRow.n_turns).where(ArenaChatRow.id == chat_id)) or 0
        if n_turns >= cfg.max_turns:
            raise LiveRefused(409, f"a battle has at most {cfg.max_turns} turns: vote now")
        raise LiveRefused(409, "the models are still answering")


def claim_retry(session: Session, battle: ArenaBattleRow, chat: ArenaChatRow, cfg: ArenaConfig) -> list[str]:
    """Claim the conversation to regenerate the last turn's failed replies; returns those sides.
    Refused after the vote, while a turn runs, when nothing failed, or past ``live_retries``."""
    battle_id, chat_id, kind = battle.id, chat.id, chat.kind
    _lock_open_battle(session, battle_id)
    free = ArenaChatRow.busy.is_(False) | (ArenaChatRow.updated_at < _stale_before(cfg, kind))
    done = session.execute(update(ArenaChatRow).where(ArenaChatRow.id == chat_id, free)
                           .values(busy=True, updated_at=_now(cfg))).rowcount  # type: ignore[attr-defined]
    if done != 1:
        session.rollback()
        raise LiveRefused(409, "the models are still answering")
    turns = session.scalar(select(ArenaChatRow.turns).where(ArenaChatRow.id == chat_id)) or []
    sides = failures.failed_sides(turns[-1:])
    if not sides:
        session.rollback()
        raise LiveRefused(409, "no reply failed: nothing to regenerate")
    if int(turns[-1].get("retries") or 0) >= cfg.live_retries:
        session.rollback()
        raise LiveRefused(409, f"a reply is regenerated at most {cfg.live_retries} times: start a new pair")
    session.commit()
    return sides


_C = ArenaChatRow.__table__.c
_P = ArenaPoolRow.__table__.c


def admit_vote(conn: Connection, battle_id: int, left: str, right: str, cfg: ArenaConfig) -> str | None:
    """The live checks of a vote, inside its transaction (the battle row is locked by then): refused
    while a turn is running (a claim past its deadline does not count) or before the first turn is
    stored. Returns the flag reason when a reply names its own model (the vote is then stored
    flagged: kept, but left out of the ratings, as stored battles never serve such outputs)."""
    chat = conn.execute(select(_C.busy, _C.updated_at, _C.n_turns, _C.turns, _C.kind)
                        .where(_C.battle_id == battle_id)).first()
    if chat is None:
        raise VoteRefused(404, "not a live battle")
    if chat.busy and chat.updated_at >= _stale_before(cfg, chat.kind):
        raise VoteRefused(409, "the models are still answering: vote when both have finished")
    if not chat.n_turns:
        raise VoteRefused(409, "nothing to vote on yet")
    if failures.failed_sides(chat.turns or []):  # no answer, no comparison: counted as a failure, never rated
        raise VoteRefused(409, failures.FAILED_REPLY)
    specs = dict(conn.execute(select(_P.label, _P.spec).where(_P.label.in_([left, right]))).all())
    for side, label in (("a", left), ("b", right)):
        text = "\n".join(str((t.get(side) or {}).get("text") or "") for t in chat.turns or [])
        if mentions(text, pool.known_names(label, specs.get(label))):
            return SELF_NAMING
    return None


def reveal(session: Session, battle_public_id: str) -> dict[str, Any]:
    """After the vote: the names and each side's usage, latency, time to first token and cost over the
    conversation."""
    battle = session.scalar(select(ArenaBattleRow).where(ArenaBattleRow.public_id == battle_public_id))
    assert battle is not None
    chat = session.scalar(select(ArenaChatRow).where(ArenaChatRow.battle_id == battle.id))
    turns = list(chat.turns or []) if chat else []

    def totals(side: str) -> dict[str, Any]:
        usage = [t[side].get("usage") or {} for t in turns]
        ttft = [float(t[side]["first_token_s"]) for t in turns if t[side].get("first_token_s") is not None]
        return {"output_tokens": sum(int(u.get("output_tokens", 0)) for u in usage),
                "cost": round(sum(float(t[side].get("cost") or 0.0) for t in turns), 6),
                "latency_s": round(sum(float(t[side].get("latency_s") or 0.0) for t in turns), 3),
                # time to first token: the mean over the turns (the wait before each reply began)
                "first_token_s": round(sum(ttft) / len(ttft), 3) if ttft else None}

    return {"a": {"model": battle.left_model, **totals("a")}, "b": {"model": battle.right_model, **totals("b")},
            "turns": len(turns)}
