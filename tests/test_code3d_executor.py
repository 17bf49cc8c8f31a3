"""The Blender executor with real bpy: statuses, artifacts, parts, containment of hostile scripts."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from requirements import needs

from harness.sandbox import namespaces_available
from harness.tasks.code3d.executor import BlenderPool, BpyUnavailable, RenderOptions, bpy_python
from harness.tasks.code3d.geometry import shape_scores
from harness.tasks.code3d.taxonomy import classify_failure

REFS = Path(__file__).resolve().parents[1] / "tasks" / "code3d" / "references"
REPO = Path(__file__).resolve().parents[1]

try:
    bpy_python()
    HAVE_BPY = True
except BpyUnavailable:
    HAVE_BPY = False
pytestmark = needs(HAVE_BPY, "the Blender (bpy) venv", "tests/setup.d/50-bpy.sh builds it")
contained = needs(namespaces_available(), "user namespaces (root + unshare)", "the contained executor uses them")


@pytest.fixture(scope="module")
def pool() -> Iterator[BlenderPool]:
    with BlenderPool(size=1, render=RenderOptions(size=64, samples=2), exec_timeout_s=4, memory_mb=3072,
                     points=4096) as p:  # fmt: skip
        p.warm_up()
        yield p


def test_reference_table_renders_four_views_and_exports_five_parts(pool: BlenderPool, tmp_path: Path) -> None:
    result = pool.execute_sync((REFS / "table.py").read_text(), tmp_path)
    assert result.status == "OK", result.traceback or result.error
    assert result.n_meshes == 5
    assert [Path(p).name for p in result.renders] == [
        "Image_005.png",
        "Image_015.png",
        "Image_025.png",
        "Image_035.png",
    ]
    for png in result.renders:
        assert Path(png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert Path(png).parent == tmp_path
    assert Path(result.glb).read_bytes()[:4] == b"glTF"
    assert result.analysis["n_parts"] == 5
    assert result.analysis["n_floating"] == 0
    assert np.load(result.points).shape == (4096, 3)
    assert np.load(result.thumbs).shape == (4, 64, 64, 4)
    # the views show the object: some pixels are opaque, the corners are transparent background
    thumbs = np.load(result.thumbs)
    assert (thumbs[..., 3] > 127).mean() > 0.05 and thumbs[:, 0, 0, 3].max() == 0


def test_floating_shade_is_detected(pool: BlenderPool, tmp_path: Path) -> None:
    result = pool.execute_sync((REFS / "lamp.py").read_text(), tmp_path)
    assert result.status == "OK", result.traceback
    assert result.analysis["n_parts"] == 3
    assert result.analysis["n_floating"] == 1


def test_chamfer_of_mesh_against_itself_and_scaled_copy(pool: BlenderPool, tmp_path: Path) -> None:
    script = (REFS / "snowman.py").read_text()
    first = pool.execute_sync(script, tmp_path / "a")
    again = pool.execute_sync(script, tmp_path / "b")
    scaled = pool.execute_sync(script + "\nfor o in bpy.data.objects:\n    o.scale = [2.0 * s for s in o.scale]\n"
                               "    o.location = [2.0 * c for c in o.location]\n", tmp_path / "c")  # fmt: skip
    assert first.ok and again.ok and scaled.ok
    ref = np.load(first.points)
    assert shape_scores(ref, ref).chamfer == 0.0
    # two exports of the same mesh, sampled independently: only sampling noise (~1e-3 at 4096 points)
    self_cd = shape_scores(np.load(again.points), ref).chamfer
    assert self_cd < 2e-3
    # uniform scale x2: per-cloud normalisation removes it, so by hand the value is the same ~0
    scaled_cd = shape_scores(np.load(scaled.points), ref).chamfer
    assert scaled_cd < 2e-3
    extent = np.ptp(np.load(scaled.points), axis=0).max() / np.ptp(ref, axis=0).max()
    assert extent == pytest.approx(2.0, rel=0.02)
    table = pool.execute_sync((REFS / "table.py").read_text(), tmp_path / "d")
    assert shape_scores(np.load(table.points), ref).chamfer > 10 * max(self_cd, scaled_cd)


def test_api_error_is_err_exec_with_traceback(pool: BlenderPool, tmp_path: Path) -> None:
    result = pool.execute_sync("import bpy\nbpy.ops.mesh.primitive_cube_add(sizee=1)\n", tmp_path)
    assert result.status == "ERR_EXEC"
    assert "sizee" in result.traceback and "model_script.py" in result.traceback
    assert classify_failure(result.status, result.traceback, result.error) == "api_misuse"
    assert result.renders == [] and result.glb is None


def test_syntax_error(pool: BlenderPool, tmp_path: Path) -> None:
    result = pool.execute_sync("import bpy\ndef broken(:\n", tmp_path)
    assert result.status == "ERR_EXEC"
    assert classify_failure(result.status, result.traceback, result.error) == "syntax"


def test_no_mesh(pool: BlenderPool, tmp_path: Path) -> None:
    result = pool.execute_sync("import bpy\nbpy.ops.object.light_add(type='SUN')\n", tmp_path)
    assert result.status == "ERR_NO_MESH"


def test_infinite_loop_times_out_and_worker_stays_warm(pool: BlenderPool, tmp_path: Path) -> None:
    result = pool.execute_sync("import bpy\nwhile True:\n    pass\n", tmp_path / "loop")
    assert result.status == "ERR_TIMEOUT"
    assert 3.5 < result.seconds < 30
    after = pool.execute_sync("import bpy\nbpy.ops.mesh.primitive_cube_add()\n", tmp_path / "after")
    assert after.status == "OK"


def test_unbounded_allocation_is_contained(pool: BlenderPool, tmp_path: Path) -> None:
    code = "import bpy\nchunks = []\nwhile True:\n    chunks.append(bytes(500_000_000))\n"
    result = pool.execute_sync(code, tmp_path)
    assert result.status == "ERR_EXEC"
    assert classify_failure(result.status, result.traceback, result.error) == "memory"


@contained
def test_socket_is_blocked(pool: BlenderPool, tmp_path: Path) -> None:
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    code = f"import bpy, socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
    code += "bpy.ops.mesh.primitive_cube_add()\n"
    result = pool.execute_sync(code, tmp_path)
    server.close()
    assert result.status == "ERR_EXEC"
    assert "OSError" in result.traceback or "unreachable" in result.traceback


@contained
def test_write_outside_work_dir_fails_and_nothing_escapes(pool: BlenderPool, tmp_path: Path) -> None:
    targets = [Path(f"/tmp/escape-{uuid.uuid4()}"), REPO / f"escape-{uuid.uuid4()}"]
    code = "import bpy\n" + "".join(f"open({str(t)!r}, 'w').write('x')\n" for t in targets[:1])
    code += "bpy.ops.mesh.primitive_cube_add()\n"
    result = pool.execute_sync(code, tmp_path / "a")
    assert result.status == "ERR_EXEC"
    assert "Read-only file system" in result.traceback or "Permission denied" in result.traceback
    code2 = (
        f"import bpy\nbpy.ops.mesh.primitive_cube_add()\nbpy.ops.wm.save_as_mainfile(filepath={str(targets[1])!r})\n"
    )
    result2 = pool.execute_sync(code2, tmp_path / "b")
    assert result2.status == "ERR_EXEC"
    assert not any(t.exists() for t in targets)


def test_left_behind_processes_are_killed(pool: BlenderPool, tmp_path: Path) -> None:
    code = "import bpy, subprocess\nsubprocess.Popen(['sleep', '300'])\nbpy.ops.mesh.primitive_cube_add()\n"
    result = pool.execute_sync(code, tmp_path)
    assert result.status == "OK"
    import os

    sleepers = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            continue
        if cmd[:2] == [b"sleep", b"300"] and 200_000 <= uid <= 299_999:
            sleepers.append(pid)
    assert sleepers == [] or not namespaces_available()


@contained
def test_script_cannot_tamper_with_the_worker(pool: BlenderPool, tmp_path: Path) -> None:
    # the zygote (pid 1 of the sandbox) is not dumpable: its memory is closed to the script's uid
    code = "import bpy\nopen('/proc/1/mem', 'rb').read(1)\nbpy.ops.mesh.primitive_cube_add()\n"
    result = pool.execute_sync(code, tmp_path / "mem")
    assert result.status == "ERR_EXEC"
    assert "PermissionError" in result.traceback
    # planted outputs are replaced by the clean analysis, never trusted
    planted = "import bpy, numpy as np\nbpy.ops.mesh.primitive_cube_add()\nnp.save('points.npy', np.zeros((5, 3)))\n"
    result = pool.execute_sync(planted, tmp_path / "plant")
    assert result.status == "OK"
    assert np.load(result.points).shape == (4096, 3)
