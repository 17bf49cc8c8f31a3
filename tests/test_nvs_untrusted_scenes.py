"""nvs_folder scenes from someone else: every field is checked before it is used, one line naming the
file and the field (exit 2 through the CLI), never a traceback, a hang or a decoded 14 GB image.

The cases are the ones a hostile or broken scene folder holds: ``"w": "wide"``, ``camera_angle_x: 0``,
``fl_x: 1e400`` (JSON reads it as infinity), a PNG whose header says 30000x30000, a COLMAP camera of
width 0, a zero quaternion, a DL3DV index with ``context: [1e400]`` or a string, and a million target
views.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from harness.errors import UserError
from harness.tasks.nvs.layouts import (
    MAX_PIXELS,
    MAX_VIEWS,
    LayoutError,
    load_colmap,
    load_dl3dv,
    load_nerf_synthetic,
)
from harness.tasks.nvs.scenes import SceneError, read_rgb

POSE = np.eye(4).tolist()


def _png(path: Path, w: int = 8, h: int = 6) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.zeros((h, w, 3), dtype=np.uint8)).save(path)
    return path


def _png_header(path: Path, w: int, h: int) -> Path:
    """A PNG of a few dozen bytes whose header declares w x h pixels (no pixel data follows)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                     + chunk(b"IEND", b""))
    return path


def _nerf(root: Path, meta: dict[str, Any] | str, frames: int = 1) -> Path:
    """transforms_train.json and transforms_test.json; ``meta`` as a dict, or raw JSON text for the keys."""
    _png(root / "r_0.png")
    body = [{"file_path": "r_0.png", "transform_matrix": POSE}] * frames
    for split in ("train", "test"):
        if isinstance(meta, str):  # raw JSON: numbers json.dumps cannot write (1e400)
            text = "{" + meta + ', "frames": ' + json.dumps(body) + "}"
        else:
            text = json.dumps({**meta, "frames": body})
        (root / f"transforms_{split}.json").write_text(text)
    return root


