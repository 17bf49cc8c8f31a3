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
    db: DbOpt = None,
) -> None:
    """Evaluate MODEL on TASK; a rerun with the same settings resumes and does only what is missing."""
    from sqlalchemy.exc import SQLAlchemyError

    from harness.errors import UserError
    from harness.runner import EvalConfig, Runner

    if epochs is not None and epochs < 1:
        fail("--epochs must be at least 1")
    if limit is not None and limit < 0:
        fail("--limit must be >= 0")
    if concurrency is not None and concurrency < 1:
        fail("--concurrency must be at least 1")
    sessions = _sessions(db)
    task_options, model_settings = parse_kv(task_opt, "-T"), parse_kv(model_opt, "-M")
    judge_settings = parse_kv(judge_opt, "-J")
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
    try:
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


def _fmt(v: float | None) -> str:
    if v is None:
        return ""
    return f"{v:.4f}" if abs(v) < 1000 else f"{v:.1f}"


def _print_metrics(con: Any, sessions: Any, run_id: int, breakdowns: bool = True) -> None:
    from rich.table import Table
    from sqlalchemy import select

    from harness.store.schema import MetricRow

    with sessions() as s:
        rows = s.scalars(select(MetricRow).where(MetricRow.run_id == run_id).order_by(
            MetricRow.breakdown_key, MetricRow.breakdown_value, MetricRow.name)).all()
    table = Table(title="metrics (95% CI)")
    for col in ("breakdown", "metric", "value", "95% CI", "n"):
        table.add_column(col)
    for m in rows:
        if m.breakdown_key and not breakdowns:
            continue
        ci = f"[{_fmt(m.ci_low)}, {_fmt(m.ci_high)}]" if m.ci_low is not None else ""
        where = f"{m.breakdown_key}={m.breakdown_value}" if m.breakdown_key else "all"
        table.add_row(where, m.name, _fmt(m.value), ci, str(m.n))
    con.print(table)


@app.command("tasks")
def tasks_cmd() -> None:
    """List the registered tasks."""
    from rich.table import Table

    from harness.registry import entries

    table = Table(title="tasks")
    table.add_column("name")
    table.add_column("family")
    table.add_column("description")
    for e in entries("task"):
        table.add_row(e.name, e.family, e.description)
    _console().print(table)


@app.command("models")
def models_cmd() -> None:
    """List model backends, operators and aliases."""
    from rich.table import Table

    from harness.modelspec import alias_names, load_alias
    from harness.registry import entries

    table = Table(title="models")
    table.add_column("name")
    table.add_column("kind")
    table.add_column("description")
    for e in entries("model"):
        table.add_row(e.name, "operator" if e.operator else "backend", e.description)
    for name in alias_names():
        card = load_alias(name) or {}
        table.add_row(name, "alias", str(card.get("description", card.get("spec", ""))))
    _console().print(table)


@app.command("runs")
def runs_cmd(db: DbOpt = None, task: Annotated[str | None, typer.Option(help="Only this task")] = None) -> None:
    """List stored runs with their headline metric."""
    from rich.table import Table
    from sqlalchemy import select

    from harness.store.schema import MetricRow, ModelRow, RunRow, TaskRow

    sessions = _sessions(db)
    table = Table(title="runs")
    for col in ("id", "name", "task", "model", "status", "done", "errors", "headline", "95% CI"):
        table.add_column(col)
    with sessions() as s:
        q = select(RunRow, TaskRow, ModelRow).join(TaskRow, RunRow.task_id == TaskRow.id).join(
            ModelRow, RunRow.model_id == ModelRow.id).order_by(RunRow.id)
        if task:
            q = q.where(TaskRow.name == task)
        for run, t, m in s.execute(q):
            head = s.scalar(select(MetricRow).where(MetricRow.run_id == run.id, MetricRow.name == t.primary_metric,
                                                    MetricRow.breakdown_key == ""))
            table.add_row(str(run.id), run.name, t.name, m.display_name or m.spec, run.status,
                          f"{run.n_done}/{run.n_samples}", str(run.n_errors),
                          f"{t.primary_metric} {_fmt(head.value)}" if head else "",
                          f"[{_fmt(head.ci_low)}, {_fmt(head.ci_high)}]" if head and head.ci_low is not None else "")
    _console().print(table)


def _get_run(sessions: Any, name: str) -> Any:
    from harness.store import ops

    with sessions() as s:
        run = ops.find_run(s, name)
    if run is None:
        fail(f"no run named {name!r} (see `harness runs`)")
    return run


@app.command("show")
def show_cmd(run: str, db: DbOpt = None) -> None:
    """Show a run's configuration and metrics with CIs and breakdowns."""
    sessions = _sessions(db)
    row = _get_run(sessions, run)
    con = _console()
    con.print(f"[bold]{row.name}[/bold] (id {row.id}) status={row.status} done={row.n_done}/{row.n_samples} "
              f"errors={row.n_errors} cost=${row.total_cost:.4f}")
    con.print(f"model={row.config.get('model')} task={row.config.get('task')} v{row.config.get('task_version')} "
              f"hash={str(row.config.get('task_hash'))[:12]} harness={row.harness_version} "
              f"git={row.git_revision[:10]}")
    # what is stored, then every invocation that added to it (not the first one's --limit alone)
    con.print(f"samples stored: {row.n_done}")
    kinds = _error_kinds(sessions, row.id)
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
                db: DbOpt = None) -> None:
    """Paired comparison of two runs on the samples they share."""
    from harness.compare import compare_runs

    sessions = _sessions(db)
    a, b = _get_run(sessions, run_a), _get_run(sessions, run_b)
    try:
        results = compare_runs(sessions, a.id, b.id, metric)
    except ValueError as exc:
        fail(str(exc))
    from rich.table import Table

    table = Table(title=f"{a.name} (A) vs {b.name} (B)")
    for col in ("metric", "n", "A", "B", "B-A", "95% CI", "p", "test"):
        table.add_column(col)
    for r in results:
        table.add_row(r.metric, str(r.n), _fmt(r.mean_a), _fmt(r.mean_b), _fmt(r.diff),
                      f"[{_fmt(r.ci_low)}, {_fmt(r.ci_high)}]", f"{r.p_value:.4g}", r.test)
    _console().print(table)


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
    n = export_run(sessions, row.id, path, format)
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
    from harness.commands import arena, leaderboard

    arena.register(app)
    leaderboard.register(app)


_register_core_commands()


def main() -> None:
    from harness.resources import MissingResourceError

    try:
        app()
    except BrokenPipeError:  # `harness runs | head`
        sys.exit(0)
    except MissingResourceError as exc:  # an installation without its data files: one line, no traceback
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()
