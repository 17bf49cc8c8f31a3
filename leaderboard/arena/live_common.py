"""What every part of a live battle shares: its limits (reply size, turn deadlines, health), the task
it is stored under, the refusal a request gets, and the battle a new pair starts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from harness import families

from . import battles
from .config import ArenaConfig

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
