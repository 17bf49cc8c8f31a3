"""Server side of ``harness push``: validate an uploaded run chunk and upsert it idempotently.

A push is a series of POSTs to ``/api/runs``, each carrying the task, model, run and metric rows
plus a chunk of sample rows and/or judgement rows. Every POST is an upsert keyed on natural keys:
task (name, version, content hash), model (spec), run (name, must have the same config hash, task
and model), samples (run, sample id, epoch: ON CONFLICT DO NOTHING), judgements (run, sample id,
epoch, judge spec, prompt hash, raw reply), metrics (replaced). Pushing the same run twice changes nothing.

Trust: whatever a push token creates belongs to it (the ``owner`` column of its run, task and model
rows: :mod:`harness.store.schema`), in a namespace of its own. Its task declaration, its model's
display name and its run never become the operator's: the operator's ``harness eval`` only joins
the operator's runs, the operator's task and model rows are never touched by a push, and the arena
serves no push token's outputs. Admin tokens act as the operator (their rows are the operator's).
The token that created a run owns it; another token pushing into it (or into a run of the
operator's) is refused with 403 unless it is an admin token. Pushed metrics are not taken on trust: each is
recomputed from the stored sample rows (``verify.py``) and stored with the server's value, n and
CI, or refused (not stored, never ranked; listed in ``metrics_refused``). Numbers are bounded
(32-bit counts, finite floats) so nothing a client sends can overflow a column.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from harness.store import ops
from harness.store.schema import OPERATOR, JudgementRow, ModelRow, RunRow, SampleResultRow, TaskRow, utcnow
from harness.types import Metric

from .tokens import Identity
from .verify import verify

FORMAT = 1
MAX_ROWS = 5000  # per request; the client sends chunks of a few hundred
INT_MAX = 2**31 - 1  # the store's Integer columns are 32-bit on PostgreSQL

Count = Annotated[int, Field(ge=0, le=INT_MAX)]
Finite = Annotated[float, Field(allow_inf_nan=False, ge=-1e300, le=1e300)]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MetricInfoIn(_In):
    direction: Literal["higher", "lower"] | None = None
    scale: Literal["fraction", "percent", "raw"] = "raw"
    display: str = Field(default="", max_length=200)


class TaskIn(_In):
    name: str = Field(min_length=1, max_length=200)
    version: str = Field(max_length=50)
    content_hash: str = Field(max_length=64)
    family: str = Field(default="", max_length=100)
    description: str = ""
    modalities: list[str] = []
    primary_metric: str = Field(default="accuracy", max_length=100)
    # the task's metric declarations (direction, scale, display): ranking follows them
    metrics: dict[Annotated[str, Field(max_length=200)], MetricInfoIn] = Field(default={}, max_length=200)


class ModelIn(_In):
    spec: str = Field(min_length=1, max_length=500)
    backend: str = Field(default="", max_length=100)
    display_name: str = Field(default="", max_length=300)
    info: dict[str, Any] = {}


class RunIn(_In):
    name: str = Field(min_length=1, max_length=300)
    judge_spec: str | None = Field(default=None, max_length=500)
    config: dict[str, Any] = {}
    config_hash: str = Field(default="", max_length=64)
    harness_version: str = Field(default="", max_length=50)
    git_revision: str = Field(default="", max_length=64)
    status: str = Field(default="finished", max_length=20)
    n_samples: Count = 0
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


class SampleIn(_In):
    sample_id: str = Field(min_length=1, max_length=300)
    epoch: Count = 0
    input_hash: str = Field(default="", max_length=64)
    input: dict[str, Any] = {}
    target: Any = None
    output: str = ""
    prediction: Any = None
    answer: str | None = None
    scores: dict[str, Finite | None] = {}
    unscored: str | None = None
    explanation: str = ""
    details: dict[str, Any] = {}
    input_tokens: Count = 0
    output_tokens: Count = 0
    calls: Count = 0
    cost: Finite = 0.0
    latency_s: Finite = 0.0
    cached: bool = False
    error: str | None = None
    error_kind: str | None = Field(default=None, max_length=50)
    created_at: datetime | None = None


class MetricIn(_In):
    name: str = Field(min_length=1, max_length=200)
    value: Finite
    ci_low: Finite | None = None
    ci_high: Finite | None = None
    n: Count = 0
    breakdown_key: str = Field(default="", max_length=100)
    breakdown_value: str = Field(default="", max_length=300)


class JudgementIn(_In):
    sample_id: str = Field(default="", max_length=300)
    epoch: Count = 0
    judge_spec: str = Field(max_length=500)
    prompt_hash: str = Field(max_length=64)
    raw: str = ""
    verdict: dict[str, Any] = {}
    created_at: datetime | None = None


class PushIn(_In):
    format: int = FORMAT
    task: TaskIn
    model: ModelIn
    run: RunIn
    metrics: list[MetricIn] = Field(default=[], max_length=MAX_ROWS)
    samples: list[SampleIn] = Field(default=[], max_length=MAX_ROWS)
    judgements: list[JudgementIn] = Field(default=[], max_length=MAX_ROWS)


class PushResult(BaseModel):
    run_id: int
    run_name: str
    created: bool
    samples_received: int
    samples_inserted: int
    judgements_inserted: int
    n_done: int
    metrics_stored: int = 0
    metrics_refused: list[str] = []


class PushConflict(ValueError):
    """The run name exists on the server with a different configuration, task or model."""


class PushForbidden(PermissionError):
    """The run exists and belongs to another token (only its owner or an admin may push into it)."""


def _count_samples(s: Session, run_id: int) -> int:
    return s.scalar(select(func.count(SampleResultRow.id)).where(SampleResultRow.run_id == run_id)) or 0


def _judgement_key(sample_id: str, epoch: int, judge_spec: str, prompt_hash: str, raw: str) -> tuple[Any, ...]:
    return sample_id, epoch, judge_spec, prompt_hash, hashlib.sha256(raw.encode()).hexdigest()


def owner_of(who: Identity) -> str:
    """The namespace a writer's new rows go to: an admin writes as the operator, a push token as itself."""
    return OPERATOR if who.admin else who.name


