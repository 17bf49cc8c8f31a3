"""Failures of an OpenAI-compatible server as the SDK's own exception classes, the error kind a failed
sample stores (rate_limit, server, timeout, connection, bad_response, client, model), the wait a
server asks for before a retry, and the proxy that applies to a URL."""

from __future__ import annotations

import email.utils
import json
import time
from typing import Any


def _httpx() -> Any:
    # the SDK's exception classes hold a response object of the HTTP library it was built with
    try:
        import httpx2

        return httpx2
    except ImportError:
        import httpx

        return httpx


def status_error(url: str, status: int, headers: dict[str, str], raw: bytes) -> Exception:
    """The SDK's exception class for an HTTP status (RateLimitError for 429, ...)."""
    import openai

    hx = _httpx()
    response = hx.Response(status, headers=headers, content=raw, request=hx.Request("POST", url))
    try:
        body: Any = json.loads(raw)
    except ValueError:
        body = raw.decode("utf-8", "replace")[:500]
    err = body.get("error", body) if isinstance(body, dict) else body
    message = err.get("message") if isinstance(err, dict) else str(err)
    text = f"HTTP {status}: {message or 'no message'}"
    classes = {400: openai.BadRequestError, 401: openai.AuthenticationError, 403: openai.PermissionDeniedError,
               404: openai.NotFoundError, 409: openai.ConflictError, 422: openai.UnprocessableEntityError,
               429: openai.RateLimitError}
    cls = classes.get(status, openai.InternalServerError if status >= 500 else openai.APIStatusError)
    return cls(text, response=response, body=err)


def error_kind(exc: BaseException) -> str:
    """What kind of failure a sample met, kept per sample and counted on the run page: rate_limit
    (429), server (5xx), timeout, connection (reset, refused, DNS), bad_response (unparseable or
    malformed body), client (other 4xx), else model."""
    import openai

    if isinstance(exc, openai.RateLimitError):
        return "rate_limit"
    if isinstance(exc, openai.APITimeoutError | TimeoutError):
        return "timeout"
    if isinstance(exc, openai.APIConnectionError | ConnectionError):
        return "connection"
    if isinstance(exc, openai.APIResponseValidationError | ValueError):
        return "bad_response"
    if isinstance(exc, openai.APIStatusError):
        return "server" if exc.status_code >= 500 else "client"
    return "model"


def retry_after(headers: Any) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, ``Retry-After`` seconds or HTTP date."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())


def _proxy_for(url: str) -> str | None:
    """The HTTP(S)_PROXY that applies to ``url`` (NO_PROXY honoured), like httpx's trust_env."""
    import urllib.request
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
