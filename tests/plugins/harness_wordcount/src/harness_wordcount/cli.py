"""``harness wordcount ...``: a family's own subcommands."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, help="Word counting: inspect the task's sentences.")


@app.command("sentences")
def sentences() -> None:
    """Print the task's sentences with their word counts."""
    from harness_wordcount.tasks import SENTENCES

    for text in SENTENCES:
        typer.echo(f"{len(text.split())}\t{text}")


@app.command("stats")
def stats() -> None:
    """Summary of the sentences."""
    from harness_wordcount.tasks import SENTENCES

    typer.echo(f"{len(SENTENCES)} sentences")
