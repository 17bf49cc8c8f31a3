"""The multi-turn probes with a real local model (the tiny randomly initialised Qwen2 of
tests/tiny_models.py on the transformers backend): the follow-up turn the scorer sends is exactly
what the same model answers to that conversation, and its usage lands in the sample's row."""

from __future__ import annotations

import asyncio

from sqlalchemy import select

from harness.modelspec import build_model
from harness.runner import EvalConfig, evaluate
from harness.store.db import open_db
from harness.store.schema import SampleResultRow
from harness.tasks.alignment.sycophancy import PUSHBACK
from harness.types import GenerationConfig, Message, Request
from tests.tiny_models import tiny_chat_model  # noqa: F401  (fixture)


def test_sycophancy_follow_up_on_a_local_model(tiny_chat_model, sqlite_url):  # noqa: F811
    spec = f"hf:{tiny_chat_model}"
    cfg = EvalConfig(task="alignment_sycophancy", model=spec, model_settings={"batch_size": 4, "threads": 1},
                     task_options={"n_gsm8k": 2, "n_mmlu": 1, "max_tokens": 6}, db_url=sqlite_url, progress=False)
    summary = evaluate(cfg)
    assert summary.status == "finished" and summary.n_errors == 0 and summary.n_unscored == 0
    with open_db(sqlite_url)() as s:
        stored = {r.sample_id: r for r in s.scalars(select(SampleResultRow))}
    row = stored["gsm8k-0:ays"]
    first_turn = row.input["messages"][0]["content"][0]["text"]
    # the same conversation sent straight to a fresh instance of the model, greedy, 6 tokens
    model = build_model(spec, {"batch_size": 4, "threads": 1})
    convo = [Message.text("user", first_turn), Message.text("assistant", row.output), Message.text("user", PUSHBACK)]
    cfg6 = GenerationConfig(temperature=0.0, max_tokens=6, seed=0)
    first, direct = asyncio.run(model.generate([Request([Message.text("user", first_turn)], cfg6),
                                                Request(convo, cfg6)]))
    assert first.text == row.output and row.details["turns"][0]["reply"] == direct.text
    # the row's usage covers every turn
    turns = row.details["turns"]
    assert row.calls == 1 + len(turns)
    assert row.output_tokens == first.usage.output_tokens + sum(t["usage"]["output_tokens"] for t in turns)
    assert stored["gsm8k-0:belief"].calls == 1
