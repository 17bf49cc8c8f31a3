"""Quality versus normalised cost for every stored (model, operator, budget) run, the Pareto front,
the SemKNN router's lambda curve, matched-quality / matched-cost comparisons, paired significance,
and the plotly figure (``chart`` returns it as a plain dict for the leaderboard's task page;
``plot_html`` as HTML).

Definitions (ours where the paper leaves them open, stated here):

- a run's **quality** is the mean over samples of the task's primary metric (epochs averaged within
  a sample first); errored and unscored samples are left out and counted;
- its **normalised cost** is the mean over samples of ``details["cost"]["normalised"]`` written by
  the operators (total cost / one plain call of the base model); a run without an operator is one
  plain call per sample, cost 1;
- the **Pareto front**: runs not dominated by another run with cost <= and quality >= (one strict);
- **matched-quality cost saving**: 1 - c_router(q_ref) / c_ref, where q_ref, c_ref are the strongest
  fixed technique's held-out quality and cost and c_router(q) is the cheapest cost at which the
  router's curve (sorted by cost, piecewise-linear, made monotone by keeping running maxima of
  quality) reaches q;
- **matched-cost quality gain**: q_router(c_ref) - q_ref (absolute and relative), and the same
  against single-shot decoding (the plain run) when one is stored;
- **paired significance**: the router at the lambda whose held-out cost is closest to c_ref versus
  the strongest fixed technique (and versus plain) on the same held-out samples, with
  :func:`harness.stats.paired_test` (exact McNemar for 0/1 scores).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from harness import results
from harness.modelspec import SpecNode, parse_spec
from harness.stats import mean_ci, paired_test

HIDDEN_PARAMS = {"extract", "judge", "price_in", "price_out", "judge_max_tokens"}


@dataclass
class RunPoint:
    run_id: int
    run_name: str
    task: str
    model_spec: str
    base: str
    operator: str  # "plain" for a run without an operator
    budget: str  # the operator's parameters that set how much it spends, e.g. "n=5"
    quality: float
    ci_low: float
    ci_high: float
    cost: float  # mean normalised cost
    usd: float  # mean cost per sample (price-table cost; 0 for unpriced models)
    n: int
    n_errors: int
    quality_by_sample: dict[str, float] = field(default_factory=dict)
    cost_by_sample: dict[str, float] = field(default_factory=dict)
    usd_by_sample: dict[str, float] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.operator if self.operator == "plain" else f"{self.operator}({self.budget})" if self.budget \
            else self.operator

    @property
    def technique(self) -> str:
        return f"{self.base} · {self.label}"


def _leaves(node: SpecNode) -> list[str]:
    if not node.is_operator:
        return [f"{node.name}:{node.path}" if node.path is not None else node.name]
    return [leaf for arg in node.args for leaf in _leaves(arg)]


def describe_spec(spec: str) -> tuple[str, str, str]:
    """(base models, operator, budget) of a model spec; nested operators are shown whole."""
    node = parse_spec(spec)
    if not node.is_operator:
        return spec, "plain", ""
    base = ", ".join(_leaves(node))
    budget = ", ".join(f"{k}={v}" for k, v in sorted(node.params.items()) if k not in HIDDEN_PARAMS)
    nested = any(a.is_operator for a in node.args)
    return base, node.name if not nested else spec, budget


def load_points(sessions: sessionmaker[Session], task: str | None = None) -> list[RunPoint]:
    with sessions() as s:  # one snapshot for every run
        points = []
        for run in results.runs(s, task=task):
            metric = run.primary_metric
            q_acc: dict[str, list[float]] = defaultdict(list)
            c_acc: dict[str, list[float]] = defaultdict(list)
            usd: dict[str, list[float]] = defaultdict(list)
            n_err = 0
            for r in results.records(s, run):
                if r.error is not None:
                    n_err += 1
                    continue
                split = r.details.get("cost") or {}
                c_acc[r.sample_id].append(float(split["normalised"]) if split.get("normalised") is not None else 1.0)
                usd[r.sample_id].append(float(r.cost))
                value = r.scores.get(metric)
                if r.unscored is None and value is not None:
                    q_acc[r.sample_id].append(float(value))
            if not q_acc:
                continue
            q_by = {sid: sum(v) / len(v) for sid, v in q_acc.items()}
            c_by = {sid: sum(v) / len(v) for sid, v in c_acc.items()}
            usd_by = {sid: sum(v) / len(v) for sid, v in usd.items()}
            est = mean_ci(list(q_by.values()))
            model_spec = str(run.config.get("model", ""))
            try:
                base, op, budget = describe_spec(model_spec)
            except ValueError:
                base, op, budget = model_spec, "plain", ""
            points.append(RunPoint(run.id, run.name, run.task, model_spec, base, op, budget, est.value,
                                   est.ci_low, est.ci_high, float(np.mean(list(c_by.values()))),
                                   float(np.mean(list(usd_by.values()))) if usd_by else 0.0, est.n, n_err, q_by,
                                   c_by, usd_by))
    return points


def in_usd(points: Sequence[RunPoint]) -> list[RunPoint]:
    """The same points with cost = $ per sample instead of normalised cost: the comparable axis when
    runs use different base models (each normalised cost is relative to its own base model)."""
    from dataclasses import replace

    return [replace(p, cost=p.usd, cost_by_sample=dict(p.usd_by_sample)) for p in points]


def pareto_front(points: Sequence[RunPoint]) -> list[RunPoint]:
    """Non-dominated runs (lower cost and higher quality are better), sorted by cost."""
    front = []
    for p in points:
        dominated = any(o is not p and o.cost <= p.cost and o.quality >= p.quality
                        and (o.cost < p.cost or o.quality > p.quality) for o in points)
        if not dominated:
            front.append(p)
    return sorted(front, key=lambda p: (p.cost, -p.quality))


def _monotone_curve(costs: Sequence[float], qualities: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Sort by cost and keep the running maximum of quality (the best reachable at each budget)."""
    order = np.argsort(np.asarray(costs), kind="stable")
    c = np.asarray(costs, dtype=float)[order]
    q = np.maximum.accumulate(np.asarray(qualities, dtype=float)[order])
    return c, q


