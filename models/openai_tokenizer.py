"""Token ids for the openai backend's scoring: a local transformers tokenizer or the server's own.

Scoring draws the context/continuation boundary on tokens when it can (lm-eval's rule,
:mod:`harness.loglikelihood`), which needs the model's tokenizer on this side of the API. Two sources:

- ``-M tokenizer=hf:PATH``: a transformers tokenizer (a local directory, an embedded model name such
  as ``smollm2-135m-instruct``, or a hub id with a warm cache), read exactly as the ``hf:`` backend
  reads it, so both backends cut the same tokens.
- the server's tokenize endpoint (``-M tokenizer=server``, and what ``auto`` finds): vLLM's and
  llama.cpp's ``POST /tokenize`` (one body carries both servers' field names: ``prompt`` and
  ``add_special_tokens`` for vLLM, ``content`` and ``add_special`` for llama.cpp; each ignores the
  other's), else llama-cpp-python's ``POST /extras/tokenize`` (which always applies the model's own
  BOS rule: the plain encoding is that minus the tokens it gives an empty string). The prefix token
  (BOS, else EOS: what an empty context and a rolling text start from) comes from ``-M prefix_token``,
  else the names ``GET /tokenizer_info`` gives (vLLM with ``--enable-tokenizer-info-endpoint``), else
  the token the tokenizer puts before every text (Gemma's ``<bos>``); when none says it, requests
  that need it fail with a line naming ``-M prefix_token``.

Calls are synchronous (``urllib``): the core's pair encoder is a plain function, so scoring runs it in
a worker thread; each distinct text is tokenised once (a bounded memo), and a multiple-choice question's
context, shared by its choices, costs one call.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from harness.loglikelihood import BosAwareEncoder

MEMO_SIZE = 4096


class TokenizerError(Exception):
    """The tokenizer cannot be used (a server endpoint failed, a path does not load); one line."""


class TokenizerUnreachable(TokenizerError):
    """The server could not be asked (connection refused, time-out, 5xx): nothing is concluded."""


class Tokens:
    """One tokenizer as scoring needs it: ``encode`` (lm-eval's special-token rule), ``decode``,
    ``prefix`` (BOS, else EOS; None when unknown), ``adds_prefix`` (its default encoding puts the
    prefix before every text), ``source`` (what the details of a scored output name) and
    ``max_length`` (the context length the server reported, if any)."""

    def __init__(self, source: str, with_specials: Callable[[str], list[int]], plain: Callable[[str], list[int]],
                 decode: Callable[[Sequence[int]], str], prefix: int | None, bos_text: str | None,
                 max_length: int | None = None) -> None:
        self.source = source
        self.max_length = max_length
        self.decode = decode
        self._empty = list(with_specials(""))  # what the tokenizer puts before every text
        self.encode = BosAwareEncoder(with_specials, plain, bos_text)
        self.set_prefix(prefix)

    def set_prefix(self, prefix: int | None) -> None:
        self.prefix = prefix
        self.adds_prefix = prefix is not None and self._empty[:1] == [prefix]


def _memo(fn: Callable[[str], list[int]]) -> Callable[[str], list[int]]:
    cache: dict[str, list[int]] = {}

    def call(text: str) -> list[int]:
        hit = cache.get(text)
        if hit is None:
            if len(cache) >= MEMO_SIZE:
                cache.clear()
            hit = cache[text] = list(fn(text))
        return list(hit)

    return call


# ---- a local transformers tokenizer ------------------------------------------------------------
def hf_tokens(path: str) -> Tokens:
    """``-M tokenizer=hf:PATH`` loaded as the hf backend loads its tokenizer, with the same encoder
    (``hf_scoring.encoder``: the tokenizer's special-token default, no second BOS)."""
    from transformers import AutoTokenizer

    from .hf import resolve_path

    try:
        source, _local = resolve_path(path)
        tok: Any = AutoTokenizer.from_pretrained(source)
    except Exception as exc:  # a missing directory, an offline hub id: one line
        raise TokenizerError(f"tokenizer=hf:{path} does not load: {type(exc).__name__}: "
                             f"{' '.join(str(exc).split())[:300]}") from None
    prefix = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    return Tokens(f"hf:{path}", lambda t: list(tok.encode(t)), lambda t: list(tok.encode(t, add_special_tokens=False)),
                  lambda ids: str(tok.decode(list(ids))), None if prefix is None else int(prefix),
                  str(tok.decode([prefix])) if prefix is not None else None)


# ---- the server's tokenizer --------------------------------------------------------------------
class _Http:
    """Synchronous JSON calls to the server root (the base URL less ``/v1``)."""

    def __init__(self, base_url: str, headers: dict[str, str], timeout: float) -> None:
        self.root = base_url.removesuffix("/v1")
        self.base_url = base_url
        self.headers = {**headers, "Content-Type": "application/json"}
        self.timeout = timeout

    def call(self, url: str, body: dict[str, Any] | None) -> tuple[int, Any]:
        """(status, decoded JSON or None); unreachable servers and 5xx raise TokenizerUnreachable."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, headers=self.headers, method="GET" if body is None else "POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        except (OSError, ValueError) as exc:  # refused, reset, time-out, bad URL
            raise TokenizerUnreachable(f"{url}: {type(exc).__name__}: {' '.join(str(exc).split())}") from None
        if status >= 500:
            raise TokenizerUnreachable(f"{url}: HTTP {status}: {raw[:200].decode('utf-8', 'replace')}")
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, None


def _tokens_of(reply: Any) -> list[int] | None:
    tokens = reply.get("tokens") if isinstance(reply, dict) else None
    if isinstance(tokens, list) and all(type(t) is int for t in tokens):
        return list(tokens)
    return None


def server_tokens(base_url: str, model: str, headers: dict[str, str], timeout: float,
                  prefix_token: int | None) -> Tokens | None:
    """The server's tokenizer, or None when it has no tokenize endpoint (a definite 4xx from each);
    an unreachable server raises TokenizerUnreachable (nothing is concluded from a failed call)."""
    http = _Http(base_url, headers, timeout)

    def tokenize_body(text: str, specials: bool) -> dict[str, Any]:
        return {"model": model, "prompt": text, "add_special_tokens": specials, "content": text,
                "add_special": specials}

    status, reply = http.call(http.root + "/tokenize", tokenize_body("", True))
    found = _tokens_of(reply) if status == 200 else None
    if found is not None:
        def ask(text: str, specials: bool) -> list[int]:
            status, reply = http.call(http.root + "/tokenize", tokenize_body(text, specials))
            tokens = _tokens_of(reply)
            if status != 200 or tokens is None:
                raise TokenizerError(f"{http.root}/tokenize answered HTTP {status} for a text: {str(reply)[:200]}")
            return tokens

        def decode(ids: Sequence[int]) -> str:
            status, reply = http.call(http.root + "/detokenize", {"model": model, "tokens": list(ids)})
            text = (reply.get("prompt", reply.get("content")) if isinstance(reply, dict) else None)
            if status != 200 or not isinstance(text, str):
                raise TokenizerError(f"{http.root}/detokenize answered HTTP {status}: {str(reply)[:200]}")
            return text

        reported = reply.get("max_model_len") if isinstance(reply, dict) else None
        with_specials, plain = _memo(lambda t: ask(t, True)), _memo(lambda t: ask(t, False))
        return _finish("server /tokenize", http, with_specials, plain, decode, found, prefix_token,
                       reported if type(reported) is int else None)
    status, reply = http.call(http.root + "/extras/tokenize", {"model": model, "input": ""})
    found = _tokens_of(reply) if status == 200 else None
    if found is None:
        return None
    auto = list(found)  # what the model's BOS rule puts before every text

    def ask_extras(text: str) -> list[int]:
        status, reply = http.call(http.root + "/extras/tokenize", {"model": model, "input": text})
        tokens = _tokens_of(reply)
        if status != 200 or tokens is None:
            raise TokenizerError(f"{http.root}/extras/tokenize answered HTTP {status}: {str(reply)[:200]}")
        return tokens

    def decode_extras(ids: Sequence[int]) -> str:
        status, reply = http.call(http.root + "/extras/detokenize", {"model": model, "tokens": list(ids)})
        text = reply.get("text") if isinstance(reply, dict) else None
        if status != 200 or not isinstance(text, str):
            raise TokenizerError(f"{http.root}/extras/detokenize answered HTTP {status}: {str(reply)[:200]}")
        return text

    with_specials = _memo(ask_extras)

    def plain_extras(text: str) -> list[int]:
        tokens = with_specials(text)
        return tokens[len(auto):] if auto and tokens[:len(auto)] == auto else tokens

    return _finish("server /extras/tokenize", http, with_specials, plain_extras, decode_extras, auto, prefix_token,
                   None)


def _finish(source: str, http: _Http, with_specials: Callable[[str], list[int]], plain: Callable[[str], list[int]],
            decode: Callable[[Sequence[int]], str], empty: list[int], prefix_token: int | None,
            reported: int | None) -> Tokens:
    """The prefix token and its text (see the module docstring), and the context length reported."""
    bos_text: str | None = None
    prefix = prefix_token
    status, info = http.call(http.root + "/tokenizer_info", None)
    if status == 200 and isinstance(info, dict):
        bos, eos = info.get("bos_token"), info.get("eos_token")
        bos_text = bos if isinstance(bos, str) and bos else None
        for name in (bos_text, eos if isinstance(eos, str) and eos else None):
            ids = plain(name) if name else []
            if prefix is None and len(ids) == 1:
                prefix = ids[0]
    if prefix is None and len(empty) == 1:
        prefix = empty[0]  # the tokenizer puts this token before every text: its BOS
    if bos_text is None and empty and prefix == empty[0]:
        bos_text = decode([prefix]) or None
    if reported is None:
        reported = _models_max_length(http)
    return Tokens(source, with_specials, plain, decode, prefix, bos_text, reported)


def models_max_length(base_url: str, headers: dict[str, str], timeout: float) -> int | None:
    """The context length ``GET /v1/models`` reports (vLLM's ``max_model_len``), if any."""
    return _models_max_length(_Http(base_url, headers, timeout))


def _models_max_length(http: _Http) -> int | None:
    try:
        status, reply = http.call(http.base_url + "/models", None)
    except TokenizerUnreachable:
        return None
    data = reply.get("data") if status == 200 and isinstance(reply, dict) else None
    for entry in data if isinstance(data, list) else []:
        value = entry.get("max_model_len") if isinstance(entry, dict) else None
        if type(value) is int and value > 0:
            return value
    return None
