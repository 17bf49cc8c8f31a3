"""Database reads behind the pages and the API (synchronous SQLAlchemy; call from a thread).

Which run stands for a (model, task) pair on the overview: the newest run (highest id) of that model
on that task name that has a headline metric row, finished runs preferred over unfinished ones. Older
runs and other task versions stay visible on the model, task and run pages.

Which results are compared: only those of models of one kind (:mod:`.kinds`), at one task setting
(:mod:`.comparable`), and never a run whose judge is a stub. The others are shown, marked, unranked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, func, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from harness.store.schema import OPERATOR, JudgementRow, MetricRow, ModelRow, RunRow, SampleResultRow, TaskRow
from harness.types import Direction, MetricInfo

from .comparable import mark_settings
from .kinds import KIND_ORDER, judge_is_stub, model_kind
from .model_cards import ModelCard, card_for
from .names import model_labels
from .ranking import PROVISIONAL_N, Scored, direction_of, metric_info, rank_ranges
from .sample_filter import SampleFilter, clamp_page, conditions, order_by, parse_filter, parse_sort, score_value
from .winrate import WinRate


@dataclass(slots=True)
class RunInfo:
    run_id: int
    run_name: str
    status: str
    n_done: int
    n_samples: int
    n_errors: int
    total_cost: float
    finished_at: Any
    task_id: int
    task: str
    task_version: str
    task_hash: str
    family: str
    modalities: list[str]
    primary_metric: str
    model_id: int
    model: str
    model_spec: str
    backend: str
    model_info: dict[str, Any]
    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0
    cost_per_sample: float | None = None
    task_metrics: dict[str, Any] = field(default_factory=dict)  # the task row's declarations
    task_owner: str = OPERATOR  # whose declaration that is (harness.store.schema: the operator or a push token)
    judge_spec: str | None = None
    model_owner: str = OPERATOR
    # set where results are compared (comparable.mark_settings): this run's task settings are not the
    # ones its column (or task page group) compares at, so it is shown, marked, never ranked or paired
    settings_differ: bool = False

    @property
    def info(self) -> MetricInfo | None:
        """The declaration of this run's headline metric (None: undeclared, never ranked)."""
        return metric_info(self.task_metrics, self.primary_metric)

    @property
    def provisional(self) -> bool:
        return self.status != "finished" or self.n < PROVISIONAL_N

    @property
    def scored(self) -> Scored:
        return Scored(self.value, self.ci_low, self.ci_high)

    @property
    def settings(self) -> str:
        """What the task measured: its version and content hash (data, prompts and the options that
        change them, as the task declares: ``-T episodes=3`` and ``=2`` are two settings)."""
        return f"{self.task_version}:{self.task_hash}"

    @property
    def stub_judge(self) -> bool:
        """The judge is a stub backend (canned verdicts): the scores measure nothing, never ranked."""
        return judge_is_stub(self.judge_spec)

    @property
    def comparable(self) -> bool:
        """Whether this result may be ranked and paired with others of its kind and column."""
        return not self.stub_judge and not self.settings_differ

    @property
    def kind(self) -> str:
        return model_kind(self.model_info, self.model_spec, self.model_owner)


def _finite(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) else None


