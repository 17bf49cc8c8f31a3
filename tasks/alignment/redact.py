"""The hidden-completions rule: replies to harmful prompts are stored, but not shown publicly.

Samples whose reply (or a follow-up reply kept in ``details``) answers a harmful prompt carry
``metadata["hide_output"] = True`` (and ``hide_reason``). Public pages and exports should pass
each stored sample row through :func:`redact_row` unless the viewer is authenticated, and say so
with :data:`NOTICE`. Scores, the judge's class labels and the (public-dataset) prompt stay visible;
the reply text, structured prediction and any reply copies in details are replaced.
"""

from __future__ import annotations

from typing import Any

from .common import HIDE_KEY, HIDE_REASON_KEY

PLACEHOLDER = "[hidden: reply to a harmful prompt; visible to authenticated viewers only]"
NOTICE = ("Replies to harmful prompts are stored but hidden on public pages and exports; "
          "authenticated viewers see them.")
# details keys that only ever hold verdicts, never reply text
_SAFE_DETAIL_KEYS = ("strmatch", "judge_class", "behaviour_class", "stated", HIDE_KEY, HIDE_REASON_KEY)


def metadata_of(row: dict[str, Any]) -> dict[str, Any]:
    """A stored sample row's metadata (the runner keeps it under ``input.metadata``)."""
    inp = row.get("input") or {}
    return (inp.get("metadata") if isinstance(inp, dict) else None) or row.get("metadata") or {}


def is_hidden(metadata: dict[str, Any] | None) -> bool:
    return bool((metadata or {}).get(HIDE_KEY))


def redact_details(details: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: details[k] for k in _SAFE_DETAIL_KEYS if k in details}
    if "_judgements" in details:
        # judge verdicts stay (class labels, scores); their raw reply is the judge's, not the model's,
        # but a judge may quote the reply, so the raw text goes too
        out["_judgements"] = [{**j, "raw": "[hidden]"} for j in details["_judgements"]]
    out["hidden"] = True
    return out


def redact_row(row: dict[str, Any], *, authenticated: bool = False) -> dict[str, Any]:
    """A copy of a sample row fit for a public view (the row itself when nothing is hidden)."""
    meta = metadata_of(row)
    if authenticated or not is_hidden(meta):
        return row
    out = dict(row)
    out["output"] = PLACEHOLDER
    if "prediction" in out:
        out["prediction"] = None
    if isinstance(out.get("details"), dict):
        out["details"] = redact_details(out["details"])
    out["hidden_reason"] = meta.get(HIDE_REASON_KEY, "reply to a harmful prompt")
    return out
