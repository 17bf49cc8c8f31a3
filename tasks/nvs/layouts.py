"""Camera and image loaders for the scene layouts novel-view-synthesis users have on disk.

Every loader returns a ``SceneViews``: per view the image path, a 4x4 camera-to-world pose in the OpenCV
camera convention (x right, y down, z forward; Blender/NeRF ``transform_matrix`` poses are converted by
negating their y and z axes), 3x3 pixel intrinsics for the image file as stored, its size and a split
label. Problems with the folder (absent, malformed JSON or COLMAP files, a missing or non-image file, an
index out of range) raise ``LayoutError``: one line naming the file and the field. Every field is checked
before it is used: numbers must be numbers, finite, and positive where a size or focal length is meant;
images are measured from their header and refused above ``MAX_PIXELS`` before anything decodes them; a
scene has at most ``MAX_VIEWS`` views.

- NeRF-synthetic / Blender: ``transforms_{train,val,test}.json`` (``camera_angle_x``, ``frames[].file_path``
  with or without extension, ``frames[].transform_matrix``), or one ``transforms.json`` whose frames carry
  a ``split`` key; instant-ngp style ``fl_x``/``fl_y``/``cx``/``cy``/``w``/``h`` are read when present and an
  optional ``frames[].depth_file_path`` names the view's depth map.
- Mip-NeRF 360 / COLMAP: ``sparse/0/{cameras,images}.{txt,bin}`` with an ``images`` folder (or a
  downscaled ``images_N``: intrinsics follow the stored size); the split holds out every ``llffhold``-th
  image in name order (8, as 3DGS and Mip-NeRF 360 do). Only undistorted PINHOLE / SIMPLE_PINHOLE
  cameras are accepted, as in 3DGS.
- DL3DV: a nerfstudio ``transforms.json`` (in the scene folder or its ``nerfstudio/``) plus a
  pixelSplat-style evaluation index ``{scene: {"context": [...], "target": [...]}}`` whose numbers index
  the frames sorted by file name; splits are ``context`` and ``target``. Lens distortion is ignored,
  as the feed-forward evaluations that use this index do.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import UserError

__all__ = ["MAX_PIXELS", "MAX_VIEWS", "LayoutError", "SceneViews", "check_image_size", "detect_layout",
           "load_colmap", "load_dl3dv", "load_dl3dv_all", "load_nerf_synthetic", "load_scene"]

_OPENGL_TO_OPENCV = np.diag([1.0, -1.0, -1.0, 1.0])
# Views per scene: real captures have tens to a few thousand; the cap keeps a crafted index or model
# (a million target views) a one-line error instead of hours of header reads.
MAX_VIEWS = 10_000
# Pixels per image, read from the header before any decode (8192 x 8192; full-resolution Mip-NeRF 360
# and Zip-NeRF photos are 16-20 million): decoding one image takes 16 bytes a pixel as float RGBA.
MAX_PIXELS = 8192 * 8192


class LayoutError(UserError):
    """A scene folder or file is absent or malformed."""


@dataclass(frozen=True, eq=False)
class SceneViews:
    """The views of one scene; arrays are indexed like ``image_paths``."""

    scene: str
    root: Path
    layout: str
    image_paths: tuple[Path, ...]
    c2w: np.ndarray  # (N, 4, 4) float64, OpenCV camera axes
    intrinsics: np.ndarray  # (N, 3, 3) float64, pixels of the stored image
    sizes: tuple[tuple[int, int], ...]  # (width, height) per view
    splits: tuple[str, ...]
    depth_paths: tuple[Path | None, ...]

    def __len__(self) -> int:
        return len(self.image_paths)

    @property
    def split_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.splits))

    def subset(self, split: str) -> SceneViews:
        """The views labelled ``split`` (in order); LayoutError when there are none."""
        idx = [i for i, s in enumerate(self.splits) if s == split]
        if not idx:
            raise LayoutError(f"scene {self.scene!r} has no {split!r} views (it has: {', '.join(self.split_names)})")
        return SceneViews(self.scene, self.root, self.layout, tuple(self.image_paths[i] for i in idx),
                          self.c2w[idx], self.intrinsics[idx], tuple(self.sizes[i] for i in idx),
                          tuple(self.splits[i] for i in idx), tuple(self.depth_paths[i] for i in idx))


# --- shared helpers ---------------------------------------------------------------------------------


def _dir(path: str | Path, what: str) -> Path:
    folder = Path(path)
    if not folder.is_dir():
        raise LayoutError(f"{what} folder {folder} does not exist")
    return folder


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise LayoutError(f"{path} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LayoutError(f"{path} is not valid JSON: {str(exc).splitlines()[0]}") from None


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _number(value: Any, where: str, field: str, *, positive: bool = False) -> float:
    """A JSON / COLMAP number, checked: a number (not a string or bool), finite, > 0 if ``positive``."""
    kind = "a positive finite number" if positive else "a finite number"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise LayoutError(f"{where}: field {field!r} must be {kind}, got {_show(value)}")
    try:
        out = float(value)
    except OverflowError:  # an integer beyond float range
        out = math.inf
    if not math.isfinite(out) or (positive and out <= 0):
        raise LayoutError(f"{where}: field {field!r} must be {kind}, got {_show(value)}")
    return out


def check_image_size(path: Path, width: int, height: int) -> None:
    """Refuse an image whose header declares no pixels or more than MAX_PIXELS (before decoding it)."""
    if width <= 0 or height <= 0 or width * height > MAX_PIXELS:
        raise LayoutError(f"{path}: image is {width}x{height} pixels; images must have between 1 and "
                          f"{MAX_PIXELS} pixels")


def _image_size(path: Path) -> tuple[int, int]:
    from PIL import Image, UnidentifiedImageError

    if not path.is_file():
        raise LayoutError(f"image {path} does not exist")
    try:
        with Image.open(path) as im:  # reads the header only
            size = int(im.size[0]), int(im.size[1])
    except Image.DecompressionBombError as exc:  # PIL's own ceiling, far above ours
        raise LayoutError(f"{path}: image is too large ({exc}); at most {MAX_PIXELS} pixels") from None
    except (UnidentifiedImageError, OSError) as exc:
        raise LayoutError(f"{path} is not a readable image ({type(exc).__name__})") from None
    check_image_size(path, *size)
    return size


def _intrinsics(fx: float, fy: float, cx: float, cy: float) -> np.ndarray:
    return np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])


def _matrix(value: Any, where: str) -> np.ndarray:
    try:
        m = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise LayoutError(f"{where}: transform_matrix is not numeric") from None
    if m.shape == (3, 4):
        m = np.vstack([m, [0.0, 0.0, 0.0, 1.0]])
    if m.shape != (4, 4) or not np.isfinite(m).all():
        raise LayoutError(f"{where}: transform_matrix must be a finite 4x4 (or 3x4) matrix, got shape {m.shape}")
    return m


def _resolve_frame_image(root: Path, file_path: str, where: str) -> Path:
    if not isinstance(file_path, str) or not file_path:
        raise LayoutError(f"{where}: frame has no file_path")
    path = root / file_path
    if path.is_file():
        return path
    # NeRF-synthetic's file_path omits the extension ("./train/r_0")
    for ext in (".png", ".jpg", ".jpeg", ".JPG", ".PNG"):
        candidate = path.with_name(path.name + ext)
        if candidate.is_file():
            return candidate
    raise LayoutError(f"{where}: image {path} does not exist")


def _frame_camera(meta: dict[str, Any], frame: dict[str, Any], size: tuple[int, int], where: str) -> np.ndarray:
    """Pixel intrinsics from instant-ngp keys (frame first, then file) or camera_angle_x/_y."""

    def key(name: str, positive: bool = False) -> float | None:
        value = frame.get(name, meta.get(name))
        return None if value is None else _number(value, where, name, positive=positive)

    def angle(name: str) -> float | None:
        value = key(name)
        if value is not None and not 0 < value < math.pi:
            raise LayoutError(f"{where}: field {name!r} must be a field of view in radians between 0 and pi, "
                              f"got {_show(value)}")
        return value

    w, h = size
    # declared sizes (w, h) rescale the declared focal lengths to the stored image
    declared_w, declared_h = key("w", positive=True), key("h", positive=True)
    sx = w / declared_w if declared_w else 1.0
    sy = h / declared_h if declared_h else 1.0
    fl_x, fl_y = key("fl_x", positive=True), key("fl_y", positive=True)
    angle_x, angle_y = angle("camera_angle_x"), angle("camera_angle_y")
    if fl_x is not None:
        fx, fy = fl_x * sx, (fl_y if fl_y is not None else fl_x) * sy
    elif angle_x is not None:
        fx = 0.5 * w / math.tan(0.5 * angle_x)
        fy = 0.5 * h / math.tan(0.5 * angle_y) if angle_y is not None else fx
    else:
        raise LayoutError(f"{where}: no camera_angle_x or fl_x to give the focal length")
    cx, cy = key("cx"), key("cy")
    cx = cx * sx if cx is not None else w / 2
    cy = cy * sy if cy is not None else h / 2
    # finite inputs can still overflow once scaled (fl_x 1e308 on a downscaled folder)
    if not all(math.isfinite(v) for v in (fx, fy, cx, cy)) or not (fx > 0 and fy > 0):
        raise LayoutError(f"{where}: camera intrinsics (fx {fx:g}, fy {fy:g}, cx {cx:g}, cy {cy:g}) must be finite, "
                          "with positive focal lengths")
    return _intrinsics(fx, fy, cx, cy)


def _frames_of(meta: Any, where: str) -> list[dict[str, Any]]:
    frames = meta.get("frames") if isinstance(meta, dict) else None
    if not isinstance(frames, list) or not frames or not all(isinstance(f, dict) for f in frames):
        raise LayoutError(f"{where}: expected a non-empty 'frames' list")
    return frames


# --- NeRF-synthetic / Blender -----------------------------------------------------------------------


def load_nerf_synthetic(scene_dir: str | Path, splits: Sequence[str] = ("train", "val", "test")) -> SceneViews:
    """A Blender / NeRF-synthetic scene (see the module docstring)."""
    root = _dir(scene_dir, "scene")
    entries: list[tuple[str, dict[str, Any], dict[str, Any], Path]] = []  # split, meta, frame, json file
    per_split = [root / f"transforms_{s}.json" for s in splits]
    if any(p.is_file() for p in per_split):
        for split, path in zip(splits, per_split, strict=True):
            if path.is_file():
                meta = _read_json(path)
                entries += [(split, meta, f, path) for f in _frames_of(meta, str(path))]
    elif (root / "transforms.json").is_file():
        path = root / "transforms.json"
        meta = _read_json(path)
        for frame in _frames_of(meta, str(path)):
            split = str(frame.get("split", "train"))
            if split in splits:
                entries.append((split, meta, frame, path))
    else:
        raise LayoutError(f"{root} has no transforms_{{train,val,test}}.json or transforms.json")
    if not entries:
        raise LayoutError(f"{root}: no frames in the splits {', '.join(splits)}")
    return _from_frames(root, "nerf_synthetic", entries)


def _check_views(count: int, where: str) -> None:
    if count > MAX_VIEWS:
        raise LayoutError(f"{where}: {count} views; a scene may have at most {MAX_VIEWS}")


def _from_frames(root: Path, layout: str, entries: list[tuple[str, dict[str, Any], dict[str, Any], Path]],
                 image_dir: str | None = None) -> SceneViews:
    _check_views(len(entries), str(entries[0][3]) if entries else str(root))
    paths, poses, ks, sizes, labels, depths = [], [], [], [], [], []
    measured: dict[Path, tuple[int, int]] = {}  # an index may name one frame many times: read its header once
    for i, (split, meta, frame, source) in enumerate(entries):
        where = f"{source} frame {i}"
        file_path = frame.get("file_path")
        if image_dir is not None and isinstance(file_path, str):
            file_path = f"{image_dir}/{Path(file_path).name}"
        image = _resolve_frame_image(root, file_path, where)  # type: ignore[arg-type]
        size = measured[image] if image in measured else measured.setdefault(image, _image_size(image))
        depth = frame.get("depth_file_path")
        depth_path = None
        if depth is not None:
            if not isinstance(depth, str) or not depth:
                raise LayoutError(f"{where}: field 'depth_file_path' must be a file name, got {_show(depth)}")
            depth_path = root / depth
            if not depth_path.is_file():
                raise LayoutError(f"{where}: depth map {depth_path} does not exist")
        paths.append(image)
        poses.append(_matrix(frame.get("transform_matrix"), where) @ _OPENGL_TO_OPENCV)
        ks.append(_frame_camera(meta, frame, size, where))
        sizes.append(size)
        labels.append(split)
        depths.append(depth_path)
    return SceneViews(root.name, root, layout, tuple(paths), np.stack(poses), np.stack(ks), tuple(sizes),
                      tuple(labels), tuple(depths))


# --- COLMAP / Mip-NeRF 360 --------------------------------------------------------------------------

# COLMAP camera model ids -> (name, number of parameters), from COLMAP's camera model list.
_COLMAP_MODELS = {0: ("SIMPLE_PINHOLE", 3), 1: ("PINHOLE", 4), 2: ("SIMPLE_RADIAL", 4), 3: ("RADIAL", 5),
                  4: ("OPENCV", 8), 5: ("OPENCV_FISHEYE", 8), 6: ("FULL_OPENCV", 12), 7: ("FOV", 5),
                  8: ("SIMPLE_RADIAL_FISHEYE", 4), 9: ("RADIAL_FISHEYE", 5), 10: ("THIN_PRISM_FISHEYE", 12)}


@dataclass(frozen=True)
class _Camera:
    model: str
    width: int
    height: int
    params: tuple[float, ...]


@dataclass(frozen=True)
class _Image:
    qvec: tuple[float, float, float, float]  # w, x, y, z (world-to-camera rotation)
    tvec: tuple[float, float, float]
    camera_id: int
    name: str


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise LayoutError(f"{path} is not a readable text file ({type(exc).__name__})") from None


def _check_camera(cam: _Camera, where: str) -> _Camera:
    for field, pixels in (("WIDTH", cam.width), ("HEIGHT", cam.height)):
        if not 0 < pixels <= 1 << 20:
            raise LayoutError(f"{where}: camera {field} must be from 1 to {1 << 20} pixels, got {pixels}")
    for k, param in enumerate(cam.params):
        _number(param, where, f"PARAMS[{k}]")
    return cam


def _check_image(image: _Image, where: str) -> _Image:
    for k, value in enumerate(image.qvec):
        _number(value, where, f"Q{'WXYZ'[k]}")
    for k, value in enumerate(image.tvec):
        _number(value, where, f"T{'XYZ'[k]}")
    if math.hypot(*image.qvec) < 1e-9:  # no rotation: normalising it would divide by zero
        raise LayoutError(f"{where}: the rotation quaternion QW QX QY QZ is zero")
    return image


def _read_cameras_txt(path: Path) -> dict[int, _Camera]:
    cams = {}
    for n, line in enumerate(_text(path).splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        try:
            cam = _Camera(parts[1], int(parts[2]), int(parts[3]), tuple(float(x) for x in parts[4:]))
            cam_id = int(parts[0])
        except (IndexError, ValueError):
            raise LayoutError(f"{path} line {n}: expected CAMERA_ID MODEL WIDTH HEIGHT PARAMS...") from None
        cams[cam_id] = _check_camera(cam, f"{path} line {n}")
        _check_views(len(cams), str(path))
    return cams


def _read_images_txt(path: Path) -> dict[int, _Image]:
    images = {}
    lines = iter(enumerate(_text(path).splitlines(), 1))
    for n, line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        try:
            q = (float(parts[1]), float(parts[2]), float(parts[3]), float(parts[4]))
            t = (float(parts[5]), float(parts[6]), float(parts[7]))
            image = _Image(q, t, int(parts[8]), " ".join(parts[9:]))
            image_id = int(parts[0])
            if not image.name:
                raise ValueError
        except (IndexError, ValueError):
            raise LayoutError(f"{path} line {n}: expected IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME") from None
        images[image_id] = _check_image(image, f"{path} line {n}")
        _check_views(len(images), str(path))
        next(lines, None)  # the POINTS2D line that follows each image line (possibly empty)
    return images


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path, self.data, self.pos = path, path.read_bytes(), 0

    def take(self, fmt: str) -> tuple[Any, ...]:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise LayoutError(f"{self.path} is truncated or not a COLMAP binary model")
        out = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return out

    def skip(self, size: int) -> None:
        if self.pos + size > len(self.data):
            raise LayoutError(f"{self.path} is truncated or not a COLMAP binary model")
        self.pos += size

    def name(self) -> str:
        end = self.data.find(b"\x00", self.pos)
        if end < 0:
            raise LayoutError(f"{self.path} is truncated or not a COLMAP binary model")
        raw, self.pos = self.data[self.pos:end], end + 1
        return raw.decode("utf-8", errors="replace")


def _read_cameras_bin(path: Path) -> dict[int, _Camera]:
    r, cams = _Reader(path), {}
    count = r.take("<Q")[0]
    _check_views(count, str(path))
    for _ in range(count):
        cam_id, model_id, width, height = r.take("<iiQQ")
        if model_id not in _COLMAP_MODELS:
            raise LayoutError(f"{path}: unknown COLMAP camera model id {model_id}")
        name, n_params = _COLMAP_MODELS[model_id]
        cams[cam_id] = _check_camera(_Camera(name, width, height, r.take(f"<{n_params}d")), f"{path} camera {cam_id}")
    return cams


def _read_images_bin(path: Path) -> dict[int, _Image]:
    r, images = _Reader(path), {}
    count = r.take("<Q")[0]
    _check_views(count, str(path))
    for _ in range(count):
        image_id, qw, qx, qy, qz, tx, ty, tz, cam_id = r.take("<i7di")
        name = r.name()
        n_points = r.take("<Q")[0]
        r.skip(24 * n_points)  # x, y, point3D_id per observation: not needed for cameras
        images[image_id] = _check_image(_Image((qw, qx, qy, qz), (tx, ty, tz), cam_id, name),
                                        f"{path} image {image_id}")
    return images


def _qvec_to_rotation(q: tuple[float, float, float, float]) -> np.ndarray:
    w, x, y, z = np.asarray(q, dtype=np.float64) / np.linalg.norm(q)
    return np.array([
        [1 - 2 * y * y - 2 * z * z, 2 * x * y - 2 * w * z, 2 * z * x + 2 * w * y],
        [2 * x * y + 2 * w * z, 1 - 2 * x * x - 2 * z * z, 2 * y * z - 2 * w * x],
        [2 * z * x - 2 * w * y, 2 * y * z + 2 * w * x, 1 - 2 * x * x - 2 * y * y],
    ])


def _colmap_model(root: Path) -> tuple[dict[int, _Camera], dict[int, _Image]]:
    for sparse in (root / "sparse" / "0", root / "sparse"):
        if (sparse / "cameras.txt").is_file() and (sparse / "images.txt").is_file():
            return _read_cameras_txt(sparse / "cameras.txt"), _read_images_txt(sparse / "images.txt")
        if (sparse / "cameras.bin").is_file() and (sparse / "images.bin").is_file():
            return _read_cameras_bin(sparse / "cameras.bin"), _read_images_bin(sparse / "images.bin")
    raise LayoutError(f"{root} has no COLMAP model (sparse/0/cameras.txt + images.txt, or the .bin pair)")


def load_colmap(scene_dir: str | Path, images: str = "images", llffhold: int = 8) -> SceneViews:
    """A Mip-NeRF 360 / COLMAP scene; ``images`` names the image folder (``images_4`` for 1/4 size);
    ``llffhold`` = 0 puts every view in ``train``."""
    root = _dir(scene_dir, "scene")
    image_dir = _dir(root / images, "image")
    cams, imgs = _colmap_model(root)
    if not imgs:
        raise LayoutError(f"{root}: the COLMAP model has no images")
    paths, poses, ks, sizes, labels = [], [], [], [], []
    for i, im in enumerate(sorted(imgs.values(), key=lambda v: v.name)):
        cam = cams.get(im.camera_id)
        if cam is None:
            raise LayoutError(f"{root}: image {im.name} refers to camera {im.camera_id}, absent from the model")
        if cam.model == "SIMPLE_PINHOLE" and len(cam.params) >= 3:
            fx = fy = cam.params[0]
            cx, cy = cam.params[1], cam.params[2]
        elif cam.model == "PINHOLE" and len(cam.params) >= 4:
            fx, fy, cx, cy = cam.params[:4]
        else:
            raise LayoutError(f"{root}: camera model {cam.model} is distorted; undistort the images first "
                              "(colmap image_undistorter) so cameras are PINHOLE or SIMPLE_PINHOLE")
        if not (fx > 0 and fy > 0):
            raise LayoutError(f"{root}: camera {im.camera_id} has focal lengths {fx:g}, {fy:g}; they must be positive")
        path = image_dir / im.name
        w, h = _image_size(path)
        sx, sy = w / cam.width, h / cam.height  # a downscaled images_N folder scales the intrinsics
        w2c = np.eye(4)
        w2c[:3, :3] = _qvec_to_rotation(im.qvec)
        w2c[:3, 3] = im.tvec
        paths.append(path)
        poses.append(np.linalg.inv(w2c))
        ks.append(_intrinsics(fx * sx, fy * sy, cx * sx, cy * sy))
        sizes.append((w, h))
        labels.append("test" if llffhold > 0 and i % llffhold == 0 else "train")
    return SceneViews(root.name, root, "colmap", tuple(paths), np.stack(poses), np.stack(ks), tuple(sizes),
                      tuple(labels), (None,) * len(paths))


# --- DL3DV with a pixelSplat-style evaluation index -------------------------------------------------


def _read_index(index_path: str | Path) -> dict[str, Any]:
    path = Path(index_path)
    index = _read_json(path)
    if not isinstance(index, dict):
        raise LayoutError(f"{path}: an evaluation index maps scene names to {{context, target}} entries")
    return index


def _dl3dv_transforms(root: Path) -> Path:
    for candidate in (root / "transforms.json", root / "nerfstudio" / "transforms.json"):
        if candidate.is_file():
            return candidate
    raise LayoutError(f"{root} has no transforms.json (nor nerfstudio/transforms.json)")


def _index_entry(entry: Any, scene: str, path: str) -> tuple[list[int], list[int]]:
    if entry is None:
        raise LayoutError(f"{path}: scene {scene!r} has no evaluation views (its entry is null)")
    if not isinstance(entry, dict):
        raise LayoutError(f"{path}: scene {scene!r} needs integer 'context' and 'target' lists, got {_show(entry)}")
    lists = []
    for field in ("context", "target"):
        ids = entry.get(field)
        if not isinstance(ids, list):
            raise LayoutError(f"{path}: scene {scene!r} field {field!r} must be a list of frame numbers, "
                              f"got {_show(ids)}")
        if not ids:
            raise LayoutError(f"{path}: scene {scene!r} has an empty {field} list")
        _check_views(len(ids), f"{path}: scene {scene!r} field {field!r}")
        bad = next((i for i in ids if type(i) is not int), None)
        if bad is not None:
            raise LayoutError(f"{path}: scene {scene!r} field {field!r} holds {_show(bad)}, not a frame number")
        lists.append(ids)
    _check_views(len(lists[0]) + len(lists[1]), f"{path}: scene {scene!r}")
    return lists[0], lists[1]


def load_dl3dv(scene_dir: str | Path, index_path: str | Path, images: str | None = None) -> SceneViews:
    """One DL3DV scene's context and target views as the index names them; ``images`` picks a
    downscaled folder (``images_4``) instead of the one ``file_path`` names."""
    root = _dir(scene_dir, "scene")
    index = _read_index(index_path)
    if root.name not in index:
        raise LayoutError(f"{index_path}: no entry for scene {root.name!r}")
    context, target = _index_entry(index[root.name], root.name, str(index_path))
    source = _dl3dv_transforms(root)
    meta = _read_json(source)
    frames = sorted(_frames_of(meta, str(source)), key=lambda f: str(f.get("file_path", "")))
    base = source.parent
    entries = []
    for split, ids in (("context", context), ("target", target)):
        for i in ids:
            if not 0 <= i < len(frames):
                raise LayoutError(f"{index_path}: scene {root.name!r} {split} view {i} is out of range "
                                  f"({len(frames)} frames)")
            entries.append((split, meta, frames[i], source))
    views = _from_frames(base, "dl3dv", entries, image_dir=images)
    return SceneViews(root.name, root, views.layout, views.image_paths, views.c2w, views.intrinsics, views.sizes,
                      views.splits, views.depth_paths)


def load_dl3dv_all(root_dir: str | Path, index_path: str | Path, images: str | None = None) -> list[SceneViews]:
    """Every scene of the index that has a folder under ``root_dir`` and a non-null entry (the others are
    skipped, as the pixelSplat evaluation does); LayoutError when none is left."""
    root = _dir(root_dir, "DL3DV")
    index = _read_index(index_path)
    scenes = [load_dl3dv(root / name, index_path, images) for name in sorted(index)
              if index[name] is not None and (root / name).is_dir()]
    if not scenes:
        raise LayoutError(f"none of the {len(index)} scenes in {index_path} has a folder under {root}")
    return scenes


# --- detection --------------------------------------------------------------------------------------


def detect_layout(scene_dir: str | Path) -> str:
    """``nerf_synthetic`` or ``colmap`` from the files present (DL3DV needs its index: use load_dl3dv)."""
    root = _dir(scene_dir, "scene")
    if any((root / f"transforms{s}.json").is_file() for s in ("_train", "_val", "_test", "")):
        return "nerf_synthetic"
    if (root / "sparse").is_dir():
        return "colmap"
    raise LayoutError(f"{root}: not a NeRF-synthetic (transforms*.json) or COLMAP (sparse/) scene")


def load_scene(scene_dir: str | Path) -> SceneViews:
    """Load a NeRF-synthetic or COLMAP scene, whichever the folder holds."""
    layout = detect_layout(scene_dir)
    return load_nerf_synthetic(scene_dir) if layout == "nerf_synthetic" else load_colmap(scene_dir)
