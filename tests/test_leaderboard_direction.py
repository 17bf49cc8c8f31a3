"""Numbers people can trust: declared metric directions and scales from task to page, the overview's
mean win rate, unique model names, and CIs that do not depend on row order or engine.

Hand-made rows use metric names on purpose that a name heuristic would misread (a higher-is-better
``loss``-free ``score`` declared lower, an undeclared ``loss``), so only the declarations decide."""

from __future__ import annotations

import json
import random
import re

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import inspect, select, text

from harness.aggregate import aggregate, default_aggregate
from harness.leaderboard.app import create_app
from harness.leaderboard.names import unique_labels
from harness.leaderboard.ranking import Scored, metric_info
from harness.leaderboard.winrate import mean_win_rates
from harness.registry import entries
from harness.runner import EvalConfig, Runner
from harness.store import ops
from harness.store.db import current_revision, make_engine, open_db, upgrade
from harness.store.schema import MetricRow, RunRow, TaskRow, utcnow
from harness.task import SampleRecord, Task
from harness.types import Metric, higher

DIRECTIONS = {"higher", "lower", None}
SCALES = {"fraction", "percent", "raw"}


# ---- declarations --------------------------------------------------------------------------------


def _build(entry, tmp_path):
    """A registered task with default options; tasks that need a file get a one-line one."""
    if entry.argument:  # a parametric task: one of its tasks (lm-eval's, a local YAML task of the tests)
        from pathlib import Path

        from harness.registry import lookup

        root = Path(__file__).resolve().parent
        assert entry.name == "lmeval", entry.name
        return lookup("task", "lmeval:harness_parity_mc").factory(include_path=str(root / "data" / "lmeval"))
    try:
        return entry.factory()
    except Exception:
        if entry.name == "nvs_folder":  # a scene folder: the family's toy writer makes a small one
            from harness.tasks.nvs.gs_toy import write_toy_scene

            write_toy_scene(tmp_path / "scene")
            return entry.factory(path=str(tmp_path / "scene"))
        if entry.name != "qa":
            raise
        path = tmp_path / "qa.jsonl"
        path.write_text(json.dumps({"input": "2+2?", "target": "4"}) + "\n")
        return entry.factory(path=str(path))


def test_every_registered_task_declares_its_primary_metric(tmp_path):
    names = []
    for entry in entries("task"):
        if not entry.factory.__module__.startswith("harness."):
            continue  # registered by a test module in this process (e.g. a toy returning None)
        t = _build(entry, tmp_path)
        names.append(entry.name)
        assert t.primary_metric in t.metrics, f"{entry.name}: primary metric {t.primary_metric!r} not declared"
        assert t.metrics[t.primary_metric].direction in ("higher", "lower"), entry.name  # the headline is ranked
        for name, info in t.metrics.items():
            assert info.direction in DIRECTIONS and info.scale in SCALES, (entry.name, name, info)
    assert {"gsm8k", "longshot", "methods_cluster_iris", "dsgg", "code3d", "alignment_refusal"} <= set(names)


def test_declared_directions_and_scales_read_right():
    from harness.registry import lookup

    def info(task, metric):
        return lookup("task", task).factory().metrics[metric]

    assert (info("methods_cluster_iris", "objective").direction, info("methods_cluster_iris", "ari").direction) == (
        "lower", "higher")
    assert info("longshot", "overall").scale == "percent"  # LongShOT reports 0-100
    assert info("gsm8k", "exact_match_flexible").scale == "fraction"
    assert info("code3d", "n_floating").direction == "lower" and info("code3d", "n_parts").direction is None
    assert info("alignment_refusal", "over_refusal").direction == "lower"


