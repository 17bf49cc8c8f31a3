"""Artifact files shown in battles: path resolution under allowed roots, render discovery in a
sample row, content hashing (identical-output check) and metadata stripping.

Renderers write metadata (PNG tEXt chunks, JPEG APP/COM segments) that can carry a file path or a
tool name, and a file path may contain the model name: the arena serves only the pixels, under an
opaque per-battle URL, with no Last-Modified/ETag.
"""

from __future__ import annotations

import hashlib
import mimetypes
import struct
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
