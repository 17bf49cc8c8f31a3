"""``harness sweep run | status | cancel | list``: evaluation sweeps on Ray into one database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from harness.cli_support import DbOpt, console, fail, parse_kv, sessions_for


def absolute_db_url(db: str | None) -> str:
    """The URL workers on other processes can open: a relative SQLite path made absolute."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from harness.store.db import default_url

    raw = db or default_url()
    try:
        url = make_url(raw)
    except ArgumentError:
        fail(f"not a database URL: {raw!r}")
    if url.get_backend_name() == "sqlite":
        if not url.database or url.database == ":memory:":
            fail("an in-memory SQLite database cannot be shared with workers: use a file or PostgreSQL")
        url = url.set(database=str(Path(url.database).resolve()))
    return url.render_as_string(hide_password=False)


def _matrix(file: Path | None, tasks: list[str] | None, models: list[str] | None, task_opt: list[str] | None,
            model_opt: list[str] | None, seeds: str | None, epochs: int | None, limit: int | None, judge: str | None,
            judge_opt: list[str] | None, name: str | None) -> Any:
    from harness.sweep.matrix import Matrix, Resources, matrix_from_yaml

    if file is not None:
        # a flag beside a file would be silently ignored: the file is the whole matrix (--name aside)
        given = [flag for flag, value in (("-t", tasks), ("-m", models), ("-T", task_opt), ("-M", model_opt),
                                          ("--seeds", seeds), ("--epochs", epochs), ("--limit", limit),
                                          ("--judge", judge), ("-J", judge_opt)) if value is not None]
        if given:
            fail(f"give the matrix either as a file or with flags, not both ({', '.join(given)} beside the file)")
        matrix = matrix_from_yaml(file)
        if name:
            matrix.name = name
        return matrix
    try:
        seed_list = [int(s) for s in seeds.split(",")] if seeds else [0]
    except ValueError:
        fail(f"--seeds takes comma-separated integers, got {seeds!r}")
    options, settings = parse_kv(task_opt, "-T"), parse_kv(model_opt, "-M")
    return Matrix([(t, dict(options)) for t in tasks or []], [(m, dict(settings), Resources()) for m in models or []],
                  seed_list, 1 if epochs is None else epochs, limit, judge, parse_kv(judge_opt, "-J"), name)


def run_sweep(db: str | None, matrix: Any, *, workers: int, unit_size: int | None, ray: str | None,
              lease_seconds: float, progress: bool, as_json: bool) -> None:
    from sqlalchemy.exc import SQLAlchemyError

    from harness.errors import UserError
    from harness.sweep import SweepOptions, check_options, start
    from harness.sweep.matrix import expand

    opts = SweepOptions(workers=workers, unit_size=unit_size, ray_address=ray, lease_seconds=lease_seconds,
                        progress=progress and not as_json, say=lambda t: typer.echo(t, err=True))
    try:  # bad flags or matrix (schema, unknown names, no samples): one line before a database is opened
        check_options(opts)
        entries = expand(matrix)
    except (UserError, OSError) as exc:
        fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    url = absolute_db_url(db)
    sessions = sessions_for(url)
    try:
        result = start(sessions, url, matrix, opts, entries)
    except (UserError, OSError, SQLAlchemyError) as exc:
        fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    if as_json:
        typer.echo(json.dumps({"sweep": result.name, "id": result.sweep_id, "units": result.units,
                               "runs": result.runs, "workers": result.workers, "seconds": result.seconds}))
    else:
        _table(result.runs, f"sweep {result.name} ({result.seconds:.1f} s)")
    failed = [w.get("error") for w in result.workers if w.get("error")] + [
        e for w in result.workers for e in w.get("errors", [])]
    if not result.complete:
        first = f": {failed[0]}" if failed else ""
        not_done = sum(n for s, n in result.units.items() if s != "done")
        if not_done:
            fail(f"{not_done} units not done{first} (rerun the same command to continue)")
        left = result.unfinished_runs
        more = ", ..." if len(left) > 1 else ""
        fail(f"{len(left)} run(s) have every unit done but are not finished ({left[0]!r}{more}){first} "
             "(rerun the same command to finish them)")
    # a run whose every sample is an error measured nothing: the sweep did its work but did not succeed,
    # and a script (or CI) driving it must see that in the exit status, not only in the table
    failed_runs = [str(r.get("run")) for r in result.runs if r.get("status") == "failed"]
    if failed_runs:
        more = ", ..." if len(failed_runs) > 1 else ""
        fail(f"{len(failed_runs)} run(s) failed, every sample an error ({failed_runs[0]!r}{more}); "
             f"`harness show {failed_runs[0]}` lists the error kinds")


