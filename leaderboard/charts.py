"""Plotly figures as plain dicts (the browser renders them with the plotly.js we serve).

Built by hand rather than with ``plotly.graph_objects``: the JSON schema of a scatter is small, and
importing plotly's Python package would cost more per request than the figure itself.
"""

from __future__ import annotations

from typing import Any

from harness.types import Direction, MetricInfo

from .queries import RunInfo
from .ranking import direction_of, direction_text, pareto_front

_FONT = {"family": "Inter, system-ui, -apple-system, Segoe UI, sans-serif", "size": 12, "color": "#1f2937"}
_ACCENT = "#2563eb"
_MUTED = "#94a3b8"
_FRONT = "#dc2626"


def _layout(title: str, xtitle: str, ytitle: str, **extra: Any) -> dict[str, Any]:
    return {
        "title": {"text": title, "x": 0, "font": {"size": 14}},
        "font": _FONT,
        "margin": {"l": 60, "r": 20, "t": 40, "b": 100},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "xaxis": {"title": {"text": xtitle}, "gridcolor": "#eef2f7", "automargin": True},
        "yaxis": {"title": {"text": ytitle}, "gridcolor": "#eef2f7", "zeroline": False, "automargin": True},
        "hoverlabel": {"bgcolor": "white"},
        "showlegend": False,
        **extra,
    }


# the axis range a declared scale implies (a bounded score drawn on its whole range, so 0.52 against
# 0.55 does not look like a landslide); raw metrics get plotly's automatic range
SCALE_RANGE = {"fraction": [0.0, 1.0], "percent": [0.0, 100.0]}


def axis_title(metric: str, info: MetricInfo | None) -> str:
    name = info.display if info is not None and info.display else metric
    unit = {"percent": " (%)"}.get(info.scale if info is not None else "", "")
    return f"{name}{unit} · {direction_text(direction_of(info))}"


def _scale_axis(axis: dict[str, Any], info: MetricInfo | None, values: list[float]) -> None:
    """The axis range from the declared scale (widened to any interval end past it); a raw scale is
    autoranged, except when every value is the same (plotly would draw -1..1 around a lone 0.5)."""
    rng = SCALE_RANGE.get(info.scale) if info is not None else None
    if rng is not None:
        lo, hi = min([rng[0], *values]), max([rng[1], *values])
        pad = (hi - lo) * 0.02
        axis["range"] = [lo - pad, hi + pad]
    elif values and max(values) == min(values):
        v = values[0]
        half = abs(v) * 0.1 or 1.0
        axis["range"] = [v - half, v + half]


LABEL_MAX = 32  # a longer label is cut in the middle on the axis (the hover shows it whole)


def short(label: str, limit: int = LABEL_MAX) -> str:
    """``label`` cut to ``limit`` characters in the middle, so the ends (model name, run id) stay."""
    if len(label) <= limit:
        return label
    head = (limit - 1) // 2
    return label[:head] + "…" + label[len(label) - (limit - 1 - head):]


