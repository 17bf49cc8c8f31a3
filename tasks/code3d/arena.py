"""Live 3DCodeArena's renderer: a model's reply -> its Blender code -> the sandboxed Blender pool -> renders.

The manifest names :func:`renderer` as its live kind's renderer; the leaderboard builds it once per
server (``ArenaConfig.live_render_workers`` workers) and calls the ``render`` it returns for each side.

Both sides render in the same scene: every material the code sets is removed after it runs, so the
pool's reference scene (one neutral grey material, the same three lights, camera and world) applies
to both; colour and shading never tell the models apart.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

Render = Callable[[str, Path], Awaitable[dict[str, Any]]]

# appended to the model's code: runs only if that code ran to the end (a failure stays a failure)
UNIFORM_LOOK = """

# --- arena: one look for every model (materials and colours removed; the render scene adds grey) ---
import bpy as _arena_bpy
for _arena_mesh in list(_arena_bpy.data.meshes):
    _arena_mesh.materials.clear()
for _arena_obj in list(_arena_bpy.data.objects):
    _arena_obj.color = (1.0, 1.0, 1.0, 1.0)
    if _arena_obj.type == "LIGHT" or _arena_obj.type == "CAMERA":
        _arena_bpy.data.objects.remove(_arena_obj, do_unlink=True)
"""


def uniform_code(code: str) -> str:
    return code + UNIFORM_LOOK


def renderer(workers: int = 1) -> Render:
    """The live kind's renderer over a new Blender pool of ``workers`` workers (BpyUnavailable, with
    its install hint, when the Blender venv is missing)."""
    from .executor import BlenderPool

    return render_with(BlenderPool(size=max(1, int(workers))))


def render_with(pool: Any) -> Render:
    """``render(reply, out_dir)`` through ``pool`` (anything with ``execute_sync(code, out_dir)``)."""
    from .task import extract_code

    async def render(reply: str, out_dir: Path) -> dict[str, Any]:
        code, _ = extract_code(reply)
        if not code.strip():
            return {"status": "ERR_EXEC", "renders": [], "error": "no code in the reply"}
        result = await asyncio.to_thread(pool.execute_sync, uniform_code(code), out_dir)
        return {"status": result.status, "renders": list(result.renders), "error": result.error[:500]}

    return render
