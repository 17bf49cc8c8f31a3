"""``harness arena ...``: ratings table, voter audit, and demo data for the human-preference arena."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli_support import DbOpt, fail
from harness.cli_support import console as _console
from harness.cli_support import sessions_for as _sessions

arena_app = typer.Typer(no_args_is_help=True,
                        help="Human-preference arena: ratings, voter audit, demo data, live pool.")


def register(app: typer.Typer) -> None:
    app.add_typer(arena_app, name="arena")


@arena_app.command("ratings")
def ratings_cmd(
    task: Annotated[str | None, typer.Option("--task", "-t", help="Only votes on this task (default all)")] = None,
    category: Annotated[str | None, typer.Option(
        "--category", "-c", help="Only battles of this category: family=, language=, length=, kind= "
        "(text, code, 3d) or a bare value; comma-separated filters all apply")] = None,
    bootstrap: Annotated[int, typer.Option("--bootstrap", help="Bootstrap rounds; 0 = sandwich CIs")] = 100,
    style: Annotated[bool, typer.Option("--style", help="Style control (length, headers, lists, bold)")] = False,
    min_votes: Annotated[int, typer.Option("--min-votes", help="Votes before a model is listed")] = 0,
    provisional: Annotated[int, typer.Option("--provisional", help="Listed but provisional under this")] = 100,
    keep_implausible: Annotated[bool, typer.Option("--keep-implausible", help="Do not drop flagged voters")] = False,
    seed: Annotated[int, typer.Option(help="Bootstrap seed")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table")] = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print the ratings as CSV")] = False,
    db: DbOpt = None,
) -> None:
    """Bradley-Terry ratings of the arena votes with 95% CIs and rank (UB)."""
    import json

    from rich.table import Table

    from harness.leaderboard.arena.standings import compute
    from harness.ratings import RatingsError

    if bootstrap < 0:
        fail("--bootstrap must be >= 0")
    sessions = _sessions(db)
    try:
        with sessions() as s:
            st = compute(s, task, ci="bootstrap" if bootstrap else "sandwich", rounds=bootstrap, min_votes=min_votes,
                         provisional_votes=provisional, exclude_implausible=not keep_implausible, style=style,
                         seed=seed, category=category)
    except (RatingsError, ValueError) as exc:
        fail(str(exc))
    if as_json:
        out = st.ratings.to_dict()
        out.update({"task": task, "category": category, "votes_used": st.votes_used,
                    "excluded_voters": [f.voter for f in st.excluded], "keys": st.keys, "failures": st.failures})
        typer.echo(json.dumps(out, indent=2))
        return
    if as_csv:
        from harness.cli_tables import to_csv

        typer.echo(to_csv(st.ratings.to_dict()["ratings"]), nl=False)
        return
    if not st.votes_used:
        fail(f"no arena votes{f' on task {task!r}' if task else ''}{f' in category {category!r}' if category else ''}")
    ci = f"bootstrap x{bootstrap}" if bootstrap else "sandwich"
    scope = ", ".join(x for x in (task, category) if x)
    table = Table(title=f"Arena ratings{f' ({scope})' if scope else ''}: {st.votes_used} votes, 95% CI {ci}"
                        f"{', style-controlled' if st.style else ''}")
    notes = ["not listed" if not r.listed else "provisional" if r.provisional else "" for r in st.ratings.ratings]
    # the note column only when some model has a note (an empty trailing column otherwise)
    cols = ("Rank (UB)", "Model", "Rating", "95% CI", "Votes", "Win rate", *(("Note",) if any(notes) else ()))
    for col in cols:
        table.add_column(col, justify="left" if col in ("Model", "Note") else "right", no_wrap=col == "Model")
    for r, note in zip(st.ratings.ratings, notes, strict=True):
        table.add_row(str(r.rank) if r.listed else "-", r.model, f"{r.rating:.0f}",
                      f"[{r.ci_low:.0f}, {r.ci_high:.0f}]", f"{r.votes:.0f}", f"{100 * r.win_rate:.1f}%",
                      *((note,) if any(notes) else ()))
    con = _console()
    con.print(table)
    if st.failures:  # live battles a model did not answer: counted, never rated
        con.print("failed live replies (not rated): " + "; ".join(
            f"{f['model']} {f['failures']} in {f['battles']} battles" for f in st.failures))
    if st.excluded:
        con.print(f"{len(st.excluded)} implausible voter(s) excluded: "
                  + "; ".join(f"{f.voter[:8]}… {f.reason}" for f in st.excluded))


@arena_app.command("audit")
def audit_cmd(
    task: Annotated[str | None, typer.Option("--task", "-t")] = None,
    min_votes: Annotated[int, typer.Option("--min-votes", help="Decisive votes before a voter is tested")] = 10,
    apply: Annotated[bool, typer.Option("--apply", help="Mark the flagged voters' votes in the database")] = False,
    db: DbOpt = None,
) -> None:
    """List voters whose votes are implausible (position bias, disagreement with consensus)."""
    from harness.leaderboard.arena.standings import apply_flags, flag_voters, load_votes

    sessions = _sessions(db)
    with sessions() as s:
        flags = flag_voters(load_votes(s, task), min_votes)
        for f in flags:
            typer.echo(f"{f.voter}\t{f.votes} votes\tz={f.statistic:+.1f}\t{f.reason}")
        if apply and flags:
            typer.echo(f"marked {apply_flags(s, flags, task)} vote(s) as flagged")
    if not flags:
        typer.echo("no implausible voters")


@arena_app.command("demo")
def demo_cmd(
    renders: Annotated[Path | None, typer.Option(help="Also write a 3D-style demo task with renders here")] = None,
    votes: Annotated[int, typer.Option(help="Plausible votes to seed (0: none)")] = 400,
    db: DbOpt = None,
) -> None:
    """Write synthetic runs to try the arena on (task arena-demo; arena-demo-3d with --renders) and
    seed votes on them, so the ratings page has a table at once."""
    from harness.leaderboard.arena.demo import seed_renders, seed_text, seed_votes

    sessions = _sessions(db)
    seed_text(sessions)
    if renders is not None:
        seed_renders(sessions, renders)
        typer.echo(f"renders under {renders}: serve with HARNESS_MEDIA_ROOT={renders}")
    n = seed_votes(sessions, n_votes=votes) if votes > 0 else 0
    typer.echo(f"demo runs written{f' with {n} seeded votes' if n else ''}: open /arena and /arena/ratings in "
               "`harness serve`")


pool_app = typer.Typer(no_args_is_help=True, help="The live pool: models that answer voters' prompts at /arena/chat.")
arena_app.add_typer(pool_app, name="pool")


@pool_app.command("add")
def pool_add_cmd(
    specs: Annotated[list[str], typer.Argument(help="Model specs (any backend: openai:M, vllm:PATH, hf:ID, ...)")],
    settings: Annotated[list[str] | None, typer.Option("-M", help="key=value model settings, for every spec")] = None,
    name: Annotated[str | None, typer.Option("--name", help="Label votes use (one spec; default the spec)")] = None,
    kind: Annotated[list[str] | None, typer.Option(
        "--kind", help="chat (default) and/or a live kind a family adds (an unknown kind is refused, naming them)")
    ] = None,
    probe_timeout: Annotated[float, typer.Option(
        "--probe-timeout", help="Seconds the probe request may take, retries included")] = 15.0,
    no_probe: Annotated[bool, typer.Option(
        "--no-probe", help="Do not build the model or send the probe (a server that is not up yet); the spec's "
        "backend and settings are still checked")] = False,
    db: DbOpt = None,
) -> None:
    """Add models to the live pool (or update one with the same label). Each model is built and
    sent one short probe request first; a model that cannot be built or does not answer is refused
    (exit 2) and nothing is added."""
    from harness.cli_support import parse_kv
    from harness.leaderboard.arena import pool

    if name and len(specs) > 1:
        fail("--name labels one spec; add the others separately")
    if not 0 < probe_timeout <= 600:
        fail(f"--probe-timeout must be in (0, 600] seconds, not {probe_timeout:g}")
    kv = parse_kv(settings, "-M")
    kinds = tuple(kind or ["chat"])
    known = pool.known_kinds()
    bad = [k for k in kinds if k not in known]
    if bad:
        fail(f"unknown kind {bad[0]!r} (one of {', '.join(known)})")
    probes: dict[str, pool.Probe | None] = {}
    for spec in specs:  # every spec checked before any is added: a refused command changes nothing
        try:
            if no_probe:
                pool.check(spec, kv)
                probes[spec] = None
                continue
            result = pool.probe(spec, kv, probe_timeout)
        except pool.PoolError as exc:
            fail(str(exc))
        if not result.ok:
            fail(f"{spec}: the probe request failed ({result.error}); not added (is the server up? "
                 "--no-probe adds it anyway)")
        typer.echo(f"probe: {spec} answered in {result.seconds:.1f} s")
        probes[spec] = result
    with _sessions(db)() as s:
        for spec in specs:
            try:
                row = pool.add(s, spec, kv, label=name, kinds=kinds, probed=probes[spec])
            except pool.PoolError as exc:
                fail(str(exc))
            typer.echo(f"pool: {row.label} ({', '.join(row.kinds)})")
        n = len(pool.members(s, kinds[0]))
    if n < 2:
        typer.echo(f"the {kinds[0]} pool has {n} model; live battles need two")


@pool_app.command("list")
def pool_list_cmd(db: DbOpt = None) -> None:
    """The live pool's models and their health: status, the last error (when, why), failures in a
    row and in the last hour."""
    from datetime import UTC, datetime

    from harness.leaderboard.arena import pool

    with _sessions(db)() as s:
        rows = pool.every_member(s)
        health = {h["label"]: h for h in pool.health(s, datetime.now(UTC).replace(tzinfo=None))}
        for r in rows:
            extra = f" -M {' -M '.join(f'{k}={v}' for k, v in r.settings.items())}" if r.settings else ""
            typer.echo(f"{r.label}\t{r.spec}{extra}\t{','.join(r.kinds)}\t{_health_line(health.get(r.label))}")
    if not rows:
        typer.echo("the pool is empty: harness arena pool add SPEC ...")


def _health_line(h: dict[str, object] | None) -> str:
    if h is None:
        return ""
    parts = [str(h["status"])]
    if h.get("probe_error"):
        parts.append(f"probe at {h['probed_at']}: {h['probe_error']}")
    if h.get("last_error"):
        parts.append(f"last error at {h['last_error_at']}: {h['last_error']}")
    if h.get("failures_in_row"):
        parts.append(f"{h['failures_in_row']} failed in a row")
    parts.append(f"{h['recent_failures']} failed in the last hour")
    return "; ".join(parts)


@pool_app.command("remove")
def pool_remove_cmd(labels: Annotated[list[str], typer.Argument(help="Labels to remove")], db: DbOpt = None) -> None:
    """Remove models from the live pool (their votes stay)."""
    from harness.leaderboard.arena import pool

    with _sessions(db)() as s:
        for label in labels:
            if not pool.remove(s, label):
                fail(f"no pool model {label!r} (see `harness arena pool list`)")
            typer.echo(f"removed {label}")
