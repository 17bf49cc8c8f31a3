"""The plotllm: backend on a tiny random 3D-PLOT-LLM folder written by tests/plotllm_tiny.py: the part-token
sequence against a literal recomputation from the weights, one part's points and features reaching
the model, the pack's features against the Point-BERT fallback, the reply keeping <part_k>, strict
loading and one-line refusals, a missing pack as that sample's error, and ``harness eval`` on the fixture."""

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
from harness.store.schema import SampleResultRow
from harness.tasks.partverse.fixture import ensure_fixture
from harness.tasks.partverse.pointllm_cloud import pc_norm
from harness.types import GenerationConfig, Message, Output, Part, Request
from tests.plotllm_tiny import build_tiny_plotllm
from tests.pointllm_tiny import build_tiny_pointllm, cloud_of, copy_folder, edit_weights

os.environ.setdefault("OMP_NUM_THREADS", "1")
K, PATCHES = 16, 512


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_plotllm(tmp_path_factory.mktemp("tiny-plotllm"))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_fixture(tmp_path_factory.mktemp("pv") / "fixture")


@pytest.fixture(scope="module")
def backend(tiny_dir: Path):
    return build_model(f"plotllm:{tiny_dir}", {})


def pack_of(data_dir: Path, name: str) -> str:
    return str(data_dir / "packs_k16" / f"fixture_{name}.pack.npz")


def ask(cloud: str | None, pack: str | None, text: str = "Describe region <part_3> and <part_7> in one short sentence.",
        **config: object) -> Request:
    options = {"format": "xyz+rgb", **({"pack": pack} if pack else {})}
    parts = ([Part("points", path=cloud, options=options)] if cloud else []) + [Part("text", text)]
    cfg = {"max_tokens": 8, "seed": 0, **config}
    return Request([Message("user", parts)], GenerationConfig(**cfg))  # type: ignore[arg-type]


def run(model, requests: list[Request]) -> list[Output]:
    return asyncio.run(model.generate(requests))


def embeddings(model, request: Request) -> tuple[torch.Tensor, int]:
    """(L, hidden) prompt embeddings and the position of <point_start>."""
    prepared = model.prepare(request)
    with torch.inference_mode():
        embeds, _ = model.prompt_embeddings(prepared.prompt, prepared.cloud, request.config.seed)
    ids = model.tokenizer(prepared.prompt).input_ids
    return embeds[0].float(), ids.index(model.tokenizer.convert_tokens_to_ids("<point_start>"))


def last_logits(model, request: Request) -> torch.Tensor:
    prepared = model.prepare(request)
    with torch.inference_mode():
        embeds, _ = model.prompt_embeddings(prepared.prompt, prepared.cloud, request.config.seed)
        return model.lm(inputs_embeds=embeds).logits[0, -1].float()


def write_pack(path: Path, base: str, **arrays: np.ndarray) -> str:
    with np.load(base) as npz:
        values = {k: npz[k] for k in npz.files}
    values.update(arrays)
    np.savez(path, **values)
    return str(path)


def block_starts(group_ids: np.ndarray, per_region: int) -> list[int]:
    """Offsets (from the cls row) of each region's <part_g> row in the released layout."""
    starts, cursor = [], 1
    for g in range(K):
        starts.append(cursor)
        cursor += per_region + int((group_ids == g).sum())
    return starts


# ---- the prompt ---------------------------------------------------------------------------------------
def test_prompt_holds_545_point_tokens_and_part_tokens_are_vocabulary_ids(backend, data_dir: Path) -> None:
    request = ask(cloud_of(data_dir, "mug"), pack_of(data_dir, "mug"))
    prepared = backend.prepare(request)
    assert backend.point_tokens.count == 1 + K * 2 + PATCHES == 545  # cls, (<part_g>, marker) x 16, patches
    ids = backend.tokenizer(prepared.prompt).input_ids
    assert ids.count(backend.tokenizer.convert_tokens_to_ids("<point_patch>")) == 545
    assert backend.part_ids == tuple(backend.tokenizer.convert_tokens_to_ids(f"<part_{g}>") for g in range(K))
    assert backend.part_ids[3] in ids and backend.part_ids[7] in ids  # the question's <part_3>, <part_7>: one id each
    out = run(backend, [request])[0]
    assert out.error is None and out.usage.input_tokens == len(ids) and 1 <= out.usage.output_tokens <= 8
    # the reply keeps the part tokens (C2S is scored on them), drops </s>
    comma = backend.tokenizer.convert_tokens_to_ids(",")
    assert backend.decode([backend.part_ids[3], comma, backend.part_ids[12], 2]) == "<part_3>,<part_12>"


