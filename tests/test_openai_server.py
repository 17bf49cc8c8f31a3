"""The scripted server itself: the official ``openai`` client works against it, and it runs as a
separate process (how the throughput benchmark uses it)."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import openai
import pytest
from openai_server import correct_with_probability, last_user_text

pytest_plugins = ("openai_server",)  # the scripted_server fixture


def test_official_client_round_trip_and_scripted_errors(scripted_server):
    client = openai.OpenAI(base_url=scripted_server.base_url, api_key="none", max_retries=0)
    scripted_server.set_reply(lambda body: last_user_text(body).upper())
    reply = client.chat.completions.create(model="test", messages=[{"role": "user", "content": "shout"}],
                                           logprobs=True, top_logprobs=3)
    assert reply.choices[0].message.content == "SHOUT"
    assert reply.usage.prompt_tokens == 1 and reply.usage.completion_tokens == 1
    assert len(reply.choices[0].logprobs.content[0].top_logprobs) == 3
    scripted_server.fail(429, retry_after=7)
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="test", messages=[{"role": "user", "content": "x"}])
    assert caught.value.response.headers["retry-after"] == "7"
    completion = client.completions.create(model="test", prompt="abc", logprobs=2)
    assert completion.choices[0].text == "ABC" and completion.choices[0].logprobs.tokens == ["ABC"]
    assert [r.status for r in scripted_server.requests] == [200, 429, 200]
    assert [m.id for m in client.models.list()] == ["test"]


def test_correct_with_probability_is_deterministic_and_near_p():
    reply = correct_with_probability(0.3, right=lambda b: "R", wrong=lambda b: "W", seed=1)
    bodies = [{"messages": [{"role": "user", "content": f"question {i}"}]} for i in range(2000)]
    first = [reply(b) for b in bodies]
    assert first == [reply(b) for b in bodies]
    assert 0.26 < first.count("R") / len(first) < 0.34


def test_runs_as_a_separate_process():
    script = Path(__file__).with_name("openai_server.py")
    proc = subprocess.Popen([sys.executable, str(script), "--text", "pong", "--no-record"],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("READY ")
        url = f"http://127.0.0.1:{int(line.split()[1])}/v1/chat/completions"
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "ping"}]}).encode()
        request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as resp:
            data = json.loads(resp.read())
        assert data["choices"][0]["message"]["content"] == "pong" and data["model"] == "m"
    finally:
        proc.terminate()
        proc.wait(10)