def _target(s: Session, name: str, who: Identity) -> RunRow | None:
    """The existing run this push writes into, None for a new one; PushForbidden for someone else's.

    A push token writes only into its own run of that name; a name another token (or the operator)
    already uses is refused, so pushed names stay unique among pushers. An admin writes into the
    operator's run of that name, else into the pushed one (admins may write into any run)."""
    runs = s.scalars(select(RunRow).where(RunRow.name == name).order_by(RunRow.id)).all()
    mine = [r for r in runs if r.owner == owner_of(who)]
    if mine:
        return mine[0]
    if not runs:
        return None
    if who.admin:
        return runs[0]
    holder = "the operator (a local or admin run)" if runs[0].owner == OPERATOR else "another token"
    raise PushForbidden(f"run {name!r} belongs to {holder}; only its owner or an admin token may push "
                        "into it (push under another name)")


def _same_identity(s: Session, run: RunRow, push: PushIn) -> bool:
    """The pushed run is the stored one: same config hash, task (name, version, content hash), model spec."""
    task, model = s.get(TaskRow, run.task_id), s.get(ModelRow, run.model_id)
    t = push.task
    return (run.config_hash == push.run.config_hash and task is not None and model is not None
            and (task.name, task.version, task.content_hash) == (t.name, t.version, t.content_hash)
            and model.spec == push.model.spec)


def ingest(s: Session, push: PushIn, who: Identity | None = None) -> PushResult:
    """Write one push chunk as ``who`` (default: an admin, for in-process callers)."""
    who = who or Identity("static", True)
    if push.format != FORMAT:
        raise ValueError(f"push format {push.format} is not supported (this server speaks {FORMAT})")
    r = push.run
    run = _target(s, r.name, who)
    created = run is None
    if run is None:
        # new rows in the writer's own namespace: a push token's task declaration and model display
        # name are its own and never reach the operator's rows (nor another token's)
        owner = owner_of(who)
        task = ops.get_or_create_task(s, owner=owner, **push.task.model_dump())
        model = ops.get_or_create_model(s, push.model.spec, owner=owner, **push.model.model_dump(exclude={"spec"}))
        run = RunRow(name=r.name, owner=owner, task_id=task.id, model_id=model.id, judge_spec=r.judge_spec,
                     config=r.config, config_hash=r.config_hash, harness_version=r.harness_version,
                     git_revision=r.git_revision, status=r.status, n_samples=r.n_samples,
                     created_at=r.created_at or utcnow(), started_at=r.started_at, finished_at=r.finished_at)
        s.add(run)
        s.flush()
    else:
        if not _same_identity(s, run, push):
            raise PushConflict(f"run {r.name!r} exists on this server with a different configuration, task or "
                               "model; push it under another name")
        stored = s.get(TaskRow, run.task_id)
        if stored is not None and stored.owner == owner_of(who) and push.task.metrics and not stored.metrics:
            # the writer's own row, stored before tasks declared metrics, learns them (as in ops.get_or_create_task)
            stored.metrics = {k: v.model_dump() for k, v in push.task.metrics.items()}
        run.status, run.n_samples = r.status, max(run.n_samples, r.n_samples)
        run.finished_at = r.finished_at or run.finished_at
        run.judge_spec = r.judge_spec
    before = _count_samples(s, run.id)
    now = utcnow()
    ops.write_samples(s, [{**x.model_dump(), "run_id": run.id, "created_at": x.created_at or now}
                          for x in push.samples])
    after = _count_samples(s, run.id)
    n_judgements = _write_judgements(s, run.id, push.judgements)
    kept, refused = verify(ops.load_records(s, run.id), [Metric(**m.model_dump()) for m in push.metrics])
    ops.replace_metrics(s, run.id, kept)
    ops.refresh_run_counts(s, run.id)
    return PushResult(run_id=run.id, run_name=run.name, created=created, samples_received=len(push.samples),
                      samples_inserted=after - before, judgements_inserted=n_judgements, n_done=after,
                      metrics_stored=len(kept), metrics_refused=refused)


def _write_judgements(s: Session, run_id: int, items: list[JudgementIn]) -> int:
    if not items:
        return 0
    ids = sorted({j.sample_id for j in items})
    seen: set[tuple[Any, ...]] = set()
    for i in range(0, len(ids), 500):  # SQLite bound-parameter limit
        rows = s.execute(select(JudgementRow.sample_id, JudgementRow.epoch, JudgementRow.judge_spec,
                                JudgementRow.prompt_hash, JudgementRow.raw)
                         .where(JudgementRow.run_id == run_id, JudgementRow.sample_id.in_(ids[i:i + 500])))
        seen |= {_judgement_key(*row) for row in rows}
    new = []
    now = utcnow()
    for j in items:
        key = _judgement_key(j.sample_id, j.epoch, j.judge_spec, j.prompt_hash, j.raw)
        if key in seen:
            continue
        seen.add(key)
        new.append({**j.model_dump(), "run_id": run_id, "created_at": j.created_at or now})
    ops.write_judgements(s, new)
    return len(new)
