"""The JSON body of one chat or completion request to an OpenAI-compatible server (scoring requests:
``openai_scoring.py``): harness messages as ``ChatCompletionMessageParam`` dicts with their media read
and encoded, or a plain prompt for ``/completions``, and the generation settings the server takes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from harness.models import media
from harness.types import Message, Request

if TYPE_CHECKING:  # the settings' module imports this one
    from harness.models.openai import OpenAISettings


def _text_only(message: Message) -> bool:
    return all(p.type == "text" for p in message.content)


def chat_messages(messages: Sequence[Message], s: OpenAISettings) -> list[dict[str, Any]]:
    """Harness messages as OpenAI ``ChatCompletionMessageParam`` dicts (media read and encoded).

    Text-only messages use the plain-string content form, which every compatible server accepts."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if _text_only(message):
            out.append({"role": message.role, "content": message.text_content})
            continue
        parts: list[dict[str, Any]] = []
        for part in message.content:
            if part.type == "text":
                parts.append({"type": "text", "text": part.text or ""})
                continue
            if not part.path:
                raise media.MediaError(f"{part.type} part has no path")
            if part.type == "image":
                image: dict[str, Any] = {"url": media.image_url(part.path)}
                if "detail" in part.options:
                    image["detail"] = part.options["detail"]
                parts.append({"type": "image_url", "image_url": image})
            elif part.type == "video" and s.video_mode == "native":
                url = media.data_url(part.path, media.mime_type(part.path, "video/mp4"))
                parts.append({"type": "video_url", "video_url": {"url": url}})
            elif part.type == "video":
                if media.is_url(part.path):
                    raise media.MediaError(f"video {part.path!r}: frames mode needs a local file "
                                           "(use -M video_mode=native for URLs)")
                frames = media.video_frames(
                    part.path, fps=part.options.get("fps", s.video_fps),
                    max_frames=int(part.options.get("max_frames", s.video_max_frames)),
                    max_side=part.options.get("max_side", s.frame_max_side))
                parts += [{"type": "image_url", "image_url": {"url": f.data_url}} for f in frames]
            elif part.type == "audio":
                if media.is_url(part.path):
                    raise media.MediaError(f"audio {part.path!r}: input_audio needs a local file")
                parts.append({"type": "input_audio", "input_audio": media.audio_input(part.path)})
            else:
                raise media.MediaError(f"the openai backend cannot send {part.type!r} parts")
        out.append({"role": message.role, "content": parts})
    return out


def completion_prompt(messages: Sequence[Message]) -> str:
    """A plain prompt for ``/completions``: a lone user message is sent as is; a conversation is
    rendered ``Role: text`` per turn ending with ``Assistant:`` (a choice: no chat template known)."""
    if any(not _text_only(m) for m in messages):
        raise media.MediaError("completions mode takes text only")
    if len(messages) == 1 and messages[0].role == "user":
        return messages[0].text_content
    turns = [f"{m.role.capitalize()}: {m.text_content}" for m in messages]
    return "\n\n".join(turns + ["Assistant:"])


def reply_mode(request: Request, s: OpenAISettings) -> str:
    """Which reply shape a generating request gets: a completion request always the completions one."""
    return "completions" if request.kind == "completion" else s.mode


def request_body(request: Request, s: OpenAISettings) -> tuple[str, dict[str, Any]]:
    """(path, JSON body) for one chat or completion request (scoring: models/openai_scoring.py)."""
    cfg = request.config
    body: dict[str, Any] = {"model": s.model}
    mode = reply_mode(request, s)
    if request.kind == "completion":  # a raw prompt continued as written: no template, no role markers
        path = "/completions"
        body["prompt"] = request.prompt
    elif mode == "chat":
        path = "/chat/completions"
        body["messages"] = chat_messages(request.messages, s)
    else:
        path = "/completions"
        body["prompt"] = completion_prompt(request.messages)
    body[s.max_tokens_field if mode == "chat" else "max_tokens"] = cfg.max_tokens
    body["temperature"] = cfg.temperature
    if cfg.top_p != 1.0:
        body["top_p"] = cfg.top_p
    if cfg.seed is not None:
        body["seed"] = cfg.seed
    if cfg.stop:
        body["stop"] = list(cfg.stop)
    if cfg.logprobs:
        if mode == "chat":
            body["logprobs"] = True
            if s.top_logprobs:
                body["top_logprobs"] = s.top_logprobs
        else:
            body["logprobs"] = max(1, s.top_logprobs)  # legacy API: an int, the alternatives wanted
    body.update(s.extra_body)
    body.update(cfg.extra)
    return path, body
