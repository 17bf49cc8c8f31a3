"""What each page shows, as template context plus the exportable tables (blocking DB work).

Each ``*_view`` returns a :class:`View`; the HTML route renders ``template`` with ``context`` and
the API routes serve ``tables`` as JSON or CSV, so a page and its exports come from one computation.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from harness.store.schema import OPERATOR, ModelRow, RunRow, SampleResultRow, TaskRow

from . import charts, queries
from .badges import Badges
from .cache import ViewCache
from .comparable import mark_settings, short
from .kinds import KIND_LABELS, KIND_NOTES, KIND_ORDER, model_kind
from .media import sample_media
from .model_cards import card_for
from .names import model_labels
from .ranking import PROVISIONAL_N, STANDARD, direction_of, direction_text, format_rank, metric_info, rank_ranges
from .sample_filter import clamp_page, parse_filter, parse_sort, sort_options
from .tables import Table
from .winrate import mean_win_rates


class NotFound(LookupError):
    """The page's object does not exist (404)."""


@dataclass
class View:
    template: str
    context: dict[str, Any]
    tables: dict[str, Table] = field(default_factory=dict)


# ---- overview -------------------------------------------------------------------------------------

SORT_KEYS = ("avg", "rank", "model", "backend", "size")


@dataclass(slots=True)
class OverviewParams:
    sort: str = "avg"
    dir: str = ""  # "" = the natural direction of the sort key
    family: str = ""
    modality: str = ""
    backend: str = ""
    q: str = ""
    size: str = ""  # a SIZE_BUCKETS label

    def as_dict(self) -> dict[str, str]:
        return {"sort": self.sort, "dir": self.dir, "family": self.family, "modality": self.modality,
                "backend": self.backend, "size": self.size, "q": self.q}


# parameter-count buckets for the size filter: label -> [low, high)
SIZE_BUCKETS = {"<1B": (0.0, 1e9), "1-10B": (1e9, 1e10), "10-100B": (1e10, 1e11), ">=100B": (1e11, float("inf")),
                "unknown": (-1.0, 0.0)}


def in_size_bucket(size: str, bucket: str) -> bool:
    lo, hi = SIZE_BUCKETS.get(bucket, (-math.inf, math.inf))
    return lo <= size_value(size) < hi


@dataclass(slots=True)
class KindList:
    """One kind's ranked list on the overview: its lines, the columns it has results in, and the
    settings each column compares at."""
    kind: str
    label: str
    note: str
    lines: list[queries.ModelLine]
    tasks: list[queries.TaskColumn]
    references: dict[str, str]  # task -> comparable.short(reference settings)
    differs: set[str]  # tasks where a shown result is at other settings than the reference


