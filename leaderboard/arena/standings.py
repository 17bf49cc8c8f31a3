"""Ratings from stored votes (with implausible voters excluded) and their plotly figures.

Votes are counted by model key (leaderboard/arena/keys.py), each key shown under its current name:
a model whose label changed after it was voted on is still one model. Failed live replies are
counted beside the ratings (leaderboard/arena/failures.py), never in them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

import numpy as np
from sqlalchemy import CursorResult, select, update
from sqlalchemy.orm import Session

from harness.ratings import Ratings, pair_counts, rate, rate_counts
from harness.ratings.style import rate_with_style
from harness.ratings.voter_audit import VoterFlag, implausible_voters
from harness.store.schema_arena import ArenaVoteRow

from . import categories, failures
from .keys import display_names, legacy_resolver, or_label

OUTCOME_TO_BT = {"left": "a", "right": "b", "tie": "tie", "both_bad": "both_bad"}


@dataclass
class Standings:
    ratings: Ratings
    task: str | None
    votes_used: int
    excluded: list[VoterFlag] = field(default_factory=list)
    style: bool = False
    category: str | None = None
    keys: dict[str, str] = field(default_factory=dict)  # shown name -> model key
    failures: list[dict[str, Any]] = field(default_factory=list)  # per model: failed live replies, battles


Vote = tuple[str, str, str, str, dict[str, Any]]


def load_keyed(session: Session, task: str | None,
               category: str | None = None) -> tuple[list[Vote], list[tuple[str, str]]]:
    """(voter, left key, right key, outcome, features) of every vote not flagged at intake or by an
    audit, and every (key, label as stored) pair in vote order; ``category``: only votes whose battle
    categories match (leaderboard/arena/categories.py)."""
    v = ArenaVoteRow
    q = select(v.voter_hash, v.left_key, v.left_model, v.right_key, v.right_model, v.outcome, v.features,
               v.categories, v.task).where(v.flagged.is_(False))
    if task:
        q = q.where(v.task == task)
    filters = categories.parse_filter(category)
    votes: list[Vote] = []
    seen: list[tuple[str, str]] = []
    resolve = legacy_resolver(session)
    live_tasks = failures.live_tasks()
    for voter, lk, lm, rk, rm, outcome, features, cats, vtask in session.execute(q.order_by(v.id)):
        if filters and not categories.matches(cats, filters):
            continue
        live = vtask in live_tasks
        lk, rk = resolve(or_label(lk, lm), live), resolve(or_label(rk, rm), live)
        votes.append((voter, lk, rk, outcome, features))
        seen += [(lk, lm), (rk, rm)]
    return votes, seen


def load_votes(session: Session, task: str | None, category: str | None = None) -> list[Vote]:
    """(voter, left, right, outcome, features) of every counted vote, each model under its current
    name, one name per model key."""
    votes, seen = load_keyed(session, task, category)
    names = display_names(session, seen)
    return [(voter, names[lk], names[rk], outcome, features) for voter, lk, rk, outcome, features in votes]


def category_summary(session: Session) -> dict[str, dict[str, int]]:
    """Votes per category value (the ratings page's picker)."""
    return categories.summary(c for (c,) in session.execute(
        select(ArenaVoteRow.categories).where(ArenaVoteRow.flagged.is_(False))))


def flag_voters(votes: list[tuple[str, str, str, str, dict[str, Any]]], min_votes: int) -> list[VoterFlag]:
    if not votes:
        return []
    consensus = rate([(v[1], v[2], OUTCOME_TO_BT[v[3]]) for v in votes], ci="sandwich")
    theta = {r.model: r.theta for r in consensus.ratings}
    return implausible_voters([(v[0], v[1], v[2], OUTCOME_TO_BT[v[3]]) for v in votes], theta, min_votes=min_votes)


def compute(
    session: Session, task: str | None, *, ci: str = "bootstrap", rounds: int = 100, min_votes: int = 0,
    provisional_votes: int = 0, exclude_implausible: bool = True, outlier_min_votes: int = 10,
    style: bool = False, seed: int = 0, category: str | None = None, now: datetime | None = None,
) -> Standings:
    keyed, seen = load_keyed(session, task, category)
    tallies = failures.tally(session, task, category, now or datetime.now(UTC).replace(tzinfo=None))
    names = display_names(session, [*seen, *((k, t.label) for k, t in tallies.items())])
    votes = [(voter, names[lk], names[rk], outcome, f) for voter, lk, rk, outcome, f in keyed]
    order = sorted(tallies, key=lambda k: (-tallies[k].failures, names[k]))
    failed: list[dict[str, Any]] = [{"model": names[k], "key": k, "failures": tallies[k].failures,
                                     "battles": tallies[k].battles} for k in order]
    excluded = flag_voters(votes, outlier_min_votes) if exclude_implausible else []
    if excluded:
        drop = {f.voter for f in excluded}
        votes = [v for v in votes if v[0] not in drop]
    tuples = [(v[1], v[2], OUTCOME_TO_BT[v[3]]) for v in votes]
    options: dict[str, Any] = {"min_votes": min_votes, "provisional_votes": provisional_votes, "seed": seed}
    if style and votes:
        ratings = rate_with_style(
            tuples, [(v[4] or {}).get("left", {}) for v in votes], [(v[4] or {}).get("right", {}) for v in votes],
            **options,
        )
    else:
        ratings = rate_counts(pair_counts(tuples), ci=ci, rounds=rounds, **options)
    return Standings(ratings, task, len(votes), excluded, style and bool(votes), category,
                     {n: k for k, n in names.items()}, failed)


def apply_flags(session: Session, flags: list[VoterFlag], task: str | None = None) -> int:
    """Persist an audit: mark every vote of the flagged voters (so later fits skip them for good)."""
    n = 0
    for f in flags:
        q = update(ArenaVoteRow).where(ArenaVoteRow.voter_hash == f.voter, ArenaVoteRow.flagged.is_(False))
        if task:
            q = q.where(ArenaVoteRow.task == task)
        n += cast(CursorResult[Any], session.execute(q.values(flagged=True, flag_reason=f.reason))).rowcount or 0
    session.commit()
    return n


# ------------------------------------------------------------------------------------------------
# Figures (plain plotly dicts, like leaderboard/charts.py: no plotly import per request)

_FONT = {"family": "Inter, system-ui, -apple-system, Segoe UI, sans-serif", "size": 12, "color": "#1f2937"}


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    return {"title": {"text": title, "x": 0, "font": {"size": 14}}, "font": _FONT,
            "margin": {"l": 140, "r": 20, "t": 40, "b": 120}, "paper_bgcolor": "white", "plot_bgcolor": "white",
            **extra}


def _listed(st: Standings) -> tuple[list[str], list[int]]:
    index = {m: i for i, m in enumerate(st.ratings.counts.models)}
    rows = [r for r in st.ratings.ratings if r.listed]
    return [r.model for r in rows], [index[r.model] for r in rows]


def _clean(matrix: np.ndarray) -> list[list[float | None]]:
    return [[None if (isinstance(x, float) and math.isnan(x)) else round(float(x), 4) for x in row] for row in matrix]


def heatmaps(st: Standings) -> tuple[dict[str, Any], dict[str, Any]]:
    names, idx = _listed(st)
    counts = st.ratings.counts
    frac = counts.win_fraction()[np.ix_(idx, idx)] if idx else np.zeros((0, 0))
    battles = counts.battles[np.ix_(idx, idx)].astype(float) if idx else np.zeros((0, 0))
    np.fill_diagonal(battles, np.nan)
    axes = {"xaxis": {"title": {"text": "model B"}, "side": "bottom", "automargin": True},
            "yaxis": {"title": {"text": "model A"}, "autorange": "reversed", "automargin": True}}
    win = {
        "data": [{"type": "heatmap", "z": _clean(frac), "x": names, "y": names, "colorscale": "RdBu", "zmin": 0,
                  "zmax": 1, "text": [[("" if v is None else f"{v:.2f}") for v in row] for row in _clean(frac)],
                  "texttemplate": "%{text}",
                  "hovertemplate": "A %{y} beats B %{x}: %{z:.2f}<extra></extra>"}],
        "layout": _layout("Win fraction of A over B (ties half)", **axes),
    }
    count = {
        "data": [{"type": "heatmap", "z": _clean(battles), "x": names, "y": names,
                  "colorscale": [[0, "#f8fafc"], [1, "#1d4ed8"]], "texttemplate": "%{z}",
                  "hovertemplate": "%{y} vs %{x}: %{z} battles<extra></extra>"}],
        "layout": _layout("Battle count per pair", **axes),
    }
    return win, count


def ci_chart(st: Standings) -> dict[str, Any]:
    rows = [r for r in st.ratings.ratings if r.listed]
    trace = {
        "type": "scatter", "mode": "markers", "x": [r.model for r in rows], "y": [round(r.rating, 1) for r in rows],
        "marker": {"size": 9, "color": ["#94a3b8" if r.provisional else "#2563eb" for r in rows]},
        "error_y": {"type": "data", "symmetric": False, "array": [round(r.ci_high - r.rating, 1) for r in rows],
                    "arrayminus": [round(r.rating - r.ci_low, 1) for r in rows], "color": "#64748b", "thickness": 1.5,
                    "width": 4},
        "hovertemplate": "%{x}<br>%{y:.0f}<extra></extra>",
    }
    return {"data": [trace], "layout": _layout(f"Rating with 95% CI ({st.ratings.method})", showlegend=False,
                                                yaxis={"title": {"text": "rating"}, "gridcolor": "#eef2f7"},
                                                xaxis={"automargin": True})}
