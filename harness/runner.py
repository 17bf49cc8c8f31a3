"""The evaluation loop: resolve, load, skip what is done, generate, score, commit, aggregate.

Work is cut into chunks of ``model.batch_size`` requests; ``concurrency`` workers take chunks from
a queue, so per-request API backends get many calls in flight and batching backends (vLLM,
transformers) get whole batches. Finished samples are buffered and group-committed within
``FLUSH_SECONDS`` of finishing (kill -9 loses the in-flight samples and at most that window); rows are inserted
with ON CONFLICT DO NOTHING on (run, sample, epoch), so a resumed run never duplicates a row.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

import harness
from harness.client import ModelClient
from harness.errors import RunConfigError, UserError
from harness.finalize import finalize_run
from harness.gcpause import lighter_gc, short_switch_interval
from harness.model import FitModel, Model, kind_refusal
from harness.modelspec import alias_settings, build_model, spec_kind
from harness.progress import RunProgress
from harness.run_config import (
    MAX_RUN_NAME,
    MAX_SPEC,
    EvalConfig,
    RunSummary,
    build_task,
    default_run_name,
    git_revision,
    select_samples,
)
from harness.store import leases, ops
from harness.store.db import open_db
from harness.store.schema import OPERATOR, RunRow, utcnow
from harness.task import SampleRecord, ScoreContext, Task
from harness.types import Metric, Output, Request, Sample, Score, Usage, stable_hash
from harness.writer import TICK_SECONDS, SampleWriter, StoreWriteError

SCORE_CONCURRENCY = 64
PREPARE_SLICE = 32  # requests built between two turns of the event loop (see Runner._prepare)


__all__ = ["EvalConfig", "RunConfigError", "RunSummary", "Runner", "StoreWriteError", "build_task", "default_run_name",
           "evaluate", "score_samples", "select_samples"]


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    """The first real exception inside (nested) exception groups: what the user is told."""
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def _details(output: Output | None, score: Score | None) -> dict[str, Any]:
    out = {**(output.details if output else {}), **(score.details if score else {})}
    if score is not None and score.judgements:
        out["_judgements"] = [j.to_dict() for j in score.judgements]
    return out


def _stored_input(item: _Item) -> dict[str, Any]:
    """What the sample's row keeps of its input: the messages as sent (chat), the sample's own messages
    plus the request itself (a completion prompt, scoring pairs or texts), and the metadata."""
    sent = item.request_dict
    if sent is not None and "messages" in sent:
        return {"messages": sent["messages"], "metadata": item.sample.metadata}
    stored: dict[str, Any] = {"messages": [m.to_dict() for m in item.sample.messages], "metadata": item.sample.metadata}
    if sent is not None:
        stored["request"] = sent
    return stored


def _prediction(output: Output | None) -> Any:
    """A backend's structured prediction; for a scoring request, its loglikelihoods."""
    if output is None:
        return None
    if output.prediction is None and output.loglikelihoods is not None:
        return {"loglikelihoods": [ll.to_list() for ll in output.loglikelihoods]}
    return output.prediction


def _error_kind(exc: BaseException) -> str:
    name = type(exc).__name__
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return "timeout"
    return name


@dataclass(slots=True)
class _Item:
    sample: Sample
    epoch: int
    request: Request | None = None
    cache_key: str = ""
    request_dict: dict[str, Any] | None = None  # serialised once: cache key and stored input share it
    output: Output | None = None
    started: float = 0.0


