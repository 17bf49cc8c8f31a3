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
from collections.abc import Iterator
from contextlib import contextmanager

# a young collection walks every young object still alive (at API rates: the requests in flight and
# the rows waiting for their commit), not the ones already freed by reference counting, so its cost
# barely depends on how often it runs: 100x rarer cut the collector from ~12 to ~1 us per request
YOUNG_THRESHOLD_FACTOR = 100

_depth = 0
_saved: tuple[int, int, int] | None = None


@contextmanager
def lighter_gc() -> Iterator[None]:
    """Freeze what is alive now and collect the young generation less often until the block (the
    outermost one, when runs nest or overlap in one process) ends."""
    global _depth, _saved
    if _depth == 0:
        _saved = gc.get_threshold()
        gc.freeze()
        gc.set_threshold(_saved[0] * YOUNG_THRESHOLD_FACTOR, _saved[1], _saved[2])
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0 and _saved is not None:
            gc.set_threshold(*_saved)
            gc.unfreeze()
            _saved = None


# the interpreter's default (5 ms) lets the writer's thread keep the GIL that long while replies
# wait on the event loop; 0.5 ms hands it back sooner (measured: about +2% requests/s at C = 256)
SWITCH_INTERVAL = 0.0005

_switch_depth = 0
_saved_switch: float | None = None


@contextmanager
def short_switch_interval() -> Iterator[None]:
    """A shorter GIL switch interval (``sys.setswitchinterval``) until the block (the outermost one,
    when runs nest or overlap in one process) ends: the event loop waits less for the GIL while
    commits run on the writer's thread."""
    import sys

    global _switch_depth, _saved_switch
    if _switch_depth == 0:
        _saved_switch = sys.getswitchinterval()
        sys.setswitchinterval(min(SWITCH_INTERVAL, _saved_switch))
    _switch_depth += 1
    try:
        yield
    finally:
        _switch_depth -= 1
        if _switch_depth == 0 and _saved_switch is not None:
            sys.setswitchinterval(_saved_switch)
            _saved_switch = None
