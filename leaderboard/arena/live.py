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

import asyncio
import base64
import binascii
import json
import logging
import random
import secrets
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, select, update
from sqlalchemy.orm import Session, sessionmaker

from harness import families
from harness.ratings.style import style_features
from harness.sanitize import clean
from harness.store.schema_arena import ArenaBattleRow
from harness.store.schema_arena_live import ArenaChatRow, ArenaFailureRow, ArenaPoolRow
from harness.streaming import clean_text
from harness.types import GenerationConfig, Message, Part, Request

from . import battles, categories, failures, media, pool, sampler, tokens
from .config import ArenaConfig, live_media_dir
from .fold import mentions
from .keys import or_label, pool_key
from .votes import VoteRefused

log = logging.getLogger(__name__)

CHAT_TASK = "chat"
SIDES = ("a", "b")
IMAGE_TYPES = {b"\x89PNG\r\n\x1a\n": ("png", "image/png"), b"\xff\xd8\xff": ("jpg", "image/jpeg")}
CHARS_PER_TOKEN = 16  # a reply is cut at this many characters per allowed token: no tokenizer's tokens are longer
MIN_REPLY_CHARS = 4000
STORE_MARGIN_S = 60.0  # between a turn's own time limit and its deadline: time to store it
LIVE_MEDIA_GRACE_S = 600.0  # live media are kept this long past their battle's vote deadline
SWEEP_EVERY_S = 60.0
SELF_NAMING = "a reply names its own model"
DOWN_AFTER = 3  # replies in a row that failed: the model is left out of new pairs for a while
DOWN_FOR_S = 120.0
FIX_FIRST = "a reply failed: regenerate it or start a new pair"


def reply_cap(cfg: ArenaConfig) -> int:
    """The most characters one side's reply may have (the stream stops reading there)."""
    return max(MIN_REPLY_CHARS, cfg.live_max_tokens * CHARS_PER_TOKEN)


def task_of(kind: str) -> str:
    """The task a live battle of ``kind`` is stored (and rated) under."""
    live = families.live_kind(kind)
    return live.task if live is not None else CHAT_TASK


def turn_deadline_s(cfg: ArenaConfig, kind: str) -> float:
    """How long a claimed turn may hold its conversation: its own time limit, its kind's render time,
    plus time to store it. Past it the claim is void (the process that ran the turn died): the next
    turn or the vote may go."""
    live = families.live_kind(kind)
    render = max(0.0, float(live.render_timeout_s)) if live is not None and live.renderer else 0.0
    return cfg.live_timeout_s + render + 2 * STORE_MARGIN_S


def _now(cfg: ArenaConfig) -> datetime:
    return battles.naive_utc(cfg.clock())


def _stale_before(cfg: ArenaConfig, kind: str) -> datetime:
    return _now(cfg) - timedelta(seconds=turn_deadline_s(cfg, kind))


