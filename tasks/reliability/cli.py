"""``harness reliability report``: quality vs normalised cost of stored operator runs, the Pareto
front, the SemKNN router's lambda curve with matched-quality/matched-cost comparisons and paired
significance, as a table (and JSON) plus a plotly HTML file. The analysis itself lives in
:mod:`harness.tasks.reliability.analysis` (its ``chart(sessions, task)`` is the leaderboard's hook)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

reliability_app = typer.Typer(no_args_is_help=True, help="Channel-coding reliability operators: analysis.")


@reliability_app.command("report")
def report_cmd(
    task: Annotated[str | None, typer.Option("--task", "-t", help="Task name (default: every stored run)")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write the plotly HTML report here")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the numbers as JSON here")] = None,
    train_frac: Annotated[float, typer.Option(help="Router: fraction of samples used to fit")] = 0.5,
    k: Annotated[int, typer.Option(help="Router: nearest neighbours")] = 5,
    seed: Annotated[int, typer.Option(help="Router: train/held-out split seed")] = 0,
    no_router: Annotated[bool, typer.Option("--no-router", help="Skip the router (no embedding model)")] = False,
    cost: Annotated[str, typer.Option(help="Cost axis: normalised (x one plain call) or usd ($ per sample)")] = (
        "normalised"),
    db: Annotated[str | None, typer.Option("--db", help="Database URL (default $HARNESS_DB_URL)")] = None,
) -> None:
    """Quality vs normalised cost for every (model, operator, budget), Pareto front, router curve."""
    import json

    from rich.console import Console
    from rich.table import Table

    from harness.cli_support import fail
    from harness.cli_support import sessions_for as _sessions
    from harness.tasks.reliability import analysis

    if not 0.0 < train_frac < 1.0:
        fail("--train-frac must be between 0 and 1")
    if k < 1:
        fail("--k must be at least 1")
    if cost not in ("normalised", "usd"):
        fail("--cost must be 'normalised' or 'usd'")
    sessions = _sessions(db)
    report = analysis.build_report(sessions, task, train_frac=train_frac, seed=seed, k=k, router=not no_router,
                                   cost=cost)
    if not report.points:
        fail(f"no scored runs{f' of task {task!r}' if task else ''} in the database")
    console = Console()
    front = {p.run_id for p in report.front}
    table = Table(title=f"Quality vs normalised cost{f' · {task}' if task else ''}")
    cost_col = "norm. cost" if cost == "normalised" else "cost ($)"
    for col in ("task", "base model", "operator", "budget", "quality", "95% CI", cost_col, "$/sample", "n", "front"):
        table.add_column(col, justify="right" if col in ("quality", cost_col, "$/sample", "n") else "left")
    for p in sorted(report.points, key=lambda p: (p.task, p.cost)):
        table.add_row(p.task, p.base, p.operator, p.budget, f"{p.quality:.3f}", f"[{p.ci_low:.3f}, {p.ci_high:.3f}]",
                      f"{p.cost:.2f}" if cost == "normalised" else f"{p.cost:.6f}", f"{p.usd:.6f}", str(p.n),
                      "*" if p.run_id in front else "")
    console.print(table)
    rr = report.router
    if rr is not None:
        q_ref, c_ref = rr.fixed_on_test[rr.strongest]
        console.print(f"SemKNN router: {len(rr.techniques)} techniques, fit on {rr.n_train} samples, "
                      f"held-out {rr.n_test}; strongest fixed technique: {rr.strongest} "
                      f"(quality {q_ref:.3f}, cost {c_ref:.2f})")
        console.print(f"  matched-quality cost saving: {analysis.fmt(rr.matched_quality_cost_saving, pct=True)}; "
                      f"matched-cost quality: {analysis.fmt(rr.matched_cost_quality)} "
                      f"(gain {analysis.fmt(rr.matched_cost_gain)}, "
                      f"{analysis.fmt(rr.matched_cost_gain_relative, pct=True)}; over single-shot "
                      f"{analysis.fmt(rr.gain_over_single_relative, pct=True)})")
        for sig in rr.significance:
            console.print(f"  router (lambda={sig['router_lambda']:.4g}, cost {sig['router_cost']:.2f}) vs "
                          f"{sig['versus']}: diff {sig['diff']:+.3f} [{sig['ci_low']:+.3f}, {sig['ci_high']:+.3f}], "
                          f"p={sig['p_value']:.3g} ({sig['test']}, n={sig['n']})")
    for note in report.notes:
        console.print(f"note: {note}")
    if out is not None:
        import plotly.io as pio

        out.write_text(pio.to_html(analysis.figure_dict(report), include_plotlyjs=True, full_html=True),
                       encoding="utf-8")
        console.print(f"wrote {out}")
    if json_out is not None:
        json_out.write_text(json.dumps(analysis.report_dict(report), indent=2, default=str), encoding="utf-8")
        console.print(f"wrote {json_out}")


@reliability_app.command("fit-router")
def fit_router_cmd(
    task: Annotated[str, typer.Option("--task", "-t", help="Task whose stored runs are the techniques")],
    out: Annotated[Path, typer.Option("--out", help="Router file to write (.npz)")],
    k: Annotated[int, typer.Option(help="Nearest neighbours")] = 5,
    db: Annotated[str | None, typer.Option("--db", help="Database URL (default $HARNESS_DB_URL)")] = None,
) -> None:
    """Fit the SemKNN router on every sample of TASK's stored runs, for the `semknn` operator."""
    from harness.cli_support import fail
    from harness.cli_support import sessions_for as _sessions
    from harness.models.operators.routed import save_router
    from harness.tasks.reliability import analysis

    if k < 1:
        fail("--k must be at least 1")
    try:
        router, specs = analysis.fit_router(_sessions(db), task, k=k)
    except ValueError as exc:
        fail(str(exc))
    save_router(out, router, specs)
    typer.echo(f"wrote {out}: {len(router.techniques)} techniques over {router.embeddings.shape[0]} prompts; "
               "pass these models to semknn(...) in this order:")
    for i, (name, spec) in enumerate(zip(router.techniques, specs, strict=True)):
        typer.echo(f"  {i}. {spec}    ({name}, mean cost {router.cost[i]:.2f})")

