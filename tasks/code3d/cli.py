"""``harness code3d judge``: pairwise judge between stored code3d runs, Bradley-Terry ratings, and
agreement with human votes (3DCodeBench's arena protocol; see tasks/code3d/README.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli_support import DbOpt, fail
from harness.cli_support import console as _console
from harness.cli_support import sessions_for as _sessions

code3d_app = typer.Typer(no_args_is_help=True, help="3DCodeBench: pairwise judging of stored runs.")



@code3d_app.command("judge")
def judge_cmd(
    runs: Annotated[list[str], typer.Argument(help="Two or more code3d run names or ids")],
    judge: Annotated[str, typer.Option("--judge", help="Judge model spec (a VLM for --mode image)")],
    mode: Annotated[str, typer.Option("--mode", help="image (renders) or code (scripts)")] = "image",
    judge_opt: Annotated[list[str] | None, typer.Option("-J", help="Judge setting key=value")] = None,
    human: Annotated[
        Path | None, typer.Option("--human", help="JSONL of human votes: sample_id, model_a, model_b, winner")
    ] = None,  # fmt: skip
    out: Annotated[Path | None, typer.Option("--out", help="Write every vote as JSONL here")] = None,
    db: DbOpt = None,
) -> None:
    """Judge every pair of runs on their common samples; print Bradley-Terry ratings."""
    import asyncio
    import json

    from rich.table import Table

    from harness.cli_support import parse_kv
    from harness.client import ModelClient
    from harness.data import read_jsonl
    from harness.modelspec import build_model
    from harness.ratings import RatingsError
    from harness.results import find_run
    from harness.task import ScoreContext
    from harness.tasks.code3d.judge import agreement, judge_runs, rate_verdicts

    if len(runs) < 2:
        fail("give at least two runs")
    if mode not in ("image", "code"):
        fail("--mode must be image or code")
    sessions = _sessions(db)
    run_ids = []
    with sessions() as s:
        for name in runs:
            found = find_run(s, name)
            if found is None:
                fail(f"no run {name!r}")
            else:
                run_ids.append(found.id)
    judge_settings = parse_kv(judge_opt or [], "-J")
    judge_model = build_model(judge, judge_settings, {"text", "image"})
    # verdicts are cached in this database like a run's judge calls
    client = ModelClient(judge_model, role="judge", settings=judge_settings, seed=None, sessions=sessions,
                         label=judge)
    ctx = ScoreContext(judge=client, judge_spec=judge)

    async def go():  # type: ignore[no-untyped-def]
        try:
            return await judge_runs(sessions, run_ids, ctx, mode=mode)
        finally:
            await client.aclose()

    votes = asyncio.run(go())
    decided = [(v.model_a, v.model_b, v.outcome) for v in votes if v.outcome is not None]
    if out is not None:
        out.write_text("".join(json.dumps(v.__dict__) + "\n" for v in votes))
    con = _console()
    unparsed = sum(v.outcome is None for v in votes)
    n_judged, n_status = sum(v.source == "judge" for v in votes), sum(v.source == "status" for v in votes)
    con.print(f"{len(votes)} pairs: {n_judged} judged, {n_status} decided by execution, {unparsed} without a verdict")
    if not decided:
        fail("no decided pairs to rate")
    try:
        ratings = rate_verdicts(decided)
    except RatingsError as exc:
        fail(str(exc))
    table = Table(title=f"code3d pairwise ratings ({mode} judge {judge})")
    for col in ("Rank (UB)", "Model", "Rating", "95% CI", "Votes", "Win rate"):
        table.add_column(col, justify="left" if col == "Model" else "right")
    for r in ratings.ratings:
        table.add_row(str(r.rank), r.model, f"{r.rating:.0f}", f"[{r.ci_low:.0f}, {r.ci_high:.0f}]", f"{r.votes:.0f}",
                      f"{100 * r.win_rate:.1f}%")  # fmt: skip
    con.print(table)
    if human is not None:
        judged = {(v.sample_id, v.model_a, v.model_b): v.outcome for v in votes}
        pairs_j, pairs_h = [], []
        for _, vote_row in read_jsonl(human):
            key = (str(vote_row.get("sample_id")), str(vote_row.get("model_a")), str(vote_row.get("model_b")))
            flipped = (key[0], key[2], key[1])
            if key in judged:
                pairs_j.append(judged[key])
            elif flipped in judged:
                pairs_j.append({"a": "b", "b": "a"}.get(judged[flipped] or "", judged[flipped]))
            else:
                continue
            pairs_h.append(str(vote_row.get("winner", "")).lower())
        agree = agreement(pairs_j, pairs_h)
        con.print(f"agreement with {len(pairs_h)} human votes (ties dropped, n={agree['n']:.0f}): "
                  f"accuracy {agree['accuracy']:.3f}, Cohen's kappa {agree['kappa']:.3f}")  # fmt: skip


@code3d_app.command("run")
def run_cmd(
    script: Annotated[
        Path, typer.Argument(help="A Blender 5 Python script (a model's reply is fine: fences are removed)")
    ],
    out: Annotated[Path, typer.Option("--out", help="Artifacts folder (GLB, renders, result.json)")] = Path(
        "code3d-out"
    ),
    size: Annotated[int, typer.Option(help="Render size in pixels")] = 256,
    samples: Annotated[int, typer.Option(help="Cycles samples per pixel")] = 16,
    exec_timeout: Annotated[float, typer.Option(help="Seconds the script may run")] = 60.0,
) -> None:
    """Run one script through the sandboxed executor (as the code3d tasks do) and print the result."""
    import json

    from harness.tasks.code3d.executor import BlenderPool, BpyUnavailable, RenderOptions
    from harness.tasks.code3d.task import extract_code
    from harness.tasks.code3d.taxonomy import classify_failure

    if not script.is_file():
        fail(f"no such file: {script}")
    code, _ = extract_code(script.read_text(encoding="utf-8", errors="replace"))
    try:
        with BlenderPool(render=RenderOptions(size=size, samples=samples), exec_timeout_s=exec_timeout) as pool:
            result = pool.execute_sync(code, out)
    except BpyUnavailable as exc:
        fail(str(exc))
    report = result.to_dict()
    report["failure"] = classify_failure(result.status, result.traceback, result.error)
    typer.echo(json.dumps(report, indent=2))
    if not result.ok:
        raise typer.Exit(1)
