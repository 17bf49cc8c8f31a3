"""``harness demo``: build the showcase database (offline) and serve the leaderboard on it."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated

import typer

from harness.cli_support import check_port, fail


def _check_only(only: list[str], size: str) -> None:
    """Refuse an ``--only`` name no family's demo has (naming the closest), or one with no run at this
    ``--size``: either would build the folder and database and then run nothing."""
    from harness.demo_plan import demo_families

    sizes = demo_families()
    families = sorted(sizes)
    for name in only:
        if name not in sizes:
            close = difflib.get_close_matches(name, families, n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            fail(f"--only {name!r} is not a demo family{hint} (families: {', '.join(families)})")
        if size not in sizes[name]:
            fail(f"--only {name!r}: the {size} demo has no {name} runs (use --size full)")


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo(
        folder: Annotated[Path, typer.Option("--dir", help="Folder for the database and its media (fixtures, "
                                             "artifacts, caches)")] = Path("harness-demo"),
        db: Annotated[str | None, typer.Option("--db", help="Database URL (default sqlite:///DIR/demo.db)")] = None,
        size: Annotated[str, typer.Option("--size", help="full (longer budgets, more baselines) or small")] = "full",
        only: Annotated[list[str] | None, typer.Option("--only", help="Only this family (repeatable; 'arena')")] = None,
        no_serve: Annotated[bool, typer.Option("--no-serve", help="Build only; do not start the leaderboard")] = False,
        host: Annotated[str, typer.Option(help="Interface to serve on")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="TCP port to serve on")] = 8000,
    ) -> None:
        """Build a showcase database offline -- every family on its fixture with built-in models, its
        reference backends and stub judges, arena battles with seeded votes -- then serve the
        leaderboard on it. One line per step, with its time. Rerunning resumes: finished runs are
        not redone."""
        from harness.demo import DemoPlanError, build_demo
        from harness.store.db import DatabaseError

        if size not in ("full", "small"):
            fail(f"--size must be full or small, not {size!r}")
        _check_only(only or [], size)  # before the folder or the database exists
        if not no_serve:
            check_port(port)
        url = db or f"sqlite:///{(folder / 'demo.db').resolve()}"
        typer.echo(f"building the {size} demo in {url} (its media under {folder / 'media'}/)", err=True)
        try:
            report = build_demo(url, folder, "small" if size == "small" else "full", only=only)
        except (DatabaseError, DemoPlanError, OSError) as exc:
            fail(str(exc))
        skipped = [r for r in report.results if r.status != "ok"]
        runs = f"{len(report.ok)} run{'s' if len(report.ok) != 1 else ''}"
        typer.echo(f"demo: {runs}, {len(skipped)} skipped or failed, {report.arena_votes} arena votes "
                   f"in {report.seconds:.0f} s; database {url}", err=True)
        if not any(r.status == "ok" for r in report.results):
            fail("no demo step succeeded")
        if no_serve:
            typer.echo(f"serve it with: harness serve --db {url} --media-root {report.media}", err=True)
            return
        import uvicorn

        from harness.leaderboard.app import create_app

        # one media root: the demo's media folder (the database beside it is not served)
        web = create_app(url, media_roots=[str(report.media)])
        typer.echo(f"leaderboard on http://{host}:{port} (Ctrl-C to stop)", err=True)
        uvicorn.run(web, host=host, port=port, log_level="warning", proxy_headers=False)