def test_tiny_runs_store_their_declarations_and_emit_only_declared_metrics(tmp_path):
    qa = tmp_path / "qa.jsonl"
    qa.write_text("".join(json.dumps({"input": f"say {i}", "target": str(i)}) + "\n" for i in range(4)))
    sessions = open_db(f"sqlite:///{tmp_path / 'tiny.db'}")
    runs = [("gsm8k", "builtin:number", {}, 6), ("qa", "builtin:echo", {"path": str(qa)}, None),
            ("methods_cluster_iris", "kmeans:lloyd", {}, None)]
    for task, model, options, limit in runs:
        Runner(EvalConfig(task=task, model=model, task_options=options, limit=limit, progress=False),
               session_factory=sessions).run()
    with sessions() as s:
        for task, *_ in runs:
            row = s.scalar(select(TaskRow).where(TaskRow.name == task))
            assert row.metrics and row.primary_metric in row.metrics, task
            emitted = s.scalars(select(MetricRow.name).join(RunRow, RunRow.id == MetricRow.run_id)
                                .where(RunRow.task_id == row.id, MetricRow.breakdown_key == "")).all()
            assert emitted, task
            undeclared = sorted({n for n in emitted if metric_info(row.metrics, n) is None})
            assert not undeclared, (task, undeclared)
        iris = s.scalar(select(TaskRow).where(TaskRow.name == "methods_cluster_iris"))
        assert iris.metrics["objective"]["direction"] == "lower"
    sessions.kw["bind"].dispose()
    app = create_app(f"sqlite:///{tmp_path / 'tiny.db'}", cache_seconds=0.0)
    with TestClient(app) as client:
        page = client.get("/tasks/methods_cluster_iris").text
        assert "objective (higher is better)" not in page and "higher is better" not in page.split("<section")[0]
        assert '<span class="direction">lower is better</span>' in page
    app.state.sessions.kw["bind"].dispose()


def test_migration_0005_adds_and_drops_task_metrics(db_url):
    from alembic import command

    from harness.store.db import alembic_config

    engine = make_engine(db_url)
    upgrade(engine, "0004")
    assert "metrics" not in {c["name"] for c in inspect(engine).get_columns("tasks")}
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO tasks (name, version, content_hash, family, description, modalities, "
                          "primary_metric, created_at) VALUES ('old', '1', 'h', '', '', '[]', 'accuracy', "
                          "CURRENT_TIMESTAMP)"))
    assert upgrade(engine, "0005") == "0005"
    assert "metrics" in {c["name"] for c in inspect(engine).get_columns("tasks")}
    upgrade(engine)  # later migrations, if any, before the harness opens it
    engine.dispose()
    sessions = open_db(db_url, auto_create=False)
    with sessions.begin() as s:
        old = s.scalar(select(TaskRow).where(TaskRow.name == "old"))
        assert old.metrics == {}  # an old row declares nothing: its metrics are never ranked
        # the first run that knows the declarations fills them in
        ops.get_or_create_task(s, name="old", version="1", content_hash="h", metrics={"accuracy": higher().to_dict()})
    with sessions() as s:
        assert s.scalar(select(TaskRow.metrics).where(TaskRow.name == "old"))["accuracy"]["direction"] == "higher"
    sessions.kw["bind"].dispose()
    engine = make_engine(db_url)
    command.downgrade(alembic_config(engine), "0004")
    assert current_revision(engine) == "0004"
    assert "metrics" not in {c["name"] for c in inspect(engine).get_columns("tasks")}
    engine.dispose()


# ---- hand-made leaderboard -----------------------------------------------------------------------

FRACTION_UP = {"score": {"direction": "higher", "scale": "fraction", "display": "score"}}
PERCENT_UP = {"score": {"direction": "higher", "scale": "percent", "display": "score (%)"}}
RAW_DOWN = {"score": {"direction": "lower", "scale": "raw", "display": "error-ish score"}}

