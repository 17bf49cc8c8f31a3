"""The pointllm: backend on a tiny random PointLLM folder written by tests/pointllm_tiny.py: the point
features reach the model, reproducibility and point-order independence, decoding settings and usage,
strict loading, bad clouds as per-sample errors, and ``harness eval`` runs on the fixture."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from sqlalchemy import select

from harness.modelspec import ModelSpecError, build_model
from harness.runner import EvalConfig, evaluate
from harness.store.db import open_db
from harness.store.schema import MetricRow, SampleResultRow
from harness.tasks.partverse.fixture import ensure_fixture
from harness.types import GenerationConfig, Message, Output, Part, Request
from tests.pointllm_tiny import build_tiny_pointllm, cloud_of, copy_folder, edit_weights

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_pointllm(tmp_path_factory.mktemp("tiny-pointllm"))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_fixture(tmp_path_factory.mktemp("pv") / "fixture")


@pytest.fixture(scope="module")
def backend(tiny_dir: Path):
    return build_model(f"pointllm:{tiny_dir}", {})


def ask(cloud: str | None, text: str = "Caption this 3D model in detail.", **config: object) -> Request:
    parts = ([Part("points", path=cloud, options={"format": "xyz+rgb"})] if cloud else []) + [Part("text", text)]
    cfg = {"max_tokens": 12, "seed": 0, **config}
    return Request([Message("user", parts)], GenerationConfig(**cfg))  # type: ignore[arg-type]


def run(model, requests: list[Request]) -> list[Output]:
    return asyncio.run(model.generate(requests))


def last_logits(model, request: Request, cloud: np.ndarray | None = None) -> torch.Tensor:
    prepared = model.prepare(request)
    with torch.inference_mode():
        embeds, _ = model.prompt_embeddings(prepared.prompt, prepared.cloud if cloud is None else cloud,
                                            request.config.seed)
        return model.lm(inputs_embeds=embeds).logits[0, -1].float()


# ---- the point features enter the model ---------------------------------------------------------------
def test_the_cloud_changes_the_logits_and_replaces_the_patch_embeddings(backend, data_dir: Path) -> None:
    chair = last_logits(backend, ask(cloud_of(data_dir, "chair")))
    lamp = last_logits(backend, ask(cloud_of(data_dir, "lamp")))
    assert (chair - lamp).abs().max() > 1e-3
    # the patch token's own embedding row never reaches the LLM: the features stand in its place
    patch_id = backend.tokenizer.convert_tokens_to_ids("<point_patch>")
    table = backend.lm.get_input_embeddings().weight
    saved = table[patch_id].clone()
    try:
        with torch.no_grad():
            table[patch_id] += 5.0
        assert torch.allclose(last_logits(backend, ask(cloud_of(data_dir, "chair"))), chair, atol=1e-5)
    finally:
        with torch.no_grad():
            table[patch_id] = saved
    # the colours are read too (use_color): the same xyz in other colours is another input
    prepared = backend.prepare(ask(cloud_of(data_dir, "chair")))
    recoloured = prepared.cloud.copy()
    recoloured[:, 3:] = 1.0 - recoloured[:, 3:]
    assert (last_logits(backend, ask(cloud_of(data_dir, "chair")), recoloured) - chair).abs().max() > 1e-3


def test_prompt_tokens_and_usage(backend, data_dir: Path) -> None:
    request = ask(cloud_of(data_dir, "mug"), max_tokens=5)
    prepared = backend.prepare(request)
    n_points = backend.lm.point_config.token_len
    assert n_points == 17 and prepared.prompt.count("<point_patch>") == n_points
    ids = backend.tokenizer(prepared.prompt).input_ids
    assert ids[0] == backend.tokenizer.bos_token_id  # Llama's tokenizer puts <s> in front
    assert ids.count(backend.tokenizer.convert_tokens_to_ids("<point_patch>")) == n_points
    out = run(backend, [request])[0]
    assert out.error is None and out.usage.calls == 1
    assert out.usage.input_tokens == len(ids) and 1 <= out.usage.output_tokens <= 5
    assert out.text == out.text.strip()


# ---- reproducibility, point order, decoding settings ----------------------------------------------------
def test_fixed_seed_reproduces_and_the_seed_moves_the_fps_start(backend, data_dir: Path) -> None:
    chair = cloud_of(data_dir, "chair")
    a, b = run(backend, [ask(chair, seed=4), ask(chair, seed=4)])
    assert a.error is None and a.text == b.text
    assert torch.equal(last_logits(backend, ask(chair, seed=4)), last_logits(backend, ask(chair, seed=4)))
    starts = {int(backend.fps_start_index(8192, s)) for s in range(5)}
    assert len(starts) == 5  # drawn per seed, as the reference draws it per call
    assert (last_logits(backend, ask(chair, seed=1)) - last_logits(backend, ask(chair, seed=2))).abs().max() > 1e-4


def test_a_permuted_cloud_gives_the_same_reply_with_fps_start_farthest(tiny_dir: Path, data_dir: Path,
                                                                        tmp_path: Path) -> None:
    model = build_model(f"pointllm:{tiny_dir}", {"fps_start": "farthest"})
    assert "fps_start=farthest" in model.spec
    original = np.load(cloud_of(data_dir, "table"))
    permuted = tmp_path / "table_8192.npy"
    np.save(permuted, original[np.random.default_rng(0).permutation(len(original))])
    one, two = ask(cloud_of(data_dir, "table"), max_tokens=10), ask(str(permuted), max_tokens=10)
    assert torch.allclose(last_logits(model, one), last_logits(model, two), atol=1e-4)
    a, b = run(model, [one, two])
    assert a.error is None and a.text == b.text and a.usage.output_tokens == b.usage.output_tokens


def test_sampling_stop_and_context(backend, data_dir: Path) -> None:
    chair = cloud_of(data_dir, "chair")
    s1, s2, s3 = run(backend, [ask(chair, temperature=1.0, top_p=0.95, extra={"top_k": 50}, seed=s, max_tokens=16)
                               for s in (1, 1, 2)])
    assert s1.text == s2.text and s1.error is None
    greedy = run(backend, [ask(chair, max_tokens=16, seed=1)])[0]
    assert {s1.text, s3.text, greedy.text} != {greedy.text}  # sampling departs from greedy somewhere
    # a stop string cuts the reply where it first appears
    full = run(backend, [ask(chair, max_tokens=16)])[0].text
    cut_at = next(full[i:i + 2] for i in range(len(full) // 2, len(full) - 1) if full[i:i + 2].isalpha())
    stopped = run(backend, [ask(chair, max_tokens=16, stop=[cut_at])])[0]
    assert stopped.details["finish_reason"] == "stop" and stopped.text == full[: full.find(cut_at)].strip()
    # more new tokens than the context (512) leaves room for: capped there
    capped = run(backend, [ask(chair, max_tokens=2000)])[0]
    assert capped.details["max_new_tokens"] == 512 - capped.usage.input_tokens
    too_long = run(backend, [ask(chair, text="seat " * 600)])[0]
    assert too_long.error and too_long.details["error_kind"] == "context_length"
    logged = run(backend, [ask(chair, max_tokens=4, logprobs=True)])[0]
    assert logged.logprobs and all(e["logprob"] <= 0 for e in logged.logprobs)


# ---- bad input: one line, per sample ----------------------------------------------------------------------
def test_bad_clouds_and_requests_fail_alone(backend, data_dir: Path, tmp_path: Path) -> None:
    nan = np.load(cloud_of(data_dir, "lamp"))
    nan[10, 0] = np.nan
    np.save(tmp_path / "nan.npy", nan)
    np.save(tmp_path / "xyz.npy", nan[:, :3])
    image = Request([Message("user", [Part("image", path="a.png"), Part("text", "x")])], GenerationConfig(max_tokens=3))
    outs = run(backend, [ask(str(tmp_path / "nan.npy")), ask(cloud_of(data_dir, "lamp"), max_tokens=3),
                         ask(str(tmp_path / "xyz.npy")), ask(str(tmp_path / "absent.npy")), image])
    kinds = [o.details.get("error_kind") for o in outs]
    assert kinds == ["points_nonfinite", None, "points_shape", "points_missing", "input"]
    assert outs[1].error is None and outs[1].usage.output_tokens >= 1
    assert all("\n" not in (o.error or "") for o in outs)
    assert "(N, 6) xyz+rgb" in (outs[2].error or "")


def test_a_bad_npy_in_a_run_is_that_samples_error(tiny_dir: Path, data_dir: Path, tmp_path: Path) -> None:
    rows = json.loads((data_dir / "eval_c2s.json").read_text())
    picked = [next(r for r in rows if r["object_id"] == f"fixture_{o}") for o in ("chair", "lamp", "mug")]
    (tmp_path / "eval_c2s.json").write_text(json.dumps(picked))
    clouds = tmp_path / "clouds"
    shutil.copytree(data_dir / "objaverse_data", clouds)
    broken = np.load(clouds / "fixture_lamp_8192.npy")
    broken[:, 3:] *= 255  # 0..255 colours
    np.save(clouds / "fixture_lamp_8192.npy", broken)
    db = f"sqlite:///{tmp_path / 'r.db'}"
    summary = evaluate(EvalConfig(task="partverse_c2s", model=f"pointllm:{tiny_dir}", model_settings={"max_tokens": 6},
                                  db_url=db, progress=False,
                                  task_options={"data_dir": str(tmp_path), "points_dir": str(clouds)}))
    assert summary.status == "finished" and summary.n_errors == 1
    with open_db(db)() as s:
        results = list(s.scalars(select(SampleResultRow)))
    failed = [r for r in results if r.error]
    assert len(results) == 3 and len(failed) == 1
    assert failed[0].error_kind == "points_colour" and "fixture_lamp_8192.npy" in failed[0].error
    assert all(r.output_tokens >= 1 and "jaccard" in r.scores for r in results if not r.error)


# ---- strict loading ------------------------------------------------------------------------------------
def test_strict_loading_refuses_a_mismatched_checkpoint(tiny_dir: Path, tmp_path: Path) -> None:
    wider = copy_folder(tiny_dir, tmp_path / "wider")
    config = json.loads((wider / "config.json").read_text())
    config["point_backbone_config"]["projection_hidden_dim"] = [48, 80]
    (wider / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelSpecError) as info:
        build_model(f"pointllm:{wider}", {})
    message = str(info.value)
    assert "\n" not in message and "of another shape" in message and "model.point_proj.2.weight" in message

    missing = copy_folder(tiny_dir, tmp_path / "missing")
    edit_weights(missing, lambda t: t.pop("model.point_backbone.encoder.first_conv.1.running_mean"))
    with pytest.raises(ModelSpecError,
                       match=r"1 missing \(model\.point_backbone\.encoder\.first_conv\.1\.running_mean\)"):
        build_model(f"pointllm:{missing}", {})

    extra = copy_folder(tiny_dir, tmp_path / "extra")
    edit_weights(extra, lambda t: t.update({"model.point_backbone.extra.weight": torch.zeros(2)}))
    with pytest.raises(ModelSpecError, match=r"1 unexpected \(model\.point_backbone\.extra\.weight\)"):
        build_model(f"pointllm:{extra}", {})

    plain = copy_folder(tiny_dir, tmp_path / "plain")
    config = json.loads((plain / "config.json").read_text())
    del config["point_backbone"]
    (plain / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelSpecError, match="no 'point_backbone' key"):
        build_model(f"pointllm:{plain}", {})
    with pytest.raises(ModelSpecError, match="no such checkpoint folder"):
        build_model(f"pointllm:{tmp_path / 'nowhere'}", {})
    with pytest.raises(ModelSpecError, match="fps_start"):
        build_model(f"pointllm:{tiny_dir}", {"fps_start": "middle"})


def test_old_checkpoints_rotary_buffers_are_not_a_mismatch(tiny_dir: Path, tmp_path: Path, data_dir: Path) -> None:
    # transformers 4.28, which PointLLM saved with, stored each layer's rotary frequencies
    old = copy_folder(tiny_dir, tmp_path / "old")
    edit_weights(old, lambda t: t.update({f"model.layers.{i}.self_attn.rotary_emb.inv_freq": torch.ones(8)
                                           for i in range(2)}))
    model = build_model(f"pointllm:{old}", {})
    assert run(model, [ask(cloud_of(data_dir, "mug"), max_tokens=2)])[0].error is None


def test_cli_refuses_a_mismatched_checkpoint_in_one_line(tiny_dir: Path, tmp_path: Path, data_dir: Path) -> None:
    bad = copy_folder(tiny_dir, tmp_path / "bad")
    edit_weights(bad, lambda t: t.update({"model.point_proj.4.bias": torch.zeros(65)}))
    proc = _cli(["--task", "partverse_c2s", "--model", f"pointllm:{bad}", "--limit", "1", "-T", f"data_dir={data_dir}",
                 "--db", f"sqlite:///{tmp_path / 'r.db'}"], tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "model.point_proj.4.bias (65,) in the file vs (64,)" in proc.stderr
    assert "Traceback" not in proc.stderr


# ---- harness eval end to end ----------------------------------------------------------------------------
def _cli(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HARNESS_CACHE_DIR": str(tmp_path), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "harness.cli", "eval", *args, "--no-progress"],
                          capture_output=True, text=True, env=env, timeout=300)


def test_harness_eval_c2s_on_the_fixture(tiny_dir: Path, data_dir: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'c2s.db'}"
    proc = _cli(["--task", "partverse_c2s", "--model", f"pointllm:{tiny_dir}", "--limit", "2",
                 "-T", f"data_dir={data_dir}", "--db", db], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open_db(db)() as s:
        results = list(s.scalars(select(SampleResultRow)))
        metrics = {m.name: m for m in s.scalars(select(MetricRow))}
    assert len(results) == 2 and not any(r.error for r in results)
    for r in results:
        assert r.output_tokens >= 1 and r.input_tokens > 17  # 17 point tokens plus the text
        assert set(r.scores) >= {"jaccard", "exact_match"}
        assert r.input["messages"][0]["content"][0]["type"] == "points"
    assert metrics["jaccard"].n == 2
