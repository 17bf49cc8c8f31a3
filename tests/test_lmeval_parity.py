"""lmeval: tasks and the native MMLU-Redux task equal lm-evaluation-harness's own numbers, sample by sample.

lm-eval 0.4.13 runs its ``hf`` model on the embedded SmolLM2 (``tests/lmeval_reference.py``: float32,
CPU; the scoring tasks at the harness's CPU batch size 16, the generation task at lm-eval's default
batch size 1); the harness runs the same tasks through ``harness eval`` on ``hf:`` in its default
batching. Per document: the same loglikelihoods (to 1e-4 nats: batches are formed differently, so
float32 sums may differ in the last bits), the same greedy flags, the same generated text, the same
filtered answers and the same metric values; per task, the same aggregate.

The tasks are the local-data YAML files of ``tests/data/lmeval`` (multiple choice, generate_until,
loglikelihood_rolling with a short context so the text is cut into windows) and lm-eval's MMLU template
over the shipped MMLU-Redux subset.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests.requirements import require

ROOT = Path(__file__).resolve().parents[1]
INCLUDE = ROOT / "tests" / "data" / "lmeval"
TOL = 1e-4

require("lm_eval", "the lmeval extra (tests/setup.d/00-python.sh installs it through the lock)")


@pytest.fixture(scope="module")
def smol_dir() -> Path:
    from harness.models import hf_embedded

    return hf_embedded.ensure_converted("smollm2-135m-instruct")


def _reference(smol_dir: Path, tasks: list[str], out: Path, batch_size: int, extra: str = "") -> dict:
    cmd = [sys.executable, str(ROOT / "tests" / "lmeval_reference.py"), str(smol_dir), ",".join(tasks),
           str(INCLUDE), str(out), str(batch_size)] + ([extra] if extra else [])
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def _harness(task: str, db: Path, *args: str) -> list[dict]:
    cmd = [str(Path(sys.executable).parent / "harness"), "eval", "-t", task, "-m", "smollm2", "--db", f"sqlite:///{db}",
           "--no-progress", *args]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    engine = create_engine(f"sqlite:///{db}")
    with engine.connect() as c:
        rows = c.execute(text("select s.sample_id, s.scores, s.prediction, s.output, s.answer, s.error from "
                              "sample_results s join runs r on r.id = s.run_id join tasks t on t.id = r.task_id "
                              "where t.name = :n"), {"n": task}).mappings().all()
        metrics = c.execute(text("select m.name, m.value, m.ci_low, m.ci_high from metrics m join runs r on "
                                 "r.id = m.run_id join tasks t on t.id = r.task_id where t.name = :n and "
                                 "m.breakdown_key = ''"), {"n": task}).mappings().all()
    engine.dispose()
    out = [{k: json.loads(v) if k in ("scores", "prediction") and isinstance(v, str) else v for k, v in r.items()}
           for r in rows]
    return out + [{"metric": dict(m)} for m in metrics]


def _split(rows: list[dict]) -> tuple[dict[str, dict], dict[str, dict]]:
    samples = {r["sample_id"]: r for r in rows if "sample_id" in r}
    metrics = {r["metric"]["name"]: r["metric"] for r in rows if "metric" in r}
    return samples, metrics


def _key(metric: str, filter_name: str) -> str:
    return metric if filter_name == "none" else f"{metric}_{filter_name}"


@pytest.fixture(scope="module")
def runs(smol_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lmeval-parity")
    tasks = ["harness_parity_mc", "harness_parity_gen", "harness_parity_rolling", "harness_parity_mmlu_redux",
             "harness_parity_loglik"]
    # a short context (max_length 48) cuts the rolling task's longer texts into several windows
    scoring = _reference(smol_dir, ["harness_parity_mc", "harness_parity_mmlu_redux", "harness_parity_loglik"],
                         tmp / "ref.json", 16)
    generation = _reference(smol_dir, ["harness_parity_gen"], tmp / "ref-gen.json", 1)
    ref = {"samples": {**scoring["samples"], **generation["samples"]},
           "results": {**scoring["results"], **generation["results"]}}
    ref_rolling = _reference(smol_dir, tasks[2:3], tmp / "ref-rolling.json", 16, "max_length=48")
    mine = {t: _split(_harness(f"lmeval:{t}", tmp / "h.db", "-T", f"include_path={INCLUDE}"))
            for t in tasks if t != "harness_parity_rolling"}
    mine["harness_parity_rolling"] = _split(_harness("lmeval:harness_parity_rolling", tmp / "h.db", "-T",
                                                     f"include_path={INCLUDE}", "-M", "max_length=48"))
    native = _split(_harness("mmlu_redux", tmp / "h.db"))
    return ref, ref_rolling, mine, native


def _per_doc(ref: dict, task: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for s in ref["samples"][task]:
        out.setdefault(str(s["doc_id"]), []).append(s)
    return out


def _assert_same_metrics(ref_samples: dict[str, list[dict]], mine: dict[str, dict]) -> None:
    assert set(ref_samples) == set(mine)
    for doc_id, entries in ref_samples.items():
        row = mine[doc_id]
        assert row["error"] is None
        for entry in entries:
            for metric, value in entry.items():
                if metric in ("doc_id", "filter", "resps", "filtered_resps"):
                    continue
                key = _key(metric, entry["filter"])
                if isinstance(value, int | float):
                    assert row["scores"][key] == pytest.approx(float(value), abs=1e-12), (doc_id, key)


def test_multiple_choice_equals_lm_eval_per_sample(runs):
    ref, _, mine, _ = runs
    samples, metrics = mine["harness_parity_mc"]
    per_doc = _per_doc(ref, "harness_parity_mc")
    _assert_same_metrics(per_doc, samples)
    for doc_id, (entry,) in per_doc.items():
        lls = samples[doc_id]["prediction"]["loglikelihoods"]
        assert len(lls) == len(entry["resps"])
        for (logprob, greedy, _n), ((ref_logprob, ref_greedy),) in zip(lls, entry["resps"], strict=True):
            assert abs(logprob - float(ref_logprob)) < TOL and greedy == (ref_greedy in (True, "True"))
    results = ref["results"]["harness_parity_mc"]
    for metric in ("acc", "acc_norm", "acc_bytes"):
        assert metrics[metric]["value"] == pytest.approx(results[f"{metric},none"], abs=1e-12)
    # acc and acc_norm really differ on this data (the length normalisation is exercised)
    assert any(s["scores"]["acc"] != s["scores"]["acc_norm"] for s in samples.values())


def test_generate_until_equals_lm_eval_per_sample(runs):
    ref, _, mine, _ = runs
    samples, metrics = mine["harness_parity_gen"]
    per_doc = _per_doc(ref, "harness_parity_gen")
    _assert_same_metrics(per_doc, samples)
    for doc_id, entries in per_doc.items():
        assert samples[doc_id]["output"] == entries[0]["resps"][0][0], doc_id  # the raw generated text
    results = ref["results"]["harness_parity_gen"]
    for filt in ("raw", "number"):
        assert metrics[f"exact_match_{filt}"]["value"] == pytest.approx(results[f"exact_match,{filt}"], abs=1e-12)
    assert metrics["exact_match_number"]["value"] > 0  # the test is not vacuous: some answers are right


def test_loglikelihood_task_equals_lm_eval(runs):
    ref, _, mine, _ = runs
    samples, metrics = mine["harness_parity_loglik"]
    per_doc = _per_doc(ref, "harness_parity_loglik")
    assert set(per_doc) == set(samples) and len(samples) == 8
    for doc_id, (entry,) in per_doc.items():
        (logprob, greedy, _n), = samples[doc_id]["prediction"]["loglikelihoods"]
        (((ref_logprob, ref_greedy),),) = entry["resps"]  # one instance, one repeat
        assert abs(logprob - float(ref_logprob)) < TOL and greedy == (ref_greedy in (True, "True")), doc_id
        assert samples[doc_id]["scores"]["acc"] == entry["acc"]
    results = ref["results"]["harness_parity_loglik"]
    assert metrics["acc"]["value"] == pytest.approx(results["acc,none"], abs=1e-12)
    assert math.isclose(metrics["perplexity"]["value"], results["perplexity,none"], rel_tol=1e-5)
    assert 0 < metrics["acc"]["value"] < 1  # some words are the greedy continuation, some are not


def test_rolling_loglikelihood_equals_lm_eval(runs):
    _, ref, mine, _ = runs
    samples, metrics = mine["harness_parity_rolling"]
    per_doc = _per_doc(ref, "harness_parity_rolling")
    assert set(per_doc) == set(samples)
    for doc_id, (entry,) in per_doc.items():
        (logprob, _greedy, _n), = samples[doc_id]["prediction"]["loglikelihoods"]
        assert abs(logprob - float(entry["resps"][0][0])) < TOL, doc_id
    results = ref["results"]["harness_parity_rolling"]
    for metric in ("word_perplexity", "byte_perplexity", "bits_per_byte"):
        assert math.isclose(metrics[metric]["value"], results[f"{metric},none"], rel_tol=1e-5), metric
        assert metrics[metric]["ci_low"] <= metrics[metric]["value"] <= metrics[metric]["ci_high"]


def test_mmlu_redux_native_and_lmeval_equal_lm_eval(runs):
    ref, _, mine, native = runs
    per_doc = _per_doc(ref, "harness_parity_mmlu_redux")
    lm_samples, lm_metrics = mine["harness_parity_mmlu_redux"]
    _assert_same_metrics(per_doc, lm_samples)
    nat_samples, nat_metrics = native
    assert len(nat_samples) == len(per_doc) == 285
    # the native task's sample ids are subject-row; lm-eval's document ids count the file's lines
    by_doc = {str(i): row for i, row in enumerate(_file_order(nat_samples))}
    for doc_id, (entry,) in per_doc.items():
        row = by_doc[doc_id]
        for metric in ("acc", "acc_norm"):
            assert row["scores"][metric] == entry[metric], (doc_id, metric)
        for (logprob, _g, _n), ((ref_logprob, _rg),) in zip(row["prediction"]["loglikelihoods"], entry["resps"],
                                                            strict=True):
            assert abs(logprob - float(ref_logprob)) < TOL
    results = ref["results"]["harness_parity_mmlu_redux"]
    for metric in ("acc", "acc_norm"):
        assert nat_metrics[metric]["value"] == pytest.approx(results[f"{metric},none"], abs=1e-12)
        assert lm_metrics[metric]["value"] == pytest.approx(results[f"{metric},none"], abs=1e-12)
        assert nat_metrics[metric]["ci_low"] < nat_metrics[metric]["value"] < nat_metrics[metric]["ci_high"]


def _file_order(samples: dict[str, dict]) -> list[dict]:
    """The native task's rows in the data file's order (its sample ids are ``subject-row``)."""
    data = ROOT / "tasks" / "mmlu" / "data" / "mmlu_redux_ok_5_per_subject.jsonl"
    ids = [f"{r['subject']}-{r['row']}" for r in map(json.loads, data.read_text(encoding="utf-8").split("\n")[:-1])]
    return [samples[i] for i in ids]