# ---- the part tokens, literally -----------------------------------------------------------------------------
def test_the_part_sequence_equals_a_literal_recomputation(backend, tiny_dir: Path, data_dir: Path,
                                                          tmp_path: Path) -> None:
    from safetensors.torch import load_file

    rng = np.random.default_rng(1)
    with np.load(pack_of(data_dir, "chair")) as npz:
        groups, xyz = npz["patch_r16"].astype(np.int64), npz["patch_xyz"].astype(np.float32)
    width = backend.lm.point_config.output_dim
    patch_feat = rng.normal(size=(PATCHES, width)).astype(np.float32)
    cls_feat = rng.normal(size=width).astype(np.float32)
    edges = np.array([(u, u + 1) for u in range(0, PATCHES - 1, 3)], dtype=np.int64)  # an arbitrary patch graph
    pack = write_pack(tmp_path / "chair.pack.npz", pack_of(data_dir, "chair"), patch_feat=patch_feat,
                      cls_feat=cls_feat, patch_adj_edges=edges)
    rows, start = embeddings(backend, ask(cloud_of(data_dir, "chair"), pack))

    w = {k: v.float() for k, v in load_file(tiny_dir / "model.safetensors").items()}
    gelu = torch.nn.functional.gelu

    def proj(x: torch.Tensor) -> torch.Tensor:
        p = "model.point_proj."
        h = gelu(x @ w[p + "0.weight"].T + w[p + "0.bias"])
        h = gelu(h @ w[p + "2.weight"].T + w[p + "2.bias"])
        return h @ w[p + "4.weight"].T + w[p + "4.bias"]

    # region statistics and adjacency by hand
    stats = torch.zeros(K, 7)
    adj = torch.zeros(K, K)
    for g in range(K):
        pts = xyz[groups == g]
        stats[g, :3] = torch.from_numpy(pts.mean(0))
        stats[g, 3] = len(pts) / PATCHES
        stats[g, 4:] = torch.from_numpy(pts.max(0) - pts.min(0))
    for u, v in edges:
        if groups[u] != groups[v]:
            adj[groups[u], groups[v]] = adj[groups[v], groups[u]] = 1.0
    # MSR (stats_graph) on the per-part markers
    m = w["model.part_markers"][:K]
    m = m + w["model.marker_stats_scale"] * (gelu(stats @ w["model.marker_stats_mlp.0.weight"].T)
                                             @ w["model.marker_stats_mlp.2.weight"].T)
    g_ = "model.marker_graph_propagator."
    degree = adj.sum(1, keepdim=True).clamp(min=1.0)
    u = m @ w[g_ + "W_s.weight"].T + (adj @ (m @ w[g_ + "W_n.weight"].T)) / degree
    delta = gelu(u @ w[g_ + "mlp.0.weight"].T + w[g_ + "mlp.0.bias"]) @ w[g_ + "mlp.2.weight"].T + w[g_ + "mlp.2.bias"]
    markers = m + w["model.marker_graph_scale"] * delta

    seq = rows[start + 1:start + 1 + 545]
    assert torch.allclose(seq[0], proj(torch.from_numpy(cls_feat)), atol=1e-5)
    table = w["model.embed_tokens.weight"]
    starts = block_starts(groups, 2)
    for g in (0, 5, 15):
        at = starts[g]
        n = int((groups == g).sum())
        assert torch.equal(seq[at], table[backend.part_ids[g]])  # <part_g>: the LLM's own row for the token
        assert torch.allclose(seq[at + 1], proj(markers[g]), atol=1e-5)  # the refined marker, projected
        assert torch.allclose(seq[at + 2:at + 2 + n], proj(torch.from_numpy(patch_feat[groups == g])), atol=1e-5)
    # MSR matters: the raw marker is not what enters
    assert not torch.allclose(seq[starts[5] + 1], proj(w["model.part_markers"][5]), atol=1e-3)


