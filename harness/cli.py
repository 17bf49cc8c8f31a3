"""The ``harness`` command line (typer). Heavy modules are imported inside each command."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from harness.cli_support import DbOpt, fail, parse_kv
from harness.cli_support import console as _console
from harness.cli_support import sessions_for as _sessions
from harness.cli_tables import CsvOpt, JsonOpt

__all__ = ["DbOpt", "app", "fail", "main", "parse_kv"]


class _PluginGroup(TyperGroup):
    """The top-level group: besides the core commands, each installed family's CLI (its manifest's
    ``cli``) and each ``harness.cli`` entry point is a subcommand, imported only when it is run or
    listed. A plugin that fails to load is reported on stderr and left out, never fatal."""

    def _plugins(self) -> dict[str, str]:
        from importlib.metadata import entry_points

        from harness.families import families

        found = {fam.command: fam.cli for fam in families().values() if fam.cli}
        for ep in entry_points(group="harness.cli"):
            found.setdefault(ep.name, ep.value)
        return {name: target for name, target in found.items() if name not in self.commands}

    # typer vendors its own click: its Context/Command types are typer's (Any here, not the click package)
    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *sorted(self._plugins())]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands:
            target = self._plugins().get(cmd_name)
            if target is not None:
                try:
                    from harness.families import resolve

                    sub = resolve(target)
                    cmd = typer.main.get_command(sub) if isinstance(sub, typer.Typer) else sub
                except Exception as exc:
                    print(f"warning: CLI plugin {cmd_name} ({target}) not loaded: {exc}", file=sys.stderr)
                    return None
                cmd.name = cmd_name
                self.add_command(cmd, cmd_name)
        return super().get_command(ctx, cmd_name)


app = typer.Typer(cls=_PluginGroup, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Evaluate models on tasks; every sample, score and cost goes to SQL.")
db_app = typer.Typer(no_args_is_help=True, help="Database maintenance.")
app.add_typer(db_app, name="db")


@app.command("eval")
def eval_cmd(
    task: Annotated[str | None, typer.Option("--task", "-t", help="Task name (see `harness tasks`)")] = None,
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Model spec: alias, backend:path or op(model, k=v)")
    ] = None,
    task_opt: Annotated[list[str] | None, typer.Option("-T", help="Task option key=value")] = None,
    model_opt: Annotated[list[str] | None, typer.Option("-M", help="Model/generation setting key=value")] = None,
    judge: Annotated[str | None, typer.Option(help="Judge model spec for LLM-graded tasks")] = None,
    judge_opt: Annotated[list[str] | None, typer.Option("-J", help="Judge setting key=value (e.g. base_url)")] = None,
    limit: Annotated[int | None, typer.Option(help="Evaluate only the first N samples")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed for sampling and bootstrap (default 0)")] = None,
    epochs: Annotated[int | None, typer.Option(help="Repeat each sample N times (default 1)")] = None,
    samples: Annotated[str | None, typer.Option(help="Comma-separated sample ids")] = None,
    concurrency: Annotated[int | None, typer.Option(help="Calls in flight (default: the model's)")] = None,
    dp: Annotated[int | None, typer.Option("--dp", help="Data-parallel replicas (vLLM: Ray actors); = -M dp=N")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Bypass the response cache")] = False,
    run_name: Annotated[str | None, typer.Option("--run-name", help="Name of the run (default derived)")] = None,
    resume: Annotated[
        str | None, typer.Option("--resume", help="Resume a stored run (name or id) with its stored settings")
    ] = None,
    no_progress: Annotated[bool, typer.Option("--no-progress")] = False,
    shards: Annotated[int | None, typer.Option(help="Split the run across N Ray workers (leased work units)")] = None,
    ray: Annotated[str | None, typer.Option("--ray", help="Ray address for --shards: auto, HOST:PORT (default local)")]
    = None,
    db: DbOpt = None,
) -> None:
    """Evaluate MODEL on TASK; a rerun with the same settings resumes and does only what is missing."""
    from sqlalchemy.exc import SQLAlchemyError

    from harness.errors import UserError
    from harness.options_task import check_task_options
    from harness.runner import EvalConfig, Runner

    if epochs is not None and epochs < 1:
        fail("--epochs must be at least 1")
    if limit is not None and limit < 0:
        fail("--limit must be >= 0")
    if concurrency is not None and concurrency < 1:
        fail("--concurrency must be at least 1")
    if shards is not None:  # before the database is opened; 0 is refused, not read as the default
        from harness.commands.sweep import check_shards

        check_shards(shards)
    # options first: a refused value is one line before the database is opened (or created)
    task_options, model_settings = parse_kv(task_opt, "-T"), parse_kv(model_opt, "-M")
    judge_settings = parse_kv(judge_opt, "-J")
    if task and task_options:
        from harness.run_config import text_options_as_written

        task_options = text_options_as_written(task, task_options, task_opt)
    sessions = _sessions(db)
    if dp is not None:
        model_settings["dp"] = dp
    if resume:
        # a resumed run is the stored run: anything that would change what it measures is refused,
        # not silently dropped (how much to run -- --limit, --samples, --concurrency -- may change)
        changed = [flag for flag, given in (("--task", task), ("--model", model), ("-T", task_options),
                                            ("-M", model_settings), ("--judge", judge), ("-J", judge_settings),
                                            ("--seed", seed), ("--epochs", epochs)) if given]
        if changed:
            fail(f"--resume runs the stored settings; {', '.join(changed)} would change run {resume!r}'s identity "
                 "(start a new run instead, e.g. with --run-name)")
        stored = _get_run(sessions, resume)
        c = stored.config
        task, model, judge = c["task"], c["model"], c.get("judge")
        seed, epochs = c.get("seed", 0), c.get("epochs", 1)
        task_options, model_settings = dict(c.get("task_options") or {}), dict(c.get("model_settings") or {})
        judge_settings = dict(c.get("judge_settings") or {})
        if limit is None:  # what the last invocation chose
            limit = ((c.get("invocations") or [{}])[-1]).get("limit", c.get("limit"))
        resume = stored.name
    if not task or not model:
        fail("--task and --model are required (or --resume RUN)")
    cfg = EvalConfig(
        task=task, model=model, task_options=task_options, model_settings=model_settings,
        judge=judge, judge_settings=judge_settings, limit=limit, seed=0 if seed is None else seed,
        epochs=1 if epochs is None else epochs,
        sample_ids=[s.strip() for s in samples.split(",") if s.strip()] if samples else None,
        concurrency=concurrency, use_cache=not no_cache, run_name=resume or run_name, db_url=db,
        progress=not no_progress,
    )
    if shards is not None or ray is not None:
        from harness.commands.sweep import sharded_eval

        sharded_eval(cfg, db, shards or 2, ray, progress=not no_progress)
        return
    try:
        # unknown -T keys are one line naming the closest options (before any model loads)
        check_task_options(task, task_options)
        runner = Runner(cfg, session_factory=sessions)
        summary = runner.run()
    except (UserError, OSError) as exc:  # OSError: a file or folder a task or backend could not open
        fail(str(exc))
    except SQLAlchemyError as exc:  # a read-only, locked or broken database: one line, not a traceback
        orig = getattr(exc, "orig", None) or exc
        fail(f"database: {str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__}")
    except KeyboardInterrupt:
        typer.echo("interrupted: finished samples are stored; rerun the same command to resume", err=True)
        raise typer.Exit(130) from None
    con = _console()
    con.print(
        f"[bold]run[/bold] {summary.run_name} (id {summary.run_id}): {summary.status}; "
        f"{summary.n_new} new, {summary.n_skipped} already done, {summary.n_errors} errors, "
        f"{summary.n_unscored} unscored, {summary.seconds:.1f}s"
    )
    if summary.n_held_elsewhere:
        con.print(f"{summary.n_held_elsewhere} samples were left to another process working on this run")
    if summary.errors:
        con.print("errors by kind: " + ", ".join(f"{k}={v}" for k, v in sorted(summary.errors.items())))
    _print_metrics(con, sessions, summary.run_id, breakdowns=False)
    if summary.status == "failed":  # nothing was measured: the exit status says so, not only the table
        fail(f"run {summary.run_name} failed: every sample is an error (see the error kinds above)")


def _fmt(v: float | None) -> str:
    if v is None:
        return ""
    return f"{v:.4f}" if abs(v) < 1000 else f"{v:.1f}"


def _metric_records(sessions: Any, run_id: int, breakdowns: bool = True) -> list[dict[str, Any]]:
    from sqlalchemy import select

    from harness.store.schema import MetricRow

    with sessions() as s:
        rows = s.scalars(select(MetricRow).where(MetricRow.run_id == run_id).order_by(
            MetricRow.breakdown_key, MetricRow.breakdown_value, MetricRow.name)).all()
    return [{"breakdown_key": m.breakdown_key or None, "breakdown_value": m.breakdown_value if m.breakdown_key
             else None, "metric": m.name, "value": m.value, "ci_low": m.ci_low, "ci_high": m.ci_high, "n": m.n}
            for m in rows if breakdowns or not m.breakdown_key]


def _metric_value(record: dict[str, Any]) -> str:
    """A count (an integer with no interval: errors, unscored, iterations) reads as one, not as ``1.0000``,
    which looks like a rate."""
    value = record["value"]
    if isinstance(value, float) and value.is_integer() and record["ci_low"] is None and abs(value) < 1e15:
        return f"{int(value):,}"
    return _fmt(value)


def _metric_columns() -> list[Any]:
    from harness.cli_tables import Column

    return [Column("breakdown", "breakdown_key", show=lambda r: f"{r['breakdown_key']}={r['breakdown_value']}"
                   if r["breakdown_key"] else "all"),
            Column("metric", "metric", ident=True), Column("value", "value", show=_metric_value, right=True),
            Column("95% CI", "ci_low", show=lambda r: _ci(r["ci_low"], r["ci_high"]), drop=1),
            Column("n", "n", right=True, drop=2)]


def _print_metrics(con: Any, sessions: Any, run_id: int, breakdowns: bool = True) -> None:
    from harness.cli_tables import output_width, render_table

    con.file.write(render_table("metrics (95% CI)", _metric_columns(), _metric_records(sessions, run_id, breakdowns),
                                output_width()))


@app.command("tasks")
def tasks_cmd(
    name: Annotated[str | None, typer.Argument(help="Show this task's options, metrics and data")] = None,
    as_json: JsonOpt = False, as_csv: CsvOpt = False,
) -> None:
    """List the registered tasks, or describe one: options (types, defaults), metrics, data, licence."""
    from harness.cli_tables import Column, emit
    from harness.registry import entries

    if name is not None:
        _describe_task(name, as_json, as_csv)
        return
    records = [{"name": e.name, "family": e.family, "description": e.description} for e in entries("task")]
    emit(records, [Column("name", "name", ident=True), Column("family", "family", drop=1),
                   Column("description", "description")], title="tasks", as_json=as_json, as_csv=as_csv)


def _describe_task(name: str, as_json: bool, as_csv: bool) -> None:
    import inspect

    from harness.cli_tables import Column, emit, output_width, render_table
    from harness.errors import UserError
    from harness.options_task import describe_task

    try:
        info = describe_task(name)
    except UserError as exc:
        fail(str(exc))
    option_cols = [Column("option", "name", ident=True), Column("type", "type", drop=2),
                   Column("default", "default", show=lambda r: "(required)" if r["required"] else repr(r["default"])),
                   Column("meaning", "doc")]
    if as_json or as_csv:  # CSV: the option table (the one list here); JSON: everything
        emit(info["options"], option_cols, as_json=as_json, as_csv=as_csv, json_value=info)
        return
    width = output_width()
    lines = [f"{info['name']}: {info['description']}"]
    if info["family"]:
        lines.append(f"family: {info['family']}")
    body = info["doc"].strip()
    # the docstring when it says more than the option table will (an option it left undescribed)
    if body and body != info["description"] and not all(o["doc"] for o in info["options"]):
        lines += ["", inspect.cleandoc(body), ""]
    # the family's bundled files: what its tasks read unless a task generates its own data
    lines.append(f"data (family files): {info['data_source'] or 'none declared (see the family README)'}")
    lines.append(f"licence: {info['licence'] or 'not declared (see the family README)'}")
    if info["modalities"]:
        lines.append(f"modalities: {', '.join(info['modalities'])}")
    if info["needs_judge"]:
        lines.append(f"judge: needed (--judge; default {info.get('default_judge') or 'none'})")
    typer.echo("\n".join(lines))
    if info["options"]:
        typer.echo(render_table(f"-T options{' (and any other key)' if info['other_options'] else ''}",
                                option_cols, info["options"], width), nl=False)
    else:
        typer.echo("-T options: none" + (" declared (the task takes any key)" if info["other_options"] else ""))
    if info.get("argument"):
        _print_values(name, info)
        return
    if info["metrics_error"]:
        typer.echo(f"metrics: unknown here ({info['metrics_error']})")
        return
    direction = {"higher": "higher is better", "lower": "lower is better", None: "not ranked"}
    metric_cols = [Column("metric", "name", ident=True), Column("direction", "direction",
                                                                 show=lambda r: direction.get(r["direction"], "")),
                   Column("scale", "scale", drop=1), Column("shown as", "display", drop=2)]
    primary = info["primary_metric"]
    typer.echo(render_table(f"metrics (primary: {primary})", metric_cols, info["metrics"], width), nl=False)


def _print_values(name: str, info: dict[str, Any]) -> None:
    """A parametric task's values, one per line (grep-able, as long as the library is)."""
    what = info["argument"]
    typer.echo(f"tasks: {name}:{what.upper()}; metrics: {info['metrics_error']}")
    if info.get("values_error"):
        typer.echo(f"{what} values: unknown here ({info['values_error']})")
        return
    values = info.get("values") or []
    typer.echo(f"{len(values)} of them:")
    typer.echo("\n".join(f"  {name}:{v}" for v in values))


