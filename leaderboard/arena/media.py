"""Artifact files shown in battles: path resolution under allowed roots, render discovery in a
sample row, content hashing (identical-output check) and metadata stripping.

Renderers write metadata (PNG tEXt chunks, JPEG APP/COM segments) that can carry a file path or a
tool name, and a file path may contain the model name: the arena serves only the pixels, under an
opaque per-battle URL, with no Last-Modified/ETag.
"""

from __future__ import annotations

import hashlib
import mimetypes
import os
import re
import shutil
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

RENDER_KEYS = ("renders", "render_paths", "views", "images")
IMAGE_EXT = {".png", ".jpg", ".jpeg", ".webp", ".gif"}


def resolve(path: str, roots: list[Path]) -> Path | None:
    """The real file if ``path`` (absolute, or relative to a root) lies under one of ``roots``."""
    if not path or "\x00" in path or not roots:
        return None
    for root in roots:
        try:
            base = root.resolve()
            real = (Path(path) if Path(path).is_absolute() else base / path).resolve(strict=True)
        except (OSError, RuntimeError):
            continue
        if real.is_relative_to(base) and real.is_file():
            return real
    return None


def _paths_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    if isinstance(value, dict):
        return [v for _, v in sorted(value.items()) if isinstance(v, str)]
    return []


def render_paths(details: Any, prediction: Any) -> list[str]:
    """Render image paths of a sample row: the first of ``renders``/``render_paths``/``views``/
    ``images`` found in ``details`` then ``prediction`` (a list, or a dict view name -> path)."""
    for holder in (details, prediction):
        if isinstance(holder, dict):
            for key in RENDER_KEYS:
                paths = [p for p in _paths_in(holder.get(key)) if Path(p).suffix.lower() in IMAGE_EXT]
                if paths:
                    return paths
    return []


MESH_KEYS = ("glb", "mesh", "mesh_path")
MESH_EXT = {".glb", ".obj"}


def mesh_path(details: Any, prediction: Any) -> str | None:
    """The exported mesh of a sample row (``glb``/``mesh``/``mesh_path`` in details or prediction)."""
    for holder in (details, prediction):
        if isinstance(holder, dict):
            for key in MESH_KEYS:
                value = holder.get(key)
                if isinstance(value, str) and Path(value).suffix.lower() in MESH_EXT:
                    return value
    return None


def declares_renders(details: Any, prediction: Any) -> bool:
    """Whether the row comes from a task that renders (so no renders means the attempt failed)."""
    return any(isinstance(h, dict) and any(k in h for k in RENDER_KEYS) for h in (details, prediction))


def prompt_image_paths(input_: Any) -> list[str]:
    messages = (input_ or {}).get("messages") or []
    out: list[str] = []
    for m in messages:
        if m.get("role") == "system" or isinstance(m.get("content"), str):
            continue
        out += [p["path"] for p in m.get("content") or [] if p.get("type") == "image" and p.get("path")]
    return out


def file_digest(path: Path) -> str:
    """Digest of what would be served (metadata stripped): two renders differing only in a text
    chunk are the same picture."""
    return hashlib.sha256(clean_bytes(path)[0]).hexdigest()


def _strip_png(data: bytes) -> bytes:
    keep = {b"IHDR", b"PLTE", b"IDAT", b"IEND", b"tRNS", b"gAMA", b"cHRM", b"sRGB", b"iCCP", b"sBIT", b"pHYs"}
    out = [data[:8]]
    pos = 8
    while pos + 8 <= len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        end = pos + 12 + length
        if kind in keep:
            out.append(data[pos:end])
        pos = end
        if kind == b"IEND":
            break
    return b"".join(out)


def _strip_jpeg(data: bytes) -> bytes:
    out = [data[:2]]
    pos = 2
    while pos + 4 <= len(data) and data[pos] == 0xFF:
        marker = data[pos + 1]
        if marker == 0xDA:  # start of scan: the rest is image data
            out.append(data[pos:])
            return b"".join(out)
        (length,) = struct.unpack(">H", data[pos + 2 : pos + 4])
        segment = data[pos : pos + 2 + length]
        if not (0xE1 <= marker <= 0xEF or marker == 0xFE):  # drop APP1..APP15 (EXIF, XMP) and COM
            out.append(segment)
        pos += 2 + length
    return data  # not a layout we understand: serve as is


def clean_bytes(path: Path) -> tuple[bytes, str]:
    """File content without metadata, and its media type."""
    data = path.read_bytes()
    suffix = path.suffix.lower()
    if suffix == ".png" and data.startswith(b"\x89PNG\r\n\x1a\n"):
        data = _strip_png(data)
    elif suffix in (".jpg", ".jpeg") and data.startswith(b"\xff\xd8"):
        data = _strip_jpeg(data)
    return data, mimetypes.guess_type(path.name)[0] or "application/octet-stream"


# ---- live battles' own files (prompt images, renders): written under the live media folder as
# ``<battle public id>-...`` (a file, or a folder of one side's renders), never kept for ever
LIVE_ENTRY = re.compile(r"^[0-9a-f]{24}-")


def _live_entry(path: str | Path, live_dir: Path) -> Path | None:
    """The top-level ``<battle>-...`` entry of the live folder that holds ``path``, if any."""
    try:
        base = live_dir.resolve()
        rel = Path(path).resolve().relative_to(base)
    except (OSError, RuntimeError, ValueError):
        return None
    if not rel.parts or not LIVE_ENTRY.match(rel.parts[0]):
        return None
    return base / rel.parts[0]


def _remove(entry: Path) -> bool:
    try:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    except FileNotFoundError:
        return False
    except OSError:  # another worker is removing it, or it is not ours to remove: the next sweep retries
        return False
    return True


def remove_live(paths: Iterable[str | Path], live_dir: Path) -> int:
    """Delete the live files (or render folders) behind ``paths``; paths outside the live folder are
    left alone (a stored battle's media belong to their run). Returns how many entries went."""
    entries = {e for e in (_live_entry(p, live_dir) for p in paths) if e is not None}
    return sum(_remove(e) for e in entries)


def sweep_live(live_dir: Path, older_than_s: float, now: float) -> int:
    """Delete every live entry last written more than ``older_than_s`` seconds before ``now`` (the
    battle it belongs to can no longer be voted on). Only ``<battle id>-...`` names are touched."""
    removed = 0
    try:
        entries = list(os.scandir(live_dir))
    except OSError:
        return 0
    for entry in entries:
        if not LIVE_ENTRY.match(entry.name):
            continue
        try:
            mtime = entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        if mtime < now - older_than_s:
            removed += _remove(Path(entry.path))
    return removed
