"""Fast checks of the live arena's parts: the pair sampler, moderation, categories, the streaming
client's fall-back, the wait before the next battle, demo votes, the pool and category CLI."""

from __future__ import annotations

import asyncio
import json
import random
from datetime import timedelta

from typer.testing import CliRunner

from harness.cli import app
from harness.client import ModelClient
from harness.leaderboard.arena import categories, limits, moderation, sampler
from harness.leaderboard.arena.battles import naive_utc
from harness.leaderboard.arena.config import ArenaConfig
from harness.store.db import open_db
from harness.store.schema_arena import ArenaBattleRow, ArenaVoteRow
from harness.types import Message, Output, Request, Usage


def test_active_sampler_prefers_uncertain_neighbours_and_keeps_a_uniform_share():
    models = ["a", "b", "c", "d"]
    ratings = {"a": 1200.0, "b": 1190.0, "c": 900.0, "d": 600.0}
    se = dict.fromkeys(models, 30.0)
    rng = random.Random(1)
    first = [sampler.pair_order(models, rng, ratings=ratings, se=se, uniform_share=0.0)[0] for _ in range(2000)]
    assert first.count(("a", "b")) / 2000 > 0.9  # 10 points apart with sd 42: the order is uncertain
    assert ("a", "d") not in first  # 600 points apart: settled
    mixed = [sampler.pair_order(models, rng, ratings=ratings, se=se, uniform_share=0.5)[0] for _ in range(4000)]
    assert abs(mixed.count(("a", "d")) / 4000 - 0.5 / 6) < 0.02  # the uniform share reaches every pair
    # votes on a pair damp it; a model without votes (prior sd) is preferred
    assert sampler.active_weight(0, 0, 30, 30, 400) < sampler.active_weight(0, 0, 30, 30, 0)
    assert sampler.active_weight(0, 0, 400, 30, 0) > sampler.active_weight(0, 0, 30, 30, 0)


def test_word_list_moderation_matches_whole_words_and_stems():
    words = moderation.WordList(["forbidden phrase", "bomb*", "# a comment"])
    check = lambda t: asyncio.run(words.check(t))  # noqa: E731
    assert check("how to build a BOMBER jacket") is not None
    assert check("a   Forbidden\nphrase here") is not None
    assert check("the word bombastic") is not None and check("thumbomb") is None
    assert check("a harmless question about # a comment") is None
    assert asyncio.run(moderation.from_config(ArenaConfig()).check("anything")) is None


class _Fixed:
    spec, batch_size, concurrency, modalities, cacheable = "fixed", 1, 1, frozenset({"text"}), False

    def __init__(self, reply: Output) -> None:
        self.reply = reply

    async def generate(self, requests):  # type: ignore[no-untyped-def]
        return [self.reply for _ in requests]


def test_model_moderation_fails_closed_and_reads_flag():
    flag = moderation.ModelModerator(ModelClient(_Fixed(Output(text="FLAG"))))
    ok = moderation.ModelModerator(ModelClient(_Fixed(Output(text="OK"))))
    broken = moderation.ModelModerator(ModelClient(_Fixed(Output(error="HTTP 500"))))
    assert asyncio.run(flag.check("x")) and asyncio.run(ok.check("x")) is None and asyncio.run(broken.check("x"))


def test_stream_falls_back_to_the_whole_reply_and_counts_usage():
    client = ModelClient(_Fixed(Output(text="the whole reply", usage=Usage(output_tokens=3, calls=1, cost=0.5))))

    async def run() -> tuple[list[str], Output | None]:
        stream = client.stream(Request([Message.text("user", "hi")]))
        return [d async for d in stream], stream.output

    deltas, out = asyncio.run(run())
    assert deltas == ["the whole reply"] and out is not None and out.text == "the whole reply"
    assert client.usage.output_tokens == 3 and client.usage.cost == 0.5


def test_categories():
    assert categories.language("Why is the sky blue at noon?") == "en"
    assert categories.language("Почему небо голубое?") == "ru"
    assert categories.language("なぜ空は青いのですか") == "ja"
    assert categories.language("Pourquoi le ciel est bleu et pas rouge ?") == "fr"
    assert categories.length("x" * 100) == "short" and categories.length("x" * 5000) == "long"
    assert categories.kind("Write a Python function that sorts a list") == "code"
    assert categories.kind("Write Blender code for a chair", "code3d") == "3d"
    assert categories.kind("Tell me a story") == "text"
    cats = categories.categorize("Write a python script", "chat")
    assert categories.matches(cats, categories.parse_filter("kind=code,language=en"))
    assert categories.matches(cats, categories.parse_filter("code"))
    assert not categories.matches(cats, categories.parse_filter("length=long"))