@app.command("models")
def models_cmd(
    name: Annotated[str | None, typer.Argument(help="Show this backend's -M settings: types, defaults")] = None,
    as_json: JsonOpt = False, as_csv: CsvOpt = False,
) -> None:
    """List model backends, operators and aliases, or describe one backend's settings."""
    from harness.cli_tables import Column, emit
    from harness.modelspec import alias_names, load_alias
    from harness.registry import entries

    if name is not None:
        _describe_model(name, as_json, as_csv)
        return
    records: list[dict[str, Any]] = [
        {"name": e.name, "kind": "operator" if e.operator else "backend", "description": e.description}
        for e in entries("model")]
    for alias in alias_names():
        card = load_alias(alias) or {}
        records.append({"name": alias, "kind": "alias",
                        "description": str(card.get("description", card.get("spec", "")))})
    emit(records, [Column("name", "name", ident=True), Column("kind", "kind", drop=1),
                   Column("description", "description")], title="models", as_json=as_json, as_csv=as_csv)


def _describe_model(name: str, as_json: bool, as_csv: bool) -> None:
    """A backend's declared -M settings (and the generation keys every backend takes), as a table."""
    from harness.backend_settings import GENERATION, declared, type_name
    from harness.cli_tables import Column, emit
    from harness.errors import UserError
    from harness.modelspec import load_alias, parse_spec
    from harness.registry import lookup

    backend = name.split(":", 1)[0]
    card = load_alias(name) if ":" not in name else None
    if card is not None:  # an alias: its backend's settings, after the card's own
        backend = parse_spec(str(card.get("spec") or (card.get("variants") or [{}])[0].get("spec", ""))).name
    try:
        entry = lookup("model", backend)
    except UserError as exc:
        fail(str(exc))
    rows = [{"setting": key, "type": type_name(s.type), "default": s.default, "meaning": s.doc,
             "scope": "backend"} for key, s in sorted(declared(entry.settings).items())]
    if not entry.operator:  # an operator takes its parameters only; -M generation keys reach its models
        rows += [{"setting": key, "type": type_name(s.type), "default": s.default, "meaning": s.doc,
                  "scope": "generation (every backend)"} for key, s in GENERATION.items()]
    info = {"name": entry.name, "description": entry.description, "kind": entry.model_kind,
            "operator": entry.operator, "strict": entry.strict, "settings": rows,
            "alias_settings": dict(card.get("settings") or {}) if card else {}}
    columns = [Column("setting", "setting", ident=True), Column("type", "type"),
               Column("default", "default", show=lambda r: repr(r["default"])), Column("meaning", "meaning"),
               Column("scope", "scope", drop=1)]
    if as_json or as_csv:
        emit(rows, columns, as_json=as_json, as_csv=as_csv, json_value=info)
        return
    head = [f"{entry.name}: {entry.description}",
            f"kind: {entry.model_kind}" + (" (operator)" if entry.operator else "")]
    if card is not None:
        head.append(f"alias {name} -> {card.get('spec') or 'variants by modality'}; its settings: "
                    f"{dict(card.get('settings') or {}) or 'none'}")
    head.append("-M keys: " + ("only these" if entry.strict else "these, and any other the backend passes on"))
    typer.echo("\n".join(head))
    emit(rows, columns, title=f"{entry.name} settings")


