"""Choosing and serving battles: which models can meet on which task, which pair (active
sampling), which sample, and what the voter sees (nothing that names a model).

Candidates are the latest run of every model on every task (by task name), of the operator's runs
only (local runs and admin pushes): a push token's outputs are its own word, so they never stand
for a model in a battle, not even for a model spec the operator also ran. A battle is two
different models' stored outputs for the same sample and epoch. Pairs whose outputs are identical
(same text and prediction, or identical render files), where either side did not answer (an error or
no output: such a battle could not be voted on, leaderboard/arena/failures.py), or whose attempts both
failed, are skipped, and so are outputs that contain their own model's name (they would unmask the battle).
"""

from __future__ import annotations

import json
import math
import random
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

from sqlalchemy import DateTime, bindparam, func, select, text
from sqlalchemy.orm import Session

from harness.ratings import ELO_SCALE, pair_counts, rate_counts
from harness.ratings.style import style_features
from harness.store.schema import OPERATOR, ModelRow, RunRow, SampleResultRow, TaskRow
from harness.store.schema_arena import ArenaBattleRow, ArenaVoteRow

from ..names import model_labels
from . import categories, media, sampler, suitability, tokens
from .config import ArenaConfig
from .failures import answered

CANDIDATE_ROWS = 12  # random shared samples looked at per pair before moving to the next pair
MAX_PAIRS_TRIED = 12


def naive_utc(ts: float) -> datetime:
    """Unix seconds -> naive UTC datetime (the store keeps naive UTC, like harness.store.schema.utcnow)."""
    return datetime.fromtimestamp(ts, UTC).replace(tzinfo=None)


EMPTY = ("The arena has no battles yet. It serves finished runs of two or more models on the same task "
         "(run `harness eval --task TASK --model MODEL` for each model), or live battles on your own prompt from "
         "a pool of models (`harness arena pool add SPEC ...`, then open /arena/chat). "
         "`harness arena demo` writes demo runs and votes to try it.")


class NoBattle(LookupError):
    """Nothing can be served (no task with two models, or every candidate is identical/failed)."""


class Limited(RuntimeError):
    """The voter or its IP has had its battles for this minute (decided atomically with the insert)."""


@dataclass
class PairStats:
    votes: dict[frozenset[str], int] = field(default_factory=dict)
    se: dict[str, float] = field(default_factory=dict)  # Elo-scale uncertainty per model
    rating: dict[str, float] = field(default_factory=dict)  # current fit, display scale