def test_wait_is_known_before_serving(sqlite_url):
    sessions = open_db(sqlite_url)
    now = [1_800_000_000.0]
    cfg = ArenaConfig(secret="x", votes_per_minute=2, clock=lambda: now[0])
    with sessions() as s:
        assert limits.wait_seconds(s, cfg, "v", "ip") == 0
        for k, ago in enumerate((50, 20)):
            when = naive_utc(now[0] - ago)
            b = ArenaBattleRow(public_id=f"p{k}", task="t", sample_id="s", left_model="a", right_model="b", media={},
                               features={}, voter_hash="v", ip_hash="ip", created_at=when,
                               expires_at=when + timedelta(minutes=5))
            s.add(b)
            s.flush()
            s.add(ArenaVoteRow(battle_id=b.id, task="t", sample_id="s", left_model="a", right_model="b",
                               outcome="left", voter_hash="v", ip_hash="ip", served_at=when, created_at=when,
                               features={}))
        s.commit()
        assert limits.wait_seconds(s, cfg, "v", "ip") == 10  # the older vote leaves the minute in 10 s
        assert limits.wait_seconds(s, cfg, "other", "ip2") == 0
        assert "10 s" in limits.refusal(10)


def test_demo_seeds_votes_and_ratings_by_category(sqlite_url):
    runner = CliRunner()
    result = runner.invoke(app, ["arena", "demo", "--db", sqlite_url, "--votes", "300"])
    assert result.exit_code == 0 and "300 seeded votes" in result.output, result.output
    again = runner.invoke(app, ["arena", "demo", "--db", sqlite_url])
    assert again.exit_code == 0 and "seeded votes" not in again.output  # idempotent
    out = runner.invoke(app, ["arena", "ratings", "--db", sqlite_url, "--bootstrap", "0", "--json"])
    board = json.loads(out.output)
    order = [r["model"] for r in board["ratings"]]
    assert order[0] == "demo-alpha" and order[-1] == "demo-delta"  # the demo's hidden ranking comes out
    assert board["excluded_voters"] == []  # plausible voters: the audit flags none
    styled = runner.invoke(app, ["arena", "ratings", "--db", sqlite_url, "--category", "kind=text", "--style"])
    assert styled.exit_code == 0 and "kind=text" in styled.output and "style-controlled" in styled.output
    none = runner.invoke(app, ["arena", "ratings", "--db", sqlite_url, "--category", "kind=3d"])
    assert none.exit_code == 2 and "in category 'kind=3d'" in none.output
    bad = runner.invoke(app, ["arena", "ratings", "--db", sqlite_url, "--category", "colour=red"])
    assert bad.exit_code == 2 and "unknown category" in bad.output


def test_pool_commands(sqlite_url):
    runner = CliRunner()
    # --no-probe: nothing listens on port 9 (`pool add` refuses a model that does not answer its probe)
    add = runner.invoke(app, ["arena", "pool", "add", "openai:m1", "openai:m2", "-M", "base_url=http://127.0.0.1:9/v1",
                              "--no-probe", "--db", sqlite_url])
    assert add.exit_code == 0 and "pool: openai:m1" in add.output, add.output
    listed = runner.invoke(app, ["arena", "pool", "list", "--db", sqlite_url])
    assert "openai:m2\topenai:m2 -M base_url=http://127.0.0.1:9/v1\tchat" in listed.output
    assert runner.invoke(app, ["arena", "pool", "remove", "openai:m1", "--db", sqlite_url]).exit_code == 0
    gone = runner.invoke(app, ["arena", "pool", "remove", "openai:m1", "--db", sqlite_url])
    assert gone.exit_code == 2 and "no pool model" in gone.output
    bad = runner.invoke(app, ["arena", "pool", "add", "openai:x", "--kind", "video", "--db", sqlite_url])
    assert bad.exit_code == 2 and "unknown kind" in bad.output


def _two_model_task(sessions, task: str, family: str, outputs: tuple[str, str], predictions: tuple[object, object]):
    from harness.leaderboard.arena.demo import _run
    from harness.store.ops import get_or_create_task
    from harness.store.schema import SampleResultRow

    with sessions() as s:
        t = get_or_create_task(s, name=task, version="1", content_hash=task, family=family, description="")
        for model, out, pred in zip(("m-one", "m-two"), outputs, predictions, strict=True):
            run = _run(s, t.id, model, f"{task}-{model}")
            s.add(SampleResultRow(run_id=run, sample_id="s0", epoch=0, input={"messages": [
                {"role": "user", "content": "Which digit is this? [0.1, 0.7, ...]"}]}, output=out, prediction=pred,
                error=None, scores={}, details={}))
        s.commit()


