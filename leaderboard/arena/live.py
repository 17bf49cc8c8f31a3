"""Live battles: the voter's own prompt, two anonymous pool models streaming their replies.

A live battle is an ``arena_battles`` row (task :data:`CHAT_TASK` or :data:`CODE3D_TASK`, sample id =
the battle's random public id, no stored results) plus an ``arena_chats`` row holding every turn.
So the vote uses the same signed single-use token, limits and vote table as stored battles. Each turn
streams as server-sent events whose payloads never carry a model name, spec or backend error text:

    {"type": "battle", "battle": ID, "token": T, "max_turns": N}      first event of a new battle
    {"type": "delta", "side": "a"|"b", "text": "..."}                  as the tokens come
    {"type": "done", "side": "a"|"b", "failed": bool}                   a side has finished
    {"type": "render", "side": ..., "status": "OK"|..., "images": [URL]} code3d: the side's renders
    {"type": "end", "turn": n, "can_continue": bool}                    the turn is stored
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import random
import re
import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from harness.ratings_style import style_features
from harness.store.schema_arena import ArenaBattleRow, ArenaVoteRow
from harness.store.schema_arena_live import ArenaChatRow
from harness.types import GenerationConfig, Message, Part, Request

from . import battles, categories, pool, sampler, tokens
from .config import ArenaConfig, live_media_dir

CHAT_TASK = "chat"
CODE3D_TASK = "code3d-live"
SIDES = ("a", "b")
IMAGE_TYPES = {b"\x89PNG\r\n\x1a\n": ("png", "image/png"), b"\xff\xd8\xff": ("jpg", "image/jpeg")}


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
    text = (prompt or "").strip()
    if not text:
        raise LiveRefused(400, "write a prompt first")
    if len(text) > cfg.max_prompt_chars:
        raise LiveRefused(413, f"the prompt is longer than {cfg.max_prompt_chars} characters")
    return text


def choose_pair(session: Session, cfg: ArenaConfig, cache: battles.StatsCache, kind: str,
                rng: random.Random) -> tuple[pool.ArenaPoolRow, pool.ArenaPoolRow]:
    members = pool.members(session, kind)
    if len(members) < 2:
        raise LiveRefused(404, empty_pool_message(kind, len(members)))
    by_label = {m.label: m for m in members}
    task = CODE3D_TASK if kind == "code3d" else CHAT_TASK
    labels = sorted(by_label)
    stats = battles.load_pair_stats(session, task, labels) if cfg.sampling == "active" else None
    a, b = sampler.pair_order(labels, rng, ratings=stats.rating if stats else None, se=stats.se if stats else None,
                              votes=stats.votes if stats else None, uniform_share=cfg.uniform_share,
                              votes_power=cfg.active_votes_power, active=stats is not None)[0]
    if rng.random() < 0.5:
        a, b = b, a
    return by_label[a], by_label[b]


def empty_pool_message(kind: str, n: int) -> str:
    what = "code3d " if kind == "code3d" else ""
    kinds = " --kind code3d" if kind == "code3d" else ""
    return (f"The live {what}pool has {n} model{'s' if n != 1 else ''}; a battle needs two. Add models with "
            f"`harness arena pool add SPEC{kinds}` (any model spec, e.g. openai:MODEL -M base_url=...).")


def start(sessions: sessionmaker[Session], cfg: ArenaConfig, cache: battles.StatsCache, secret: bytes,
          voter_hash: str, ip_hash: str, prompt: str, image: tuple[bytes, str] | None, kind: str) -> Battle:
    """Choose the pair, store the battle and its (empty) conversation; raises LiveRefused."""
    rng = random.Random(secrets.randbits(64))
    public_id = secrets.token_hex(12)  # hex: a random id never spells a model's name
    now = cfg.clock()
    expires = int(now + cfg.token_ttl_s)
    media: dict[str, str] = {}
    if image is not None:
        path = live_media_dir(cfg) / f"{public_id}-p0.{image[1]}"
        path.write_bytes(image[0])
        media["p0"] = str(path)
    with sessions() as s:
        left_row, right_row = choose_pair(s, cfg, cache, kind, rng)
        left, right = left_row.label, right_row.label  # plain strings: the limit check expires ORM rows
        family = "code3d" if kind == "code3d" else "chat"
        row = ArenaBattleRow(
            public_id=public_id, task=CODE3D_TASK if kind == "code3d" else CHAT_TASK, sample_id=public_id, epoch=0,
            left_model=left, right_model=right, left_result_id=None, right_result_id=None, media=media,
            features={}, categories=categories.categorize(prompt, family, "3d" if kind == "code3d" else None),
            voter_hash=voter_hash, ip_hash=ip_hash, created_at=battles.naive_utc(now),
            expires_at=battles.naive_utc(expires),
        )
        try:
            battles._insert_within_limits(s, cfg, row)
        except battles.Limited:
            raise LiveRefused(429, "Too many battles requested: wait a minute.", 60) from None
        s.add(ArenaChatRow(battle_id=row.id, kind=kind, turns=[], n_turns=0, busy=False))
        s.commit()
    fields = tokens.battle_fields(public_id, public_id, 0, left, right, voter_hash, expires)
    return Battle(public_id, tokens.sign(secret, fields), left, right, kind)


def check_token(session: Session, secret: bytes, cfg: ArenaConfig, public_id: str, token: str | None,
                voter_hash: str) -> tuple[ArenaBattleRow, ArenaChatRow]:
    parsed = tokens.parse(token or "")
    battle = session.scalar(select(ArenaBattleRow).where(ArenaBattleRow.public_id == public_id))
    if parsed is None or battle is None or parsed[0] != public_id:
        raise LiveRefused(403, "invalid battle token")
    fields = tokens.battle_fields(public_id, battle.sample_id, battle.epoch, battle.left_model, battle.right_model,
                                  voter_hash, parsed[1])
    if not tokens.check(secret, fields, parsed[2]):
        raise LiveRefused(403, "invalid battle token")
    if parsed[1] < cfg.clock():
        raise LiveRefused(403, "battle token expired")
    chat = session.scalar(select(ArenaChatRow).where(ArenaChatRow.battle_id == battle.id))
    if chat is None:
        raise LiveRefused(404, "not a live battle")
    return battle, chat


def claim_turn(session: Session, battle: ArenaBattleRow, chat: ArenaChatRow, cfg: ArenaConfig) -> None:
    """Mark the conversation busy (one turn at a time, none after the vote or past max_turns)."""
    if battle.voted_at is not None:
        raise LiveRefused(409, "this battle has been voted on: start a new one")
    done = session.execute(
        update(ArenaChatRow).where(ArenaChatRow.id == chat.id, ArenaChatRow.busy.is_(False),
                                   ArenaChatRow.n_turns < cfg.max_turns).values(busy=True)
    ).rowcount  # type: ignore[attr-defined]
    session.commit()
    if done != 1:
        session.refresh(chat)
        if chat.n_turns >= cfg.max_turns:
            raise LiveRefused(409, f"a battle has at most {cfg.max_turns} turns: vote now")
        raise LiveRefused(409, "the models are still answering")


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
    return f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode()


Renderer = Callable[[str, Path], Any]  # (model reply, artifacts dir) -> awaitable {"status", "renders", ...}


async def run_turn(
    sessions: sessionmaker[Session], cfg: ArenaConfig, clients: pool.Clients, battle_public_id: str, prompt: str,
    *, first_event: dict[str, Any] | None = None, renderer: Renderer | None = None,
    media_url: Callable[[str], str] | None = None,
) -> AsyncIterator[bytes]:
    """Stream one turn of both sides (interleaved as the deltas come) and store it."""
    with sessions() as s:
        battle = s.scalar(select(ArenaBattleRow).where(ArenaBattleRow.public_id == battle_public_id))
        assert battle is not None
        chat = s.scalar(select(ArenaChatRow).where(ArenaChatRow.battle_id == battle.id))
        assert chat is not None
        members = {m.label: m for m in pool.members(s, chat.kind)} | {
            m.label: m for m in pool.members(s, "chat" if chat.kind == "code3d" else "code3d")}
        labels = {"a": battle.left_model, "b": battle.right_model}
        turns = list(chat.turns or [])
        image = (battle.media or {}).get("p0")
        chat_id, kind = chat.id, chat.kind
    if first_event is not None:
        yield sse(first_event)
    queue: asyncio.Queue[tuple[str, str | None]] = asyncio.Queue()
    replies: dict[str, dict[str, Any]] = {}

    async def side(name: str) -> None:
        member = members.get(labels[name])
        reply: dict[str, Any] = {"text": "", "failed": True, "error": "model left the pool", "usage": {},
                                 "latency_s": None, "first_token_s": None, "cost": 0.0}
        try:
            if member is None:
                return
            client = clients.get(member)
            request = Request(history(turns, name, prompt, image),
                              GenerationConfig(temperature=cfg.live_temperature, max_tokens=cfg.live_max_tokens))
            stream = client.stream(request)
            try:
                async with asyncio.timeout(cfg.live_timeout_s):
                    async for delta in stream:
                        await queue.put((name, delta))
            except TimeoutError:
                await stream.aclose()
            out = stream.output
            assert out is not None
            reply = {"text": out.text, "failed": out.error is not None or not out.text.strip(), "error": out.error,
                     "usage": out.usage.to_dict(), "latency_s": round(out.usage.seconds, 4),
                     "first_token_s": (out.details or {}).get("first_token_s"), "cost": out.usage.cost}
        except Exception as exc:  # a backend that cannot even start: this side failed, the other goes on
            reply["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:500]
        finally:
            replies[name] = reply
            await queue.put((name, None))

    tasks = [asyncio.create_task(side(n)) for n in SIDES]
    try:
        finished = 0
        while finished < len(SIDES):
            name, delta = await queue.get()
            if delta is None:
                finished += 1
                yield sse({"type": "done", "side": name, "failed": bool(replies[name]["failed"])})
            else:
                yield sse({"type": "delta", "side": name, "text": delta})
        if kind == "code3d" and renderer is not None:
            results = await asyncio.gather(*(_render(renderer, replies[n], cfg, battle_public_id, n) for n in SIDES))
            for name, result in zip(SIDES, results, strict=True):
                replies[name]["render"] = result
            # recorded before the URLs go out: the page fetches them at once
            await asyncio.to_thread(_store_media, sessions, battle_public_id, replies)
            for name, result in zip(SIDES, results, strict=True):
                prefix = "l" if name == "a" else "r"
                images = [media_url(f"{prefix}{i}") if media_url else "" for i in range(len(result.get("renders", [])))]
                yield sse({"type": "render", "side": name, "status": result.get("status", "ERR_EXEC"),
                           "failed": result.get("status") != "OK", "images": images})
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for name in SIDES:
            replies.setdefault(name, {"text": "", "failed": True, "error": "stopped", "usage": {}})
        n = await asyncio.to_thread(_store_turn, sessions, chat_id, battle_public_id, prompt, image, replies, cfg)
    yield sse({"type": "end", "turn": n, "can_continue": n < cfg.max_turns})


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
                replies: dict[str, dict[str, Any]], cfg: ArenaConfig) -> int:
    with sessions() as s:
        chat = s.get(ArenaChatRow, chat_id)
        battle = s.scalar(select(ArenaBattleRow).where(ArenaBattleRow.public_id == public_id))
        assert chat is not None and battle is not None
        turn = {"prompt": prompt, "image": bool(image) and not chat.turns, "a": replies["a"], "b": replies["b"]}
        turns = [*list(chat.turns or []), turn]
        chat.turns = turns
        chat.n_turns = len(turns)
        chat.busy = False
        chat.updated_at = datetime.now(UTC).replace(tzinfo=None)
        # style covariates over everything each side said (style control on live votes)
        battle.features = {"left": style_features("\n\n".join(t["a"]["text"] for t in turns)),
                           "right": style_features("\n\n".join(t["b"]["text"] for t in turns))}
        s.commit()
        return len(turns)


def _store_media(sessions: sessionmaker[Session], public_id: str, replies: dict[str, dict[str, Any]]) -> None:
    """This turn's renders as the battle's media slots (l0.., r0..; a later turn's replace them)."""
    with sessions() as s:
        battle = s.scalar(select(ArenaBattleRow).where(ArenaBattleRow.public_id == public_id))
        assert battle is not None
        media = {k: v for k, v in (battle.media or {}).items() if k[0] not in "lr"}
        for name in SIDES:
            for i, path in enumerate((replies[name].get("render") or {}).get("renders", [])):
                media[f"{'l' if name == 'a' else 'r'}{i}"] = str(path)
        battle.media = media
        s.commit()


def can_vote(session: Session, chat: ArenaChatRow) -> None:
    if chat.busy:
        raise LiveRefused(409, "the models are still answering: vote when both have finished")
    if not chat.n_turns:
        raise LiveRefused(409, "nothing to vote on yet")


def flag_self_naming(session: Session, battle_public_id: str) -> bool:
    """A reply that names its own model unmasks the battle: its vote is kept but left out of the
    ratings (flagged), as stored battles never serve such outputs in the first place."""
    battle = session.scalar(select(ArenaBattleRow).where(ArenaBattleRow.public_id == battle_public_id))
    if battle is None:
        return False
    chat = session.scalar(select(ArenaChatRow).where(ArenaChatRow.battle_id == battle.id))
    if chat is None:
        return False
    named = False
    for side, label in (("a", battle.left_model), ("b", battle.right_model)):
        text = " ".join(t[side]["text"] for t in chat.turns or []).lower()
        names = {label.lower(), re.split(r"[:/]", label.split(" (", 1)[0])[-1].lower()}
        named |= any(len(n) >= 4 and n in text for n in names)
    if named:
        session.execute(update(ArenaVoteRow).where(ArenaVoteRow.battle_id == battle.id)
                        .values(flagged=True, flag_reason="a reply names its own model"))
        session.commit()
    return named


def reveal(session: Session, battle_public_id: str) -> dict[str, Any]:
    """After the vote: the names and each side's usage, latency and cost over the conversation."""
    battle = session.scalar(select(ArenaBattleRow).where(ArenaBattleRow.public_id == battle_public_id))
    assert battle is not None
    chat = session.scalar(select(ArenaChatRow).where(ArenaChatRow.battle_id == battle.id))
    turns = list(chat.turns or []) if chat else []

    def totals(side: str) -> dict[str, Any]:
        usage = [t[side].get("usage") or {} for t in turns]
        return {"output_tokens": sum(int(u.get("output_tokens", 0)) for u in usage),
                "cost": round(sum(float(t[side].get("cost") or 0.0) for t in turns), 6),
                "latency_s": round(sum(float(t[side].get("latency_s") or 0.0) for t in turns), 3)}

    return {"a": {"model": battle.left_model, **totals("a")}, "b": {"model": battle.right_model, **totals("b")},
            "turns": len(turns)}
