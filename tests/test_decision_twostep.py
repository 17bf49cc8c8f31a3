"""The ``twostep`` task end to end: the paper's headline (with a well-specified ML model and a
rational Bayesian agent, a misaligned policy belief makes decision support worse than none while
an aligned one makes it better), the no-support baseline and the uninformative belief at exactly
zero gain, and bad input as one-line errors or error rows."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import asyncio  # noqa: E402

import pytest  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from harness.runner import EvalConfig, Runner  # noqa: E402
from harness.store.db import open_db  # noqa: E402

Row = tuple[float, float | None, float | None]  # value, CI low, CI high


def _run(sessions, agent: str, prior: str, n_agents: int = 600, **options) -> dict[str, Row]:
    summary = Runner(EvalConfig(task="twostep", model=f"twostep:{agent}",
                                task_options={"prior": prior, "n_agents": n_agents, **options}, progress=False),
                     session_factory=sessions).run()
    assert summary.status == "finished" and summary.n_errors == 0, (agent, prior)
    return {m.name: (m.value, m.ci_low, m.ci_high) for m in summary.metrics if not m.breakdown_key}


def test_misaligned_belief_makes_support_harmful_and_aligned_makes_it_useful(sqlite_url):
    sessions = open_db(sqlite_url)
    aligned = _run(sessions, "bayes", "aligned")
    misaligned = _run(sessions, "bayes", "misaligned")
    gain, lo, hi = aligned["outcome_gain"]
    assert gain > 0 and lo > 0, aligned["outcome_gain"]
    gain, lo, hi = misaligned["outcome_gain"]
    assert gain < 0 and hi < 0, misaligned["outcome_gain"]
    # same worlds, same coefficient priors: only the policy belief differs, and it decides
    none = _run(sessions, "no_support", "aligned")
    assert none["outcome_gain"] == (0.0, 0.0, 0.0)
    assert aligned["decision_accuracy"][0] > none["decision_accuracy"][0] > misaligned["decision_accuracy"][0]
    assert aligned["posterior_error"][0] < none["posterior_error"][0] < misaligned["posterior_error"][0]
    assert aligned["outcome"][0] > none["outcome"][0] > misaligned["outcome"][0]
    # an agent who thinks past treatment ignored x learns nothing about the effect: exactly no gain
    blind = _run(sessions, "bayes", "uninformative")
    assert blind["outcome_gain"] == (0.0, 0.0, 0.0) and blind["treat_rate"] == none["treat_rate"]


def test_naive_agent_and_policy_sweep_through_the_runner(sqlite_url):
    sessions = open_db(sqlite_url)
    bayes = _run(sessions, "bayes", "aligned", n_agents=400, seeds=2)
    naive = _run(sessions, "naive", "aligned", n_agents=400, seeds=2)
    # taking the prediction at face value over-reacts: the effect estimate is worse than the Bayesian's
    assert naive["posterior_error"][0] > bayes["posterior_error"][0] + 0.1
    # a belief of half the true policy still points the right way: support helps, less surely
    half = _run(sessions, "bayes", "aligned", n_agents=400, gamma0=0.5)
    assert half["outcome_gain"][0] > 0


def test_bad_input_is_a_one_line_error_or_an_error_row(sqlite_url):
    from harness.cli import app
    from harness.modelspec import build_model
    from harness.registry import lookup
    from harness.types import Message, Part, Request

    factory = lookup("task", "twostep").factory
    for options, msg in (({"prior": "misalign"}, "did you mean 'misaligned'"), ({"n_agents": 0}, "n_agents >= 1"),
                         ({"n_agents": "many"}, "must be an integer"), ({"gamma": "nan"}, "finite"),
                         ({"n_train": 2}, "at least 3"), ({"prior": "misaligned", "gamma": 0}, "gamma != 0")):
        with pytest.raises(ValueError, match=msg):
            factory(**options)
    with pytest.raises(ValueError, match="did you mean 'naive'"):
        build_model("twostep:naiv")
    with pytest.raises(ValueError, match="unknown setting 'temp'"):
        build_model("twostep:bayes", {"temp": 1})
    result = CliRunner().invoke(app, ["eval", "-t", "twostep", "-m", "twostep:bayes", "-T", "prior=skeptical",
                                      "--db", sqlite_url])
    assert result.exit_code != 0 and "unknown prior 'skeptical'" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    prior = {"mean": [1.0, 0.2], "cov": [[1.0, 0.0], [0.0, 1.0]], "gamma0": 1.0}
    views = [{"prior": prior, "x": 0.5, "yhat": 1.0, "se": 0.1, "cost": 0.0},
             {"prior": prior, "x": 0.5, "yhat": float("nan"), "se": 0.1, "cost": 0.0},
             {"prior": {**prior, "cov": [[1.0, 3.0], [3.0, 1.0]]}, "x": 0.5, "yhat": 1.0, "se": 0.1, "cost": 0.0},
             {"prior": prior, "x": 0.5, "se": 0.1, "cost": 0.0}]
    model = build_model("twostep:bayes")
    outs = asyncio.run(model.generate([Request([Message("user", [Part("text", text="v", options=v)])])
                                       for v in views]))
    assert outs[0].error is None and outs[0].prediction["treat"] is True
    assert "finite" in outs[1].error and "semi-definite" in outs[2].error and "'yhat'" in outs[3].error
