"""``harness longshot fixture DIR``: write the offline LongShOTBench fixture (generated videos and
five items in the released format) that ``harness eval -t longshot -T data_dir=DIR`` reads."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="LongShOTBench: build the offline fixture", no_args_is_help=True)


@app.callback()
def main() -> None:
    """LongShOTBench tools."""  # keeps `fixture` a subcommand


@app.command("fixture")
def fixture_cmd(
    directory: Annotated[Path, typer.Argument(help="Folder to write videos/ and items.jsonl into")],
) -> None:
    """Write three short generated videos (a tone, speech or a second tone, silence; one item's video
    is missing on purpose) and items.jsonl with five items whose rubric criteria each ask whether a
    word appears in the answer."""
    from harness.tasks.longshot import synth

    if directory.exists() and not directory.is_dir():
        typer.echo(f"error: {directory} exists and is not a folder", err=True)
        raise typer.Exit(2)
    try:
        root = synth.build_fixture(directory)
    except ImportError as exc:  # PyAV writes the videos
        typer.echo(f"error: the fixture's videos need PyAV (pip install av): {exc}", err=True)
        raise typer.Exit(2) from None
    except OSError as exc:
        typer.echo(f"error: {directory}: {exc.strerror or exc}", err=True)
        raise typer.Exit(2) from None
    n_items = sum(1 for line in (root / "items.jsonl").read_text().splitlines() if line.strip())
    n_videos = sum(1 for _ in (root / "videos").rglob("*.mp4"))
    typer.echo(f"{root}: {n_items} items, {n_videos} videos; run: harness eval -t longshot -T data_dir={root} "
               "-m MODEL --judge JUDGE")
