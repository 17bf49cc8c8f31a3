"""The renderer of a live battle's kind: what turns each side's reply into pictures.

A family that adds a live kind (its manifest's ``live``, :class:`harness.family.LiveKind`) names the
renderer by import string (the leaderboard imports no family by name); it is built once per app,
with ``ArenaConfig.live_render_workers`` workers, when a battle of that kind first needs it.
``app.state.arena_renderer`` replaces every kind's renderer (tests, other renderers).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from harness import families

from .config import ArenaConfig

Render = Callable[[str, Path], Awaitable[dict[str, Any]]]
log = logging.getLogger(__name__)
_lock = threading.Lock()


def renderer_for(app: Any, cfg: ArenaConfig, kind: str) -> Render | None:
    """The renderer of the live kind ``kind``; None for a kind whose replies are shown as text
    (``chat``, or a kind that declares no renderer). A renderer that cannot be built (a missing
    Blender, say) is not kept: every render of the turn fails with the reason in one line, and the
    next battle tries again."""
    live = families.live_kind(kind)
    if live is None or not live.renderer:
        return None
    custom = getattr(app.state, "arena_renderer", None)
    if custom is not None:
        return custom  # type: ignore[no-any-return]
    with _lock:
        built: dict[str, Render] = getattr(app.state, "arena_renderers", None) or {}
        if kind not in built:
            try:
                built[kind] = families.resolve(live.renderer)(cfg.live_render_workers)
            except Exception as exc:
                reason = f"the {kind} renderer is not available: {type(exc).__name__}: {' '.join(str(exc).split())}"
                log.error("arena: %s", reason)
                return _failing(reason[:500])
            app.state.arena_renderers = built
        return built[kind]


def _failing(reason: str) -> Render:
    async def render(reply: str, out_dir: Path) -> dict[str, Any]:
        return {"status": "ERR_EXEC", "renders": [], "error": reason}

    return render