# task -> (declarations, primary metric, {model: value}); m3 skipped t_percent
TABLE = {
    "t_fraction": (FRACTION_UP, "score", {"m1": 0.9, "m2": 0.5, "m3": 0.1}),
    "t_percent": (PERCENT_UP, "score", {"m1": 10.0, "m2": 90.0}),
    "t_lower": (RAW_DOWN, "score", {"m1": 5.0, "m2": 3.0, "m3": 1.0}),
    "t_unknown": ({}, "loss", {"m1": 100.0, "m2": 0.0, "m3": 0.5}),  # "loss" declared by nobody
}
# mean win rates by hand: per task, share of opponents beaten (ties half), averaged over the model's tasks
EXPECTED_WIN = {"m1": (1.0 + 0.0 + 0.0) / 3, "m2": (0.5 + 1.0 + 0.5) / 3, "m3": (0.0 + 1.0) / 2}
SPECS = {"m1": ("builtin:constant?text=A", "builtin:constant"), "m2": ("builtin:constant?text=B", "builtin:constant"),
         "m3": ("htaf:mlp?hidden=8", "htaf:mlp")}


def _fill(url: str) -> None:
    sessions = open_db(url)
    with sessions.begin() as s:
        for tname, (decl, metric, values) in TABLE.items():
            task = ops.get_or_create_task(s, name=tname, version="1", content_hash="h", family="hand",
                                          description="", modalities=["text"], primary_metric=metric, metrics=decl)
            for m, value in values.items():
                spec, display = SPECS[m]
                # one declared kind: the three are ranked against each other (kinds are never mixed)
                model = ops.get_or_create_model(s, spec, backend=spec.split(":")[0], display_name=display,
                                                info={"kind": "method"})
                run = RunRow(name=f"{tname}-{m}", task_id=task.id, model_id=model.id, config={}, config_hash="c",
                             status="finished", n_samples=200, n_done=200, finished_at=utcnow())
                s.add(run)
                s.flush()
                ops.replace_metrics(s, run.id, [Metric(metric, value, value, value, 200),
                                                Metric("cost_per_sample", 0.01, n=200)])
        # a second htaf:mlp spec, on no task of its own: it still makes the name ambiguous
        ops.get_or_create_model(s, "htaf:mlp?hidden=16", backend="htaf", display_name="htaf:mlp", info={})
    sessions.kw["bind"].dispose()


@pytest.fixture
def hand(db_url):
    _fill(db_url)
    app = create_app(db_url, cache_seconds=0.0)
    with TestClient(app) as client:
        yield client, app
    app.state.sessions.kw["bind"].dispose()


def _label(m: str) -> str:
    return {"m1": "builtin:constant (text=A)", "m2": "builtin:constant (text=B)", "m3": "htaf:mlp (hidden=8)"}[m]


def test_overview_mean_win_rate_over_shared_tasks(hand):
    client, _ = hand
    data = client.get("/api/overview").json()
    assert "average" not in data["columns"]
    rows = {r["model"]: r for r in data["rows"]}
    assert set(rows) == {_label(m) for m in SPECS}
    for m, expected in EXPECTED_WIN.items():
        row = rows[_label(m)]
        assert row["mean_win_rate"] == pytest.approx(expected), m
        # exact scores (zero-width CIs): the bootstrap interval is the point
        assert row["mean_win_rate_ci_low"] == pytest.approx(expected) == pytest.approx(row["mean_win_rate_ci_high"])
    # the model that skipped a task is still summarised, over the tasks it ran; the unknown task counts for none
    assert (rows[_label("m3")]["win_rate_n_tasks"], rows[_label("m1")]["win_rate_n_tasks"]) == (2, 3)
    order = [r["model"] for r in data["rows"]]
    assert order == [_label("m2"), _label("m3"), _label("m1")]
    assert (rows[_label("m2")]["rank_best"], rows[_label("m1")]["rank_worst"]) == (1, 3)
    html = client.get("/").text
    assert "Mean win rate" in html and 'id="win-rate-method"' in html and "HELM" in html
    assert "Not counted (no declared direction): t_unknown" in html
    # the overview and /tasks list the same tasks
    tasks = {r["task"] for r in client.get("/api/tasks").json()["rows"]}
    overview_tasks = {c[: -len("_run_id")] for c in data["columns"] if c.endswith("_run_id")}
    assert tasks == overview_tasks == set(TABLE)
    dirs = {r["task"]: r["direction"] for r in client.get("/api/tasks").json()["rows"]}
    assert dirs == {"t_fraction": "higher", "t_percent": "higher", "t_lower": "lower", "t_unknown": None}