def _ci(low: float | None, high: float | None) -> str:
    return f"[{_fmt(low)}, {_fmt(high)}]" if low is not None and low == low else ""  # NaN: no interval


@app.command("runs")
def runs_cmd(db: DbOpt = None, task: Annotated[str | None, typer.Option(help="Only this task")] = None,
             as_json: JsonOpt = False, as_csv: CsvOpt = False) -> None:
    """List stored runs with their headline metric."""
    from sqlalchemy import select

    from harness.cli_tables import Column, emit
    from harness.store.schema import MetricRow, ModelRow, RunRow, TaskRow

    sessions = _sessions(db)
    records: list[dict[str, Any]] = []
    with sessions() as s:
        q = select(RunRow, TaskRow, ModelRow).join(TaskRow, RunRow.task_id == TaskRow.id).join(
            ModelRow, RunRow.model_id == ModelRow.id).order_by(RunRow.id)
        if task:
            q = q.where(TaskRow.name == task)
        for run, t, m in s.execute(q):
            head = s.scalar(select(MetricRow).where(MetricRow.run_id == run.id, MetricRow.name == t.primary_metric,
                                                    MetricRow.breakdown_key == ""))
            records.append({
                "id": run.id, "name": run.name, "task": t.name, "model": m.display_name or m.spec, "status": run.status,
                "n_done": run.n_done, "n_samples": run.n_samples, "n_errors": run.n_errors,
                "metric": t.primary_metric, "value": head.value if head else None,
                "ci_low": head.ci_low if head else None, "ci_high": head.ci_high if head else None,
                "cost": run.total_cost, "owner": run.owner or "operator",
            })
    pushed = any(r["owner"] != "operator" for r in records)
    cols = [Column("id", "id", ident=True, right=True), Column("name", "name", ident=True),
            Column("task", "task", drop=3), Column("model", "model", drop=2), Column("status", "status", drop=4),
            Column("done", "n_done", show=lambda r: f"{r['n_done']}/{r['n_samples']}", right=True),
            Column("errors", "n_errors", drop=5, right=True),
            Column("headline", "value", show=lambda r: f"{r['metric']} {_fmt(r['value'])}" if r["value"] is not None
                   else ""),
            Column("95% CI", "ci_low", show=lambda r: _ci(r["ci_low"], r["ci_high"]), drop=6)]
    if pushed:  # runs pushed by token holders share names with the operator's: say whose each one is
        cols.insert(2, Column("owner", "owner", drop=1))
    emit(records, cols, title="runs", as_json=as_json, as_csv=as_csv)