def _table(rows: list[dict[str, Any]], title: str) -> None:
    from rich.table import Table

    from harness.sweep.status import format_eta

    table = Table(title=title, pad_edge=False, box=None)
    # short headers and unwrapped numbers: on an 80-column terminal the run name gets the room
    for col in ("run", "status", "done", "err", "leased", "pend", "units", "/s", "ETA"):
        table.add_column(col, overflow="fold", no_wrap=col != "run",
                         justify="left" if col in ("run", "status") else "right")
    for r in rows:
        table.add_row(r["run"], r["status"], f"{r['done']}/{r['planned']}", str(r["errors"]), str(r["leased"]),
                      str(r["pending"]), f"{r['units_done']}/{r['units_total']}", f"{r['rate']:.1f}",
                      format_eta(r["eta_s"]))
    console().print(table)


def register(app: typer.Typer) -> None:
    sweep_app = typer.Typer(no_args_is_help=True, help="Sweeps: tasks × models × seeds on a Ray cluster.")
    app.add_typer(sweep_app, name="sweep")

    @sweep_app.command("run")
    def run_cmd(
        file: Annotated[Path | None, typer.Argument(help="A sweep YAML file (tasks, models, seeds, ...)")] = None,
        task: Annotated[list[str] | None, typer.Option("--task", "-t", help="Task (repeatable)")] = None,
        model: Annotated[list[str] | None, typer.Option("--model", "-m", help="Model spec (repeatable)")] = None,
        task_opt: Annotated[list[str] | None, typer.Option("-T", help="Option for every task, key=value")] = None,
        model_opt: Annotated[list[str] | None, typer.Option("-M", help="Setting for every model, key=value")] = None,
        seeds: Annotated[str | None, typer.Option(help="Comma-separated seeds (default 0)")] = None,
        epochs: Annotated[int | None, typer.Option(help="Repeat each sample N times (default 1)")] = None,
        limit: Annotated[int | None, typer.Option(help="First N samples of every task")] = None,
        judge: Annotated[str | None, typer.Option(help="Judge model spec")] = None,
        judge_opt: Annotated[list[str] | None, typer.Option("-J", help="Judge setting key=value")] = None,
        name: Annotated[str | None, typer.Option(help="Sweep name (default: a hash of the matrix)")] = None,
        workers: Annotated[int, typer.Option(help="Worker processes (Ray actors)")] = 2,
        unit_size: Annotated[int | None, typer.Option("--unit-size", help="Samples per work unit")] = None,
        ray: Annotated[str | None, typer.Option("--ray", help="Ray address: auto, HOST:PORT (default: local)")] = None,
        lease: Annotated[float, typer.Option(help="Seconds a unit lease lasts without a heartbeat")] = 30.0,
        no_progress: Annotated[bool, typer.Option("--no-progress")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON")] = False,
        db: DbOpt = None,
    ) -> None:
        """Expand the matrix into runs and evaluate them on Ray workers; rerun to resume."""
        from harness.errors import UserError

        try:
            matrix = _matrix(file, task, model, task_opt, model_opt, seeds, epochs, limit, judge, judge_opt, name)
        except UserError as exc:
            fail(str(exc))
        run_sweep(db, matrix, workers=workers, unit_size=unit_size, ray=ray, lease_seconds=lease,
                  progress=not no_progress, as_json=as_json)

    @sweep_app.command("status")
    def status_cmd(
        sweep: Annotated[str | None, typer.Argument(help="Sweep name or id (default: the latest)")] = None,
        as_json: Annotated[bool, typer.Option("--json")] = False,
        db: DbOpt = None,
    ) -> None:
        """Per run: done / leased / pending / errors, rate and ETA."""
        from harness.store import units
        from harness.sweep.status import sweep_progress

        sessions = sessions_for(db)
        row = units.find_sweep(sessions, sweep) if sweep else next(iter(units.list_sweeps(sessions)), None)
        if row is None:
            fail(f"no sweep {sweep!r}" if sweep else "no sweeps in this database (start one with `harness sweep run`)")
        rows = [r.to_dict() for r in sweep_progress(sessions, row.id)]
        left = units.outstanding(sessions, row.id)
        if as_json:
            typer.echo(json.dumps({"sweep": row.name, "id": row.id, "status": row.status, "units": left, "runs": rows}))
            return
        counts = ", ".join(f"{k} {v}" for k, v in sorted(left.items()))
        _table(rows, f"sweep {row.name} · {row.status} · units {counts}")

    @sweep_app.command("cancel")
    def cancel_cmd(sweep: Annotated[str, typer.Argument(help="Sweep name or id")], db: DbOpt = None) -> None:
        """Stop a sweep: workers take no more units and its leases are released."""
        from harness.store import units

        sessions = sessions_for(db)
        row = units.find_sweep(sessions, sweep)
        if row is None:
            fail(f"no sweep {sweep!r}")
        released = units.cancel(sessions, row.id)
        typer.echo(f"sweep {row.name!r} cancelled; {released} leased units released")

    @sweep_app.command("list")
    def list_cmd(db: DbOpt = None, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
        """Sweeps in this database, newest first."""
        from harness.store import units

        sessions = sessions_for(db)
        rows = [{"id": r.id, "name": r.name, "status": r.status, "runs": len(r.config.get("runs", [])),
                 "created": r.created_at.isoformat(timespec="seconds")} for r in units.list_sweeps(sessions)]
        if as_json:
            typer.echo(json.dumps(rows))
            return
        for r in rows:
            typer.echo(f"{r['id']:>4}  {r['status']:<10} {r['runs']:>4} runs  {r['created']}  {r['name']}")


def check_shards(shards: int) -> None:
    from harness.sweep.schema import MAX_WORKERS

    if not 1 <= shards <= MAX_WORKERS:
        fail(f"--shards must be between 1 and {MAX_WORKERS}, got {shards}")


def sharded_eval(cfg: Any, db: str | None, shards: int, ray: str | None, *, progress: bool) -> None:
    """``harness eval ... --shards N``: one run's samples across N workers, as a one-run sweep named
    after the run (so the same command resumes it)."""
    from harness.errors import UserError
    from harness.runner import build_task, default_run_name
    from harness.sweep.matrix import Matrix, Resources

    check_shards(shards)
    if cfg.sample_ids or cfg.run_name:
        fail("--shards splits the whole task under its default run name: use --limit, not --samples or --run-name")
    try:
        name = default_run_name(build_task(cfg.task, cfg.task_options), cfg)
    except UserError as exc:
        fail(str(exc))
    matrix = Matrix([(cfg.task, cfg.task_options)], [(cfg.model, cfg.model_settings, Resources())], [cfg.seed],
                    cfg.epochs, cfg.limit, cfg.judge, cfg.judge_settings, f"eval-{name}")
    run_sweep(db, matrix, workers=shards, unit_size=None, ray=ray, lease_seconds=30.0, progress=progress,
              as_json=False)