def test_one_parts_features_and_points_reach_the_model(backend, data_dir: Path, tmp_path: Path) -> None:
    lamp_cloud, lamp_pack = cloud_of(data_dir, "lamp"), pack_of(data_dir, "lamp")
    with np.load(lamp_pack) as npz:
        groups, xyz = npz["patch_r16"].astype(np.int64), npz["patch_xyz"].astype(np.float32)
    base = ask(lamp_cloud, lamp_pack)
    rows, start = embeddings(backend, base)
    logits = last_logits(backend, base)
    # the fixture's packs have no features: the checkpoint's Point-BERT made them around the pack's centres;
    # a pack that carries exactly those gives the same input
    cloud = backend.prepare(base).cloud.cloud
    with torch.inference_mode():
        both = backend.lm.backbone_features(torch.from_numpy(cloud), torch.from_numpy(xyz)).float().numpy()
    with_feat = write_pack(tmp_path / "lamp.pack.npz", lamp_pack, cls_feat=both[0], patch_feat=both[1:])
    assert backend.prepare(ask(lamp_cloud, with_feat)).cloud.cloud is None  # the cloud is not even read
    same, _ = embeddings(backend, ask(lamp_cloud, with_feat))
    assert torch.allclose(same, rows, atol=1e-5)

    # one region's features changed in the pack: only that region's patch rows move, and the reply's logits
    g = 6
    starts, n = block_starts(groups, 2), int((groups == g).sum())
    feat = both[1:].copy()
    feat[groups == g] += 0.5
    moved_pack = write_pack(tmp_path / "lamp6.pack.npz", lamp_pack, cls_feat=both[0], patch_feat=feat)
    moved, _ = embeddings(backend, ask(lamp_cloud, moved_pack))
    diff = (moved - rows).abs().amax(dim=1)
    changed = diff > 1e-6
    lo, hi = start + 1 + starts[g] + 2, start + 1 + starts[g] + 2 + n
    assert changed[lo:hi].all() and not changed[:lo].any() and not changed[hi:].any()
    assert (last_logits(backend, ask(lamp_cloud, moved_pack)) - logits).abs().max() > 1e-4

    # one part's points recoloured in the cloud (same xyz): the features change, the markers and <part_g> rows
    # (which come from the pack alone) do not
    raw = np.load(lamp_cloud)
    nearest = ((pc_norm(raw.astype(np.float64))[:, None, :3] - xyz[None]) ** 2).sum(-1).argmin(1)
    raw[groups[nearest] == g, 3:] = 1.0 - raw[groups[nearest] == g, 3:]
    np.save(tmp_path / "lamp_8192.npy", raw)
    other = ask(str(tmp_path / "lamp_8192.npy"), lamp_pack)
    recoloured, _ = embeddings(backend, other)
    seq_a, seq_b = rows[start + 1:start + 546], recoloured[start + 1:start + 546]
    for h in range(K):
        assert torch.equal(seq_a[starts[h]], seq_b[starts[h]]) and torch.equal(seq_a[starts[h] + 1],
                                                                               seq_b[starts[h] + 1])
    assert (seq_a[starts[g] + 2:starts[g] + 2 + n] - seq_b[starts[g] + 2:starts[g] + 2 + n]).abs().max() > 1e-4
    assert (last_logits(backend, other) - logits).abs().max() > 1e-4
    # and the regions matter on their own: another partition of the same patches is another input
    relabelled = write_pack(tmp_path / "lamp_r.pack.npz", lamp_pack, patch_r16=((groups + 1) % K).astype(np.int32))
    assert (last_logits(backend, ask(lamp_cloud, relabelled)) - logits).abs().max() > 1e-4


def test_another_layout_shared_marker_with_region_means(tmp_path: Path, data_dir: Path) -> None:
    folder = build_tiny_plotllm(tmp_path / "shared", bcp_part_marker="shared", bcp_part_no_mean=False)
    model = build_model(f"plotllm:{folder}", {})
    assert model.point_tokens.count == 1 + K * 3 + PATCHES  # <part_g>, marker, region mean per region
    mug = ask(cloud_of(data_dir, "mug"), pack_of(data_dir, "mug"))
    rows, start = embeddings(model, mug)
    pack = model.prepare(mug).cloud
    with torch.inference_mode():
        both = model.lm.backbone_features(torch.from_numpy(pack.cloud), torch.from_numpy(pack.pack.patch_xyz))
        groups = pack.pack.group_ids
        g = 2
        at = start + 1 + block_starts(groups, 3)[g]
        mean = model.lm.model.point_proj(both[1:][torch.from_numpy(groups == g)].mean(0)).float()
    assert torch.allclose(rows[at + 2], mean, atol=1e-5)
    assert run(model, [mug])[0].error is None