def _get_run(sessions: Any, name: str) -> Any:
    from harness.store import ops

    with sessions() as s:
        run = ops.find_run(s, name)
    if run is None:
        fail(f"no run named {name!r} (see `harness runs`)")
    return run


@app.command("show")
def show_cmd(run: str, db: DbOpt = None, as_json: JsonOpt = False, as_csv: CsvOpt = False) -> None:
    """Show a run's configuration and metrics with CIs and breakdowns (--csv: the metrics)."""
    sessions = _sessions(db)
    row = _get_run(sessions, run)
    kinds = _error_kinds(sessions, row.id)
    if as_json or as_csv:
        from harness.cli_tables import emit

        metrics = _metric_records(sessions, row.id)
        emit(metrics, _metric_columns(), as_json=as_json, as_csv=as_csv, json_value={
            "id": row.id, "name": row.name, "status": row.status, "n_done": row.n_done, "n_samples": row.n_samples,
            "n_errors": row.n_errors, "errors_by_kind": dict(kinds), "cost": row.total_cost,
            "harness_version": row.harness_version, "git_revision": row.git_revision, "config": row.config,
            "metrics": metrics})
        return
    con = _console()
    con.print(f"[bold]{row.name}[/bold] (id {row.id}) status={row.status} done={row.n_done}/{row.n_samples} "
              f"errors={row.n_errors} cost=${row.total_cost:.4f}", soft_wrap=True)
    con.print(f"model={row.config.get('model')} task={row.config.get('task')} v{row.config.get('task_version')} "
              f"hash={str(row.config.get('task_hash'))[:12]} harness={row.harness_version} "
              f"git={row.git_revision[:10]}", soft_wrap=True)
    # what is stored, then every invocation that added to it (not the first one's --limit alone)
    con.print(f"samples stored: {row.n_done}")
    if kinds:
        con.print("errors by kind: " + ", ".join(f"{k}={v}" for k, v in kinds))
    for i, inv in enumerate(row.config.get("invocations") or [], 1):
        limit = "all" if inv.get("limit") is None else inv["limit"]
        con.print(f"  invocation {i}: {inv.get('at', '')} limit={limit} planned={inv.get('n_planned')} "
                  f"cache={'on' if inv.get('use_cache', True) else 'off'}")
    _print_metrics(con, sessions, row.id)