def overview_view(sessions: sessionmaker[Session], cache: ViewCache, p: OverviewParams) -> View:
    def load() -> queries.OverviewData:
        with sessions() as s:
            return queries.overview_data(s)

    # never stale: pages built from it are stored as current
    data: queries.OverviewData = cache.get(("overview-data",), load, allow_stale=False, scope="summary")
    tasks = [t for t in data.tasks if (not p.family or t.family == p.family)
             and (not p.modality or p.modality in t.modalities)]
    names = [t.name for t in tasks]
    directions = {t.name: t.direction for t in tasks}
    sort = p.sort if p.sort in SORT_KEYS or (p.sort.startswith("task:") and p.sort[5:] in names) else "avg"
    rank_key = sort[5:] if sort.startswith("task:") else "avg"
    rank_direction = "higher" if rank_key == "avg" else directions.get(rank_key)
    # best first by the declared direction; a column of unknown direction sorts high to low (a sort, not a rank)
    natural_desc = sort == "avg" or (sort.startswith("task:") and rank_direction != "lower")
    desc = {"asc": False, "desc": True}.get(p.dir, natural_desc)

    lists: list[KindList] = []
    for kind in KIND_ORDER:
        members = [m for m in data.lines if m.kind == kind]
        if not members:
            continue
        # win rates within the kind, over every model of it with a comparable result on the shown
        # tasks (a model filter narrows the table, never the opponents a model is measured against)
        wins = mean_win_rates({m.model_id: {n: m.cells[n].scored for n in names
                                            if n in m.cells and m.cells[n].comparable} for m in members},
                              directions)
        lines = [line for src in members if (line := _filtered_line(src, names, p)) is not None]
        for line in lines:
            line.win = wins[line.model_id]
        queries.rank_lines(lines, rank_key, rank_direction)
        lines = _sorted_lines(lines, sort, rank_key, desc)
        if not lines:
            continue
        shown = [t for t in tasks if any(t.name in m.cells for m in lines)]
        refs = {t.name: short(ref) for t in shown if (ref := data.references.get((kind, t.name)))}
        differs = {n for m in lines for n, c in m.cells.items() if c.settings_differ}
        lists.append(KindList(kind, KIND_LABELS[kind], KIND_NOTES[kind], lines, shown, refs, differs))

    table = Table("overview", ["kind", "rank_best", "rank_worst", "model", "model_id", "spec", "backend", "size",
                               "organisation", "licence", "mean_win_rate", "mean_win_rate_ci_low",
                               "mean_win_rate_ci_high", "win_rate_n_tasks", "win_rate_n_opponents"]
                  + [f"{n}{suffix}" for n in names for suffix in ("", "_ci_low", "_ci_high", "_n", "_run_id",
                                                                   "_provisional", "_settings", "_settings_differ",
                                                                   "_stub_judge")])
    for group in lists:
        for m in group.lines:
            row: list[Any] = [group.kind, m.rank[0] if m.rank else None, m.rank[1] if m.rank else None, m.model,
                              m.model_id, m.spec, m.backend, m.size, m.card.organisation if m.card else "",
                              m.card.licence if m.card else "", m.win.value, m.win.ci_low, m.win.ci_high,
                              m.win.n_tasks, m.win.n_opponents]
            for n in names:
                c = m.cells.get(n)
                row += ([c.value, c.ci_low, c.ci_high, c.n, c.run_id, c.provisional, short(c.settings),
                         c.settings_differ, c.stub_judge] if c else [None] * 9)
            table.rows.append(row)
    all_lines = [m for group in lists for m in group.lines]
    n_runs = sum(len(m.cells) for m in all_lines)
    return View("overview.html", {
        "page_title": "Leaderboard", "nav": "overview", "tasks": tasks, "lists": lists, "lines": all_lines,
        "params": p.as_dict(), "sort": sort, "desc": desc, "rank_key": rank_key, "families": data.families,
        "modalities": data.modalities, "backends": data.backends, "n_runs": n_runs, "sizes": list(SIZE_BUCKETS),
        "provisional_n": PROVISIONAL_N, "format_rank": format_rank, "direction_text": direction_text,
        "unranked_tasks": [t for t in tasks if t.direction is None], "short": short,
    }, {"overview": table})


def _filtered_line(src: queries.ModelLine, names: list[str], p: OverviewParams) -> queries.ModelLine | None:
    """A copy of ``src`` with the shown columns' cells, or None when the model filters leave it out
    (the cached line is never changed: it is shared by every request)."""
    if p.backend and src.backend != p.backend:
        return None
    if p.size and not in_size_bucket(src.size, p.size):
        return None
    if p.q and p.q.lower() not in f"{src.model} {src.spec}".lower():
        return None
    cells = {n: src.cells[n] for n in names if n in src.cells}
    if not cells:
        return None
    return queries.ModelLine(src.model_id, src.model, src.spec, src.backend, src.size, cells, kind=src.kind,
                             card=src.card)


