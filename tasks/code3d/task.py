"""3DCodeBench tasks: the model writes Blender code; we run it sandboxed, render it and measure it.

* ``code3d``        text-to-3D: system prompt + the object's description;
* ``code3d_image``  image-to-3D: system prompt + the four reference views (+ a one-line request);
* ``code3d_refine`` multi-turn refinement: up to ``rounds`` (default 3) attempts, each failed
  attempt fed back to the model with the paper's feedback template (status, traceback); with
  ``feedback=renders`` successful attempts are also sent back with their renders for improvement.

Multi-turn design: round 1 is the runner's own call (cached, resumable); later rounds are made from
``score`` through the run's model client (``ctx.model``: the run's settings and response cache
apply). ``-T refine_model=SPEC`` names another model for the later rounds. Per-round values
(``executable_r1..3``, ``chamfer_r1..3``, ...) describe the state after each round (the latest
attempt that executed, else the latest attempt; never picked by reference-based scores), so the
test-time-scaling effect shows as a curve.

Options (``-T``): data_dir (public benchmark folder; default: the shipped reference set), workers
(Blender processes, default 1), size / samples (render px / Cycles spp; default 256 / 16),
exec_timeout (s, default 60), memory_mb (per process, default 4096), fscore_threshold (default 0.05),
max_tokens (default 4096), rounds, refine_model, feedback (traceback | renders), prompt_type
(description | instruction), image_encoder (local SigLIP-2/DINOv2 directory: embedding similarity),
text_image_encoder (local SigLIP/CLIP directory: prompt-vs-render cosine), uni3d (a Uni3D ``model.pt``:
shape-vs-reference cosine), uni3d_text_encoder (the CLIP text tower Uni3D is aligned to: prompt-vs-shape)
and uni3d_image_encoder (that CLIP's image tower: first reference view vs shape, image-to-3D only).
Artifacts (script, GLB, PNG renders) go under ``$HARNESS_ARTIFACTS`` (default ``./artifacts``)
``/<run>/<sample>/round<k>/`` and their paths into ``Score.details`` and ``Output.prediction``.
"""

from __future__ import annotations

import ast
import asyncio
import atexit
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.data import file_hash
from harness.registry import task
from harness.sandbox import excerpt
from harness.task import SampleRecord, ScoreContext, Task
from harness.tasks.code3d import data as data_mod
from harness.tasks.code3d.executor import BlenderPool, ExecResult, RenderOptions, bpy_python
from harness.tasks.code3d.model_scores import MODEL_METRIC_WORDS, ModelScorers, check_model_options
from harness.tasks.code3d.references import Reference, prepare_reference
from harness.tasks.code3d.taxonomy import classify_failure, exec_family
from harness.types import (
    GenerationConfig,
    Message,
    Metric,
    Output,
    Part,
    Request,
    Sample,
    Score,
    higher,
    lower,
    neutral,
)

PROMPTS = Path(__file__).parent / "prompts"
TEXT_SYSTEM = "text_to_3d_system_prompt.txt"
IMAGE_SYSTEM = "image_to_3d_system_prompt.txt"
FEEDBACK = "multi_turn_feedback_template.txt"
# The reference's image-to-3D user turn (core/inputs.py): this text, then the reference views.
IMAGE_REQUEST = (
    "Reconstruct the object shown in the following reference image(s) as a Blender 5.0 Python script. "
    "Treat all images as views of the SAME object."
)
RENDER_FEEDBACK = (
    "Your script ran and produced the object rendered in the four images above (azimuth 45, 135, 225, 315 "
    "degrees). Compare them with the task below and output an improved, COMPLETE script (Python only).\n\n"
    "# Original task\n\n{original_task_block}"
)
IMAGE_KEYS = ("img_iou_paired", "img_ssim_paired", "img_iou_matched", "img_ssim_matched", "img_emb_paired",
              "img_emb_matched")  # fmt: skip
