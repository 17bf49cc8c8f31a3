"""The search-refine-verify loop: the controller calls tools until it answers (released rules).

The controller is any chat model behind a :class:`~harness.client.ModelClient`. Tools are described
in its system prompt and called in the reply text as Hermes/Qwen-style blocks
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (the format vLLM's tool parsers read
out of Qwen replies; written into the text here so that every backend can drive the agent, native
tool-calling API or not). Several blocks in one reply are one round and run concurrently; results
go back as ``<tool_response>`` blocks in the next user turn.

Released rules: at most ``MAX_TOOL_ITERATIONS`` (10) tool rounds, and a round in which every call
failed does not count; once the limit is reached the controller is sent the finalize message and
its next reply is the answer whatever it contains (tool-call blocks stripped). Ours on top: a
hard cap of twice that many rounds, failed ones included, so a controller that only ever sends
unknown tools or malformed arguments is finalized too (the released loop would go on).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from harness.client import ModelClient
from harness.types import Message, Output, Request, Usage

from .tools import TOOL_SCHEMAS, ToolBox, ToolResult

MAX_TOOL_ITERATIONS = 10
MAX_SEARCH_ROUNDS = 10
FINALIZE_MESSAGE = ("Answer the user's question now, from the tool results you already have. Do not call any more "
                    "tools. Give a thorough, detailed answer with your reasoning and the evidence, explaining step by "
                    "step how you reached it.")
_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)

SYSTEM_PROMPT = """# Video understanding assistant

You answer questions about one video by combining what is heard and what is seen. Use the tools to search and \
examine the video before you answer. Answer on any topic strictly from what the video contains: no disclaimers, no \
outside knowledge.

## Tools
- `search_video`: semantic search over the speech transcript, audio events and frame captions; returns \
timestamps (seconds) and the matched content. In the first round send several queries at once for broad coverage. \
Pick the modality: ["audio"] for speech and sounds, ["visual"] for objects and scenes, both when unsure.
- `refine_video`: a specialist looks closely at one segment (visual at most 60 s). audio: speech, music, sound \
events; visual: objects, people, actions, scenes. Always pass the question, or a focused form of it, as `query`. \
Refine several segments or modalities in the same round.
- `verify_claim`: an unbiased description of a segment, to check that an object is really there. Only for object \
existence questions, at most once per question.

## Workflow
1. Search broadly: 1-3 `search_video` calls with different angles in the first round.
2. Refine in parallel: `refine_video` on the best timestamps, several calls per round.
3. Answer: combine the evidence; always give your best answer, even when unsure.

## Rules
- Refine before answering; never answer from search results alone.
- Audio modality for sound, music and speech questions; visual for appearance and scenes.
- Counting or occurrence questions: look at several segments across the whole video.
- Spatial questions: ask for the scene layout from left to right and work out the relations yourself.
- Existence questions: use `verify_claim` to avoid false confirmations.
- Never ask the vision model leading yes/no questions; ask open questions.
- When audio and visual disagree, trust the modality suited to the question.
- Always answer; do not say you found nothing before you have used the tools.

## Calling tools
The tools, as JSON schemas:
{schemas}

