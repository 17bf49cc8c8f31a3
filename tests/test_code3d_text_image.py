"""code3d's text-image similarity (``-T text_image_encoder=DIR``) and Uni3D's text and image cosines
(``-T uni3d_text_encoder=DIR``, ``-T uni3d_image_encoder=DIR``): tiny randomly initialised SigLIP /
CLIP models saved with ``save_pretrained`` and a word-level tokenizer built offline, checked against a literal
re-computation; one-line errors for bad directories; and, with Blender, the whole task end to end."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import torch
from requirements import needs

from harness.errors import UserError
from harness.tasks.code3d.executor import BpyUnavailable, ExecResult, RenderOptions, bpy_python
from harness.tasks.code3d.model_scores import MODEL_METRIC_WORDS, ModelOptionError, ModelScorers
from harness.tasks.code3d.references import Reference
from harness.tasks.code3d.task import MODEL_KEYS, Code3DConfig, Code3DRuntime
from harness.tasks.code3d.text_image import EncoderDirError, ImageTower, TextEncoder, TextImageEncoder
from harness.types import SampleRecord

try:
    bpy_python()
    HAVE_BPY = True
except BpyUnavailable:
    HAVE_BPY = False

WORDS = "a an the of table chair lamp mug wooden round with four legs snowman bookshelf shade".split()
MAX_LEN = 16
PROMPT = "A wooden table with four legs"
# CLIP's processor layout, scaled down: resize the shortest edge to 40, centre crop 32 (the vision tower's size)
CLIP_PRE = {"size": {"shortest_edge": 40}, "crop_size": {"height": 32, "width": 32}, "do_center_crop": True,
            "image_mean": [0.48145466, 0.4578275, 0.40821073],
            "image_std": [0.26862954, 0.26130258, 0.27577711]}  # fmt: skip


def save_word_tokenizer(path: Path) -> None:
    """A lowercase word-level tokenizer (``tokenizers``), saved like a hub tokenizer."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<unk>": 1, "</s>": 2, **{w: i + 3 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", eos_token="</s>",
                            model_max_length=MAX_LEN).save_pretrained(path)  # fmt: skip


def _text_cfg() -> dict:
    return dict(vocab_size=len(WORDS) + 3, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                intermediate_size=64, max_position_embeddings=MAX_LEN, pad_token_id=0, bos_token_id=2,
                eos_token_id=2)  # fmt: skip


def _vision_cfg() -> dict:
    return dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, image_size=32,
                patch_size=8)  # fmt: skip


@pytest.fixture(scope="module")
def tiny_siglip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import SiglipConfig, SiglipModel

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("siglip")
    SiglipModel(SiglipConfig(text_config=_text_cfg(), vision_config=_vision_cfg())).save_pretrained(path)
    save_word_tokenizer(path)
    (path / "preprocessor_config.json").write_text(json.dumps(
        {"size": {"height": 32, "width": 32}, "image_mean": [0.5] * 3, "image_std": [0.5] * 3}))  # fmt: skip
    return path


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CLIP whose text and image embeddings have Uni3D's 1024 dimensions."""
    from transformers import CLIPConfig, CLIPModel

    torch.manual_seed(1)
    path = tmp_path_factory.mktemp("clip")
    cfg = CLIPConfig(text_config=_text_cfg(), vision_config=_vision_cfg(), projection_dim=1024)
    CLIPModel(cfg).save_pretrained(path)
    save_word_tokenizer(path)
    (path / "preprocessor_config.json").write_text(json.dumps(CLIP_PRE))
    return path


def _unit(x: torch.Tensor) -> np.ndarray:
    x = x.double()
    return (x / x.norm(dim=-1, keepdim=True)).numpy()


def literal_text_image(path: Path, prompt: str, views: np.ndarray) -> tuple[float, float]:
    """The reference's arithmetic written out: the prompt padded to the tokenizer's max length, the
    text tower's pooled output; each view as RGB, /255, (x - 0.5) / 0.5 (32 px: no resize), the vision
    tower's pooled output; cosine per view; mean and max."""
    from transformers import AutoTokenizer, SiglipModel

    model = SiglipModel.from_pretrained(path).eval()
    tok = AutoTokenizer.from_pretrained(path)
    enc = tok([prompt], padding="max_length", max_length=MAX_LEN, truncation=True, return_tensors="pt")
    assert enc["input_ids"].shape == (1, MAX_LEN)
    pixels = (torch.from_numpy(views[..., :3]).permute(0, 3, 1, 2).float() / 255.0 - 0.5) / 0.5
    with torch.no_grad():
        t = model.text_model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).pooler_output
        v = model.vision_model(pixel_values=pixels).pooler_output
    sims = _unit(v) @ _unit(t)[0]
    return float(sims.mean()), float(sims.max())


