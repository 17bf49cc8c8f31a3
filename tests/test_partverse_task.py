"""PartVerse-QA tasks: loading the generated fixture, the points settings, per-sample bad input, and
end-to-end runs into SQLite (C2S through the CLI with a scripted OpenAI-compatible server and the
rendered-view fallback; S2C with a scripted judge, unparseable replies and several sampled runs)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from harness.registry import lookup
from harness.runner import EvalConfig, evaluate
from harness.store.db import open_db
from harness.store.schema import JudgementRow, MetricRow, RunRow, SampleResultRow
from harness.tasks.partverse.fixture import OBJECTS, ensure_fixture
from harness.tasks.partverse.fixture import VERSION as FIXTURE_VERSION

pytest_plugins = ("openai_server",)  # the scripted_server fixture
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_fixture(tmp_path_factory.mktemp("pv") / "fixture")


def build(name: str, **options: object):
    return lookup("task", name).factory(**options)


def metrics(db: str, run_id: int | None = None) -> dict[tuple[str, str, str], MetricRow]:
    with open_db(db)() as s:
        rid = run_id or s.scalars(select(RunRow.id).order_by(RunRow.id.desc())).first()
        rows = s.scalars(select(MetricRow).where(MetricRow.run_id == rid)).all()
        return {(m.name, m.breakdown_key, m.breakdown_value): m for m in rows}


# ---- loading ----------------------------------------------------------------------------------------
def test_fixture_loads_in_released_schemas(data_dir: Path) -> None:
    c2s = build("partverse_c2s", data_dir=str(data_dir)).load()
    assert len(c2s) == 2 * sum(len(parts) for _, parts in OBJECTS.values())  # short + long caption per part
    assert len({s.id for s in c2s}) == len(c2s)
    first = c2s[0]
    kinds = [p.type for p in first.messages[0].content]
    assert kinds == ["points", "text"]
    assert "<point>" not in first.messages[0].text_content
    assert first.messages[0].content[0].path.endswith("fixture_chair_8192.npy")
    assert first.metadata["bcp_group_ids"] and first.metadata["caption_source"] == "short"

    s2c = build("partverse_s2c", data_dir=str(data_dir)).load()
    assert len(s2c) == len(OBJECTS) and s2c[0].target == "a flat square red seat"
    cap = build("objaverse_caption", data_dir=str(data_dir)).load()
    assert cap[0].messages[0].text_content == "Caption this 3D model in detail."
    grin = build("compat_grin", data_dir=str(data_dir)).load()
    assert grin[0].target == "This chair has a seat, a back and four legs."
    assert grin[0].metadata["parts"] == ["seat", "back", "legs"]


def test_default_is_the_generated_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    task = build("partverse_c2s")
    assert task.options["fixture"] is True and len(task.load()) == 20
    assert (tmp_path / "partverse" / f"fixture-v{FIXTURE_VERSION}" / "packs_k16" / "fixture_mug.pack.npz").exists()


def test_hub_path_through_datasets(data_dir: Path) -> None:
    # the "json" builder is datasets.load_dataset's local-file path, the same call a hub id takes
    via_hub = build("partverse_c2s", hub="json", file=str(data_dir / "eval_c2s.json"),
                    points_dir=str(data_dir / "objaverse_data")).load()
    local = build("partverse_c2s", data_dir=str(data_dir)).load()
    assert [s.id for s in via_hub] == [s.id for s in local]
    assert [s.metadata["bcp_group_ids"] for s in via_hub] == [s.metadata["bcp_group_ids"] for s in local]


@pytest.mark.parametrize(("mode", "kinds", "modalities"), [
    ("native", ["points", "text"], {"text", "points"}),
    ("image", ["image", "text"], {"text", "image"}),
    ("none", ["text"], {"text"}),
])
def test_points_settings(data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str,
                         kinds: list[str], modalities: set[str]) -> None:
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    task = build("partverse_c2s", data_dir=str(data_dir), points=mode)
    assert set(task.modalities) == modalities
    request = task.prompt(task.load()[0])
    assert [p.type for p in request.messages[0].content] == kinds
    assert request.config.temperature == 0.0  # C2S is greedy
    if mode == "image":
        from PIL import Image

        png = request.messages[0].content[0].path
        with Image.open(png) as im:
            assert im.size == (512, 512)
            colours = {c for _, c in im.getcolors(maxcolors=1 << 20)}
        assert (255, 255, 255) in colours and len(colours) > 20  # white background plus coloured points
    with pytest.raises(ValueError, match="points must be one of"):
        build("partverse_c2s", data_dir=str(data_dir), points="mesh")


def test_mesh_parts_for_mesh_capable_models(data_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "fixture_chair.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    task = build("partverse_c2s", data_dir=str(data_dir), mesh_dir=str(tmp_path))
    assert set(task.modalities) == {"text", "points", "mesh"}
    samples = task.load()
    chair = next(s for s in samples if s.metadata["object_id"] == "fixture_chair")
    request = task.prompt(chair)
    assert [p.type for p in request.messages[0].content] == ["points", "mesh", "text"]
    assert request.messages[0].content[1].path == str(tmp_path / "fixture_chair.obj")
    table = next(s for s in samples if s.metadata["object_id"] == "fixture_table")
    with pytest.raises(ValueError, match=r"mesh .*fixture_table\.glb not found"):
        task.prompt(table)
    text_only = build("partverse_c2s", data_dir=str(data_dir), mesh_dir=str(tmp_path), points="none")
    assert set(text_only.modalities) == {"text"}
    assert [p.type for p in text_only.prompt(table).messages[0].content] == ["text"]


def test_bad_rows_and_missing_clouds_are_per_sample_errors(data_dir: Path, tmp_path: Path) -> None:
    rows = json.loads((data_dir / "eval_c2s.json").read_text())
    good = rows[0]
    no_meta = {**rows[1], "meta": {"caption_source": "short"}}
    no_cloud = {**rows[2], "object_id": "missing_object"}
    bad_turns = {"object_id": "fixture_chair", "conversations": [{"from": "human", "value": "x"}], "meta": {}}
    (tmp_path / "eval_c2s.json").write_text(json.dumps([good, no_meta, no_cloud, bad_turns]))
    db = f"sqlite:///{tmp_path / 'r.db'}"
    gold = ",".join(f"<part_{g}>" for g in good["meta"]["bcp_group_ids"])
    summary = evaluate(EvalConfig(
        task="partverse_c2s", model="builtin:constant", model_settings={"text": gold}, db_url=db, progress=False,
        task_options={"data_dir": str(tmp_path), "points_dir": str(data_dir / "objaverse_data")}))
    assert summary.status == "finished" and summary.n_errors == 3
    with open_db(db)() as s:
        results = {r.sample_id: r for r in s.scalars(select(SampleResultRow))}
    errors = sorted(r.error for r in results.values() if r.error)
    assert any("meta.bcp_group_ids" in e for e in errors)
    assert any("missing_object_8192.npy not found" in e for e in errors)
    assert any("'conversations' should hold" in e for e in errors)
    scored = [r for r in results.values() if not r.error]
    assert len(scored) == 1 and scored[0].scores == {"jaccard": 1.0, "exact_match": 1.0}


# ---- end to end -----------------------------------------------------------------------------------
def test_c2s_cli_end_to_end_with_scripted_server_and_rendered_views(data_dir: Path, tmp_path: Path,
                                                                     scripted_server) -> None:
    rows = json.loads((data_dir / "eval_c2s.json").read_text())
    row_by_caption = {re.search(r'Text: "(.*)"', r["conversations"][0]["value"]).group(1): r for r in rows}
    assert len(row_by_caption) == len(rows)

    def reply(body: dict) -> str:
        text = " ".join(p.get("text", "") for m in body["messages"] for p in m["content"] if p["type"] == "text")
        row = row_by_caption[re.search(r'Text: "(.*)"', text).group(1)]
        gold = row["meta"]["bcp_group_ids"]
        if row["object_id"] == "fixture_chair":
            return ", ".join(f"<part_{g}>" for g in reversed(gold))      # exact, reordered
        if row["object_id"] == "fixture_lamp":
            return "I am not sure."                                         # no slots
        return ",".join(f"<part_{g}>" for g in gold) + ",<part_99>"         # one extra slot

    scripted_server.set_reply(reply)
    db = f"sqlite:///{tmp_path / 'c2s.db'}"
    cmd = [sys.executable, "-m", "harness.cli", "eval", "--task", "partverse_c2s", "--model", "openai:test",
           "-M", f"base_url={scripted_server.base_url}", "-T", f"data_dir={data_dir}", "-T", "points=image",
           "--db", db, "--no-progress"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HARNESS_CACHE_DIR": str(tmp_path), "COLUMNS": "200"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    bodies = scripted_server.bodies()
    assert len(bodies) == len(rows)
    image_parts = [p for p in bodies[0]["messages"][0]["content"] if p["type"] == "image_url"]
    assert image_parts and image_parts[0]["image_url"]["url"].startswith("data:image/png;base64,")

    expected_j, expected_em = [], []
    for r in rows:
        n = len(r["meta"]["bcp_group_ids"])
        if r["object_id"] == "fixture_chair":
            expected_j.append(1.0), expected_em.append(1.0)
        elif r["object_id"] == "fixture_lamp":
            expected_j.append(0.0), expected_em.append(0.0)
        else:
            expected_j.append(n / (n + 1)), expected_em.append(0.0)
    got = metrics(db)
    assert got[("jaccard", "", "")].value == pytest.approx(sum(expected_j) / len(rows))
    assert got[("exact_match", "", "")].value == pytest.approx(sum(expected_em) / len(rows))
    assert got[("jaccard", "", "")].n == len(rows)
    assert got[("jaccard", "", "")].ci_low < got[("jaccard", "", "")].value < got[("jaccard", "", "")].ci_high
    # geometric IoU over the fixture's packs: <part_99> is no region, so the extra slot costs nothing
    # there; only the lamp's empty answers score 0
    n_lamp = sum(r["object_id"] == "fixture_lamp" for r in rows)
    for name in ("patch_iou", "point_iou"):
        assert got[(name, "", "")].value == pytest.approx((len(rows) - n_lamp) / len(rows))


def test_s2c_end_to_end_with_scripted_judge(data_dir: Path, tmp_path: Path, scripted_server) -> None:
    def judge_reply(body: dict) -> str:
        text = body["messages"][0]["content"]
        text = text if isinstance(text, str) else " ".join(p.get("text", "") for p in text)
        human = re.search(r"Human-generated caption: (.*)\n", text).group(1)
        model = re.search(r"Model-generated caption: (.*)\n", text).group(1)
        if human == model:
            return "100#identical"
        if "lamp" in human or "base" in human:
            return "I cannot rate this caption."     # unparseable on every attempt
        if "tabletop" in human:
            return "Score: 40#partly matches"
        return "20#wrong colour"

    scripted_server.set_reply(judge_reply)
    db = f"sqlite:///{tmp_path / 's2c.db'}"
    summary = evaluate(EvalConfig(
        task="partverse_s2c", model="builtin:constant", model_settings={"text": "a flat square red seat"},
        judge="openai:judge", judge_settings={"base_url": scripted_server.base_url, "retry_base": 0.01},
        task_options={"data_dir": str(data_dir)}, epochs=2, db_url=db, progress=False))
    assert summary.status == "finished" and summary.n_errors == 0
    got = metrics(db)
    # judge: chair 100, table 40, mug 20; the lamp's unparseable replies are left out, never 0
    assert got[("judge_score", "", "")].value == pytest.approx((100 + 40 + 20) / 3)
    assert got[("judge_score", "", "")].n == 3
    assert got[("judge_unscored", "", "")].value == 2  # the lamp sample, in each of the 2 runs
    assert got[("bleu-1", "", "")].n == 4  # reference metrics still cover every sample
    assert got[("judge_score", "run", "0")].value == pytest.approx(160 / 3)
    assert got[("judge_score", "run", "1")].value == pytest.approx(160 / 3)
    assert got[("judge_score_run_std", "", "")].value == 0.0  # a constant model: no spread between runs
    assert got[("word_f1", "", "")].n == 4 and got[("exact_norm_match", "", "")].value == pytest.approx(0.25)
    with open_db(db)() as s:
        results = list(s.scalars(select(SampleResultRow)))
        judgements = list(s.scalars(select(JudgementRow)))
    chair = next(r for r in results if r.sample_id.startswith("fixture_chair") and r.epoch == 0)
    assert chair.scores["bleu-1"] == pytest.approx(100.0) and chair.scores["judge_score"] == 100.0
    assert chair.scores["minilm_similarity"] == pytest.approx(100.0, abs=1e-3)
    lamp = next(r for r in results if r.sample_id.startswith("fixture_lamp") and r.epoch == 0)
    assert "judge_score" not in lamp.scores and "judge_unscored" in lamp.details
    # every attempt is stored: 3 for the unparseable lamp (first try + 2 re-asks), 1 for the others;
    # judge replies are cached, so epoch 1 pays nothing new for identical prompts
    assert len(judgements) == 2 * (3 + 3 * 1)
    assert {j.judge_spec for j in judgements} == {"openai:judge"}


def test_judge_can_be_switched_off(data_dir: Path) -> None:
    task = build("partverse_s2c", data_dir=str(data_dir), judge="false")
    assert task.needs_judge is False and task.primary_metric == "bleu-1"
    task = build("partverse_s2c", data_dir=str(data_dir))
    assert task.needs_judge and task.default_judge == "openai:gpt-4o-2024-08-06"
    assert task.primary_metric == "judge_score"
