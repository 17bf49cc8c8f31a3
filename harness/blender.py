"""Where Blender (``bpy``, PyPI) lives: its own virtual environment, because bpy pins numpy 1.26.4 and
so cannot share the harness's interpreter. Every family that renders or runs Blender code finds it
here, and a user who has none is told in one line how to make one."""

from __future__ import annotations

import os
from pathlib import Path

from harness.errors import UserError

# what the Blender venv needs: bpy (built against numpy 1.26.4) and what the Blender-side scripts import
BPY_REQUIREMENTS = "bpy==5.0.1 numpy==1.26.4 trimesh pillow networkx scipy"


class BlenderMissing(UserError):
    """No Python with ``bpy`` where the harness looks for one."""


def default_bpy_python() -> Path:
    cache = Path(os.environ.get("HARNESS_CACHE_DIR", Path.home() / ".cache" / "harness"))
    return cache / "venvs" / "bpy" / "bin" / "python"


def bpy_python_path() -> Path:
    """``HARNESS_BPY_PYTHON`` if set, else the venv under the harness cache (it may not exist)."""
    explicit = os.environ.get("HARNESS_BPY_PYTHON")
    return Path(explicit) if explicit else default_bpy_python()


def how_to_install() -> str:
    venv = default_bpy_python().parent.parent
    return (f"make one with: python3 -m venv {venv} && {venv}/bin/pip install {BPY_REQUIREMENTS} "
            "(or point HARNESS_BPY_PYTHON at a Python that has bpy)")


def blender_available() -> bool:
    return bpy_python_path().exists()


def bpy_python() -> str:
    """The Blender venv's interpreter, or :class:`BlenderMissing` saying how to get one."""
    path = bpy_python_path()
    if not path.exists():
        raise BlenderMissing(f"Blender (bpy) not found at {path}; {how_to_install()}")
    return str(path)
