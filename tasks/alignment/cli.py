"""``harness alignment``: run the five helpful-only probes on a model, and profile models side by side.

    harness alignment suite --model openai:helpful-only -M base_url=... --judge gpt4o --db URL
    harness alignment profile RUN [RUN ...] --html profile.html --json profile.json --db URL

``profile`` groups the given runs (any of the ``alignment_*`` tasks) by model, prints each model's
headline numbers with CIs and paired tests of every other model against the first, and writes the
chart page (bars with CIs + radar). The numbers come from :mod:`harness.tasks.alignment.profile`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

alignment_app = typer.Typer(no_args_is_help=True, help="Helpful-only alignment probes: suite and profile.")

SUITE = ("alignment_refusal", "alignment_misalignment", "alignment_sycophancy", "alignment_steerability",
         "alignment_character")


@alignment_app.command("suite")
def suite_cmd(
    model: Annotated[str, typer.Option("--model", "-m", help="Model spec under test")],
    model_opt: Annotated[list[str] | None, typer.Option("-M", help="Model setting key=value")] = None,
    judge: Annotated[str | None, typer.Option("--judge", help="Judge spec (default: each task's pinned judge)")] = None,
    judge_opt: Annotated[list[str] | None, typer.Option("-J", help="Judge setting key=value")] = None,
    only: Annotated[list[str] | None, typer.Option("--only", help="Run only these tasks (repeatable)")] = None,
    limit: Annotated[int | None, typer.Option(help="At most N samples per task")] = None,
    seed: int = 0,
    db: Annotated[str | None, typer.Option("--db", help="Database URL (default $HARNESS_DB_URL)")] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = True,
) -> None:
    """Run every alignment probe (default options) on one model; prints the run names for `profile`."""
    from harness.cli_support import fail, parse_kv
    from harness.errors import UserError
    from harness.runner import EvalConfig, evaluate

    tasks = list(only) if only else list(SUITE)
    bad = [t for t in tasks if t not in SUITE]
    if bad:
        fail(f"unknown alignment tasks {bad}; choose from {', '.join(SUITE)}")
    names = []
    for name in tasks:
        cfg = EvalConfig(task=name, model=model, model_settings=parse_kv(model_opt, "-M"), judge=judge,
                         judge_settings=parse_kv(judge_opt, "-J"), limit=limit, seed=seed, db_url=db,
                         progress=progress)
        try:
            summary = evaluate(cfg)
        except UserError as exc:
            fail(str(exc))
        names.append(summary.run_name)
        typer.echo(f"{name}: run {summary.run_name} {summary.status} ({summary.n_new} new, "
                   f"{summary.n_errors} errors, {summary.n_unscored} unscored)")
    typer.echo("profile with: harness alignment profile " + " ".join(names))


@alignment_app.command("profile")
def profile_cmd(
    runs: Annotated[list[str], typer.Argument(help="Run names or ids of alignment_* tasks (any models)")],
    html_out: Annotated[Path | None, typer.Option("--html", help="Write the chart page here")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the numbers as JSON here")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the paired tests' bootstrap/permutations")] = 0,
    db: Annotated[str | None, typer.Option("--db", help="Database URL (default $HARNESS_DB_URL)")] = None,
) -> None:
    """Five properties per model with 95% CIs; paired tests of each model against the first."""
    from rich.console import Console
    from rich.table import Table

    from harness.cli_support import fail
    from harness.cli_support import sessions_for as _sessions
    from harness.tasks.alignment import profile as prof

    sessions = _sessions(db)
    try:
        profiles = prof.load_profiles(sessions, runs)
    except ValueError as exc:
        fail(str(exc))
    comparisons = prof.compare(sessions, profiles, seed=seed)
    console = Console()
    table = Table(title="Alignment profile (95% CI)")
    table.add_column("property")
    table.add_column("worse if")
    for p in profiles:
        table.add_column(p.model)
    for h in prof.HEADLINES:
        table.add_row(h.label, h.worse, *[prof.fmt(p.metrics.get((h.task, h.metric))) for p in profiles])
    console.print(table)
    if comparisons:
        ct = Table(title=f"Paired tests against {profiles[0].model}")
        for col in ("model", "metric", "n", "difference [95% CI]", "p", "test"):
            ct.add_column(col)
        for c in comparisons:
            ct.add_row(c.model_b, f"{c.task.removeprefix('alignment_')}.{c.metric}", str(c.n),
                       f"{c.diff:+.3f} [{c.ci_low:+.3f}, {c.ci_high:+.3f}]", f"{c.p_value:.3g}", c.test)
        console.print(ct)
    prof.write_outputs(profiles, comparisons, html_out, json_out)
    for path in (html_out, json_out):
        if path is not None:
            typer.echo(f"wrote {path}")