def _sorted_lines(lines: list[queries.ModelLine], sort: str, rank_key: str, desc: bool) -> list[queries.ModelLine]:
    def score_of(line: queries.ModelLine) -> float | None:
        if rank_key == "avg":
            return line.win.value
        cell = line.cells.get(rank_key)
        return cell.value if cell else None

    if sort in ("model", "backend"):
        return sorted(lines, key=lambda m: (getattr(m, sort) or "").lower(), reverse=desc)
    if sort == "size":
        return sorted(lines, key=lambda m: size_value(m.size), reverse=desc)
    if sort == "rank":
        return sorted(lines, key=lambda m: (m.rank is None, m.rank or (0, 0), m.model.lower()), reverse=desc)
    def compared(line: queries.ModelLine) -> bool:
        return rank_key == "avg" or line.cells[rank_key].comparable

    # missing scores always last; before them the results shown but not compared (a stub judge's
    # 100.0 never heads a column it is not ranked in)
    present = [m for m in lines if score_of(m) is not None]
    missing = [m for m in lines if score_of(m) is None]
    present.sort(key=lambda m: score_of(m) or 0.0, reverse=desc)
    present.sort(key=lambda m: not compared(m))  # stable: the value order holds within each part
    return present + sorted(missing, key=lambda m: m.model.lower())


_SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([kmbt]?)", re.I)
_SCALE = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


def size_value(size: str) -> float:
    """Parameter count from "7B", "135M", "1.5b" or a plain number; unknown sizes sort first."""
    match = _SIZE.search(size or "")
    return float(match.group(1)) * _SCALE[match.group(2).lower()] if match else -1.0


# ---- task ------------------------------------------------------------------------------------------

RUN_COLUMNS = ["run_id", "run_name", "model", "model_id", "task", "task_version", "task_hash", "status", "n",
               "n_done", "n_samples", "n_errors", "metric", "value", "ci_low", "ci_high", "cost_per_sample",
               "total_cost", "finished_at", "kind", "judge_spec", "stub_judge"]


def _run_row(r: queries.RunInfo) -> list[Any]:
    return [r.run_id, r.run_name, r.model, r.model_id, r.task, r.task_version, r.task_hash, r.status, r.n, r.n_done,
            r.n_samples, r.n_errors, r.primary_metric, r.value, r.ci_low, r.ci_high, r.cost_per_sample,
            r.total_cost, r.finished_at.isoformat() if r.finished_at else None, r.kind, r.judge_spec, r.stub_judge]


METRIC_COLUMNS = ["run_id", "model", "metric", "breakdown_key", "breakdown_value", "value", "ci_low", "ci_high", "n"]