def test_the_rebuilt_patch_graph_is_the_generators(data_dir: Path) -> None:
    """A pack without patch_adj_edges gets the generator's graph: sklearn's 12-NN distance graph, symmetrised,
    cut at the 75th percentile of its distances (build_patch_graph in the released pack builder)."""
    neighbors = pytest.importorskip("sklearn.neighbors")
    from harness.tasks.partverse.plotllm_pack import patch_graph_edges, region_adjacency

    with np.load(pack_of(data_dir, "table")) as npz:
        xyz, groups = npz["patch_xyz"].astype(np.float32), npz["patch_r16"].astype(np.int64)
    knn = neighbors.kneighbors_graph(xyz, n_neighbors=12, mode="distance", include_self=False)
    tau = np.percentile(knn.data, 75)
    dist = np.linalg.norm(xyz[:, None] - xyz[None], axis=-1)
    expected = (((knn + knn.T) > 0).toarray()) & (dist <= tau)
    edges = patch_graph_edges(xyz)
    got = np.zeros_like(expected)
    got[edges[:, 0], edges[:, 1]] = True
    assert (got == expected).mean() > 0.999  # float32 vs float64 distances may flip an edge at the gate
    adj = region_adjacency(groups, edges, K)
    assert np.array_equal(adj, adj.T) and not adj.diagonal().any() and adj.sum() > 0


# ---- bad input: one line ---------------------------------------------------------------------------------
def test_requests_without_a_usable_pack_fail_alone(backend, data_dir: Path, tmp_path: Path) -> None:
    empty = write_pack(tmp_path / "empty.pack.npz", pack_of(data_dir, "mug"),
                       patch_r16=np.zeros(PATCHES, dtype=np.int32))
    short = write_pack(tmp_path / "short.pack.npz", pack_of(data_dir, "mug"),
                       patch_r16=np.arange(100, dtype=np.int32) % K)
    (tmp_path / "junk.pack.npz").write_bytes(b"not a zip")
    mug = cloud_of(data_dir, "mug")
    outs = run(backend, [ask(mug, None), ask(mug, empty), ask(mug, str(tmp_path / "absent.pack.npz")),
                         ask(mug, str(tmp_path / "junk.pack.npz")), ask(mug, short), ask(mug, pack_of(data_dir, "mug")),
                         ask(None, None, text="Say something.")])
    kinds = [o.details.get("error_kind") for o in outs]
    assert kinds == ["pack_missing", "pack_invalid", "pack_missing", "pack_unreadable", "pack_invalid", None, None]
    assert all("\n" not in (o.error or "") for o in outs)
    assert "packs_dir" in (outs[0].error or "") and "hold no patch" in (outs[1].error or "")
    assert "512" in (outs[4].error or "")


def test_a_sample_without_a_pack_in_a_run_is_that_samples_error(tiny_dir: Path, data_dir: Path,
                                                                tmp_path: Path) -> None:
    rows = json.loads((data_dir / "eval_c2s.json").read_text())
    picked = [next(r for r in rows if r["object_id"] == f"fixture_{o}") for o in ("chair", "lamp", "mug")]
    (tmp_path / "eval_c2s.json").write_text(json.dumps(picked))
    packs = tmp_path / "packs"
    shutil.copytree(data_dir / "packs_k16", packs)
    (packs / "fixture_lamp.pack.npz").unlink()
    db = f"sqlite:///{tmp_path / 'r.db'}"
    summary = evaluate(EvalConfig(task="partverse_c2s", model=f"plotllm:{tiny_dir}", model_settings={"max_tokens": 6},
                                  db_url=db, progress=False,
                                  task_options={"data_dir": str(tmp_path), "packs_dir": str(packs),
                                                "points_dir": str(data_dir / "objaverse_data")}))
    assert summary.status == "finished" and summary.n_errors == 1
    with open_db(db)() as s:
        results = list(s.scalars(select(SampleResultRow)))
    failed = [r for r in results if r.error]
    assert len(results) == 3 and len(failed) == 1
    error = failed[0].error or ""
    assert failed[0].error_kind == "pack_missing" and "fixture_lamp_8192.npy" in error and "\n" not in error
    assert all(r.output_tokens >= 1 and "jaccard" in r.scores for r in results if not r.error)


# ---- strict loading ------------------------------------------------------------------------------------
def _edit_config(folder: Path, **changes: object) -> None:
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def _refusal(spec: str) -> str:
    with pytest.raises(ModelSpecError) as info:
        build_model(spec, {})
    message = str(info.value)
    assert "\n" not in message
    return message