def run_infos(s: Session, *, task: str | None = None, model_id: int | None = None,
              run_ids: list[int] | None = None) -> list[RunInfo]:
    """Every run (optionally of one task name / model / ids) with its headline metric and cost."""
    head = MetricRow.__table__.alias("head")
    cps = MetricRow.__table__.alias("cps")
    q = (
        select(RunRow.id, RunRow.name, RunRow.status, RunRow.n_done, RunRow.n_samples, RunRow.n_errors,
               RunRow.total_cost, RunRow.finished_at,
               TaskRow.id, TaskRow.name, TaskRow.version, TaskRow.content_hash, TaskRow.family, TaskRow.modalities,
               TaskRow.primary_metric, TaskRow.metrics, TaskRow.owner,
               ModelRow.id, ModelRow.display_name, ModelRow.spec, ModelRow.backend, ModelRow.info,
               head.c.value, head.c.ci_low, head.c.ci_high, head.c.n, cps.c.value, RunRow.judge_spec, ModelRow.owner)
        .join(TaskRow, RunRow.task_id == TaskRow.id)
        .join(ModelRow, RunRow.model_id == ModelRow.id)
        .outerjoin(head, and_(head.c.run_id == RunRow.id, head.c.name == TaskRow.primary_metric,
                              head.c.breakdown_key == ""))
        .outerjoin(cps, and_(cps.c.run_id == RunRow.id, cps.c.name == "cost_per_sample", cps.c.breakdown_key == ""))
        .order_by(RunRow.id)
    )
    if task is not None:
        q = q.where(TaskRow.name == task)
    if model_id is not None:
        q = q.where(RunRow.model_id == model_id)
    if run_ids is not None:
        q = q.where(RunRow.id.in_(run_ids))
    out = []
    labels = model_labels(s)
    for row in s.execute(q):
        (rid, rname, status, n_done, n_samples, n_err, cost, fin, tid, tname, tver, thash, fam, mods, pm, tmetrics,
         towner, mid, mdisp, mspec, backend, minfo, val, lo, hi, n, cps_val, judge, mowner) = row
        per = _finite(cps_val)
        if per is None and n_done:
            per = (cost or 0.0) / n_done
        out.append(RunInfo(rid, rname, status, n_done, n_samples, n_err, cost or 0.0, fin, tid, tname, tver,
                           thash, fam, list(mods or []), pm, mid, labels.get(mid) or mdisp or mspec, mspec, backend,
                           dict(minfo or {}), _finite(val), _finite(lo), _finite(hi), n or 0, per,
                           dict(tmetrics or {}), towner, judge, mowner or OPERATOR))
    return out


def _newest_declarations(newest: list[RunInfo]) -> tuple[str, dict[str, Any]]:
    metric = newest[0].primary_metric
    # the newest task row that declares anything: an older row may predate declarations
    return metric, next((r.task_metrics for r in newest if r.primary_metric == metric and r.task_metrics), {})


def declarations(runs: list[RunInfo]) -> tuple[str, dict[str, Any]]:
    """The headline metric and the metric declarations that rank runs of one task name (a column,
    a task page). The operator's newest runs decide whenever there are any: a push token's
    declaration never ranks the operator's runs. Without them, the push tokens' own choices decide
    if they all agree; if they disagree nothing is declared (no token's declaration ranks another's runs)."""
    newest = sorted(runs, key=lambda r: -r.run_id)
    by_owner: dict[str, list[RunInfo]] = {}
    for r in newest:
        by_owner.setdefault(r.task_owner, []).append(r)
    if OPERATOR in by_owner:
        return _newest_declarations(by_owner[OPERATOR])
    heads = [_newest_declarations(rs) for rs in by_owner.values()]
    return heads[0] if all(h == heads[0] for h in heads) else (newest[0].primary_metric, {})


def headline(runs: list[RunInfo]) -> tuple[str, MetricInfo | None]:
    """(headline metric, its declaration) by :func:`declarations`."""
    metric, declared = declarations(runs)
    return metric, metric_info(declared, metric)


def align(s: Session, runs: list[RunInfo], metric: str) -> None:
    """Make ``metric`` the headline of the pushed runs in ``runs`` (a column, a task page): a push
    token's run whose task row names another primary metric shows and ranks by its value of
    ``metric`` instead (or none), never by a metric of its own choosing beside the others. The
    operator's runs keep their own task row's headline (an older task version may name another)."""
    other = [r for r in runs if r.task_owner != OPERATOR and r.primary_metric != metric]
    if not other:
        return
    rows = {m.run_id: m for m in s.scalars(select(MetricRow).where(
        MetricRow.run_id.in_([r.run_id for r in other]), MetricRow.name == metric, MetricRow.breakdown_key == ""))}
    for r in other:
        m = rows.get(r.run_id)
        r.primary_metric = metric
        r.value, r.ci_low, r.ci_high = (_finite(m.value), _finite(m.ci_low), _finite(m.ci_high)) if m else (None,) * 3
        r.n = m.n if m else 0