class LiveRefused(Exception):
    def __init__(self, status: int, message: str, retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after_s = retry_after_s


@dataclass
class Battle:
    public_id: str
    token: str
    left: str  # pool labels: server-side only
    right: str
    kind: str


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


def history(turns: list[dict[str, Any]], side: str, prompt: str, image_path: str | None) -> list[Message]:
    """The conversation as one side saw it, plus the new prompt (the image goes with the first turn)."""
    messages: list[Message] = []
    for i, t in enumerate(turns):
        messages.append(_user(t["prompt"], image_path if i == 0 else None))
        messages.append(Message.text("assistant", t[side]["text"]))
    messages.append(_user(prompt, image_path if not turns else None))
    return messages


def _user(text: str, image_path: str | None) -> Message:
    parts = [Part("text", text)]
    if image_path:
        parts.append(Part("image", path=image_path))
    return Message("user", parts)


def sse(event: dict[str, Any]) -> bytes:
    """One server-sent event; sanitised before it is encoded (a lone surrogate would abort the response)."""
    return f"data: {clean_text(json.dumps(event, ensure_ascii=False))[0]}\n\n".encode()


Renderer = Callable[[str, Path], Any]  # (model reply, artifacts dir) -> awaitable {"status", "renders", ...}


_running: set[asyncio.Task[None]] = set()  # turns in flight: a task nobody awaits must not be collected


def run_turn(
    sessions: sessionmaker[Session], cfg: ArenaConfig, clients: pool.Clients, battle_public_id: str, prompt: str,
    *, first_event: dict[str, Any] | None = None, renderer: Renderer | None = None,
    media_url: Callable[[str], str] | None = None, retry: list[str] | None = None,
) -> AsyncIterator[bytes]:
    """Start one (claimed) turn now, as its own task, and return its events as they come. The task
    does not depend on anyone reading them: it finishes and stores the turn when the voter has gone.
    ``retry``: regenerate the last turn's replies of these sides instead (``prompt`` is then unused)."""
    events: asyncio.Queue[bytes | None] = asyncio.Queue()
    if retry:
        first_event = {"type": "retry", "sides": list(retry)}
    task = asyncio.get_running_loop().create_task(
        _turn(sessions, cfg, clients, battle_public_id, prompt, events.put_nowait, renderer, media_url, retry))
    _running.add(task)
    task.add_done_callback(_running.discard)
    return _relay(events, first_event)


async def _relay(events: asyncio.Queue[bytes | None], first_event: dict[str, Any] | None) -> AsyncIterator[bytes]:
    if first_event is not None:
        yield sse(first_event)
    while (event := await events.get()) is not None:
        yield event


async def _turn(
    sessions: sessionmaker[Session], cfg: ArenaConfig, clients: pool.Clients, battle_public_id: str, prompt: str,
    emit: Callable[[bytes | None], None], renderer: Renderer | None, media_url: Callable[[str], str] | None,
    retry: list[str] | None = None,
) -> None:
    """Both sides answer (deltas interleaved as they come), a rendered kind's replies render, the turn is stored
    and the conversation freed; whatever fails, the turn ends with its ``end`` event (or none, if it
    could not be stored: the claim's deadline then frees the conversation). ``retry``: only these
    sides answer the last turn's prompt again; the other side's reply stays as it was."""
    replies: dict[str, dict[str, Any]] = {}
    chat_id: int | None = None
    image: str | None = None
    sides = tuple(retry) if retry else SIDES
    try:
        with sessions() as s:
            battle = s.scalar(select(ArenaBattleRow).where(ArenaBattleRow.public_id == battle_public_id))
            assert battle is not None
            chat = s.scalar(select(ArenaChatRow).where(ArenaChatRow.battle_id == battle.id))
            assert chat is not None
            members = {m.label: m for m in pool.every_member(s)}
            labels = {"a": battle.left_model, "b": battle.right_model}
            turns = list(chat.turns or [])
            image = (battle.media or {}).get("p0")
            chat_id, kind = chat.id, chat.kind
        if retry:  # the last turn again, as the models saw it then
            last = turns.pop()
            prompt = last["prompt"]
            replies.update({n: last[n] for n in SIDES if n not in sides})
        budget = turn_deadline_s(cfg, kind) - STORE_MARGIN_S
        async with asyncio.timeout(budget):  # the claim's deadline must find the turn stored
            await _answer(cfg, clients, members, labels, turns, prompt, image, replies, emit, battle_public_id,
                          sides)
            if renderer is not None:
                await _render_both(sessions, cfg, renderer, battle_public_id, replies, emit, media_url, sides)
    except (Exception, asyncio.CancelledError) as exc:
        if not isinstance(exc, TimeoutError):
            log.warning("live turn of %s failed: %s", battle_public_id, type(exc).__name__)
        if isinstance(exc, asyncio.CancelledError):
            emit(None)
            raise
    try:
        if chat_id is not None:
            for name in SIDES:
                replies.setdefault(name, {"text": "", "failed": True, "error": "stopped", "error_kind": "stopped",
                                          "usage": {}})
            end = await asyncio.to_thread(_store_turn, sessions, chat_id, battle_public_id, prompt, image, replies,
                                          cfg, sides if retry else None)
            if end["failed"]:
                emit(sse({"type": "failed", "sides": end["failed"], "can_retry": end["can_retry"]}))
            emit(sse({"type": "end", "turn": end["turn"], "can_continue": end["can_continue"]}))
    except Exception as exc:
        log.warning("live turn of %s could not be stored: %s", battle_public_id, type(exc).__name__)
    finally:
        emit(None)


async def _answer(cfg: ArenaConfig, clients: pool.Clients, members: dict[str, ArenaPoolRow], labels: dict[str, str],
                  turns: list[dict[str, Any]], prompt: str, image: str | None, replies: dict[str, dict[str, Any]],
                  emit: Callable[[bytes | None], None], public_id: str = "",
                  sides: tuple[str, ...] = SIDES) -> None:
    cap = reply_cap(cfg)

    async def side(name: str) -> None:
        member = members.get(labels[name])
        reply: dict[str, Any] = {"text": "", "failed": True, "error": "model left the pool", "error_kind": "removed",
                                 "usage": {}, "latency_s": None, "first_token_s": None, "cost": 0.0}
        try:
            if member is None:
                return
            client = clients.get(member)
            request = Request(history(turns, name, prompt, image),
                              GenerationConfig(temperature=cfg.live_temperature, max_tokens=cfg.live_max_tokens))
            stream = client.stream(request).limit(cap)  # the one bounded, sanitising reader
            try:
                async with asyncio.timeout(cfg.live_timeout_s):
                    async for delta in stream:
                        emit(sse({"type": "delta", "side": name, "text": delta}))
            except TimeoutError:
                await stream.aclose()
            out = stream.output
            assert out is not None
            details = out.details or {}
            reply = {"text": out.text, "failed": out.error is not None or not out.text.strip(), "error": out.error,
                     "error_kind": details.get("error_kind") if out.error is not None else None,
                     "usage": out.usage.to_dict(), "latency_s": round(out.usage.seconds, 4),
                     "first_token_s": details.get("first_token_s"), "cost": out.usage.cost,
                     "truncated": bool(details.get("truncated")),
                     "sanitized": int((details.get("sanitized") or {}).get("replaced", 0))}
        except Exception as exc:  # a backend that cannot even start: this side failed, the other goes on
            reply["error"] = clean_text(f"{type(exc).__name__}: {' '.join(str(exc).split())}")[0][:500]
            reply["error_kind"] = "exception"
        finally:
            replies[name] = reply
            if reply["failed"]:  # the operator's one line: which model, why (the voter sees "No output")
                log.warning("arena: live reply failed: model %r (battle %s, side %s): %s", labels[name], public_id,
                            name, failures.reason(reply))
            emit(sse({"type": "done", "side": name, "failed": bool(reply["failed"])}))

    tasks = [asyncio.create_task(side(n)) for n in sides]
    try:
        await asyncio.gather(*tasks)
    finally:  # the turn's time is up (or it was cancelled): neither side goes on
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _render_both(sessions: sessionmaker[Session], cfg: ArenaConfig, renderer: Renderer, public_id: str,
                       replies: dict[str, dict[str, Any]], emit: Callable[[bytes | None], None],
                       media_url: Callable[[str], str] | None, sides: tuple[str, ...] = SIDES) -> None:
    """Render the replies of ``sides`` (a regenerated side only: the other keeps its renders)."""
    results = await asyncio.gather(*(_render(renderer, replies[n], cfg, public_id, n) for n in sides))
    for name, result in zip(sides, results, strict=True):
        replies[name]["render"] = result
    # recorded before the URLs go out: the page fetches them at once
    await asyncio.to_thread(_store_media, sessions, cfg, public_id, replies)
    for name, result in zip(sides, results, strict=True):
        prefix = "l" if name == "a" else "r"
        images = [media_url(f"{prefix}{i}") if media_url else "" for i in range(len(result.get("renders", [])))]
        emit(sse({"type": "render", "side": name, "status": result.get("status", "ERR_EXEC"),
                  "failed": result.get("status") != "OK", "images": images}))


async def _render(renderer: Renderer, reply: dict[str, Any], cfg: ArenaConfig, public_id: str,
                  side: str) -> dict[str, Any]:
    if reply.get("failed"):
        return {"status": "ERR_EXEC", "renders": [], "error": "no reply"}
    out_dir = live_media_dir(cfg) / f"{public_id}-{side}-{secrets.token_hex(4)}"
    try:
        result = await renderer(reply["text"], out_dir)
    except Exception as exc:
        return {"status": "ERR_EXEC", "renders": [], "error": f"{type(exc).__name__}: {exc}"[:500]}
    return dict(result)


def _store_turn(sessions: sessionmaker[Session], chat_id: int, public_id: str, prompt: str, image: str | None,
                replies: dict[str, dict[str, Any]], cfg: ArenaConfig,
                retried: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Store the turn (a regeneration replaces the last turn's retried replies), count its failed
    replies and each side's pool health, free the conversation; returns the ``end`` event's fields."""
    with sessions() as s:
        chat = s.get(ArenaChatRow, chat_id)
        battle = s.scalar(select(ArenaBattleRow).where(ArenaBattleRow.public_id == public_id))
        assert chat is not None and battle is not None
        old = list(chat.turns or [])
        if retried and old:
            last = dict(old.pop())
            turn = {**last, **{n: replies[n] for n in retried}, "retries": int(last.get("retries") or 0) + 1}
        else:
            turn = {"prompt": prompt, "image": bool(image) and not old, "a": replies["a"], "b": replies["b"]}
        turn = clean(turn)[0]  # render and backend errors too: no NUL or lone surrogate reaches a JSON column
        turns = [*old, turn]
        chat.turns = turns
        chat.n_turns = len(turns)
        chat.busy = False
        now = _now(cfg)
        chat.updated_at = now
        # style covariates over everything each side said (style control on live votes)
        battle.features = {"left": style_features("\n\n".join(t["a"]["text"] for t in turns)),
                           "right": style_features("\n\n".join(t["b"]["text"] for t in turns))}
        sides_keys = {"a": (or_label(battle.left_key, battle.left_model), battle.left_model),
                      "b": (or_label(battle.right_key, battle.right_model), battle.right_model)}
        for name in retried or SIDES:
            _health(s, battle, name, sides_keys[name], turn[name], len(turns) - 1, now)
        s.commit()
        failed = failures.failed_sides(turns)
        n = len(turns)
        retries_left = int(turn.get("retries") or 0) < cfg.live_retries
        return {"turn": n, "can_continue": n < cfg.max_turns and not failed, "failed": failed,
                "can_retry": bool(failures.failed_sides([turn])) and retries_left}


def _health(s: Session, battle: ArenaBattleRow, side: str, key: tuple[str, str], reply: dict[str, Any], turn: int,
            now: datetime) -> None:
    """One side's reply in the pool entry's health; a failed one also as an ``arena_failures`` row."""
    failed = failures.reply_failed(reply)
    if failed:
        s.add(ArenaFailureRow(battle_id=battle.id, task=battle.task, model_key=key[0], model_label=key[1], side=side,
                              turn=turn, kind=failures.kind_of(reply), created_at=now))
    pool_id = key[0][len("pool:"):] if key[0].startswith("pool:") else ""
    if not pool_id.isdigit():
        return
    values: dict[str, Any] = (
        {"last_error_at": now, "last_error": failures.reason(reply)[:500],
         "failures_in_row": ArenaPoolRow.failures_in_row + 1} if failed
        else {"last_ok_at": now, "failures_in_row": 0})
    s.execute(update(ArenaPoolRow).where(ArenaPoolRow.id == int(pool_id)).values(**values))


def _store_media(sessions: sessionmaker[Session], cfg: ArenaConfig, public_id: str,
                 replies: dict[str, dict[str, Any]]) -> None:
    """This turn's renders as the battle's media slots (l0.., r0..; a later turn's replace them, and the
    replaced files are deleted: no slot serves them any more)."""
    with sessions() as s:
        battle = s.scalar(select(ArenaBattleRow).where(ArenaBattleRow.public_id == public_id))
        assert battle is not None
        old = dict(battle.media or {})
        slots = {k: v for k, v in old.items() if k[0] not in "lr"}
        for name in SIDES:
            for i, path in enumerate((replies[name].get("render") or {}).get("renders", [])):
                slots[f"{'l' if name == 'a' else 'r'}{i}"] = str(path)
        battle.media = slots
        s.commit()
    kept = set(slots.values())
    media.remove_live([p for k, p in old.items() if k[0] in "lr" and p not in kept], live_media_dir(cfg))


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