def _refused(fragments: tuple[str, ...], load: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(LayoutError) as err:
        load(*args, **kwargs)
    message = str(err.value)
    assert isinstance(err.value, UserError) and "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    return message


@pytest.mark.parametrize("meta, fragments", [
    ({"camera_angle_x": 0.7, "w": "wide"}, ("transforms_train.json frame 0", "field 'w'", "'wide'")),
    ({"camera_angle_x": 0.7, "h": 0}, ("field 'h' must be a positive finite number",)),
    ({"camera_angle_x": 0}, ("field 'camera_angle_x'", "between 0 and pi")),
    ({"camera_angle_x": 4.0}, ("field 'camera_angle_x'",)),
    ({"camera_angle_x": "0.7"}, ("field 'camera_angle_x' must be a finite number",)),
    ('"fl_x": 1e400', ("field 'fl_x' must be a positive finite number", "inf")),
    ('"fl_x": 50, "cx": -1e400', ("field 'cx' must be a finite number",)),
    ('"fl_x": 1e308, "w": 1e-300', ("camera intrinsics", "must be finite")),
    ({"fl_x": True}, ("field 'fl_x'",)),
    ({"fl_x": -5}, ("field 'fl_x' must be a positive",)),
])
def test_nerf_intrinsics_are_checked_field_by_field(tmp_path: Path, meta: Any, fragments: tuple[str, ...]) -> None:
    _refused(fragments, load_nerf_synthetic, _nerf(tmp_path / "s", meta))


def test_a_valid_scene_still_loads(tmp_path: Path) -> None:
    views = load_nerf_synthetic(_nerf(tmp_path / "s", {"fl_x": 10.0, "w": 16, "h": 12}))
    assert np.allclose(views.intrinsics[0][:2, :2], [[5.0, 0.0], [0.0, 5.0]]) and views.sizes[0] == (8, 6)


def test_images_are_measured_before_they_are_decoded(tmp_path: Path) -> None:
    root = _nerf(tmp_path / "s", {"camera_angle_x": 0.7})
    for w, h, fragment in ((30000, 30000, "image is too large"), (9000, 9000, "image is 9000x9000 pixels")):
        _png_header(root / "r_0.png", w, h)
        _refused(("r_0.png", fragment), load_nerf_synthetic, root)
        with pytest.raises(SceneError, match="r_0.png: image") as err:  # readers refuse it before decoding too
            read_rgb(root / "r_0.png")
        assert "\n" not in str(err.value)
    assert MAX_PIXELS < 9000 * 9000


def test_a_scene_with_more_views_than_the_cap_is_one_line(tmp_path: Path) -> None:
    _refused((f"{MAX_VIEWS + 1} views", str(MAX_VIEWS)), load_nerf_synthetic,
             _nerf(tmp_path / "s", {"camera_angle_x": 0.7}, frames=MAX_VIEWS + 1), splits=("train",))


# --- COLMAP ---------------------------------------------------------------------------------------------


def _colmap(root: Path, camera: str, image: str) -> Path:
    _png(root / "images" / "a.png")
    sparse = root / "sparse" / "0"
    sparse.mkdir(parents=True)
    (sparse / "cameras.txt").write_text(camera + "\n")
    (sparse / "images.txt").write_text(image + "\n\n")
    return root


@pytest.mark.parametrize("camera, image, fragments", [
    ("1 PINHOLE 0 6 5 5 4 3", "1 1 0 0 0 0 0 0 1 a.png", ("cameras.txt line 1", "WIDTH must be from 1 to", "got 0")),
    ("1 PINHOLE 8 6 nan 5 4 3", "1 1 0 0 0 0 0 0 1 a.png", ("cameras.txt line 1", "PARAMS[0]", "nan")),
    ("1 PINHOLE 8 6 -5 5 4 3", "1 1 0 0 0 0 0 0 1 a.png", ("focal lengths", "positive")),
    ("1 PINHOLE 8 6 5 5 4 3", "1 0 0 0 0 0 0 0 1 a.png", ("images.txt line 1", "quaternion", "zero")),
    ("1 PINHOLE 8 6 5 5 4 3", "1 1 0 0 0 inf 0 0 1 a.png", ("images.txt line 1", "field 'TX'")),
])
def test_colmap_text_fields_are_checked(tmp_path: Path, camera: str, image: str, fragments: tuple[str, ...]) -> None:
    _refused(fragments, load_colmap, _colmap(tmp_path / "s", camera, image))


def test_colmap_binary_fields_and_counts_are_checked(tmp_path: Path) -> None:
    root = _colmap(tmp_path / "s", "", "")
    sparse = root / "sparse" / "0"
    for name in ("cameras.txt", "images.txt"):
        (sparse / name).unlink()
    image = (struct.pack("<Q", 1) + struct.pack("<i7di", 1, 1.0, 0, 0, 0, 0, 0, 0, 1) + b"a.png\x00"
             + struct.pack("<Q", 0))
    (sparse / "images.bin").write_bytes(image)
    (sparse / "cameras.bin").write_bytes(struct.pack("<Q", 1) + struct.pack("<iiQQ4d", 1, 1, 0, 6, 5, 5, 4, 3))
    _refused(("cameras.bin camera 1", "WIDTH"), load_colmap, root)
    (sparse / "cameras.bin").write_bytes(struct.pack("<Q", 1) + struct.pack("<iiQQ4d", 1, 1, 8, 6, 5, 5, 4, 3))
    assert load_colmap(root).sizes == ((8, 6),)
    (sparse / "images.bin").write_bytes(image.replace(struct.pack("<d", 1.0), struct.pack("<d", 0.0), 1))
    _refused(("images.bin image 1", "quaternion"), load_colmap, root)
    (sparse / "images.bin").write_bytes(struct.pack("<Q", 2**63))  # a count no file can hold
    _refused(("images.bin", "views; a scene may have at most"), load_colmap, root)


# --- DL3DV ----------------------------------------------------------------------------------------------


def _dl3dv(root: Path, index: str) -> tuple[Path, Path]:
    scene = root / "scene"
    _png(scene / "images" / "frame_00001.png")
    (scene / "transforms.json").write_text(json.dumps(
        {"fl_x": 10.0, "w": 8, "h": 6, "frames": [{"file_path": "images/frame_00001.png", "transform_matrix": POSE}]}))
    path = root / "index.json"
    path.write_text('{"scene": ' + index + "}")
    return scene, path


@pytest.mark.parametrize("entry, fragments", [
    ('{"context": [1e400], "target": [0]}', ("field 'context' holds inf, not a frame number",)),
    ('{"context": [0.5], "target": [0]}', ("field 'context' holds 0.5",)),
    ('{"context": [true], "target": [0]}', ("field 'context' holds True",)),
    ('{"context": "12", "target": [0]}', ("field 'context' must be a list", "'12'")),
    ('{"context": [0]}', ("field 'target' must be a list", "None")),
    ('[0, 1]', ("needs integer 'context' and 'target' lists",)),
])
def test_dl3dv_index_entries_are_checked(tmp_path: Path, entry: str, fragments: tuple[str, ...]) -> None:
    scene, index = _dl3dv(tmp_path, entry)
    _refused(("index.json", "scene 'scene'", *fragments), load_dl3dv, scene, index)


def test_a_million_target_views_is_refused_at_once(tmp_path: Path) -> None:
    scene, index = _dl3dv(tmp_path, '{"context": [0], "target": [' + ", ".join(["0"] * 10**6) + "]}")
    _refused(("index.json", "field 'target'", "1000000 views"), load_dl3dv, scene, index)
    _, index = _dl3dv(tmp_path / "ok", '{"context": [0], "target": [0, 0, 0]}')
    assert load_dl3dv(scene, index).splits == ("context", "target", "target", "target")


# --- through the CLI ------------------------------------------------------------------------------------


def test_the_cli_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    root = _nerf(tmp_path / "s", {"camera_angle_x": 0.7, "w": "wide"})
    env = {**os.environ, "COLUMNS": "200", "HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-m", "harness.cli", "eval", "-t", "nvs_folder", "-T", f"path={root}",
                        "-m", "builtin:constant", "--db", f"sqlite:///{tmp_path / 'h.db'}"],
                       capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "transforms_train.json" in lines[0]
    assert "field 'w'" in lines[0]
