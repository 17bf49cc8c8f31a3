"""``harness agents record``: scripted-expert demonstrations for the VLA backends (seeded)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="Game agents: record scripted-expert demonstrations", no_args_is_help=True)


@app.callback()
def main() -> None:
    """Game agents (Crafter): tools of the agents family."""  # keeps `record` a subcommand (typer folds a lone one)


@app.command("record")
def record_cmd(
    out: Annotated[Path, typer.Option("--out", "-o", help="Demonstration file to write (JSON lines)")],
    goals: Annotated[str, typer.Option(help="Comma list of crafter_instruct goals, or 'free' for free play")] = "",
    episodes: Annotated[int, typer.Option(help="Episodes per goal")] = 8,
    seed: Annotated[int, typer.Option(help="World seed of the first episode (then seed+1, ...)")] = 100_000,
    max_steps: Annotated[int, typer.Option(help="Steps per episode at most")] = 150,
    corrupt: Annotated[float, typer.Option(help="Share of expert actions replaced by misleading ones")] = 0.0,
) -> None:
    """Record demonstrations; ``-T demos=FILE`` hands them to a crafter task's train split."""
    from harness.tasks.agents import demos
    from harness.tasks.agents.game import GOALS

    names: list[str | None] = [g.strip() for g in goals.split(",") if g.strip()] or list(GOALS)  # type: ignore[misc]
    names = [None if g == "free" else g for g in names]
    bad = [g for g in names if g is not None and g not in GOALS]
    if bad:
        raise typer.BadParameter(f"unknown goal {bad[0]!r}; choose from {', '.join(GOALS)} or free")
    if episodes < 1 or max_steps < 1 or not 0.0 <= corrupt <= 1.0:
        raise typer.BadParameter("episodes and max-steps must be >= 1 and corrupt in [0, 1]")
    recorded = demos.record(names, episodes, seed, max_steps, corrupt)
    demos.write(out, recorded, goals=[g or "free" for g in names], episodes=episodes, seed=seed, corrupt=corrupt)
    steps = sum(len(d["actions"]) for d in recorded)
    bad_steps = sum(sum(d["corrupted"]) for d in recorded)
    typer.echo(f"wrote {len(recorded)} demonstrations ({steps} steps, {bad_steps} corrupted) to {out}")