def test_ranks_follow_the_declared_direction_and_unknown_is_never_ranked(hand):
    client, _ = hand
    lower = {r["model"]: r for r in client.get("/api/overview?sort=task:t_lower").json()["rows"]}
    assert lower[_label("m3")]["rank_best"] == 1 and lower[_label("m1")]["rank_best"] == 3  # 1.0 beats 5.0
    first = client.get("/api/overview?sort=task:t_lower").json()["rows"][0]["model"]
    assert first == _label("m3")  # best first: ascending for a lower-is-better task
    unknown = client.get("/api/overview?sort=task:t_unknown").json()["rows"]
    assert [r["rank_best"] for r in unknown] == [None] * 3 and {r["t_unknown"] for r in unknown} == {100.0, 0.0, 0.5}
    runs = client.get("/api/tasks/t_unknown/runs.json").json()["rows"]
    assert all(r["rank_best"] is None and not r["pareto"] for r in runs)
    page = client.get("/tasks/t_unknown").text
    assert "no declared direction: shown, not ranked" in page and "on front" not in page
    assert "higher is better" not in page.split("<section")[0]
    assert "(no declared direction: no front)" in page
    page = client.get("/tasks/t_lower").text
    assert '<span class="direction">lower is better</span>' in page
    ranks = {r["model"]: r["rank_best"] for r in client.get("/api/tasks/t_lower/runs.json").json()["rows"]}
    assert ranks == {_label("m3"): 1, _label("m2"): 2, _label("m1"): 3}


def test_chart_axes_follow_the_declared_scale(hand):
    client, _ = hand

    def scores_chart(task: str) -> dict:
        html = client.get(f"/tasks/{task}").text
        figs = dict(re.findall(r'<script type="application/json" id="(chart-[a-z]+)-data">(.*?)</script>', html, re.S))
        return json.loads(figs["chart-scores"])

    fraction, percent, raw = scores_chart("t_fraction"), scores_chart("t_percent"), scores_chart("t_lower")
    assert fraction["layout"]["xaxis"]["range"][1] == pytest.approx(1.02)
    assert percent["layout"]["xaxis"]["range"][1] == pytest.approx(102.0)
    assert "range" not in raw["layout"]["xaxis"] and "lower is better" in raw["layout"]["xaxis"]["title"]["text"]
    assert raw["data"][0]["y"][-1].startswith(_label("m3"))  # plotly's last category is the top row: the best


def test_display_names_are_unique_everywhere(hand):
    client, app = hand
    models = [r["model"] for r in client.get("/api/models").json()["rows"]]
    assert len(models) == len(set(models)) == 4
    assert {"builtin:constant (text=A)", "builtin:constant (text=B)", "htaf:mlp (hidden=8)",
            "htaf:mlp (hidden=16)"} == set(models)
    from harness.leaderboard.arena.battles import load_candidates

    with app.state.sessions() as s:
        candidates = load_candidates(s)
    # two constant models on t_percent: two rated models, not one merged "builtin:constant"
    assert set(candidates["t_percent"]) == {_label("m1"), _label("m2")}
    model_id = client.get("/api/models").json()["rows"][0]["model_id"]
    assert "<h1>builtin:constant (text=" in client.get(f"/models/{model_id}").text


