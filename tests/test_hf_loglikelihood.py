"""Scoring requests on the transformers backend, and their way through the runner.

On a tiny random model (fast) and the embedded SmolLM2: loglikelihoods equal a literal computation
(one unbatched forward pass per pair, log-softmax, sum); batch size and batch-mates change nothing;
rolling windows sum to the whole text's loglikelihood when the text fits; a bad pair fails alone. Then
``harness eval`` of the native multiple-choice task: rows store the request and the loglikelihoods, a
rerun resumes without duplicates and answers from the cache, and a chat-only backend is refused in
one line before any call.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import create_engine, text

from harness.modelspec import build_model
from harness.types import Request
from tests.tiny_models import tiny_chat_model  # noqa: F401  (fixture)

PAIRS = [("Question: 2+2?\nAnswer:", " 4"), ("Question: 2+2?\nAnswer:", " 5"), ("The cat sat on the", " mat."),
         ("", "Hello there"), ("x " * 40, "the end of a long context"), ("Answer: ", "B")]


def run(model, requests):
    return asyncio.run(model.generate(requests))


@pytest.fixture(scope="module")
def tiny(tiny_chat_model):  # noqa: F811
    return build_model(f"hf:{tiny_chat_model}", {"batch_size": 4})


def _literal(model, pair):
    """One pair, alone: the whole sequence through the model, log-softmax, the continuation's entries."""
    import torch

    from harness.loglikelihood import encode_pair
    from harness.models.hf_scoring import encoder, prefix_token

    tok = model.tokenizer
    tp = encode_pair(encoder(tok), *pair, prefix_token(tok))
    ids = torch.tensor([list(tp.context + tp.continuation)[:-1]])
    with torch.inference_mode():
        logprobs = torch.log_softmax(model.hf_model(input_ids=ids).logits[0].float(), dim=-1)
    cont = list(tp.continuation)
    rows = logprobs[-len(cont):]
    picked = rows[torch.arange(len(cont)), torch.tensor(cont)]
    return float(picked.sum()), bool((rows.argmax(-1) == torch.tensor(cont)).all()), len(cont)


def test_loglikelihoods_equal_a_literal_forward_pass(tiny):
    (out,) = run(tiny, [Request.loglikelihood(PAIRS)])
    assert out.error is None and len(out.loglikelihoods) == len(PAIRS)
    for pair, ll in zip(PAIRS, out.loglikelihoods, strict=True):
        logprob, greedy, n = _literal(tiny, pair)
        assert ll.logprob == pytest.approx(logprob, abs=1e-4) and ll.greedy == greedy and ll.tokens == n
    assert out.usage.input_tokens > 0 and out.usage.output_tokens == 0 and out.usage.calls == 1


def test_batching_and_batch_mates_change_nothing(tiny, tiny_chat_model):  # noqa: F811
    alone = [run(tiny, [Request.loglikelihood([p])])[0].loglikelihoods[0] for p in PAIRS]
    together = run(tiny, [Request.loglikelihood(PAIRS[:3]), Request.loglikelihood(PAIRS[3:])])
    one_row = build_model(f"hf:{tiny_chat_model}", {"batch_size": 1})
    (rowwise,) = run(one_row, [Request.loglikelihood(PAIRS)])
    flat = [ll for o in together for ll in o.loglikelihoods]
    for a, b, c in zip(alone, flat, rowwise.loglikelihoods, strict=True):
        assert b.logprob == pytest.approx(a.logprob, abs=1e-4) and c.logprob == pytest.approx(a.logprob, abs=1e-4)
        assert a.greedy == b.greedy == c.greedy


def test_rolling_windows_sum_to_the_whole_text(tiny, tiny_chat_model):  # noqa: F811
    text_ = "one two three four five six seven eight nine ten eleven twelve " * 3
    (whole,) = run(tiny, [Request.rolling([text_])])
    short = build_model(f"hf:{tiny_chat_model}", {"max_length": 8})  # many windows of 8 tokens
    (windowed,) = run(short, [Request.rolling([text_])])
    n = len(tiny.tokenizer.encode(text_))
    assert whole.loglikelihoods[0].tokens == windowed.loglikelihoods[0].tokens == n
    assert windowed.details["scored_units"] > 1 and whole.details["scored_units"] == 1
    # with a short context each window sees less text, so the values differ, and both are finite
    assert whole.loglikelihoods[0].logprob < 0 and windowed.loglikelihoods[0].logprob < 0
    (empty,) = run(tiny, [Request.rolling([""])])
    assert empty.loglikelihoods[0].logprob == 0.0 and empty.loglikelihoods[0].tokens == 0


