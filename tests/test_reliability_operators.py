"""Reliability operators against a known channel: answers are correct with probability p.

``ChannelModel`` implements the Model protocol: each question carries its target (``target=N``);
a generator call answers ``#### N`` with probability p (seeded by prompt, seed and temperature),
else ``#### N+1`` (a binary channel, so majority vote follows the binomial formula exactly); judge
calls score 9/10 for a correct response and 2/10 for a wrong one (0 with no answer); critic calls
report an issue exactly when the response is wrong; correction calls are correct with ``p_fix``
(or give no answer at all with ``fix_breaks``). It counts every token it emits, so the operators'
usage can be checked against the channel's own tally.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from harness.models.operators import prompts
from harness.models.operators.base import OperatorError
from harness.models.operators.extract import extract_auto, extract_choice, extract_code, extract_number
from harness.models.operators.rateless import fountain_temperature
from harness.modelspec import build_model
from harness.types import GenerationConfig, Message, Output, Request, Usage, stable_hash

TARGET = re.compile(r"target=(-?\d+)")


@dataclass
class ChannelModel:
    p: float
    p_fix: float = 1.0
    fix_breaks: bool = False
    spec: str = "channel"
    batch_size: int = 64
    concurrency: int = 1
    modalities: frozenset[str] = frozenset({"text"})
    cacheable: bool = False
    tally: Usage = field(default_factory=Usage)
    roles: list[str] = field(default_factory=list)

    def _rng(self, text: str, cfg: GenerationConfig) -> random.Random:
        return random.Random(stable_hash([text, cfg.seed, cfg.temperature]))

    def reply(self, r: Request) -> str:
        text = r.messages[-1].text_content
        target = int(TARGET.search(text).group(1))
        rng = self._rng(text, r.config)
        if "Reply with a single line 'Score: N'" in text:
            self.roles.append("judge")
            response = text.split("## Response", 1)[1].split("Reply with a single line", 1)[0]
            answer = extract_number(response) if "####" in response else None
            return "Score: 0" if answer is None else ("Score: 9" if answer == str(target) else "Score: 2")
        if "List the concrete errors" in text:
            self.roles.append("critic")
            response = text.split("## Response", 1)[1]
            ok = extract_number(response.split("List the concrete errors")[0]) == str(target)
            return '{"issues": []}' if ok else '{"issues": [{"problem": "wrong total", "severity": "major"}]}'
        if "## Corrections to apply" in text:
            self.roles.append("correction")
            if self.fix_breaks:
                return "I am not sure any more."
            return f"fixed #### {target if rng.random() < self.p_fix else target + 1}"
        self.roles.append("other")
        return f"the answer #### {target if rng.random() < self.p else target + 1}"

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        outs = []
        for r in requests:
            text = self.reply(r)
            usage = Usage(sum(len(m.text_content.split()) for m in r.messages), len(text.split()), 1)
            self.tally = self.tally + usage
            outs.append(Output(text=text, usage=usage))
        return outs


def requests(n: int, seed: int = 0) -> list[Request]:
    return [Request([Message.text("user", f"Question {i}: what is the total? target={100 + i}")],
                    GenerationConfig(temperature=0.0, seed=seed), sample_id=str(i)) for i in range(n)]


def run(op, reqs: list[Request]) -> list[Output]:  # type: ignore[no-untyped-def]
    return asyncio.run(op.generate(reqs))


def correct(out: Output, req: Request) -> bool:
    return extract_number(out.text) == TARGET.search(req.messages[-1].text_content).group(1)


def binomial_majority(n: int, p: float) -> float:
    return sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n // 2 + 1, n + 1))


def operator(text: str, channel: ChannelModel):  # type: ignore[no-untyped-def]
    """Build an operator spec around the channel (the spec parser gets a registered stand-in leaf)."""
    from harness.registry import _REGISTRY, Entry

    _REGISTRY["model"]["channel"] = Entry("channel", lambda path, **s: channel, "test channel", "model")
    return build_model(text)


# ---- majority vote follows the binomial formula ------------------------------------------------------
@pytest.mark.parametrize(("n", "p"), [(5, 0.6), (3, 0.7), (7, 0.45)])
def test_majority_vote_accuracy_matches_binomial(n: int, p: float) -> None:
    trials = 1500
    op = operator(f"vote(channel:x, n={n}, extract=gsm8k)", ChannelModel(p))
    reqs = requests(trials, seed=n)
    outs = run(op, reqs)
    acc = sum(correct(o, r) for o, r in zip(outs, reqs, strict=True)) / trials
    expected = binomial_majority(n, p)
    se = math.sqrt(expected * (1 - expected) / trials)
    assert abs(acc - expected) < 4 * se, (acc, expected, se)
    # and the single-call channel itself is at p (the vote's gain is real, not an artefact)
    single = run(ChannelModel(p), [Request(r.messages, GenerationConfig(temperature=0.7, seed=i))
                                   for i, r in enumerate(reqs)])
    acc1 = sum(correct(o, r) for o, r in zip(single, reqs, strict=True)) / trials
    assert abs(acc1 - p) < 4 * math.sqrt(p * (1 - p) / trials)


def test_vote_details_and_tie_break() -> None:
    op = operator("vote(channel:x, n=4)", ChannelModel(0.5))
    outs = run(op, requests(200))
    for o in outs:
        votes = o.details["votes"]
        assert sum(votes.values()) == 4 and o.details["cost"]["calls"] == 4
        top = max(votes.values())
        leaders = [a for a, v in votes.items() if v == top]
        answers = [c["answer"] for c in [{"answer": extract_auto(t["text"])} for t in o.details["trace"]]]
        # a tie goes to the answer seen first among the leaders
        assert o.details["answer"] == next(a for a in answers if a in leaders)


# ---- rateless sampling stops as its rule says ----------------------------------------------------------
def _agreement_rule(answers: list[str | None], lo: int, hi: int, stop_at: float) -> int:
    for n in range(lo, hi + 1):
        window = [a for a in answers[:n] if a is not None]
        share = max(window.count(a) for a in set(window)) / n if window else 0.0
        if share >= stop_at:
            return n
    return hi


@pytest.mark.parametrize("p", [1.0, 0.8, 0.5])
def test_rateless_agreement_rule_stops_where_the_rule_fires(p: float) -> None:
    channel = ChannelModel(p)
    op = operator("rateless(channel:x, rule=agreement, min_samples=2, max_samples=8, stop_at=0.75)", channel)
    outs = run(op, requests(150, seed=3))
    stopped_by_rule = 0
    for o in outs:
        trace = o.details["trace"]
        assert all(c["role"] == "generator" for c in trace)
        answers = [extract_auto(c["text"]) for c in trace]
        assert len(trace) == o.details["samples"] == _agreement_rule(answers, 2, 8, 0.75)
        assert 2 <= len(trace) <= 8
        stopped_by_rule += o.details["stopped_by"] == "rule"
    if p == 1.0:
        assert all(len(o.details["trace"]) == 2 for o in outs)
    if p == 0.5:  # a fair coin often never reaches 75% agreement: the cap must end those
        assert stopped_by_rule < len(outs)


def test_rateless_confidence_rule_and_temperature_schedule() -> None:
    op = operator("rateless(channel:x, max_samples=10)", ChannelModel(0.5))
    outs = run(op, requests(120, seed=5))
    for o in outs:
        qs = [c["quality"] for c in o.details["candidates"]]
        n = len(qs)
        expected_n = None
        for m in range(2, 11):
            top = sorted(qs[:m], reverse=True)[: max(2, m // 2)]
            conf = 0.6 * sum(qs[:m]) / m + 0.4 * (1 - (max(top) - min(top)))
            if conf >= 0.85:
                expected_n = m
                break
        assert n == (expected_n or 10)
        gens = [c for c in o.details["trace"] if c["role"] == "generator"]
        judges = [c for c in o.details["trace"] if c["role"] == "judge"]
        assert len(gens) == len(judges) == n
    assert [fountain_temperature(i) for i in range(7)] == [0.5, 0.6, 0.7, 0.8, 0.9, 0.5, 0.6]


# ---- every call's cost is accounted -------------------------------------------------------------------
SPECS = [
    "select(channel:x)", "vote(channel:x)", "self_consistency(channel:x)", "egc(channel:x)", "mrc(channel:x)",
    "egc(channel:x, combine='answer')", "mrc(channel:x, combine='answer')", "wbon(channel:x)", "chase(channel:x)",
    "ir(channel:x)", "turbo(channel:x)", "rateless(channel:x)", "rateless(channel:x, rule='agreement')",
    "fec(channel:x)", "fec(channel:x, rate=0.25)", "adaptive(channel:x)",
]


@pytest.mark.parametrize("spec", SPECS)
def test_every_call_is_accounted(spec: str) -> None:
    channel = ChannelModel(0.6, p_fix=0.7)
    priced = spec[:-1] + ", price_in=2.0, price_out=8.0)"
    op = operator(priced, channel)
    reqs = requests(40, seed=11)
    outs = run(op, reqs)
    total = Usage()
    for o in outs:
        assert o.error is None, o.error
        trace = o.details["trace"]
        assert o.usage.calls == len(trace) == o.details["cost"]["calls"]
        assert o.usage.input_tokens == sum(c["input_tokens"] for c in trace)
        assert o.usage.output_tokens == sum(c["output_tokens"] for c in trace)
        for c in trace:
            assert c["cost"] == pytest.approx(c["input_tokens"] * 2.0 / 1e6 + c["output_tokens"] * 8.0 / 1e6)
        split = o.details["cost"]
        assert split["basis"] == "usd"
        assert o.usage.cost == pytest.approx(split["total"]) == pytest.approx(sum(c["cost"] for c in trace))
        assert split["total"] == pytest.approx(split["generator"] + split["overhead"])
        assert split["judge"] == pytest.approx(sum(c["cost"] for c in trace if c["role"] == "judge"))
        first = next(c for c in trace if c["role"] == "generator")
        assert split["normalised"] == pytest.approx(split["total"] / first["cost"])
        total = total + o.usage
    # the operator's books agree with what the channel itself served
    assert (total.calls, total.input_tokens, total.output_tokens) == (
        channel.tally.calls, channel.tally.input_tokens, channel.tally.output_tokens)


def test_unpriced_models_normalise_by_tokens() -> None:
    o = run(operator("vote(channel:x, n=3)", ChannelModel(1.0)), requests(1))[0]
    split = o.details["cost"]
    assert split["basis"] == "tokens" and o.usage.cost == 0.0
    assert split["normalised"] == pytest.approx(3.0)  # three identical plain calls


# ---- operator-specific behaviour ------------------------------------------------------------------------
def test_chase_resends_until_the_verifier_passes() -> None:
    outs = run(operator("chase(channel:x)", ChannelModel(1.0)), requests(5))
    assert all(o.details["rounds"] == 1 and o.details["passed"] for o in outs)
    outs = run(operator("chase(channel:x, max_rounds=3)", ChannelModel(0.0)), requests(5))
    for o in outs:
        roles = [c["role"] for c in o.details["trace"]]
        assert roles == ["generator", "judge"] * 3 + ["synthesis"] and not o.details["passed"]
    channel = ChannelModel(0.5)
    outs = run(operator("chase(channel:x)", channel), requests(300, seed=2))
    reqs = requests(300, seed=2)
    # resend-until-correct with a perfect verifier: P(fail) = 0.5^5 before synthesis
    acc = sum(correct(o, r) for o, r in zip(outs, reqs, strict=True)) / 300
    assert acc > 0.9


def test_incremental_redundancy_keeps_the_best() -> None:
    outs = run(operator("ir(channel:x)", ChannelModel(0.0, p_fix=1.0)), requests(20))
    reqs = requests(20)
    assert all(correct(o, r) for o, r in zip(outs, reqs, strict=True))
    assert all([c["role"] for c in o.details["trace"]] == ["generator", "judge", "critic", "generator", "judge"]
               for o in outs)
    outs = run(operator("ir(channel:x, max_rounds=3)", ChannelModel(0.0, fix_breaks=True)), requests(10))
    for o in outs:  # corrections lose the answer: regression protection keeps the first reply
        assert "the answer ####" in o.text
        assert [h.get("accepted") for h in o.details["rounds"]] == [True, False, False]


def test_turbo_stops_after_two_regressions_and_keeps_the_best() -> None:
    outs = run(operator("turbo(channel:x)", ChannelModel(0.0, fix_breaks=True)), requests(10))
    for o in outs:
        assert o.details["stop"] == "regressions"
        assert o.details["qualities"] == [0.2, 0.0, 0.0]
        assert "the answer ####" in o.text
        roles = [c["role"] for c in o.details["trace"]]
        assert roles == ["generator", "judge"] + ["critic", "generator", "judge"] * 2
    outs = run(operator("turbo(channel:x)", ChannelModel(0.0, p_fix=1.0)), requests(10))
    assert all(o.details["stop"] == "threshold" and o.details["qualities"] == [0.2, 0.9] for o in outs)


def test_turbo_damping_limits_corrections() -> None:
    op = operator("turbo(channel:x, alpha=0.5, max_corrections=2)", ChannelModel(0.5))
    issues = [{"severity": s} for s in ("minor", "major", "critical", "major", "major", "major")]
    kept = op.damp(issues, 0.5)
    assert [i["severity"] for i in kept] == ["critical", "major"]  # ceil(0.5*5)=3, capped at 2; minor dropped
    assert len(op.damp(issues, 0.1)) == 1


def test_selection_and_weighted_combining_pick_judged_best() -> None:
    reqs = requests(200, seed=4)
    for spec in ("select(channel:x)", "wbon(channel:x)", "mrc(channel:x, combine='answer')"):
        outs = run(operator(spec, ChannelModel(0.4)), reqs)
        acc = sum(correct(o, r) for o, r in zip(outs, reqs, strict=True)) / len(reqs)
        # a perfect judge finds a correct sample whenever one exists: 1 - 0.6^5
        expected = 1 - 0.6**5
        assert abs(acc - expected) < 4 * math.sqrt(expected * (1 - expected) / len(reqs)), (spec, acc)


def test_fec_parity_calls_follow_the_code_rate() -> None:
    for rate, parity in ((0.75, 1), (0.5, 2), (0.33, 3), (0.25, 4), (0.3, 3)):
        o = run(operator(f"fec(channel:x, rate={rate})", ChannelModel(1.0)), requests(1))[0]
        roles = [c["role"] for c in o.details["trace"]]
        assert roles == ["generator"] * (1 + parity) + ["synthesis"], rate


def test_adaptive_routes_by_pilot_quality() -> None:
    easy = run(operator("adaptive(channel:x)", ChannelModel(1.0)), requests(5))
    assert all(o.details["route"] == "easy" and o.usage.calls == 2 for o in easy)
    strong = ChannelModel(1.0, spec="strong")
    weak = ChannelModel(0.0, spec="weak")
    from harness.models.operators.adaptive import Adaptive

    outs = run(Adaptive(weak, strong, n=2), requests(5))
    reqs = requests(5)
    for o, r in zip(outs, reqs, strict=True):
        assert o.details["route"] == "hard" and correct(o, r)
        assert [c["model"] for c in o.details["trace"] if c["role"] == "generator"] == ["weak", "strong", "strong"]


def test_bad_parameters_are_clear_errors() -> None:
    with pytest.raises(OperatorError, match="unknown parameter"):
        operator("vote(channel:x, m=3)", ChannelModel(1.0))
    with pytest.raises(OperatorError, match="n must be"):
        operator("vote(channel:x, n=0)", ChannelModel(1.0))
    with pytest.raises(ValueError, match="unknown extractor"):
        operator("vote(channel:x, extract=latex)", ChannelModel(1.0))


def test_failed_inner_call_is_a_per_sample_error() -> None:
    @dataclass
    class Broken(ChannelModel):
        async def generate(self, requests: Sequence[Request]) -> list[Output]:
            return [Output(error="HTTP 500") for _ in requests]

    outs = run(operator("vote(channel:x, n=3)", Broken(1.0)), requests(2))
    assert all(o.error and "HTTP 500" in o.error and o.usage.calls == 3 for o in outs)


# ---- extractors and parsers -----------------------------------------------------------------------------
def test_extractors() -> None:
    assert extract_number("so #### $1,234.00") == "1234"
    assert extract_number("it is 3.50 then 7") == "7"
    assert extract_choice("Thinking...\nAnswer: C") == "C"
    assert extract_choice("I pick (B).") == "B"
    assert extract_auto("the answer is a bit unclear, 12") == "12"
    assert extract_code("```python\ndef f(x):  # add\n    return  x+1\n```") == "def f(x):\nreturn x+1"
    assert prompts.parse_judge("Score: 7") == 0.7 and prompts.parse_judge("8/10") == 0.8
    assert prompts.parse_judge("no idea") is None and prompts.parse_judge("Score: 15") == 1.0
    assert prompts.parse_judge(" 6.\n") == 0.6 and prompts.parse_judge("#### 10") is None
    assert prompts.parse_issues('```json\n{"issues": [{"problem": "x"}]}\n```') == [{"problem": "x"}]
    assert prompts.parse_issues("[]") == [] and prompts.parse_issues("looks fine") is None
    assert prompts.issues_or_raw("step 2 is wrong") == [{"problem": "step 2 is wrong"}]
    assert prompts.issues_or_raw('{"issues": []}') == [] and prompts.issues_or_raw("  ") == []


def test_judge_last_uses_the_last_model_as_judge() -> None:
    gen, judge = ChannelModel(0.0, spec="gen"), ChannelModel(1.0, spec="judge")
    from harness.models.operators.diversity import Select

    op = Select(gen, judge, judge="last", n=2)
    assert op.channels == [gen] and op.judge_model is judge
    out = run(op, requests(1))[0]
    roles = [(c["role"], c["model"]) for c in out.details["trace"]]
    assert roles == [("generator", "gen")] * 2 + [("judge", "judge")] * 2
    assert "judge='judge'" in op.spec  # the judge's own spec is part of the operator's identity
    with pytest.raises(OperatorError, match="judge='last'"):
        Select(gen, judge="last")
