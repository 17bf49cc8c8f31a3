"""Media files shown on the run page: only files under an allowed root are ever served.

Roots come from ``create_app(media_roots=...)`` or ``HARNESS_MEDIA_ROOT`` (os.pathsep-separated).
A stored path is absolute, or relative to a media root (``harness demo`` stores its paths relative to
its media folder: harness/stored_paths.py) or to the server's current folder. It is resolved
(symlinks and ``..`` included) before the check, so nothing outside escapes. A served file's URL
names it relative to its root, never by the server's absolute path.
"""

from __future__ import annotations

import mimetypes
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

IMAGE_EXT = {".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".svg"}
VIDEO_EXT = {".mp4", ".webm", ".ogv", ".mov", ".m4v"}
AUDIO_EXT = {".wav", ".mp3", ".ogg", ".oga", ".flac", ".m4a", ".opus"}
MESH_EXT = {".glb", ".obj"}  # what the arena's 3D viewer reads (leaderboard.arena.mesh)


def media_roots_from_env() -> list[Path]:
    raw = os.environ.get("HARNESS_MEDIA_ROOT", "")
    return [Path(p) for p in raw.split(os.pathsep) if p]


def allowed_path(path: str, roots: list[Path]) -> Path | None:
    """The resolved file if it exists under one of ``roots``, else None. A relative ``path`` is looked
    for under each root in order, then under the current folder."""
    if not path or not roots or "\x00" in path:
        return None
    given = Path(path)
    candidates = [given] if given.is_absolute() else [*(root / given for root in roots), given]
    for candidate in candidates:
        try:
            real = candidate.resolve(strict=True)
        except (OSError, RuntimeError):
            continue
        for root in roots:
            try:
                if real.is_relative_to(root.resolve()) and real.is_file():
                    return real
            except OSError:
                continue
    return None


def url_path(real: Path, roots: list[Path]) -> str:
    """How a served file is named in its URL: relative to the first root it lies under that names it
    back to the same file (the server's absolute path stays off the page), else absolute."""
    for root in roots:
        try:
            base = root.resolve()
        except (OSError, RuntimeError):
            continue
        if real.is_relative_to(base):
            rel = real.relative_to(base).as_posix()
            if allowed_path(rel, roots) == real:
                return rel
    return str(real)


def kind_of(path: str, declared: str = "") -> str:
    """How to show a file: image, video, audio, mesh (the 3D viewer) or file (download link)."""
    ext = Path(path).suffix.lower()
    if ext in IMAGE_EXT:
        return "image"
    if ext in VIDEO_EXT:
        return "video"
    if ext in AUDIO_EXT:
        return "audio"
    if ext in MESH_EXT:
        return "mesh"
    if declared in ("image", "video", "audio"):
        return declared
    return "file"


@dataclass(slots=True)
class MediaItem:
    label: str  # where it came from: "input", "output", "render"
    declared: str  # the part type (image, video, audio, points, mesh)
    path: str
    kind: str  # image | video | audio | mesh | file
    url: str | None  # None when the file is outside the media roots (the path is shown as text)
    mime: str

    @property
    def mesh_url(self) -> str | None:
        """The viewer's figure for a mesh file (vertices and faces as plotly mesh3d JSON)."""
        return self.url.replace("/media?", "/media/mesh?", 1) if self.url and self.kind == "mesh" else None


def media_item(label: str, declared: str, path: str, roots: list[Path]) -> MediaItem:
    ok = allowed_path(path, roots)
    url = "/media?path=" + quote(url_path(ok, roots)) if ok else None
    return MediaItem(label, declared, path, kind_of(path, declared), url, mimetypes.guess_type(path)[0] or "")


def sample_media(inp: dict[str, Any], details: dict[str, Any], prediction: Any, roots: list[Path]) -> list[MediaItem]:
    """Media of one sample: input parts with a path (3D parts show their ``options.render`` image
    when one exists), ``details["media"]`` entries ({type, path}) and ``details["renders"]`` paths from
    scorers (e.g. Blender renders of a predicted scene), and a predicted file path."""
    out: list[MediaItem] = []
    for msg in (inp or {}).get("messages", []) or []:
        for part in msg.get("content", []) if isinstance(msg, dict) else []:
            if not isinstance(part, dict) or part.get("type") == "text" or not part.get("path"):
                continue
            ptype = str(part.get("type"))
            render = (part.get("options") or {}).get("render")
            if ptype in ("points", "mesh") and isinstance(render, str):
                out.append(media_item("input render", ptype, render, roots))
            out.append(media_item("input", ptype, str(part["path"]), roots))
    for m in (details or {}).get("media", []) or []:
        if isinstance(m, dict) and isinstance(m.get("path"), str):
            out.append(media_item("output", str(m.get("type", "")), m["path"], roots))
    for p in (details or {}).get("renders", []) or []:
        if isinstance(p, str):
            out.append(media_item("render", "image", p, roots))
    if isinstance(prediction, str) and len(prediction) < 1000 and Path(prediction).suffix.lower() in (
            IMAGE_EXT | VIDEO_EXT | AUDIO_EXT | {".glb", ".obj", ".ply", ".stl"}):
        out.append(media_item("prediction", "", prediction, roots))
    return out