class Runner:
    """One evaluation run against one database. Use :func:`evaluate` for the common case."""

    def __init__(self, cfg: EvalConfig, *, session_factory: sessionmaker[Session] | None = None,
                 task: Task | None = None, model: Model | None = None,
                 on_progress: Callable[[int, int], None] | None = None, unit: bool = False,
                 fit: bool = True) -> None:
        self.cfg = cfg
        self.fit = fit  # False: the (reused) model was already fitted on this task's train split
        # one work unit of a larger (sharded) run: the run is finalised once, by whoever completes its
        # last unit (harness.sweep), and the model belongs to the worker, which reuses it across units
        self.unit = unit
        self.sessions = session_factory or open_db(cfg.db_url)
        self.task = task or build_task(cfg.task, cfg.task_options)
        self._model = model
        self.on_progress = on_progress
        self.client: ModelClient | None = None
        self.final_status = "running"
        self.owner = leases.new_owner()  # this process's name on the sample leases it claims
        self.writer = SampleWriter(self.sessions, self.owner)
        self.n_held_elsewhere = 0  # samples left to another live process working on the same run
        self._plain_scorer: bool | None = None  # the task's scorer is a plain function (asked once)
        self._prefetch: Future[dict[int, SampleRecord]] | None = None  # rows read ahead for finalize

    # ---- setup -------------------------------------------------------------------------------
    def _client(self, model: Model, settings: dict[str, Any], **kwargs: Any) -> ModelClient:
        # cache rows of every role go out with the samples' group commit
        return ModelClient(model, settings=settings, sessions=self.sessions, use_cache=self.cfg.use_cache,
                           cache_sink=self.writer.add_cache_rows, **kwargs)

    def prepare_model(self) -> Model:
        if self._model is None:
            try:
                self._model = build_model(self.cfg.model, self.cfg.model_settings, set(self.task.modalities))
            except UserError:
                raise
            except (ValueError, TypeError) as exc:  # a backend factory refusing its path or settings
                raise RunConfigError(f"model {self.cfg.model!r}: {exc}") from None
        if self.cfg.concurrency and hasattr(self._model, "concurrency"):
            # per-request API backends size their connection pool from model.concurrency: --concurrency
            # must reach them, not only the runner's worker count
            self._model.concurrency = self.cfg.concurrency
        missing = set(self.task.modalities) - set(getattr(self._model, "modalities", {"text"}))
        if missing:
            raise RunConfigError(
                f"model {self._model.spec!r} cannot take {sorted(missing)} input that task "
                f"{self.task.name!r} needs (it takes {sorted(self._model.modalities)})"
            )
        refusal = kind_refusal(self._model, self.task.request_kind)
        if refusal:
            raise RunConfigError(f"task {self.task.name!r}: {refusal}")
        # an alias card's generation keys apply to requests like -M ones (which win)
        settings = {**alias_settings(self.cfg.model, set(self.task.modalities)), **self.cfg.model_settings}
        self.client = self._client(self._model, settings, seed=self.cfg.seed, label=self.cfg.model)
        return self._model

    def prepare_judge(self) -> tuple[ModelClient | None, str | None]:
        spec = self.cfg.judge or (self.task.default_judge if self.task.needs_judge else None)
        if spec is None:
            return None, None
        try:
            judge = build_model(spec, self.cfg.judge_settings, {"text"})
        except UserError:
            raise
        except (ValueError, TypeError) as exc:
            raise RunConfigError(f"judge {spec!r}: {exc}") from None
        # a verdict is pinned: the judge gets no run seed, only its own -J settings
        return self._client(judge, self.cfg.judge_settings, role="judge", seed=None, label=spec), spec

    def open_run(self, model: Model, judge_spec: str | None, n_planned: int) -> RunRow:
        """The run row, created or joined. Two processes starting the same run at once both end in
        the one row: an insert that loses the race (a UNIQUE violation) is retried as a join."""
        from sqlalchemy.exc import IntegrityError

        for attempt in range(3):
            try:
                return self._open_run_once(model, judge_spec, n_planned)
            except IntegrityError:
                if attempt == 2:
                    raise
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    def _invocation(self, n_planned: int) -> dict[str, Any]:
        """What this invocation chose (how much, not what): a run's config keeps every one, so a run
        continued without --limit does not show the first invocation's limit as its own."""
        return {"at": utcnow().isoformat(timespec="seconds"), "limit": self.cfg.limit, "n_planned": n_planned,
                "samples": len(self.cfg.sample_ids) if self.cfg.sample_ids else None,
                "concurrency": self.cfg.concurrency, "use_cache": self.cfg.use_cache,
                "harness_version": harness.__version__}

    def _open_run_once(self, model: Model, judge_spec: str | None, n_planned: int) -> RunRow:
        identity = self.cfg.identity(self.task)
        config_hash = stable_hash(identity)
        name = self.cfg.run_name or default_run_name(self.task, self.cfg)
        if len(name) > MAX_RUN_NAME:
            raise RunConfigError(f"run name {name[:40]!r}... is longer than {MAX_RUN_NAME} characters")
        for what, spec in (("model", model.spec), ("judge", judge_spec or "")):
            if len(spec) > MAX_SPEC:
                raise RunConfigError(f"{what} spec {spec[:40]!r}... is longer than {MAX_SPEC} characters")
        with self.sessions.begin() as s:
            # only the operator's own run of this name: a pushed run (another owner's namespace) may
            # share name and config hash, and is never joined, resumed or counted as done here
            run = ops.operator_run(s, name)
            if run is not None:
                if run.config_hash != config_hash:
                    raise RunConfigError(
                        f"run {name!r} exists with a different configuration; pick another --run-name"
                    )
                run.status = "running"
                run.n_samples = max(run.n_samples, n_planned)
                config = dict(run.config or {})
                config["invocations"] = [*config.get("invocations", []), self._invocation(n_planned)]
                run.config = config  # a new object: JSON columns track assignment, not mutation
                return run
            task_row = ops.get_or_create_task(
                s, name=self.task.name, version=self.task.version, content_hash=self.task.content_hash,
                family=self.task.family, description=self.task.description,
                modalities=sorted(self.task.modalities), primary_metric=self.task.primary_metric,
                metrics={k: v.to_dict() for k, v in self.task.metrics.items()},
            )
            backend = self.cfg.model.split(":", 1)[0].split("(", 1)[0]
            model_row = ops.get_or_create_model(s, model.spec, backend=backend, display_name=self.cfg.model,
                                                info={"modalities": sorted(model.modalities),
                                                      "kind": spec_kind(self.cfg.model)})
            full_config = {**identity, **{k: v for k, v in asdict(self.cfg).items() if k != "db_url"},
                           "invocations": [self._invocation(n_planned)]}
            run = RunRow(
                name=name, owner=OPERATOR, task_id=task_row.id, model_id=model_row.id, judge_spec=judge_spec,
                config=full_config, config_hash=config_hash, harness_version=harness.__version__,
                git_revision=git_revision(), status="running", n_samples=n_planned, started_at=utcnow(),
            )
            s.add(run)
            s.flush()
            return run

    # ---- per-sample work -----------------------------------------------------------------------
    def _request(self, item: _Item, client: ModelClient) -> Request:
        req = client.prepare(self.task.prompt(item.sample), epoch=item.epoch)
        req.sample_id, req.epoch = item.sample.id, item.epoch
        return req

    def _row(self, item: _Item, run_id: int, output: Output | None, score: Score | None,
             error: str | None, error_kind: str | None) -> dict[str, Any]:
        usage = output.usage if output else Usage()
        req = item.request
        return {
            "run_id": run_id,
            "sample_id": item.sample.id,
            "epoch": item.epoch,
            "input_hash": item.cache_key or (req.fingerprint() if req else ""),
            "input": _stored_input(item),
            "target": item.sample.target,
            "output": output.text if output else "",
            "prediction": _prediction(output),
            "answer": score.answer if score else None,
            "scores": score.values if score else {},
            "unscored": score.unscored if score else None,
            "explanation": score.explanation if score else "",
            "details": _details(output, score),
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "calls": usage.calls,
            "cost": usage.cost,
            "latency_s": usage.seconds,
            "cached": bool(output and output.cached),
            "error": error,
            "error_kind": error_kind[:50] if error_kind else error_kind,
            "created_at": utcnow(),
        }

    def _record(self, row: dict[str, Any]) -> None:
        self.writer.record(row)

    def flush(self, run_id: int, force: bool = False) -> None:
        self.writer.flush(force)

    async def _score(self, item: _Item, output: Output, ctx: ScoreContext) -> Score:
        result = self.task.score(item.sample, output, ctx)
        if inspect.isawaitable(result):
            return await result
        return result

    async def _score_all(self, items: list[_Item], ctx: ScoreContext) -> dict[int, tuple[Score | None, str]]:
        """Score a chunk. Async scorers (judges) run concurrently, up to SCORE_CONCURRENCY samples
        at once, so a large-batch candidate does not leave the judge with one sample in flight;
        plain functions run inline (no per-sample task overhead)."""

        async def one(item: _Item) -> tuple[Score | None, str]:
            try:
                return await self._score(item, item.output, ctx), ""  # type: ignore[arg-type]
            except Exception as exc:
                return None, f"scorer: {exc}\n{traceback.format_exc(limit=3)}"

        if self._plain_scorer is None:
            self._plain_scorer = not inspect.iscoroutinefunction(self.task.score)
        if self._plain_scorer:
            # a plain scorer: called inline, no coroutine per sample (this is on the hot path at API rates)
            out: dict[int, tuple[Score | None, str]] = {}
            for item in items:
                try:
                    result = self.task.score(item.sample, item.output, ctx)  # type: ignore[arg-type]
                    out[id(item)] = (await result if inspect.isawaitable(result) else result), ""
                except Exception as exc:
                    out[id(item)] = None, f"scorer: {exc}\n{traceback.format_exc(limit=3)}"
            return out
        if len(items) <= 1:
            return {id(i): await one(i) for i in items}
        gate = asyncio.Semaphore(SCORE_CONCURRENCY)

        async def gated(item: _Item) -> tuple[Score | None, str]:
            async with gate:
                return await one(item)

        results = await asyncio.gather(*(gated(i) for i in items))
        return {id(i): r for i, r in zip(items, results, strict=True)}

    async def _prepare(self, window: list[_Item], client: ModelClient, run_id: int, use_cache: bool) -> list[_Item]:
        """Build the requests of a window of samples and look their replies up in the cache with one
        query (a lookup per sample would cost an SQL round trip each at batch_size 1). Every
        PREPARE_SLICE requests it lets the event loop run: building a whole window in one go held
        back every reply that arrived meanwhile (milliseconds at API rates)."""
        ready: list[_Item] = []
        with self.sessions.begin() as s:
            mine = leases.claim(s, run_id, self.owner, [(i.sample.id, i.epoch) for i in window])
        if len(mine) < len(window):
            # another live process holds these samples of the same run: leave them to it
            self.n_held_elsewhere += len(window) - len(mine)
            window = [i for i in window if (i.sample.id, i.epoch) in mine]
        for n, item in enumerate(window, 1):
            if n % PREPARE_SLICE == 0:
                await asyncio.sleep(0)
            try:
                item.request = self._request(item, client)
                item.request_dict = item.request.to_dict()
                item.cache_key = client.cache_key(item.request_dict)
                ready.append(item)
            except Exception as exc:  # bad sample (missing media, malformed field): its own error
                self._record(self._row(item, run_id, None, None, f"prompt: {exc}", "input"))
        if use_cache and ready:
            hits = client.lookup([i.cache_key for i in ready])
            for item in ready:
                if item.cache_key in hits:
                    item.output = hits[item.cache_key]
        return ready

    async def _process_chunk(self, ready: list[_Item], client: ModelClient, run_id: int, ctx: ScoreContext,
                             use_cache: bool) -> None:
        todo = [i for i in ready if i.output is None]
        if todo:
            t0 = time.perf_counter()
            try:
                # send, not call: a failed batch is recorded per sample with the exception's kind below
                outputs = await client.send([i.request for i in todo if i.request is not None])
            except Exception as exc:
                msg = f"{type(exc).__name__}: {exc}"
                for item in todo:
                    self._record(self._row(item, run_id, None, None, msg, _error_kind(exc)))
                ready = [i for i in ready if i.output is not None]
                outputs = []
            elapsed = time.perf_counter() - t0
            for item, fresh in zip(todo, outputs, strict=False):
                if not fresh.usage.seconds:
                    fresh.usage.seconds = elapsed / len(todo)
                item.output = fresh
            if use_cache:
                client.remember([(item.cache_key, reply) for item, reply in zip(todo, outputs, strict=False)])
        scored = await self._score_all([i for i in ready if i.output is not None and i.output.error is None], ctx)
        for item in ready:
            out = item.output
            assert out is not None
            if out.error is not None:
                # the backend's own kind (rate_limit, server, timeout, connection, bad_response) when
                # it says, else the generic "model"
                kind = out.details.get("error_kind") if isinstance(out.details, dict) else None
                self._record(self._row(item, run_id, out, None, out.error, str(kind or "model")))
                continue
            score, err = scored[id(item)]
            if score is None:
                self._record(self._row(item, run_id, out, None, err, "scorer"))
                continue
            # judge verdict records (harness.judge.attach) become rows of the judgements table;
            # the stored details keep a copy so the per-sample view shows them
            for verdict in score.judgements:
                self.writer.judgements.append({"run_id": run_id, "sample_id": item.sample.id,
                                              "epoch": item.epoch, "created_at": utcnow(), **verdict.to_dict()})
            self._record(self._row(item, run_id, out, score, None, None))

    # ---- main loop ---------------------------------------------------------------------------
    async def run_async(self) -> RunSummary:
        t_start = time.perf_counter()
        samples = select_samples(self.task, self.cfg)
        model = self.prepare_model()
        client = self.client
        assert client is not None
        judge, judge_spec = self.prepare_judge()
        ctx = ScoreContext(judge=judge, judge_spec=judge_spec, model=client)
        planned = [(s, e) for e in range(self.cfg.epochs) for s in samples]
        run = self.open_run(model, judge_spec, len(planned))
        ctx.run_id = self.writer.run_id = run.id
        with self.sessions() as s:
            done = ops.done_keys(s, run.id)
        pending = [_Item(s, e) for s, e in planned if (s.id, e) not in done]
        n_skipped = len(planned) - len(pending)
        use_cache = client.use_cache
        status = "finished"
        error: BaseException | None = None
        try:
            if pending and self.fit and isinstance(model, FitModel) and self.task.train is not None:
                # fit-then-predict backends (training methods) see the train split once
                model.fit(list(self.task.train()))
            with lighter_gc(), short_switch_interval():
                await self._drive(pending, client, run.id, ctx, use_cache, n_skipped, len(planned))
        except (KeyboardInterrupt, asyncio.CancelledError) as exc:
            status, error = "interrupted", exc
        except Exception as exc:
            status, error = "failed", exc
        # whatever happened, what finished is written and the run's status and metrics say so; the
        # first failure is what the caller sees
        try:
            self.flush(run.id, force=True)  # after the commit in flight, if any
        except StoreWriteError as exc:
            status, error = "failed", error or exc
        finally:
            self.writer.close()
        try:
            metrics = self.release(run.id) if self.unit and status == "finished" else self.finalize(run.id, status)
        except Exception as exc:
            metrics, error = [], error or exc
        if not self.unit:
            await client.aclose()
        if judge is not None:
            await judge.aclose()
        if error is not None:
            raise error
        w = self.writer
        return RunSummary(run.id, run.name, self.final_status, len(planned), n_skipped, w.n_new, w.n_err,
                          w.n_unscored, time.perf_counter() - t_start, metrics, w.error_kinds,
                          self.n_held_elsewhere)

    async def _drive(self, pending: list[_Item], client: ModelClient, run_id: int, ctx: ScoreContext,
                     use_cache: bool, n_skipped: int, n_total: int) -> None:
        model = client.model
        batch = max(1, int(getattr(model, "batch_size", 1) or 1))
        concurrency = self.cfg.concurrency or int(getattr(model, "concurrency", 1) or 1)
        n_workers = max(1, min(concurrency, -(-len(pending) // batch)))
        window = max(batch, 256)
        queue: asyncio.Queue[list[_Item] | None] = asyncio.Queue(maxsize=2 * n_workers)
        progress = RunProgress(self.cfg.progress, n_total, n_skipped, f"{self.task.name} · {self.cfg.model}")

        def advance() -> None:  # absolute counts: a worker's own delta would include the others' completions
            progress.update(n_skipped + self.writer.n_new, self.writer.n_err)
            if self.on_progress:
                self.on_progress(n_skipped + self.writer.n_new, n_total)

        async def producer() -> None:
            # windows of samples are prepared in order and handed out as chunks of batch_size; the
            # bounded queue keeps preparation (prompt building, media decoding) just ahead of the model
            try:
                for start in range(0, len(pending), window):
                    ready = await self._prepare(pending[start : start + window], client, run_id, use_cache)
                    advance()
                    for i in range(0, len(ready), batch):
                        await queue.put(ready[i : i + batch])
            finally:
                for _ in range(n_workers):
                    await queue.put(None)

        async def worker() -> None:
            while (chunk := await queue.get()) is not None:
                await self._process_chunk(chunk, client, run_id, ctx, use_cache)
                for item in chunk:  # recorded: the pending list need not keep its request and reply alive
                    item.request = item.request_dict = item.output = None
                advance()
                if self.writer.due():  # checked here: no coroutine per chunk while nothing is due
                    await self.writer.flush_async()
            # the queue is drained: only the replies in flight are left, and the loop has time, so
            # what is stored already is read for the final aggregation meanwhile
            if not self.unit and self._prefetch is None:
                self._prefetch = self.writer.submit(self._read_records, run_id)

        done = asyncio.Event()

        async def work() -> None:
            try:
                # a TaskGroup: one failing worker cancels the producer and the other workers (nobody
                # stays blocked on the queue) and its exception is raised here, never lost
                async with asyncio.TaskGroup() as group:
                    group.create_task(producer())
                    for _ in range(n_workers):
                        group.create_task(worker())
            finally:
                done.set()

        async def ticker() -> None:  # commit within FLUSH_SECONDS even while calls hang
            while not done.is_set():
                try:
                    await asyncio.wait_for(done.wait(), TICK_SECONDS)
                except TimeoutError:
                    await self.writer.flush_async()

        try:
            with progress:
                async with asyncio.TaskGroup() as outer:
                    outer.create_task(work())
                    outer.create_task(ticker())
        except BaseExceptionGroup as group:
            raise _first_leaf(group) from None

    def release(self, run_id: int) -> list[Metric]:
        """A finished unit: give its sample leases back and leave the run's status and metrics alone."""
        with self.sessions.begin() as s:
            leases.release(s, run_id, self.owner)
        self.final_status = "running"
        return []

    def finalize(self, run_id: int, status: str, claim: Callable[[Session], bool] | None = None) -> list[Metric]:
        """Metrics, counts and final status in one transaction (:mod:`harness.finalize`): a finaliser
        killed halfway leaves the run unfinished for the next one. ``claim``: finalise only if it
        holds under the run's lock (a sweep's last unit); else nothing is written and [] returned."""
        done = finalize_run(self.sessions, self.task, run_id, status, seed=self.cfg.seed, owner=self.owner,
                            prefetched=self._prefetched(), claim=claim)
        if done is None:
            return []
        self.final_status, metrics = done
        return metrics

    def _read_records(self, run_id: int) -> dict[int, SampleRecord]:
        with self.sessions() as s:
            return ops.records_by_id(s, run_id)

    def _prefetched(self) -> dict[int, SampleRecord] | None:
        """The records read during the run's last replies, or None (none read, or reading failed:
        then the finaliser reads every row itself)."""
        future, self._prefetch = self._prefetch, None
        if future is None:
            return None
        try:
            return future.result()
        except Exception:
            return None

    def run(self) -> RunSummary:
        return asyncio.run(self.run_async())


def evaluate(cfg: EvalConfig, **kwargs: Any) -> RunSummary:
    return Runner(cfg, **kwargs).run()


def score_samples(task: Task, samples: Sequence[Sample], outputs: Sequence[Output]) -> list[Score]:
    """Score outputs outside a run (tests, tools): no judge, no model under test."""

    async def go() -> list[Score]:
        ctx = ScoreContext()
        out = []
        for s, o in zip(samples, outputs, strict=True):
            r = task.score(s, o, ctx)
            out.append(await r if inspect.isawaitable(r) else r)
        return out

    return asyncio.run(go())