def task_view(sessions: sessionmaker[Session], name: str) -> View:
    with sessions() as s:
        runs = queries.run_infos(s, task=name)
        if not runs:
            raise NotFound(f"no runs of task {name!r}")
        # the operator's declarations when there are any, never a push token's over them; every run
        # shown and ranked by that one headline metric
        metric, declared = queries.declarations(runs)
        queries.align(s, runs, metric)
        chosen = {r.run_id for r in queries.best_runs(runs).values()}
        metrics = queries.metrics_of(s, sorted(chosen))
        # the operator's description of the task before any push token's
        desc_row = s.scalar(select(TaskRow.description).where(TaskRow.name == name)
                            .order_by(TaskRow.owner != OPERATOR, TaskRow.id.desc()).limit(1))
    info = metric_info(declared, metric)
    direction = direction_of(info)
    # one group per kind of model, each compared at its own reference settings: ranks and the Pareto
    # front come from a group's comparable runs only (never a stub judge's, never another setting's)
    best: list[queries.RunInfo] = []
    ranks: dict[int, tuple[int, int] | None] = {}
    front: set[int] = set()
    references: dict[str, str] = {}
    for kind in KIND_ORDER:
        group = sorted((r for r in runs if r.run_id in chosen and r.kind == kind), key=lambda r: r.value or 0.0,
                       reverse=direction != "lower")
        if not group:
            continue
        ref = mark_settings(group)
        references[kind] = short(ref) if ref else ""
        compared = [r for r in group if r.comparable]
        ranks.update(zip((r.run_id for r in compared), rank_ranges([r.scored for r in compared], direction),
                         strict=True))
        front |= charts.pareto_run_ids(compared, direction)
        best += [r for r in group if r.comparable] + [r for r in group if not r.comparable]
    others = [r for r in runs if r.run_id not in chosen]
    by_run = {r.run_id: r for r in runs}

    overall_names = sorted({m.name for m in metrics if not m.breakdown_key})
    overall: dict[int, dict[str, Any]] = {}
    breakdowns: dict[str, dict[str, Any]] = {}  # key -> {"values": [...], "cells": {run_id: {value: metric}}}
    mtable = Table("metrics", METRIC_COLUMNS)
    for m in metrics:
        mtable.rows.append([m.run_id, by_run[m.run_id].model, m.name, m.breakdown_key, m.breakdown_value, m.value,
                            m.ci_low, m.ci_high, m.n])
        if not m.breakdown_key:
            overall.setdefault(m.run_id, {})[m.name] = m
        elif m.name == metric:
            b = breakdowns.setdefault(m.breakdown_key, {"values": set(), "cells": {}})
            b["values"].add(m.breakdown_value)
            b["cells"].setdefault(m.run_id, {})[m.breakdown_value] = m
    for b in breakdowns.values():
        b["values"] = sorted(b["values"])

    rtable = Table("runs", ["rank_best", "rank_worst", "pareto", "settings_differ"] + RUN_COLUMNS)
    for r in best:
        rk = ranks.get(r.run_id)
        rtable.rows.append([rk[0] if rk else None, rk[1] if rk else None, r.run_id in front, r.settings_differ]
                           + _run_row(r))
    for r in others:
        rtable.rows.append([None, None, None, None] + _run_row(r))
    compared = [r for r in best if r.comparable]
    return View("task.html", {
        "page_title": f"Task {name}", "nav": "tasks", "name": name, "description": desc_row or "",
        "metric": metric, "info": info, "direction": direction, "direction_text": direction_text,
        "metric_infos": {n: metric_info(declared, n) for n in {m.name for m in metrics} | {metric}},
        "best": best, "others": others, "ranks": ranks, "front": front,
        "overall_names": overall_names, "overall": overall, "breakdowns": breakdowns,
        "format_rank": format_rank, "provisional_n": PROVISIONAL_N, "kind_labels": KIND_LABELS,
        "references": references, "short": short,
        "chart_scores": charts.score_ci_chart(compared, metric, info),
        "chart_cost": charts.cost_pareto_chart(compared, metric, info),
        "chart_task": _task_chart(sessions, name),
    }, {"runs": rtable, "metrics": mtable})


def _task_chart(sessions: sessionmaker[Session], name: str) -> dict | None:
    """The task family's own chart, when its manifest declares one (a precision-recall view, a
    quality-cost front). A failing hook costs the page its extra chart, not the page."""
    import logging

    from harness.families import chart_hook
    from harness.registry import UnknownNameError, lookup

    try:
        hook = chart_hook(lookup("task", name).factory.__module__)
    except (UnknownNameError, ImportError, AttributeError):
        return None
    if hook is None:
        return None
    try:
        return hook(sessions, name)
    except Exception:
        logging.getLogger(__name__).exception("task chart for %s failed", name)
        return None


def tasks_view(sessions: sessionmaker[Session]) -> View:
    """The overview's tasks (those with at least one headline result), with their declared direction."""
    with sessions() as s:
        columns = queries.overview_data(s).tasks
        rows = s.execute(
            select(TaskRow.name, func.count(func.distinct(RunRow.id)), func.count(func.distinct(RunRow.model_id)),
                   func.count(func.distinct(TaskRow.version)))
            .join(RunRow, RunRow.task_id == TaskRow.id).group_by(TaskRow.name)).all()
    counts = {name: (n_runs, n_models, n_versions) for name, n_runs, n_models, n_versions in rows}
    table = Table("tasks", ["task", "family", "primary_metric", "direction", "scale", "runs", "models", "versions"])
    for t in sorted(columns, key=lambda c: c.name):
        table.rows.append([t.name, t.family, t.metric, t.direction, t.info.scale if t.info else None,
                           *counts.get(t.name, (0, 0, 0))])
    return View("tasks.html", {"page_title": "Tasks", "nav": "tasks", "rows": table.records(),
                               "direction_text": direction_text}, {"tasks": table})


