"""One-line validation of ``-M`` settings shared by the family's backends (every family here does the same)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

# generation keys the runner may hand every backend; harmless here
_GENERATION = frozenset({"temperature", "max_tokens", "top_p", "seed", "stop", "logprobs"})


def check_settings(backend: str, settings: dict[str, Any], known: Iterable[str]) -> None:
    allowed = set(known) | _GENERATION
    for key in settings:
        if key not in allowed:
            close = difflib.get_close_matches(key, sorted(allowed), n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown setting {key!r} for {backend}{hint} (known: {', '.join(sorted(known))})")