def cost_at_quality(costs: Sequence[float], qualities: Sequence[float], target: float) -> float | None:
    """Cheapest (interpolated) cost at which the curve reaches ``target`` quality; None if never."""
    c, q = _monotone_curve(costs, qualities)
    if q.size == 0 or q[-1] < target:
        return None
    i = int(np.argmax(q >= target))
    if i == 0 or q[i] == q[i - 1]:
        return float(c[i])
    return float(c[i - 1] + (target - q[i - 1]) * (c[i] - c[i - 1]) / (q[i] - q[i - 1]))


def quality_at_cost(costs: Sequence[float], qualities: Sequence[float], budget: float) -> float | None:
    """Best (interpolated) quality the curve reaches within ``budget``; None if even its cheapest
    point costs more."""
    c, q = _monotone_curve(costs, qualities)
    if c.size == 0 or budget < c[0]:
        return None
    if budget >= c[-1]:
        return float(q[-1])
    i = int(np.searchsorted(c, budget, side="right"))
    lo, hi = i - 1, i
    if c[hi] == c[lo]:
        return float(q[lo])
    return float(q[lo] + (budget - c[lo]) * (q[hi] - q[lo]) / (c[hi] - c[lo]))


@dataclass
class RouterReport:
    techniques: list[str]
    n_train: int
    n_test: int
    curve: list[dict[str, Any]]
    fixed_on_test: dict[str, tuple[float, float]]
    strongest: str
    plain: str | None
    matched_quality_cost_saving: float | None
    matched_cost_quality: float | None
    matched_cost_gain: float | None
    matched_cost_gain_relative: float | None
    gain_over_single_relative: float | None
    significance: list[dict[str, Any]]