# ---- models ----------------------------------------------------------------------------------------


def models_view(sessions: sessionmaker[Session]) -> View:
    counts = (select(RunRow.model_id, func.count(RunRow.id).label("runs"),
                     func.count(func.distinct(RunRow.task_id)).label("tasks"))
              .group_by(RunRow.model_id).subquery())  # grouped apart: PostgreSQL cannot GROUP BY a JSON column
    with sessions() as s:
        rows = s.execute(
            select(ModelRow.id, ModelRow.display_name, ModelRow.spec, ModelRow.backend, ModelRow.info, ModelRow.owner,
                   func.coalesce(counts.c.runs, 0), func.coalesce(counts.c.tasks, 0))
            .outerjoin(counts, counts.c.model_id == ModelRow.id).order_by(ModelRow.display_name, ModelRow.id)).all()
        labels = model_labels(s)
    table = Table("models", ["model_id", "model", "spec", "backend", "kind", "size", "organisation", "licence", "link",
                             "runs", "tasks"])
    for mid, disp, spec, backend, info, owner, n_runs, n_tasks in rows:
        card = card_for(spec)
        table.rows.append([mid, labels.get(mid, disp or spec), spec, backend, model_kind(info, spec, owner),
                           queries.model_size(info or {}, card), card.organisation if card else "",
                           card.licence if card else "", card.safe_link if card else "", n_runs, n_tasks])
    return View("models.html", {"page_title": "Models", "nav": "models", "rows": table.records(),
                                "kind_labels": KIND_LABELS}, {"models": table})


def model_view(sessions: sessionmaker[Session], model_id: int) -> View:
    with sessions() as s:
        model = s.get(ModelRow, model_id)
        if model is None:
            raise NotFound(f"no model with id {model_id}")
        runs = queries.run_infos(s, model_id=model_id)
        label = model_labels(s).get(model_id, model.display_name or model.spec)
    table = Table("runs", RUN_COLUMNS, [_run_row(r) for r in reversed(runs)])
    kind, card = model_kind(model.info, model.spec, model.owner), card_for(model.spec)
    return View("model.html", {"page_title": label, "label": label, "nav": "models", "model": model,
                               "kind": kind, "kind_label": KIND_LABELS[kind], "kind_note": KIND_NOTES[kind],
                               "card": card, "size": queries.model_size(model.info or {}, card),
                               "info": {k: v for k, v in (model.info or {}).items() if k != "kind"},
                               "runs": list(reversed(runs)), "provisional_n": PROVISIONAL_N}, {"runs": table})


# ---- runs ------------------------------------------------------------------------------------------


def runs_view(sessions: sessionmaker[Session], page: int = 1, per_page: int = 50, task: str = "") -> View:
    with sessions() as s:
        runs = queries.run_infos(s, task=task or None)
    runs.reverse()
    total = len(runs)
    page, _ = clamp_page(page, total, per_page)  # page 99999 of 3 is page 3
    shown = runs[(page - 1) * per_page: page * per_page]
    table = Table("runs", RUN_COLUMNS, [_run_row(r) for r in runs])
    return View("runs.html", {"page_title": "Runs", "nav": "runs", "runs": shown, "total": total, "page": page,
                              "per_page": per_page, "pages": max(1, math.ceil(total / per_page)),
                              "params": {"task": task, "per_page": per_page}}, {"runs": table})


# a run's identity, then every invocation that added samples to it (--limit etc. choose how much, per
# invocation: the first one's limit is not the run's)
CONFIG_KEYS = ("task", "task_version", "task_hash", "task_options", "model", "model_settings", "judge", "seed",
               "epochs", "invocations")


