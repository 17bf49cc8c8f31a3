"""The transformers backend on tiny randomly initialised models built locally (tests/tiny_models.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from harness.client import ModelClient
from harness.modelspec import ModelSpecError, build_model
from harness.types import GenerationConfig, Message, Part, Request
from tests.tiny_models import tiny_chat_model, tiny_vision_model  # noqa: F401  (fixtures)

QUESTIONS = [
    "What is 2+2?",
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning. How many are left?",
    "A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts in total?",
]


def ask(text: str, **config) -> Request:
    return Request([Message.text("user", text)], GenerationConfig(**config))


def run(model, requests):
    return asyncio.run(model.generate(requests))


@pytest.fixture(scope="module")
def tiny(tiny_chat_model):  # noqa: F811
    return build_model(f"hf:{tiny_chat_model}", {"batch_size": 8})


def test_greedy_batched_equals_unbatched_token_for_token(tiny):
    requests = [ask(q, max_tokens=12, logprobs=True) for q in QUESTIONS]
    batched = run(tiny, requests)
    singles = [run(tiny, [r])[0] for r in requests]
    assert [o.error for o in batched] == [None] * 3
    # left padding + attention mask: a prompt's reply must not depend on its batch-mates
    assert [[t["id"] for t in o.logprobs] for o in batched] == [[t["id"] for t in o.logprobs] for o in singles]
    assert [o.text for o in batched] == [o.text for o in singles]
    for b, s in zip(batched, singles, strict=True):
        assert [t["logprob"] for t in b.logprobs] == pytest.approx([t["logprob"] for t in s.logprobs], abs=1e-4)
    assert len({o.text for o in batched}) == 3  # the random model is not degenerate: replies differ
    assert {o.details["batch_size"] for o in batched} == {3}


def test_chat_template_applied_and_usage_counts_tokens(tiny):
    out = run(tiny, [ask(QUESTIONS[0], max_tokens=5)])[0]
    tok = tiny.tokenizer
    templated = tok.apply_chat_template([{"role": "user", "content": QUESTIONS[0]}], add_generation_prompt=True,
                                        tokenize=False)
    assert templated.startswith("<|im_start|>user\n") and templated.endswith("<|im_start|>assistant\n")
    assert out.usage.input_tokens == len(tok(templated, add_special_tokens=False)["input_ids"])
    assert out.usage.output_tokens == 5 and out.details["finish_reason"] == "length"
    assert out.usage.calls == 1 and out.usage.seconds > 0


def test_logprobs_match_a_direct_forward_pass(tiny):
    import torch

    out = run(tiny, [ask(QUESTIONS[1], max_tokens=8, logprobs=True)])[0]
    tok = tiny.tokenizer
    prompt = tok.apply_chat_template([{"role": "user", "content": QUESTIONS[1]}], add_generation_prompt=True,
                                     tokenize=False)
    prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    generated = [t["id"] for t in out.logprobs]
    assert len(generated) == out.usage.output_tokens == 8
    with torch.inference_mode():
        logits = tiny.hf_model(torch.tensor([prompt_ids + generated])).logits[0].float()
    expected = logits.log_softmax(-1)[len(prompt_ids) - 1 : -1].gather(1, torch.tensor(generated)[:, None])[:, 0]
    assert [t["logprob"] for t in out.logprobs] == pytest.approx(expected.tolist(), abs=1e-4)
    # greedy: every chosen token was the argmax
    assert generated == logits[len(prompt_ids) - 1 : -1].argmax(-1).tolist()
    assert "".join(t["token"] for t in out.logprobs) == tok.decode(generated)


def test_top_logprobs_listed_best_first(tiny):
    out = run(tiny, [Request([Message.text("user", "hi")],
                             GenerationConfig(max_tokens=3, logprobs=True, extra={"top_logprobs": 4}))])[0]
    for entry in out.logprobs:
        alts = entry["top_logprobs"]
        assert len(alts) == 4 and alts[0]["id"] == entry["id"]  # greedy picks the best
        assert [a["logprob"] for a in alts] == sorted((a["logprob"] for a in alts), reverse=True)


def test_no_logprobs_unless_asked(tiny):
    assert run(tiny, [ask("hi", max_tokens=2)])[0].logprobs is None


def test_sampling_is_seeded_per_request_regardless_of_batch(tiny):
    sampled = [ask(q, max_tokens=10, temperature=1.0, seed=7) for q in QUESTIONS]
    a = run(tiny, sampled)
    b = run(tiny, sampled[::-1])[::-1]
    alone = run(tiny, [sampled[1]])[0]
    assert [o.text for o in a] == [o.text for o in b]
    assert alone.text == a[1].text
    other_seed = run(tiny, [ask(QUESTIONS[1], max_tokens=10, temperature=1.0, seed=8)])[0]
    greedy = run(tiny, [ask(QUESTIONS[1], max_tokens=10)])[0]
    assert other_seed.text != a[1].text or greedy.text != a[1].text  # sampling does something
    assert len({o.text for o in run(tiny, [ask(QUESTIONS[1], max_tokens=10, temperature=1.0, seed=s)
                                            for s in range(4)])}) > 1


def test_top_p_tiny_keeps_only_the_argmax(tiny):
    greedy = run(tiny, [ask(QUESTIONS[2], max_tokens=8)])[0]
    nucleus = run(tiny, [ask(QUESTIONS[2], max_tokens=8, temperature=1.0, top_p=1e-6, seed=3)])[0]
    assert nucleus.text == greedy.text


def test_stop_strings_cut_the_reply(tiny):
    first = run(tiny, [ask(QUESTIONS[0], max_tokens=12, logprobs=True)])[0]
    full = first.text
    # a plain-ASCII token from the middle of the reply (a lone byte of a UTF-8 character never matches)
    stop = next(t["token"] for t in first.logprobs[2:] if t["token"].strip().isascii() and t["token"].strip())
    assert stop in full
    out = run(tiny, [ask(QUESTIONS[0], max_tokens=12, stop=[stop])])[0]
    assert out.text == full[: full.find(stop)]
    assert out.details["finish_reason"] == "stop" and out.usage.output_tokens < 12
    # `-M stop=...` gives one string: a stop string, not a list of its characters (the model client
    # applies -M keys to every request)
    as_setting = ModelClient(build_model(tiny.spec, {"stop": stop}), settings={"stop": stop})
    via_setting = asyncio.run(as_setting.generate([ask(QUESTIONS[0], max_tokens=12)]))[0]
    assert via_setting.error is None and via_setting.text == out.text


def test_mixed_max_tokens_in_one_call_keep_order(tiny):
    outs = run(tiny, [ask(QUESTIONS[0], max_tokens=3), ask(QUESTIONS[1], max_tokens=6),
                      ask(QUESTIONS[2], max_tokens=3)])
    assert [o.usage.output_tokens for o in outs] == [3, 6, 3]
    assert outs[1].text == run(tiny, [ask(QUESTIONS[1], max_tokens=6)])[0].text


def test_settings_override_requests_and_enter_the_spec(tiny_chat_model):  # noqa: F811
    capped = ModelClient.build(f"hf:{tiny_chat_model}", {"max_tokens": 4, "batch_size": 2})
    assert capped.spec == f"hf:{tiny_chat_model}?max_tokens=4"  # part of the response-cache key
    assert capped.model.batch_size == 2
    outs = asyncio.run(capped.generate([ask(q, max_tokens=50) for q in QUESTIONS]))
    assert [o.usage.output_tokens for o in outs] == [4, 4, 4]


def test_bad_settings_and_paths_are_one_line_errors(tiny_chat_model, tmp_path):  # noqa: F811
    with pytest.raises(ModelSpecError, match="unknown setting 'colour'"):
        build_model(f"hf:{tiny_chat_model}", {"colour": "red"})
    with pytest.raises(ModelSpecError, match="no such model directory"):
        build_model(f"hf:{tmp_path}/absent", {})
    with pytest.raises(ModelSpecError, match="unknown dtype"):
        build_model(f"hf:{tiny_chat_model}", {"dtype": "int3"})
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelSpecError, match="cannot load"):
        build_model(f"hf:{tmp_path / 'empty'}", {})


def test_text_model_refuses_media_per_request(tiny, tmp_path):
    image = Request([Message("user", [Part("image", path=str(tmp_path / "x.png")), Part("text", "what?")])],
                    GenerationConfig(max_tokens=3))
    outs = run(tiny, [ask("hi", max_tokens=3), image])
    assert outs[0].error is None and outs[0].text
    assert "text-only" in outs[1].error and "image" in outs[1].error


def test_threads_follow_omp_num_threads(monkeypatch):
    from harness.models.hf import _cpu_threads

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert _cpu_threads(None) == 1
    assert _cpu_threads(3) == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert _cpu_threads(None) is None


def test_eval_through_the_runner_on_the_tiny_model(tiny_chat_model, sqlite_url):  # noqa: F811
    from harness.runner import EvalConfig, evaluate

    summary = evaluate(EvalConfig(task="gsm8k", model=f"hf:{tiny_chat_model}", limit=5, db_url=sqlite_url,
                                  model_settings={"max_tokens": 6, "batch_size": 2}, progress=False))
    assert summary.status == "finished" and summary.n_new == 5 and summary.n_errors == 0
    again = evaluate(EvalConfig(task="gsm8k", model=f"hf:{tiny_chat_model}", limit=5, db_url=sqlite_url,
                                model_settings={"max_tokens": 6, "batch_size": 2}, progress=False))
    assert again.n_new == 0 and again.n_skipped == 5


# ---- image-text model -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def picture(tmp_path_factory) -> Path:
    import numpy as np
    from PIL import Image

    path = tmp_path_factory.mktemp("img") / "noise.png"
    Image.fromarray((np.random.RandomState(0).rand(40, 48, 3) * 255).astype("uint8")).save(path)
    return path


def test_vision_model_takes_images_and_isolates_bad_files(tiny_vision_model, picture, tmp_path):  # noqa: F811
    vlm = build_model(f"hf:{tiny_vision_model}", {})
    assert vlm.modalities == frozenset({"text", "image"})
    with_image = Request([Message("user", [Part("image", path=str(picture)), Part("text", "What is this?")])],
                         GenerationConfig(max_tokens=6))
    other = Request([Message("user", [Part("image", path=str(picture)), Part("text", "Describe it.")])],
                    GenerationConfig(max_tokens=6))
    text_only = ask("What is this?", max_tokens=6)
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not a png")
    bad = Request([Message("user", [Part("image", path=str(broken)), Part("text", "?")])],
                  GenerationConfig(max_tokens=6))
    missing = Request([Message("user", [Part("image", path=str(tmp_path / "nope.png")), Part("text", "?")])],
                      GenerationConfig(max_tokens=6))
    outs = run(vlm, [with_image, text_only, bad, missing, other])
    assert [o.error is None for o in outs] == [True, True, False, False, True]
    assert "not found" in outs[3].error
    # the picture reaches the model: 16 patch tokens expand the one <image> placeholder
    assert outs[0].usage.input_tokens == outs[1].usage.input_tokens + 16
    assert outs[0].usage.output_tokens == 6
    alone = run(vlm, [with_image])[0]
    assert alone.text == outs[0].text  # batched with a broken neighbour, the reply is unchanged
    clean = run(vlm, [with_image, other, text_only])  # one processor call, two pictures, left-padded
    assert [o.error for o in clean] == [None] * 3
    assert clean[0].text == alone.text and clean[2].text == outs[1].text
    audio = Request([Message("user", [Part("audio", path=str(picture)), Part("text", "?")])],
                    GenerationConfig(max_tokens=2))
    assert "cannot take audio" in run(vlm, [audio])[0].error