def test_text_image_similarity_equals_a_literal_computation(tiny_siglip: Path) -> None:
    views = np.random.default_rng(0).integers(0, 255, size=(4, 32, 32, 4), dtype=np.uint8)
    enc = TextImageEncoder(str(tiny_siglip))
    got = enc.text_similarity(PROMPT, views)
    mean, top = literal_text_image(tiny_siglip, PROMPT, views)
    assert got["text_image_sim"] == pytest.approx(mean, abs=1e-5)
    assert got["text_image_sim_max"] == pytest.approx(top, abs=1e-5)
    assert got["text_image_sim_max"] > got["text_image_sim"]  # four different views, four cosines
    other = enc.text_similarity("a snowman", views)["text_image_sim"]
    assert other != pytest.approx(got["text_image_sim"], abs=1e-4)  # the prompt is read


def _cfg(**over: object) -> Code3DConfig:
    base = dict(setting="text", data_dir=None, workers=1, render=RenderOptions(), exec_timeout=60, memory_mb=4096,
                fscore_threshold=0.05, max_tokens=4096, rounds=1, refine_model=None, feedback="traceback",
                image_input=False, prompt_type="description")  # fmt: skip
    return Code3DConfig(**{**base, **over})  # type: ignore[arg-type]


def test_scores_for_a_candidate_its_reference_and_an_image_input_run(tiny_siglip: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    cand, gold = tmp_path / "views.npy", tmp_path / "ref_views.npy"
    np.save(cand, rng.integers(0, 255, size=(4, 32, 32, 4), dtype=np.uint8))
    np.save(gold, rng.integers(0, 255, size=(4, 32, 32, 4), dtype=np.uint8))
    ref = Reference(points=None, thumbs=None, renders=[], analysis={}, views=str(gold))
    scorers = ModelScorers.load(_cfg(text_image_encoder=str(tiny_siglip)))
    values = scorers.measure(ExecResult("OK", views_npy=str(cand)), ref, PROMPT, "unused")
    assert values["text_image_sim"] == pytest.approx(
        literal_text_image(tiny_siglip, PROMPT, np.load(cand))[0], abs=1e-5
    )
    gt = scorers.reference_baseline(ref, PROMPT)["text_image_sim_gt"]
    assert gt == pytest.approx(literal_text_image(tiny_siglip, PROMPT, np.load(gold))[0], abs=1e-5)
    assert scorers.measure(ExecResult("ERR_EXEC"), ref, PROMPT, "unused") == {}  # failures: nothing (0 penalised)
    # the image-to-3D model saw no prompt: the reference scores text-image for text-to-3D only
    image_run = ModelScorers.load(_cfg(text_image_encoder=str(tiny_siglip), image_input=True, setting="image"))
    assert image_run.measure(ExecResult("OK", views_npy=str(cand)), ref, PROMPT, "unused") == {}
    assert image_run.reference_baseline(ref, PROMPT) == {}
    plain = ModelScorers.load(_cfg())  # no option: nothing loaded
    assert (plain.text_image, plain.uni3d, plain.uni3d_text) == (None, None, None)


def test_uni3d_text_cosine_is_the_description_in_the_shape_space(tiny_clip: Path, tmp_path: Path) -> None:
    from transformers import AutoTokenizer, CLIPModel

    from harness.tasks.code3d.uni3d import SIZES, Uni3D

    torch.manual_seed(0)
    ckpt = tmp_path / "model.pt"
    torch.save({"module": Uni3D(SIZES["tiny"]).state_dict()}, ckpt)
    pts = tmp_path / "points.npy"
    np.save(pts, np.random.default_rng(2).normal(size=(8192, 3)).astype(np.float32))
    scorers = ModelScorers.load(_cfg(uni3d=str(ckpt), uni3d_text_encoder=str(tiny_clip)))
    values = scorers.measure(ExecResult("OK", points=str(pts)), Reference(None, None, [], {}), PROMPT, "a round lamp")
    assert set(values) == {"uni3d_text_sim"}  # no reference points: no shape cosine
    model, tok = CLIPModel.from_pretrained(tiny_clip).eval(), AutoTokenizer.from_pretrained(tiny_clip)
    ids = tok(["a round lamp"], padding="max_length", max_length=MAX_LEN, truncation=True, return_tensors="pt")
    with torch.no_grad():
        pooled = model.text_model(**ids).pooler_output
        text = _unit(model.text_projection(pooled))[0]
    shape = scorers.uni3d.embed(np.load(pts))
    assert values["uni3d_text_sim"] == pytest.approx(float(shape @ text), abs=1e-5)


def literal_clip_image(path: Path, view: np.ndarray) -> np.ndarray:
    """One view through CLIP's image tower, written out: RGB (alpha dropped), /255, bicubic resize to
    the shortest edge (40), centre crop 32, (x - mean) / std; vision tower's pooled output, visual
    projection, unit length."""
    from transformers import CLIPModel

    model = CLIPModel.from_pretrained(path).eval()
    x = torch.from_numpy(np.ascontiguousarray(view[None, ..., :3])).permute(0, 3, 1, 2).float() / 255.0
    x = torch.nn.functional.interpolate(x, size=(40, 40), mode="bicubic", align_corners=False,
                                        antialias=True).clamp(0, 1)[:, :, 4:36, 4:36]  # fmt: skip
    mean = torch.tensor(CLIP_PRE["image_mean"]).view(1, 3, 1, 1)
    std = torch.tensor(CLIP_PRE["image_std"]).view(1, 3, 1, 1)
    with torch.no_grad():
        pooled = model.vision_model(pixel_values=(x - mean) / std).pooler_output
        return _unit(model.visual_projection(pooled))[0]


def _uni3d_ckpt(tmp_path: Path) -> Path:
    from harness.tasks.code3d.uni3d import SIZES, Uni3D

    torch.manual_seed(0)
    ckpt = tmp_path / "model.pt"
    torch.save({"module": Uni3D(SIZES["tiny"]).state_dict()}, ckpt)
    return ckpt


def test_uni3d_image_cosine_is_the_first_reference_view_in_the_shape_space(tiny_clip: Path, tmp_path: Path) -> None:
    ckpt = _uni3d_ckpt(tmp_path)
    rng = np.random.default_rng(3)
    pts, views = tmp_path / "points.npy", tmp_path / "ref_views.npy"
    np.save(pts, rng.normal(size=(8192, 3)).astype(np.float32))
    np.save(views, rng.integers(0, 255, size=(4, 48, 48, 4), dtype=np.uint8))
    ours = [str(tmp_path / n) for n in ("Image_005.png", "Image_015.png", "Image_025.png", "Image_035.png")]
    ref = Reference(points=None, thumbs=None, renders=ours, analysis={}, views=str(views))
    cfg = _cfg(setting="image", image_input=True, uni3d=str(ckpt), uni3d_image_encoder=str(tiny_clip))
    assert cfg.full_views  # the reference's full-size views are what the image tower reads
    scorers = ModelScorers.load(cfg)
    assert isinstance(scorers.uni3d_image, ImageTower)
    values = scorers.measure(ExecResult("OK", points=str(pts)), ref, PROMPT, "a round lamp")
    assert set(values) == {"uni3d_image_sim"}  # no reference points: no shape cosine; image input: no text one
    shape = scorers.uni3d.embed(np.load(pts))
    first = literal_clip_image(tiny_clip, np.load(views)[0])
    assert values["uni3d_image_sim"] == pytest.approx(float(shape @ first), abs=1e-5)
    # computed once per reference: a second candidate reuses the view's embedding
    scorers.measure(ExecResult("OK", points=str(pts)), ref, PROMPT, "a round lamp")
    assert list(scorers._view_emb) == [(str(views), 0)]
    # given views in another order: Image_005 is still the one embedded
    given = Reference(None, None, [ours[2], ours[0], ours[1], ours[3]], {}, views=str(views))
    got = scorers.measure(ExecResult("OK", points=str(pts)), given, PROMPT, "")["uni3d_image_sim"]
    assert got == pytest.approx(float(shape @ literal_clip_image(tiny_clip, np.load(views)[1])), abs=1e-5)
    assert got != pytest.approx(values["uni3d_image_sim"], abs=1e-4)
    assert scorers.measure(ExecResult("ERR_EXEC"), ref, PROMPT, "") == {}  # a failure has none (0 penalised)
    # text-to-3D: the reference scores the image cosine for image-to-3D only; the tower is not loaded
    text_cfg = _cfg(uni3d=str(ckpt), uni3d_image_encoder=str(tiny_clip))
    text_run = ModelScorers.load(text_cfg)
    assert text_run.uni3d_image is None and not text_cfg.full_views
    assert "uni3d_image_sim" not in text_run.measure(ExecResult("OK", points=str(pts)), ref, PROMPT, "")


def test_uni3d_image_cosine_is_declared_and_penalised_like_the_other_model_scores() -> None:
    from harness.task import Task

    assert "uni3d_image_sim" in MODEL_KEYS and "uni3d_image_sim" in MODEL_METRIC_WORDS
    runtime = Code3DRuntime(_cfg(setting="image", image_input=True))
    task_obj = Task(version="1", load=runtime.load, score=runtime.score)
    records = [
        SampleRecord("a", 0, {"executable": 1.0, "uni3d_image_sim": 0.5}, None, None, {}),
        SampleRecord("b", 0, {"executable": 0.0}, None, None, {}),  # failed to execute: no score
        SampleRecord("c", 0, {}, None, "model call failed", {}),  # no mesh either
    ]
    metrics = {m.name: m for m in runtime.aggregate(records, task_obj) if not m.breakdown_key}
    assert metrics["uni3d_image_sim"].value == pytest.approx(0.5)
    assert metrics["uni3d_image_sim_penalized"].value == pytest.approx(0.5 / 3)
    assert metrics["uni3d_image_sim_penalized"].n == 3


def _one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    assert isinstance(exc.value, UserError) and "\n" not in str(exc.value)
    return str(exc.value)


def test_bad_directories_are_one_line_errors(tmp_path: Path, tiny_siglip: Path, tiny_clip: Path) -> None:
    from transformers import Dinov2Config, Dinov2Model

    with pytest.raises(EncoderDirError) as e:
        TextImageEncoder(str(tmp_path / "nowhere"))
    assert "no config.json" in _one_line(e) and "text_image_encoder" in str(e.value)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    with pytest.raises(EncoderDirError) as e:
        TextImageEncoder(str(broken))
    assert "cannot load it" in _one_line(e)
    dino = tmp_path / "dino"
    Dinov2Model(Dinov2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                             patch_size=14)).save_pretrained(dino)  # fmt: skip
    with pytest.raises(EncoderDirError) as e:
        TextImageEncoder(str(dino))
    assert "not a text-image model" in _one_line(e)
    with pytest.raises(EncoderDirError) as e:
        TextEncoder(str(dino))
    assert "no text tower" in _one_line(e)
    # a CLIP whose space is not Uni3D's (SigLIP text embeddings here have 32 dimensions, Uni3D's 1024)
    from harness.tasks.code3d.uni3d import SIZES, Uni3D

    ckpt = tmp_path / "model.pt"
    torch.save(Uni3D(SIZES["tiny"]).state_dict(), ckpt)
    with pytest.raises(EncoderDirError) as e:
        ModelScorers.load(_cfg(uni3d=str(ckpt), uni3d_text_encoder=str(tiny_siglip)))
    assert "32 dimensions" in _one_line(e)
    # the image tower: not Uni3D's space (SigLIP's image embeddings: 32 dimensions), no tower at all, no Uni3D
    image = dict(setting="image", image_input=True)
    with pytest.raises(EncoderDirError) as e:
        ModelScorers.load(_cfg(**image, uni3d=str(ckpt), uni3d_image_encoder=str(tiny_siglip)))
    assert "32 dimensions" in _one_line(e) and "uni3d_image_encoder" in str(e.value)
    with pytest.raises(EncoderDirError) as e:
        ImageTower(str(dino))
    assert "no image tower" in _one_line(e)
    with pytest.raises(EncoderDirError) as e:
        ImageTower(str(tmp_path / "nowhere"))
    assert "no config.json" in _one_line(e) and "uni3d_image_encoder" in str(e.value)
    for option in ("uni3d_image_encoder", "uni3d_text_encoder"):
        with pytest.raises(ModelOptionError) as e:
            ModelScorers.load(_cfg(**image, **{option: str(tiny_clip)}))
        assert f"-T {option} needs -T uni3d=CKPT" in _one_line(e)


