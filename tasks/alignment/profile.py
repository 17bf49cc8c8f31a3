"""The alignment profile: the five properties of one or more models side by side, with paired tests.

Input: stored runs of the five ``alignment_*`` tasks (any subset), grouped by model. Output: one
table per model (headline numbers with 95% CIs, as the tasks' aggregates stored them), paired tests
of every other model against the first (typically the helpful-only model against its harmless twin)
with :func:`harness.stats.paired_test` on per-item values of the samples both runs share, and a
bar + radar chart page (plotly).

Per-item values of the paired tests (one number per item both runs scored):
- refusal: ``over_refusal`` per safe XSTest prompt; ``unsafe_compliance`` per unsafe one;
- misalignment: ``misaligned`` per answer (sample, epoch) counted in both runs;
- sycophancy: ``abandoned`` per question right at turn 1 in both runs;
- steerability: steered - base refusal per harmful prompt;
- character: ``contradiction_rate`` per topic.
"""

from __future__ import annotations

import html
import json
import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from harness import results
from harness.stats import paired_test
from harness.task import SampleRecord

from .redact import NOTICE


@dataclass(frozen=True)
class Headline:
    task: str
    metric: str
    label: str
    worse: str  # "higher" or "lower": which direction is the problem


HEADLINES: tuple[Headline, ...] = (
    Headline("alignment_refusal", "over_refusal", "Over-refusal (XSTest safe)", "higher"),
    Headline("alignment_refusal", "unsafe_compliance", "Compliance (XSTest unsafe)", "higher"),
    Headline("alignment_misalignment", "misaligned", "Emergent misalignment rate", "higher"),
    Headline("alignment_sycophancy", "abandon_rate", "Abandons a correct answer", "higher"),
    Headline("alignment_sycophancy", "answer_sycophancy", "Answer sycophancy (acc. drop)", "higher"),
    Headline("alignment_steerability", "steerability", "Steerability (refusal gain)", "lower"),
    Headline("alignment_steerability", "over_steering", "Over-steering (benign loss)", "higher"),
    Headline("alignment_character", "contradiction_rate", "Self-contradiction rate", "higher"),
    Headline("alignment_character", "stated_behaviour_agreement", "Stated = actual refusal", "lower"),
)
# the radar's five axes, each scaled so that higher = worse and 1 = worst
RADAR = (
    ("Over-refusal", "alignment_refusal", "over_refusal", lambda v: v),
    ("Misalignment", "alignment_misalignment", "misaligned", lambda v: v),
    ("Sycophancy", "alignment_sycophancy", "abandon_rate", lambda v: v),
    ("Ignores operator", "alignment_steerability", "harmful_refusal_steered", lambda v: 1.0 - v),
    ("Incoherence", "alignment_character", "contradiction_rate", lambda v: v),
)


@dataclass
class Cell:
    value: float
    ci_low: float | None
    ci_high: float | None
    n: int


@dataclass
class ModelProfile:
    model: str
    runs: dict[str, str] = field(default_factory=dict)  # task -> run name
    run_ids: dict[str, int] = field(default_factory=dict)
    metrics: dict[tuple[str, str], Cell] = field(default_factory=dict)  # (task, metric) -> cell


@dataclass
class Comparison:
    model_a: str
    model_b: str
    task: str
    metric: str
    n: int
    mean_a: float
    mean_b: float
    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    test: str


def load_profiles(sessions: sessionmaker[Session], run_names: list[str]) -> list[ModelProfile]:
    """One profile per model (in the order models first appear); a later run of a task replaces an earlier one."""
    profiles: dict[str, ModelProfile] = {}
    with sessions() as s:  # one snapshot for every run named
        for name in run_names:
            run = results.find_run(s, name)
            if run is None:
                raise ValueError(f"no run named {name!r}")
            if not run.task.startswith("alignment_"):
                raise ValueError(f"run {name!r} is a {run.task!r} run, not an alignment probe")
            prof = profiles.setdefault(run.model_label, ModelProfile(run.model_label))
            prof.runs[run.task] = run.name
            prof.run_ids[run.task] = run.id
            for m in results.metrics(s, run, breakdown=""):
                prof.metrics[(run.task, m.name)] = Cell(m.value, m.ci_low, m.ci_high, m.n)
    return list(profiles.values())


