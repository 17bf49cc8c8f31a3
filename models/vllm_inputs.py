"""Pure conversions between harness requests and vLLM's offline API (no vLLM import here).

Media choice: every image, video and audio part becomes an OpenAI-style content part with a
``file://`` URL (``image_url`` / ``video_url`` / ``audio_url``), which ``LLM.chat`` loads and
decodes itself with the model's own processor. The engine is started with
``allowed_local_media_path`` (default ``/``) so it may read them. Frame sampling for video is the
engine's (``-M media_io_kwargs={"video": {"num_frames": 32}}``); a part's ``options`` are not
forwarded, because vLLM takes them per engine, not per part. Remote ``http(s)://`` paths pass
through unchanged. Point clouds and meshes have no vLLM input: such a request is refused with a
per-request error before any call.

Everything crossing to the engine is plain data (dicts, lists, strings), so the same items travel
to Ray actors unchanged.
"""

from __future__ import annotations

import os
from typing import Any

from harness.types import GenerationConfig, Message, Output, Usage

MEDIA_PART = {"image": "image_url", "video": "video_url", "audio": "audio_url"}

# GenerationConfig.extra / -M keys that map 1:1 onto vllm.SamplingParams; other extra keys (meant
# for other backends) are ignored rather than failing the batch.
SAMPLING_EXTRAS = (
    "top_k", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty", "min_tokens",
    "ignore_eos", "stop_token_ids", "skip_special_tokens", "include_stop_str_in_output",
)


class RequestInputError(ValueError):
    """A request vLLM cannot take (missing media file, unsupported part): recorded per sample."""


def media_url(path: str) -> str:
    if "://" in path:
        return path
    full = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(full):
        raise RequestInputError(f"media file not found: {path}")
    return "file://" + full


def to_chat_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Harness messages -> the OpenAI-format conversation ``LLM.chat`` takes."""
    out: list[dict[str, Any]] = []
    for msg in messages:
        if all(p.type == "text" for p in msg.content):
            out.append({"role": msg.role, "content": msg.text_content})
            continue
        parts: list[dict[str, Any]] = []
        for part in msg.content:
            if part.type == "text":
                parts.append({"type": "text", "text": part.text or ""})
            elif part.type in MEDIA_PART:
                if not part.path:
                    raise RequestInputError(f"{part.type} part has no path")
                kind = MEDIA_PART[part.type]
                parts.append({"type": kind, kind: {"url": media_url(part.path)}})
            else:
                raise RequestInputError(f"vLLM takes no {part.type!r} input (text, image, video, audio only)")
        out.append({"role": msg.role, "content": parts})
    return out


def to_prompt_text(messages: list[Message]) -> str:
    """For ``-M chat=false`` (base models without a chat template): the text parts joined."""
    if any(p.type != "text" for m in messages for p in m.content):
        raise RequestInputError("media input needs chat mode (drop -M chat=false)")
    return "\n\n".join(m.text_content for m in messages)


def sampling_kwargs(config: GenerationConfig, defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """Keyword arguments for ``vllm.SamplingParams`` from one request's settings.

    ``defaults`` are engine-wide sampling extras from ``-M`` (e.g. ``top_k``); the request's own
    ``extra`` wins over them. ``logprobs=True`` asks for the sampled token's logprob plus
    ``top_logprobs`` alternatives (OpenAI's name; default 0).
    """
    kw: dict[str, Any] = {
        "temperature": float(config.temperature),
        "top_p": float(config.top_p),
        "max_tokens": int(config.max_tokens),
        "seed": config.seed,
        # a bare string is one stop string, not a list of its characters
        "stop": ([config.stop] if isinstance(config.stop, str) else list(config.stop)) or None,
    }
    extra = {**(defaults or {}), **config.extra}
    for key in SAMPLING_EXTRAS:
        if key in extra:
            kw[key] = extra[key]
    if config.logprobs:
        kw["logprobs"] = int(extra.get("top_logprobs", 0) or 0)
    return kw


def result_from_request_output(ro: Any, top_n: int = 0) -> dict[str, Any]:
    """A vLLM ``RequestOutput`` -> plain dict (picklable, so Ray actors can return it).

    vLLM returns, per generated token, the sampled token (with its true rank) plus the ``top_n``
    best alternatives (ranks 1..top_n); ``top_logprobs`` keeps only the latter, best first."""
    comp = ro.outputs[0]
    logprobs = None
    if comp.logprobs is not None:
        logprobs = []
        for token_id, alternatives in zip(comp.token_ids, comp.logprobs, strict=False):
            chosen = alternatives.get(token_id)
            top = sorted((kv for kv in alternatives.items() if kv[1].rank is not None and kv[1].rank <= top_n),
                         key=lambda kv: kv[1].rank)
            logprobs.append({
                "token": chosen.decoded_token if chosen else None,
                "token_id": int(token_id),
                "logprob": float(chosen.logprob) if chosen else None,
                "top_logprobs": [{"token": lp.decoded_token, "token_id": int(tid), "logprob": float(lp.logprob)}
                                 for tid, lp in top],
            })
    return {
        "text": comp.text,
        "input_tokens": len(ro.prompt_token_ids or []),
        "output_tokens": len(comp.token_ids),
        "finish_reason": comp.finish_reason,
        "logprobs": logprobs,
    }


def prompt_scores(ro: Any, last: int) -> dict[str, Any]:
    """A ``RequestOutput`` of a scoring prompt (``prompt_logprobs`` set) -> plain dict: for each of
    the prompt's ``last`` positions, ``[logprob, rank]`` of the prompt's own token there given every
    token before it (vLLM puts the prompt token in each position's entry with its true rank beside
    the top alternatives; rank 1 is the argmax, a tie counting against the token)."""
    ids = list(ro.prompt_token_ids or [])
    entries = ro.prompt_logprobs
    if entries is None or len(entries) != len(ids):
        raise RuntimeError(f"vLLM returned {0 if entries is None else len(entries)} prompt logprobs "
                           f"for a prompt of {len(ids)} tokens")
    if not 0 < last < len(ids):  # position 0 has nothing to condition on: never scored
        raise RuntimeError(f"cannot score the last {last} of {len(ids)} prompt tokens")
    scored: list[list[float]] = []
    for pos in range(len(ids) - last, len(ids)):
        entry = entries[pos]
        lp = entry.get(ids[pos]) if entry else None
        if lp is None:
            raise RuntimeError(f"vLLM gave no logprob for prompt token {pos}")
        scored.append([float(lp.logprob), float(lp.rank) if lp.rank is not None else -1.0])
    return {"scored": scored, "input_tokens": len(ids)}


def to_output(result: dict[str, Any], seconds: float) -> Output:
    """Engine result dict -> Output. ``seconds`` is this request's share of the batch's wall time
    (batch seconds / batch size): per-request latency does not exist inside one batched call."""
    if result.get("error"):
        return Output(error=result["error"], usage=Usage(calls=0, seconds=seconds))
    details = {"finish_reason": result.get("finish_reason")}
    return Output(
        text=result["text"],
        usage=Usage(input_tokens=result["input_tokens"], output_tokens=result["output_tokens"], calls=1,
                    seconds=seconds),
        logprobs=result.get("logprobs"),
        details=details,
    )