class StatsCache:
    """Candidates and per-task pair statistics, recomputed at most every ``ttl`` seconds."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.candidates: tuple[float, dict[str, dict[str, int]]] | None = None
        self.pairs: dict[str, tuple[float, PairStats]] = {}
        self.info: dict[str, tuple[str, str]] = {}  # task -> (display, family)


def model_label(model_id: int, labels: dict[int, str]) -> str:
    """The model's unique display name (leaderboard/names.py): votes are stored under it, so two
    specs that share a short name are rated as two models, never merged into one."""
    return labels[model_id]


def load_candidates(session: Session) -> dict[str, dict[str, int]]:
    """task name -> {model label -> latest run id}, tasks with at least two models only; the operator's
    runs only (see the module docstring)."""
    rows = session.execute(
        select(TaskRow.name, ModelRow.id, func.max(RunRow.id))
        .join(RunRow, RunRow.task_id == TaskRow.id)
        .join(ModelRow, RunRow.model_id == ModelRow.id)
        .where(RunRow.owner == OPERATOR, ModelRow.owner == OPERATOR)
        .group_by(TaskRow.name, ModelRow.id)
    ).all()
    labels = model_labels(session)
    out: dict[str, dict[str, int]] = {}
    for task, model_id, run_id in rows:
        models = out.setdefault(task, {})
        label = model_label(model_id, labels)
        models[label] = max(run_id, models.get(label, 0))
    return {t: m for t, m in out.items() if len(m) >= 2}


def load_pair_stats(session: Session, task: str, models: list[str]) -> PairStats:
    rows = session.execute(
        select(ArenaVoteRow.left_model, ArenaVoteRow.right_model, ArenaVoteRow.outcome, func.count())
        .where(ArenaVoteRow.task == task, ArenaVoteRow.flagged.is_(False))
        .group_by(ArenaVoteRow.left_model, ArenaVoteRow.right_model, ArenaVoteRow.outcome)
    ).all()
    stats = PairStats()
    votes = []
    for left, right, outcome, n in rows:
        if left in models and right in models:
            key = frozenset((left, right))
            stats.votes[key] = stats.votes.get(key, 0) + n
            votes.append((left, right, {"left": "a", "right": "b"}.get(outcome, "tie"), n))
    counts = pair_counts(votes, models)
    fitted = rate_counts(counts, ci="sandwich").by_model()
    for m in models:
        n_m = fitted[m].votes
        # below ~10 votes the sandwich SE is unreliable: use the p = 1/2 approximation 2/sqrt(n)
        stats.se[m] = fitted[m].se if n_m >= 10 else ELO_SCALE * 2.0 / math.sqrt(n_m + 1.0)
        stats.rating[m] = fitted[m].rating
    return stats


def task_info(session: Session, cfg: ArenaConfig) -> dict[str, tuple[str, str]]:
    """task name -> (display, family) for every stored task (leaderboard/arena/suitability.py)."""
    out: dict[str, tuple[str, str]] = {}
    for name, family, modalities in session.execute(select(TaskRow.name, TaskRow.family, TaskRow.modalities)):
        out[name] = (suitability.display_for(name, family or "", modalities, cfg.task_display), family or "")
    return out


def cached(cache: StatsCache, cfg: ArenaConfig, session: Session, task: str | None):  # type: ignore[no-untyped-def]
    now = time.monotonic()
    with cache.lock:
        if cache.candidates is None or now - cache.candidates[0] > cfg.stats_ttl_s:
            info = task_info(session, cfg)
            cache.info = info
            # tasks a person cannot judge (or whose content the page cannot show) are never served
            cache.candidates = (now, {t: m for t, m in load_candidates(session).items()
                                      if suitability.servable(info.get(t, ("text", ""))[0])})
        candidates = cache.candidates[1]
        if task is None:
            return candidates, None
        entry = cache.pairs.get(task)
        if task in candidates and (entry is None or now - entry[0] > cfg.stats_ttl_s):
            entry = (now, load_pair_stats(session, task, sorted(candidates[task])))
            cache.pairs[task] = entry
        return candidates, entry[1] if entry else None


def pair_order(
    models: list[str], stats: PairStats | None, cfg: ArenaConfig, rng: random.Random
) -> list[tuple[str, str]]:
    """All pairs in the order to try them (leaderboard/arena/sampler.py): uniform, or active (pairs
    whose order is uncertain first, a share ``cfg.uniform_share`` of uniform draws kept)."""
    return sampler.pair_order(
        models, rng, ratings=stats.rating if stats else None, se=stats.se if stats else None,
        votes=stats.votes if stats else None, uniform_share=cfg.uniform_share, votes_power=cfg.active_votes_power,
        active=cfg.sampling == "active" and stats is not None,
    )


_WS = re.compile(r"\s+")


def _norm(text: str) -> str:
    return _WS.sub(" ", text or "").strip()


@dataclass
class Side:
    row: SampleResultRow
    renders: list[Path]
    mesh: Path | None = None

    @property
    def failed(self) -> bool:
        r = self.row
        if r.error is not None:
            return True
        if media.declares_renders(r.details, r.prediction):  # a 3D task: no picture, no result
            return not self.renders
        return not _norm(r.output) and r.prediction in (None, "", [], {})


def _side(row: SampleResultRow, roots: list[Path]) -> Side:
    paths = [media.resolve(p, roots) for p in media.render_paths(row.details, row.prediction)]
    mesh = media.mesh_path(row.details, row.prediction)
    return Side(row, [p for p in paths if p is not None], media.resolve(mesh, roots) if mesh else None)


def identical(a: Side, b: Side, display: str = "") -> bool:
    """Whether the voter would see the same thing on both sides (then the battle is not served)."""
    if a.renders or b.renders:
        return [media.file_digest(p) for p in a.renders] == [media.file_digest(p) for p in b.renders]
    if display == "text":  # only the text is shown: a hidden prediction that differs does not count
        return _norm(a.row.output) == _norm(b.row.output)
    same_pred = json.dumps(a.row.prediction, sort_keys=True, default=str) == json.dumps(
        b.row.prediction, sort_keys=True, default=str
    )
    return _norm(a.row.output) == _norm(b.row.output) and same_pred


def names_itself(side: Side, label: str, spec_tail: set[str]) -> bool:
    text = (side.row.output or "").lower()
    return any(n and len(n) >= 4 and n in text for n in {label.lower(), *spec_tail})


def _name_parts(label: str) -> set[str]:
    # the short name, without the settings a unique label appends ("builtin:constant (text=A)")
    tail = re.split(r"[:/]", label.split(" (", 1)[0])[-1].lower()
    return {tail}


_RA = SampleResultRow.__table__.alias("ra")
_RB = SampleResultRow.__table__.alias("rb")
# built once (constructing aliased joins per request cost more than running them)
_SHARED_SAMPLES = (
    select(_RA.c.id, _RB.c.id)
    .join_from(_RA, _RB, (_RA.c.sample_id == _RB.c.sample_id) & (_RA.c.epoch == _RB.c.epoch))
    .where(_RA.c.run_id == bindparam("ra"), _RB.c.run_id == bindparam("rb"))
    .order_by(func.random())
    .limit(CANDIDATE_ROWS)
)


def find_sides(
    session: Session, run_a: int, run_b: int, label_a: str, label_b: str, cfg: ArenaConfig, roots: list[Path],
    display: str = "",
) -> tuple[Side, Side] | None:
    pairs = session.execute(_SHARED_SAMPLES, {"ra": run_a, "rb": run_b}).all()
    for id_a, id_b in pairs:
        # both ids were just read from that table in this session: the rows exist
        sa = _side(cast(SampleResultRow, session.get(SampleResultRow, id_a)), roots)
        sb = _side(cast(SampleResultRow, session.get(SampleResultRow, id_b)), roots)
        if sa.failed and sb.failed:
            continue
        if not all(answered(x.row.error, x.row.output, x.row.prediction) for x in (sa, sb)):
            continue  # a side that did not answer makes the battle unvotable: never served
        if identical(sa, sb, display):
            continue
        if display in ("image", "render") and not (sa.renders or sb.renders):
            continue  # an image task with nothing to look at on either side
        if cfg.hide_self_naming and (
            names_itself(sa, label_a, _name_parts(label_a)) or names_itself(sb, label_b, _name_parts(label_b))
        ):
            continue
        return sa, sb
    return None


def _text_of(input_: Any) -> str:
    parts = []
    for m in (input_ or {}).get("messages") or []:
        if m.get("role") == "system":
            continue
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
        else:
            parts += [p.get("text") or "" for p in content or [] if p.get("type") == "text"]
    return "\n\n".join(p for p in parts if p)


def create_battle(
    session: Session,
    cfg: ArenaConfig,
    cache: StatsCache,
    secret: bytes,
    voter_hash: str,
    ip_hash: str,
    roots: list[Path],
    task: str | None = None,
) -> dict[str, Any]:
    """Pick, store and describe one battle. The description names no model and no file."""
    rng = random.Random(secrets.randbits(64))
    candidates, _ = cached(cache, cfg, session, None)
    if not candidates:
        raise NoBattle(EMPTY)
    if task is not None and task not in candidates:
        raise NoBattle(f"no task {task!r} with outputs from at least two models")
    tasks = [task] if task else rng.sample(sorted(candidates), len(candidates))
    for t in tasks:
        _, stats = cached(cache, cfg, session, t)
        models = candidates[t]
        for left, right in pair_order(sorted(models), stats, cfg, rng)[:MAX_PAIRS_TRIED]:
            display, family = cache.info.get(t, ("text", ""))
            found = find_sides(session, models[left], models[right], left, right, cfg, roots, display)
            if found is None:
                continue
            if rng.random() < 0.5:  # left/right at random
                left, right, found = right, left, (found[1], found[0])
            return _store(session, cfg, secret, voter_hash, ip_hash, t, left, right, *found, roots, family)
    raise NoBattle("no battle available: every candidate pair has identical or failed outputs")


def _store(
    session: Session, cfg: ArenaConfig, secret: bytes, voter_hash: str, ip_hash: str, task: str,
    left: str, right: str, sl: Side, sr: Side, roots: list[Path], family: str = "",
) -> dict[str, Any]:
    # hex, not urlsafe base64: a random id must never spell a model's name ("qwen", "bravo", ...) in
    # the page, the API or a media URL before the vote
    public_id = secrets.token_hex(12)
    now = cfg.clock()
    expires = int(now + cfg.token_ttl_s)
    slots: dict[str, str] = {}
    prompt_slots = []
    for i, p in enumerate(media.prompt_image_paths(sl.row.input)):
        real = media.resolve(p, roots)
        if real is not None:
            slots[f"p{i}"] = str(real)
            prompt_slots.append(f"p{i}")
    for prefix, side in (("l", sl), ("r", sr)):
        for i, render in enumerate(side.renders):
            slots[f"{prefix}{i}"] = str(render)
        if side.mesh is not None and not side.failed:
            slots[f"m{prefix}"] = str(side.mesh)
    row = ArenaBattleRow(
        public_id=public_id, task=task, sample_id=sl.row.sample_id, epoch=sl.row.epoch,
        left_model=left, right_model=right, left_result_id=sl.row.id, right_result_id=sr.row.id,
        media=slots,
        features={"left": style_features(sl.row.output or ""), "right": style_features(sr.row.output or "")},
        categories=categories.categorize(_text_of(sl.row.input), family or task,
                                         "3d" if sl.renders or sr.renders else None),
        voter_hash=voter_hash, ip_hash=ip_hash,
        created_at=naive_utc(now), expires_at=naive_utc(expires),
    )
    _insert_within_limits(session, cfg, row)
    fields = tokens.battle_fields(public_id, row.sample_id, row.epoch, left, right, voter_hash, expires)
    token = tokens.sign(secret, fields)
    return describe(session, row, token, int(cfg.token_ttl_s))


def describe(session: Session, row: ArenaBattleRow, token: str | None = None, ttl: int = 0) -> dict[str, Any]:
    """What the page shows for a battle: prompt, both outputs and opaque media URLs; no model."""
    left = session.get(SampleResultRow, row.left_result_id) if row.left_result_id else None
    right = session.get(SampleResultRow, row.right_result_id) if row.right_result_id else None
    slots = sorted((s for s in row.media or {} if s[1:].isdigit()), key=lambda s: (s[0], int(s[1:])))

    def view(prefix: str, r: SampleResultRow | None) -> dict[str, Any]:
        images = [f"/arena/media/{row.public_id}/{s}" for s in slots if s[0] == prefix]
        if r is None or r.error is not None:
            failed = True
        elif media.declares_renders(r.details, r.prediction):
            failed = not images
        else:
            failed = not _norm(r.output) and r.prediction in (None, "", [], {})
        mesh = f"/arena/mesh/{row.public_id}/{prefix}" if f"m{prefix}" in (row.media or {}) else None
        return {"text": "" if r is None or r.error is not None else r.output or "", "failed": failed,
                "images": images, "mesh": mesh}

    return {
        "battle": row.public_id,
        "token": token,
        "task": row.task,
        "expires_in_s": ttl,
        "prompt": {"text": _text_of(left.input if left else {}),
                   "images": [f"/arena/media/{row.public_id}/{s}" for s in slots if s[0] == "p"]},
        "left": view("l", left),
        "right": view("r", right),
    }


def _served_stmt(column: Any) -> Any:
    t = ArenaBattleRow.__table__.c
    return select(func.count()).where(column == bindparam("key"), t.created_at >= bindparam("since", type_=DateTime))


_SERVED_VOTER = _served_stmt(ArenaBattleRow.__table__.c.voter_hash)
_SERVED_IP = _served_stmt(ArenaBattleRow.__table__.c.ip_hash)


def _lock_key(kind: str, value: str) -> int:
    return int(tokens.keyed_hash(b"arena-quota", kind, value)[:15], 16)  # 60 bits: a positive bigint


def _insert_within_limits(session: Session, cfg: ArenaConfig, row: ArenaBattleRow) -> None:
    """Insert the battle and check the per-minute limits in one serialised step, so that concurrent
    requests cannot all pass a count taken before any of them inserted. PostgreSQL: transaction-scoped
    advisory locks on the voter's and the IP's quota (voter first, then IP: always the same order, so
    no deadlock). SQLite: the INSERT takes the database's single write lock, held to the commit, and
    the counts run after it inside the same transaction. Over the limit: rolled back, ``Limited``."""
    session.rollback()  # end any read transaction: the counts must see everything committed until now
    if session.get_bind().dialect.name == "postgresql":
        for kind, value in (("voter", row.voter_hash), ("ip", row.ip_hash)):
            session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _lock_key(kind, value)})
    session.add(row)
    session.flush()
    since = naive_utc(cfg.clock()) - timedelta(minutes=1)
    voter_n = session.execute(_SERVED_VOTER, {"key": row.voter_hash, "since": since}).scalar_one()
    ip_n = session.execute(_SERVED_IP, {"key": row.ip_hash, "since": since}).scalar_one()
    if voter_n > cfg.battles_per_minute or ip_n > cfg.battles_per_minute * cfg.ip_multiplier:
        session.rollback()
        raise Limited("battle limit reached")
    session.commit()
