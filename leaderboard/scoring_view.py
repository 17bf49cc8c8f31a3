"""A scoring request's answer as a table on the sample card, instead of raw JSON.

A ``loglikelihood`` sample stores its (context, continuation) pairs under ``input.request`` and its
answers under ``prediction.loglikelihoods`` (``[logprob, greedy, tokens]`` each, in order). The card
shows one row per continuation: its text, log-probability, tokens scored, whether greedy decoding
gives it, and which continuation is the most likely (the raw pick; a task's own answer, e.g. a
length-normalised one, is the card's "extracted answer"). A rolling sample shows each text's
log-probability. Anything else (or a row that does not parse) gets None: the card falls back to JSON.
"""

from __future__ import annotations

import math
from typing import Any

PREVIEW = 200  # characters of a rolling text shown in its row


def scoring_rows(stored_input: Any, prediction: Any) -> dict[str, Any] | None:
    if not isinstance(stored_input, dict) or not isinstance(prediction, dict):
        return None
    request = stored_input.get("request")
    values = prediction.get("loglikelihoods")
    if not isinstance(request, dict) or not isinstance(values, list):
        return None
    kind = request.get("kind")
    items = request.get("pairs") if kind == "loglikelihood" else request.get("texts")
    if not isinstance(items, list) or len(items) != len(values):
        return None
    rows: list[dict[str, Any]] = []
    for item, value in zip(items, values, strict=True):
        try:
            logprob, greedy, tokens = float(value[0]), bool(value[1]), int(value[2])
        except (TypeError, ValueError, IndexError):
            return None
        text = item[1] if kind == "loglikelihood" and isinstance(item, list) and len(item) == 2 else item
        text = str(text)
        rows.append({"text": text if len(text) <= PREVIEW else text[:PREVIEW] + "…", "logprob": logprob,
                     "greedy": greedy, "tokens": tokens, "best": False})
    logprobs = [float(r["logprob"]) for r in rows]
    finite = [i for i, lp in enumerate(logprobs) if math.isfinite(lp)]
    if kind == "loglikelihood" and finite:
        rows[max(finite, key=lambda i: logprobs[i])]["best"] = True
    return {"kind": kind, "rows": rows}