def test_unjudgeable_and_same_looking_battles_are_never_served(sqlite_url):
    from fastapi.testclient import TestClient

    from harness.leaderboard.arena import create_arena_app

    app = create_arena_app(sqlite_url, ArenaConfig(secret="s", stats_ttl_s=0))
    client = TestClient(app)
    empty = client.get("/api/arena/battle")
    assert empty.status_code == 404 and "harness arena pool add" in empty.json()["detail"]
    assert "harness eval" in empty.json()["detail"]
    # a feature-vector task (family methods): not judgeable by a person, whatever the outputs
    _two_model_task(app.state.sessions, "digits", "methods", ("3", "7"), ({"class": 3}, {"class": 7}))
    # a text task whose shown text is the same while hidden predictions differ
    _two_model_task(app.state.sessions, "same-text", "qa", ("3", "3"), ({"p": 0.9}, {"p": 0.6}))
    for task in ("digits", "same-text", None):
        r = client.get("/api/arena/battle", params={"task": task} if task else {})
        assert r.status_code == 404, r.text
    # the same text task with different shown answers is served, labelled with its categories
    _two_model_task(app.state.sessions, "differs", "qa", ("3", "seven"), (None, None))
    served = client.get("/api/arena/battle")
    assert served.status_code == 200 and served.json()["task"] == "differs"
    with app.state.sessions() as s:
        from sqlalchemy import select

        row = s.scalar(select(ArenaBattleRow).where(ArenaBattleRow.public_id == served.json()["battle"]))
        assert row is not None and row.categories == {"family": "qa", "language": "en", "length": "short",
                                                      "kind": "text"}


