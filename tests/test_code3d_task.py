"""code3d end to end: the CLI into SQLite with a builtin model, and multi-turn refinement."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from requirements import needs

from harness.registry import model
from harness.runner import EvalConfig, evaluate
from harness.tasks.code3d.data import load_offline
from harness.tasks.code3d.executor import BpyUnavailable, bpy_python
from harness.types import Output, Request, Usage

try:
    bpy_python()
    HAVE_BPY = True
except BpyUnavailable:
    HAVE_BPY = False
pytestmark = needs(HAVE_BPY, "the Blender (bpy) venv", "tests/setup.d/50-bpy.sh builds it")

CUBE = "import bpy; bpy.ops.mesh.primitive_cube_add(size=1)"
BROKEN = "import bpy\nbpy.ops.mesh.primitive_cube_add(sizee=1)\n"


@model("code3d_test_scripted", description="test model: broken script first, the reference script on feedback")
def scripted(path: str | None, **settings: Any) -> ScriptedModel:
    return ScriptedModel(spec=f"code3d_test_scripted:{path}", mode=path or "reference")


class ScriptedModel:
    """Answers with the offline reference script of the object named in the prompt; in mode
    ``broken_first`` the first answer is an API error and only a feedback turn gets the script."""

    batch_size, concurrency, cacheable = 8, 1, False
    modalities = frozenset({"text", "image"})
    seen: list[Request] = []  # every request any instance answered (the refine task builds its own)

    def __init__(self, spec: str, mode: str) -> None:
        self.spec, self.mode = spec, mode
        self.items = load_offline()

    def reply(self, request: Request) -> str:
        ScriptedModel.seen.append(request)
        text = request.messages[-1].text_content
        item = next(i for i in self.items if i.description in text)
        if self.mode == "broken_first" and "FAILED to produce" not in text:
            return BROKEN
        return f"```python\n{item.script}```\n"

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        return [Output(text=self.reply(r), usage=Usage(calls=1)) for r in requests]


def test_cli_eval_into_sqlite_with_builtin_model(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    env = {**os.environ, "HARNESS_ARTIFACTS": str(tmp_path / "art"), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "harness.cli", "eval", "--task", "code3d", "--model", "builtin:constant"]
    cmd += ["-M", f"text={CUBE}", "-T", "size=64", "-T", "samples=2", "--limit", "2", "--db", f"sqlite:///{db}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=400, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    con = sqlite3.connect(db)
    rows = con.execute("select sample_id, scores, details, prediction, error from sample_results").fetchall()
    metrics = dict(con.execute("select name, value from metrics where breakdown_key = ''").fetchall())
    con.close()
    assert len(rows) == 2
    for sample_id, scores, details, prediction, error in rows:
        scores, details, prediction = json.loads(scores), json.loads(details), json.loads(prediction)
        assert error is None
        assert scores["executable"] == 1.0
        assert scores["n_parts"] == 1.0
        assert 0.0 < scores["chamfer"] < 2.0  # a cube is not a table/snowman/...
        assert details["status"] == "OK"
        assert len(details["renders"]) == 4 and all(Path(p).is_file() for p in details["renders"])
        assert Path(details["glb"]).is_file() and prediction["glb"] == details["glb"]
        assert f"{os.sep}{sample_id}{os.sep}round1" in details["glb"]
    assert metrics["executable"] == 1.0
    assert "chamfer_penalized" in metrics


def test_cli_is_installed_as_module() -> None:
    # the e2e test above runs `python -m harness.cli`; make sure that entry exists
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_refinement_fixes_a_broken_script_in_round_two(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path / "art"))
    spec = "code3d_test_scripted:broken_first"
    summary = evaluate(EvalConfig(
        task="code3d_refine", model=spec, sample_ids=["snowman"], db_url=f"sqlite:///{tmp_path / 'r.db'}",
        task_options={"refine_model": spec, "size": 64, "samples": 2, "rounds": 3}, progress=False,
    ))  # fmt: skip
    metrics = {m.name: m.value for m in summary.metrics if not m.breakdown_key}
    assert summary.n_errors == 0 and summary.n_unscored == 0
    assert metrics["executable_r1"] == 0.0
    assert metrics["executable_r2"] == 1.0 and metrics["executable_r3"] == 1.0
    assert metrics["rounds_used"] == 2.0
    assert metrics["chamfer_r2"] < 5e-3  # the reference script against its own reference
    assert metrics["executable"] == 1.0


def test_render_feedback_shows_the_model_its_renders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path / "art"))
    ScriptedModel.seen.clear()
    spec = "code3d_test_scripted:reference"
    summary = evaluate(EvalConfig(
        task="code3d_refine", model=spec, sample_ids=["mug"], db_url=f"sqlite:///{tmp_path / 'f.db'}",
        task_options={"refine_model": spec, "size": 64, "samples": 2, "rounds": 2, "feedback": "renders"},
        progress=False,
    ))  # fmt: skip
    metrics = {m.name: m.value for m in summary.metrics if not m.breakdown_key}
    assert metrics["rounds_used"] == 2.0 and metrics["executable_r1"] == 1.0 and metrics["executable_r2"] == 1.0
    second = ScriptedModel.seen[-1].messages[-1]
    images = [p.path for p in second.content if p.type == "image"]
    assert len(images) == 4 and all(Path(p).name.startswith("Image_0") and "round1" in p for p in images)
    assert "improved, COMPLETE script" in second.text_content


def test_bad_option_is_a_clear_error() -> None:
    from harness.registry import lookup

    with pytest.raises(ValueError, match="unknown code3d option"):
        lookup("task", "code3d").factory(colour="red")


def test_public_layout_image_to_3d_with_given_views(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.tasks.code3d.executor import BlenderPool, RenderOptions

    refs = Path(__file__).resolve().parents[1] / "tasks" / "code3d" / "references"
    data = tmp_path / "categories"
    table = data / "Table_seed0"
    (table / "images").mkdir(parents=True)
    (table / "Table_seed0.py").write_text((refs / "table.py").read_text())
    (table / "prompt_description.txt").write_text("A four-legged table.")
    (table / "prompt_instruction.txt").write_text("Build a table: top 1.2 x 0.8, four legs.")
    with BlenderPool(render=RenderOptions(size=64, samples=2)) as pool:
        views = pool.execute_sync((refs / "table.py").read_text(), tmp_path / "views")
    for png in views.renders:
        (table / "images" / Path(png).name).write_bytes(Path(png).read_bytes())
    lonely = data / "Lonely_seed0"
    lonely.mkdir()
    (lonely / "prompt_description.txt").write_text("Something with no reference at all.")
    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path / "art"))
    monkeypatch.setenv("HARNESS_BPY_PYTHON", bpy_python())  # before moving the cache dir it defaults into
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    script = (refs / "table.py").read_text()
    summary = evaluate(EvalConfig(
        task="code3d_image", model="builtin:constant", model_settings={"text": script},
        db_url=f"sqlite:///{tmp_path / 'p.db'}", progress=False,
        task_options={"data_dir": str(data), "size": 64, "samples": 2},
    ))  # fmt: skip
    assert summary.n_new == 2 and summary.n_unscored == 1
    metrics = {m.name: m.value for m in summary.metrics if not m.breakdown_key}
    assert metrics["executable"] == 1.0
    assert metrics["chamfer"] < 5e-3
    assert metrics["img_iou_paired"] > 0.9  # same object, same views, same renderer
    con = sqlite3.connect(tmp_path / "p.db")
    unscored = dict(con.execute("select sample_id, unscored from sample_results").fetchall())
    inputs = dict(con.execute("select sample_id, input from sample_results").fetchall())
    con.close()
    assert unscored["Table_seed0"] is None
    assert "Lonely_seed0" in unscored["Lonely_seed0"] and "no reference script" in unscored["Lonely_seed0"]
    parts = json.loads(inputs["Table_seed0"])["messages"][1]["content"]
    assert parts[0]["type"] == "text" and "reference image" in parts[0]["text"]
    assert [Path(p["path"]).name for p in parts[1:]] == [Path(p).name for p in views.renders]


def test_embedding_similarity_with_a_local_encoder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    from transformers import Dinov2Config, Dinov2Model

    torch.manual_seed(0)
    enc_dir = tmp_path / "dino"
    Dinov2Model(Dinov2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                             image_size=56, patch_size=14)).save_pretrained(enc_dir)  # fmt: skip
    (enc_dir / "preprocessor_config.json").write_text(json.dumps({"size": {"height": 56, "width": 56}}))
    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path / "art"))
    refs = Path(__file__).resolve().parents[1] / "tasks" / "code3d" / "references"
    summary = evaluate(EvalConfig(
        task="code3d", model="builtin:constant", model_settings={"text": (refs / "table.py").read_text()},
        sample_ids=["table", "snowman"], db_url=f"sqlite:///{tmp_path / 'e.db'}", progress=False,
        task_options={"size": 64, "samples": 2, "image_encoder": str(enc_dir)},
    ))  # fmt: skip
    assert summary.n_errors == 0
    con = sqlite3.connect(tmp_path / "e.db")
    scores = {sid: json.loads(s) for sid, s in con.execute("select sample_id, scores from sample_results")}
    con.close()
    # the table script against the table reference renders the same views: cosine ~1
    assert scores["table"]["img_emb_paired"] == pytest.approx(1.0, abs=1e-3)
    assert scores["snowman"]["img_emb_paired"] < scores["table"]["img_emb_paired"]
    assert "img_emb_matched_penalized" in {m.name for m in summary.metrics}


def test_run_command_reports_status_and_failure_kind(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from harness.cli import app

    script = tmp_path / "reply.txt"
    script.write_text("```python\nimport bpy\nbpy.ops.mesh.primitive_cube_add(sizee=2)\n```\n")
    result = CliRunner().invoke(app, ["code3d", "run", str(script), "--out", str(tmp_path / "out"), "--size", "64",
                                      "--samples", "1"])  # fmt: skip
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert report["status"] == "ERR_EXEC" and report["failure"] == "api_misuse"
    assert (tmp_path / "out" / "model_script.py").read_text().startswith("import bpy")
