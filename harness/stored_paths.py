"""How a file path is written into a stored row (inputs, outputs, predictions, details).

By default a path is absolute, so a leaderboard started from any folder finds the file under its
media roots. ``harness demo`` builds a *relocatable* database instead: it runs in its media folder
and sets ``HARNESS_STORE_PATHS_UNDER`` to it, and every path under that folder is stored relative
to it (the leaderboard resolves a relative path against its media roots), so no page shows the
machine's absolute paths and the folder can be moved and served from anywhere.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "HARNESS_STORE_PATHS_UNDER"


def stored_path(path: str | os.PathLike[str]) -> str:
    """``path`` as a stored row should hold it: relative to ``$HARNESS_STORE_PATHS_UNDER`` when that
    names the current folder and the file lies under it, else absolute (symlinks and ``..`` resolved
    either way). Only the current folder: the process that stores the path reads it back too (a
    scorer opening a render), and a relative path resolves against the current folder."""
    real = Path(path).resolve()
    base = os.environ.get(ENV)
    if base:
        root = Path(base).resolve()
        if root == Path.cwd().resolve() and real.is_relative_to(root):
            return real.relative_to(root).as_posix()
    return str(real)
