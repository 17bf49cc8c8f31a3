"""The core's loglikelihood tokenisation equals lm-eval 0.4.13's own functions.

``encode_pair`` against ``TemplateLM.loglikelihood`` (its ``_encode_pair`` and empty-context rule)
driven with ``HFLM.tok_encode`` on real tokenisers (SmolLM2's, which adds no BOS, and Gemma 3's,
which does); ``rolling_windows`` against ``get_rolling_token_windows`` + ``make_disjoint_window``.
"""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from harness.loglikelihood import BosAwareEncoder, TokenPair, encode_pair, rolling_windows
from tests.requirements import require

lm_utils = require("lm_eval.utils", "the lmeval extra (installed by tests/setup.d/00-python.sh)")
model_api = require("lm_eval.api.model", "the lmeval extra")
hf_lm = require("lm_eval.models.huggingface", "the lmeval extra")

PAIRS = [
    ("Question: 2+2?\nAnswer:", " 4"),
    ("Question: 2+2?\nAnswer: ", "4"),  # trailing space moves to the continuation
    ("Answer:\n\n  ", "yes"),  # several whitespace characters move
    ("The capital of France is", " Paris, a city of light"),  # several tokens
    ("", "Hello world"),  # empty context: the prefix token
    ("   ", "spaces only"),  # a context of whitespace only
    ("Zürich café", " naïve 🐄"),  # non-ASCII
    ("a", "b"),  # "ab" is one token: the continuation adds none (lm-eval asserts; we refuse the pair)
]


def _tokenizers():
    from transformers import AutoTokenizer

    from harness.models import hf_embedded

    out = []
    for name in ("smollm2-135m-instruct", "gemma3-270m"):
        try:
            folder = hf_embedded.ensure_converted(name)
        except Exception as exc:  # noqa: BLE001 - reported through the CI rule
            from tests.requirements import missing

            missing(f"the embedded model {name}", str(exc))
        out.append((name, AutoTokenizer.from_pretrained(str(folder))))
    return out


@pytest.fixture(scope="module", params=["smollm2-135m-instruct", "gemma3-270m"])
def tokenizer(request):
    return dict(_tokenizers())[request.param]


class _Capture(model_api.TemplateLM):  # lm-eval's own loglikelihood(), its token work captured
    def __init__(self, tok):
        super().__init__()
        bos = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
        self._fake = SimpleNamespace(tokenizer=tok, add_bos_token=None, prefix_token_id=bos)
        self.prefix = bos

    @property
    def eot_token_id(self):
        return self._fake.tokenizer.eos_token_id

    @property
    def prefix_token_id(self):
        return self.prefix

    def tok_encode(self, string, add_special_tokens=None, **kwargs):
        return hf_lm.HFLM.tok_encode(self._fake, string, add_special_tokens=add_special_tokens)

    def _loglikelihood_tokens(self, requests, **kwargs):
        return [(tuple(ctx), tuple(cont)) for _, ctx, cont in requests]

    def loglikelihood_rolling(self, requests, disable_tqdm=False):
        raise NotImplementedError

    def generate_until(self, requests, disable_tqdm=False):
        raise NotImplementedError


def _ours(tok):
    from harness.models.hf_scoring import encoder, prefix_token

    return encoder(tok), prefix_token(tok)


def test_encode_pair_equals_lm_eval(tokenizer):
    from lm_eval.api.instance import Instance

    ref = _Capture(tokenizer)
    expected = ref.loglikelihood([Instance("loglikelihood", {}, p, i) for i, p in enumerate(PAIRS)],
                                 disable_tqdm=True)
    encode, prefix = _ours(tokenizer)
    assert prefix == ref.prefix
    for (context, continuation), (ctx, cont) in zip(PAIRS, expected, strict=True):
        if context.strip() == "" and context:
            # lm-eval asserts a non-empty context after moving whitespace; we score it as an empty one
            continue
        if not cont:  # lm-eval's forward pass would assert on it; the pair fails alone here
            with pytest.raises(ValueError, match="adds no token"):
                encode_pair(encode, context, continuation, prefix)
            continue
        assert encode_pair(encode, context, continuation, prefix) == TokenPair(ctx, cont), (context, continuation)


def test_bos_prefixed_text_gets_no_second_bos(tokenizer):
    encode, prefix = _ours(tokenizer)
    bos_text = tokenizer.decode([prefix])
    with_bos = encode(bos_text + "Hello")
    assert with_bos.count(prefix) == 1


def test_whitespace_only_context_scores_as_empty_context(tokenizer):
    encode, prefix = _ours(tokenizer)
    assert encode_pair(encode, "   ", "x", prefix) == encode_pair(encode, "", "   x", prefix)


def test_a_continuation_that_adds_no_token_is_refused(tokenizer):
    encode, prefix = _ours(tokenizer)
    with pytest.raises(ValueError, match="continuation"):
        encode_pair(encode, "abc", "", prefix)


@pytest.mark.parametrize("max_len", [1, 2, 3, 7, 16, 64])
@pytest.mark.parametrize("n", [0, 1, 2, 6, 7, 8, 15, 16, 17, 100])
def test_rolling_windows_equal_lm_eval(n, max_len):
    tokens = [random.Random(n * 100 + max_len).randrange(1000) for _ in range(n)]
    expected = [lm_utils.make_disjoint_window(w)
                for w in lm_utils.get_rolling_token_windows(tokens, prefix_token=-1, max_seq_len=max_len,
                                                            context_len=1)]
    got = rolling_windows(tokens, -1, max_len)
    assert [(list(p.context), list(p.continuation)) for p in got] == [(list(a), list(b)) for a, b in expected]
    # every token is scored exactly once, in order
    assert [t for p in got for t in p.continuation] == tokens
    assert all(len(p.model_input(max_len)) <= max_len for p in got)


def test_bos_aware_encoder_uses_the_plain_encoding_after_bos():
    calls: list[str] = []
    enc = BosAwareEncoder(lambda t: calls.append("special") or [1, 2], lambda t: calls.append("plain") or [2],
                          "<s>")
    assert enc("<s>hi") == [2] and enc("hi") == [1, 2]
    assert calls == ["plain", "special"]
