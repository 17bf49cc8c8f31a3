"""Operators over the OpenAI-compatible backend against the scripted local server (a known channel).

The server answers ``#### <target>`` with probability p, keyed on (prompt, seed, temperature) so
that the operator's differently seeded samples are independent draws, else ``#### <target + 1>``;
judge prompts get ``Score: 9`` for a correct response and ``Score: 2`` otherwise.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
from typing import Any

import pytest
from openai_server import last_user_text, scripted_server  # noqa: F401  (fixture)

from harness.modelspec import build_model
from harness.types import GenerationConfig, Message, Request

TARGET = re.compile(r"target=(\d+)")


def channel(p: float):  # type: ignore[no-untyped-def]
    def reply(body: dict[str, Any]) -> str:
        text = last_user_text(body)
        target = int(TARGET.search(text).group(1))
        if "Reply with a single line 'Score: N'" in text:
            response = text.split("## Response", 1)[1]
            return "Score: 9" if f"#### {target}\n" in response + "\n" else "Score: 2"
        key = f"{text}\0{body.get('seed')}\0{body.get('temperature')}"
        u = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64
        return f"#### {target if u < p else target + 1}"

    return reply


def _requests(n: int) -> list[Request]:
    return [Request([Message.text("user", f"Question {i}? target={500 + i}")],
                    GenerationConfig(temperature=0.0, max_tokens=16, seed=1)) for i in range(n)]


def _correct(text: str, i: int) -> bool:
    return text.strip().endswith(f"#### {500 + i}")


def test_vote_over_http_matches_binomial_and_accounts_costs(scripted_server) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    srv = scripted_server
    srv.set_reply(channel(0.6))
    trials, n = 400, 5
    op = build_model(f"vote(openai:chan, n={n}, extract=gsm8k)",
                     {"base_url": srv.base_url, "price_in": 1.0, "price_out": 4.0})

    async def go():  # type: ignore[no-untyped-def]
        try:
            return await op.generate(_requests(trials))
        finally:
            await op.aclose()

    outs = asyncio.run(go())
    acc = sum(_correct(o.text, i) for i, o in enumerate(outs)) / trials
    expected = sum(math.comb(n, k) * 0.6**k * 0.4 ** (n - k) for k in range(3, n + 1))
    assert abs(acc - expected) < 4 * math.sqrt(expected * (1 - expected) / trials), (acc, expected)
    # every HTTP request the server saw is one traced call, priced from the backend's own usage
    assert sum(o.usage.calls for o in outs) == len(srv.requests) == trials * n
    for o in outs:
        for c in o.details["trace"]:
            assert c["cost"] == pytest.approx(c["input_tokens"] * 1.0 / 1e6 + c["output_tokens"] * 4.0 / 1e6)
        assert o.usage.cost == pytest.approx(o.details["cost"]["total"])
        assert o.details["cost"]["normalised"] == pytest.approx(5.0)


def test_chase_over_http_uses_the_judge(scripted_server) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    srv = scripted_server
    srv.set_reply(channel(0.5))
    op = build_model("chase(openai:chan, max_rounds=4)", {"base_url": srv.base_url})

    async def go():  # type: ignore[no-untyped-def]
        try:
            return await op.generate(_requests(60))
        finally:
            await op.aclose()

    outs = asyncio.run(go())
    for i, o in enumerate(outs):
        roles = [c["role"] for c in o.details["trace"]]
        if o.details["passed"]:
            assert _correct(o.text, i) and roles == ["generator", "judge"] * o.details["rounds"]
        else:
            assert roles == ["generator", "judge"] * 4 + ["synthesis"]
    assert sum(o.usage.calls for o in outs) == len(srv.requests)
    # P(no correct sample in 4 tries) = 1/16: most samples pass
    assert sum(o.details["passed"] for o in outs) > 45
