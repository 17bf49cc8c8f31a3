"""The live arena plays the two embedded models against each other: SmolLM2-135M-Instruct (hf:) and
Gemma 3 270M (llamacpp:, the alias), added with `harness arena pool add` (which builds and probes each
with a real request), then one battle through the JSON/SSE API: both answer the prompt, the battle is
votable, the vote reveals both names, and the ratings count it."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from harness.leaderboard.arena import create_arena_app
from harness.leaderboard.arena.config import ArenaConfig
from harness.store.schema_arena import ArenaVoteRow
from harness.store.schema_arena_live import ArenaChatRow
from tests.requirements import require


def events(body: str) -> list[dict]:
    return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]


@pytest.fixture(scope="module")
def models_ready():
    require("llama_cpp", "llama-cpp-python (tests/setup.d/30-llamacpp.sh)")
    from harness.models import hf_embedded

    try:  # the packages that ship the weights (tests/setup.d/20-smollm2.sh and 22-gemma3.sh)
        hf_embedded.ensure_converted("smollm2-135m-instruct")
        hf_embedded.gguf_path(hf_embedded.EMBEDDED["gemma3-270m"])
    except Exception as exc:  # noqa: BLE001 - reported through the CI rule
        from tests.requirements import missing

        missing("an embedded model", str(exc))


def test_both_embedded_models_join_the_pool_and_play_a_battle(models_ready, sqlite_url, tmp_path):
    from typer.testing import CliRunner

    from harness.cli import app as cli

    added = CliRunner().invoke(cli, ["arena", "pool", "add", "smollm2", "gemma3-270m", "-M", "max_tokens=48",
                                     "--db", sqlite_url])
    assert added.exit_code == 0, added.output[-2000:]
    assert "probe: smollm2 answered" in added.output and "probe: gemma3-270m answered" in added.output
    listed = CliRunner().invoke(cli, ["arena", "pool", "list", "--db", sqlite_url])
    health = {line.split("\t")[0]: line.split("\t")[-1] for line in listed.output.strip().splitlines()}
    assert set(health) == {"smollm2", "gemma3-270m"} and all(h.startswith("ok") for h in health.values())

    app = create_arena_app(sqlite_url, ArenaConfig(secret="real", max_turns=1, live_media_dir=str(tmp_path / "live")))
    client = TestClient(app)
    r = client.post("/api/arena/chat", json={"prompt": "Name three colours of the rainbow."})
    assert r.status_code == 200, r.text[:500]
    evs = events(r.text)
    battle = evs[0]
    assert battle["type"] == "battle" and evs[-1]["type"] == "end"
    replies: dict[str, str] = {}
    for e in evs:
        if e["type"] == "delta":
            replies[e["side"]] = replies.get(e["side"], "") + e["text"]
    assert set(replies) == {"a", "b"} and all(text.strip() for text in replies.values())
    assert not [e for e in evs if e["type"] == "failed"]
    assert "smollm2" not in r.text and "gemma" not in r.text.lower()  # anonymous until the vote
    vote = client.post(f"/api/arena/chat/{battle['battle']}/vote", json={"token": battle["token"], "outcome": "left"})
    assert vote.status_code == 200, vote.text
    assert {vote.json()["a"]["model"], vote.json()["b"]["model"]} == {"smollm2", "gemma3-270m"}
    with app.state.sessions() as s:
        v = s.scalar(select(ArenaVoteRow))
        chat = s.scalar(select(ArenaChatRow))
        assert v is not None and v.task == "chat" and chat is not None
    ratings = CliRunner().invoke(cli, ["arena", "ratings", "--db", sqlite_url, "--json"])
    assert ratings.exit_code == 0 and {"smollm2", "gemma3-270m"} <= set(ratings.output.replace('"', " ").split())
