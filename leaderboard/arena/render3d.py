"""Live 3DCodeArena: a model's reply -> its Blender code -> the sandboxed Blender pool -> renders.

Both sides render in the same scene: every material the code sets is removed after it runs, so the
pool's reference scene (one neutral grey material, the same three lights, camera and world) applies
to both; colour and shading never tell the models apart. The pool is the code3d family's, reached
through import strings (the leaderboard imports no family by name); ``app.state.arena_renderer``
replaces it (tests, other renderers).
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from .config import ArenaConfig

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

_lock = threading.Lock()


def uniform_code(code: str) -> str:
    return code + UNIFORM_LOOK


def renderer_for(app: Any, cfg: ArenaConfig) -> Any:
    custom = getattr(app.state, "arena_renderer", None)
    if custom is not None:
        return custom
    with _lock:
        pool = getattr(app.state, "arena_blender_pool", None)
        if pool is None:
            from harness.families import resolve

            pool_cls = resolve("harness.tasks.code3d.executor:BlenderPool")
            pool = pool_cls(size=cfg.code3d_pool_size)
            app.state.arena_blender_pool = pool
    extract = _extractor()

    async def render(reply: str, out_dir: Path) -> dict[str, Any]:
        code, _ = extract(reply)
        if not code.strip():
            return {"status": "ERR_EXEC", "renders": [], "error": "no code in the reply"}
        result = await asyncio.to_thread(pool.execute_sync, uniform_code(code), out_dir)
        return {"status": result.status, "renders": list(result.renders), "error": result.error[:500]}

    return render


def _extractor() -> Any:
    from harness.families import resolve

    try:
        return resolve("harness.tasks.code3d.task:extract_code")
    except Exception:  # the family is not installed: take the reply as the code
        return lambda text: (text, False)
