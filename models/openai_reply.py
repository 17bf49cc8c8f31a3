"""What an OpenAI-compatible server's 200 reply says: text, logprobs, token counts, details.

The SDK's pydantic models validate a reply (``ChatCompletion.model_validate``), which at API rates
cost more CPU than everything else the runner does per sample. A plain chat reply (a string or null
content, no logprobs, integer token counts) is read straight from the decoded JSON instead; any
other shape goes through the SDK's models as before, so both paths give the same values.
"""

from __future__ import annotations

import json
from typing import Any


def chat_logprobs(choice: Any) -> list[dict[str, Any]] | None:
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if content is None:
        return None
    return [{"token": t.token, "logprob": t.logprob,
             "top_logprobs": [{"token": a.token, "logprob": a.logprob} for a in (t.top_logprobs or [])]}
            for t in content]


def completion_logprobs(choice: Any) -> list[dict[str, Any]] | None:
    lp = getattr(choice, "logprobs", None)
    if lp is None or lp.tokens is None:
        return None
    tops = lp.top_logprobs or [None] * len(lp.tokens)
    return [{"token": tok, "logprob": val,
             "top_logprobs": [{"token": k, "logprob": v} for k, v in (top or {}).items()]}
            for tok, val, top in zip(lp.tokens, lp.token_logprobs or [], tops, strict=False)]


class BadReply(Exception):
    """A 200 reply whose content cannot be used (no choices, wrong shape)."""


Parsed = tuple[str, list[dict[str, Any]] | None, int, int, dict[str, Any]]


def parse_reply(data: Any, mode: str) -> Parsed:
    """(text, logprobs, prompt_tokens, completion_tokens, details) from a decoded 200 body."""
    plain = read_plain(data, mode)
    return plain if plain is not None else read_validated(data, mode)


def _count(usage: dict[str, Any], key: str) -> int | None:
    value = usage.get(key)
    if value is None:
        return 0
    return value if type(value) is int else None  # bool, float, text: the SDK's coercion decides


def read_plain(data: Any, mode: str) -> Parsed | None:
    """The reply read straight from the JSON when it has the plain shape (see the module doc), else
    None. Exactly what ``read_validated`` gives for such a reply (a parity test checks)."""
    if type(data) is not dict:
        return None
    choices = data.get("choices")
    if type(choices) is not list or not choices or type(choices[0]) is not dict:
        return None
    choice = choices[0]
    if choice.get("logprobs") is not None:
        return None
    finish = choice.get("finish_reason")
    if finish is not None and type(finish) is not str:
        return None
    if mode == "chat":
        message = choice.get("message")
        if type(message) is not dict or message.get("refusal") is not None or "reasoning_content" in message:
            return None
        text = message.get("content")
    else:
        text = choice.get("text")
    if text is not None and type(text) is not str:
        return None
    details: dict[str, Any] = {"finish_reason": finish}
    usage = data.get("usage")
    if usage is None:
        details["usage"] = "not reported by server"
        return text or "", None, 0, 0, details
    if type(usage) is not dict:
        return None
    n_in, n_out = _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
    if n_in is None or n_out is None:
        return None
    return text or "", None, n_in, n_out, details


def read_validated(data: Any, mode: str) -> Parsed:
    """The reply through the SDK's models (any shape the SDK reads)."""
    import pydantic
    from openai.types import Completion
    from openai.types.chat import ChatCompletion

    if not isinstance(data, dict):
        raise BadReply(f"reply is JSON {type(data).__name__}, not an object")
    kind = ChatCompletion if mode == "chat" else Completion
    try:
        reply: Any = kind.model_validate(data)
    except pydantic.ValidationError:
        # servers that leave out fields the SDK requires (id, created, ...): take what is there
        reply = kind.construct(**data)
    choices = getattr(reply, "choices", None)
    if not choices:
        raise BadReply(f"reply has no choices: {json.dumps(data)[:200]}")
    choice = choices[0]
    details: dict[str, Any] = {"finish_reason": getattr(choice, "finish_reason", None)}
    if mode == "chat":
        message = getattr(choice, "message", None)
        if message is None:
            raise BadReply("reply choice has no message")
        text = message.content or ""
        if getattr(message, "refusal", None):
            details["refusal"] = message.refusal
        reasoning = (message.model_extra or {}).get("reasoning_content") if hasattr(message, "model_extra") else None
        if reasoning:
            details["reasoning"] = reasoning
        logprobs = chat_logprobs(choice)
    else:
        text = getattr(choice, "text", None) or ""
        logprobs = completion_logprobs(choice)
    usage = getattr(reply, "usage", None)
    n_in = int(getattr(usage, "prompt_tokens", 0) or 0)
    n_out = int(getattr(usage, "completion_tokens", 0) or 0)
    if usage is None:
        details["usage"] = "not reported by server"
    return text, logprobs, n_in, n_out, details