@needs(HAVE_BPY, "the Blender (bpy) venv", "tests/setup.d/50-bpy.sh builds it")
def test_end_to_end_model_scores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_siglip: Path,
                                 tiny_clip: Path) -> None:  # fmt: skip
    from harness.runner import EvalConfig, evaluate
    from harness.tasks.code3d.uni3d import SIZES, Uni3D

    torch.manual_seed(0)
    ckpt = tmp_path / "model.pt"
    torch.save({"module": Uni3D(SIZES["tiny"]).state_dict()}, ckpt)
    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path / "art"))
    refs = Path(__file__).resolve().parents[1] / "tasks" / "code3d" / "references"
    summary = evaluate(EvalConfig(
        task="code3d", model="builtin:constant", model_settings={"text": (refs / "table.py").read_text()},
        sample_ids=["table", "snowman"], db_url=f"sqlite:///{tmp_path / 'e.db'}", progress=False,
        task_options={"size": 64, "samples": 2, "text_image_encoder": str(tiny_siglip), "uni3d": str(ckpt),
                      "uni3d_text_encoder": str(tiny_clip)},
    ))  # fmt: skip
    assert summary.n_errors == 0
    con = sqlite3.connect(tmp_path / "e.db")
    scores = {sid: json.loads(s) for sid, s in con.execute("select sample_id, scores from sample_results")}
    con.close()
    # the table script against the table reference: the same surface samples, the same embedding
    assert scores["table"]["uni3d_shape_sim"] == pytest.approx(1.0, abs=1e-5)
    assert scores["snowman"]["uni3d_shape_sim"] < scores["table"]["uni3d_shape_sim"]
    # the same renders as the reference views: the candidate scores what the reference's GT baseline does
    assert scores["table"]["text_image_sim"] == pytest.approx(scores["table"]["text_image_sim_gt"], abs=1e-3)
    for sid in scores:
        assert {"text_image_sim", "text_image_sim_max", "uni3d_text_sim"} <= set(scores[sid])
    names = {m.name for m in summary.metrics}
    assert {"text_image_sim_penalized", "uni3d_shape_sim_penalized", "uni3d_text_sim_penalized"} <= names


