"""The precision-recall view: per run (model), recall@K against precision, from the stored metrics.

Recall-only leaderboards reward long, redundant relation lists; plotting R@K against precision (with
redundancy and informativeness in the table) shows that trade-off. ``chart(sessions, task)`` is the
leaderboard's task-page hook (a plain plotly figure dict, None without runs), like the reliability task's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from harness import results

COLUMNS = ("R@20", "R@50", "mR@20", "precision", "recall", "f1", "redundancy", "temporal_redundancy",
           "informative_recall", "trivial_rate")


@dataclass
class RunPR:
    run: str
    model: str
    values: dict[str, tuple[float, float | None, float | None]] = field(default_factory=dict)


def load(sessions: sessionmaker[Session], task: str = "dsgg") -> list[RunPR]:
    with sessions() as s:  # one snapshot for every run
        out = []
        for run in results.runs(s, task=task):
            values = {m.name: (m.value, m.ci_low, m.ci_high) for m in results.metrics(s, run, breakdown="")}
            if "precision" in values:
                out.append(RunPR(run.name, run.model, values))
    return out


def figure_dict(runs: list[RunPR], k: int = 20) -> dict[str, Any]:
    """Scatter of precision (x) against R@K (y), one point per run with both CIs as error bars."""
    key = f"R@{k}"

    def err(name: str, r: RunPR) -> tuple[float, float]:
        v, lo, hi = r.values[name]
        return (v - lo if lo is not None else 0.0, hi - v if hi is not None else 0.0)

    pts = [r for r in runs if key in r.values]
    # one trace per run, named in the legend: text labels beside the points overlap when runs lie close
    data = [{
        "type": "scatter", "mode": "markers", "name": r.model,
        "x": [r.values["precision"][0]], "y": [r.values[key][0]],
        "error_x": {"type": "data", "symmetric": False, "array": [err("precision", r)[1]],
                    "arrayminus": [err("precision", r)[0]]},
        "error_y": {"type": "data", "symmetric": False, "array": [err(key, r)[1]], "arrayminus": [err(key, r)[0]]},
        "customdata": [[r.values.get("redundancy", (float("nan"),))[0],
                        r.values.get("informative_recall", (float("nan"),))[0]]],
        "hovertemplate": "%{fullData.name}<br>precision %{x:.3f}<br>" + key + " %{y:.3f}<br>redundancy "
                         "%{customdata[0]:.3f}<br>informative recall %{customdata[1]:.3f}<extra></extra>",
        "marker": {"size": 10},
    } for r in pts]
    layout = {"title": {"text": f"DSGG: recall@{k} against precision", "x": 0}, "template": "plotly_white",
              "xaxis": {"title": {"text": "precision (one-to-one matches / predictions)"}, "range": [0, 1.05]},
              "yaxis": {"title": {"text": f"R@{k} (Action Genome protocol)"}, "range": [0, 1.05]},
              "margin": {"l": 60, "r": 20, "t": 50, "b": 60}, "showlegend": True,
              "legend": {"orientation": "h", "y": -0.22, "x": 0, "font": {"size": 11}}}
    return {"data": data, "layout": layout}


def chart(sessions: sessionmaker[Session], task: str = "dsgg") -> dict[str, Any] | None:
    """The leaderboard hook: the precision-recall figure of the task's runs, or None without runs."""
    runs = load(sessions, task)
    return figure_dict(runs) if runs else None


def table(runs: list[RunPR], columns: tuple[str, ...] = COLUMNS) -> list[dict[str, Any]]:
    return [{"run": r.run, "model": r.model, **{c: r.values[c][0] for c in columns if c in r.values}} for r in runs]
