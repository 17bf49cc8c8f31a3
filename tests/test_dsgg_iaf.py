"""dsgg-ft: importance-aware fine-tuning (IAF) of SmolLM2-135M-Instruct on the dsgg train split.

The weighted loss against a literal re-computation, the importance weights against their definition
(rare predicates weigh more, format tokens 1), the frozen-prefix split against a whole-model forward,
the audit that the fit reads only train samples, a short real fine-tune through the runner (the train
loss falls, the replies parse, a rerun loads the cached fit) and one-line refusals of bad settings.
Real model (the embedded SmolLM2 that tests/setup.d/20-smollm2.sh converts) and real peft LoRA, kept
small: a few train videos, a few steps, one short test video.
"""

from __future__ import annotations

import ast
import json
import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch starts its thread pool

import pytest  # noqa: E402
from requirements import require  # noqa: E402

require("peft", "tests/setup.d/89-peft.sh installs it")

import torch  # noqa: E402

from harness.modelspec import build_model  # noqa: E402
from harness.runner import EvalConfig, Runner, build_task  # noqa: E402
from harness.tasks.dsgg import ft_data as F  # noqa: E402
from harness.tasks.dsgg import ft_train as T  # noqa: E402
from harness.tasks.dsgg.ft_backend import FineTuned  # noqa: E402
from harness.tasks.dsgg.trs import parse_reply, to_trs  # noqa: E402

torch.set_num_threads(1)
DSGG = Path(F.__file__).parent


@pytest.fixture(scope="module")
def task():
    return build_task("dsgg", {})


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from harness.models.hf_embedded import ensure_converted

    return AutoTokenizer.from_pretrained(ensure_converted("smollm2-135m-instruct"))


# ------------------------------------------------------------------------------------- loss, weights


def test_weighted_loss_equals_a_literal_recomputation():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(7, 11, generator=gen)
    targets = torch.randint(0, 11, (7,), generator=gen)
    weights = torch.tensor([1.0, 1.0, 2.5, 0.4, 1.0, 3.0, 0.7])
    literal_num = literal_den = 0.0
    for row, t, w in zip(logits.tolist(), targets.tolist(), weights.tolist(), strict=True):
        log_z = math.log(sum(math.exp(x) for x in row))
        literal_num += w * (log_z - row[t])
        literal_den += w
    assert float(T.weighted_nll(logits, targets, weights)) == pytest.approx(literal_num / literal_den, rel=1e-6)
    # uniform weights: the ordinary mean token NLL (plain fine-tuning), whatever the constant
    plain = torch.nn.functional.cross_entropy(logits, targets)
    assert float(T.weighted_nll(logits, targets, torch.full((7,), 3.0))) == pytest.approx(float(plain), rel=1e-6)
    # and the weights matter: moving weight onto the worst token raises the loss
    nll = torch.nn.functional.cross_entropy(logits, targets, reduction="none")
    heavy = torch.ones(7)
    heavy[int(nll.argmax())] = 10.0
    assert float(T.weighted_nll(logits, targets, heavy)) > float(plain)


