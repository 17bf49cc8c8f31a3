"""A scoring sample's card shows its continuations as a table (text, log p, tokens, greedy, the most
likely one marked), not raw JSON; anything that does not parse falls back to the JSON view."""

from __future__ import annotations

from fastapi.testclient import TestClient

from harness.leaderboard.app import create_app
from harness.leaderboard.scoring_view import scoring_rows
from harness.runner import EvalConfig, Runner
from harness.task import Task
from harness.types import Loglikelihood, Output, Sample, Score, higher

REQUEST = {"kind": "loglikelihood", "pairs": [["Q: x\nAnswer:", " A"], ["Q: x\nAnswer:", " B <&>"]]}


def test_rows_mark_the_most_likely_continuation():
    got = scoring_rows({"request": REQUEST}, {"loglikelihoods": [[-2.5, False, 1], [-0.5, True, 3]]})
    assert got is not None and got["kind"] == "loglikelihood"
    assert [r["text"] for r in got["rows"]] == [" A", " B <&>"]
    assert [r["best"] for r in got["rows"]] == [False, True] and got["rows"][1]["greedy"] is True


def test_what_does_not_parse_falls_back():
    assert scoring_rows({"request": REQUEST}, {"loglikelihoods": [[-1.0, False, 1]]}) is None  # count differs
    assert scoring_rows({"request": REQUEST}, {"loglikelihoods": [["x", False, 1], [-1, 0, 1]]}) is None
    assert scoring_rows({"messages": []}, {"loglikelihoods": []}) is None
    assert scoring_rows(None, "text") is None
    rolling = scoring_rows({"request": {"kind": "loglikelihood_rolling", "texts": ["t" * 500]}},
                           {"loglikelihoods": [[-100.0, False, 120]]})
    assert rolling is not None and rolling["rows"][0]["text"].endswith("…") and not rolling["rows"][0]["best"]


class _Scorer:
    """A backend answering loglikelihood requests with fixed values (the leaderboard, not a model, is tested)."""

    spec = "fixed:loglik"
    batch_size = 8
    concurrency = 1
    modalities = frozenset({"text"})
    cacheable = False
    request_kinds = frozenset({"loglikelihood"})

    async def generate(self, requests):
        return [Output(loglikelihoods=[Loglikelihood(-1.0 - i, i == 0, 1) for i, _ in enumerate(r.pairs)])
                for r in requests]


def test_run_page_renders_the_table(tmp_path):
    from harness.multiple_choice import choice_request

    samples = [Sample(str(i), [], "A", {}) for i in range(3)]
    task = Task(version="1", load=lambda: samples, prompt=lambda s: choice_request("Q: x\nAnswer:", ["A", "B <&>"]),
                score=lambda s, o, c: Score({"acc": 1.0}, answer="A"), request_kind="loglikelihood", name="scored_view",
                primary_metric="acc", metrics={"acc": higher()})
    db = f"sqlite:///{tmp_path / 'h.db'}"
    cfg = EvalConfig(task="scored_view", model="fixed:loglik", db_url=db, progress=False)
    runner = Runner(cfg, task=task, model=_Scorer())
    summary = runner.run()
    html = TestClient(create_app(db)).get(f"/runs/{summary.run_id}").text
    assert "Continuations scored" in html and "most likely" in html
    assert "B &lt;&amp;&gt;" in html  # the text is escaped
    assert '"loglikelihoods"' not in html  # no raw JSON