def _error_kinds(sessions: Any, run_id: int) -> list[tuple[str, int]]:
    from sqlalchemy import func, select

    from harness.store.schema import SampleResultRow

    with sessions() as s:
        rows = s.execute(select(SampleResultRow.error_kind, func.count()).where(
            SampleResultRow.run_id == run_id, SampleResultRow.error.is_not(None))
            .group_by(SampleResultRow.error_kind).order_by(SampleResultRow.error_kind)).all()
    return [(str(kind or "error"), int(n)) for kind, n in rows]


@app.command("compare")
def compare_cmd(run_a: str, run_b: str, metric: Annotated[str | None, typer.Option(help="Score name")] = None,
                db: DbOpt = None, as_json: JsonOpt = False, as_csv: CsvOpt = False) -> None:
    """Paired comparison of two runs on the samples they share."""
    from harness.cli_tables import Column, emit
    from harness.compare import compare_runs

    sessions = _sessions(db)
    a, b = _get_run(sessions, run_a), _get_run(sessions, run_b)
    try:
        results = compare_runs(sessions, a.id, b.id, metric)
    except ValueError as exc:
        fail(str(exc))
    records = [{"metric": r.metric, "n": r.n, "mean_a": r.mean_a, "mean_b": r.mean_b, "diff": r.diff,
                "ci_low": r.ci_low, "ci_high": r.ci_high, "p_value": r.p_value, "test": r.test} for r in results]
    cols = [Column("metric", "metric", ident=True), Column("n", "n", right=True, drop=2),
            Column("A", "mean_a", show=lambda r: _fmt(r["mean_a"]), right=True),
            Column("B", "mean_b", show=lambda r: _fmt(r["mean_b"]), right=True),
            Column("B-A", "diff", show=lambda r: _fmt(r["diff"]), right=True),
            Column("95% CI", "ci_low", show=lambda r: _ci(r["ci_low"], r["ci_high"])),
            Column("p", "p_value", show=lambda r: f"{r['p_value']:.4g}" if r["p_value"] == r["p_value"] else "",
                   right=True, drop=1),
            Column("test", "test", drop=3)]
    emit(records, cols, title=f"{a.name} (A) vs {b.name} (B)", as_json=as_json, as_csv=as_csv,
         json_value={"a": {"id": a.id, "name": a.name}, "b": {"id": b.id, "name": b.name}, "results": records})


