"""Arena settings. The app may put an ``ArenaConfig`` on ``app.state.arena_config``; otherwise the
defaults below apply (environment overrides for the secret and media root)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class ArenaConfig:
    secret: str | None = field(default_factory=lambda: os.environ.get("HARNESS_ARENA_SECRET"))
    token_ttl_s: float = 30 * 60  # a battle left open longer than this cannot be voted on
    votes_per_minute: int = 20  # per voter cookie and, separately, per IP hash
    votes_per_day: int = 500
    battles_per_minute: int = 40  # serving is limited too, so battles cannot be mined for reveals
    ip_multiplier: int = 5  # an IP may carry several voters (NAT): its limits are this many times larger
    sampling: str = "active"  # "active" or "uniform" (leaderboard/arena/sampler.py)
    uniform_share: float = 0.25  # active sampling still draws this share of pairs uniformly (unbiasedness)
    active_votes_power: float = 0.5  # pair weight /= (1 + votes on the pair) ** this
    # live battles (/arena/chat): the pool answers the voter's own prompt
    max_turns: int = 3  # user turns per live conversation
    max_prompt_chars: int = 4000
    max_image_bytes: int = 4 * 1024 * 1024
    live_max_tokens: int = 512
    live_temperature: float = 0.7
    live_timeout_s: float = 120.0  # one side's reply longer than this is cut and shown as failed
    live_retries: int = 2  # a failed reply may be regenerated this many times a turn
    moderation_words: list[str] = field(default_factory=list)  # refused before a prompt reaches the pool
    moderation_words_file: str | None = field(default_factory=lambda: os.environ.get("HARNESS_ARENA_BLOCKLIST"))
    moderation_model: str | None = field(default_factory=lambda: os.environ.get("HARNESS_ARENA_MODERATION_MODEL"))
    # what a task shows in the arena, overriding leaderboard/arena/suitability.py: task name ->
    # "text", "image", "render", "video+audio" or "none" (never served)
    task_display: dict[str, str] = field(default_factory=dict)
    live_render_workers: int = 1  # workers of each live kind's renderer (a family's Blender pool, say)
    live_media_dir: str | None = None  # prompt images and live renders (default: a folder in the temp dir)
    stats_ttl_s: float = 10.0  # how long candidate runs and pair statistics are cached
    min_votes: int = 20  # a model is listed on the ratings page after this many votes
    provisional_votes: int = 100  # listed models under this many votes are marked provisional
    bootstrap_rounds: int = 100
    exclude_implausible: bool = True
    outlier_min_votes: int = 10
    hide_self_naming: bool = True  # outputs that contain their model's name are never served
    media_roots: list[Path] = field(default_factory=list)
    # behind a reverse proxy every voter shares the proxy's address. X-Forwarded-For is read only when
    # the connection comes from one of these proxies (addresses or CIDR networks; default
    # $HARNESS_TRUSTED_PROXIES, comma-separated; none by default), and then the right-most entry that
    # is not itself a trusted proxy is the client: entries left of it are whatever the client sent
    trusted_proxies: list[str] = field(default_factory=lambda: trusted_proxies_from_env())
    clock: Callable[[], float] = time.time  # tests move time forward without sleeping


def trusted_proxies_from_env() -> list[str]:
    return [p.strip() for p in os.environ.get("HARNESS_TRUSTED_PROXIES", "").split(",") if p.strip()]


def config_from_app(app: Any) -> ArenaConfig:
    cfg = getattr(app.state, "arena_config", None)
    if cfg is None:
        cfg = ArenaConfig()
        app.state.arena_config = cfg
    return cfg


def media_roots(app: Any, cfg: ArenaConfig) -> list[Path]:
    """Where artifact files may be served from: the arena's own roots, the leaderboard's
    ``app.state.media_roots``, $HARNESS_MEDIA_ROOT / $HARNESS_ARTIFACTS_DIR, and the folder tasks
    write artifacts to ($HARNESS_ARTIFACTS, default ./artifacts, where the 3D families write renders) if it exists.
    Only files a battle row recorded are ever served from them."""
    roots = list(cfg.media_roots) + [Path(p) for p in getattr(app.state, "media_roots", None) or []]
    for var in ("HARNESS_MEDIA_ROOT", "HARNESS_ARTIFACTS_DIR"):
        roots += [Path(p) for p in os.environ.get(var, "").split(os.pathsep) if p]
    roots.append(live_media_dir(cfg))
    artifacts = Path(os.environ.get("HARNESS_ARTIFACTS", "artifacts"))
    if artifacts.is_dir():
        roots.append(artifacts)
    return roots


def live_media_dir(cfg: ArenaConfig) -> Path:
    """Where live battles keep prompt images and renders (served only through their battle's slots)."""
    import tempfile

    d = Path(cfg.live_media_dir) if cfg.live_media_dir else Path(tempfile.gettempdir()) / "harness-arena-live"
    d.mkdir(parents=True, exist_ok=True)
    return d
