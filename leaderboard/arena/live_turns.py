"""One live turn: both sides' replies streamed as server-sent events, rendered where the kind has a
renderer, then stored with each side's health (see ``live.py`` for the events and the claims)."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from harness.ratings.style import style_features
from harness.sanitize import clean
from harness.store.schema_arena import ArenaBattleRow
from harness.store.schema_arena_live import ArenaChatRow, ArenaFailureRow, ArenaPoolRow
from harness.streaming import clean_text
from harness.types import GenerationConfig, Message, Part, Request

from . import failures, media, pool
from .config import ArenaConfig, live_media_dir
from .keys import or_label
from .live_common import SIDES, STORE_MARGIN_S, _now, reply_cap, turn_deadline_s

# one logger for every part of a live battle: operators filter on it
log = logging.getLogger("harness.leaderboard.arena.live")


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
