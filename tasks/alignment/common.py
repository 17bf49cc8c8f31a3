"""Shared pieces of the alignment probes: pinned judge, data paths, hidden-output flag, metric helpers."""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from harness.data import DatasetError
from harness.task import SampleRecord
from harness.types import Metric

DATA = Path(__file__).parent / "data"
PROMPTS = Path(__file__).parent / "prompts"  # judge prompts, one text file each
XSTEST_CSV = DATA / "xstest" / "xstest_prompts.csv"
MMLU_JSONL = DATA / "mmlu_redux" / "mmlu_redux_ok_5_per_subject.jsonl"
GSM8K_JSONL = Path(__file__).resolve().parent.parent / "gsm8k" / "data" / "test.jsonl"

# Pinned judge: the GPT-4o snapshot Betley et al. (2025) judge with; recorded as the run's judge_spec.
DEFAULT_JUDGE = "openai:gpt-4o-2024-08-06"

# Sample metadata flag: the prompt asks for something harmful, so the reply (and any follow-up reply
# kept in details) is stored but must not be shown on public pages or exports (see redact.py).
HIDE_KEY = "hide_output"
HIDE_REASON_KEY = "hide_reason"


def hidden(reason: str) -> dict[str, Any]:
    return {HIDE_KEY: True, HIDE_REASON_KEY: reason}


def read_xstest(path: Path = XSTEST_CSV) -> list[dict[str, str]]:
    """XSTest rows (id, prompt, type, label, focus, note) with a clear error for a malformed file."""
    if not path.exists():
        raise DatasetError(f"{path}: file not found")
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    for i, row in enumerate(rows, 2):
        for key in ("id", "prompt", "type", "label"):
            if not (row.get(key) or "").strip():
                raise DatasetError(f"{path}:{i}: missing field {key!r}")
        if row["label"] not in ("safe", "unsafe"):
            raise DatasetError(f"{path}:{i}: field 'label' should be safe or unsafe, got {row['label']!r}")
    return rows


def scored(records: Iterable[SampleRecord]) -> list[SampleRecord]:
    return [r for r in records if r.error is None and r.unscored is None]


def rate_metric(name: str, records: Iterable[SampleRecord], value: str, *, key: str = "", key_value: str = "",
                seed: int = 0) -> Metric | None:
    """Mean of one score value over the samples that have it (epochs averaged within a sample first,
    so the bootstrap resamples samples), or None when no sample has it."""
    from harness.stats import mean_ci  # numpy: only when aggregating (task discovery stays light)

    by_sample: dict[str, list[float]] = defaultdict(list)
    for r in scored(records):
        v = r.scores.get(value)
        if v is not None:
            by_sample[r.sample_id].append(float(v))
    if not by_sample:
        return None
    est = mean_ci([sum(v) / len(v) for v in by_sample.values()], seed=seed)
    return Metric(name, est.value, est.ci_low, est.ci_high, est.n, key, key_value)


def counts(records: list[SampleRecord]) -> list[Metric]:
    """The ``errors`` and ``unscored`` rows every aggregate carries."""
    n_err = sum(1 for r in records if r.error is not None)
    n_uns = sum(1 for r in records if r.error is None and r.unscored is not None)
    return [Metric("errors", float(n_err), n=len(records)), Metric("unscored", float(n_uns), n=len(records))]


def breakdown(records: list[SampleRecord], key: str, metric_fn: Callable[[list[SampleRecord], str, str],
              list[Metric]]) -> list[Metric]:
    groups: dict[str, list[SampleRecord]] = defaultdict(list)
    for r in records:
        v = r.metadata.get(key)
        if v is not None:
            groups[str(v)].append(r)
    out: list[Metric] = []
    for value, group in sorted(groups.items()):
        out += metric_fn(group, key, value)
    return out


def present(*metrics: Metric | None) -> list[Metric]:
    return [m for m in metrics if m is not None]
