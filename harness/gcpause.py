"""Interpreter settings for a run's hot path: cheaper garbage collection, prompter GIL hand-offs.

At API rates the cyclic collector, not the runner's own work, became the largest per-request cost:
every collection of the older generations walks every live object (modules, the run's samples,
the buffered rows) although a run makes almost no cyclic garbage (about one object per request,
measured). While a run drives its samples, what is alive when it starts (imports, samples, the
pending items) is frozen out of collections (``gc.freeze``) and the youngest generation is
collected a hundred times less often; both are undone when the last such run in the process ends, so
cyclic garbage is still collected, only in fewer, cheaper passes.

The commits run on a thread of their own (``harness.writer``), so while a run drives its samples
the GIL switch interval is shortened too (``short_switch_interval``), and restored after.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

# a young collection walks every young object still alive (at API rates: the requests in flight and
# the rows waiting for their commit), not the ones already freed by reference counting, so its cost
# barely depends on how often it runs: 100x rarer cut the collector from ~12 to ~1 us per request
YOUNG_THRESHOLD_FACTOR = 100

# the interpreter's default (5 ms) lets the writer's thread keep the GIL that long while replies
# wait on the event loop; 0.5 ms hands it back sooner (measured: about +2% requests/s at C = 256)
SWITCH_INTERVAL = 0.0005


def _outermost(apply: Callable[[], Callable[[], None]]) -> Callable[[], AbstractContextManager[None]]:
    """A context manager that applies a process-wide setting (``apply`` returns its undo) when the
    first of nested or overlapping blocks starts, and undoes it when the last one ends."""
    depth = 0
    undo: Callable[[], None] | None = None

    @contextmanager
    def block() -> Iterator[None]:
        nonlocal depth, undo
        if depth == 0:
            undo = apply()
        depth += 1
        try:
            yield
        finally:
            depth -= 1
            if depth == 0 and undo is not None:
                undo()
                undo = None

    return block


def _apply_lighter_gc() -> Callable[[], None]:
    saved = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(saved[0] * YOUNG_THRESHOLD_FACTOR, saved[1], saved[2])

    def undo() -> None:
        gc.set_threshold(*saved)
        gc.unfreeze()

    return undo


def _apply_short_switch_interval() -> Callable[[], None]:
    saved = sys.getswitchinterval()
    sys.setswitchinterval(min(SWITCH_INTERVAL, saved))
    return lambda: sys.setswitchinterval(saved)


# Freeze what is alive now and collect the young generation less often until the block (the
# outermost one, when runs nest or overlap in one process) ends.
lighter_gc = _outermost(_apply_lighter_gc)
# A shorter GIL switch interval until the outermost block ends: the event loop waits less for the
# GIL while commits run on the writer's thread.
short_switch_interval = _outermost(_apply_short_switch_interval)
