"""Loglikelihood requests turned into token-level work, by lm-evaluation-harness's rules.

Every backend that scores text (``hf:``, ``llamacpp:``, ``vllm:``) meets the same two questions, and
the answers decide the numbers, so they live here once:

- **Where the context ends and the continuation begins** (:func:`encode_pair`). Trailing whitespace
  of the context moves to the continuation (``"Answer:" + " B"`` tokenises as the model saw it in
  training), the whole string is encoded once and the continuation is what follows the context's
  own encoding. An empty context becomes the prefix token (BOS, else EOS), unless the continuation
  itself starts with it. This is lm-eval 0.4.13's ``TemplateLM._encode_pair`` and
  ``TemplateLM.loglikelihood`` (``lm_eval/api/model.py``), re-implemented.
- **How a long text is cut for perplexity** (:func:`rolling_windows`): the first window predicts the
  first ``max_length`` tokens after the prefix token, each later one predicts the next
  ``max_length`` tokens with as much preceding text as fits as context (one token of it minimum),
  and windows never score a token twice. This is ``get_rolling_token_windows`` with
  ``context_len=1`` followed by ``make_disjoint_window`` (``lm_eval/utils.py``, 0.4.13),
  re-implemented; ``tests/test_loglikelihood_tokens.py`` checks both against lm-eval's own functions.

Scoring a token pair (:class:`TokenPair`) is then the backend's job: feed
``(context + continuation)[-(max_length + 1):][:-1]``, take the last ``len(continuation)``
positions' log-softmax, sum the continuation tokens' entries, and compare the argmax with them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from harness.types import Loglikelihood, Request

Encode = Callable[[str], list[int]]


@dataclass(frozen=True, slots=True)
class TokenPair:
    """One scoring unit: tokens to condition on and tokens to score (never empty)."""

    context: tuple[int, ...]
    continuation: tuple[int, ...]

    def model_input(self, max_length: int) -> tuple[int, ...]:
        """What the model is fed: the whole sequence less its last token, left-truncated to
        ``max_length`` (the logits at these positions predict the continuation)."""
        return (self.context + self.continuation)[-(max_length + 1):][:-1]


def encode_pair(encode: Encode, context: str, continuation: str, prefix_token: int) -> TokenPair:
    """The (context, continuation) boundary as lm-eval draws it (see the module docstring).
    ``encode`` is the backend's tokeniser with lm-eval's special-token rule (:func:`bos_aware`)."""
    if context == "":
        cont = encode_plain(encode, continuation)
        if not cont:
            raise ValueError("the continuation encodes to no tokens")
        if cont[0] != prefix_token:
            return TokenPair((prefix_token,), tuple(cont))
        if len(cont) == 1:
            raise ValueError("the continuation is only the prefix token: there is nothing to score")
        return TokenPair(tuple(cont[:1]), tuple(cont[1:]))
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
        if context == "":  # a context of whitespace only: all of it went to the continuation
            return encode_pair(encode, "", continuation, prefix_token)
    whole = encode(context + continuation)
    ctx = encode(context)
    cont = whole[len(ctx):]
    if not cont:
        raise ValueError(f"the continuation {continuation!r} adds no token to its context")
    return TokenPair(tuple(ctx), tuple(cont))


def encode_plain(encode: Encode, text: str) -> list[int]:
    """``encode`` without special tokens (lm-eval's ``tok_encode(..., add_special_tokens=False)``):
    the tokeniser's ``plain`` attribute when it has one."""
    plain = getattr(encode, "plain", None)
    return list(plain(text)) if plain is not None else list(encode(text))


class BosAwareEncoder:
    """A tokeniser call with lm-eval's special-token rule: the tokeniser's own default (a Gemma
    tokeniser adds ``<bos>``, a GPT-2 style one adds nothing), except that a string which already
    starts with the BOS text is encoded without special tokens (no double BOS)."""

    def __init__(self, with_specials: Encode, plain: Encode, bos_text: str | None) -> None:
        self._with_specials = with_specials
        self.plain = plain
        self._bos_text = bos_text or None

    def __call__(self, text: str) -> list[int]:
        if self._bos_text is not None and text.startswith(self._bos_text):
            return list(self.plain(text))
        return list(self._with_specials(text))


def rolling_windows(tokens: Sequence[int], prefix_token: int, max_length: int) -> list[TokenPair]:
    """Disjoint windows that together score every token of ``tokens`` once (see the module
    docstring); an empty text has no windows and a loglikelihood of 0."""
    if max_length < 1:
        raise ValueError("max_length must be at least 1")
    return [TokenPair(tuple(ctx), tuple(pred)) for ctx, pred in _windows(list(tokens), prefix_token, max_length)]


def _windows(tokens: list[int], prefix: int, max_len: int) -> Iterator[tuple[list[int], list[int]]]:
    if not tokens:
        return
    first = min(max_len, len(tokens))
    # the first window predicts its tokens from the prefix token on; made disjoint, its context is
    # the prefix token alone (the tokens it predicts are fed as the continuation)
    yield [prefix], tokens[:first]
    predicted = first
    while predicted < len(tokens):
        n = min(len(tokens) - predicted, max_len)  # context_len=1: each window predicts max_len tokens
        end = predicted + n
        context = tokens[max(end - max_len - 1, 0): end - 1]
        # disjoint: drop the context tokens that the window's own predictions overlap
        yield context[: len(context) - (n - 1)], tokens[end - n: end]
        predicted = end


def pairs_of(request: Request, encode: Encode, prefix_token: int, max_length: int) -> list[list[TokenPair]]:
    """A scoring request's token work: for ``loglikelihood`` one pair per (context, continuation),
    for ``loglikelihood_rolling`` each text's windows (summed back by :func:`combine`)."""
    if request.kind == "loglikelihood":
        out = [[encode_pair(encode, c, x, prefix_token)] for c, x in request.pairs]
        for (pair,) in out:
            # lm-eval asserts this: a longer continuation cannot be scored within the context length
            if len(pair.continuation) > max_length:
                raise ValueError(f"a continuation of {len(pair.continuation)} tokens is longer than the context "
                                 f"length {max_length}")
        return out
    if request.kind == "loglikelihood_rolling":
        return [rolling_windows(encode(t), prefix_token, max_length) for t in request.texts]
    raise ValueError(f"not a scoring request: {request.kind}")


@dataclass(frozen=True, slots=True)
class Unit:
    """One token pair of a call's scoring requests: which request, which of its pairs or texts."""

    request: int
    item: int
    pair: TokenPair


@dataclass(slots=True)
class Expanded:
    """A call's scoring requests as token work: ``failed`` holds the one-line reason of each request
    that cannot be encoded (it fails alone), ``shapes`` the number of units of each item of the others."""

    units: list[Unit]
    shapes: dict[int, list[int]]
    failed: dict[int, str]


def expand(requests: Sequence[Request], encode: Encode, prefix_token: int, max_length: int) -> Expanded:
    """Every request's :func:`pairs_of`, flattened into units (what every scoring backend starts from)."""
    out = Expanded([], {}, {})
    for i, req in enumerate(requests):
        try:
            per_item = pairs_of(req, encode, prefix_token, max_length)
        except ValueError as exc:
            out.failed[i] = str(exc)
            continue
        out.shapes[i] = [len(u) for u in per_item]
        for j, item_units in enumerate(per_item):
            out.units.extend(Unit(i, j, p) for p in item_units)
    return out


def combine(parts: Sequence[Loglikelihood]) -> Loglikelihood:
    """One text's windows as one answer: logprobs and token counts summed, greedy only if every
    window is (lm-eval keeps only the sum for rolling requests)."""
    return Loglikelihood(sum(p.logprob for p in parts), all(p.greedy for p in parts), sum(p.tokens for p in parts))
