"""The task page's extra chart: stored exact match per run (a plotly figure as JSON)."""

from __future__ import annotations

from typing import Any


def chart(sessions: Any, task: str) -> dict[str, Any] | None:
    from sqlalchemy import select

    from harness.store.schema import MetricRow, RunRow, TaskRow

    with sessions() as s:
        rows = s.execute(select(RunRow.name, MetricRow.value).join(MetricRow, MetricRow.run_id == RunRow.id)
                         .join(TaskRow, RunRow.task_id == TaskRow.id)
                         .where(TaskRow.name == task, MetricRow.name == "exact_match",
                                MetricRow.breakdown_key == "")).all()
    if not rows:
        return None
    return {"data": [{"type": "bar", "x": [r[0] for r in rows], "y": [r[1] for r in rows]}],
            "layout": {"title": {"text": "wordcount: exact match by run"}, "yaxis": {"range": [0, 1]}}}