def test_folders_that_are_not_a_3d_plot_llm_checkpoint_are_refused(tiny_dir: Path, tmp_path: Path,
                                                                   data_dir: Path) -> None:
    pointllm = build_tiny_pointllm(tmp_path / "pointllm")
    assert "a PointLLM checkpoint (use pointllm:DIR)" in _refusal(f"plotllm:{pointllm}")
    assert "no such checkpoint folder" in _refusal(f"plotllm:{tmp_path / 'nowhere'}")

    missing = copy_folder(tiny_dir, tmp_path / "missing")
    edit_weights(missing, lambda t: t.pop("model.part_markers"))
    assert "1 missing (model.part_markers)" in _refusal(f"plotllm:{missing}")
    msr = copy_folder(tiny_dir, tmp_path / "msr")
    edit_weights(msr, lambda t: t.pop("model.marker_graph_propagator.W_n.weight"))
    assert "model.marker_graph_propagator.W_n.weight" in _refusal(f"plotllm:{msr}")
    extra = copy_folder(tiny_dir, tmp_path / "extra")
    edit_weights(extra, lambda t: t.update({"model.region_graph_adapter.W_g.weight": torch.zeros(32, 7)}))
    assert "1 unexpected (model.region_graph_adapter.W_g.weight)" in _refusal(f"plotllm:{extra}")
    wrong = copy_folder(tiny_dir, tmp_path / "wrong")
    edit_weights(wrong, lambda t: t.update({"model.part_markers": torch.zeros(8, 32)}))
    assert "model.part_markers (8, 32) in the file vs (16, 32)" in _refusal(f"plotllm:{wrong}")
    # a checkpoint whose stats mode the config does not name holds weights the model does not have
    stats_only = copy_folder(tiny_dir, tmp_path / "stats_only")
    _edit_config(stats_only, bcp_marker_context_mode="stats_only")
    assert "unexpected (model.marker_graph_propagator" in _refusal(f"plotllm:{stats_only}")
    variant = copy_folder(tiny_dir, tmp_path / "variant")
    _edit_config(variant, bcp_graph_proj_d=True)
    assert "turns on bcp_graph_proj_d" in _refusal(f"plotllm:{variant}")
    stage1 = copy_folder(tiny_dir, tmp_path / "stage1")
    _edit_config(stage1, bcp_part_vocab_token=False)
    assert "Stage 1" in _refusal(f"plotllm:{stage1}")
    assert "fps_start" in str(pytest.raises(ModelSpecError, build_model, f"plotllm:{tiny_dir}", {"fps_start": "random"})
                              .value)

    # parameters no path reads may be absent (an older save of the released code)
    lean = copy_folder(tiny_dir, tmp_path / "lean")
    edit_weights(lean, lambda t: [t.pop(k) for k in ("model.vocab_stats_scale", "model.vocab_graph_scale",
                                                     "model.part_marker")])
    model = build_model(f"plotllm:{lean}", {})
    assert run(model, [ask(cloud_of(data_dir, "mug"), pack_of(data_dir, "mug"), max_tokens=2)])[0].error is None


# ---- harness eval end to end ----------------------------------------------------------------------------
def _cli(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HARNESS_CACHE_DIR": str(tmp_path), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "harness.cli", "eval", *args, "--no-progress"],
                          capture_output=True, text=True, env=env, timeout=300)


def test_harness_eval_c2s_on_the_fixture(tiny_dir: Path, data_dir: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'c2s.db'}"
    proc = _cli(["--task", "partverse_c2s", "--model", f"plotllm:{tiny_dir}", "--limit", "2",
                 "-T", f"data_dir={data_dir}", "--db", db], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open_db(db)() as s:
        results = list(s.scalars(select(SampleResultRow)))
    assert len(results) == 2 and not any(r.error for r in results)
    for r in results:
        assert r.output_tokens >= 1 and r.input_tokens > 545  # the point tokens plus the text
        assert set(r.scores) >= {"jaccard", "exact_match", "patch_iou", "point_iou"}
        assert r.input["messages"][0]["content"][0]["options"]["pack"].endswith(".pack.npz")

    bad = copy_folder(tiny_dir, tmp_path / "bad")
    edit_weights(bad, lambda t: t.pop("model.marker_stats_scale"))
    proc = _cli(["--task", "partverse_c2s", "--model", f"plotllm:{bad}", "--limit", "1", "-T", f"data_dir={data_dir}",
                 "--db", f"sqlite:///{tmp_path / 'r.db'}"], tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "1 missing (model.marker_stats_scale)" in proc.stderr and "Traceback" not in proc.stderr
