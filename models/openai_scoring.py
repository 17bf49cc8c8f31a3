"""Scoring requests through an OpenAI-compatible ``/completions`` endpoint (``-M endpoint=completions``).

The protocol is lm-eval's ``local-completions`` model (``lm_eval/models/openai_completions.py`` and
``api_models.py``, 0.4.13): each (context, continuation) is one request whose prompt is the two
together, with ``echo: true``, ``logprobs: 1``, ``max_tokens: 1`` and ``temperature: 0``; the reply's
``choices[0].logprobs.token_logprobs`` holds the log-probability of every echoed prompt token given
the ones before it, and a continuation's value is the sum over its tokens. It is greedy when each of
its tokens' logprob is the largest of that position's ``top_logprobs`` (lm-eval's test). ``max_tokens``
is 1, not 0, as lm-eval sends: some servers take 0 as "no limit" (llama-cpp-python's server then
generates to the end of its context); the generated token is left out by position.

Where the continuation starts -- the numbers depend on it -- is decided one of two ways, and a scored
output's ``details["boundary"]`` says which:

- **Tokens** (a tokenizer is known: ``-M tokenizer=hf:PATH``, or the server's tokenize endpoint, which
  ``tokenizer=auto`` looks for; see :mod:`harness.models.openai_tokenizer`). Pairs are cut by the
  core's rule (:func:`harness.loglikelihood.pairs_of`: trailing context whitespace moved to the
  continuation, the whole string encoded once, the continuation being what follows the context's own
  encoding, an empty context becoming the prefix token), exactly as the ``hf:`` backend cuts them, and
  the last ``len(continuation)`` echoed prompt tokens are scored. Counting from the end makes a BOS
  that the server adds (or strips from its echo) harmless. A rolling text is cut into lm-eval's
  disjoint windows (:func:`harness.loglikelihood.rolling_windows`) and the windows' values summed.
- **Text offsets** (``-M tokenizer=none``, or ``auto`` on a server without a tokenize endpoint). The
  continuation is the text after the context (after the same whitespace move), and the echoed tokens
  scored are those whose span, by the reply's ``text_offset``, reaches into it. Limitations: a token
  that straddles the boundary (the tokeniser merged the context's last characters with the
  continuation's first) is scored whole, where the token rule may count it as context and score one
  token fewer, so values can differ from lm-eval's at such boundaries; a rolling text is scored in one
  request, so one longer than the server's context is refused (the server's error, plus how to give a
  tokenizer); and an empty context, or a rolling text, needs a server that puts a BOS before the
  prompt (without one the first token has nothing to be predicted from and the request fails).

The prompt goes as text by default (``-M score_prompt=text``): every echoing server takes it, and
llama-cpp-python's server fails ``echo`` with token-id prompts. A window or a left-truncated pair is
then the decoded text of its tokens, which the server encodes again, putting its BOS first where its
tokenizer does (in place of the window's first context token, so the length is kept): the tokens
scored are the same, the conditioning at the window's far left edge may differ by that one token.
``-M score_prompt=tokens`` sends token ids (vLLM and llama.cpp's server take them): exactly lm-eval's
inputs. Lengths follow lm-eval's ``max_length`` (``-M max_length``, default the context the server
reports, else 2048): the prompt is at most ``max_length - 1`` tokens (the generated one fits), so a
window scores ``max_length - 2`` tokens, and a longer pair keeps its rightmost tokens.

Every reply is checked before it is believed: its logprobs must cover the prompt (a server that
ignores ``echo`` fails), each scored token must have one, and the scored tokens' texts must spell the
end of the prompt (by text offsets: all of the scored text, so an echo the server cut short fails;
compared on ASCII characters, since servers echo the pieces of a character split over byte tokens
differently). The last test catches llama-cpp-python's server (0.3.x) reporting echoed logprobs
one position off, which it does when the prompt does not start with BOS (a model whose GGUF sets
``add_bos_token`` false, e.g. SmolLM2, on a prompt not starting with its BOS text): it then also
drops the generated token from the logprobs while its usage counts it, so the scored tokens no
longer end the prompt. The check cannot see it when the next token the server would generate is EOS
(then nothing is dropped); a prompt that starts with the BOS text is reported correctly.

Failures are per request and one line. ``loglikelihood_unsupported``: the server cannot score text
-- no ``/completions`` (404/405: a chat-only server), a refusal that names ``echo`` or ``logprobs``
(not retried), ``logprobs: null``, an echo that does not cover the prompt (these four are remembered:
later requests fail at once without being sent), a scored token without a logprob, or the
misalignment above. Other failures keep their usual kinds (``rate_limit``, ``server``, ``timeout``,
``client``, ...), ``input`` for text that cannot be cut and ``tokenizer`` when the tokenizer fails.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.loglikelihood import TokenPair, combine, pairs_of
from harness.models.openai_tokenizer import (
    TokenizerError,
    TokenizerUnreachable,
    Tokens,
    hf_tokens,
    models_max_length,
    server_tokens,
)
from harness.types import Loglikelihood, Output, Request, Usage

if TYPE_CHECKING:
    from harness.models.openai import OpenAIModel

DEFAULT_MAX_LENGTH = 2048  # lm-eval's TemplateAPI default
UNSUPPORTED = "loglikelihood_unsupported"
NO_PREFIX = -1  # stands for an unknown prefix token inside the core's pairs


class ScoreFailure(Exception):
    """One request cannot be scored: ``kind`` is its error kind; ``lasting`` failures describe the
    server, not the request, and are remembered. ``attempts``: HTTP requests it took (0: remembered)."""

    def __init__(self, kind: str, message: str, lasting: bool = False, attempts: int = 0) -> None:
        super().__init__(message)
        self.kind = kind
        self.lasting = lasting
        self.attempts = attempts


@dataclass(frozen=True, slots=True)
class Unit:
    """One HTTP request: ``prompt`` (text or token ids), ``n`` tokens to score at its end (the token
    rule) or None (the text-offset rule, scoring the last ``chars`` characters), and ``text`` (the
    prompt as text, for the alignment check; empty for token ids)."""

    item: int
    prompt: str | list[int]
    n: int | None
    chars: int = 0
    text: str = ""


@dataclass(frozen=True, slots=True)
class Scored:
    value: Loglikelihood
    prompt_tokens: int
    output_tokens: int


def split_pair(context: str, continuation: str) -> tuple[str, str]:
    """lm-eval's whitespace rule (as :func:`harness.loglikelihood.encode_pair`): the context's
    trailing whitespace belongs to the continuation."""
    n = len(context) - len(context.rstrip())
    return (context[:-n], context[-n:] + continuation) if n else (context, continuation)


class Scoring:
    """The scoring path of one :class:`~harness.models.openai.OpenAIModel` (see the module docstring)."""

    def __init__(self, model: OpenAIModel) -> None:
        self.model = model
        self.settings = model.settings
        self.url = self.settings.base_url + "/completions"
        self.lasting: ScoreFailure | None = None  # the server cannot score: every request fails with it
        self._lock = threading.Lock()
        self._resolved = False
        self._tokens: Tokens | None = None
        self._tokenizer_failure: ScoreFailure | None = None
        self.max_length = DEFAULT_MAX_LENGTH

    # ---- one request ------------------------------------------------------------------------------
    async def score(self, request: Request, http: Any, limit: asyncio.Semaphore) -> Output:
        started = time.perf_counter()
        try:
            if self.lasting is not None:  # remembered: answered without a call
                raise ScoreFailure(self.lasting.kind, str(self.lasting), lasting=True)
            units, n_items = await asyncio.to_thread(self.units, request)
        except ScoreFailure as exc:
            return _failed(exc, Usage(seconds=time.perf_counter() - started))
        results = await asyncio.gather(*(self._send(u, http, limit) for u in units))
        usage = Usage(seconds=time.perf_counter() - started)
        for r in results:
            if isinstance(r, Scored):
                usage = usage + Usage(input_tokens=r.prompt_tokens, output_tokens=r.output_tokens, calls=1,
                                      cost=(r.prompt_tokens * self.model.price_in
                                            + r.output_tokens * self.model.price_out) / 1_000_000)
        failures = [r for r in results if isinstance(r, ScoreFailure)]
        if failures:
            usage.calls += len(failures)
            failed = _failed(failures[0], usage)
            failed.details["attempts"] = sum(f.attempts for f in failures)
            return failed
        per_item: list[list[Loglikelihood]] = [[] for _ in range(n_items)]
        for unit, r in zip(units, results, strict=True):
            assert isinstance(r, Scored)
            per_item[unit.item].append(r.value)
        lls = [combine(values) if request.kind == "loglikelihood_rolling" else values[0] for values in per_item]
        boundary = "text_offset" if self._tokens is None else f"tokens ({self._tokens.source})"
        details: dict[str, Any] = {"scored_units": len(units), "boundary": boundary}
        if self._tokens is not None:
            details["max_length"] = self.max_length
        return Output(loglikelihoods=lls, usage=usage, details=details)

    # ---- the units ---------------------------------------------------------------------------------
    def units(self, request: Request) -> tuple[list[Unit], int]:
        """The HTTP requests a scoring request becomes, and its number of items (run in a thread: the
        server's tokenizer is called synchronously)."""
        tokens = self._resolve()
        if tokens is None:
            if request.kind == "loglikelihood":
                out = []
                for j, (c, x) in enumerate(request.pairs):
                    c2, x2 = split_pair(c, x)
                    out.append(Unit(j, c2 + x2, None, len(x2), c2 + x2))
                return out, len(request.pairs)
            # an empty text scores 0 over 0 tokens, as lm-eval's windows of nothing do
            return [Unit(j, t, None, len(t), t) for j, t in enumerate(request.texts) if t], len(request.texts)
        window = self.max_length - 2
        prefix = tokens.prefix if tokens.prefix is not None else NO_PREFIX
        try:
            per_item = pairs_of(request, tokens.encode, prefix, window)
        except ValueError as exc:
            raise ScoreFailure("input", f"input: {exc}") from None
        except TokenizerUnreachable as exc:
            raise ScoreFailure("connection", f"tokenizer: {exc}") from None
        except TokenizerError as exc:
            raise ScoreFailure("tokenizer", f"tokenizer: {exc}") from None
        units = []
        for j, pairs in enumerate(per_item):
            strings = split_pair(*request.pairs[j]) if request.kind == "loglikelihood" else None
            for pair in pairs:
                units.append(self._token_unit(j, pair, strings, tokens, window))
        return units, len(per_item)

    def _token_unit(self, item: int, pair: TokenPair, strings: tuple[str, str] | None, tokens: Tokens,
                    window: int) -> Unit:
        if NO_PREFIX in pair.context:
            raise ScoreFailure("input", "input: this text starts from the prefix token (BOS, else EOS), which the "
                                        f"tokenizer ({tokens.source}) does not name: pass -M prefix_token=ID")
        n = len(pair.continuation)
        if n > window:
            raise ScoreFailure("input", f"input: a continuation of {n} tokens does not fit max_length="
                                        f"{self.max_length} (at most {window} tokens are scored per request)")
        seq = pair.context + pair.continuation
        ids = list(seq[-(window + 1):])
        if self.settings.score_prompt == "tokens":
            return Unit(item, ids, n)
        try:
            text = self._prompt_text(pair, strings, tokens, ids, len(seq) <= window + 1)
        except TokenizerUnreachable as exc:
            raise ScoreFailure("connection", f"tokenizer: {exc}") from None
        except TokenizerError as exc:
            raise ScoreFailure("tokenizer", f"tokenizer: {exc}") from None
        return Unit(item, text, n, 0, text)

    @staticmethod
    def _prompt_text(pair: TokenPair, strings: tuple[str, str] | None, tokens: Tokens, ids: list[int],
                     whole: bool) -> str:
        """The text whose encoding by the server is ``ids`` (module docstring): a pair's own strings
        when it is whole, else the decoded tokens."""
        if strings is not None and whole:
            context, continuation = strings
            if context:
                return context + continuation
            if tuple(tokens.encode.plain(continuation)) == pair.context + pair.continuation:
                return continuation  # it starts with the prefix token's own text already
            if tokens.adds_prefix:
                return continuation  # the server's tokenizer puts the prefix first itself
            assert tokens.prefix is not None
            head = tokens.decode([tokens.prefix])
            if not head:
                raise TokenizerError(f"the prefix token {tokens.prefix} decodes to no text, so a prompt cannot start "
                                     "with it: use -M score_prompt=tokens or a context that is not empty")
            return head + continuation
        return tokens.decode(ids[1:] if tokens.adds_prefix else ids)

    def _resolve(self) -> Tokens | None:
        """The tokenizer (once; a server that could not be asked is asked again next time)."""
        with self._lock:
            if self._tokenizer_failure is not None:
                raise self._tokenizer_failure
            if self._resolved:
                return self._tokens
            s = self.settings
            try:
                if s.tokenizer == "none":
                    tokens = None
                elif s.tokenizer.startswith("hf:"):
                    tokens = hf_tokens(s.tokenizer[3:])
                else:
                    tokens = server_tokens(s.base_url, s.model, dict(self.model._headers), s.timeout, s.prefix_token)
                    if tokens is None and s.tokenizer == "server":
                        raise TokenizerError(f"tokenizer=server: {s.base_url.removesuffix('/v1')} has no tokenize "
                                             "endpoint (/tokenize, /extras/tokenize)")
            except TokenizerUnreachable as exc:
                raise ScoreFailure("connection", f"tokenizer: {exc}") from None
            except TokenizerError as exc:
                self._tokenizer_failure = ScoreFailure("tokenizer", f"tokenizer: {exc}")
                raise self._tokenizer_failure from None
            if tokens is not None:
                if s.prefix_token is not None:
                    tokens.set_prefix(s.prefix_token)
                reported = tokens.max_length
                if reported is None and s.max_length is None:
                    reported = models_max_length(s.base_url, dict(self.model._headers), s.timeout)
                self.max_length = s.max_length or reported or DEFAULT_MAX_LENGTH
            self._tokens, self._resolved = tokens, True
            return tokens

    # ---- one HTTP request --------------------------------------------------------------------------
    async def _send(self, unit: Unit, http: Any, limit: asyncio.Semaphore) -> Scored | ScoreFailure:
        if self.lasting is not None:  # remembered: answered without a call
            return ScoreFailure(self.lasting.kind, str(self.lasting), lasting=True)
        s = self.settings
        body: dict[str, Any] = {"model": s.model, "prompt": unit.prompt, "echo": True, "logprobs": 1,
                                "max_tokens": 1, "temperature": 0.0, **s.extra_body}
        try:
            async with limit:
                posted = await self.model.post_json(http, "/completions", body, give_up=_names_echo)
            if posted.error is not None:
                failure = self._http_failure(posted.status, posted.error, unit)
                failure.attempts = posted.attempts
                raise failure
            return read_reply(posted.data, unit, self.url)
        except ScoreFailure as exc:
            if exc.lasting and self.lasting is None:
                self.lasting = exc
            return exc
        except Exception as exc:  # a reply of an unexpected shape: this request fails, not the run
            from harness.models.openai import _one_line

            return ScoreFailure("bad_response", _one_line(exc))

    def _http_failure(self, status: int, error: Exception, unit: Unit) -> ScoreFailure:
        from harness.models.openai import _one_line, error_kind

        line = _one_line(error)
        if status in (404, 405):
            return ScoreFailure(UNSUPPORTED, f"{self.url} cannot score text: {line} (no completions endpoint, or no "
                                             "such model there; a chat-only server gives no prompt logprobs)",
                                lasting=True)
        if status in (400, 422, 500, 501) and _names_echo(status, error):
            return ScoreFailure(UNSUPPORTED, f"{self.url} cannot score text: it refuses echo with logprobs ({line})",
                               lasting=True)
        too_long = any(word in line.lower() for word in ("context", "length", "too long", "maximum", "exceed"))
        if status == 400 and unit.n is None and self._tokens is None and too_long:
            line += ("; without a tokenizer a prompt is sent whole, so one longer than the server's context cannot "
                     "be cut into windows or left-truncated (give -M tokenizer=server or hf:PATH)")
        return ScoreFailure(error_kind(error), line)


def _names_echo(status: int, error: Exception) -> bool:
    """A refusal that says what the server cannot do (echo, logprobs): permanent, not retried."""
    text = str(error).lower()
    return status in (400, 422, 500, 501) and ("echo" in text or "logprob" in text)


def _failed(exc: ScoreFailure, usage: Usage) -> Output:
    return Output(error=str(exc), usage=usage, details={"error_kind": exc.kind, "attempts": exc.attempts})


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def read_reply(data: Any, unit: Unit, url: str) -> Scored:
    """The unit's value from a decoded 200 body (module docstring), or a ScoreFailure."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ScoreFailure("bad_response", f"APIResponseValidationError: reply has no choices: "
                                           f"{json.dumps(data)[:200]}")
    choice = choices[0]
    lp = choice.get("logprobs")
    if lp is None:
        raise ScoreFailure(UNSUPPORTED, f"{url} cannot score text: it answers echo with logprobs=1 with logprobs null "
                                        "(no prompt logprobs)", lasting=True)
    values = lp.get("token_logprobs") if isinstance(lp, dict) else None
    if not isinstance(values, list):
        raise ScoreFailure(UNSUPPORTED, f"{url} cannot score text: its logprobs have no token_logprobs", lasting=True)
    strs, tops, offsets = lp.get("tokens"), lp.get("top_logprobs"), lp.get("text_offset")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    reported = usage.get("completion_tokens")
    generated = reported if type(reported) is int else (1 if choice.get("finish_reason") == "length" else 0)
    generated = max(0, min(generated, len(values)))
    n_prompt = len(values) - generated
    if unit.n is not None:
        if n_prompt == 0:
            raise ScoreFailure(UNSUPPORTED, f"{url} cannot score text: its logprobs cover no prompt token (it does "
                                            "not echo the prompt)", lasting=True)
        if n_prompt < unit.n + 1:  # e.g. a leading BOS left out of the echo: this prompt only
            raise ScoreFailure(UNSUPPORTED, f"{url}: the echo covers {n_prompt} prompt tokens, not the {unit.n} scored "
                                            "plus the context before them (it leaves out the prompt's first tokens, as "
                                            "llama-cpp-python's server leaves out a leading BOS): a continuation at "
                                            "the start of the prompt cannot be scored there")
        chosen = list(range(n_prompt - unit.n, n_prompt))
    else:
        chosen = _by_offsets(offsets, strs, n_prompt, generated, unit.chars, url)
    missing = [i for i in chosen if not _number(values[i])]
    if missing:
        first = missing[0]
        where = ("the first token of the echoed prompt, which servers give none (llama-cpp-python's also drops the one "
                 "after BOS): a continuation at the very start of the prompt cannot be scored there") if first == 0 \
            else "the server left it out"
        raise ScoreFailure(UNSUPPORTED, f"{url}: no logprob for scored token {first} of the echoed prompt: {where}")
    _check_alignment(choice, strs, chosen, n_prompt, generated, unit, url)
    logprob = sum(float(values[i]) for i in chosen)
    greedy = all(_is_top(values[i], tops[i] if isinstance(tops, list) and i < len(tops) else None) for i in chosen)
    n_in = usage.get("prompt_tokens")
    return Scored(Loglikelihood(logprob, greedy, len(chosen)), n_in if type(n_in) is int else n_prompt, generated)


def _by_offsets(offsets: Any, strs: Any, n_prompt: int, generated: int, chars: int, url: str) -> list[int]:
    """The echoed prompt tokens whose span reaches into the last ``chars`` characters of the prompt:
    the prompt's end is where the generated token starts (or the last prompt token's end), so a BOS
    the server echoes before the text shifts nothing."""
    if (not isinstance(offsets, list) or not isinstance(strs, list) or len(offsets) < n_prompt
            or len(strs) < n_prompt or n_prompt < 1 or not all(type(o) is int for o in offsets[:n_prompt + 1])):
        raise ScoreFailure(UNSUPPORTED, f"{url} cannot score text by text offsets: its logprobs give no usable "
                                        "text_offset (give -M tokenizer=server or hf:PATH)", lasting=True)
    last = strs[n_prompt - 1] if isinstance(strs[n_prompt - 1], str) else ""
    end = offsets[n_prompt] if generated and n_prompt < len(offsets) else offsets[n_prompt - 1] + len(last)
    start = end - chars
    ends = [offsets[i + 1] if i + 1 < n_prompt else end for i in range(n_prompt)]
    chosen = [i for i in range(n_prompt) if ends[i] > start]
    if not chosen:
        raise ScoreFailure("bad_response", f"{url}: no echoed token covers the continuation "
                                           f"(text offsets {offsets[:8]})")
    return chosen


def _check_alignment(choice: dict[str, Any], strs: Any, chosen: list[int], n_prompt: int, generated: int,
                     unit: Unit, url: str) -> None:
    """The scored tokens' texts must end the prompt (module docstring). Compared on their ASCII
    characters only: a character split over byte tokens is echoed as pieces that servers render
    differently (dropped, U+FFFD), and OpenAI's ``bytes:`` tokens are not text at all (skipped)."""
    if not isinstance(strs, list) or len(strs) < n_prompt or not all(isinstance(strs[i], str) for i in chosen):
        return
    if any(strs[i].startswith("bytes:") for i in chosen):
        return
    joined = _ascii("".join(strs[i] for i in chosen))
    prompt = unit.text
    if not prompt:  # token ids: the echoed text, less what was generated
        echoed = choice.get("text")
        if not isinstance(echoed, str):
            return
        tail = "".join(t for t in strs[n_prompt:] if isinstance(t, str))
        prompt = echoed[:len(echoed) - len(tail)] if tail and echoed.endswith(tail) else echoed
    prompt = _ascii(prompt)
    if unit.n is None and not joined.endswith(_ascii(unit.text[len(unit.text) - unit.chars:])):
        raise ScoreFailure(UNSUPPORTED, f"{url}: the echoed tokens do not cover the text scored (they spell "
                                        f"{joined[-40:]!r}): the server echoed less than the prompt, e.g. cut it to "
                                        "its context")
    if not prompt.endswith(joined):
        raise ScoreFailure(UNSUPPORTED, f"{url}: the echoed logprobs do not line up with the prompt (the tokens "
                                        f"scored, {joined[-40:]!r}, do not end it; the reply counts {generated} "
                                        f"generated after {n_prompt} echoed): llama-cpp-python's server does this for "
                                        "a prompt that does not start with BOS")


def _ascii(text: str) -> str:
    return text.encode("ascii", "ignore").decode("ascii")


def _is_top(value: Any, top: Any) -> bool:
    """lm-eval's greedy test: the token's logprob is the largest of its position's alternatives."""
    if not isinstance(top, dict) or not top:
        return False
    best = max((float(v) for v in top.values() if _number(v)), default=None)
    return best is not None and float(value) >= best