def unknown_score_notes(parsed: Any, score_names: list[str]) -> list[str]:
    """One note per ``score:NAME`` term naming no score of this run (its filter matches nothing), with
    the closest names: "No samples match" alone does not say the name was wrong."""
    import difflib

    notes = []
    for term in parsed.scores:
        if term.name in score_names:
            continue
        close = difflib.get_close_matches(term.name, score_names, n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}?" if close else f"its scores: {', '.join(score_names) or 'none'}"
        notes.append(f"this run has no score {term.name!r}; {hint}")
    return notes


def run_view(sessions: sessionmaker[Session], run_id: int, media_roots: list[Path], *, page: int = 1,
             per_page: int = 20, q: str = "", status: str = "all", sort: str = "") -> View:
    from .progress import run_progress

    parsed, order = parse_filter(q), parse_sort(sort)
    with sessions() as s:
        infos = queries.run_infos(s, run_ids=[run_id])
        if not infos:
            raise NotFound(f"no run with id {run_id}")
        info = infos[0]
        run = s.get(RunRow, run_id)
        metrics = queries.metrics_of(s, [run_id])
        try:
            total, page, rows = queries.sample_page(s, run_id, q=q, status=status, page=page, per_page=per_page,
                                                    sort=sort)
        except DBAPIError:  # e.g. a score that is text on PostgreSQL: the filter fails, not the page
            s.rollback()
            parsed.problems.append("this filter cannot be applied to these samples")
            total, page, rows = queries.sample_page(s, run_id, status=status, page=page, per_page=per_page)
        stored = queries.judgements_for(s, run_id, [(r.sample_id, r.epoch) for r in rows])
        error_kinds = s.execute(
            select(SampleResultRow.error_kind, func.count()).where(SampleResultRow.run_id == run_id,
                                                                   SampleResultRow.error.is_not(None))
            .group_by(SampleResultRow.error_kind).order_by(func.count().desc())).all()
        score_names = sorted({k for r in rows for k in (r.scores or {})}
                             | {m.name for m in metrics if not m.breakdown_key and m.name not in STANDARD}
                             | {k for k in info.task_metrics if k not in STANDARD})
        bounds = queries.score_bounds(s, run_id, score_names)
        progress = run_progress(s, run_id) if info.status == "running" else None
    from harness.families import is_hidden, redact_details

    from .scoring_view import scoring_rows

    badges = Badges({n: metric_info(info.task_metrics, n) for n in score_names}, bounds)
    samples = []
    for r in rows:
        # replies to harmful prompts (metadata hide_output) are stored but never rendered publicly
        hidden = is_hidden((r.input or {}).get("metadata"))
        details = redact_details(dict(r.details or {})) if hidden else dict(r.details or {})
        judgements = details.pop("_judgements", None) or [
            {"judge_spec": j.judge_spec, "prompt_hash": j.prompt_hash, "raw": j.raw, "verdict": j.verdict}
            for j in stored.get((r.sample_id, r.epoch), [])]
        media = sample_media(r.input or {}, r.details or {}, r.prediction, media_roots)
        input_media = {m.path: m for m in media if m.label == "input"}
        if hidden:
            judgements = [{**j, "raw": "[hidden]"} for j in judgements]
        samples.append({"row": r, "hidden": hidden, "details": details, "judgements": judgements,
                        "input_media": input_media,
                        "media": [m for m in media if m.label != "input"],
                        "messages": (r.input or {}).get("messages", []),
                        "scoring": None if hidden else scoring_rows(r.input, r.prediction),
                        "metadata": (r.input or {}).get("metadata", {})})
    mtable = Table("metrics", METRIC_COLUMNS, [[m.run_id, info.model, m.name, m.breakdown_key, m.breakdown_value,
                                                m.value, m.ci_low, m.ci_high, m.n] for m in metrics])
    config = (run.config or {}) if run else {}
    problems = parsed.problems + ([order.problem] if order.problem else [])
    unknown = unknown_score_notes(parsed, score_names)
    return View("run.html", {
        "page_title": f"Run {info.run_name}", "nav": "runs", "info": info, "run": run, "metrics": metrics,
        "kind_label": KIND_LABELS[info.kind],
        "config_main": [(k, config.get(k)) for k in CONFIG_KEYS if k in config],
        "error_kinds": [(kind or "error", n) for kind, n in error_kinds],
        "config": config, "samples": samples, "total": total, "page": page, "per_page": per_page,
        "pages": max(1, math.ceil(total / per_page)), "q": q, "status": status, "sort": str(order),
        "sort_options": sort_options(score_names), "problems": problems, "unknown_scores": unknown, "badges": badges,
        "quick_filters": quick_filters(badges, metrics, [k for k, _ in error_kinds]), "progress": progress,
        "filters": queries.SAMPLE_FILTERS,
        "params": {"q": q, "status": status, "per_page": per_page, "sort": str(order)},
    }, {"metrics": mtable})


