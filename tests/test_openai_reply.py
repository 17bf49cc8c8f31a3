"""The openai adapter's reply parsing: plain replies read straight from the JSON give exactly what the
SDK's models give (every generated shape the fast path accepts is checked against them), and every
other shape still goes through the SDK."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from harness.models.openai_reply import BadReply, parse_reply, read_plain, read_validated

CONTENTS: list[Any] = ["4", "", None, "ü ✓ \u0000", 4, ["part"]]
FINISH: list[Any] = ["stop", "length", None, "eos", 3]
USAGES: list[Any] = [
    "absent", None, {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}, {"prompt_tokens": 7},
    {}, {"prompt_tokens": 7.0, "completion_tokens": 2}, {"prompt_tokens": "7", "completion_tokens": 2},
    {"prompt_tokens": True, "completion_tokens": 2}, {"prompt_tokens": None, "completion_tokens": 0}, [1],
]
MESSAGE_EXTRAS: list[dict[str, Any]] = [{}, {"refusal": "no"}, {"refusal": None}, {"reasoning_content": "because"},
                                        {"tool_calls": None}]
ENVELOPES: list[dict[str, Any]] = [{"id": "x", "object": "chat.completion", "created": 1, "model": "m"}, {}]


def _replies(mode: str) -> list[Any]:
    out: list[Any] = []
    for content, finish, usage, extra, env in itertools.product(CONTENTS, FINISH, USAGES, MESSAGE_EXTRAS, ENVELOPES):
        if mode == "chat":
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": content, **extra},
                                      "finish_reason": finish}
        else:
            choice = {"index": 0, "text": content, "finish_reason": finish, "logprobs": None}
        reply = {**env, "object": env.get("object", "x") if mode == "chat" else "text_completion", "choices": [choice]}
        if usage != "absent":
            reply["usage"] = usage
        out.append(reply)
    out += [{"choices": []}, {"choices": "x"}, {"choices": [None]}, {"choices": [{"message": None}]}, [], "text", None,
            {"choices": [{"message": {"content": "4"}, "logprobs": {"content": [
                {"token": "4", "logprob": -0.1, "bytes": None, "top_logprobs": []}]}}]}]
    return out


def _outcome(fn: Any, data: Any, mode: str) -> Any:
    try:
        return fn(data, mode)
    except BadReply as exc:
        return ("BadReply", str(exc))


@pytest.mark.parametrize("mode", ["chat", "completion"])
def test_plain_replies_read_as_the_sdk_reads_them(mode: str) -> None:
    fast = 0
    for data in _replies(mode):
        plain = read_plain(data, mode)
        if plain is None:
            continue
        fast += 1
        assert plain == _outcome(read_validated, data, mode), data
        assert all(type(plain[i]) is int for i in (2, 3)) and type(plain[0]) is str
    assert fast > 100  # the common shapes do take the fast path


def test_other_shapes_go_through_the_sdk() -> None:
    # logprobs, refusals, reasoning and odd types are the SDK's to read
    logprobs = {"choices": [{"message": {"content": "4"}, "logprobs": {"content": [
        {"token": "4", "logprob": -0.1, "bytes": None, "top_logprobs": []}]}}]}
    assert read_plain(logprobs, "chat") is None
    text, lp, _, _, _ = parse_reply(logprobs, "chat")
    assert text == "4" and lp == [{"token": "4", "logprob": -0.1, "top_logprobs": []}]
    refusal = {"choices": [{"message": {"content": None, "refusal": "no"}, "finish_reason": "stop"}]}
    assert read_plain(refusal, "chat") is None and parse_reply(refusal, "chat")[4]["refusal"] == "no"
    reasoning = {"choices": [{"message": {"content": "4", "reasoning_content": "2+2"}}]}
    assert parse_reply(reasoning, "chat")[4]["reasoning"] == "2+2"
    for bad, msg in [([], "not an object"), ({"choices": []}, "no choices"), ({"choices": [{"message": None}]},
                                                                            "no message")]:
        with pytest.raises(BadReply, match=msg):
            parse_reply(bad, "chat")
