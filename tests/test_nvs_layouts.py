"""Scene layout loaders on tiny generated scenes, with the camera conventions checked against the
reference loaders re-implemented literally from reading them:

- graphdeco-inria/gaussian-splatting @ 15d64e67814605c4d5b24a326aad29da74898acc, ``scene/dataset_readers.py``
  (``readCamerasFromTransforms``: ``c2w[:3, 1:3] *= -1`` from Blender/OpenGL to COLMAP/OpenCV axes, FovX =
  camera_angle_x, FovY = focal2fov(fov2focal(FovX, W), H); ``readColmapSceneInfo``: cameras sorted by image
  name, test views ``idx % llffhold == 0`` with llffhold 8) and ``utils/graphics_utils.py`` (``fov2focal``).
- colmap/colmap ``scripts/python/read_write_model.py`` (text and binary cameras/images formats, ``qvec2rotmat``),
  against which the binary files here are written with struct.
- dcharatan/pixelsplat @ 2331f53458b8efa3975ec3cf1c2e54a6c69b5c9c ``src/evaluation/evaluation_index_generator.py``
  (the index: ``{scene: {"context": [...], "target": [...]} | null}``).
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scipy.spatial.transform import Rotation

from harness.errors import UserError
from harness.tasks.nvs.layouts import (
    LayoutError,
    detect_layout,
    load_colmap,
    load_dl3dv,
    load_dl3dv_all,
    load_nerf_synthetic,
    load_scene,
)


def _png(path: Path, w: int, h: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.zeros((h, w, 3), dtype=np.uint8)).save(path)


def _look_at_gl(eye: np.ndarray) -> np.ndarray:
    """A Blender/OpenGL camera-to-world (camera looks down its -z) at ``eye`` looking at the origin."""
    back = eye / np.linalg.norm(eye)
    right = np.cross([0.0, 0.0, 1.0], back)
    right /= np.linalg.norm(right)
    up = np.cross(back, right)
    m = np.eye(4)
    m[:3, 0], m[:3, 1], m[:3, 2], m[:3, 3] = right, up, back, eye
    return m


# --- graphdeco's transforms reader, literally ------------------------------------------------------


def _fov2focal(fov: float, pixels: int) -> float:
    return pixels / (2 * math.tan(fov / 2))


def _focal2fov(focal: float, pixels: int) -> float:
    return 2 * math.atan(pixels / (2 * focal))


def _gd_from_transforms(frame: dict, fovx: float, w: int, h: int) -> tuple[np.ndarray, np.ndarray, float, float]:
    c2w = np.array(frame["transform_matrix"])
    c2w[:3, 1:3] *= -1
    w2c = np.linalg.inv(c2w)
    R = np.transpose(w2c[:3, :3])
    T = w2c[:3, 3]
    fovy = _focal2fov(_fov2focal(fovx, w), h)
    return R, T, fovx, fovy


@pytest.fixture()
def blender_scene(tmp_path: Path) -> tuple[Path, dict]:
    root = tmp_path / "lego"
    angle = 0.69
    metas = {}
    for split, n in (("train", 3), ("val", 1), ("test", 2)):
        frames = []
        for i in range(n):
            _png(root / split / f"r_{i}.png", 20, 16)
            eye = np.array([4.0 * math.cos(i + len(split)), 4.0 * math.sin(i + len(split)), 1.5])
            frames.append({"file_path": f"./{split}/r_{i}", "rotation": 0.1,
                           "transform_matrix": _look_at_gl(eye).tolist()})
        frames[0]["depth_file_path"] = f"{split}/r_0_depth.png"
        _png(root / split / "r_0_depth.png", 20, 16)
        metas[split] = {"camera_angle_x": angle, "frames": frames}
        (root / f"transforms_{split}.json").write_text(json.dumps(metas[split]))
    return root, metas


def test_nerf_synthetic_matches_graphdeco(blender_scene: tuple[Path, dict]) -> None:
    root, metas = blender_scene
    views = load_nerf_synthetic(root)
    assert len(views) == 6 and views.splits == ("train",) * 3 + ("val",) + ("test",) * 2
    assert views.split_names == ("train", "val", "test")
    test = views.subset("test")
    assert [p.name for p in test.image_paths] == ["r_0.png", "r_1.png"]
    assert test.depth_paths[0] == root / "test" / "r_0_depth.png" and test.depth_paths[1] is None
    for k, frame in enumerate(metas["test"]["frames"]):
        R, T, fovx, fovy = _gd_from_transforms(frame, metas["test"]["camera_angle_x"], 20, 16)
        w2c = np.linalg.inv(test.c2w[k])
        assert np.allclose(w2c[:3, :3].T, R) and np.allclose(w2c[:3, 3], T)
        K = test.intrinsics[k]
        assert K[0, 0] == pytest.approx(_fov2focal(fovx, 20)) and K[1, 1] == pytest.approx(_fov2focal(fovy, 16))
        assert (K[0, 2], K[1, 2]) == (10.0, 8.0) and test.sizes[k] == (20, 16)
        # the origin, which every camera looks at, projects to the image centre in front of the camera
        cam = w2c @ np.array([0.0, 0.0, 0.0, 1.0])
        assert cam[2] > 0
        assert np.allclose((K @ cam[:3])[:2] / cam[2], (10.0, 8.0))
    assert load_scene(root).layout == "nerf_synthetic" and detect_layout(root) == "nerf_synthetic"


def test_single_transforms_json_with_splits_and_ngp_intrinsics(tmp_path: Path) -> None:
    root = tmp_path / "scene"
    frames = []
    for i, split in enumerate(["train", "train", "test"]):
        _png(root / "images" / f"{i:03d}.png", 32, 24)  # stored at half the declared size
        frames.append({"file_path": f"images/{i:03d}.png", "split": split,
                       "transform_matrix": _look_at_gl(np.array([3.0, float(i), 1.0])).tolist()})
    (root / "transforms.json").write_text(json.dumps(
        {"fl_x": 50.0, "fl_y": 52.0, "cx": 31.0, "cy": 23.0, "w": 64, "h": 48, "frames": frames}))
    views = load_nerf_synthetic(root)
    assert views.splits == ("train", "train", "test")
    assert np.allclose(views.intrinsics[0], np.array([[25.0, 0, 15.5], [0, 26.0, 11.5], [0, 0, 1]]))


# --- COLMAP ----------------------------------------------------------------------------------------


def _colmap_scene(root: Path, binary: bool, n: int = 10) -> list[tuple[str, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(2)
    names = [f"IMG_{i:04d}.JPG" for i in rng.permutation(n)]  # written out of name order
    truth = []
    for name in names:
        _png(root / "images" / name, 40, 30)
        _png(root / "images_2" / name, 20, 15)
    cams_txt = "# Camera list\n1 PINHOLE 40 30 35.0 36.0 19.5 14.5\n2 SIMPLE_PINHOLE 40 30 33.0 20.0 15.0\n"
    lines = ["# Image list", "#   IMAGE_ID, QW, QX, QY, QZ, TX, TY, TZ, CAMERA_ID, NAME"]
    records = []
    for i, name in enumerate(names, 1):
        quat_xyzw = Rotation.random(random_state=i).as_quat()
        q = (float(quat_xyzw[3]), float(quat_xyzw[0]), float(quat_xyzw[1]), float(quat_xyzw[2]))
        t = [float(x) for x in rng.normal(size=3)]
        cam = 1 + i % 2
        lines.append(f"{i} {' '.join(map(repr, q))} {' '.join(map(repr, t))} {cam} {name}")
        lines.append("" if i % 3 else "10.5 11.5 -1 12.0 13.0 4")  # POINTS2D, often empty
        records.append((i, q, t, cam, name))
        w2c = np.eye(4)
        w2c[:3, :3] = Rotation.from_quat(quat_xyzw).as_matrix()
        w2c[:3, 3] = t
        truth.append((name, w2c, np.array([35.0, 36.0, 19.5, 14.5]) if cam == 1 else np.array([33, 33, 20, 15.0])))
    sparse = root / "sparse" / "0"
    sparse.mkdir(parents=True)
    if binary:
        cams = struct.pack("<Q", 2) + struct.pack("<iiQQ4d", 1, 1, 40, 30, 35.0, 36.0, 19.5, 14.5)
        cams += struct.pack("<iiQQ3d", 2, 0, 40, 30, 33.0, 20.0, 15.0)
        (sparse / "cameras.bin").write_bytes(cams)
        imgs = struct.pack("<Q", len(records))
        for i, q, t, cam, name in records:
            imgs += struct.pack("<i7di", i, *q, *t, cam) + name.encode() + b"\x00"
            n_pts = 0 if i % 3 else 2
            imgs += struct.pack("<Q", n_pts) + b"".join(struct.pack("<ddq", 1.0, 2.0, -1) for _ in range(n_pts))
        (sparse / "images.bin").write_bytes(imgs)
    else:
        (sparse / "cameras.txt").write_text(cams_txt)
        (sparse / "images.txt").write_text("\n".join(lines) + "\n")
    return sorted(truth, key=lambda r: r[0])


@pytest.mark.parametrize("binary", [False, True])
def test_colmap_poses_intrinsics_and_split(tmp_path: Path, binary: bool) -> None:
    truth = _colmap_scene(tmp_path / "garden", binary)
    views = load_colmap(tmp_path / "garden")
    assert [p.name for p in views.image_paths] == [t[0] for t in truth]  # name order, as graphdeco sorts
    assert views.splits == tuple("test" if i % 8 == 0 else "train" for i in range(10))
    for k, (_, w2c, (fx, fy, cx, cy)) in enumerate(truth):
        assert np.allclose(np.linalg.inv(views.c2w[k]), w2c, atol=1e-10)
        assert np.allclose(views.intrinsics[k], [[fx, 0, cx], [0, fy, cy], [0, 0, 1]])
    half = load_colmap(tmp_path / "garden", images="images_2", llffhold=0)
    assert set(half.splits) == {"train"} and half.sizes[0] == (20, 15)
    assert np.allclose(half.intrinsics[:, :2], views.intrinsics[:, :2] / 2)
    assert detect_layout(tmp_path / "garden") == "colmap"


def test_text_and_binary_models_agree(tmp_path: Path) -> None:
    _colmap_scene(tmp_path / "a", binary=False)
    _colmap_scene(tmp_path / "b", binary=True)
    a, b = load_colmap(tmp_path / "a"), load_colmap(tmp_path / "b")
    assert np.allclose(a.c2w, b.c2w, atol=1e-12) and np.allclose(a.intrinsics, b.intrinsics)


# --- DL3DV -----------------------------------------------------------------------------------------


def _dl3dv(root: Path, scene: str, n: int = 12) -> None:
    base = root / scene / "nerfstudio"
    frames = []
    for i in reversed(range(n)):  # nerfstudio files are not always in frame order
        _png(base / "images_4" / f"frame_{i + 1:05d}.png", 24, 16)
        frames.append({"file_path": f"images/frame_{i + 1:05d}.png",
                       "transform_matrix": _look_at_gl(np.array([5.0, 0.1 * i, 1.0])).tolist()})
    meta = {"w": 96, "h": 64, "fl_x": 80.0, "fl_y": 80.0, "cx": 48.0, "cy": 32.0, "k1": 0.01, "frames": frames}
    base.mkdir(parents=True, exist_ok=True)
    (base / "transforms.json").write_text(json.dumps(meta))


def test_dl3dv_index(tmp_path: Path) -> None:
    _dl3dv(tmp_path, "0a1b2c")
    _dl3dv(tmp_path, "ffee00")
    index = tmp_path / "evaluation_index_dl3dv.json"
    index.write_text(json.dumps({"0a1b2c": {"context": [2, 9], "target": [3, 5, 8]}, "ffee00": None,
                                 "absent": {"context": [0, 1], "target": [0]}}))
    views = load_dl3dv(tmp_path / "0a1b2c", index, images="images_4")
    assert views.scene == "0a1b2c" and views.splits == ("context",) * 2 + ("target",) * 3
    assert [p.name for p in views.image_paths] == [f"frame_{i + 1:05d}.png" for i in (2, 9, 3, 5, 8)]
    assert np.allclose(views.intrinsics[0], np.array([[20.0, 0, 12.0], [0, 20.0, 8.0], [0, 0, 1]]))
    assert np.allclose(views.c2w[0][:3, 3], [5.0, 0.2, 1.0])
    assert [s.scene for s in load_dl3dv_all(tmp_path, index, images="images_4")] == ["0a1b2c"]
    with pytest.raises(LayoutError, match="null"):
        load_dl3dv(tmp_path / "ffee00", index, images="images_4")
    index.write_text(json.dumps({"0a1b2c": {"context": [2, 40], "target": [3]}}))
    with pytest.raises(LayoutError, match="out of range"):
        load_dl3dv(tmp_path / "0a1b2c", index, images="images_4")


# --- errors ----------------------------------------------------------------------------------------


def _one_line(exc: pytest.ExceptionInfo[LayoutError]) -> None:
    assert isinstance(exc.value, UserError) and "\n" not in str(exc.value)


def test_absent_and_malformed_inputs(tmp_path: Path, blender_scene: tuple[Path, dict]) -> None:
    root, _ = blender_scene
    with pytest.raises(LayoutError, match="does not exist") as e:
        load_nerf_synthetic(tmp_path / "nowhere")
    _one_line(e)
    empty = tmp_path / "empty"
    empty.mkdir()
    for loader, fragment in ((load_nerf_synthetic, "no transforms"), (load_scene, "not a NeRF-synthetic"),
                             (lambda p: load_colmap(p, images="."), "no COLMAP model")):
        with pytest.raises(LayoutError, match=fragment) as e:
            loader(empty)
        _one_line(e)
    (root / "test" / "r_1.png").unlink()
    with pytest.raises(LayoutError, match="r_1 does not exist") as e:
        load_nerf_synthetic(root)
    _one_line(e)
    (root / "test" / "r_1.png").write_text("not a png")
    with pytest.raises(LayoutError, match="not a readable image") as e:
        load_nerf_synthetic(root)
    _one_line(e)
    (root / "transforms_val.json").write_text("{broken")
    with pytest.raises(LayoutError, match="not valid JSON") as e:
        load_nerf_synthetic(root)
    _one_line(e)
    (root / "transforms_val.json").write_text(json.dumps({"camera_angle_x": 0.7, "frames": [
        {"file_path": "./train/r_0", "transform_matrix": [[1, 0], [0, 1]]}]}))
    with pytest.raises(LayoutError, match="4x4") as e:
        load_nerf_synthetic(root, splits=("val",))
    _one_line(e)


def test_colmap_errors(tmp_path: Path) -> None:
    _colmap_scene(tmp_path / "s", binary=False)
    cams = tmp_path / "s" / "sparse" / "0" / "cameras.txt"
    cams.write_text("1 OPENCV 40 30 35 36 19.5 14.5 0.1 0 0 0\n2 SIMPLE_PINHOLE 40 30 33 20 15\n")
    with pytest.raises(LayoutError, match="undistort") as e:
        load_colmap(tmp_path / "s")
    _one_line(e)
    cams.write_text("1 PINHOLE forty 30 35 36 19.5 14.5\n")
    with pytest.raises(LayoutError, match="line 1") as e:
        load_colmap(tmp_path / "s")
    _one_line(e)
    _colmap_scene(tmp_path / "b", binary=True)
    images_bin = tmp_path / "b" / "sparse" / "0" / "images.bin"
    images_bin.write_bytes(images_bin.read_bytes()[:-30])
    with pytest.raises(LayoutError, match="truncated") as e:
        load_colmap(tmp_path / "b")
    _one_line(e)
    with pytest.raises(LayoutError, match="image folder"):
        load_colmap(tmp_path / "b", images="images_8")
    _colmap_scene(tmp_path / "ok", binary=True)
    with pytest.raises(LayoutError, match="no 'target' views"):
        load_colmap(tmp_path / "ok").subset("target")
