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


def check_port(port: int, flag: str = "--port") -> None:
    """A TCP port the server can bind: the socket layer would wrap 99999 to another port silently."""
    if not 1 <= port <= 65535:
        fail(f"{flag} must be between 1 and 65535, not {port}")


def _cut(text: str, limit: int = 60) -> str:
    """User text for a message, cut to ``limit`` characters (a 100,000-character option is not echoed)
    and escaped where it holds a line break or other control character (the message stays one line)."""
    shown = text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"
    return shown if shown.isprintable() else repr(shown)[1:-1]


def parse_kv(items: list[str] | None, flag: str) -> dict[str, Any]:
    """``key=value`` options, typed; a malformed or refused value (too long, too deep, not a finite
    number: :class:`harness.options.OptionValueError`) is one line naming the option. Commands call
    this before opening the database, so a bad option writes nothing."""
    from harness.modelspec import parse_value
    from harness.options import OptionValueError

    out: dict[str, Any] = {}
    for item in items or []:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            fail(f"{flag} expects key=value, got {_cut(item)!r}")
        try:
            out[key.strip()] = parse_value(value)
        except OptionValueError as exc:
            fail(f"{flag} {_cut(key.strip())}: {exc}")
    return out


def sessions_for(db: str | None) -> Any:
    """A sessionmaker for the database URL (or the default), or a one-line failure."""
    from harness.store.db import DatabaseError, open_db

    try:
        return open_db(db)
    except DatabaseError as exc:
        fail(str(exc))