@app.command("export")
def export_cmd(run: str, format: Annotated[str, typer.Option("--format", "-f")] = "jsonl",
               output: Annotated[Path | None, typer.Option("--output", "-o")] = None, db: DbOpt = None) -> None:
    """Export a run's samples as csv, jsonl or parquet (pandas)."""
    from harness.export import export_run

    if format not in ("csv", "jsonl", "parquet"):
        fail(f"unknown format {format!r}: choose csv, jsonl or parquet")
    sessions = _sessions(db)
    row = _get_run(sessions, run)
    path = output or Path(f"{row.name.replace('/', '_')}.{format}")
    if str(path) == "-":  # standard output, as Unix tools read it; the count goes to stderr
        if format == "parquet" and sys.stdout.isatty():
            fail("parquet is binary: redirect standard output to a file (or give -o FILE)")
        n = export_run(sessions, row.id, Path("-"), format)
        typer.echo(f"wrote {n} samples to standard output", err=True)
        return
    # the target first (not after reading every row): a folder, a missing folder or /proc is one line
    if path.is_dir():
        fail(f"cannot write {path}: it is a folder (give a file name with -o)")
    if not path.absolute().parent.is_dir():
        fail(f"cannot write {path}: folder {path.absolute().parent} does not exist")
    try:
        n = export_run(sessions, row.id, path, format)
    except OSError as exc:
        fail(f"cannot write {path}: {exc.strerror or exc}")
    typer.echo(f"wrote {n} samples to {path}")