# model-based scores of the reference's metrics/text_image_similarity.py and metrics/shape_uni3d.py (cosines)
MODEL_KEYS = ("text_image_sim", "text_image_sim_max", "uni3d_shape_sim", "uni3d_text_sim", "uni3d_image_sim")
FENCE_LINE = re.compile(r"^\s*```(?:python|py)?\s*$")
MAX_TRIM_LINES = 60


def extract_code(text: str) -> tuple[str, bool]:
    """The script in a reply, cleaned the way the reference cleans replies (core/inputs.py,
    reimplemented): drop lines that are only a code fence; if the rest does not parse, drop the
    fewest leading/trailing lines (prose before/after the code, up to 60 each side) that make it
    parse; else keep the fence-stripped text (it will fail as ERR_EXEC / syntax).
    Returns (code, whether anything was removed)."""
    lines = [ln for ln in text.splitlines() if not FENCE_LINE.match(ln)]
    changed = len(lines) != len(text.splitlines())
    base = "\n".join(lines) + ("\n" if text.endswith("\n") else "")
    if _parses(base):
        return base, changed
    n, cap = len(lines), min(len(lines), MAX_TRIM_LINES)
    for total in range(1, 2 * cap + 1):
        for head in range(0, min(total, cap) + 1):
            tail = total - head
            if tail > cap or head + tail >= n:
                continue
            candidate = "\n".join(lines[head : n - tail])
            if candidate.strip() and _parses(candidate):
                return candidate + "\n", True
    return base, changed


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def artifacts_root() -> Path:
    return Path(os.environ.get("HARNESS_ARTIFACTS", "artifacts"))


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:120] or "sample"


@dataclass
class Code3DConfig:
    setting: str  # text | image | refine
    data_dir: str | None
    workers: int
    render: RenderOptions
    exec_timeout: float
    memory_mb: int
    fscore_threshold: float
    max_tokens: int
    rounds: int
    refine_model: str | None
    feedback: str
    image_input: bool
    prompt_type: str  # description | instruction (text-to-3D user turn, as the reference's option)
    image_encoder: str | None = None  # local transformers SigLIP/DINO directory for embedding similarity
    text_image_encoder: str | None = None  # local transformers SigLIP/CLIP directory: prompt vs renders
    uni3d: str | None = None  # a Uni3D checkpoint (model.pt): shape embeddings
    uni3d_text_encoder: str | None = None  # local transformers CLIP directory: the prompt in Uni3D's space
    uni3d_image_encoder: str | None = None  # local transformers CLIP directory: the first view in Uni3D's space

    @property
    def full_views(self) -> bool:  # full-size renders as .npy, only for the embedding metrics that read them
        return (self.image_encoder is not None or self.text_image_encoder is not None
                or (self.uni3d_image_encoder is not None and self.image_input))  # fmt: skip