def test_importance_weights_follow_the_definition(task, tokenizer):
    train = list(task.train())
    predicates = F.allowed_predicates(train[0])
    counts = Counter(p for s in train for _, _, p, _ in s.target["relations"])
    total, size = sum(counts.values()), len(predicates)
    info = {p: -math.log((counts[p] + 1) / (total + size)) for p in predicates}
    rel = [info[r["predicate"]] for s in train for r in to_trs(s.target)]
    mean = sum(rel) / len(rel)
    imp = F.predicate_importance(train, iaf=True)
    for p in predicates:
        assert imp[p] == pytest.approx(info[p] / mean, rel=1e-9)
    seen = sorted(counts, key=lambda p: counts[p])
    for rare, common in zip(seen, seen[1:], strict=False):
        if counts[rare] < counts[common]:
            assert imp[rare] > imp[common], (rare, common)
    assert sum(imp[r["predicate"]] for s in train for r in to_trs(s.target)) / len(rel) == pytest.approx(1.0)
    assert set(F.predicate_importance(train, iaf=False).values()) == {1.0}

    # per token: the relation's weight on its values, 1 on the format (keys, punctuation, reasoning, eos)
    sample = train[0]
    reply = F.build_reply(sample.target)
    parsed, dropped = parse_reply(reply.text, predicates, sample.target["n_frames"])
    assert not dropped and [r["predicate"] for r in parsed] == [r["predicate"] for r in to_trs(sample.target)]
    for s, e, _ in reply.ranges:
        json.loads(reply.text[s:e])  # every range is exactly one JSON value
    ex = F.encode(tokenizer, sample, reply, imp)
    offsets = tokenizer(reply.text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    assert len(ex.weights) == len(ex.ids) - ex.n_prompt == len(offsets) + 1 and ex.weights[-1] == 1.0
    n_format = n_content = 0
    for (a, b), w in zip(offsets, ex.weights, strict=False):
        inside = [imp[p] for s, e, p in reply.ranges if a < e and s < b]
        if inside:
            n_content += 1
            assert w == max(inside)
        else:
            n_format += 1
            assert w == 1.0
    assert n_format > 20 and n_content > 20
    assert any(w > 1.0 for w in ex.weights) and any(w < 1.0 for w in ex.weights)
    plain = F.encode(tokenizer, sample, reply, F.predicate_importance(train, iaf=False))
    assert plain.ids == ex.ids and set(plain.weights) == {1.0}
    # IAF and plain fits are different fits but share the frozen-layer states (same tokens)
    from harness.tasks.dsgg.ft_backend import _digest

    assert _digest([ex]) != _digest([plain]) and _digest([ex], weights=False) == _digest([plain], weights=False)


def test_frozen_prefix_split_gives_the_whole_models_loss(task, tokenizer):
    from harness.models.hf import load

    hf = load("smollm2-135m-instruct", dtype="float32", device="cpu")
    plan = T.FitPlan(layers=2, rank=4)
    peft_model = T.attach_lora(hf.hf_model, plan)
    lm = peft_model.get_base_model()
    with torch.no_grad():  # LoRA B starts at zero: make the adapters do something
        for n, p in lm.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.02)
    train = list(task.train())[:2]
    examples, _ = F.train_examples(hf.tokenizer, train, iaf=True)
    examples = [F.Example(e.ids[: e.n_prompt + 30], e.n_prompt, e.weights[:30]) for e in examples]  # short
    start = T.first_adapted(lm, plan)
    states = T.prefix_states(lm, start, examples)
    batch = T.collate(examples, states, "cpu")
    with torch.no_grad():
        split = float(T.weighted_nll(*T.top_logits(lm, start, batch)))
        num = den = 0.0
        for e in examples:
            logits = lm(input_ids=torch.tensor([e.ids])).logits[0]
            nll = torch.nn.functional.cross_entropy(logits[e.n_prompt - 1:-1], torch.tensor(e.ids[e.n_prompt:]),
                                                    reduction="none")
            w = torch.tensor(e.weights)
            num, den = num + float((w * nll).sum()), den + float(w.sum())
    assert split == pytest.approx(num / den, rel=1e-4)
    assert len(T.decoder_layers(lm)) == 30  # the cut stack was put back


# ------------------------------------------------------------------------------------------ audit


def test_only_the_train_split_is_read_for_targets():
    """Static audit: ``.target`` is read only in ft_data's train-split functions, and the request path
    (generate) reads no sample at all."""
    readers: set[str] = set()
    for name in ("ft_data.py", "ft_train.py", "ft_backend.py"):
        tree = ast.parse((DSGG / name).read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                if any(isinstance(n, ast.Attribute) and n.attr == "target" for n in ast.walk(fn)):
                    readers.add(f"{name}:{fn.name}")
                if fn.name == "generate":
                    names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
                    assert not names & {"Sample", "train_split", "train"}, names
    assert readers == {"ft_data.py:predicate_importance", "ft_data.py:train_examples"}
    # and the backend calls them only from fit, on the split it was handed
    tree = ast.parse((DSGG / "ft_backend.py").read_text(encoding="utf-8"))
    callers = {fn.name for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef)
               for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == "train_examples"}
    assert callers == {"fit"}


# ------------------------------------------------------------------- a short real fine-tune, end to end


@pytest.fixture(scope="module")
def private_cache(tmp_path_factory):
    """A fresh fit cache (so the fit really trains) that still finds the converted embedded model."""
    from harness.fit_cache import cache_root
    from harness.models.hf_embedded import ensure_converted

    ensure_converted("smollm2-135m-instruct")
    root = tmp_path_factory.mktemp("dsgg-ft-cache")
    (root / "models").symlink_to(cache_root() / "models")
    mp = pytest.MonkeyPatch()
    mp.setenv("HARNESS_CACHE_DIR", str(root))
    yield root
    mp.undo()


