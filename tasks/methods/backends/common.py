"""Shared plumbing for fit-then-predict method backends: features in and out of requests, the fit
cache, the training progress bar.

Method tasks carry each item's feature vector in the first part's ``options["features"]`` (the text
repeats it for text-only models); a backend reads it from there, and from the text as a fallback.
The fitted state is cached by :mod:`harness.fit_cache` under ``$HARNESS_CACHE_DIR/fits/<method>-<key>.pkl``
(:data:`FITS`), keyed on the backend, its fit settings, the train samples' content, the train arrays
and the seed, so a rerun on the same data does not retrain. The cache holds plain data and numpy
arrays, read back as data only (no code runs when it is read); a cache file that is refused, cannot be
read or does not hold a usable fit is a miss (one warning line), refitted and replaced.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from harness.types import Message, Output, Sample, Usage

_NUM = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


class FeatureError(ValueError):
    """A request or sample without a usable feature vector."""


def features_of(messages: Sequence[Message]) -> list[float]:
    for m in messages:
        for p in m.content:
            feats = p.options.get("features") if p.options else None
            if feats is not None:
                return [float(v) for v in feats]
    text = " ".join(m.text_content for m in messages if m.role == "user")
    nums = _NUM.findall(text.split(":", 1)[-1]) if text else []
    if not nums:
        raise FeatureError("no feature vector in the request (options['features'] or numbers in the text)")
    return [float(v) for v in nums]


def train_arrays(train: Sequence[Sample], labelled: bool = True) -> tuple[Any, Any]:
    """(X float64 [n, d], y int64 [n] or None) from train samples; a clear error names the sample."""
    import numpy as np

    rows, labels = [], []
    for s in train:
        try:
            rows.append(features_of(s.messages))
        except FeatureError as exc:
            raise FeatureError(f"train sample {s.id!r}: {exc}") from None
        if labelled:
            if s.target is None:
                raise FeatureError(f"train sample {s.id!r} has no target label")
            labels.append(int(s.target))
    dims = {len(r) for r in rows}
    if len(dims) > 1:
        raise FeatureError(f"train samples have feature vectors of different lengths {sorted(dims)}")
    X = np.asarray(rows, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64) if labelled else None
    return X, y


FITS = "fits"  # harness.fit_cache folder of the methods fits (where they always were)


class TrainProgress:
    """A rich progress bar for training (epochs or iterations); silent off a terminal or when disabled."""

    def __init__(self, label: str, total: int | None, enabled: bool = True) -> None:
        self.bar = None
        self.task_id = None
        if enabled and os.isatty(2):
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[info]}"), TimeElapsedColumn(), transient=True)
            self.task_id = self.bar.add_task(label, total=total, info="")

    def advance(self, info: str = "") -> None:
        if self.bar is not None:
            assert self.task_id is not None  # set together with self.bar
            self.bar.update(self.task_id, advance=1, info=info)

    @contextmanager
    def running(self) -> Iterator[TrainProgress]:
        if self.bar is None:
            yield self
            return
        with self.bar:
            yield self


def method_spec(backend: str, variant: str, settings: dict[str, Any], shown_keys: Sequence[str]) -> str:
    """``backend:variant?k=v&...`` with the settings that change what is fitted (the cache key part)."""
    shown = {k: v for k, v in sorted(settings.items()) if k in shown_keys}
    return f"{backend}:{variant}" + ("?" + "&".join(f"{k}={v}" for k, v in shown.items()) if shown else "")


def not_fitted(spec: str, fit_error: str | None, n: int) -> list[Output]:
    """One error output per request when the backend could not be (or was never) fitted."""
    reason = fit_error or f"{spec} has not been fitted (the task needs a train split)"
    return [Output(error=reason) for _ in range(n)]


def with_usage(outs: list[Output], started: float) -> list[Output]:
    """Give every output one call and an equal share of the batch's prediction seconds."""
    per = (time.perf_counter() - started) / max(len(outs), 1)
    for o in outs:
        o.usage = Usage(calls=1, seconds=per)
    return outs
