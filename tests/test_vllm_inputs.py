"""Pure parts of the vLLM backend (no vLLM needed): message conversion, sampling settings, the
settings split and model spec, shard interleaving, server flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.models.vllm_config import modalities_from_config, parse_settings
from harness.models.vllm_dp import interleave, merge_interleaved
from harness.models.vllm_inputs import (
    RequestInputError,
    sampling_kwargs,
    to_chat_messages,
    to_output,
    to_prompt_text,
)
from harness.models.vllm_server import server_command
from harness.types import GenerationConfig, Message, Part


def test_text_messages_stay_plain_strings() -> None:
    msgs = [Message.text("system", "be brief"), Message.text("user", "hi")]
    assert to_chat_messages(msgs) == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


def test_media_parts_become_file_urls(tmp_path: Path) -> None:
    img, wav, mp4 = (tmp_path / n for n in ("a.png", "b.wav", "c.mp4"))
    for f in (img, wav, mp4):
        f.write_bytes(b"x")
    msg = Message("user", [Part("text", "what?"), Part("image", path=str(img)), Part("audio", path=str(wav)),
                           Part("video", path=str(mp4)), Part("image", path="https://example.org/x.png")])
    (conv,) = to_chat_messages([msg])
    assert conv["content"] == [
        {"type": "text", "text": "what?"},
        {"type": "image_url", "image_url": {"url": f"file://{img}"}},
        {"type": "audio_url", "audio_url": {"url": f"file://{wav}"}},
        {"type": "video_url", "video_url": {"url": f"file://{mp4}"}},
        {"type": "image_url", "image_url": {"url": "https://example.org/x.png"}},
    ]


@pytest.mark.parametrize("part, message", [
    (Part("image", path="/no/such/file.png"), "media file not found: /no/such/file.png"),
    (Part("mesh", path="/x.glb"), "vLLM takes no 'mesh' input"),
    (Part("image"), "image part has no path"),
])
def test_bad_parts_are_refused(part: Part, message: str) -> None:
    with pytest.raises(RequestInputError, match=message):
        to_chat_messages([Message("user", [Part("text", "q"), part])])


def test_plain_prompt_mode() -> None:
    assert to_prompt_text([Message.text("system", "s"), Message.text("user", "u")]) == "s\n\nu"
    with pytest.raises(RequestInputError):
        to_prompt_text([Message("user", [Part("image", path="/x.png")])])


def test_sampling_kwargs() -> None:
    cfg = GenerationConfig(temperature=0.7, max_tokens=9, top_p=0.9, seed=3, stop=["\n"], logprobs=True,
                           extra={"top_logprobs": 4, "top_k": 5, "unrelated": 1})
    assert sampling_kwargs(cfg, {"top_k": 50, "min_p": 0.1}) == {
        "temperature": 0.7, "top_p": 0.9, "max_tokens": 9, "seed": 3, "stop": ["\n"], "top_k": 5, "min_p": 0.1,
        "logprobs": 4}
    plain = sampling_kwargs(GenerationConfig())
    assert plain["stop"] is None and "logprobs" not in plain and plain["temperature"] == 0.0


def test_output_from_result() -> None:
    ok = to_output({"text": "4", "input_tokens": 7, "output_tokens": 2, "finish_reason": "stop",
                    "logprobs": None}, 0.25)
    assert (ok.text, ok.usage.input_tokens, ok.usage.output_tokens, ok.usage.calls, ok.usage.seconds) == (
        "4", 7, 2, 1, 0.25)
    assert ok.details == {"finish_reason": "stop"} and ok.error is None
    bad = to_output({"error": "ValueError: too long"}, 0.1)
    assert bad.error == "ValueError: too long" and bad.usage.calls == 0


def test_settings_split_and_spec() -> None:
    s = parse_settings("Qwen/Qwen2.5-7B-Instruct", {
        "tensor_parallel_size": 4, "dp": 2, "dtype": "bfloat16", "max_model_len": 8192, "gpu_memory_utilization": 0.8,
        "max_tokens": 100, "temperature": 0.5, "top_k": 20, "limit_mm_per_prompt": {"image": 2}})
    assert s.dp == 2 and s.sampling_defaults == {"top_k": 20}
    assert s.engine == {"allowed_local_media_path": "/", "disable_log_stats": True, "tensor_parallel_size": 4,
                        "dtype": "bfloat16", "max_model_len": 8192, "gpu_memory_utilization": 0.8,
                        "limit_mm_per_prompt": {"image": 2}}
    # resource settings (tp, dp, memory) and per-request generation keys stay out of the spec
    assert s.spec == ('vllm:Qwen/Qwen2.5-7B-Instruct?dtype=bfloat16&limit_mm_per_prompt={"image": 2}'
                      '&max_model_len=8192&top_k=20')
    assert parse_settings("m", {}).spec == "vllm:m"
    with pytest.raises(ValueError, match="mode must be"):
        parse_settings("m", {"mode": "cloud"})
    with pytest.raises(ValueError, match="dp must be >= 1"):
        parse_settings("m", {"dp": 0})
    with pytest.raises(ValueError, match="needs a model"):
        parse_settings(None, {})


def test_modalities_from_config() -> None:
    assert modalities_from_config({"model_type": "qwen2"}) == {"text"}
    assert modalities_from_config({"vision_config": {}, "image_token_id": 1, "video_token_id": 2}) == {
        "text", "image", "video"}
    assert modalities_from_config({"thinker_config": {"audio_config": {}, "vision_config": {},
                                                      "video_token_index": 3}}) == {"text", "image", "video", "audio"}


@pytest.mark.parametrize("n, k", [(0, 2), (1, 3), (7, 2), (12, 4), (5, 5)])
def test_interleave_round_trip(n: int, k: int) -> None:
    items = list(range(n))
    shards = interleave(items, k)
    assert len(shards) == k and sum(map(len, shards)) == n
    assert max(map(len, shards), default=0) - min(map(len, shards), default=0) <= 1
    assert merge_interleaved(shards, n) == items


def test_server_command_flags() -> None:
    cmd = server_command("py", "/m", {"dtype": "float32", "enforce_eager": True, "trust_remote_code": False,
                                      "limit_mm_per_prompt": {"image": 2}, "disable_log_stats": True}, 8001)
    assert cmd[:3] == ["py", "-m", "vllm.entrypoints.openai.api_server"]
    assert cmd[cmd.index("--port") + 1] == "8001" and cmd[cmd.index("--host") + 1] == "127.0.0.1"
    assert "--enforce-eager" in cmd and "--trust-remote-code" not in cmd
    assert cmd[cmd.index("--limit-mm-per-prompt") + 1] == '{"image": 2}'
    assert cmd.count("--disable-log-stats") == 1