class Code3DRuntime:
    """Shared state of one task instance: items, the Blender pool, references, the refine model."""

    def __init__(self, cfg: Code3DConfig) -> None:
        self.cfg = cfg
        self.items = {
            i.id: i for i in (data_mod.load_public(cfg.data_dir) if cfg.data_dir else data_mod.load_offline())
        }
        self._pool: BlenderPool | None = None
        self._refs: dict[str, Reference] = {}
        self._model: Any = None
        self._encoder: Any = None
        self._encoder_lock = threading.Lock()
        self.scorers = ModelScorers.load(cfg)

    def encoder(self) -> Any:
        with self._encoder_lock:  # measure() runs in worker threads
            if self._encoder is None and self.cfg.image_encoder:
                from harness.tasks.code3d.images import ImageEncoder

                self._encoder = ImageEncoder(self.cfg.image_encoder)
            return self._encoder

    @property
    def pool(self) -> BlenderPool:
        if self._pool is None:
            cfg = self.cfg
            self._pool = BlenderPool(
                size=cfg.workers,
                render=cfg.render,
                exec_timeout_s=cfg.exec_timeout,
                memory_mb=cfg.memory_mb,
                full_views=cfg.full_views,
            )
            atexit.register(self._pool.close)
        return self._pool

    def reference(self, item_id: str) -> Reference:
        if item_id not in self._refs:
            self._refs[item_id] = prepare_reference(self.items[item_id], self.pool)
        return self._refs[item_id]

    def refine_model(self, ctx: ScoreContext) -> Any:
        in_run = ctx.model  # the model under test, through the run's client (settings, cache)
        if in_run is not None and not self.cfg.refine_model:
            return in_run
        if self._model is None:
            from harness.client import ModelClient

            if not self.cfg.refine_model:
                raise ValueError("code3d_refine needs -T refine_model=SPEC (the model under test) for rounds 2+")
            self._model = ModelClient.build(self.cfg.refine_model, {}, {"text", "image"})
        return self._model

    # --- samples and prompts --------------------------------------------------------------------
    def load(self) -> list[Sample]:
        samples = []
        for item in self.items.values():
            meta = {"category": item.category, "setting": self.cfg.setting, "data_error": item.data_error,
                    "expected_parts": item.expected_parts, "expected_floating": item.expected_floating}  # fmt: skip
            samples.append(Sample(id=item.id, messages=[], target=item.id, metadata=meta))
        return samples

    def messages(self, sample: Sample) -> list[Message]:
        item = self.items[sample.id]
        if self.cfg.image_input:
            ref = self.reference(item.id)
            images = [Part("image", path=p) for p in ref.renders]
            return [Message.text("system", (PROMPTS / IMAGE_SYSTEM).read_text()),
                    Message("user", [Part("text", IMAGE_REQUEST), *images])]  # fmt: skip
        return [Message.text("system", (PROMPTS / TEXT_SYSTEM).read_text()), Message.text("user", self.task_text(item))]

    def task_text(self, item: data_mod.Item) -> str:
        if self.cfg.prompt_type == "instruction" and item.instruction:
            return item.instruction
        return item.description

    def prompt(self, sample: Sample) -> Request:
        return Request(self.messages(sample), GenerationConfig(temperature=0.0, max_tokens=self.cfg.max_tokens))

    # --- scoring ----------------------------------------------------------------------------------
    def measure(self, result: ExecResult, ref: Reference, item: data_mod.Item | None = None) -> dict[str, float]:
        import numpy as np  # numpy/scipy only when scoring: keeps task discovery light

        from harness.tasks.code3d.geometry import shape_scores
        from harness.tasks.code3d.images import view_similarity

        values: dict[str, float] = {"executable": float(result.ok)}
        if not result.ok:
            return values
        a = result.analysis
        values["n_parts"] = float(a.get("n_parts", 0))
        values["n_floating"] = float(a.get("n_floating", 0))
        values["has_floating"] = float(a.get("n_floating", 0) > 0)
        if ref.points and result.points:
            s = shape_scores(np.load(result.points, allow_pickle=False), np.load(ref.points, allow_pickle=False),
                             threshold=self.cfg.fscore_threshold)  # fmt: skip
            values.update(chamfer=s.chamfer, chamfer_noyaw=s.chamfer_noyaw, fscore=s.fscore, precision=s.precision,
                          recall=s.recall)  # fmt: skip
        if ref.thumbs and result.thumbs:
            pred, gold = np.load(result.thumbs, allow_pickle=False), np.load(ref.thumbs, allow_pickle=False)
            if pred.shape == gold.shape:
                values.update(view_similarity(pred, gold))
        if self.cfg.image_encoder and ref.views and result.views_npy:
            values.update(self.encoder().similarity(np.load(result.views_npy), np.load(ref.views)))
        if item is not None:
            values.update(self.scorers.measure(result, ref, self.task_text(item), item.description))
        return values

    async def run_round(self, code: str, folder: Path, ref: Reference,
                        item: data_mod.Item | None = None) -> tuple[ExecResult, dict[str, float]]:  # fmt: skip
        result = await self.pool.execute(code, folder)
        values = await asyncio.to_thread(self.measure, result, ref, item)
        return result, values

    def feedback_messages(self, sample: Sample, code: str, result: ExecResult, attempt: int) -> list[Message]:
        item = self.items[sample.id]
        original = self.messages(sample)
        task_block = self.task_text(item) if not self.cfg.image_input else IMAGE_REQUEST
        if result.ok:  # feedback=renders: show the model its own object
            images = [Part("image", path=p) for p in result.renders]
            text = RENDER_FEEDBACK.format(original_task_block=task_block)
            return [original[0], Message("user", [*images, Part("text", text)])]
        error_text = (result.traceback or result.error or "(no output)")[-3000:]
        text = (PROMPTS / FEEDBACK).read_text().format(
            original_task_block=task_block, prev_code=code, status=result.status, n_meshes=result.n_meshes,
            n_views_rendered=result.views, attempt_num=attempt, max_attempts=self.cfg.rounds, error_text=error_text,
        )  # fmt: skip
        return [original[0], *([m for m in original[1:] if self.cfg.image_input]), Message.text("user", text)]

    async def score(self, sample: Sample, output: Output, ctx: ScoreContext) -> Score:
        item = self.items[sample.id]
        if item.data_error:
            return Score.not_scored(item.data_error)
        ref = await asyncio.to_thread(self.reference, item.id)
        if ref.error and not ref.points and not ref.thumbs:
            return Score.not_scored(ref.error)
        base = artifacts_root() / _safe(f"run{ctx.run_id}" if ctx.run_id is not None else "adhoc") / _safe(sample.id)
        code, had_fences = extract_code(output.text)
        rounds: list[dict[str, Any]] = []
        best: dict[str, float] | None = None
        best_result: ExecResult | None = None
        per_round: dict[str, float] = {}
        for k in range(1, self.cfg.rounds + 1):
            result, values = await self.run_round(code, base / f"round{k}", ref, item)
            rounds.append({"round": k, "values": values, "had_fences": had_fences, **result.to_dict(),
                           "failure": classify_failure(result.status, result.traceback, result.error)})  # fmt: skip
            # the state after round k: the latest attempt that executed, else the latest attempt. Never
            # chosen by Chamfer or image scores: those need the reference, which the model never sees.
            if best is None or result.ok or not best["executable"]:
                best, best_result = values, result
            assert best is not None
            for name in ("executable", "chamfer", "fscore", "img_iou_paired"):
                if name in best and self.cfg.setting == "refine":
                    per_round[f"{name}_r{k}"] = best[name]
            if k == self.cfg.rounds or (result.ok and self.cfg.feedback != "renders"):
                break
            reply = (await self.refine_model(ctx).generate([Request(self.feedback_messages(sample, code, result, k + 1),
                     GenerationConfig(temperature=0.0, max_tokens=self.cfg.max_tokens))]))[0]  # fmt: skip
            if reply.error:
                rounds.append({"round": k + 1, "model_error": reply.error})
                break
            code, had_fences = extract_code(reply.text)
        assert best is not None and best_result is not None
        if self.cfg.setting == "refine":  # carry the final state forward so every round has a value
            for name in ("executable", "chamfer", "fscore", "img_iou_paired"):
                for k in range(1, self.cfg.rounds + 1):
                    key, prev = f"{name}_r{k}", f"{name}_r{k - 1}"
                    if key not in per_round and prev in per_round:
                        per_round[key] = per_round[prev]
        failure = classify_failure(best_result.status, best_result.traceback, best_result.error)
        values = {**best, **per_round, "rounds_used": float(len([r for r in rounds if "values" in r]))}
        values.update(await asyncio.to_thread(self.scorers.reference_baseline, ref, self.task_text(item)))
        family = exec_family(best_result.traceback, best_result.error) if best_result.status == "ERR_EXEC" else None
        if failure:
            values[f"fail_{failure}"] = 1.0
        if family:
            values[f"fail_exec_{family.lower().replace('-', '_')}"] = 1.0
        output.prediction = {"glb": best_result.glb, "renders": best_result.renders, "status": best_result.status}
        return Score(
            values=values, answer=best_result.status, explanation=excerpt(best_result.error),  # shown publicly
            details={"status": best_result.status, "failure": failure, "exec_family": family, "glb": best_result.glb,
                     "renders": best_result.renders, "reference_renders": ref.renders, "rounds": rounds},
        )  # fmt: skip

    # --- aggregation --------------------------------------------------------------------------------
    def aggregate(self, records: list[SampleRecord], task_obj: Task) -> list[Metric]:
        from harness.aggregate import default_aggregate
        from harness.stats import mean_ci
        from harness.tasks.code3d.geometry import PENALTY_FACTOR, penalized_values

        metrics = default_aggregate(task_obj, records)
        scored = [r for r in records if r.error is None and r.unscored is None]
        # the penalised means run over every attempted sample, as the reference's do: a sample whose
        # generation failed (stored with an error) has no mesh and is penalised like a failed execution.
        # Unscored samples (a broken data item or reference) are a data problem, not the model's: left out.
        attempted = [r for r in records if r.unscored is None]
        if not scored:
            return metrics
        # the pass rate too (the reference's executability counts an instance without a render log as failed)
        metrics = [m for m in metrics if not (m.name == "executable" and not m.breakdown_key)]
        est = mean_ci([r.scores.get("executable", 0.0) for r in attempted])
        metrics.append(Metric("executable", est.value, est.ci_low, est.ci_high, est.n))
        # failures get 0 in every fail_* rate they do not carry, so rates are over all scored samples
        names = {k for r in scored for k in r.scores if k.startswith("fail_")}
        metrics = [m for m in metrics if not (m.name in names and not m.breakdown_key)]
        for name in sorted(names):
            est = mean_ci([r.scores.get(name, 0.0) for r in scored])
            metrics.append(Metric(name, est.value, est.ci_low, est.ci_high, est.n))
        for key in ("chamfer", "chamfer_noyaw"):  # failures: 1.5 x the worst CD of this run (reference)
            values = penalized_values([r.scores.get(key) for r in attempted], PENALTY_FACTOR)
            if values is not None:
                est = mean_ci(values)
                metrics.append(Metric(f"{key}_penalized", est.value, est.ci_low, est.ci_high, est.n))
        for key in ("fscore", *IMAGE_KEYS, *MODEL_KEYS):
            if any(key in r.scores for r in scored):
                est = mean_ci([r.scores.get(key, 0.0) for r in attempted])
                metrics.append(Metric(f"{key}_penalized", est.value, est.ci_low, est.ci_high, est.n))
        return metrics


