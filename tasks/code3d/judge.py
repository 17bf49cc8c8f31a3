"""Pairwise judge between two models' objects with 3DCodeBench's prompts, rated with Bradley-Terry.

System prompt: ``prompts/image_judge.txt`` (renders) or ``prompts/code_judge.txt`` (scripts), copied
from the paper's repository. User turn, as the repo's judge.py builds it (per its PROVENANCE notes;
the file itself was not copied): ``--- ORIGINAL PROMPT ---`` and the prompt, the reference images for
image-to-3D, then System A's four renders (or code), then System B's. Each pair is judged once with a
random A/B swap seeded by the vote id (position bias averages out); the verdict is mapped back.
Verdicts: ``a`` / ``b`` / ``tie`` / ``both_bad``; unparseable replies stay None (never a vote).
Ratings: ``harness.ratings.rate`` on (model_a, model_b, outcome) tuples (ties and both_bad count as
half a win each way there). Agreement with human votes drops pairs that either side called a tie or
both_bad, then reports accuracy and Cohen's kappa, as the paper does.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.judge import Verdict, judge
from harness.task import ScoreContext
from harness.types import Message, Part

PROMPTS = Path(__file__).parent / "prompts"
OUTCOMES = ("a", "b", "tie", "both_bad")
_JSON = re.compile(r"\{[^{}]*\"winner\"[^{}]*\}", re.S)


@dataclass
class Contestant:
    model: str
    renders: list[str]
    code: str = ""


def parse_verdict(text: str) -> str | None:
    for match in reversed(_JSON.findall(text or "")):
        try:
            winner = str(json.loads(match).get("winner", "")).strip().lower()
        except (json.JSONDecodeError, AttributeError):
            continue
        if winner in OUTCOMES:
            return winner
    return None


def unswap(verdict: str, swapped: bool) -> str:
    return {"a": "b", "b": "a"}.get(verdict, verdict) if swapped else verdict


def judge_messages(prompt_text: str, first: Contestant, second: Contestant, *, mode: str = "image",
                   reference_images: Sequence[str] = ()) -> list[Message]:  # fmt: skip
    if mode not in ("image", "code"):
        raise ValueError(f"judge mode must be 'image' or 'code', not {mode!r}")
    system = (PROMPTS / ("image_judge.txt" if mode == "image" else "code_judge.txt")).read_text()
    parts: list[Part] = [Part("text", f"--- ORIGINAL PROMPT ---\n{prompt_text}\n")]
    if reference_images and mode == "image":
        parts += [Part("text", "--- REFERENCE IMAGES ---\n"), *[Part("image", path=p) for p in reference_images]]
    for label, side in (("A", first), ("B", second)):
        if mode == "image":
            parts += [Part("text", f"--- SYSTEM {label} RENDERS ---\n"), *[Part("image", path=p) for p in side.renders]]
        else:
            parts.append(Part("text", f"--- SYSTEM {label} CODE ---\n{side.code}\n"))
    return [Message.text("system", system), Message("user", parts)]


async def judge_pair(ctx: ScoreContext, vote_id: str, prompt_text: str, a: Contestant, b: Contestant, *,
                     mode: str = "image", reference_images: Sequence[str] = ()
                     ) -> tuple[str | None, Verdict]:  # fmt: skip
    """One verdict in the caller's A/B order (None when the judge never gave a parseable one)."""
    swapped = random.Random(vote_id).random() < 0.5
    first, second = (b, a) if swapped else (a, b)
    verdict = await judge(ctx, judge_messages(prompt_text, first, second, mode=mode,
                                              reference_images=reference_images), parse_verdict)  # fmt: skip
    for record in verdict.records:
        record.verdict["swapped"] = swapped
    return (unswap(verdict.value, swapped) if verdict.value is not None else None), verdict


def rate_verdicts(votes: Sequence[tuple[str, str, str]], **options: Any) -> Any:
    """Bradley-Terry ratings of (model_a, model_b, outcome) tuples via the arena's code."""
    from harness.ratings import rate

    return rate(votes, **options)


