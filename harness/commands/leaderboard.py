"""Leaderboard commands: ``harness serve``, ``harness push`` and ``harness tokens``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from harness.cli_support import DbOpt, check_port
from harness.cli_support import fail as _fail
from harness.cli_support import sessions_for as _sessions


def _create_token(db: str | None, name: str) -> None:
    from harness.leaderboard.tokens import TokenError, check_name, create_token

    try:
        check_name(name)  # before the database is opened: a refused name creates nothing
        token = create_token(_sessions(db), name)
    except TokenError as exc:
        _fail(str(exc))
    typer.echo(f"token {name!r} (shown once; store it safely):", err=True)
    typer.echo(token)


def register(app: typer.Typer) -> None:
    tokens_app = typer.Typer(no_args_is_help=True, help="API tokens that may push runs to this leaderboard.")
    app.add_typer(tokens_app, name="tokens")

    @app.command("serve")
    def serve(
        db: DbOpt = None,
        host: Annotated[str, typer.Option(help="Interface to listen on")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="TCP port")] = 8000,
        media_root: Annotated[list[Path] | None, typer.Option(
            "--media-root", help="Folder whose files the run pages may show (repeatable; default $HARNESS_MEDIA_ROOT)")
        ] = None,
        token_create: Annotated[str | None, typer.Option(
            "--token-create", help="Create a write token with this name, print it and exit")] = None,
        write_token_env: Annotated[str, typer.Option(
            "--write-token-env", help="Environment variable holding an extra accepted write token")
        ] = "HARNESS_WRITE_TOKEN",
        workers: Annotated[int, typer.Option(help="uvicorn worker processes")] = 1,
    ) -> None:
        """Serve the web leaderboard (pages, JSON API, authenticated push) on the results database."""
        check_port(port)
        if workers < 1:
            _fail(f"--workers must be at least 1, not {workers}")
        if token_create is not None:
            _create_token(db, token_create)
            return
        import uvicorn

        from harness.leaderboard.app import create_app
        from harness.store.db import DatabaseError

        roots = [str(p) for p in media_root] if media_root else None
        if workers > 1:  # uvicorn needs an import string to fork workers: pass settings by environment
            _sessions(db)  # a database the workers cannot open is one line here, not a traceback in each
            if db:
                os.environ["HARNESS_DB_URL"] = db
            if roots:
                os.environ["HARNESS_MEDIA_ROOT"] = os.pathsep.join(roots)
            os.environ["HARNESS_LEADERBOARD_WRITE_TOKEN_ENV"] = write_token_env
            uvicorn.run("harness.leaderboard.asgi:app", host=host, port=port, workers=workers, log_level="info",
                        proxy_headers=False)  # the app reads X-Forwarded-For from $HARNESS_TRUSTED_PROXIES only
            return
        try:
            media: list[str | Path] | None = list(roots) if roots is not None else None
            web = create_app(db, write_token=os.environ.get(write_token_env) or None, media_roots=media)
        except DatabaseError as exc:
            _fail(str(exc))
        typer.echo(f"leaderboard on http://{host}:{port} (database {web.state.sessions.kw['bind'].url!r})", err=True)
        uvicorn.run(web, host=host, port=port, log_level="info", proxy_headers=False)  # see above

    @app.command("push")
    def push(
        run: Annotated[str, typer.Argument(help="Run name or id in the local database")],
        to: Annotated[str, typer.Option("--to", help="Leaderboard base URL, e.g. https://lb.example.org")],
        token: Annotated[str | None, typer.Option(
            "--token", help="Write token (default $HARNESS_PUSH_TOKEN)", envvar="HARNESS_PUSH_TOKEN")] = None,
        db: DbOpt = None,
    ) -> None:
        """Upload a run (task, model, run, samples, metrics, judgements) to a remote leaderboard.
        Idempotent: pushing again adds only what the server lacks."""
        from harness.leaderboard.push import PushError, push_run

        if not token:
            _fail("a write token is needed: --token T or $HARNESS_PUSH_TOKEN (server side: harness tokens create NAME)")
        try:
            totals = push_run(_sessions(db), run, to, token)  # type: ignore[arg-type]
        except PushError as exc:
            _fail(str(exc))
        typer.echo(f"pushed {run!r} to {to} as run {totals['run_id']}: {totals['samples_inserted']} new samples, "
                   f"{totals['judgements_inserted']} new judgements, {totals.get('n_done', 0)} samples there now "
                   f"({totals['requests']} requests)")

    @tokens_app.command("create")
    def tokens_create(name: Annotated[str, typer.Argument(help="Who or what the token is for")],
                      db: DbOpt = None) -> None:
        """Create a write token and print it (only its hash is stored)."""
        _create_token(db, name)

    @tokens_app.command("list")
    def tokens_list(db: DbOpt = None) -> None:
        """List tokens (names and dates; the tokens themselves are not stored)."""
        from harness.leaderboard.tokens import list_tokens

        for t in list_tokens(_sessions(db)):
            used = t.last_used_at.isoformat(timespec="seconds") if t.last_used_at else "never"
            typer.echo(f"{t.name}\t{'revoked' if t.revoked else 'active'}\tcreated "
                       f"{t.created_at.isoformat(timespec='seconds')}\tlast used {used}")

    @tokens_app.command("revoke")
    def tokens_revoke(name: str, db: DbOpt = None) -> None:
        """Revoke a token: it can no longer push."""
        from harness.leaderboard.tokens import TokenError, revoke_token

        try:
            revoke_token(_sessions(db), name)
        except TokenError as exc:
            _fail(str(exc))
        typer.echo(f"revoked {name!r}")
