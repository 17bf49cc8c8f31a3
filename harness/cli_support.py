"""What every ``harness`` subcommand shares: one-line failures, ``key=value`` options, the
database option and sessions. Core commands and family CLIs import this module, never
:mod:`harness.cli` (which mounts them), so the two never import each other."""

from __future__ import annotations

from typing import Annotated, Any, NoReturn

import typer

DbOpt = Annotated[str | None, typer.Option("--db", help="Database URL (default $HARNESS_DB_URL or sqlite:///harness.db)")]


def console() -> Any:
    """Rich console for messages. ``soft_wrap``: a line is never broken by rich (piped output has
    no terminal and rich would break at 80 columns, splitting what scripts grep for)."""
    from rich.console import Console

    return Console(soft_wrap=True)


def fail(message: str) -> NoReturn:
    """Print ``error: message`` on stderr and exit with status 2 (no traceback)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def parse_kv(items: list[str] | None, flag: str) -> dict[str, Any]:
    from harness.modelspec import parse_value

    out: dict[str, Any] = {}
    for item in items or []:
        key, eq, value = item.partition("=")
        if not eq or not key:
            fail(f"{flag} expects key=value, got {item!r}")
        out[key.strip()] = parse_value(value)
    return out


def sessions_for(db: str | None) -> Any:
    """A sessionmaker for the database URL (or the default), or a one-line failure."""
    from harness.store.db import DatabaseError, open_db

    try:
        return open_db(db)
    except DatabaseError as exc:
        fail(str(exc))