def quick_filters(badges: Badges, metrics: list[Any], error_kinds: list[str | None]) -> list[tuple[str, str]]:
    """(label, q) links above the sample list: the samples off the best end of each directed score,
    each breakdown value (metadata) and each error kind."""
    out = [(f"{name} not best", q) for name in badges.infos if (q := badges.wrong(name))]
    seen = sorted({(m.breakdown_key, m.breakdown_value) for m in metrics if m.breakdown_key})
    out += [(f"{k} = {v}", shlex.quote(f"meta:{k}={v}")) for k, v in seen[:40]]
    out += [(f"error: {k}", shlex.quote(f"error:{k}")) for k in error_kinds if k]
    return out


def sample_dicts(sessions: sessionmaker[Session], run_id: int, *, page: int, per_page: int, q: str,
                 status: str, sort: str = "") -> tuple[int, int, list[dict[str, Any]]]:
    """(total, page after clamping, rows) for the samples API."""
    from harness.export import COLUMNS

    with sessions() as s:
        if s.get(RunRow, run_id) is None:
            raise NotFound(f"no run with id {run_id}")
        total, page, rows = queries.sample_page(s, run_id, q=q, status=status, page=page, per_page=per_page,
                                                sort=sort)
    from harness.families import redact_row

    return total, page, [redact_row({c: _jsonable(getattr(r, c)) for c in COLUMNS}) for r in rows]


def _jsonable(v: Any) -> Any:
    if hasattr(v, "isoformat"):
        return v.isoformat()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def iter_sample_jsonl(sessions: sessionmaker[Session], run_id: int, chunk: int = 500):  # type: ignore[no-untyped-def]
    """All sample rows of a run as JSON lines, read in keyset-paged chunks (constant memory)."""
    import json

    from harness.export import COLUMNS
    from harness.families import redact_row

    cols = [getattr(SampleResultRow, c) for c in COLUMNS]
    last_id = 0
    while True:
        with sessions() as s:
            rows = s.execute(select(SampleResultRow.id, *cols).where(SampleResultRow.run_id == run_id,
                                                                     SampleResultRow.id > last_id)
                             .order_by(SampleResultRow.id).limit(chunk)).all()
        if not rows:
            return
        last_id = rows[-1][0]
        yield "".join(json.dumps(redact_row({c: _jsonable(v) for c, v in zip(COLUMNS, r[1:], strict=True)}),
                                 ensure_ascii=False, default=str) + "\n" for r in rows)


# ---- compare ---------------------------------------------------------------------------------------


