"""The openai backend against the scripted server: wire format of every part type, retries,
errors, usage and cost, logprobs, completions mode and the concurrency bound."""

from __future__ import annotations

import asyncio
import base64
import io
import time
import wave
from pathlib import Path

import pytest
from openai_server import Reply, ScriptedServer, last_user_text
from requirements import require

from harness.modelspec import ModelSpecError, build_model
from harness.types import GenerationConfig, Message, Part, Request


class _PyAV:
    """PyAV, imported when a media test first uses it: only those tests need it (under CI, a missing
    PyAV fails them; elsewhere they skip and the other tests still run)."""

    def __getattr__(self, name: str):
        return getattr(require("av", "PyAV writes and decodes the media fixtures (tests/setup.d/30-llamacpp.sh)"), name)


av = _PyAV()
pytest_plugins = ("openai_server",)  # the scripted_server fixture


def make_model(server: ScriptedServer, **settings):
    return build_model("openai:test", {"base_url": server.base_url, "retry_base": 0.01, **settings})


def ask(model, *requests: Request):
    async def go():
        try:
            return await model.generate(list(requests))
        finally:
            await model.aclose()

    return asyncio.run(go())


def text_request(text: str = "hello", **config) -> Request:
    return Request([Message.text("user", text)], GenerationConfig(**config))


