"""The Jinja2 environment of the leaderboard (autoescape always on: model outputs are untrusted).

Other parts of the site (the arena) render through :func:`make_env` / :data:`templates` so their
pages can ``{% extends "base.html" %}``; they may pass extra template folders that are searched first.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import ChoiceLoader, Environment, FileSystemLoader, StrictUndefined, Undefined

from harness.resources import package_data

# the installed package's own folders; an installation without them fails here in one line
TEMPLATE_DIR = package_data("harness.leaderboard", "templates")
STATIC_DIR = package_data("harness.leaderboard", "static")


def num(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if v != 0 and abs(v) < 10 ** -digits:
        return f"{v:.2e}"
    if abs(v) >= 1000:
        return f"{v:,.1f}"
    return f"{v:.{digits}f}"


def ci(lo: Any, hi: Any, digits: int = 3) -> str:
    if lo is None or hi is None:
        return ""
    return f"[{num(lo, digits)}, {num(hi, digits)}]"


def plural(n: Any, word: str, many: str = "") -> str:
    """``1 task``, ``2 tasks`` (``many``: an irregular plural)."""
    count = int(n) if isinstance(n, int | float) else len(n)
    return f"{count:,} {word if count == 1 else (many or word + 's')}"


def pretty(v: Any) -> str:
    return json.dumps(v, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def when(v: Any) -> str:
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d %H:%M")
    return "" if v is None else str(v)


def query(params: dict[str, Any], **changes: Any) -> str:
    """A query string from the current parameters with some changed (None removes a key)."""
    merged = {**params, **changes}
    return "?" + urlencode({k: v for k, v in merged.items() if v not in (None, "")})


def make_env(*extra_dirs: str | Path, strict: bool = False) -> Environment:
    loaders = [FileSystemLoader(str(d)) for d in extra_dirs] + [FileSystemLoader(str(TEMPLATE_DIR))]
    env = Environment(loader=ChoiceLoader(loaders), autoescape=True, trim_blocks=True, lstrip_blocks=True,
                      undefined=StrictUndefined if strict else Undefined)
    env.filters.update(num=num, pretty=pretty, when=when, plural=plural)
    env.globals.update(ci=ci, query=query)
    return env


def _starlette_templates():  # type: ignore[no-untyped-def]
    from fastapi.templating import Jinja2Templates

    return Jinja2Templates(env=make_env())


def __getattr__(name: str) -> Any:  # `from harness.leaderboard.templating import templates`, built lazily
    if name == "templates":
        return _starlette_templates()
    raise AttributeError(name)
