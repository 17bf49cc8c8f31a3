"""``harness demo``: build the showcase database (offline) and serve the leaderboard on it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli_support import fail


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo(
        folder: Annotated[Path, typer.Option("--dir", help="Folder for the database, fixtures and renders")] = Path(
            "harness-demo"),
        db: Annotated[str | None, typer.Option("--db", help="Database URL (default sqlite:///DIR/demo.db)")] = None,
        size: Annotated[str, typer.Option("--size", help="full (a few minutes) or small (CI)")] = "full",
        only: Annotated[list[str] | None, typer.Option("--only", help="Only this family (repeatable; 'arena')")] = None,
        no_serve: Annotated[bool, typer.Option("--no-serve", help="Build only; do not start the leaderboard")] = False,
        host: Annotated[str, typer.Option(help="Interface to serve on")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="TCP port to serve on")] = 8000,
    ) -> None:
        """Build a showcase database offline -- every family on its fixture with built-in models and
        stub judges, arena battles with seeded votes -- then serve the leaderboard on it. Rerunning
        resumes: finished runs are not redone."""
        from harness.demo import build_demo
        from harness.store.db import DatabaseError

        if size not in ("full", "small"):
            fail(f"--size must be full or small, not {size!r}")
        url = db or f"sqlite:///{(folder / 'demo.db').resolve()}"
        typer.echo(f"building the {size} demo in {url} (fixtures and renders under {folder}/)", err=True)
        try:
            report = build_demo(url, folder, "small" if size == "small" else "full", only=only,
                                log=lambda line: typer.echo(line, err=True))
        except (DatabaseError, OSError) as exc:
            fail(str(exc))
        skipped = [r for r in report.results if r.status != "ok"]
        typer.echo(f"demo: {len(report.ok)} runs, {len(skipped)} skipped, {report.arena_votes} arena votes in "
                   f"{report.seconds:.0f}s; database {url}", err=True)
        if not report.ok:
            fail("no demo run succeeded")
        if no_serve:
            typer.echo(f"serve it with: harness serve --db {url} --media-root {folder / 'renders'}", err=True)
            return
        import uvicorn

        from harness.leaderboard.app import create_app

        # the arena reads the app's media roots too: the renders and the fixtures' videos show
        web = create_app(url, media_roots=[str(folder / "renders"), str(folder / "fixtures")])
        typer.echo(f"leaderboard on http://{host}:{port} (Ctrl-C to stop)", err=True)
        uvicorn.run(web, host=host, port=port, log_level="warning", proxy_headers=False)