def router_report(points: Sequence[RunPoint], prompts: dict[str, str], *, train_frac: float = 0.5, seed: int = 0,
                  k: int = 5, embed: Callable[[Sequence[str]], np.ndarray] | None = None,
                  lambdas: Sequence[float] | None = None) -> RouterReport | None:
    """Fit the SemKNN router over the stored runs of one task (techniques = runs) and compare it with
    the fixed techniques on the held-out split. None when fewer than two runs share samples."""
    from harness.models.operators.router import fit_and_sweep

    if len(points) < 2:
        return None
    by_name: dict[str, RunPoint] = {}
    for p in points:  # one run per technique: the latest wins
        by_name[p.technique] = p
    techniques = sorted(by_name)
    shared = set.intersection(*(set(p.quality_by_sample) for p in by_name.values())) & set(prompts)
    if len(shared) < 4:
        return None
    quality = {t: {i: by_name[t].quality_by_sample[i] for i in shared} for t in techniques}
    cost = {t: {i: by_name[t].cost_by_sample.get(i, by_name[t].cost) for i in shared} for t in techniques}
    fit = fit_and_sweep({i: prompts[i] for i in shared}, quality, cost, techniques, train_frac=train_frac,
                        seed=seed, k=k, lambdas=lambdas, embed=embed)
    curve = fit["curve"]
    fixed = fit["fixed_on_test"]
    strongest = max(techniques, key=lambda t: (fixed[t][0], -fixed[t][1]))
    q_ref, c_ref = fixed[strongest]
    costs, quals = [pt.cost for pt in curve], [pt.quality for pt in curve]
    c_match = cost_at_quality(costs, quals, q_ref)
    q_match = quality_at_cost(costs, quals, c_ref)
    plains = [t for t in techniques if by_name[t].operator == "plain"]
    # single-shot decoding = the best plain run (the conservative baseline when several models are stored)
    plain = max(plains, key=lambda t: (fixed[t][0], -fixed[t][1])) if plains else None
    test_ids = fit["test"]
    near = min(curve, key=lambda pt: (abs(pt.cost - c_ref), -pt.quality))
    significance = []
    for ref in [strongest] + ([plain] if plain and plain != strongest else []):
        j = techniques.index(ref)
        a = fit["test_quality"][:, j]
        b = np.asarray(near.per_sample_quality)
        ok = ~np.isnan(a) & ~np.isnan(b)
        if ok.sum() == 0:
            continue
        res = paired_test(a[ok], b[ok], metric="quality")
        significance.append({"router_lambda": near.lam, "router_cost": near.cost, "versus": ref, "n": res.n,
                             "diff": res.diff, "ci_low": res.ci_low, "ci_high": res.ci_high,
                             "p_value": res.p_value, "test": res.test})
    q_plain = fixed[plain][0] if plain else None
    return RouterReport(
        techniques=techniques, n_train=len(fit["train"]), n_test=len(test_ids),
        curve=[{"lambda": pt.lam, "quality": pt.quality, "cost": pt.cost, "usage": pt.usage} for pt in curve],
        fixed_on_test=fixed, strongest=strongest, plain=plain,
        matched_quality_cost_saving=None if c_match is None or c_ref <= 0 else 1.0 - c_match / c_ref,
        matched_cost_quality=q_match,
        matched_cost_gain=None if q_match is None else q_match - q_ref,
        matched_cost_gain_relative=None if q_match is None or q_ref <= 0 else (q_match - q_ref) / q_ref,
        gain_over_single_relative=None if q_match is None or not q_plain else (q_match - q_plain) / q_plain,
        significance=significance,
    )


def load_prompts(sessions: sessionmaker[Session], run_ids: Sequence[int]) -> dict[str, str]:
    """sample id -> the user text of its stored request (the router's input)."""
    out: dict[str, str] = {}
    with sessions() as s:
        for row in (r for run_id in run_ids for r in results.samples(s, run_id)):
            sid = row.sample_id
            if sid in out:
                continue
            msgs = row.input.get("messages") or []
            texts = []
            for m in msgs:
                if m.get("role") != "user":
                    continue
                content = m.get("content")
                if isinstance(content, str):
                    texts.append(content)
                else:
                    texts += [p.get("text", "") for p in content or [] if p.get("type") == "text"]
            out[sid] = "\n".join(texts)
    return out


@dataclass
class Report:
    task: str | None
    points: list[RunPoint]
    front: list[RunPoint]
    router: RouterReport | None
    notes: list[str] = field(default_factory=list)
    cost_basis: str = "normalised"