def agreement(judge_outcomes: Sequence[str | None], human_outcomes: Sequence[str]) -> dict[str, float]:
    """Accuracy and Cohen's kappa on the pairs both sides decided (a or b); ties/both_bad dropped."""
    if len(judge_outcomes) != len(human_outcomes):
        raise ValueError("judge and human outcome lists differ in length")
    pairs = [(j, h) for j, h in zip(judge_outcomes, human_outcomes, strict=True) if j in ("a", "b") and h in ("a", "b")]
    n = len(pairs)
    if n == 0:
        return {"n": 0.0, "accuracy": float("nan"), "kappa": float("nan")}
    observed = sum(j == h for j, h in pairs) / n
    pj, ph = sum(j == "a" for j, _ in pairs) / n, sum(h == "a" for _, h in pairs) / n
    expected = pj * ph + (1 - pj) * (1 - ph)
    kappa = (observed - expected) / (1 - expected) if expected < 1 else float("nan")
    return {"n": float(n), "accuracy": observed, "kappa": kappa}


@dataclass
class PairVote:
    sample_id: str
    model_a: str
    model_b: str
    outcome: str | None  # a | b | tie | both_bad; None: the judge gave no parseable verdict
    source: str  # "judge", or "status" when execution alone decided (one or both sides failed)
    run_a: int
    run_b: int


def _prompt_text(sample_input: dict[str, Any]) -> str:
    users = [m for m in sample_input.get("messages", []) if m.get("role") == "user"]
    if not users:
        return ""
    content = users[-1].get("content", [])
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if p.get("type") == "text")


def load_run_outputs(db: Any, run_id: int) -> dict[str, dict[str, Any]]:
    """sample id -> {status, renders, code, prompt, reference_renders, image} of one stored run (its
    epoch 0); ``db``: a session or a session factory (:mod:`harness.results`)."""
    from harness.results import samples
    from harness.tasks.code3d.task import extract_code

    out = {}
    for row in samples(db, run_id, epoch=0):
        details = row.details
        out[row.sample_id] = {
            "status": details.get("status") or ("ERR_MODEL" if row.error else "MISSING"),
            "renders": list(details.get("renders") or []), "code": extract_code(row.output)[0],
            "prompt": _prompt_text(row.input), "reference_renders": details.get("reference_renders") or [],
            "image": row.input.get("metadata", {}).get("setting") == "image",
        }  # fmt: skip
    return out


async def judge_runs(
    sessions: Any, run_ids: Sequence[int], ctx: ScoreContext, *, mode: str = "image"
) -> list[PairVote]:
    """Every pair of runs on every sample both have: execution decides when a side failed (both
    failed: both_bad; one failed: the other wins), the judge decides otherwise. Verdicts are stored
    as judgement rows of run A (through :func:`harness.results_write.store_judgements`)."""
    from itertools import combinations

    from harness.results import get_run
    from harness.results_write import store_judgements

    with sessions() as s:
        names: dict[int, str] = {}
        for rid in run_ids:
            run = get_run(s, rid)
            if run is None:
                raise ValueError(f"no stored run with id {rid}")
            names[rid] = run.model
        outputs = {rid: load_run_outputs(s, rid) for rid in run_ids}
    votes: list[PairVote] = []
    records: list[dict[str, Any]] = []
    for ra, rb in combinations(run_ids, 2):
        for sid in sorted(set(outputs[ra]) & set(outputs[rb])):
            a, b = outputs[ra][sid], outputs[rb][sid]
            ok_a, ok_b = a["status"] == "OK", b["status"] == "OK"
            if not (ok_a and ok_b):
                outcome: str | None = "both_bad" if not (ok_a or ok_b) else ("a" if ok_a else "b")
                votes.append(PairVote(sid, names[ra], names[rb], outcome, "status", ra, rb))
                continue
            outcome, verdict = await judge_pair(
                ctx, f"{ra}-{rb}-{sid}", a["prompt"], Contestant(names[ra], a["renders"], a["code"]),
                Contestant(names[rb], b["renders"], b["code"]), mode=mode,
                reference_images=a["reference_renders"] if a["image"] else (),
            )  # fmt: skip
            votes.append(PairVote(sid, names[ra], names[rb], outcome, "judge", ra, rb))
            for rec in verdict.records:
                rec.verdict.update(model_a=names[ra], model_b=names[rb], run_b=rb, outcome=outcome)
                records.append({"run_id": ra, "sample_id": sid, "epoch": 0, **rec.to_dict()})
    store_judgements(sessions, records)
    return votes