@needs(HAVE_BPY, "the Blender (bpy) venv", "tests/setup.d/50-bpy.sh builds it")
def test_end_to_end_image_to_3d_uni3d_image_score(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  tiny_clip: Path) -> None:  # fmt: skip
    from harness.runner import EvalConfig, evaluate

    ckpt = _uni3d_ckpt(tmp_path)
    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path / "art"))
    refs = Path(__file__).resolve().parents[1] / "tasks" / "code3d" / "references"
    summary = evaluate(EvalConfig(
        task="code3d_image", model="builtin:constant", model_settings={"text": (refs / "table.py").read_text()},
        sample_ids=["table", "snowman"], db_url=f"sqlite:///{tmp_path / 'i.db'}", progress=False,
        task_options={"size": 64, "samples": 2, "uni3d": str(ckpt), "uni3d_image_encoder": str(tiny_clip)},
    ))  # fmt: skip
    assert summary.n_errors == 0
    con = sqlite3.connect(tmp_path / "i.db")
    scores = {sid: json.loads(s) for sid, s in con.execute("select sample_id, scores from sample_results")}
    con.close()
    for sid in scores:
        assert -1.0 <= scores[sid]["uni3d_image_sim"] <= 1.0 and "uni3d_text_sim" not in scores[sid]
    # one candidate shape (the table script both times), two references' first views: two cosines
    assert scores["table"]["uni3d_image_sim"] != pytest.approx(scores["snowman"]["uni3d_image_sim"], abs=1e-6)
    assert "uni3d_image_sim_penalized" in {m.name for m in summary.metrics}
