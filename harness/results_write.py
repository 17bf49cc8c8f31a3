"""The one write a family's own command makes to the results database: judge verdicts.

A family reads stored results through :mod:`harness.results` (read-only, typed records); a command
of its own that judges stored runs (a pairwise judge between two runs' replies, say) stores each
verdict here, as plain dicts, never as ORM rows. It is :func:`harness.store.ops.write_judgements`
(the writer the runner's own judge calls use) in a session of its own, committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from harness.store import ops


def store_judgements(sessions: sessionmaker[Session], rows: Sequence[dict[str, Any]]) -> int:
    """Insert judgement rows (``run_id``, ``sample_id``, ``epoch``, ``judge_spec``, ``prompt_hash``,
    ``raw``, ``verdict``) in one transaction; how many were given. Nothing is written for none."""
    if not rows:
        return 0
    with sessions() as s:
        ops.write_judgements(s, rows)
        s.commit()
    return len(rows)
