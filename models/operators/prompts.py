"""Prompts of the auxiliary calls (judge, critic, correction, synthesis, parity, decoding, probe).

Wording is ours; the structure follows the reference code (agentcodec): the judge returns a 0-10
score mapped to a quality q in [0, 1]; the critic returns JSON issues with a severity; corrections
are applied to the current best answer rather than rewriting it; synthesis may only combine what
the candidates say. Every prompt reminds the model to keep the final-answer format the task asked
for, because the task's scorer reads the operator's final text.
"""

from __future__ import annotations

import json
import re
from typing import Any

KEEP_FORMAT = "Keep the final-answer format that the task asks for (for example a last line '#### <answer>')."

JUDGE = (
    "You are a strict grader. Do not solve the task yourself: judge whether the response below correctly and "
    "completely solves it.\n\n"
    "## Task\n{question}\n\n## Response\n{response}\n\n"
    "Reply with a single line 'Score: N', where N is an integer from 0 (certainly wrong) to 10 (certainly correct)."
)

CRITIC = (
    "You are reviewing a response to a task through one lens: {lens}.\n\n"
    "## Task\n{question}\n\n## Response\n{response}\n\n"
    "List the concrete errors you find as JSON: "
    '{{"issues": [{{"quote": "<text from the response>", "problem": "<what is wrong>", '
    '"correction": "<what it should be>", "severity": "critical|major|minor"}}]}}. '
    'Reply {{"issues": []}} if you find none. Reply with JSON only.'
)

CORRECT = (
    "## Task\n{question}\n\n## Your previous response\n{response}\n\n## Corrections to apply\n{issues}\n\n"
    "Rewrite the response applying exactly these corrections and changing nothing else. " + KEEP_FORMAT
)

SYNTHESIS_WEIGHTED = (
    "## Task\n{question}\n\n## Candidate responses (best first, with quality scores)\n\n{candidates}\n\n"
    "Combine the candidates into one best response. Use only information from the candidates; start from "
    "the best one; where they disagree, follow the higher-quality candidate; keep numbers and code exactly "
    "as written. " + KEEP_FORMAT + " Output the combined response only."
)

SYNTHESIS_EQUAL = (
    "## Task\n{question}\n\n## Candidate responses (all weighted equally)\n\n{candidates}\n\n"
    "Combine the candidates into one response that captures what they collectively get right; where they "
    "disagree, follow the majority. " + KEEP_FORMAT + " Output the combined response only."
)

PARITY: dict[str, str] = {
    "reasoning": "Solve the task again, writing out every reasoning step explicitly before the answer.",
    "verification": "Here is a proposed response. Check each step; say which steps are wrong, if any, and give "
                    "the corrected final answer.\n\n## Proposed response\n{response}",
    "alternative": "Solve the task with a different method from the usual one, then state the final answer.",
    "confidence": "Give your final answer and, for each key claim or step, your confidence (HIGH/MEDIUM/LOW).",
}

# code rate -> parity sections (reference: 0.75 reasoning; 0.5 +verification; 0.33 +alternative;
# 0.25 +confidence)
PARITY_BY_RATE: dict[float, tuple[str, ...]] = {
    0.75: ("reasoning",),
    0.5: ("reasoning", "verification"),
    0.33: ("reasoning", "verification", "alternative"),
    0.25: ("reasoning", "verification", "alternative", "confidence"),
}

PARITY_CALL = "## Task\n{question}\n\n{instruction}\n" + KEEP_FORMAT

DECODE = (
    "## Task\n{question}\n\n## Systematic response\n{response}\n\n## Parity checks\n{parity}\n\n"
    "Compare the systematic response with the parity checks. Where they agree, keep it; where a check "
    "exposes an error, correct it. Write the final corrected response. " + KEEP_FORMAT
)

PROBE = (
    "Rate how hard the following task is for you, from 1 (trivial) to 10 (very hard). "
    "Reply with 'Difficulty: N' only.\n\n## Task\n{question}"
)

LENSES = ("correctness", "completeness", "reasoning", "clarity")

_SCORE = re.compile(r"score\s*[:=]\s*\**\s*(\d+(?:\.\d+)?)", re.IGNORECASE)
_OUT_OF = re.compile(r"(\d+(?:\.\d+)?)\s*/\s*10\b")
_DIFFICULTY = re.compile(r"difficulty\s*[:=]\s*(\d+(?:\.\d+)?)", re.IGNORECASE)


def parse_judge(text: str) -> float | None:
    """0-10 score -> quality in [0, 1]; None when the reply has no score."""
    found = _SCORE.findall(text) or _OUT_OF.findall(text)
    if not found and re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*\.?\s*", text):  # a bare "7" is a score too
        found = [text.strip().rstrip(".")]
    if not found:
        return None
    return min(max(float(found[-1]), 0.0), 10.0) / 10.0


def parse_difficulty(text: str) -> float | None:
    found = _DIFFICULTY.findall(text)
    return min(max(float(found[-1]), 1.0), 10.0) if found else None


SEVERITY_ORDER = {"critical": 0, "major": 1, "minor": 2}


def parse_issues(text: str) -> list[dict[str, Any]] | None:
    """The critic's JSON issues; [] for 'no issues'; None when the reply is not JSON at all."""
    raw = text.strip()
    candidates = [raw, raw.strip("`").removeprefix("json").strip()]
    fenced = re.search(r"```(?:json)?\s*(.*?)```", raw, re.DOTALL)
    if fenced:
        candidates.append(fenced.group(1))
    braced = re.search(r"\{.*\}|\[.*\]", raw, re.DOTALL)
    if braced:
        candidates.append(braced.group(0))
    for cand in candidates:
        try:
            data = json.loads(cand)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(data, dict):
            data = data.get("issues")
        if isinstance(data, list):
            return [d if isinstance(d, dict) else {"problem": str(d)} for d in data]
    return None


def issues_or_raw(text: str) -> list[dict[str, Any]]:
    """Parsed issues; a critique that is not JSON is kept whole as one issue (weak critics write
    prose; the reference code does the same)."""
    parsed = parse_issues(text)
    if parsed is not None:
        return parsed
    return [{"problem": text.strip()[:2000]}] if text.strip() else []


def format_issues(issues: list[dict[str, Any]]) -> str:
    lines = []
    for i, issue in enumerate(issues, 1):
        parts = [f"{k}: {issue[k]}" for k in ("quote", "problem", "correction") if issue.get(k)]
        lines.append(f"{i}. " + ("; ".join(parts) or json.dumps(issue)))
    return "\n".join(lines)
