"""Multi-level online conformal prediction tasks: ``ocp_synthetic``, ``ocp_elec2``, ``ocp_stocks``.

Design: **one sample is one whole stream.** The request carries the series, the coverage levels,
the base forecaster and the burn-in; the backend runs the online loop itself, step by step behind a
feedback gate that releases y_t only after the sets of step t are emitted (``online.Feedback``),
and replies with every step's point forecast and thresholds. Why not one sample per step with a
stateful backend: the runner hands requests to concurrent workers and a resumed run skips finished
samples, so per-step state would depend on the runner's scheduling and would be lost on resume;
"strictly in order" could then only be promised, not checked. With one stream per sample the order
lives in one loop that the gate polices, and resume is exact: a stream is either stored whole or
rerun whole from its start.

Scoring recomputes everything from the emitted sets (never trusting backend numbers): per level
(breakdown rows ``level=<coverage level>``) ``coverage``, ``coverage_error`` (coverage - target),
``width``; overall ``coverage_gap_max`` (max over levels of |coverage - target|), ``crossings``
(steps whose sets are not nested), ``wis`` (Weighted Interval Score, mean over steps; see
``metrics.py``) and ``width_mean``. Several streams (seeds, tickers) are averaged with bootstrap CIs.
"""

from __future__ import annotations

import binascii
import math
from collections import defaultdict
from typing import Any

from harness.registry import task
from harness.stats import mean_ci
from harness.task import SampleRecord, ScoreContext, Task
from harness.tasks.conformal.forecasters import FORECASTERS
from harness.tasks.conformal.metrics import stream_metrics
from harness.tasks.conformal.online import decode
from harness.tasks.conformal.streams import DEFAULT_LEVELS, STREAMS, elec2, parse_levels, stocks, synthetic
from harness.types import (
    GenerationConfig,
    Message,
    Metric,
    MetricInfo,
    Output,
    Part,
    Request,
    Sample,
    Score,
    lower,
    neutral,
    options_part,
    stable_hash,
)

VERSION = "1"
OVERALL = ("coverage_gap_max", "crossings", "wis", "width_mean", "infinite_sets")
PER_LEVEL = ("coverage", "coverage_error", "width", "infinite_sets")
METRICS: dict[str, MetricInfo] = {
    "wis": lower("Weighted interval score (steps whose sets are all finite)"),
    "infinite_sets": lower("Share of sets that are the whole line", scale="fraction"),
    "coverage_gap_max": lower("Max |coverage - target| over levels", scale="fraction"),
    "crossings": lower("Steps with non-nested sets"),
    "width_mean": neutral("Mean width of the finite sets"),
    "coverage": neutral("Coverage", scale="fraction"),
    "coverage_error": neutral("Coverage - target", scale="fraction"),
    "width": neutral("Width of the finite sets"),
    "seconds": neutral("Seconds per stream"),
    "streams": neutral("Streams scored"),
}


def stream_part(sample: Sample) -> dict[str, Any]:
    return options_part(sample.messages, "stream", "sample carries no stream")


def make_sample(sid: str, series: list[float], levels: tuple[float, ...], forecaster: str, burn_in: int,
                meta: dict[str, Any]) -> Sample:
    opts = {"stream": series, "levels": list(levels), "forecaster": forecaster, "burn_in": burn_in}
    text = (f"Online conformal prediction over a stream of {len(series)} values: emit nested sets at coverage "
            f"levels {', '.join(f'{v:g}' for v in levels)} around a {forecaster} forecast, one step at a time.")
    return Sample(id=sid, messages=[Message("user", [Part("text", text=text, options=opts)])],
                  metadata={**meta, "T": len(series) - burn_in})