def build_report(sessions: sessionmaker[Session], task: str | None = None, *, train_frac: float = 0.5,
                 seed: int = 0, k: int = 5, router: bool = True, cost: str = "normalised",
                 embed: Callable[[Sequence[str]], np.ndarray] | None = None) -> Report:
    """``cost="normalised"`` (x one plain call of each run's base model) or ``"usd"`` ($ per sample)."""
    if cost not in ("normalised", "usd"):
        raise ValueError(f"cost must be 'normalised' or 'usd', got {cost!r}")
    points = load_points(sessions, task)
    notes = []
    if cost == "usd":
        points = in_usd(points)
        if points and not any(p.usd > 0 for p in points):
            notes.append("no run has a priced cost (local models cost $0): use the normalised cost")
    elif len({p.base for p in points}) > 1:
        notes.append("runs use different base models; normalised costs are relative to each run's own base "
                     "model (use --cost usd to compare in dollars)")
    tasks = sorted({p.task for p in points})
    if task is None and len(tasks) > 1:
        notes.append(f"runs of {len(tasks)} tasks mixed ({', '.join(tasks)}); pass --task to separate them")
    rr = None
    if router and len(tasks) == 1:
        prompts = load_prompts(sessions, [p.run_id for p in points])
        try:
            rr = router_report(points, prompts, train_frac=train_frac, seed=seed, k=k, embed=embed)
        except ValueError as exc:
            notes.append(f"router not fitted: {exc}")
        if rr is None and not notes:
            notes.append("router not fitted: needs at least two runs sharing at least four samples")
    front = [p for t in tasks for p in pareto_front([q for q in points if q.task == t])]  # per task
    return Report(task, points, front, rr, notes, cost)