def score_ci_chart(runs: list[RunInfo], metric: str, info: MetricInfo | None) -> dict[str, Any] | None:
    """A horizontal dot plot, best on top (plotly draws the first category at the bottom), with
    asymmetric 95% CI error bars; provisional results (unfinished or small n) are hollow. Without a
    declared direction the dots go from high (top) to low and nothing is called best."""
    lower_better = direction_of(info) == "lower"
    rs = sorted((r for r in runs if r.value is not None), key=lambda r: r.value or 0.0, reverse=lower_better)
    if not rs:  # nothing scored yet: no chart rather than an empty frame
        return None
    full = [f"{r.model} #{r.run_id}" for r in rs]
    labels = _unique([short(label) for label in full])
    values = [r.value for r in rs]
    plus = [max((r.ci_high if r.ci_high is not None else r.value) - r.value, 0.0) for r in rs]  # type: ignore[operator]
    minus = [max(r.value - (r.ci_low if r.ci_low is not None else r.value), 0.0) for r in rs]  # type: ignore[operator]
    trace = {
        "type": "scatter", "mode": "markers", "orientation": "h", "x": values, "y": labels,
        "marker": {"size": 10, "color": _ACCENT, "line": {"color": _ACCENT, "width": 2},
                   "symbol": ["circle-open" if r.provisional else "circle" for r in rs]},
        "error_x": {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus, "color": "#64748b",
                    "thickness": 1.5, "width": 5},
        "customdata": [[r.n, r.ci_low, r.ci_high, name] for r, name in zip(rs, full, strict=True)],
        "hovertemplate": "%{customdata[3]}<br>" + metric + " %{x:.4f} [%{customdata[1]:.4f}, %{customdata[2]:.4f}]"
                         "<br>n=%{customdata[0]}<extra></extra>",
    }
    layout = _layout(f"{metric} with 95% CI (hollow: provisional)", axis_title(metric, info), "",
                     margin={"l": 20, "r": 20, "t": 40, "b": 50}, height=max(300, 90 + 26 * len(rs)))
    layout["yaxis"].update(type="category", automargin=True, gridcolor="#f3f4f6")
    _scale_axis(layout["xaxis"], info, [v for r in rs for v in (r.value, r.ci_low, r.ci_high) if v is not None])
    return {"data": [trace], "layout": layout}


def cost_pareto_chart(runs: list[RunInfo], metric: str, info: MetricInfo | None) -> dict[str, Any] | None:
    """Score against cost per sample; the runs no other run beats on both are joined as the front
    (only for a metric with a declared direction: otherwise "beats" means nothing and no front is drawn)."""
    rs = [r for r in runs if r.value is not None and r.cost_per_sample is not None]
    # a cost axis where every cost is zero (local models, stubs) or one lone run says nothing
    if len(rs) < 2 or not any(r.cost_per_sample for r in rs):
        return None
    direction = direction_of(info)
    front = _front(rs, direction)
    on_front = set(front)
    dots = {
        "type": "scatter", "mode": "markers", "name": "runs",
        "x": [r.cost_per_sample for r in rs], "y": [r.value for r in rs], "text": [r.model for r in rs],
        "marker": {"size": 9, "color": [_FRONT if i in on_front else _ACCENT for i in range(len(rs))]},
        "hovertemplate": "%{text}<br>cost/sample %{x:.6f}<br>" + metric + " %{y:.4f}<extra></extra>",
    }
    line = {
        "type": "scatter", "mode": "lines", "name": "Pareto front", "line": {"color": _FRONT, "shape": "hv",
                                                                             "dash": "dot"},
        "x": [rs[i].cost_per_sample for i in front], "y": [rs[i].value for i in front], "hoverinfo": "skip",
    }
    note = " (Pareto front in red)" if direction else " (no declared direction: no front)"
    title = f"{metric} vs cost per sample{note}"
    layout = _layout(title, "cost per sample (USD)", axis_title(metric, info),
                     margin={"l": 60, "r": 20, "t": 40, "b": 64})
    _scale_axis(layout["yaxis"], info, [r.value for r in rs if r.value is not None])
    return {"data": [line, dots] if direction else [dots], "layout": layout}


def _unique(labels: list[str]) -> list[str]:
    """Category labels must differ (plotly merges equal ones): a repeat gets invisible padding."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        n = seen.get(label, 0)
        seen[label] = n + 1
        out.append(label + "\u200b" * n)
    return out


def _front(rs: list[RunInfo], direction: Direction | None) -> list[int]:
    if direction not in ("higher", "lower"):
        return []
    sign = -1.0 if direction == "lower" else 1.0
    return pareto_front([(r.cost_per_sample or 0.0, sign * (r.value or 0.0)) for r in rs])


def pareto_run_ids(runs: list[RunInfo], direction: Direction | None) -> set[int]:
    rs = [r for r in runs if r.value is not None and r.cost_per_sample is not None]
    return {rs[i].run_id for i in _front(rs, direction)}
