"""Router, Pareto front, interpolation and the ``harness reliability report`` command.

The end-to-end test stores real runs (through the Runner, into SQLite) of three fixed techniques
whose quality depends on the *topic* of the prompt: a maths-strong model, a history-strong model
and a 5-sample vote of the maths model. No fixed choice is good on both topics; the SemKNN router
(real all-MiniLM-L6-v2 embeddings) should route by topic and beat every fixed technique on the
held-out half at lower cost than the vote.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.models.operators.diversity import Vote
from harness.models.operators.router import SemKNNRouter, evaluate, split_ids
from harness.runner import EvalConfig, Runner
from harness.store.db import open_db
from harness.task import Task
from harness.tasks.reliability import analysis
from harness.types import GenerationConfig, Message, Output, Request, Sample, Score, Usage, stable_hash

TARGET = re.compile(r"\(ref (\d+)\)")


# ---- pure functions ----------------------------------------------------------------------------------------
def _pt(name: str, cost: float, quality: float) -> analysis.RunPoint:
    return analysis.RunPoint(0, name, "t", name, "m", "op", "", quality, quality, quality, cost, 0.0, 10, 0)


def test_pareto_front() -> None:
    pts = [_pt("a", 1, 0.5), _pt("b", 2, 0.7), _pt("c", 3, 0.6), _pt("d", 5, 0.8), _pt("e", 2, 0.5)]
    assert [p.run_name for p in analysis.pareto_front(pts)] == ["a", "b", "d"]


def test_interpolation_along_the_curve() -> None:
    costs, quals = [1.0, 2.0, 4.0, 3.0], [0.5, 0.7, 0.9, 0.6]  # (3, 0.6) is below the running max
    assert analysis.cost_at_quality(costs, quals, 0.6) == pytest.approx(1.5)
    assert analysis.cost_at_quality(costs, quals, 0.8) == pytest.approx(3.5)  # between (3, .7) and (4, .9)
    assert analysis.cost_at_quality(costs, quals, 0.95) is None
    assert analysis.quality_at_cost(costs, quals, 1.5) == pytest.approx(0.6)
    assert analysis.quality_at_cost(costs, quals, 10) == pytest.approx(0.9)
    assert analysis.quality_at_cost(costs, quals, 0.5) is None


def test_usd_cost_basis() -> None:
    p = _pt("a", 3.0, 0.5)
    p.usd, p.usd_by_sample, p.cost_by_sample = 0.002, {"s1": 0.002}, {"s1": 3.0}
    (q,) = analysis.in_usd([p])
    assert q.cost == 0.002 and q.cost_by_sample == {"s1": 0.002} and p.cost == 3.0


def test_describe_spec() -> None:
    assert analysis.describe_spec("vote(hf:x, n=5, extract=gsm8k)") == ("hf:x", "vote", "n=5")
    assert analysis.describe_spec("openai:gpt-4o") == ("openai:gpt-4o", "plain", "")


def test_router_routes_by_neighbourhood_and_lambda_trades_quality_for_cost() -> None:
    rng = np.random.default_rng(0)
    centres = np.eye(2)
    topic = rng.integers(0, 2, 200)
    emb = centres[topic] + rng.normal(0, 0.1, (200, 2))
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    # technique 0 is right on topic 0, technique 1 on topic 1, technique 2 (expensive) on both
    quality = np.stack([(topic == 0), (topic == 1), np.ones(200, bool)], axis=1).astype(float)
    cost = np.tile([1.0, 1.0, 5.0], (200, 1))
    router = SemKNNRouter(["a", "b", "vote"], k=5).fit(emb[:100], quality[:100], cost[:100])
    lam0, lam_mid, lam_big = evaluate(router, emb[100:], quality[100:], cost[100:], [0.0, 0.05, 10.0])
    # at lambda=0 every technique predicting 1.0 ties: the cheaper one wins the tie
    assert lam0.quality == pytest.approx(1.0) and lam0.cost == pytest.approx(1.0)
    assert lam_mid.quality == pytest.approx(1.0) and set(lam_mid.usage) == {"a", "b"}
    assert lam_big.cost == pytest.approx(1.0)
    only_vote = SemKNNRouter(["a", "b", "vote"], k=5).fit(emb[:100], quality[:100], np.array([1.0, 1.0, 1.0]))
    assert only_vote.route(emb[100:101], 0.0).tolist() in ([0], [1])  # cost ties broken by order
    with pytest.raises(ValueError, match="shapes"):
        SemKNNRouter(["a"]).fit(emb[:10], quality[:10], cost[:10])


def test_split_is_deterministic_and_stable() -> None:
    ids = [str(i) for i in range(1000)]
    train, test = split_ids(ids, 0.5, seed=1)
    assert set(train).isdisjoint(test) and len(train) + len(test) == 1000 and 420 < len(train) < 580
    train2, _ = split_ids(ids[:500], 0.5, seed=1)
    assert set(train2) == set(train) & set(ids[:500])


# ---- end to end through the database and the CLI ----------------------------------------------------------
MATH = ["apples", "pencils", "marbles", "cookies", "stamps", "books", "coins", "eggs"]
HISTORY = ["treaty", "emperor", "revolution", "dynasty", "battle", "republic", "monarchy", "empire"]


def _samples() -> list[Sample]:
    rng = random.Random(7)
    out = []
    for i in range(72):
        if i % 2 == 0:
            thing = MATH[i % len(MATH)]
            text = (f"Sam has {rng.randint(3, 40)} {thing} and buys {rng.randint(2, 9)} more bags with "
                    f"{rng.randint(2, 12)} {thing} each. How many {thing} does Sam have now?")
            topic = "math"
        else:
            thing = HISTORY[i % len(HISTORY)]
            text = (f"In which year did the {thing} described in chapter {rng.randint(1, 30)} of the medieval "
                    f"chronicle begin, according to the historians of the kingdom?")
            topic = "history"
        out.append(Sample(str(i), [Message.text("user", f"{text} (ref {1000 + i})")], str(1000 + i),
                          {"topic": topic}))
    return out


def _task() -> Task:
    samples = _samples()

    def score(sample: Sample, output: Output, ctx) -> Score:  # type: ignore[no-untyped-def]
        ok = output.text.strip().endswith(f"#### {sample.target}")
        return Score({"correct": float(ok)})

    return Task(name="toy_topics", version="1", load=lambda: samples,
                prompt=lambda s: Request(s.messages, GenerationConfig(temperature=0.0, max_tokens=32)),
                score=score, primary_metric="correct", content_hash="toy")


@dataclass
class TopicChannel:
    """Correct with probability p_math on arithmetic prompts and p_history on history prompts."""

    spec: str
    p_math: float
    p_history: float
    batch_size: int = 64
    concurrency: int = 1
    modalities: frozenset[str] = frozenset({"text"})
    cacheable: bool = False
    seen: list[str] = field(default_factory=list)

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        outs = []
        for r in requests:
            text = r.messages[-1].text_content
            target = int(TARGET.search(text).group(1))
            p = self.p_history if "chronicle" in text else self.p_math
            rng = random.Random(stable_hash([self.spec, text, r.config.seed, r.config.temperature]))
            answer = target if rng.random() < p else target + 1
            outs.append(Output(text=f"#### {answer}", usage=Usage(len(text.split()), 2, 1)))
        return outs


def _store_runs(db_url: str) -> None:
    sessions = open_db(db_url)
    maths = TopicChannel("toy:maths", 0.85, 0.15)
    history = TopicChannel("toy:history", 0.15, 0.85)
    for spec, model in (("toy:maths", maths), ("toy:history", history),
                        ("vote(toy:maths, n=5)", Vote(TopicChannel("toy:maths", 0.85, 0.15), n=5))):
        cfg = EvalConfig(task="toy_topics", model=spec, db_url=db_url, progress=False)
        summary = Runner(cfg, session_factory=sessions, task=_task(), model=model).run()
        assert summary.n_new == 72 and summary.n_errors == 0


def test_report_end_to_end(tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path / 'r.db'}"
    _store_runs(db_url)
    sessions = open_db(db_url)
    report = analysis.build_report(sessions, "toy_topics", train_frac=0.5, seed=0, k=5)
    by_op = {p.model_spec: p for p in report.points}
    assert set(by_op) == {"toy:maths", "toy:history", "vote(toy:maths, n=5)"}
    assert by_op["toy:maths"].cost == 1.0 and by_op["vote(toy:maths, n=5)"].cost == pytest.approx(5.0)
    assert by_op["vote(toy:maths, n=5)"].operator == "vote" and by_op["vote(toy:maths, n=5)"].budget == "n=5"
    rr = report.router
    assert rr is not None and rr.n_train + rr.n_test == 72
    best_fixed = max(q for q, _ in rr.fixed_on_test.values())
    lam0 = rr.curve[0]
    assert lam0["lambda"] == 0.0
    # routing by topic beats every fixed technique on held-out prompts
    assert lam0["quality"] > best_fixed + 0.1
    assert rr.matched_cost_gain is not None and rr.matched_cost_gain > 0
    assert rr.matched_quality_cost_saving is not None and rr.matched_quality_cost_saving > 0
    assert rr.significance and rr.significance[0]["versus"] == rr.strongest
    # large lambda: only the cheap techniques are used
    assert rr.curve[-1]["cost"] == pytest.approx(1.0)

    out, js = tmp_path / "report.html", tmp_path / "report.json"
    result = CliRunner().invoke(app, ["reliability", "report", "--task", "toy_topics", "--db", db_url,
                                      "--out", str(out), "--json", str(js)])
    assert result.exit_code == 0, result.output
    assert "matched-quality cost saving" in result.output and "vote" in result.output
    html = out.read_text()
    assert "SemKNN router" in html and "Pareto front" in html
    data = json.loads(js.read_text())
    assert len(data["points"]) == 3 and data["router"]["strongest"] == rr.strongest
    assert data["cost_basis"] == "normalised"
    usd = analysis.build_report(sessions, "toy_topics", router=False, cost="usd")
    assert usd.cost_basis == "usd" and all(p.cost == 0.0 for p in usd.points)
    assert any("no run has a priced cost" in n for n in usd.notes)
    div = analysis.plot_html(sessions, "toy_topics", router=False)
    assert div.startswith("<div") and "Pareto front" in div
    fig = analysis.chart(sessions, "toy_topics")
    assert fig is not None and [t["name"] for t in fig["data"]] == ["plain", "vote", "Pareto front"]
    json.dumps(fig)  # plain JSON for the leaderboard
    assert analysis.chart(sessions, "no_such_task") is None


def test_report_errors_are_one_line(tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path / 'empty.db'}"
    open_db(db_url)
    result = CliRunner().invoke(app, ["reliability", "report", "--db", db_url])
    assert result.exit_code == 2 and "no scored runs" in result.output
    result = CliRunner().invoke(app, ["reliability", "report", "--db", db_url, "--train-frac", "1.5"])
    assert result.exit_code == 2 and "--train-frac" in result.output


def test_fitted_router_as_an_operator(tmp_path: Path) -> None:
    from harness.models.operators.routed import SemKNNOperator

    db_url = f"sqlite:///{tmp_path / 'r.db'}"
    _store_runs(db_url)
    path = tmp_path / "router.npz"
    result = CliRunner().invoke(app, ["reliability", "fit-router", "-t", "toy_topics", "--db", db_url,
                                      "--out", str(path)])
    assert result.exit_code == 0, result.output
    order = [line.split()[1] for line in result.output.splitlines() if line.strip()[:2] in ("0.", "1.", "2.")]
    assert order == ["toy:history", "toy:maths", "vote(toy:maths,"]
    history, maths = TopicChannel("toy:history", 0.15, 0.85), TopicChannel("toy:maths", 0.85, 0.15)
    vote = Vote(TopicChannel("toy:maths", 0.85, 0.15), n=5)
    fresh = [Request([Message.text("user", "Ana has 14 pencils and buys 3 more bags with 6 pencils each. How many "
                                           "pencils does Ana have now? (ref 7)")]),
             Request([Message.text("user", "In which year did the rebellion described in chapter 4 of the medieval "
                                           "chronicle begin, according to the historians of the kingdom? (ref 8)")])]
    cheap = asyncio.run(SemKNNOperator(history, maths, vote, router=str(path), lam=1.0).generate(fresh))
    assert [o.details["routed_to"] for o in cheap] == ["toy:maths · plain", "toy:history · plain"]
    assert cheap[0].details["cost"]["normalised"] == 1.0
    best = asyncio.run(SemKNNOperator(history, maths, vote, router=str(path), lam=0.0).generate(fresh))
    assert best[0].details["routed_to"] == "toy:maths · vote(n=5)" and best[0].usage.calls == 5
    with pytest.raises(ValueError, match="3 techniques"):
        SemKNNOperator(history, maths, router=str(path))