def compare_view(sessions: sessionmaker[Session], a: int | None, b: int | None, limit: int = 50) -> View:
    from harness.compare import compare_runs

    with sessions() as s:
        all_runs = queries.run_infos(s)
    ctx: dict[str, Any] = {"page_title": "Compare runs", "nav": "compare", "direction_text": direction_text,
                           "all_runs": list(reversed(all_runs)), "a": a, "b": b, "results": [], "error": None,
                           "diffs": [], "config_rows": []}
    table = Table("compare", ["metric", "n", "mean_a", "mean_b", "diff_b_minus_a", "ci_low", "ci_high", "p_value",
                              "test"])
    if a is None or b is None:
        return View("compare.html", ctx, {"compare": table})
    by_id = {r.run_id: r for r in all_runs}
    if a not in by_id or b not in by_id:
        raise NotFound(f"no run with id {a if a not in by_id else b}")
    ra, rb = by_id[a], by_id[b]
    ctx.update(ra=ra, rb=rb)
    # which sign of b - a is an improvement: the declared direction (the operator's declaration over a
    # push token's, queries.declarations), else none is coloured
    declared = queries.declarations([ra, rb])[1]
    ctx["better"] = lambda name: direction_of(metric_info(declared, name))
    try:
        results = compare_runs(sessions, a, b)
    except ValueError as exc:
        ctx["error"] = str(exc)
        results = []
    ctx["results"] = results
    for r in results:
        table.rows.append([r.metric, r.n, r.mean_a, r.mean_b, r.diff, r.ci_low, r.ci_high, r.p_value, r.test])
    with sessions() as s:
        run_a, run_b = s.get(RunRow, a), s.get(RunRow, b)
        ca, cb = (run_a.config if run_a else {}) or {}, (run_b.config if run_b else {}) or {}
        ctx["config_rows"] = [(k, ca.get(k), cb.get(k)) for k in sorted(set(ca) | set(cb)) if k != "run_name"]
        ctx["diffs"], ctx["n_diffs"] = _differing_samples(s, a, b, ra.primary_metric, limit)
        ctx["n_shared"] = s.scalar(select(func.count()).select_from(SampleResultRow).where(
            SampleResultRow.run_id == a, SampleResultRow.epoch == 0,
            SampleResultRow.sample_id.in_(select(SampleResultRow.sample_id).where(
                SampleResultRow.run_id == b, SampleResultRow.epoch == 0)))) or 0
    info = metric_info(declared, ra.primary_metric)
    values = [float(v) for d in ctx["diffs"] for v in (d["score_a"], d["score_b"])
              if isinstance(v, int | float) and not isinstance(v, bool)]
    ctx["badges"] = Badges({ra.primary_metric: info},
                           {ra.primary_metric: (min(values), max(values))} if values else {})
    direction = direction_of(info)
    for d in ctx["diffs"]:
        d["better"] = better_side(direction, d["score_a"], d["score_b"])
    return View("compare.html", ctx, {"compare": table})


def _differing_samples(s: Session, a: int, b: int, metric: str, limit: int) -> tuple[list[dict[str, Any]], int]:
    """Samples (epoch 0) both runs hold whose headline score differs, first ``limit`` of them,
    the largest differences first (then the natural id order)."""
    def load(run_id: int) -> dict[str, tuple[Any, str]]:
        rows = s.execute(select(SampleResultRow.sample_id, SampleResultRow.scores, SampleResultRow.output)
                         .where(SampleResultRow.run_id == run_id, SampleResultRow.epoch == 0))
        return {sid: ((scores or {}).get(metric), out) for sid, scores, out in rows}

    def gap(i: str) -> float:
        x, y = la[i][0], lb[i][0]
        ok = all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in (x, y))
        return abs(y - x) if ok else math.inf  # a score on one side only: as different as can be

    la, lb = load(a), load(b)
    ids = sorted((i for i in set(la) & set(lb) if la[i][0] != lb[i][0]), key=lambda i: (-gap(i), len(i), i))
    return [{"sample_id": i, "score_a": la[i][0], "score_b": lb[i][0], "output_a": la[i][1], "output_b": lb[i][1]}
            for i in ids[:limit]], len(ids)


def better_side(direction: str | None, a: Any, b: Any) -> str:
    """"a", "b" or "" : which score is better by the declared direction (never guessed)."""
    if direction not in ("higher", "lower") or not all(isinstance(v, int | float) for v in (a, b)) or a == b:
        return ""
    return "b" if (b > a) == (direction == "higher") else "a"
