"""Plotly figures as plain dicts (the browser renders them with the plotly.js we serve).

Built by hand rather than with ``plotly.graph_objects``: the JSON schema of a scatter is small, and
importing plotly's Python package would cost more per request than the figure itself.
"""

from __future__ import annotations

from typing import Any

from .queries import RunInfo
from .ranking import pareto_front

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


def score_ci_chart(runs: list[RunInfo], metric: str, lower_better: bool) -> dict[str, Any]:
    """A horizontal dot plot, best on top, with asymmetric 95% CI error bars; provisional results
    (unfinished or small n) are hollow."""
    rs = sorted((r for r in runs if r.value is not None), key=lambda r: r.value or 0.0, reverse=lower_better)
    labels = [f"{r.model} #{r.run_id}" for r in rs]
    values = [r.value for r in rs]
    plus = [max((r.ci_high if r.ci_high is not None else r.value) - r.value, 0.0) for r in rs]  # type: ignore[operator]
    minus = [max(r.value - (r.ci_low if r.ci_low is not None else r.value), 0.0) for r in rs]  # type: ignore[operator]
    trace = {
        "type": "scatter", "mode": "markers", "orientation": "h", "x": values, "y": labels,
        "marker": {"size": 10, "color": _ACCENT, "line": {"color": _ACCENT, "width": 2},
                   "symbol": ["circle-open" if r.provisional else "circle" for r in rs]},
        "error_x": {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus, "color": "#64748b",
                    "thickness": 1.5, "width": 5},
        "customdata": [[r.n, r.ci_low, r.ci_high] for r in rs],
        "hovertemplate": "%{y}<br>" + metric + " %{x:.4f} [%{customdata[1]:.4f}, %{customdata[2]:.4f}]"
                         "<br>n=%{customdata[0]}<extra></extra>",
    }
    layout = _layout(f"{metric} with 95% CI (hollow: provisional)", metric, "",
                     margin={"l": 20, "r": 20, "t": 40, "b": 50}, height=max(300, 90 + 26 * len(rs)))
    layout["yaxis"].update(type="category", automargin=True, gridcolor="#f3f4f6")
    return {"data": [trace], "layout": layout}


def cost_pareto_chart(runs: list[RunInfo], metric: str, lower_better: bool) -> dict[str, Any] | None:
    """Score against cost per sample; the runs no other run beats on both are joined as the front."""
    rs = [r for r in runs if r.value is not None and r.cost_per_sample is not None]
    if not rs:
        return None
    sign = -1.0 if lower_better else 1.0
    front = pareto_front([(r.cost_per_sample or 0.0, sign * (r.value or 0.0)) for r in rs])
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
    return {"data": [line, dots], "layout": _layout(f"{metric} vs cost per sample (Pareto front in red)",
                                                    "cost per sample (USD)", metric,
                                                    margin={"l": 60, "r": 20, "t": 40, "b": 50})}


def pareto_run_ids(runs: list[RunInfo], lower_better: bool) -> set[int]:
    rs = [r for r in runs if r.value is not None and r.cost_per_sample is not None]
    sign = -1.0 if lower_better else 1.0
    return {rs[i].run_id for i in pareto_front([(r.cost_per_sample or 0.0, sign * (r.value or 0.0)) for r in rs])}