def test_unique_labels_fall_back_to_the_id():
    labels = unique_labels([(1, "x", "x?a=1"), (2, "x", "x?a=2"), (3, "solo", "hf:org/solo"), (4, "x (a=1)", "y"),
                            (5, "", "z")])
    assert labels[3] == "solo" and labels[5] == "z" and labels[2] == "x (a=2)"
    assert labels[1] != labels[4] and len(set(labels.values())) == 5


def test_win_rate_counts_ties_half_and_skips_undirected_tasks():
    cells = {1: {"a": Scored(1.0, None, None), "b": Scored(0.0, None, None)},
             2: {"a": Scored(1.0, None, None), "b": Scored(5.0, None, None)},
             3: {"b": Scored(9.0, None, None)}}
    wins = mean_win_rates(cells, {"a": "higher", "b": None})
    assert wins[1].value == wins[2].value == 0.5 and wins[3].value is None and wins[1].n_opponents == 1
    # noisy scores: the interval is seeded and contains the point estimate
    noisy = {1: {"a": Scored(0.6, 0.5, 0.7)}, 2: {"a": Scored(0.55, 0.45, 0.65)}}
    w1, w2 = mean_win_rates(noisy, {"a": "higher"}), mean_win_rates(noisy, {"a": "higher"})
    assert w1[1].value == 1.0 and w1[1].ci_low < 1.0 and (w1[1].ci_low, w1[1].ci_high) == (w2[1].ci_low, w2[1].ci_high)


# ---- CIs independent of order and engine --------------------------------------------------------

IDS = ["a", "B", "_x", "10", "9", "Z-1", "z_2", "ä", "0"] + [f"s{i}" for i in range(31)]


def _records(seed: int = 3) -> list[SampleRecord]:
    rng = random.Random(seed)
    out = []
    for sid in IDS:
        for epoch in range(2):
            out.append(SampleRecord(sid, epoch, {"acc": float(rng.random() < 0.6), "f": rng.random()}, None, None,
                                    {"kind": rng.choice("pq")}, cost=rng.random() / 100))
    return out


def _as_tuples(metrics: list[Metric]) -> list[tuple]:
    return sorted((m.name, m.breakdown_key, m.breakdown_value, m.value, m.ci_low, m.ci_high, m.n) for m in metrics)


def test_bootstrap_ci_does_not_depend_on_record_order():
    task = Task(version="1", load=list, score=lambda *a: None, breakdowns=("kind",))  # type: ignore[arg-type,return-value]
    records = _records()
    shuffled = list(records)
    random.Random(7).shuffle(shuffled)
    assert _as_tuples(default_aggregate(task, records)) == _as_tuples(default_aggregate(task, shuffled))
    assert _as_tuples(aggregate(task, records)) == _as_tuples(aggregate(task, shuffled))
    # a task's own aggregate, resampling in the order it is given, is fed the same order too
    from harness.stats import mean_ci

    def own(recs: list[SampleRecord]) -> list[Metric]:
        est = mean_ci([r.scores["f"] for r in recs])
        return [Metric("own", est.value, est.ci_low, est.ci_high, est.n)]

    custom = Task(version="1", load=list, score=lambda *a: None, aggregate=own)  # type: ignore[arg-type,return-value]
    assert _as_tuples(aggregate(custom, records)) == _as_tuples(aggregate(custom, shuffled))


def test_sqlite_and_postgres_give_the_same_bounds(tmp_path, pg_url):
    task = Task(version="1", load=list, score=lambda *a: None, breakdowns=("kind",))  # type: ignore[arg-type,return-value]
    results = []
    for url, order_seed in ((f"sqlite:///{tmp_path / 'a.db'}", 1), (pg_url, 2)):
        sessions = open_db(url)
        records = _records()
        random.Random(order_seed).shuffle(records)  # written in a different order on each engine
        with sessions.begin() as s:
            t = ops.get_or_create_task(s, name="t", version="1", content_hash="h")
            m = ops.get_or_create_model(s, "builtin:echo")
            run = RunRow(name="r", task_id=t.id, model_id=m.id, config={}, config_hash="c")
            s.add(run)
            s.flush()
            ops.write_samples(s, [{"run_id": run.id, "sample_id": r.sample_id, "epoch": r.epoch, "scores": r.scores,
                                   "input": {"metadata": r.metadata}, "cost": r.cost, "created_at": utcnow()}
                                  for r in records])
            run_id = run.id
        with sessions() as s:
            results.append(_as_tuples(aggregate(task, ops.load_records(s, run_id))))
        sessions.kw["bind"].dispose()
    assert results[0] == results[1]


