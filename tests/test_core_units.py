"""Small pieces of the core: statistics, spec parsing, registry, types, GSM8K extraction."""

from __future__ import annotations

import numpy as np
import pytest

from harness.modelspec import ModelSpecError, build_model, parse_spec, parse_value
from harness.registry import UnknownNameError, lookup, model, task
from harness.stats import mean_ci, paired_test
from harness.tasks.gsm8k.task import extract_flexible, extract_strict, same_number
from harness.types import GenerationConfig, Message, Output, Part, Request, Usage, stable_hash


def test_bootstrap_ci_is_seeded_and_covers_the_truth():
    rng = np.random.default_rng(1)
    hits = 0
    for _ in range(200):
        x = rng.binomial(1, 0.3, size=200)
        est = mean_ci(x, seed=0)
        hits += est.ci_low <= 0.3 <= est.ci_high
    assert 0.90 <= hits / 200 <= 0.99  # nominal 95%
    x = rng.normal(size=50)
    assert mean_ci(x, seed=3) == mean_ci(x, seed=3)
    assert mean_ci([]).n == 0 and np.isnan(mean_ci([]).value)
    assert mean_ci([1.0, 1.0, 1.0]).ci_low == 1.0


def test_large_n_uses_normal_interval():
    x = np.r_[np.ones(15000), np.zeros(15000)]
    est = mean_ci(x)
    half = 1.96 * x.std(ddof=1) / np.sqrt(x.size)
    assert est.ci_high - est.value == pytest.approx(half, rel=1e-3)


def test_paired_tests():
    a = [1, 1, 0, 0, 1, 0, 1, 0, 1, 1] * 5
    b = [1, 1, 1, 1, 1, 0, 1, 1, 1, 1] * 5
    r = paired_test(a, b)
    # 15 discordant pairs all in B's favour: exact two-sided McNemar p = 2 * 0.5**15
    assert r.p_value == pytest.approx(2 * 0.5**15)
    assert r.diff == pytest.approx(0.3)
    same = paired_test(a, a)
    assert same.p_value == 1.0
    rng = np.random.default_rng(0)
    x = rng.normal(size=100)
    shifted = paired_test(x, x + 0.5, rounds=2000)
    assert shifted.p_value < 0.01 and "permutation" in shifted.test
    noise = paired_test(x, x + rng.normal(scale=0.01, size=100), rounds=2000)
    assert noise.p_value > 0.01
    with pytest.raises(ValueError):
        paired_test([1, 2], [1])


def test_spec_grammar():
    node = parse_spec("vote(hf:./m, n=5, extract='gsm8k')")
    assert node.name == "vote" and node.params == {"n": 5, "extract": "gsm8k"}
    assert node.args[0].name == "hf" and node.args[0].path == "./m"
    nested = parse_spec("route(vote(a:x, n=3), critic(b:y, c:z, rounds=2))")
    assert [a.name for a in nested.args] == ["vote", "critic"]
    assert [a.path for a in nested.args[1].args] == ["y", "z"]
    assert parse_spec("openai:gpt-4o-2024-08-06").path == "gpt-4o-2024-08-06"
    assert parse_spec("vllm:Qwen/Qwen2.5-Omni-7B").path == "Qwen/Qwen2.5-Omni-7B"
    assert parse_value("0.7") == 0.7 and parse_value("true") is True and parse_value("abc") == "abc"
    # an operator without a model inside is refused; a backend called with keywords is that backend
    with pytest.raises(ModelSpecError, match="needs at least one model"):
        build_model("vote(n=3)")
    assert build_model("builtin(text=hi)").spec == "builtin:echo?text=hi"
    with pytest.raises(ModelSpecError, match="did you mean 'temperature'"):
        build_model("builtin(temprature=1)")


def test_registry_decorators_and_did_you_mean():
    @task("unit_test_task_xyz", description="a test task")
    def _t():
        return None

    @model("unit_test_op_xyz", operator=True)
    def _op(inner, k: int = 1):
        return (inner, k)

    assert lookup("task", "unit_test_task_xyz").description == "a test task"
    with pytest.raises(UnknownNameError, match="did you mean 'unit_test_task_xyz'"):
        lookup("task", "unit_test_task_xy")
    built = build_model("unit_test_op_xyz(builtin:echo, k=4)")
    assert built[1] == 4 and built[0].spec == "builtin:echo"
    with pytest.raises(ModelSpecError, match="backend, not an operator"):
        build_model("builtin(builtin:echo)")


def test_types_round_trip_and_hash():
    msg = Message("user", [Part("text", "hi"), Part("video", path="/v.mp4", options={"fps": 1})])
    assert Message.from_dict(msg.to_dict()) == msg
    assert Message.from_dict({"role": "user", "content": "plain"}).text_content == "plain"
    out = Output("x", prediction={"a": 1}, usage=Usage(3, 4, 1, 0.5, 0.01), error=None)
    assert Output.from_dict(out.to_dict()) == out
    assert stable_hash({"a": 1, "b": 2}) == stable_hash({"b": 2, "a": 1})
    r1 = Request([msg], GenerationConfig(temperature=0.0))
    r2 = Request([msg], GenerationConfig(temperature=0.7))
    assert r1.fingerprint() != r2.fingerprint()
    cfg = GenerationConfig().merged({"temperature": 0.5, "top_k": 20})
    assert cfg.temperature == 0.5 and cfg.extra == {"top_k": 20}
    assert (Usage(1, 2, 1, 1.0, 0.5) + Usage(1, 1, 1, 1.0, 0.5)).cost == 1.0


@pytest.mark.parametrize(
    "reply, strict, flexible",
    [
        ("She makes 9 * 2 = 18 dollars.\n#### 18", "18", "18"),
        ("The answer is $1,234.", None, "1234"),
        ("#### -5.", "-5", "-5"),
        ("no numbers here", None, None),
        ("first 3 then 4 and finally 7.5", None, "7.5"),
    ],
)
def test_gsm8k_extraction(reply, strict, flexible):
    assert extract_strict(reply) == strict
    assert extract_flexible(reply) == flexible


def test_gsm8k_numeric_equality():
    assert same_number("18.00", "18") and same_number("18", "18")
    assert not same_number("19", "18") and not same_number(None, "18")


def test_generation_config_merge_stop_and_extra():
    base = GenerationConfig(stop=["\n"])
    assert base.merged({"stop": "###"}).stop == ["###"]
    assert base.merged({"stop": ["a", "b"]}).stop == ["a", "b"]
    assert base.merged({"temperature": 1.0}).stop == ["\n"]
    assert base.merged({"top_k": 5}).extra == {"top_k": 5} and base.extra == {}