def _ok(r: SampleRecord) -> bool:
    return r.error is None and r.unscored is None


def per_item(task: str, metric: str, records: list[SampleRecord]) -> dict[str, float]:
    """Per-item values for the paired test of one headline (see the module docstring)."""
    if task == "alignment_steerability":
        from .steerability import by_item

        value = "refused" if metric == "steerability" else "complied"
        sign = 1.0 if metric == "steerability" else -1.0
        harm = "harmful" if metric == "steerability" else "benign"
        return {i: sign * (c["steered"] - c["base"]) for i, c in by_item(records, harm, value).items()
                if "base" in c and "steered" in c}
    if task == "alignment_sycophancy" and metric == "answer_sycophancy":
        neutral = {str(r.metadata.get("qid")): r.scores["first_correct"] for r in records
                   if _ok(r) and "first_correct" in r.scores}
        return {q: neutral[q] - r.scores["belief_correct"] for r in records
                if _ok(r) and "belief_correct" in r.scores and (q := str(r.metadata.get("qid"))) in neutral}
    value = {"abandon_rate": "abandoned", "stated_behaviour_agreement": "stated_behaviour_agrees"}.get(metric, metric)
    acc: dict[str, list[float]] = defaultdict(list)
    for r in records:
        if _ok(r) and value in r.scores:
            # answers of the misalignment probe pair by (sample, epoch): each is its own draw
            key = f"{r.sample_id}@{r.epoch}" if task == "alignment_misalignment" else r.sample_id
            acc[key].append(float(r.scores[value]))
    return {k: sum(v) / len(v) for k, v in acc.items()}


def compare(sessions: sessionmaker[Session], profiles: list[ModelProfile], seed: int = 0) -> list[Comparison]:
    """Paired tests of each later model against the first, per headline both have."""
    if len(profiles) < 2:
        return []
    base = profiles[0]
    out = []
    cache: dict[int, list[SampleRecord]] = {}

    def records(run_id: int) -> list[SampleRecord]:
        if run_id not in cache:
            cache[run_id] = results.records(sessions, run_id)
        return cache[run_id]

    for other in profiles[1:]:
        for h in HEADLINES:
            if h.task not in base.run_ids or h.task not in other.run_ids:
                continue
            a = per_item(h.task, h.metric, records(base.run_ids[h.task]))
            b = per_item(h.task, h.metric, records(other.run_ids[h.task]))
            ids = sorted(set(a) & set(b))
            if not ids:
                continue
            res = paired_test([a[i] for i in ids], [b[i] for i in ids], metric=h.metric, seed=seed)
            out.append(Comparison(base.model, other.model, h.task, h.metric, res.n, res.mean_a, res.mean_b,
                                  res.diff, res.ci_low, res.ci_high, res.p_value, res.test))
    return out


def fmt(cell: Cell | None) -> str:
    if cell is None or cell.value is None or not math.isfinite(cell.value):
        return "-"
    if cell.ci_low is None or cell.ci_high is None:
        return f"{cell.value:.3f}"
    return f"{cell.value:.3f} [{cell.ci_low:.3f}, {cell.ci_high:.3f}]"


def radar_values(prof: ModelProfile) -> list[float | None]:
    out: list[float | None] = []
    for _, task, metric, scale in RADAR:
        cell = prof.metrics.get((task, metric))
        out.append(None if cell is None else float(scale(cell.value)))
    return out


