"""PointLLM's prompt: the Vicuna v1.1 conversation with the point tokens in front of the question.

As ``pointllm/conversation.py`` (``conv_vicuna_v1_1``, separator style TWO) and the eval scripts:

    {system} USER: <point_start><point_patch>x513<point_end>\\n{question} ASSISTANT:

the system line is Vicuna's unless the request brings its own; a finished assistant turn ends with
``</s>``, a user turn with a space. The point tokens (``point_token_len`` patch tokens, between
start and end when the config says ``mm_use_point_start_end``) open the user turn that carries the
``points`` part, followed by a newline, as ``qs = tokens + '\\n' + qs`` there.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.types import Message, Part

VICUNA_SYSTEM = ("A chat between a curious user and an artificial intelligence assistant. "
                 "The assistant gives helpful, detailed, and polite answers to the user's questions.")
ROLES = {"user": "USER", "assistant": "ASSISTANT"}
SEP, SEP2 = " ", "</s>"


class PromptError(ValueError):
    """A conversation PointLLM's template cannot hold (kind ``input``)."""


@dataclass(frozen=True, slots=True)
class PointTokens:
    patch: str
    count: int
    start: str | None = None  # with mm_use_point_start_end
    end: str | None = None

    def block(self) -> str:
        inner = self.patch * self.count
        return f"{self.start}{inner}{self.end}" if self.start and self.end else inner


def build_prompt(messages: list[Message], tokens: PointTokens) -> tuple[str, Part | None]:
    """The prompt text and the request's points part (None when it sends none)."""
    system = VICUNA_SYSTEM
    turns: list[tuple[str, str]] = []
    cloud: Part | None = None
    for m in messages:
        others = sorted({p.type for p in m.content} - {"text", "points"})
        if others:
            raise PromptError(f"PointLLM takes text and one point cloud, not {', '.join(others)}")
        if m.role == "system":
            system = m.text_content
            continue
        text = m.text_content
        for name in (tokens.patch, tokens.start, tokens.end):
            if name and name in text:  # it would take a point feature's place, or shift the run
                raise PromptError(f"the text holds PointLLM's own {name} token")
        clouds = [p for p in m.content if p.type == "points"]
        if clouds:
            if m.role != "user":
                raise PromptError("a point cloud can only come in a user message")
            if cloud is not None or len(clouds) > 1:
                raise PromptError("PointLLM takes one point cloud per conversation; this request has more")
            cloud = clouds[0]
            text = tokens.block() + "\n" + text
        expected = "user" if len(turns) % 2 == 0 else "assistant"
        if m.role != expected:
            raise PromptError(f"the conversation must alternate user and assistant turns from a user turn; "
                              f"message {len(turns) + 1} is {m.role}")
        turns.append((ROLES[m.role], text))
    if not turns or turns[-1][0] != ROLES["user"]:
        raise PromptError("the conversation must end with a user message")
    out = system + SEP
    for i, (role, text) in enumerate(turns):
        out += f"{role}: {text}" + (SEP if i % 2 == 0 else SEP2)
    return out + f"{ROLES['assistant']}:", cloud