# ---- push carries the declarations --------------------------------------------------------------


def test_push_carries_task_declarations(tmp_path, db_url):
    from harness.leaderboard.push import push_run
    from harness.leaderboard.tokens import create_token

    src_url = f"sqlite:///{tmp_path / 'local.db'}"
    src = open_db(src_url)
    summary = Runner(EvalConfig(task="gsm8k", model="builtin:number", limit=3, progress=False),
                     session_factory=src).run()
    app = create_app(db_url, cache_seconds=0.0)
    with TestClient(app) as client:
        token = create_token(app.state.sessions, "ci")
        with src() as s:
            name = s.get(RunRow, summary.run_id).name
        push_run(src, name, "http://testserver", token, client=client)
        with app.state.sessions() as d:
            stored = d.scalar(select(TaskRow.metrics).where(TaskRow.name == "gsm8k"))
        assert stored["exact_match_flexible"] == {"direction": "higher", "scale": "fraction",
                                                  "display": "exact match (lm-eval flexible-extract)"}
        # a declaration outside the vocabulary is refused, not stored
        from harness.leaderboard.ingest import PushIn

        with pytest.raises(ValueError):
            PushIn.model_validate({"task": {"name": "x", "version": "1", "content_hash": "h",
                                            "metrics": {"m": {"direction": "sideways"}}},
                                   "model": {"spec": "s"}, "run": {"name": "r"}})
    app.state.sessions.kw["bind"].dispose()
    src.kw["bind"].dispose()


def test_compare_colours_an_improvement_by_the_declared_direction(db_url):
    sessions = open_db(db_url)
    ids = []
    with sessions.begin() as s:
        task = ops.get_or_create_task(s, name="t_cmp", version="1", content_hash="h", primary_metric="err",
                                      metrics={"err": {"direction": "lower", "scale": "raw", "display": "err"},
                                               "n_words": {"direction": None, "scale": "raw", "display": ""}})
        for spec, base in (("builtin:echo", 5.0), ("builtin:number", 1.0)):  # b has the smaller error everywhere
            model = ops.get_or_create_model(s, spec, backend="builtin", display_name=spec)
            run = RunRow(name=f"cmp-{spec}", task_id=task.id, model_id=model.id, config={}, config_hash="c",
                         status="finished")
            s.add(run)
            s.flush()
            ops.write_samples(s, [{"run_id": run.id, "sample_id": f"s{i}", "epoch": 0, "created_at": utcnow(),
                                   "scores": {"err": base + i % 3, "n_words": base * (i % 2)}} for i in range(30)])
            ops.replace_metrics(s, run.id, [Metric("err", base + 1, n=30)])
            ids.append(run.id)
    sessions.kw["bind"].dispose()
    app = create_app(db_url, cache_seconds=0.0)
    with TestClient(app) as client:
        html = client.get(f"/compare?a={ids[0]}&b={ids[1]}").text
    app.state.sessions.kw["bind"].dispose()
    row = re.search(r"<tr><td>err</td>.*?</tr>", html, re.S).group(0)
    assert 'class="num good"' in row and "lower is better" in row  # -4 is an improvement of a lower-is-better metric
    row = re.search(r"<tr><td>n_words</td>.*?</tr>", html, re.S).group(0)
    assert 'class="num good"' not in row and 'class="num bad"' not in row  # no direction: no colour
