"""Live 3DCodeArena through the real sandboxed Blender pool: a model that paints its object red and
adds its own light renders pixel for pixel like one that does not (one look for every model), and a
script that fails comes back as failed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
from requirements import needs

from harness.tasks.code3d.arena import render_with

try:
    from harness.tasks.code3d.executor import BlenderPool, BpyUnavailable, RenderOptions, bpy_python

    bpy_python()
    HAVE_BPY = True
except (ImportError, BpyUnavailable):
    HAVE_BPY = False
pytestmark = needs(HAVE_BPY, "the Blender (bpy) venv", "tests/setup.d/50-bpy.sh builds it")

RED = """```python
import bpy
bpy.ops.mesh.primitive_cube_add(size=1)
m = bpy.data.materials.new("brand-red")
m.diffuse_color = (1, 0, 0, 1)
m.use_nodes = True
m.node_tree.nodes["Principled BSDF"].inputs["Base Color"].default_value = (1, 0, 0, 1)
bpy.context.object.data.materials.append(m)
bpy.ops.object.light_add(type="POINT", location=(0, 0, 3))
bpy.context.object.data.energy = 5000
```"""
PLAIN = "import bpy\nbpy.ops.mesh.primitive_cube_add(size=1)\n"
BROKEN = "import bpy\nbpy.ops.mesh.no_such_operator()\n"


@pytest.fixture(scope="module")
def render():  # type: ignore[no-untyped-def]
    pool = BlenderPool(size=1, render=RenderOptions(size=48, samples=2), exec_timeout_s=10, memory_mb=3072,
                       points=1024)
    yield render_with(pool)
    pool.close()


def _pixels(paths: list[str]) -> list[np.ndarray]:
    from PIL import Image

    return [np.asarray(Image.open(p)).astype(int) for p in paths]


def test_same_look_for_every_model_and_failures_show(render, tmp_path: Path) -> None:
    red = asyncio.run(render(RED, tmp_path / "red"))
    plain = asyncio.run(render(PLAIN, tmp_path / "plain"))
    assert red["status"] == plain["status"] == "OK" and len(red["renders"]) == 4
    for a, b in zip(_pixels(red["renders"]), _pixels(plain["renders"]), strict=True):
        assert np.array_equal(a, b)  # the red material and the extra light are gone
    broken = asyncio.run(render(BROKEN, tmp_path / "broken"))
    assert broken["status"] != "OK" and broken["renders"] == []