def best_runs(runs: list[RunInfo]) -> dict[tuple[int, str], RunInfo]:
    """The run standing for each (model id, task name) pair (see the module docstring)."""
    chosen: dict[tuple[int, str], RunInfo] = {}
    for r in runs:  # ordered by id: later runs replace earlier ones unless they are worse kinds
        if r.value is None:
            continue
        key = (r.model_id, r.task)
        old = chosen.get(key)
        if old is None or not (old.status == "finished" and r.status != "finished"):
            chosen[key] = r
    return chosen


# ---- overview -------------------------------------------------------------------------------------


@dataclass(slots=True)
class TaskColumn:
    name: str
    family: str
    modalities: list[str]
    metric: str
    info: MetricInfo | None  # the headline metric's declaration (newest task row that has one)

    @property
    def direction(self) -> Direction | None:
        return direction_of(self.info)


@dataclass(slots=True)
class ModelLine:
    model_id: int
    model: str
    spec: str
    backend: str
    size: str
    cells: dict[str, RunInfo] = field(default_factory=dict)
    win: WinRate = field(default_factory=lambda: WinRate(None, None, None, 0, 0))
    rank: tuple[int, int] | None = None
    kind: str = "unknown"  # kinds.KIND_ORDER: the list it is ranked in
    card: ModelCard | None = None  # the alias card's metadata, when a card names this model


@dataclass(slots=True)
class OverviewData:
    tasks: list[TaskColumn]
    lines: list[ModelLine]
    families: list[str]
    modalities: list[str]
    backends: list[str]
    # (kind, task) -> the settings that column of that kind's list compares at (comparable.py)
    references: dict[tuple[str, str], str] = field(default_factory=dict)


def model_size(info: dict[str, Any], card: ModelCard | None = None) -> str:
    """The parameter count: the alias card's (the operator's word), else what the row's info says."""
    if card is not None and card.parameters:
        return card.parameters
    for key in ("size", "params", "parameters", "n_params"):
        if info.get(key) not in (None, ""):
            return str(info[key])
    return ""


def overview_data(s: Session) -> OverviewData:
    """Unfiltered overview: one line per model with its cells; filtering and ranking happen later."""
    chosen = best_runs(run_infos(s))
    tasks: dict[str, TaskColumn] = {}
    lines: dict[int, ModelLine] = {}
    by_task: dict[str, list[RunInfo]] = {}
    for (_, tname), r in chosen.items():
        by_task.setdefault(tname, []).append(r)
    # newest run first: a column shows the family of its task's newest run, and the headline metric
    # and declaration :func:`headline` picks (the operator's, never a push token's over it)
    for (mid, tname), r in sorted(chosen.items(), key=lambda kv: -kv[1].run_id):
        if tname not in tasks:
            tasks[tname] = TaskColumn(tname, r.family, r.modalities, *headline(by_task[tname]))
            align(s, by_task[tname], tasks[tname].metric)
        line = lines.get(mid)
        if line is None:
            card = card_for(r.model_spec)
            line = lines[mid] = ModelLine(mid, r.model, r.model_spec, r.backend, model_size(r.model_info, card),
                                          kind=r.kind, card=card)
        line.cells[tname] = r
    # each kind's list compares each column at one setting: the others are marked (settings_differ)
    references: dict[tuple[str, str], str] = {}
    for kind in KIND_ORDER:
        for tname in tasks:
            group = [m.cells[tname] for m in lines.values() if m.kind == kind and tname in m.cells]
            ref = mark_settings(group)
            if ref is not None:
                references[(kind, tname)] = ref
    cols = sorted(tasks.values(), key=lambda t: (t.family, t.name))
    return OverviewData(
        tasks=cols,
        lines=sorted(lines.values(), key=lambda m: m.model.lower()),
        families=sorted({t.family for t in cols if t.family}),
        modalities=sorted({m for t in cols for m in t.modalities}),
        backends=sorted({m.backend for m in lines.values() if m.backend}),
        references=references,
    )