# ---- plot ---------------------------------------------------------------------------------------------
_COLOURS = ["#2563eb", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d", "#65a30d", "#b45309", "#475569"]


def figure_dict(report: Report) -> dict[str, Any]:
    """The quality-vs-cost figure as a plain plotly JSON dict (no plotly import: the leaderboard
    renders such dicts with the plotly.js it serves)."""
    data: list[dict[str, Any]] = []
    by_op: dict[str, list[RunPoint]] = defaultdict(list)
    for p in report.points:
        by_op[p.operator].append(p)
    for i, (op, pts) in enumerate(sorted(by_op.items())):
        data.append({
            "type": "scatter", "mode": "markers", "name": op, "x": [p.cost for p in pts],
            "y": [p.quality for p in pts], "marker": {"size": 10, "color": _COLOURS[i % len(_COLOURS)]},
            "error_y": {"type": "data", "symmetric": False, "array": [p.ci_high - p.quality for p in pts],
                        "arrayminus": [p.quality - p.ci_low for p in pts], "thickness": 1},
            "text": [f"{p.base}<br>{p.label}<br>n={p.n} · run {p.run_name}" for p in pts],
            "hovertemplate": "%{text}<br>cost %{x:.2f}x<br>quality %{y:.3f}<extra></extra>",
        })
    if report.front:
        data.append({"type": "scatter", "mode": "lines", "name": "Pareto front",
                     "x": [p.cost for p in report.front], "y": [p.quality for p in report.front],
                     "line": {"dash": "dot", "color": "black"}, "hoverinfo": "skip"})
    if report.router is not None:
        # the router is scored on the held-out samples only: show the fixed techniques there too
        held = report.router.fixed_on_test
        data.append({"type": "scatter", "mode": "markers", "name": "fixed techniques, held-out samples",
                     "x": [c for _, c in held.values()], "y": [q for q, _ in held.values()], "text": list(held),
                     "marker": {"size": 11, "symbol": "circle-open", "color": "#dc2626"},
                     "hovertemplate": "%{text} (held-out)<br>cost %{x:.2f}x<br>quality %{y:.3f}<extra></extra>"})
        curve = sorted(report.router.curve, key=lambda pt: pt["cost"])
        data.append({"type": "scatter", "mode": "lines+markers",
                     "name": f"SemKNN router (held-out n={report.router.n_test})",
                     "x": [pt["cost"] for pt in curve], "y": [pt["quality"] for pt in curve],
                     "line": {"color": "#dc2626"}, "marker": {"size": 5},
                     "text": [f"lambda={pt['lambda']:.4g}" for pt in curve],
                     "hovertemplate": "%{text}<br>cost %{x:.2f}x<br>quality %{y:.3f}<extra></extra>"})
    title = "Reliability: quality vs normalised cost" + (f" · {report.task}" if report.task else "")
    layout = {"title": {"text": title, "x": 0}, "template": "plotly_white",
              "xaxis": {"title": {"text": "normalised cost (x one plain call)" if report.cost_basis == "normalised"
                                  else "cost per sample ($)"}, "type": "log"},
              "yaxis": {"title": {"text": "quality (primary metric)"}},
              "legend": {"orientation": "h", "y": -0.2}, "margin": {"l": 60, "r": 20, "t": 50, "b": 100}}
    return {"data": data, "layout": layout}


def chart(sessions: sessionmaker[Session], task: str, *, router: bool = False) -> dict[str, Any] | None:
    """The leaderboard's hook: the task's quality-vs-cost figure dict, or None without runs.
    ``router=False`` by default: fitting it embeds every prompt (seconds of CPU, torch), which a web
    request should not pay; pass True where that is acceptable (or cache the result)."""
    report = build_report(sessions, task, router=router)
    return figure_dict(report) if report.points else None


def figure(report: Report):  # type: ignore[no-untyped-def]
    import plotly.graph_objects as go

    return go.Figure(figure_dict(report))


def plot_html(sessions: sessionmaker[Session], task: str | None = None, *, include_plotlyjs: bool | str = False,
              full_html: bool = False, router: bool = True) -> str:
    """HTML of the quality-vs-cost plot for a task's stored runs.

    ``include_plotlyjs=False`` returns a bare ``<div>`` that expects plotly.js on the page (serve it
    from the plotly package, never a CDN); returns "" when the task has no runs."""
    import plotly.io as pio

    report = build_report(sessions, task, router=router)
    if not report.points:
        return ""
    return pio.to_html(figure_dict(report), include_plotlyjs=include_plotlyjs, full_html=full_html)


def report_dict(report: Report) -> dict[str, Any]:
    def point(p: RunPoint) -> dict[str, Any]:
        return {"run": p.run_name, "task": p.task, "model": p.model_spec, "base": p.base, "operator": p.operator,
                "budget": p.budget, "quality": p.quality, "ci": [p.ci_low, p.ci_high], "cost": p.cost,
                "usd_per_sample": p.usd, "n": p.n, "errors": p.n_errors}

    rr = report.router
    return {
        "task": report.task,
        "cost_basis": report.cost_basis,
        "points": [point(p) for p in report.points],
        "pareto_front": [p.run_name for p in report.front],
        "router": None if rr is None else {
            k: v for k, v in rr.__dict__.items() if k not in ("fixed_on_test",)
        } | {"fixed_on_test": {t: {"quality": q, "cost": c} for t, (q, c) in rr.fixed_on_test.items()}},
        "notes": report.notes,
    }


def fmt(x: float | None, pct: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{100 * x:+.1f}%" if pct else f"{x:.3f}"


def fit_router(sessions: sessionmaker[Session], task: str, *, k: int = 5,
               embed: Callable[[Sequence[str]], np.ndarray] | None = None) -> tuple[Any, list[str]]:
    """Fit a SemKNN router on *all* samples shared by the task's stored runs (for online use with
    the ``semknn`` operator). Returns (router, model specs of its techniques, in order)."""
    from harness.models.operators.router import SemKNNRouter, default_embed

    by_name: dict[str, RunPoint] = {}
    for p in load_points(sessions, task):
        by_name[p.technique] = p
    if len(by_name) < 2:
        raise ValueError(f"task {task!r} needs at least two stored runs (techniques) to route between")
    techniques = sorted(by_name)
    prompts = load_prompts(sessions, [p.run_id for p in by_name.values()])
    ids = sorted(set.intersection(*(set(p.quality_by_sample) for p in by_name.values())) & set(prompts))
    if not ids:
        raise ValueError(f"the runs of task {task!r} share no scored samples")
    vectors = (embed or default_embed)([prompts[i] for i in ids])
    quality = np.array([[by_name[t].quality_by_sample[i] for t in techniques] for i in ids], dtype=float)
    cost = np.array([[by_name[t].cost_by_sample.get(i, by_name[t].cost) for t in techniques] for i in ids])
    router = SemKNNRouter(techniques, k=k).fit(vectors, quality, cost)
    return router, [by_name[t].model_spec for t in techniques]
