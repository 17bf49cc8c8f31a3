"""Completion and scoring requests on the vLLM adapter (vLLM's CPU build, in its own venv) against the
``hf:`` backend on the same weights.

Two engine starts in all: the embedded SmolLM2 (the folder ``hf:smollm2-135m-instruct`` loads) in
process for everything but data parallelism, and the tiny random model in one Ray actor for the
data-parallel executor. Both backends run float32 (vLLM: ``-M dtype=float32``; hf: its CPU default).

Tolerance: |vLLM - hf| on a summed loglikelihood was measured at most 3.8e-5 for the pairs here (sums
down to -24), 5.2e-5 for a rolling text in three windows (-98) and 4.0e-5 on mmlu_redux prompts of up
to 530 tokens; the tests allow TOLERANCE = 2e-4. Greedy flags are compared where the hf model's
margin at the deciding position exceeds MARGIN (5x the tolerance); all pairs here clear it.
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest
from vllm_checks.ll_cases import (
    COMPLETION_PROMPT,
    COMPLETIONS,
    LONG_PROMPT,
    PAIRS,
    ROLLING,
    SHORT,
    SHORT_PAIRS,
    TOO_LONG,
)
from vllm_checks.venv_runner import run_check, tiny_model, vllm_python

from harness.loglikelihood import encode_pair, encode_plain
from harness.models import hf_embedded
from harness.models.hf_scoring import encoder, prefix_token
from harness.modelspec import build_model
from harness.types import GenerationConfig, Loglikelihood, Output, Request

pytestmark = pytest.mark.slow

TOLERANCE = 2e-4
MARGIN = 1e-3
MAX_MODEL_LEN = 512  # tests/vllm_checks/loglikelihood.py's engine


def run(model: Any, requests: list[Request]) -> list[Output]:
    return asyncio.run(model.generate(requests))


def lls(out: dict[str, Any]) -> list[Loglikelihood]:
    assert out["error"] is None, out["error"]
    return [Loglikelihood.from_any(v) for v in out["loglikelihoods"]]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    vllm_python()
    return tmp_path_factory.mktemp("vllm-ll")


@pytest.fixture(scope="module")
def smol_dir() -> Path:
    return hf_embedded.ensure_converted("smollm2-135m-instruct")


@pytest.fixture(scope="module")
def vllm(work: Path, smol_dir: Path) -> dict[str, Any]:
    return run_check("loglikelihood.py", "engine", str(smol_dir), str(work), tmp=work, timeout=900)


@pytest.fixture(scope="module")
def hf(smol_dir: Path) -> Any:
    return build_model("hf:smollm2-135m-instruct", {})


@pytest.fixture(scope="module")
def hf_short(smol_dir: Path) -> Any:
    return build_model("hf:smollm2-135m-instruct", {"max_length": SHORT})


def assert_close(got: list[Loglikelihood], want: list[Loglikelihood]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.tokens == w.tokens  # the same tokenisation: the same scored tokens
        assert g.logprob == pytest.approx(w.logprob, abs=TOLERANCE)


def greedy_is_clear(model: Any, pair: tuple[str, str]) -> bool:
    """Whether the hf model's greedy verdict on ``pair`` holds by more than MARGIN: every scored token
    beats the runner-up by that much, or some token is beaten by that much."""
    import torch

    tok = model.tokenizer
    tp = encode_pair(encoder(tok), *pair, prefix_token(tok))
    with torch.inference_mode():
        logits = model.hf_model(input_ids=torch.tensor([list(tp.model_input(10_000))])).logits[0].float()
    rows = torch.log_softmax(logits, dim=-1)[-len(tp.continuation):]
    gaps = []
    for row, target in zip(rows, tp.continuation, strict=True):
        others = row.clone()
        others[target] = -math.inf
        gaps.append(float(row[target] - others.max()))
    return min(gaps) > MARGIN or any(g < -MARGIN for g in gaps)


# ---- loglikelihood ----------------------------------------------------------------------------------
def test_every_kind_is_declared(vllm: dict[str, Any], smol_dir: Path) -> None:
    assert vllm["kinds"] == ["chat", "completion", "loglikelihood", "loglikelihood_rolling"]
    assert vllm["spec"] == f"vllm:{smol_dir}?dtype=float32&max_model_len={MAX_MODEL_LEN}"


def test_loglikelihoods_equal_the_hf_backend(vllm: dict[str, Any], hf: Any) -> None:
    outs = vllm["batch"]["outputs"]
    got = lls(outs[0]) + lls(outs[2])
    (want,) = run(hf, [Request.loglikelihood(PAIRS)])
    assert want.loglikelihoods is not None
    assert_close(got, want.loglikelihoods)
    clear = [i for i, pair in enumerate(PAIRS) if greedy_is_clear(hf, pair)]
    assert len(clear) == len(PAIRS)  # the cases were chosen so: a near tie would make this check weaker
    assert [got[i].greedy for i in clear] == [want.loglikelihoods[i].greedy for i in clear]
    assert {g.greedy for g in got} == {True, False}  # both verdicts occur


def test_one_engine_call_and_batch_mates_change_nothing(vllm: dict[str, Any]) -> None:
    batch = vllm["batch"]
    assert batch["engine_calls"] == 1  # four scoring requests (one refused before the call), one generate()
    together = lls(batch["outputs"][0]) + lls(batch["outputs"][2])
    alone = [lls(o)[0] for o in vllm["alone"]]
    for a, b in zip(alone, together, strict=True):
        assert a.logprob == pytest.approx(b.logprob, abs=1e-5) and a.greedy == b.greedy and a.tokens == b.tokens


def test_edge_cases_follow_lm_evals_boundary(vllm: dict[str, Any], hf: Any) -> None:
    got = lls(vllm["batch"]["outputs"][0]) + lls(vllm["batch"]["outputs"][2])
    by_pair = dict(zip(PAIRS, got, strict=True))
    tok = hf.tokenizer
    # an empty context is the prefix token alone: the whole continuation is scored
    empty = by_pair[("", "Hello there")]
    assert empty.tokens == len(encode_plain(encoder(tok), "Hello there")) and empty.logprob < 0
    # a context's trailing space moves to the continuation: the same tokens, one prompt, the same value
    assert by_pair[("Answer: ", "B")] == by_pair[("Answer:", " B")]
    # a continuation of several tokens
    multi = by_pair[("The capital of France is", " Berlin, a large city in Germany.")]
    assert multi.tokens > 5 and not multi.greedy
    assert by_pair[("1, 2, 3, 4, 5,", " 6, 7, 8")].greedy


def test_a_bad_pair_fails_its_request_alone(vllm: dict[str, Any]) -> None:
    good, bad, other = vllm["batch"]["outputs"][:3]
    assert bad["error"].startswith("input:") and "adds no token" in bad["error"]
    assert bad.get("loglikelihoods") is None and bad["usage"]["calls"] == 0
    assert len(lls(good)) == 4 and len(lls(other)) == 5


def test_usage_counts_the_tokens_fed(vllm: dict[str, Any], hf: Any) -> None:
    tok = hf.tokenizer
    encode, prefix = encoder(tok), prefix_token(tok)
    first = vllm["batch"]["outputs"][0]
    pairs = [encode_pair(encode, c, x, prefix) for c, x in PAIRS[:4]]
    # each prompt is the pair's model input plus its last continuation token (one token more than hf feeds)
    assert first["usage"]["input_tokens"] == sum(len(p.model_input(MAX_MODEL_LEN - 2)) + 1 for p in pairs)
    assert first["usage"]["calls"] == 1 and first["usage"]["output_tokens"] == 0
    assert first["details"] == {"scored_units": 4, "max_length": MAX_MODEL_LEN - 2}


def test_each_prompt_is_the_model_input_and_its_last_token_run_once(hf: Any) -> None:
    from harness.models.vllm_scoring import ScoringPlan, token_rules

    rules = token_rules(hf.tokenizer, MAX_MODEL_LEN, MAX_MODEL_LEN - 2, None)
    plan = ScoringPlan.build([(0, Request.loglikelihood([("Answer: ", "B"), ("Answer:", " B"), PAIRS[0]]))], rules)
    items = plan.items()
    assert len(plan.units) == 3 and len(items) == 2  # the two spellings of one sequence share a prompt
    pair = encode_pair(rules.encode, *PAIRS[0], rules.prefix)
    assert items[1]["prompt_token_ids"] == [*pair.model_input(MAX_MODEL_LEN - 2), pair.continuation[-1]]
    assert items[1]["score_last"] == len(pair.continuation)
    assert items[1]["sampling"] == {"max_tokens": 1, "temperature": 0.0, "prompt_logprobs": 1, "detokenize": False}


# ---- rolling and the window -------------------------------------------------------------------------
def test_rolling_equals_hf_in_one_window_and_in_many(vllm: dict[str, Any], hf: Any, hf_short: Any) -> None:
    whole, empty = lls(vllm["batch"]["outputs"][3])
    (want,) = run(hf, [Request.rolling(ROLLING)])
    assert want.loglikelihoods is not None
    assert_close([whole, empty], want.loglikelihoods)
    n = len(encoder(hf.tokenizer)(ROLLING[0]))
    assert whole.tokens == n and vllm["batch"]["outputs"][3]["details"]["scored_units"] == 1
    assert empty == Loglikelihood(0.0, True, 0)
    short = vllm["short"]["outputs"][0]
    (want_short,) = run(hf_short, [Request.rolling(ROLLING[:1])])
    assert want_short.loglikelihoods is not None
    assert short["details"]["scored_units"] == math.ceil(n / SHORT) > 1  # cut into windows
    assert_close(lls(short), want_short.loglikelihoods)
    assert lls(short)[0].tokens == n  # every token scored once


def test_a_short_window_cuts_contexts_and_refuses_what_cannot_fit(vllm: dict[str, Any], hf_short: Any) -> None:
    cut, too_long = vllm["short"]["outputs"][1:]
    (want,) = run(hf_short, [Request.loglikelihood(SHORT_PAIRS)])
    assert want.loglikelihoods is not None
    assert_close(lls(cut), want.loglikelihoods)
    assert cut["usage"]["input_tokens"] == 2 * (SHORT + 1)  # both contexts reach the window: cut to it
    assert too_long["error"].startswith("input: a continuation of 10 tokens") and f" {SHORT}" in too_long["error"]
    assert too_long.get("loglikelihoods") is None and too_long["usage"]["calls"] == 0
    assert f"max_length={SHORT}" in vllm["short"]["spec"]  # a setting that changes answers is in the spec
    assert vllm["too_wide"] == (f"vllm: max_length={MAX_MODEL_LEN - 1} does not fit max_model_len={MAX_MODEL_LEN}: a "
                                f"scored prompt is max_length + 1 tokens plus one generated token, so max_length <= "
                                f"{MAX_MODEL_LEN - 2}")
    assert len(encode_plain(encoder(hf_short.tokenizer), TOO_LONG[1])) == 10 > SHORT


def test_a_window_that_cannot_fit_is_refused_before_an_engine_starts() -> None:
    from harness.models.vllm_config import parse_settings

    with pytest.raises(ValueError, match=r"max_length=600 does not fit max_model_len=512.*<= 510"):
        parse_settings("some/model", {"max_model_len": 512, "max_length": 600})
    with pytest.raises(ValueError, match="whole number >= 1"):
        parse_settings("some/model", {"max_length": 0})
    fits = parse_settings("m", {"max_model_len": 512, "max_length": 510})
    assert fits.spec == "vllm:m?max_length=510&max_model_len=512" and "max_length" not in fits.engine


# ---- completion -------------------------------------------------------------------------------------
def test_completion_is_the_raw_prompt_as_hf_encodes_it(vllm: dict[str, Any], hf: Any) -> None:
    comp = vllm["completion"]
    k = len(COMPLETIONS)
    raw, chat, long, seed_a, seed_b, seed_c, empty = comp[0], comp[k], comp[k + 1], *comp[k + 2:]
    assert all(o["error"] is None for o in comp[:-1])
    want = run(hf, [Request.completion(p, GenerationConfig(**cfg)) for p, cfg in COMPLETIONS])
    for got, ref in zip(comp[:k], want, strict=True):
        assert got["usage"]["input_tokens"] == ref.usage.input_tokens  # lm-eval's rule, the same tokens
        assert got["text"] == ref.text  # greedy, float32 on both
        assert got["usage"]["calls"] == 1 and got["usage"]["output_tokens"] > 0
    assert raw["usage"]["input_tokens"] == len(encoder(hf.tokenizer)(COMPLETION_PROMPT)) < chat["usage"]["input_tokens"]
    assert "," not in comp[2]["text"] and comp[2]["details"]["finish_reason"] == "stop"  # a stop string ends it
    # left-truncated so that prompt and max_tokens fit the engine
    assert long["usage"]["input_tokens"] == MAX_MODEL_LEN - 8 and long["error"] is None
    assert len(encoder(hf.tokenizer)(LONG_PROMPT)) > MAX_MODEL_LEN
    assert seed_a["text"] == seed_b["text"] != seed_c["text"]  # the request's seed, as in chat
    assert empty["error"] == "input: the prompt encodes to no tokens"


# ---- through the runner -----------------------------------------------------------------------------
def test_a_multiple_choice_run_stores_hfs_values(vllm: dict[str, Any], hf: Any) -> None:
    ev = vllm["eval"]
    assert ev["status"] == "finished" and len(ev["rows"]) == 6
    requests = []
    for row in ev["rows"]:
        assert row["error"] is None and row["calls"] == 1 and row["input_tokens"] > 0
        assert row["input"]["request"]["kind"] == "loglikelihood"
        requests.append(Request.loglikelihood([tuple(p) for p in row["input"]["request"]["pairs"]]))
    for row, ref in zip(ev["rows"], run(hf, requests), strict=True):
        assert ref.loglikelihoods is not None
        got = [Loglikelihood.from_any(v) for v in row["prediction"]["loglikelihoods"]]
        assert_close(got, ref.loglikelihoods)


# ---- data parallel ----------------------------------------------------------------------------------
def test_scoring_through_a_ray_replica_equals_hf(work: Path) -> None:
    model_dir = tiny_model()
    res = run_check("loglikelihood.py", "ray", str(model_dir), tmp=work, timeout=900)
    assert res["calls"] == 1  # scoring and completion items in one engine call on the replica
    pairs, rolling, completion = res["outputs"]
    hf_tiny = build_model(f"hf:{model_dir}", {})
    want = run(hf_tiny, [Request.loglikelihood(PAIRS), Request.rolling(ROLLING),
                         Request.completion(COMPLETION_PROMPT, GenerationConfig(max_tokens=8))])
    assert want[0].loglikelihoods is not None and want[1].loglikelihoods is not None
    assert_close(lls(pairs), want[0].loglikelihoods)
    assert_close(lls(rolling), want[1].loglikelihoods)
    assert completion["error"] is None and completion["usage"]["input_tokens"] == want[2].usage.input_tokens