# ---- samples --------------------------------------------------------------------------------------

SAMPLE_FILTERS = ("all", "errors", "unscored", "scored")


def sample_query(run_id: int, q: str = "", status: str = "all",
                 parsed: SampleFilter | None = None):  # type: ignore[no-untyped-def]
    """Conditions for a run's samples: ``q`` in the sample browser's language (leaderboard.sample_filter)
    and a status filter."""
    cond = [SampleResultRow.run_id == run_id, *conditions(parsed if parsed is not None else parse_filter(q))]
    if status == "errors":
        cond.append(SampleResultRow.error.is_not(None))
    elif status == "unscored":
        cond.append(and_(SampleResultRow.error.is_(None), SampleResultRow.unscored.is_not(None)))
    elif status == "scored":
        cond.append(and_(SampleResultRow.error.is_(None), SampleResultRow.unscored.is_(None)))
    return cond


def sample_page(s: Session, run_id: int, *, q: str = "", status: str = "all", page: int = 1,
                per_page: int = 20, sort: str = "") -> tuple[int, int, list[SampleResultRow]]:
    """(total, page, rows of the page); a page past the end is the last page (see :func:`clamp_page`)."""
    cond = sample_query(run_id, q, status)
    total = s.scalar(select(func.count(SampleResultRow.id)).where(*cond)) or 0
    page, _ = clamp_page(page, total, per_page)
    rows = s.scalars(select(SampleResultRow).where(*cond).order_by(*order_by(parse_sort(sort)))
                     .offset((page - 1) * per_page).limit(per_page)).all()
    return total, page, list(rows)


def score_bounds(s: Session, run_id: int, names: list[str]) -> dict[str, tuple[float, float]]:
    """(min, max) of each score over the run's samples: what a raw-scale score's badge colour is relative to."""
    if not names:
        return {}
    cols = [c for n in names for c in (func.min(score_value(n)), func.max(score_value(n)))]
    try:
        row = s.execute(select(*cols).where(SampleResultRow.run_id == run_id)).one()
    except DBAPIError:  # a row the engine's JSON functions refuse (NaN written by an old writer): no bounds
        s.rollback()
        return {}
    return {n: (row[2 * i], row[2 * i + 1]) for i, n in enumerate(names)
            if row[2 * i] is not None and row[2 * i + 1] is not None}


def judgements_for(s: Session, run_id: int, keys: list[tuple[str, int]]) -> dict[tuple[str, int], list[JudgementRow]]:
    if not keys:
        return {}
    ids = sorted({k for k, _ in keys})
    rows = s.scalars(select(JudgementRow).where(JudgementRow.run_id == run_id, JudgementRow.sample_id.in_(ids))
                     .order_by(JudgementRow.id)).all()
    out: dict[tuple[str, int], list[JudgementRow]] = {}
    for j in rows:
        out.setdefault((j.sample_id, j.epoch), []).append(j)
    return out


def metrics_of(s: Session, run_ids: list[int]) -> list[MetricRow]:
    if not run_ids:
        return []
    return list(s.scalars(select(MetricRow).where(MetricRow.run_id.in_(run_ids))
                          .order_by(MetricRow.breakdown_key, MetricRow.breakdown_value, MetricRow.name)).all())


def rank_lines(lines: list[ModelLine], key: str, direction: Direction | None) -> None:
    """Set each line's rank range by the score under ``key`` ("avg": the mean win rate, or a task
    name); no ranks at all when that score has no declared direction. ``lines`` is one kind's list;
    a cell that is not comparable (stub judge, other settings) gets no rank and moves no one's."""
    none = Scored(None, None, None)
    scores = [line.win.scored if key == "avg" else (line.cells[key].scored if key in line.cells
                                                    and line.cells[key].comparable else none) for line in lines]
    for line, rank in zip(lines, rank_ranges(scores, direction), strict=True):
        line.rank = rank
