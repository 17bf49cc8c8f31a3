"""The run's progress bar (rich): rate, errors, elapsed and ETA; silent when disabled or not on a
terminal, so piped and CI output stays clean."""

from __future__ import annotations

import os
import time
from typing import Any


class RunProgress:
    def __init__(self, enabled: bool, total: int, done: int, label: str) -> None:
        self.bar: Any = None
        if enabled and os.isatty(2):
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[rate]:.1f}/s"), TextColumn("errors {task.fields[errors]}"),
                TimeElapsedColumn(), TimeRemainingColumn(), transient=False,
            )
            self.tid = self.bar.add_task(label, total=total, completed=done, rate=0.0, errors=0)
            self.t0 = time.monotonic()
            self.n = 0

    def __enter__(self) -> RunProgress:
        if self.bar:
            self.bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.bar:
            self.bar.__exit__(*exc)

    def advance(self, n: int, errors: int) -> None:
        if self.bar:
            self.n += n
            rate = self.n / max(time.monotonic() - self.t0, 1e-9)
            self.bar.update(self.tid, advance=n, rate=rate, errors=errors)