def figures(profiles: list[ModelProfile]) -> tuple[Any, Any]:
    """(bar chart of every headline with CI error bars, radar of the five 'higher = worse' axes)."""
    import plotly.graph_objects as go

    bars = go.Figure()
    labels = [h.label for h in HEADLINES]
    for prof in profiles:
        cells = [prof.metrics.get((h.task, h.metric)) for h in HEADLINES]
        ys = [c.value if c else None for c in cells]
        plus = [(c.ci_high - c.value) if c and c.ci_high is not None else 0 for c in cells]
        minus = [(c.value - c.ci_low) if c and c.ci_low is not None else 0 for c in cells]
        bars.add_trace(go.Bar(name=prof.model, x=labels, y=ys,
                              error_y={"type": "data", "array": plus, "arrayminus": minus}))
    bars.update_layout(barmode="group", title="Alignment profile (95% CIs)", yaxis_title="rate / difference")
    radar = go.Figure()
    axes = [a[0] for a in RADAR]
    for prof in profiles:
        vals = radar_values(prof)
        radar.add_trace(go.Scatterpolar(r=[v if v is not None else 0 for v in vals] + [vals[0] or 0],
                                        theta=axes + axes[:1], fill="toself", name=prof.model))
    radar.update_layout(polar={"radialaxis": {"range": [0, 1]}}, title="Problems (higher = worse)")
    return bars, radar


def html_page(profiles: list[ModelProfile], comparisons: list[Comparison]) -> str:
    import plotly.io as pio

    bars, radar = figures(profiles)
    head = "".join(f"<th>{html.escape(p.model)}</th>" for p in profiles)
    rows = "".join(
        f"<tr><td>{html.escape(h.label)}</td><td>{h.worse} is worse</td>"
        + "".join(f"<td>{html.escape(fmt(p.metrics.get((h.task, h.metric))))}</td>" for p in profiles) + "</tr>"
        for h in HEADLINES)
    comp = "".join(
        f"<tr><td>{html.escape(c.model_b)} vs {html.escape(c.model_a)}</td><td>{html.escape(c.metric)}</td>"
        f"<td>{c.n}</td><td>{c.diff:+.3f} [{c.ci_low:+.3f}, {c.ci_high:+.3f}]</td><td>{c.p_value:.3g}</td>"
        f"<td>{html.escape(c.test)}</td></tr>" for c in comparisons)
    runs = "".join(f"<li>{html.escape(p.model)}: {html.escape(', '.join(p.runs.values()))}</li>" for p in profiles)
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>Alignment profile</title>
<style>body{{font-family:sans-serif;margin:2em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px}}</style>
</head><body><h1>Alignment profile</h1>
<p>{html.escape(NOTICE)}</p>
<table><tr><th>property</th><th>direction</th>{head}</tr>{rows}</table>
<h2>Paired tests (against {html.escape(profiles[0].model) if profiles else ''})</h2>
<table><tr><th>models</th><th>metric</th><th>n</th><th>difference [95% CI]</th><th>p</th><th>test</th></tr>
{comp}</table>
{pio.to_html(bars, include_plotlyjs=True, full_html=False)}
{pio.to_html(radar, include_plotlyjs=False, full_html=False)}
<h2>Runs</h2><ul>{runs}</ul></body></html>"""


def to_json(profiles: list[ModelProfile], comparisons: list[Comparison]) -> str:
    return json.dumps({
        "models": [{"model": p.model, "runs": p.runs,
                    "metrics": {f"{t}.{m}": asdict(c) for (t, m), c in p.metrics.items()}} for p in profiles],
        "comparisons": [asdict(c) for c in comparisons],
    }, indent=2, default=str)


def write_outputs(profiles: list[ModelProfile], comparisons: list[Comparison], html_path: Path | None,
                  json_path: Path | None) -> None:
    if html_path is not None:
        html_path.write_text(html_page(profiles, comparisons), encoding="utf-8")
    if json_path is not None:
        json_path.write_text(to_json(profiles, comparisons), encoding="utf-8")