def test_short_finetune_lowers_the_train_loss_and_replies_parse(task, private_cache, tmp_path, monkeypatch):
    from harness.store.db import open_db

    seen: list[list[str]] = []
    real_fit = FineTuned.fit

    def spy(self, train_split):
        seen.append([s.id for s in train_split])
        return real_fit(self, train_split)

    monkeypatch.setattr(FineTuned, "fit", spy)
    sessions = open_db(f"sqlite:///{tmp_path / 'h.db'}")
    test_ids = [s.id for s in task.load()]
    shortest = min(task.load(), key=lambda s: len(to_trs(s.target)))
    settings = {"train_limit": 4, "steps": 12, "batch": 2, "lr": 5e-3, "layers": 2}
    # a short reply budget keeps the test quick; the cut reply is closed after its last whole relation
    run_settings = {**settings, "close_truncated": True, "max_tokens": 160}
    cfg = EvalConfig(task="dsgg", model="dsgg-ft", model_settings=run_settings, sample_ids=[shortest.id],
                     progress=False)
    summary = Runner(cfg, session_factory=sessions).run()
    # the fit saw the train split's samples, none of the test split's
    assert seen and seen[0] == [s.id for s in task.train()] and not set(seen[0]) & set(test_ids)
    assert summary.n_new == 1 and summary.n_errors == 0
    m = {x.name: x.value for x in summary.metrics if not x.breakdown_key}
    assert m["parse_errors"] == 0 and m["unscored"] == 0 and 0.0 <= m["precision"] <= 1.0
    from sqlalchemy import text

    with sessions() as s:
        reply = s.execute(text("select output from sample_results")).scalar_one()
    # the trained layout (the base model writes free prose): reasoning line, then the TRS JSON
    assert reply.startswith("Reasoning: the person is with ") and '{"relations":[{"subject":' in reply, reply
    trs, _ = parse_reply(reply, F.allowed_predicates(shortest), shortest.target["n_frames"])
    assert trs and all(r["object"] in shortest.target["objects"] or r["subject"] in shortest.target["objects"]
                       for r in trs)

    backend = build_model("dsgg-ft", settings, {"text", "video"})
    record = backend.fit(list(task.train()))
    assert record["from_cache"] is True  # the same fit again: loaded, not retrained
    assert record["train_nll_after"] < 0.8 * record["train_nll_before"], record
    assert len(record["step_losses"]) == 12 and record["train_videos"] == 4
    assert set(record["importance"]) <= set(F.allowed_predicates(task.train()[0]))


def test_close_truncated_keeps_whole_relations_only():
    from harness.tasks.dsgg.ft_backend import close_truncated

    whole = '{"subject":"person","predicate":"holding","object":"cup","spans":[[0,3]]}'
    cut = 'Reasoning: ...\n{"relations":[' + whole + "," + whole.replace("holding", "touching") + ',{"subject":"pe'
    closed = close_truncated(cut)
    assert closed is not None and json.loads(closed.split("\n", 1)[1]) == {
        "relations": [json.loads(whole), json.loads(whole.replace("holding", "touching"))]}
    assert close_truncated('{"relations":[{"subject":"pers') is None
    assert close_truncated("no JSON at all") is None


# ------------------------------------------------------------------------------------- bad settings


@pytest.mark.parametrize(("settings", "match"), [
    ({"iaf": "maybe"}, "iaf"), ({"steps": 0}, "steps"), ({"lr": 3}, "lr"), ({"stepz": 3}, "did you mean 'steps'"),
    ({"device": "tpu"}, "device must be cpu"), ({"train_limit": -1}, "train_limit"),
])
def test_bad_settings_are_one_line(settings, match):
    with pytest.raises(ValueError, match=match) as info:
        build_model("dsgg-ft", settings, {"text", "video"})
    assert "\n" not in str(info.value)


def test_wrong_split_is_one_line_before_the_model_loads(tmp_path):
    backend = build_model("dsgg-ft", {}, {"text", "video"})
    with pytest.raises(F.FitError, match="needs the task's train split"):
        backend.fit([])
    sgdet = build_task("dsgg", {"setting": "sgdet"})
    with pytest.raises(F.FitError, match="predcls") as info:
        backend.fit(list(sgdet.train()))
    assert "\n" not in str(info.value) and backend.hf is None
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "harness.cli", "eval", "--task", "dsgg", "--model", "dsgg-ft",
                               *args], capture_output=True, text=True, timeout=300, env=env)

    r = cli("-T", "setting=sgdet", "--db", f"sqlite:///{tmp_path / 'a.db'}")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "predcls" in r.stderr, r.stderr
    r = cli("-M", "rank=zero", "--db", f"sqlite:///{tmp_path / 'b.db'}")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "rank" in r.stderr, r.stderr