# ---- media fixtures: real files made with PyAV and the standard library -----------------------------
def write_video(path: Path, seconds: int = 4, fps: int = 10, size: tuple[int, int] = (64, 48)) -> Path:
    """Frame i is uniformly grey at level 6*i, so a decoded frame tells its own timestamp."""
    import numpy as np

    with av.open(str(path), "w") as out:
        stream = out.add_stream("mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = size[0], size[1], "yuv420p"
        for i in range(seconds * fps):
            frame = av.VideoFrame.from_ndarray(np.full((size[1], size[0], 3), 6 * i, dtype=np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return path


def write_wav(path: Path, seconds: float = 0.5, rate: int = 8000) -> Path:
    import math

    samples = bytearray()
    for i in range(int(seconds * rate)):
        value = int(8000 * math.sin(2 * math.pi * 440 * i / rate))
        samples += value.to_bytes(2, "little", signed=True)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(bytes(samples))
    return path


def write_flac(path: Path, seconds: float = 0.5, rate: int = 22050) -> Path:
    import numpy as np

    with av.open(str(path), "w") as out:
        stream = out.add_stream("flac", rate=rate)
        stream.layout = "stereo"
        t = np.arange(int(seconds * rate)) / rate
        tone = (8000 * np.sin(2 * np.pi * 440 * t)).astype(np.int16)
        frame = av.AudioFrame.from_ndarray(np.stack([tone, tone]).reshape(1, -1), format="s16", layout="stereo")
        frame.sample_rate = rate
        for packet in stream.encode(frame):
            out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return path


def grey_level(jpeg: bytes) -> int:
    with av.open(io.BytesIO(jpeg)) as container:
        frame = next(container.decode(video=0))
        return int(frame.to_ndarray(format="rgb24")[8, 8, 0])


def decode_data_url(url: str) -> tuple[str, bytes]:
    head, payload = url.split(",", 1)
    return head, base64.b64decode(payload)


# ---- wire format ------------------------------------------------------------------------------------
def test_text_request_body_and_reply(scripted_server):
    scripted_server.set_reply("#### 42")
    model = make_model(scripted_server)
    req = Request([Message.text("system", "be brief"), Message.text("user", "what is 6*7?")],
                  GenerationConfig(temperature=0.5, max_tokens=12, seed=3, stop=["\n\n"]))
    (out,) = ask(model, req)
    assert out.error is None and out.text == "#### 42"
    (body,) = scripted_server.bodies()
    assert body["model"] == "test"
    assert body["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "what is 6*7?"}]
    assert (body["temperature"], body["max_tokens"], body["seed"], body["stop"]) == (0.5, 12, 3, ["\n\n"])
    assert "logprobs" not in body and out.logprobs is None
    assert out.details["finish_reason"] == "stop"


def test_image_part_is_a_base64_data_url(scripted_server, tmp_path):
    import numpy as np

    from harness.models import media

    frame = av.VideoFrame.from_ndarray(np.full((32, 32, 3), 200, dtype=np.uint8), format="rgb24")
    image = tmp_path / "grey.jpg"
    image.write_bytes(media.encode_jpeg(frame))
    req = Request([Message("user", [Part("text", "what colour?"), Part("image", path=str(image),
                                                                       options={"detail": "low"})])])
    (out,) = ask(make_model(scripted_server), req)
    assert out.error is None
    content = scripted_server.bodies()[0]["messages"][0]["content"]
    assert content[0] == {"type": "text", "text": "what colour?"}
    assert content[1]["type"] == "image_url" and content[1]["image_url"]["detail"] == "low"
    head, data = decode_data_url(content[1]["image_url"]["url"])
    assert head == "data:image/jpeg;base64" and data == image.read_bytes()


def test_remote_image_url_passes_through(scripted_server):
    req = Request([Message("user", [Part("image", path="https://example.org/cat.png")])])
    (out,) = ask(make_model(scripted_server), req)
    assert out.error is None
    part = scripted_server.bodies()[0]["messages"][0]["content"][0]
    assert part == {"type": "image_url", "image_url": {"url": "https://example.org/cat.png"}}


def test_video_is_sent_as_sampled_jpeg_frames(scripted_server, tmp_path):
    video = write_video(tmp_path / "clip.mp4")  # 4 s, grey level 6*i at frame i (10 fps)
    req = Request([Message("user", [Part("video", path=str(video)), Part("text", "describe")])])
    (out,) = ask(make_model(scripted_server, video_fps=1.0), req)
    assert out.error is None
    content = scripted_server.bodies()[0]["messages"][0]["content"]
    frames = [p for p in content if p["type"] == "image_url"]
    assert content[-1] == {"type": "text", "text": "describe"}
    # 1 fps over 4 s -> 4 frames at 0.5, 1.5, 2.5, 3.5 s -> frames 5, 15, 25, 35 -> grey 30, 90, 150, 210
    levels = []
    for part in frames:
        head, jpeg = decode_data_url(part["image_url"]["url"])
        assert head == "data:image/jpeg;base64"
        levels.append(grey_level(jpeg))
    assert [round(level / 60 - 0.5) for level in levels] == [0, 1, 2, 3]
    assert all(abs(level - want) <= 6 for level, want in zip(levels, [30, 90, 150, 210], strict=True))


def test_video_part_options_override_sampling(scripted_server, tmp_path):
    video = write_video(tmp_path / "clip.mp4")
    req = Request([Message("user", [Part("video", path=str(video), options={"max_frames": 2, "fps": 8})])])
    ask(make_model(scripted_server), req)
    assert len(scripted_server.bodies()[0]["messages"][0]["content"]) == 2


def test_native_video_mode_sends_video_url(scripted_server, tmp_path):
    video = write_video(tmp_path / "clip.mp4")
    model = make_model(scripted_server, video_mode="native")
    (out,) = ask(model, Request([Message("user", [Part("video", path=str(video))])]))
    assert out.error is None
    part = scripted_server.bodies()[0]["messages"][0]["content"][0]
    assert part["type"] == "video_url"
    head, data = decode_data_url(part["video_url"]["url"])
    assert head == "data:video/mp4;base64" and data == video.read_bytes()
    assert "video_mode" in model.spec  # a different wire format is a different cache key


def test_audio_parts_use_input_audio(scripted_server, tmp_path):
    wav = write_wav(tmp_path / "tone.wav")
    flac = write_flac(tmp_path / "tone.flac")
    req = Request([Message("user", [Part("audio", path=str(wav)), Part("audio", path=str(flac))])])
    (out,) = ask(make_model(scripted_server), req)
    assert out.error is None
    first, second = scripted_server.bodies()[0]["messages"][0]["content"]
    assert first["type"] == "input_audio" and first["input_audio"]["format"] == "wav"
    assert base64.b64decode(first["input_audio"]["data"]) == wav.read_bytes()
    # FLAC is not a Chat API format: decoded and sent as 16 kHz mono WAV of the same length
    assert second["input_audio"]["format"] == "wav"
    with wave.open(io.BytesIO(base64.b64decode(second["input_audio"]["data"]))) as w:
        assert (w.getnchannels(), w.getframerate(), w.getsampwidth()) == (1, 16000, 2)
        assert abs(w.getnframes() / 16000 - 0.5) < 0.05


def test_missing_media_file_is_a_per_request_error(scripted_server, tmp_path):
    bad = Request([Message("user", [Part("image", path=str(tmp_path / "missing.png"))])])
    good = text_request("fine")
    out_bad, out_good = ask(make_model(scripted_server), bad, good)
    assert out_bad.error.startswith("input: cannot read media file") and "missing.png" in out_bad.error
    assert out_good.error is None and out_good.text == "ok"
    assert len(scripted_server.requests) == 1  # nothing was sent for the bad one


def test_unsupported_part_type_is_refused(scripted_server):
    (out,) = ask(make_model(scripted_server), Request([Message("user", [Part("mesh", path="x.glb")])]))
    assert out.error == "input: the openai backend cannot send 'mesh' parts"


# ---- retries --------------------------------------------------------------------------------------
def test_429_retry_after_is_honoured(scripted_server):
    scripted_server.fail(429, times=2, retry_after=0.3)
    (out,) = ask(make_model(scripted_server), text_request())
    assert out.error is None and out.text == "ok"
    assert out.details["attempts"] == 3
    arrivals = [r.received_at for r in scripted_server.requests]
    assert [r.status for r in scripted_server.requests] == [429, 429, 200]
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
    assert all(0.3 <= g < 1.0 for g in gaps), gaps  # retry_base is 0.01: only Retry-After explains 0.3 s


def test_retry_after_ms_and_http_date():
    from email.utils import formatdate

    from harness.models.openai import retry_after

    assert retry_after({"retry-after-ms": "250"}) == 0.25
    assert retry_after({"retry-after": "2"}) == 2.0
    assert 8 <= retry_after({"retry-after": formatdate(time.time() + 10, usegmt=True)}) <= 10.5
    assert retry_after({}) is None and retry_after({"retry-after": "soon"}) is None


def test_500_is_retried_then_succeeds(scripted_server):
    scripted_server.fail(500, times=1)
    scripted_server.fail(503, times=1)
    (out,) = ask(make_model(scripted_server), text_request())
    assert out.error is None and out.details["attempts"] == 3
    assert [r.status for r in scripted_server.requests] == [500, 503, 200]


def test_persistent_500_becomes_an_output_error(scripted_server):
    scripted_server.fail(500, times=None)
    out_list = ask(make_model(scripted_server, max_retries=2), text_request("a"), text_request("b"))
    assert len(scripted_server.requests) == 6
    for out in out_list:
        assert out.error == "InternalServerError: HTTP 500: scripted 500"
        assert out.details["attempts"] == 3 and out.text == "" and out.details["error_kind"] == "server"


def test_timeout_is_retried(scripted_server):
    scripted_server.slow(3.0, times=1)
    (out,) = ask(make_model(scripted_server, timeout=0.4), text_request())
    assert out.error is None and out.details["attempts"] == 2
    # the server saw the retry after the client's 0.4 s time-out, long before the slow reply (3 s)
    first, retry = (r.received_at for r in scripted_server.requests)
    assert 0.4 <= retry - first < 2.5
    scripted_server.slow(3.0, times=2)
    (out,) = ask(make_model(scripted_server, timeout=0.2, max_retries=1), text_request())
    assert out.error.startswith("APITimeoutError") and out.details["attempts"] == 2
    assert out.details["error_kind"] == "timeout"


def test_client_errors_are_not_retried(scripted_server):
    scripted_server.fail(400, times=None, body={"error": {"message": "bad max_tokens", "type": "invalid"}})
    (out,) = ask(make_model(scripted_server), text_request())
    assert out.error == "BadRequestError: HTTP 400: bad max_tokens"
    assert len(scripted_server.requests) == 1 and out.details["error_kind"] == "client"


def test_garbled_reply_is_retried_then_an_error(scripted_server):
    scripted_server.garble(times=1)
    (out,) = ask(make_model(scripted_server), text_request())
    assert out.error is None and out.details["attempts"] == 2
    scripted_server.reset()
    scripted_server.garble(times=None)
    (out,) = ask(make_model(scripted_server, max_retries=1), text_request())
    assert out.error.startswith("APIResponseValidationError: reply is not valid JSON")
    assert len(scripted_server.requests) == 2 and out.details["error_kind"] == "bad_response"


def test_reply_without_choices_is_an_error(scripted_server):
    scripted_server.set_reply(lambda body: Reply(raw={"id": "x", "object": "chat.completion", "choices": []}))
    (out,) = ask(make_model(scripted_server), text_request())
    assert out.error.startswith("APIResponseValidationError: reply has no choices")
    assert out.details["error_kind"] == "bad_response"


def test_connection_refused_is_an_output_error():
    with ScriptedServer() as server:
        url = server.base_url
    model = build_model("openai:test", {"base_url": url, "max_retries": 1, "retry_base": 0.01})
    (out,) = ask(model, text_request())
    assert out.error.startswith("APIConnectionError: Connection error")


def test_backoff_is_exponential_with_jitter_and_capped(scripted_server):
    model = make_model(scripted_server, retry_base=0.5, retry_max=3.0)
    for attempt, cap in [(0, 0.5), (1, 1.0), (2, 2.0), (3, 3.0), (6, 3.0)]:
        waits = [model._backoff(attempt, None) for _ in range(200)]
        assert all(cap / 2 <= w <= cap for w in waits)
        assert max(waits) - min(waits) > cap / 10  # jittered, not a constant
    assert 5.0 <= model._backoff(0, 5.0) <= 5.5  # a server's Retry-After wins over the schedule
    assert model._backoff(0, 10_000) <= 300 * 1.1


# ---- usage, cost, logprobs -------------------------------------------------------------------------
def test_usage_and_cost_from_price_table(scripted_server):
    scripted_server.set_reply(lambda body: Reply("fine", prompt_tokens=1000, completion_tokens=500))
    model = build_model("openai:gpt-4o-mini-2024-07-18", {"base_url": scripted_server.base_url})
    assert (model.price_in, model.price_out) == (0.15, 0.60)  # longest listed prefix: gpt-4o-mini
    (out,) = ask(model, text_request())
    assert (out.usage.input_tokens, out.usage.output_tokens, out.usage.calls) == (1000, 500, 1)
    assert out.usage.cost == pytest.approx((1000 * 0.15 + 500 * 0.60) / 1e6)
    assert out.usage.seconds > 0


def test_price_override_and_unknown_model(scripted_server):
    scripted_server.set_reply(lambda body: Reply("fine", prompt_tokens=1000, completion_tokens=1000))
    (out,) = ask(make_model(scripted_server, price_in=1.0, price_out=2.0), text_request())
    assert out.usage.cost == pytest.approx(3000 / 1e6)
    (out,) = ask(make_model(scripted_server), text_request())
    assert out.usage.cost == 0.0 and out.usage.input_tokens == 1000


def test_chat_logprobs(scripted_server):
    scripted_server.set_reply("the answer is 4")
    (out,) = ask(make_model(scripted_server, top_logprobs=2), text_request(logprobs=True))
    body = scripted_server.bodies()[0]
    assert body["logprobs"] is True and body["top_logprobs"] == 2
    assert "".join(t["token"] for t in out.logprobs) == "the answer is 4"
    assert [t["logprob"] for t in out.logprobs] == [-0.01, -0.02, -0.03, -0.04]
    assert all(len(t["top_logprobs"]) == 2 for t in out.logprobs)


def test_logprobs_not_offered_by_server(scripted_server):
    raw = {"id": "x", "object": "chat.completion", "created": 0, "model": "test",
           "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}
    scripted_server.set_reply(lambda body: Reply(raw=raw))
    (out,) = ask(make_model(scripted_server), text_request(logprobs=True))
    assert out.error is None and out.text == "hi" and out.logprobs is None
    assert out.details["usage"] == "not reported by server" and out.usage.input_tokens == 0


def test_completions_mode(scripted_server):
    scripted_server.set_reply("Paris")
    model = make_model(scripted_server, mode="completions", top_logprobs=1)
    assert model.modalities == frozenset({"text"})
    (out,) = ask(model, text_request("The capital of France is", logprobs=True, max_tokens=5))
    (record,) = scripted_server.requests
    assert record.path == "/v1/completions"
    assert record.body["prompt"] == "The capital of France is" and record.body["logprobs"] == 1
    assert out.text == "Paris" and out.logprobs[0]["token"] == "Paris"
    assert out.logprobs[0]["top_logprobs"] == [{"token": "Paris", "logprob": -0.01}]
    conversation = Request([Message.text("system", "Answer."), Message.text("user", "2+2?")])
    ask(make_model(scripted_server, mode="completions"), conversation)
    assert scripted_server.requests[-1].body["prompt"] == "System: Answer.\n\nUser: 2+2?\n\nAssistant:"


# ---- settings, concurrency ---------------------------------------------------------------------------
def test_settings(scripted_server, monkeypatch):
    model = make_model(scripted_server, top_k=20, temperature=0.3, concurrency=7,
                       modalities="[text,image]", max_tokens_field="max_completion_tokens")
    assert model.concurrency == 7 and model.modalities == frozenset({"text", "image"})
    assert model.batch_size == 1 and model.cacheable
    ask(model, text_request(max_tokens=9))
    body = scripted_server.bodies()[0]
    # unknown keys go to the body; generation keys come from the request (the runner merges -M ones)
    assert body["top_k"] == 20 and body["temperature"] == 0.0 and body["max_completion_tokens"] == 9
    with pytest.raises(ModelSpecError, match="environment"):
        make_model(scripted_server, api_key="sk-123")
    with pytest.raises(ModelSpecError, match="http://"):
        make_model(scripted_server, base_url="localhost:8000/v1")
    with pytest.raises(ModelSpecError, match="mode"):
        make_model(scripted_server, mode="stream")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ModelSpecError, match="OPENAI_API_KEY"):
        build_model("openai:gpt-4o", {})
    monkeypatch.setenv("MY_KEY", "sk-test")
    model = make_model(scripted_server, api_key_env="MY_KEY")
    ask(model, text_request())
    assert scripted_server.requests[-1].headers["Authorization"] == "Bearer sk-test"


def test_proxy_from_environment_resolved_once(monkeypatch):
    from harness.models.openai import _proxy_for

    for name in ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert _proxy_for("https://api.example.com/v1") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    assert _proxy_for("https://api.example.com/v1") == "http://proxy.internal:3128"
    assert _proxy_for("http://api.example.com/v1") is None  # no HTTP_PROXY set
    monkeypatch.setenv("NO_PROXY", "example.com")
    assert _proxy_for("https://api.example.com/v1") is None


def test_concurrency_limit_bounds_in_flight_requests(scripted_server):
    scripted_server.delay = 0.05
    model = make_model(scripted_server, concurrency=4)
    outs = ask(model, *[text_request(f"q{i}") for i in range(24)])
    assert all(o.error is None for o in outs)
    assert scripted_server.max_in_flight == 4  # reached, never exceeded
    assert sorted(last_user_text(b) for b in scripted_server.bodies()) == sorted(f"q{i}" for i in range(24))


def test_model_survives_a_second_event_loop(scripted_server):
    model = make_model(scripted_server)
    assert asyncio.run(model.generate([text_request()]))[0].text == "ok"
    assert asyncio.run(model.generate([text_request()]))[0].text == "ok"  # a new session for the new loop
    asyncio.run(model.aclose())


def test_each_failure_keeps_its_kind(scripted_server):
    """A 429 that never clears is a rate limit and a refused connection is a connection failure:
    the kind is kept per sample (the runner stores it as error_kind), not flattened to "model"."""
    scripted_server.fail(429, times=None)
    (out,) = ask(make_model(scripted_server, max_retries=0), text_request())
    assert out.error.startswith("RateLimitError") and out.details["error_kind"] == "rate_limit"
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # nothing listens here once the socket is closed
    refused = build_model("openai:test", {"base_url": f"http://127.0.0.1:{closed}/v1", "retry_base": 0.01,
                                          "max_retries": 0})
    (out,) = ask(refused, text_request())
    assert out.error.startswith("APIConnectionError") and out.details["error_kind"] == "connection"