def score(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
    pred = output.prediction
    if not isinstance(pred, dict) or "q" not in pred or "yhat" not in pred:
        return Score.not_scored("the reply holds no per-step thresholds")
    opts = stream_part(sample)
    levels, burn_in = [float(v) for v in opts["levels"]], int(opts["burn_in"])
    y = [float(v) for v in opts["stream"]][burn_in:]
    try:
        yhat = decode(pred["yhat"], [len(y)])
        q = decode(pred["q"], [len(y), len(levels)])
    except (ValueError, TypeError, binascii.Error) as exc:
        return Score.not_scored(f"malformed sets: {exc}")
    m = stream_metrics(y, yhat, q, levels)
    values = {k: m[k] for k in OVERALL if math.isfinite(m[k])}  # NaN: no finite set to measure
    if isinstance(pred.get("seconds"), int | float):
        values["seconds"] = float(pred["seconds"])
    return Score(values=values, details={"levels": m["levels"]})


def aggregate(records: list[SampleRecord]) -> list[Metric]:
    ok = sorted((r for r in records if r.error is None and r.unscored is None), key=lambda r: r.sample_id)
    out = [Metric("errors", float(sum(r.error is not None for r in records)), n=len(records)),
           Metric("unscored", float(sum(r.error is None and r.unscored is not None for r in records)),
                  n=len(records)),
           Metric("streams", float(len(ok)), n=len(records))]
    for name in (*OVERALL, "seconds"):
        vals = [r.scores[name] for r in ok if name in r.scores]
        if vals:
            est = mean_ci(vals)
            out.append(Metric(name, est.value, est.ci_low, est.ci_high, est.n))
    by_level: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in ok:
        for level, row in (r.details.get("levels") or {}).items():
            for name in PER_LEVEL:
                if name in row:
                    by_level[level][name].append(float(row[name]))
    for level in sorted(by_level, key=float):
        for name, vals in by_level[level].items():
            est = mean_ci(vals)
            out.append(Metric(name, est.value, est.ci_low, est.ci_high, est.n, "level", level))
    return out


def _prompt(sample: Sample) -> Request:
    return Request(sample.messages, GenerationConfig(temperature=0.0, max_tokens=1))


def _check(forecaster: str, burn_in: int) -> None:
    if forecaster not in FORECASTERS:
        raise ValueError(f"unknown forecaster {forecaster!r}; choose one of {', '.join(FORECASTERS)}")
    if int(burn_in) < 10:
        raise ValueError(f"burn_in must be at least 10 steps, got {burn_in}")


def _task(samples: list[Sample], options: dict[str, Any]) -> Task:
    digest = stable_hash({"v": VERSION, "options": options,
                          "data": [stable_hash(stream_part(s)["stream"]) for s in samples]})
    return Task(version=VERSION, load=lambda: list(samples), prompt=_prompt, score=score, primary_metric="wis",
                metrics=METRICS, aggregate=aggregate, content_hash=digest, options=options)


@task("ocp_synthetic", description="Multi-level online conformal on seeded synthetic streams "
      "(-T stream=stationary|shift|sinusoid|heavy T= levels= seeds= forecaster=)", family="conformal")
def ocp_synthetic(stream: str = "shift", T: int = 5000, levels: Any = DEFAULT_LEVELS, seed: int = 0,
                  seeds: int = 1, forecaster: str = "ar", burn_in: int = 100) -> Task:
    lv = parse_levels(levels)
    if stream not in STREAMS:
        raise ValueError(f"unknown stream {stream!r}; choose one of {', '.join(STREAMS)}")
    T, seed, seeds, burn_in = int(T), int(seed), int(seeds), int(burn_in)
    if T < 1 or seeds < 1:
        raise ValueError(f"T and seeds must be positive, got T={T} seeds={seeds}")
    _check(forecaster, burn_in)
    samples = [make_sample(f"{stream}-T{T}-seed{s}", synthetic(stream, T + burn_in, s), lv, forecaster, burn_in,
                           {"series": stream, "seed": s}) for s in range(seed, seed + seeds)]
    return _task(samples, {"stream": stream, "T": T, "levels": list(lv), "seed": seed, "seeds": seeds,
                           "forecaster": forecaster, "burn_in": burn_in})


@task("ocp_elec2", description="Multi-level online conformal on Elec2 NSW demand (first 2000 half-hours)",
      family="conformal")
def ocp_elec2(rows: int = 2000, levels: Any = DEFAULT_LEVELS, forecaster: str = "ar", burn_in: int = 100) -> Task:
    lv = parse_levels(levels)
    rows, burn_in = int(rows), int(burn_in)
    _check(forecaster, burn_in)
    series = elec2(rows)
    if len(series) <= burn_in:
        raise ValueError(f"rows={rows} leaves no step after the burn-in of {burn_in}")
    return _task([make_sample(f"elec2-{rows}", series, lv, forecaster, burn_in, {"series": "elec2"})],
                 {"rows": rows, "levels": list(lv), "forecaster": forecaster, "burn_in": burn_in})


@task("ocp_stocks", description="Multi-level online conformal on monthly stock prices (vega_datasets, 5 tickers)",
      family="conformal")
def ocp_stocks(levels: Any = DEFAULT_LEVELS, forecaster: str = "last", burn_in: int = 12) -> Task:
    lv = parse_levels(levels)
    burn_in = int(burn_in)
    if forecaster not in FORECASTERS:
        raise ValueError(f"unknown forecaster {forecaster!r}; choose one of {', '.join(FORECASTERS)}")
    if burn_in < 5:
        raise ValueError(f"burn_in must be at least 5 months, got {burn_in}")
    samples = [make_sample(f"stocks-{sym}", series, lv, forecaster, burn_in, {"series": sym})
               for sym, series in stocks().items() if len(series) > burn_in]
    return _task(samples, {"levels": list(lv), "forecaster": forecaster, "burn_in": burn_in})