def test_a_bad_pair_fails_its_request_alone(tiny):
    good, bad = run(tiny, [Request.loglikelihood(PAIRS[:2]), Request(list(Request.loglikelihood(PAIRS[:1]).messages),
                                                                          kind="loglikelihood", pairs=[("a", "")])])
    assert good.error is None and len(good.loglikelihoods) == 2
    assert bad.error is not None and bad.error.startswith("input:") and bad.loglikelihoods is None


def test_completion_uses_the_raw_prompt_not_the_chat_template(tiny):
    from harness.types import GenerationConfig, Message

    raw, chat = run(tiny, [Request.completion("Question: 2+2?\nAnswer:", GenerationConfig(max_tokens=6)),
                           Request([Message.text("user", "Question: 2+2?\nAnswer:")], GenerationConfig(max_tokens=6))])
    assert raw.error is None and chat.error is None
    n_raw = len(tiny.tokenizer.encode("Question: 2+2?\nAnswer:"))
    assert raw.usage.input_tokens == n_raw < chat.usage.input_tokens  # no template around it


def _cli(*args: str):
    from typer.testing import CliRunner

    from harness.cli import app

    return CliRunner().invoke(app, list(args))


def test_eval_stores_resumes_and_caches_scoring_runs(tmp_path):
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    first = _cli("eval", "-t", "mmlu_redux", "-m", "smollm2", "--limit", "6", "--db", db, "--no-progress")
    assert first.exit_code == 0, first.output[-2000:]
    assert "6 new" in first.output and "acc_norm" in first.output
    again = _cli("eval", "-t", "mmlu_redux", "-m", "smollm2", "--limit", "8", "--db", db, "--no-progress")
    assert again.exit_code == 0 and "2 new, 6 already done" in again.output
    engine = create_engine(db)
    with engine.connect() as c:
        rows = c.execute(text("select sample_id, input, prediction, scores, answer from sample_results")).all()
        cached = c.execute(text("select count(*) from response_cache")).scalar()
    engine.dispose()
    import json

    assert len(rows) == len({r.sample_id for r in rows}) == 8
    row = json.loads(rows[0].input) if isinstance(rows[0].input, str) else rows[0].input
    assert row["request"]["kind"] == "loglikelihood" and len(row["request"]["pairs"]) == 4
    pred = json.loads(rows[0].prediction) if isinstance(rows[0].prediction, str) else rows[0].prediction
    assert len(pred["loglikelihoods"]) == 4 and all(v[0] < 0 for v in pred["loglikelihoods"])
    assert cached == 8
    # a fresh run (another seed) asks the same scoring requests: all from the cache, none recomputed
    third = _cli("eval", "-t", "mmlu_redux", "-m", "smollm2", "--limit", "8", "--seed", "3", "--db", db,
                 "--no-progress")
    assert third.exit_code == 0 and "8 new" in third.output
    engine = create_engine(db)
    with engine.connect() as c:
        hits = c.execute(text("select count(*) from sample_results where cached and "
                              "run_id = (select max(id) from runs)")).scalar()
    engine.dispose()
    assert hits == 8


def test_a_chat_only_backend_is_refused_in_one_line(tmp_path):
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    done = _cli("eval", "-t", "mmlu_redux", "-m", "builtin:echo", "--db", db, "--no-progress")
    assert done.exit_code == 2
    lines = [line for line in done.output.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot answer loglikelihood requests" in lines[0] and "hf:" in lines[0]
    assert "Traceback" not in done.output


def test_an_operator_that_cannot_combine_loglikelihoods_is_refused(tmp_path):
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    done = _cli("eval", "-t", "mmlu_redux", "-m", "vote(builtin:echo, n=3)", "--db", db, "--no-progress")
    assert done.exit_code == 2 and "Traceback" not in done.output
    lines = [line for line in done.output.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot answer loglikelihood requests" in lines[0] and "vote" in lines[0]


def test_a_continuation_longer_than_the_context_fails_alone(tiny_chat_model):  # noqa: F811
    short = build_model(f"hf:{tiny_chat_model}", {"max_length": 8})
    long_one, fine = run(short, [Request.loglikelihood([("Q:", " one two three four five six seven eight nine ten")]),
                                 Request.loglikelihood([("Q:", " yes")])])
    assert long_one.loglikelihoods is None and "longer than the context length 8" in long_one.error
    assert fine.error is None and fine.loglikelihoods[0].logprob < 0
