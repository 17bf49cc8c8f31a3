"""The llamacpp backend's own token choice and stop search (models/llamacpp.py), on plain arrays: no
llama.cpp needed. Greedy is the argmax; sampling follows the hf backend's definitions (temperature,
then top-k, then top-p over what is left) and depends on the seed alone; the top-p shortcut over a
few hundred candidates picks exactly what the full sort would."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.models.llamacpp import TOP_P_CANDIDATES, Chooser, _find_stop, log_softmax_at


def test_greedy_is_the_argmax():
    logits = np.array([0.1, 3.0, -2.0, 2.9], dtype=np.float32)
    assert Chooser().pick(logits) == 1
    assert Chooser(temperature=1.0, top_k=1, seed=5).pick(logits) == 1  # top-k 1 leaves only the best


def test_the_seed_alone_decides_a_draw():
    rng = np.random.default_rng(0)
    steps = [rng.normal(size=1000).astype(np.float32) for _ in range(20)]

    def draws(seed: int) -> list[int]:
        chooser = Chooser(temperature=1.0, top_p=0.9, seed=seed)
        return [chooser.pick(x) for x in steps]

    assert draws(7) == draws(7)
    assert draws(7) != draws(8)


def test_sampling_follows_the_distribution():
    logits = np.array([0.0, math.log(3.0)], dtype=np.float32)  # p = 0.25, 0.75 at temperature 1
    chooser = Chooser(temperature=1.0, seed=0)
    share = sum(chooser.pick(logits) for _ in range(4000)) / 4000
    assert 0.72 < share < 0.78
    hot = Chooser(temperature=100.0, seed=0)  # a high temperature flattens it towards 0.5
    assert 0.45 < sum(hot.pick(logits) for _ in range(4000)) / 4000 < 0.55


def test_top_p_keeps_the_smallest_prefix_reaching_p():
    probs = np.array([0.5, 0.3, 0.15, 0.05])
    logits = np.log(probs).astype(np.float32)
    seen = {Chooser(temperature=1.0, top_p=0.8, seed=s).pick(logits) for s in range(300)}
    assert seen == {0, 1}  # 0.5 + 0.3 reaches 0.8: the rest is cut
    seen = {Chooser(temperature=1.0, top_p=0.81, seed=s).pick(logits) for s in range(300)}
    assert seen == {0, 1, 2}


@pytest.mark.parametrize("peaked", [True, False])
def test_the_top_p_shortcut_equals_the_full_sort(peaked):
    rng = np.random.default_rng(1)
    vocab = 20_000
    scale = 8.0 if peaked else 0.5  # peaked: the nucleus lies in the best few hundred; flat: it does not
    logits = (rng.normal(size=vocab) * scale).astype(np.float32)
    z = logits.astype(np.float64)
    p = np.exp(z - z.max())
    p /= p.sum()
    order = np.argsort(-z, kind="stable")
    before = np.cumsum(p[order]) - p[order]
    nucleus = set(order[before < 0.9].tolist())
    assert (len(nucleus) < TOP_P_CANDIDATES) == peaked
    picks = [Chooser(temperature=1.0, top_p=0.9, seed=s).pick(logits) for s in range(200)]
    assert set(picks) <= nucleus
    assert len(set(picks)) > 1


def test_logprobs_are_the_raw_log_softmax():
    logits = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    lse = math.log(sum(math.exp(v) for v in (1.0, 2.0, 3.0)))
    value, best = log_softmax_at(logits, 0, 2)
    assert value == pytest.approx(1.0 - lse)
    assert [i for i, _ in best] == [2, 1]
    assert best[0][1] == pytest.approx(3.0 - lse)
    assert log_softmax_at(logits, 1, 0)[1] == []


def test_stop_search_finds_the_earliest_and_strings_split_across_pieces():
    text = bytearray(b"The answer is 4.\n\nQuestion")
    assert _find_stop(text, [b"\n\n", b"Question"], start=16) == 16  # one piece completed both: the earlier
    assert _find_stop(text, [b"Question"], start=len(text) - 3) == 18
    assert _find_stop(text, [b"#"], start=0) is None
    # the newest piece completed "\n\n" whose first byte came with the piece before
    assert _find_stop(bytearray(b"4.\n\n"), [b"\n\n"], start=3) == 2