To call tools, reply with one block per call and nothing else:
<tool_call>{{"name": "search_video", "arguments": {{"query": "...", "modality": ["audio"]}}}}</tool_call>
Several blocks in one reply run together. Results come back in <tool_response> blocks. When you are ready, reply \
with the answer only, with no <tool_call> block."""


def system_prompt(duration: float) -> str:
    text = SYSTEM_PROMPT.format(schemas="\n".join(json.dumps(s) for s in TOOL_SCHEMAS))
    if duration > 0:
        mins, secs = divmod(int(duration), 60)
        text += f"\n\nThis video is {duration:.1f} seconds long ({mins}m {secs}s)."
    return text


@dataclass(slots=True)
class ToolCall:
    name: str | None
    arguments: Any = None
    error: str | None = None  # a block that could not be read as a call


def parse_calls(text: str) -> tuple[list[ToolCall], str]:
    """(tool calls, the reply with every call block removed)."""
    visible = _THINK.sub("", text or "")
    calls = []
    for body in _CALL.findall(visible):
        try:
            data = json.loads(body)
        except json.JSONDecodeError as exc:
            calls.append(ToolCall(None, body[:200], f"malformed tool call (not JSON: {exc.msg})"))
            continue
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            calls.append(ToolCall(None, body[:200], 'malformed tool call: expected {"name": ..., "arguments": {...}}'))
            continue
        args = data.get("arguments", data.get("parameters", {}))
        if isinstance(args, str):  # OpenAI-style arguments are a JSON string
            try:
                args = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError:
                calls.append(ToolCall(data["name"], args[:200], "malformed tool call: arguments are not JSON"))
                continue
        calls.append(ToolCall(data["name"], args))
    rest = _CALL.sub("", visible)
    if "<tool_call>" in rest:  # an unterminated block (a reply cut off by max_tokens)
        calls.append(ToolCall(None, rest.split("<tool_call>", 1)[1][:200], "malformed tool call: no </tool_call>"))
        rest = rest.split("<tool_call>", 1)[0]
    return calls, rest.strip()


def _response_block(name: str | None, payload: dict[str, Any]) -> str:
    body = json.dumps({"name": name, "content": payload}, ensure_ascii=False)
    return f"<tool_response>\n{body}\n</tool_response>"


@dataclass
class Episode:
    controller: ModelClient
    tools: ToolBox
    max_iterations: int = MAX_TOOL_ITERATIONS
    trace: list[dict[str, Any]] = field(default_factory=list)
    segments: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Usage] = field(default_factory=lambda: {"controller": Usage(), "vision": Usage(),
                                                             "audio": Usage()})
    stats: dict[str, Any] = field(default_factory=dict)

    async def _ask(self, messages: list[Message], request: Request, step: int) -> Output:
        (out,) = await self.controller.generate([Request(list(messages), request.config, request.sample_id,
                                                         request.epoch)])
        self.usage["controller"] = self.usage["controller"] + out.usage
        self.trace.append({"step": step, "kind": "controller", "reply": out.text[:8000], "error": out.error,
                           "usage": out.usage.to_dict()})
        return out

    async def _tool(self, call: ToolCall) -> ToolResult:
        if call.error is not None:
            return ToolResult({"success": False, "error": call.error})
        assert call.name is not None
        try:
            return await self.tools.run(call.name, call.arguments)
        except Exception as exc:  # a tool that breaks answers with its error, as the released loop does
            return ToolResult({"success": False, "error": f"{call.name}: {type(exc).__name__}: {exc}"[:500]})

    async def run(self, request: Request) -> tuple[str, str | None]:
        """(answer, error); the trace, segments, usage and stats are filled in as it goes."""
        self.stats.update({"tool_iterations": 0, "tool_rounds": 0, "search_rounds": 0, "forced_finalize": False})
        return await self._run(request)

    async def _run(self, request: Request) -> tuple[str, str | None]:
        messages = [Message.text("system", system_prompt(self.tools.duration))]
        # the conversation as the task gives it, media dropped: the agent sees the video through its tools
        for m in request.messages:
            text = m.text_content
            if text or m.role != "user":
                messages.append(Message.text(m.role, text))
        iteration = search_rounds = rounds = 0
        forced = False
        out = await self._ask(messages, request, 0)
        if out.error:
            return "", f"controller: {out.error}"
        calls, answer = parse_calls(out.text)
        while calls:
            iteration += 1
            rounds += 1
            names = [c.name for c in calls]
            if "search_video" in names:
                search_rounds += 1
            t0 = time.perf_counter()
            results = await asyncio.gather(*(self._tool(c) for c in calls))
            record_calls = []
            for call, res in zip(calls, results, strict=True):
                if res.specialist is not None:
                    role = res.specialist["role"]
                    self.usage[role] = self.usage[role] + res.usage
                self.segments.extend(res.segments)
                record_calls.append({"tool": call.name, "arguments": call.arguments, "ok": bool(res.payload["success"]),
                                     "result": res.payload, "segments": res.segments, "specialist": res.specialist})
            self.trace.append({"step": rounds, "kind": "tools", "calls": record_calls,
                               "seconds": round(time.perf_counter() - t0, 4)})
            messages.append(Message.text("assistant", out.text))
            messages.append(Message.text("user", "\n".join(_response_block(c.name, r.payload)
                                                           for c, r in zip(calls, results, strict=True))))
            if all(not r.payload["success"] for r in results):  # released: an all-failed round is free
                iteration -= 1
                if "search_video" in names:
                    search_rounds -= 1
            finalize = (iteration >= self.max_iterations or rounds >= 2 * self.max_iterations
                        or ("search_video" in names and search_rounds >= MAX_SEARCH_ROUNDS))
            if finalize:
                forced = True
                out = await self._ask([*messages, Message.text("user", FINALIZE_MESSAGE)], request, rounds + 1)
                if out.error:
                    return "", f"controller: {out.error}"
                late, answer = parse_calls(out.text)
                if late:
                    self.stats["calls_after_finalize"] = len(late)
                break
            out = await self._ask(messages, request, rounds + 1)
            if out.error:
                return "", f"controller: {out.error}"
            calls, answer = parse_calls(out.text)
            self.stats.update({"tool_iterations": iteration, "tool_rounds": rounds, "search_rounds": search_rounds})
        self.stats.update({"tool_iterations": iteration, "tool_rounds": rounds, "search_rounds": search_rounds,
                           "forced_finalize": forced})
        return answer, None