@db_app.command("upgrade")
def db_upgrade(db: DbOpt = None, revision: str = "head") -> None:
    """Apply database migrations (creates the database if it is new)."""
    from harness.store.db import DatabaseError, current_revision, make_engine, upgrade

    try:
        engine = make_engine(db)
        before = current_revision(engine)
        after = upgrade(engine, revision)
    except DatabaseError as exc:
        fail(str(exc))
    typer.echo(f"database {engine.url!r}: {before or 'empty'} -> {after}")


@db_app.command("current")
def db_current(db: DbOpt = None) -> None:
    """Print the database's migration revision."""
    from harness.store.db import DatabaseError, current_revision, make_engine

    try:
        typer.echo(current_revision(make_engine(db)) or "empty")
    except DatabaseError as exc:
        fail(str(exc))


def _register_core_commands() -> None:
    """The leaderboard and arena commands are part of the product, not plugins: mounted always."""
    from harness.commands import arena, demo, leaderboard, sweep

    arena.register(app)
    leaderboard.register(app)
    sweep.register(app)
    demo.register(app)


_register_core_commands()


def main() -> None:
    from harness.errors import UserError
    from harness.resources import MissingResourceError

    try:
        app()
    except BrokenPipeError:  # `harness runs | head`
        sys.exit(0)
    except MissingResourceError as exc:  # an installation without its data files: one line, no traceback
        sys.exit(f"error: {exc}")
    except UserError as exc:
        # the net under every command (core, family and plugin CLIs): a user error that a command did
        # not turn into a line itself (most call `fail`) still ends as one, with exit status 2
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
