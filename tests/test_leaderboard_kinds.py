"""The overview never ranks incomparable results on one list: models of different kinds (LLM,
method, agent, stub) get lists of their own, a result at other task settings than its column's is
marked and never paired, a stub-judged run is marked and never ranked, and model metadata comes from
the alias cards (the size filter finds SmolLM2-135M).

Rows are hand-made on a real database (SQLite here, PostgreSQL where the suite has one); the kind
stored by the runner comes from real ``harness eval`` runs of the built-in models."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from harness.leaderboard.app import create_app
from harness.leaderboard.kinds import model_kind
from harness.leaderboard.model_cards import ModelCard, card_for
from harness.modelspec import spec_kind
from harness.registry import MODEL_KINDS, lookup, model
from harness.runner import EvalConfig, Runner
from harness.store import ops
from harness.store.db import open_db
from harness.store.schema import ModelRow, RunRow, utcnow
from harness.types import Metric

UP = {"score": {"direction": "higher", "scale": "fraction", "display": "score"}}


def _run(s, task: str, spec: str, value: float, *, content_hash: str = "h", kind: str | None = None,
         judge: str | None = None, owner: str = "", ci: float = 0.0) -> int:
    """One finished run of ``spec`` on ``task`` with headline ``score`` = value (CI +- ci)."""
    t = ops.get_or_create_task(s, name=task, version="1", content_hash=content_hash, family="hand", description="",
                               modalities=["text"], primary_metric="score", metrics=UP)
    info = {"kind": kind} if kind else {}
    m = ops.get_or_create_model(s, spec, backend=spec.split(":")[0].split("(")[0], display_name=spec, info=info,
                                **({"owner": owner} if owner else {}))
    run = RunRow(name=f"{task}-{spec}-{content_hash}-{judge}", task_id=t.id, model_id=m.id, config={},
                 config_hash="c", status="finished", n_samples=200, n_done=200, finished_at=utcnow(), judge_spec=judge,
                 **({"owner": owner} if owner else {}))
    s.add(run)
    s.flush()
    ops.replace_metrics(s, run.id, [Metric("score", value, value - ci, value + ci, 200)])
    return run.id


@pytest.fixture
def site(db_url):
    apps = []

    def make(fill) -> TestClient:
        sessions = open_db(db_url)
        with sessions.begin() as s:
            fill(s)
        sessions.kw["bind"].dispose()
        app = create_app(db_url, cache_seconds=0.0)
        apps.append(app)
        return TestClient(app)

    yield make
    for app in apps:
        app.state.sessions.kw["bind"].dispose()


def _rows(client: TestClient, query: str = "") -> dict[str, dict]:
    return {r["model"]: r for r in client.get(f"/api/overview{query}").json()["rows"]}


# ---- the registry declares kinds ------------------------------------------------------------------


def test_the_registry_refuses_an_unknown_kind():
    with pytest.raises(ValueError, match=r"unknown model kind 'robot'; one of llm, method, agent, stub"):
        model("kind_test_robot", kind="robot")
    with pytest.raises(ValueError, match="unknown model kind"):
        model("kind_test_robot", kind="")
    with pytest.raises(LookupError):
        lookup("model", "kind_test_robot")  # nothing was registered
    # declared where the backend registers, never guessed from a name
    assert lookup("model", "builtin").model_kind == "stub"
    assert lookup("model", "hf").model_kind == "llm" and lookup("model", "openai").model_kind == "llm"
    assert lookup("model", "crafter").model_kind == "agent" and lookup("model", "kmeans").model_kind == "method"
    assert set(MODEL_KINDS) == {"llm", "method", "agent", "stub"}


def test_a_spec_has_its_backends_kind_aliases_and_operators_included():
    assert spec_kind("builtin:echo") == "stub" and spec_kind("crafter:random") == "agent"
    assert spec_kind("smollm2") == "llm" and spec_kind("qwen") == "llm"  # an alias: its model's backend
    assert spec_kind("vote(hf:x, n=5)") == "llm"
    assert spec_kind("vote(builtin:number, n=3)") == "stub"  # an operator takes the kind its models share
    assert spec_kind("vote(builtin:number, hf:x)") == "llm"  # mixed: the operator's own declaration
    assert spec_kind("no-such-backend:x") is None and spec_kind("((") is None


def test_the_runner_stores_the_declared_kind_and_old_rows_fall_back_to_the_registry(sqlite_url):
    sessions = open_db(sqlite_url)
    for spec in ("builtin:number", "vote(builtin:number, n=2)"):
        Runner(EvalConfig(task="gsm8k", model=spec, limit=2, progress=False), session_factory=sessions).run()
    with sessions() as s:
        kinds = {m.spec: (m.info or {}).get("kind") for m in s.query(ModelRow)}
    sessions.kw["bind"].dispose()
    assert set(kinds.values()) == {"stub"} and len(kinds) == 2
    # a row without a kind (an older database): the registry's declaration for its spec
    assert model_kind({}, "kmeans:lloyd") == "method" and model_kind(None, "crafter:scripted") == "agent"
    assert model_kind({"kind": "bogus"}, "hf:x") == "llm" and model_kind({}, "unregistered:x") == "unknown"
    # a push token's claim never overrides what the code here declares; the operator's stored kind stands
    assert model_kind({"kind": "llm"}, "builtin:echo", owner="alice") == "stub"
    assert model_kind({"kind": "llm"}, "unregistered:x", owner="alice") == "llm"
    assert model_kind({"kind": "method"}, "builtin:echo") == "method"


# ---- one ranked list per kind ----------------------------------------------------------------------


def test_an_agent_and_an_llm_never_share_a_ranked_list(site):
    def fill(s):
        for task in ("t_a", "t_b"):
            _run(s, task, "hf:llm-a", 0.9, kind="llm")
            _run(s, task, "hf:llm-b", 0.5, kind="llm")
            _run(s, task, "crafter:random", 0.7)  # no stored kind: the registry says agent
            _run(s, task, "crafter:scripted", 0.1, kind="agent")

    client = site(fill)
    rows = _rows(client)
    assert {m: r["kind"] for m, r in rows.items()} == {"hf:llm-a": "llm", "hf:llm-b": "llm",
                                                       "crafter:random": "agent", "crafter:scripted": "agent"}
    # within each kind: the better of two beats its one opponent on both tasks. Mixed on one list,
    # crafter:random (0.7) would have beaten hf:llm-b and ranked second of four (2/3)
    win = {m: (r["mean_win_rate"], r["win_rate_n_opponents"], r["rank_best"]) for m, r in rows.items()}
    assert win == {"hf:llm-a": (1.0, 1, 1), "hf:llm-b": (0.0, 1, 2),
                   "crafter:random": (1.0, 1, 1), "crafter:scripted": (0.0, 1, 2)}
    ranked_by_task = _rows(client, "?sort=task:t_a")
    assert {m: r["rank_best"] for m, r in ranked_by_task.items()} == {
        "hf:llm-a": 1, "hf:llm-b": 2, "crafter:random": 1, "crafter:scripted": 2}
    # the page: one table per kind, LLMs first, each holding only its own kind
    html = client.get("/").text
    llm, agent = html.index('id="overview-llm"'), html.index('id="overview-agent"')
    assert llm < agent
    assert "hf:llm-b" in html[llm:agent] and "crafter:random" not in html[llm:agent]
    assert "crafter:random" in html[agent:] and "hf:llm-a" not in html[agent:]
    assert 'href="#kind-agent"' in html  # links to each list


def test_a_settings_mismatched_result_is_marked_and_never_paired(site):
    def fill(s):
        _run(s, "crafter", "crafter:random", 0.9, content_hash="aedf6b8f" * 8)
        _run(s, "crafter", "crafter:scripted", 0.5, content_hash="aedf6b8f" * 8)
        _run(s, "crafter", "vla:bc", 1.0, content_hash="97e04cf2" * 8)  # other -T options: another setting
        # two runs, two settings: nothing can be paired on t_two
        _run(s, "t_two", "crafter:random", 0.2, content_hash="a" * 64)
        _run(s, "t_two", "crafter:scripted", 0.8, content_hash="b" * 64)

    client = site(fill)
    rows = _rows(client)
    assert [rows[m]["crafter_settings_differ"] for m in ("crafter:random", "crafter:scripted", "vla:bc")] == [
        False, False, True]
    assert rows["vla:bc"]["crafter_settings"] == "v1 · 97e04cf2"
    # vla:bc's 1.0 is not paired: crafter:scripted loses only to crafter:random, vla:bc has no opponent
    assert rows["vla:bc"]["mean_win_rate"] is None and rows["vla:bc"]["rank_best"] is None
    assert (rows["crafter:random"]["mean_win_rate"], rows["crafter:scripted"]["mean_win_rate"]) == (1.0, 0.0)
    assert rows["crafter:scripted"]["win_rate_n_tasks"] == 1  # t_two paired nothing
    by_task = client.get("/api/overview?sort=task:crafter").json()["rows"]
    assert [r["model"] for r in by_task] == ["crafter:random", "crafter:scripted", "vla:bc"]  # best compared first
    assert [r["rank_best"] for r in by_task] == [1, 2, None]
    # the tie on t_two goes to the newest run's settings; the other one is the marked one
    assert (rows["crafter:random"]["t_two_settings_differ"], rows["crafter:scripted"]["t_two_settings_differ"]) == (
        True, False)
    html = client.get("/").text
    assert "other settings · v1 · 97e04cf2" in html and "at v1 · aedf6b8f" in html
    task = {r["model"]: r for r in client.get("/api/tasks/crafter/runs.json").json()["rows"]}
    assert task["vla:bc"]["rank_best"] is None and task["vla:bc"]["settings_differ"] is True
    assert not task["vla:bc"]["pareto"] and task["crafter:random"]["rank_best"] == 1


def test_a_stub_judged_run_is_marked_and_unranked(site):
    ids = {}

    def fill(s):
        ids["stub"] = _run(s, "longshot", "hf:stub-judged", 100.0, kind="llm", judge="builtin:constant")
        _run(s, "longshot", "hf:good", 50.0, kind="llm", judge="openai:gpt-4o-2024-08-06")
        _run(s, "longshot", "hf:worse", 40.0, kind="llm", judge="openai:gpt-4o-2024-08-06")

    client = site(fill)
    rows = _rows(client)
    stub = rows["hf:stub-judged"]
    assert stub["longshot_stub_judge"] is True and stub["rank_best"] is None and stub["mean_win_rate"] is None
    assert not rows["hf:good"]["longshot_stub_judge"]
    # the two real runs are paired with each other only (paired with the stub, hf:good would be 0.5)
    assert (rows["hf:good"]["mean_win_rate"], rows["hf:worse"]["mean_win_rate"]) == (1.0, 0.0)
    assert (rows["hf:good"]["win_rate_n_opponents"], rows["hf:good"]["rank_best"]) == (1, 1)
    by_task = client.get("/api/overview?sort=task:longshot").json()["rows"]
    assert [r["model"] for r in by_task][0] == "hf:good"  # the stub's 100.0 never heads the column
    assert [r["rank_best"] for r in by_task] == [1, 2, None]
    assert "stub judge" in client.get("/").text
    page = client.get(f"/runs/{ids['stub']}").text
    assert "Stub judge." in page and "never ranked" in page
    task = {r["model"]: r for r in client.get("/api/tasks/longshot/runs.json").json()["rows"]}
    assert task["hf:stub-judged"]["rank_best"] is None and task["hf:stub-judged"]["stub_judge"] is True
    assert not task["hf:stub-judged"]["pareto"] and task["hf:good"]["rank_best"] == 1


# ---- metadata from the alias cards -----------------------------------------------------------------


def test_the_size_filter_finds_smollm2_and_metadata_comes_from_the_cards(site):
    ids = {}

    def fill(s):
        ids["smol"] = _run(s, "gsm8k", "hf:smollm2-135m-instruct?max_tokens=96", 0.05, kind="llm")
        _run(s, "gsm8k", "vllm:meta-llama/Llama-3.1-8B-Instruct", 0.8, kind="llm")
        _run(s, "gsm8k", "openai:gpt-4o-2024-08-06@http://elsewhere", 0.9, kind="llm")  # another server
        _run(s, "gsm8k", "builtin:number", 0.3)

    client = site(fill)
    small = _rows(client, "?size=%3C1B")
    assert list(small) == ["hf:smollm2-135m-instruct?max_tokens=96"]
    smol = small["hf:smollm2-135m-instruct?max_tokens=96"]
    assert (smol["size"], smol["licence"], smol["organisation"]) == ("135M", "Apache-2.0", "HuggingFaceTB")
    assert list(_rows(client, "?size=1-10B")) == ["vllm:meta-llama/Llama-3.1-8B-Instruct"]
    assert set(_rows(client, "?size=unknown")) == {"openai:gpt-4o-2024-08-06@http://elsewhere", "builtin:number"}
    sizes = [r["model"] for r in client.get("/api/overview?sort=size&dir=desc").json()["rows"] if r["kind"] == "llm"]
    assert sizes[:2] == ["vllm:meta-llama/Llama-3.1-8B-Instruct", "hf:smollm2-135m-instruct?max_tokens=96"]
    html = client.get("/").text
    assert "135M" in html and "HuggingFaceTB" in html
    models = {r["spec"]: r for r in client.get("/api/models").json()["rows"]}
    assert models["hf:smollm2-135m-instruct?max_tokens=96"]["link"] == (
        "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct")
    model_id = models["hf:smollm2-135m-instruct?max_tokens=96"]["model_id"]
    page = client.get(f"/models/{model_id}").text
    for text in ("135M", "Apache-2.0", "HuggingFaceTB", 'href="https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct"',
                 "LLMs"):
        assert text in page, text


def test_card_matching_is_by_spec_never_by_name():
    assert card_for("hf:smollm2-135m-instruct").parameters == "135M"
    assert card_for("smollm2").licence == "Apache-2.0"  # the alias itself
    assert card_for("vote(hf:smollm2-135m-instruct, n=5, extract=auto)").alias == "smollm2"  # over one model
    assert card_for("vote(hf:smollm2-135m-instruct, vllm:Qwen/Qwen3-8B, n=2)") is None  # two models: neither's
    assert card_for("vllm:Qwen/Qwen2.5-VL-7B-Instruct").parameters == "8.29B"  # a variant says its own
    assert card_for("hf:my-smollm2-135m-finetune") is None and card_for("openai:gpt-4o-2024-08-06@http://x") is None
    assert card_for("((") is None
    assert ModelCard("x", link="javascript:alert(1)").safe_link == ""
    assert ModelCard("x", link="https://example.org/m").safe_link == "https://example.org/m"