def _png_colours(data: bytes) -> set[bytes]:
    import struct
    import zlib

    pos, idat = 8, b""
    width = 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IHDR":
            width = struct.unpack(">I", data[pos + 8:pos + 12])[0]
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + n]
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = 1 + 3 * width
    return {raw[r * stride + 1 + 3 * x:r * stride + 4 + 3 * x] for r in range(len(raw) // stride) for x in range(width)}


def test_demo_gives_no_model_away_by_colour_or_index(sqlite_url, tmp_path):
    from sqlalchemy import select

    from harness.leaderboard.arena.demo import DEMO_MODELS, seed_renders, seed_text
    from harness.store.schema import SampleResultRow

    sessions = open_db(sqlite_url)
    seed_text(sessions)
    seed_renders(sessions, tmp_path)
    palettes = {m: _png_colours((tmp_path / m / "s003" / "view0.png").read_bytes()) for m in DEMO_MODELS}
    assert len({frozenset(p) for p in palettes.values()}) == 1  # every model renders in the same colours
    with sessions() as s:
        texts = [t for (t,) in s.execute(select(SampleResultRow.output)) if t]
    assert not [t for t in texts if t.startswith("Answer ") or any(m in t for m in DEMO_MODELS)]


def test_sampling_bench_runs_and_is_deterministic():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "bench" / "arena_sampling.py"
    spec = importlib.util.spec_from_file_location("arena_sampling", path)
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    runs = [bench.simulate(6, 800.0, 400, 20, 0.9, active, 0, 0.25, 0.2) for active in (False, True, True)]
    assert all(20 <= r <= 400 for r in runs) and runs[1] == runs[2]


# ---- the bounded, sanitising stream reader and folded matching (the live arena's attack surface)


class _Deltas:
    """A streaming backend yielding fixed deltas (``stream``) and recording whether it was closed."""

    spec, batch_size, concurrency, modalities, cacheable = "deltas", 1, 1, frozenset({"text"}), False

    def __init__(self, deltas, endless: bool = False) -> None:  # type: ignore[no-untyped-def]
        self.deltas, self.endless, self.closed, self.pulled = list(deltas), endless, False, 0

    async def generate(self, requests):  # type: ignore[no-untyped-def]
        raise AssertionError("streamed, not generated")

    async def stream(self, request):  # type: ignore[no-untyped-def]
        try:
            while True:
                for d in self.deltas:
                    self.pulled += 1
                    yield d
                if not self.endless:
                    break
            yield Output(usage=Usage(output_tokens=len(self.deltas), calls=1))
        finally:
            self.closed = True


def _read(backend, cap=None):  # type: ignore[no-untyped-def]
    async def run() -> tuple[list[str], Output | None]:
        stream = ModelClient(backend).stream(Request([Message.text("user", "hi")]))
        if cap is not None:
            stream.limit(cap)
        return [d async for d in stream], stream.output

    return asyncio.run(run())


def test_stream_is_cut_at_its_cap_and_the_backend_closed():
    backend = _Deltas(["abc" * 10], endless=True)
    deltas, out = _read(backend, cap=100)
    assert out is not None and len("".join(deltas)) == 100 and out.text == "".join(deltas)
    assert out.details["truncated"]["max_chars"] == 100 and out.details["finish_reason"] == "length"
    assert backend.closed and backend.pulled == 4 and out.error is None
    # within the cap nothing is marked
    deltas, out = _read(_Deltas(["one ", "two"]), cap=7)
    assert deltas == ["one ", "two"] and out is not None and "truncated" not in (out.details or {})
    # one huge delta is cut without being cleaned or copied whole
    deltas, out = _read(_Deltas(["\ud800" * 5_000_000]), cap=10)
    assert deltas == ["\ufffd" * 10] and out is not None and out.details["truncated"]


def test_stream_replaces_nul_and_lone_surrogates_and_joins_split_pairs():
    deltas, out = _read(_Deltas(["a\x00", "\ud83d", "\ude00b", "\udc00", "c\ud800"]))
    assert "".join(deltas) == "a\ufffd\U0001f600b\ufffdc\ufffd" and out is not None
    assert out.text == "".join(deltas) and out.details["sanitized"]["replaced"] == 3
    "".join(deltas).encode("utf-8")  # every delta can be sent and stored
    # bytes and non-text items never raise; a backend that raises mid-stream fails the reply, no more
    deltas, out = _read(_Deltas([b"caf\xc3\xa9", 7, "!"]))
    assert deltas == ["café", "!"] and out is not None and out.error is None

    class Boom(_Deltas):
        async def stream(self, request):  # type: ignore[no-untyped-def]
            yield "part"
            raise RuntimeError("lost \ud800 the connection")

    deltas, out = _read(Boom([]))
    assert deltas == ["part"] and out is not None and out.error.startswith("RuntimeError: lost \ufffd")


def test_folding_defeats_invisible_and_look_alike_characters():
    from harness.leaderboard.arena.fold import fold, mentions

    for disguised in ("bo\u200bmb", "b\u00adomb", "ｂｏｍｂ", "b\u043emb", "bo\u0301mb", "BΟMB", "\u2060bomb\ufeff",
                      "\U0001d41b\U0001d428\U0001d426\U0001d41b", "b\u0336o\u0336m\u0336b\u0336"):
        assert fold(disguised) == "bomb", ascii(disguised)
    assert fold("Café") == "cafe" and fold("Straße") == "strasse"
    words = moderation.WordList(["bomb*", "forbidden phrase", "naïve"])
    check = lambda t: asyncio.run(words.check(t))  # noqa: E731
    assert check("ＢＯＭＢＥＲ jacket") and check("a forbidden\u00a0phr\u0430se") and check("so naive")
    assert check("Почему небо голубое?") is None and check("thumbomb") is None
    # self-naming: any name, folded, separators alike; short names say nothing
    assert mentions("I am GPT 4o\u200b-Mini.", {"gpt-4o-mini"}) and mentions("I'm Owlbear_mini", {"owlbear-mini"})
    assert not mentions("A gpt answer", {"gpt"}) and not mentions("an owl, a bear", {"owlbear-mini"})


def test_a_pool_entry_is_known_by_its_label_spec_and_model():
    from harness.leaderboard.arena.pool import known_names

    assert {"fast-one", "openai:gpt-owl-mini", "gpt-owl-mini"} <= known_names("fast-one", "openai:gpt-owl-mini")
    assert "model-1b" in {n.lower() for n in known_names("x", "hf:org/Model-1B")}
    assert {"smollm2", "gpt-x"} <= known_names("v", "vote(smollm2, openai:gpt-x, n=5)")
    assert "constant" in known_names("builtin:constant (text=A)")  # no spec: the label's parts


def test_tokens_are_bound_to_their_kind():
    from harness.leaderboard.arena import tokens

    stored = tokens.battle_fields("b", "s", 0, "l", "r", "v", 9)
    live_ = tokens.battle_fields("b", "s", 0, "l", "r", "v", 9, kind=tokens.LIVE)
    mac = tokens.parse(tokens.sign(b"k", live_))
    assert mac is not None and tokens.check(b"k", live_, mac[2]) and not tokens.check(b"k", stored, mac[2])
    import pytest

    with pytest.raises(ValueError):
        tokens.battle_fields("b", "s", 0, "l", "r", "v", 9, kind="other")
