"""Which task setting a column compares at, and which of its results were measured at another.

Two runs of one task name are comparable only at the same settings: the task's version and content
hash, which covers its data, prompts and the ``-T`` options that change what is measured (two
Crafter runs with other episode counts are two settings). A column (one kind's list on the
overview, one kind's group on a task page) compares at its *reference* setting: the one most of its
results were measured at, a tie going to the newest run's. A result at any other setting is marked
and never ranked or paired in a win rate; so is every result of a stub-judged run, which also takes
no part in choosing the reference (its scores measure nothing).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Protocol


class _Result(Protocol):
    run_id: int
    settings_differ: bool

    @property
    def settings(self) -> str: ...

    @property
    def stub_judge(self) -> bool: ...


def reference_settings(results: Sequence[_Result]) -> str | None:
    """The setting most results were measured at (ties: the newest run's); None without results."""
    judged = [r for r in results if not r.stub_judge] or list(results)
    if not judged:
        return None
    counts = Counter(r.settings for r in judged)
    newest = {r.settings: r.run_id for r in sorted(judged, key=lambda r: r.run_id)}
    return max(counts, key=lambda k: (counts[k], newest[k]))


def mark_settings(results: Sequence[_Result]) -> str | None:
    """Set ``settings_differ`` on each result against the group's reference; return the reference."""
    ref = reference_settings(results)
    for r in results:
        r.settings_differ = ref is not None and r.settings != ref
    return ref


def short(settings: str) -> str:
    """A setting as people read it: the version and the first 8 characters of the content hash."""
    version, _, digest = settings.partition(":")
    return f"v{version} · {digest[:8]}" if digest else f"v{version}"