def _path_option(options: dict[str, Any], name: str) -> str | None:
    value = options.get(name)
    return None if value is None or str(value).strip() == "" else str(value)


def _build(setting: str, **options: Any) -> Task:
    known = {"data_dir", "workers", "size", "samples", "exec_timeout", "memory_mb", "fscore_threshold", "max_tokens",
             "rounds", "refine_model", "feedback", "image", "prompt_type", "image_encoder", "text_image_encoder",
             "uni3d", "uni3d_text_encoder", "uni3d_image_encoder"}  # fmt: skip
    unknown = set(options) - known
    if unknown:
        raise ValueError(f"unknown code3d option(s): {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}")
    bpy_python()  # Blender first: without it every sample would be a model call whose answer cannot be run
    prompt_type = str(options.get("prompt_type", "description"))
    if prompt_type not in ("description", "instruction"):
        raise ValueError(f"prompt_type must be 'description' or 'instruction', not {prompt_type!r}")
    feedback = str(options.get("feedback", "traceback"))
    if feedback not in ("traceback", "renders"):
        raise ValueError(f"feedback must be 'traceback' or 'renders', not {feedback!r}")
    cfg = Code3DConfig(
        setting=setting, data_dir=options.get("data_dir"), workers=int(options.get("workers", 1)),
        render=RenderOptions(size=int(options.get("size", 256)), samples=int(options.get("samples", 16))),
        exec_timeout=float(options.get("exec_timeout", 60)), memory_mb=int(options.get("memory_mb", 4096)),
        fscore_threshold=float(options.get("fscore_threshold", 0.05)),  # geometry.DEFAULT_FSCORE_THRESHOLD
        max_tokens=int(options.get("max_tokens", 4096)),
        rounds=int(options.get("rounds", 3 if setting == "refine" else 1)),
        refine_model=options.get("refine_model"), feedback=feedback,
        image_input=setting == "image" or str(options.get("image", "false")).lower() in ("1", "true", "yes"),
        prompt_type=prompt_type, image_encoder=options.get("image_encoder"),
        text_image_encoder=_path_option(options, "text_image_encoder"), uni3d=_path_option(options, "uni3d"),
        uni3d_text_encoder=_path_option(options, "uni3d_text_encoder"),
        uni3d_image_encoder=_path_option(options, "uni3d_image_encoder"),
    )  # fmt: skip
    check_model_options(cfg)  # before the data are read and the models loaded
    runtime = Code3DRuntime(cfg)
    files = [PROMPTS / n for n in (TEXT_SYSTEM, IMAGE_SYSTEM, FEEDBACK)]
    files += [Path(i.script_path) for i in runtime.items.values() if i.script_path]
    name = {"text": "code3d", "image": "code3d_image", "refine": "code3d_refine"}[setting]
    task_obj = Task(
        metrics={
            "executable": higher("executable (status OK)"),
            **{f"fail_{k}": lower(f"failure: {k}", "fraction") for k in ("timeout", "syntax", "no_mesh", "render",
                                                                        "memory", "api_misuse", "geometry", "other")},
            **{f"fail_exec_{k}": lower(f"ERR_EXEC family {k}", "fraction") for k in ("b5_api", "bmsh", "ctx", "other")},
            "chamfer": lower("Chamfer distance (successes)"), "chamfer_noyaw": lower("Chamfer distance, no yaw"),
            "chamfer_penalized": lower("Chamfer distance, failures penalised"),
            "chamfer_noyaw_penalized": lower("Chamfer distance, no yaw, failures penalised"),
            **{f"{k}{p}": higher(f"{k}{' (failures 0)' if p else ''}", "raw" if "emb" in k else "fraction")
               for k in ("fscore", "precision", "recall", *IMAGE_KEYS) for p in ("", "_penalized")},
            **{f"{k}{p}": higher(f"{MODEL_METRIC_WORDS[k]}{' (failures 0)' if p else ''}", "raw")
               for k in MODEL_KEYS for p in ("", "_penalized")},
            "text_image_sim_gt": neutral("prompt vs the reference views (the reference's GT baseline)", "raw"),
            "n_parts": neutral("connected parts"), "n_floating": lower("floating parts"),
            "has_floating": lower("has floating parts", "fraction"), "rounds_used": neutral("rounds used"),
            **{f"{k}_r{r}": (lower if k == "chamfer" else higher)(f"{k} after round {r}", "raw" if k == "chamfer"
                                                                  else "fraction")
               for k in ("executable", "chamfer", "fscore", "img_iou_paired") for r in range(cfg.rounds + 1)},
        },
        name=name, version="1", load=runtime.load, prompt=runtime.prompt, score=runtime.score,
        description=f"3DCodeBench {setting}: Blender code, sandboxed, rendered and measured",
        family="code3d", modalities=frozenset({"text", "image"} if cfg.image_input else {"text"}),
        primary_metric="executable", breakdowns=("category",),
        content_hash=file_hash(*files, extra=repr(sorted((k, str(v)) for k, v in options.items()))),
        options=dict(options),
    )  # fmt: skip
    task_obj.aggregate = lambda records: runtime.aggregate(records, task_obj)
    task_obj.runtime = runtime  # type: ignore[attr-defined]  # tests and the judge reach the pool here
    return task_obj


@task("code3d", description="3DCodeBench text-to-3D: Blender code run sandboxed, rendered, Chamfer/F-score/parts",
      family="code3d")  # fmt: skip
def code3d(**options: Any) -> Task:
    return _build("text", **options)


@task("code3d_image", description="3DCodeBench image-to-3D: reconstruct four reference views as Blender code",
      family="code3d")  # fmt: skip
def code3d_image(**options: Any) -> Task:
    return _build("image", **options)


@task("code3d_refine", description="3DCodeBench multi-turn: up to 3 rounds with traceback/render feedback",
      family="code3d")  # fmt: skip
def code3d_refine(**options: Any) -> Task:
    return _build("refine", **options)
