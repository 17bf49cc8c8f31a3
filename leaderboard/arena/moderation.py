"""The moderation hook: a prompt is checked before it reaches the pool, and refused with a reason.

Two checks, either or both (``ArenaConfig.moderation_words`` / ``moderation_words_file`` and
``moderation_model``):

* a word list: whole words or phrases (``*`` at the end of an entry matches any ending: ``bomb*``),
  matched on folded text (:mod:`.fold`: case, zero-width and other format characters, soft hyphens,
  full-width letters, combining accents and Cyrillic/Greek look-alikes do not hide a word);
* a model: any model spec, asked whether the prompt breaks the arena's rules; a reply whose first
  word is ``FLAG`` refuses the prompt. A moderation model that fails refuses too (fail closed: an
  unchecked prompt must not reach the pool).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from harness.types import GenerationConfig, Message, Request

from .fold import fold

MODEL_PROMPT = (
    "You moderate prompts for a public chatbot comparison site. Reply with exactly one word: FLAG if the "
    "prompt below asks for sexual content involving minors, instructions for weapons capable of mass harm, "
    "targeted harassment or personal data of a private person; otherwise OK.\n\nPrompt:\n{prompt}"
)


class Moderator(Protocol):
    async def check(self, text: str) -> str | None:
        """None when the text may go to the pool, else the reason it may not (shown to the voter)."""
        ...


class WordList:
    def __init__(self, words: Iterable[str]) -> None:
        parts = []
        for w in words:
            w = w.strip()
            if not w or w.startswith("#"):
                continue
            stem = fold(w[:-1] if w.endswith("*") else w)  # the entry folded as the text will be
            tail = r"\w*" if w.endswith("*") else ""
            if stem.split():
                parts.append(r"\s+".join(re.escape(p) for p in stem.split()) + tail)
        self.pattern = re.compile(r"(?<!\w)(?:" + "|".join(parts) + r")(?!\w)") if parts else None

    @staticmethod
    def from_file(path: str | Path) -> WordList:
        return WordList(Path(path).read_text(encoding="utf-8").splitlines())

    async def check(self, text: str) -> str | None:
        if self.pattern is not None and self.pattern.search(fold(text or "")):
            return "this prompt contains words the arena does not accept"
        return None


class ModelModerator:
    def __init__(self, client: Any) -> None:
        self.client = client  # a harness.client.ModelClient

    async def check(self, text: str) -> str | None:
        request = Request([Message.text("user", MODEL_PROMPT.format(prompt=text))],
                          GenerationConfig(temperature=0.0, max_tokens=4))
        (out,) = await self.client.generate([request])
        if out.error is not None:
            return "the moderation check is unavailable: try again later"
        words = (out.text or "").strip().split()
        return "this prompt was refused by the arena's moderation" if words and words[0].upper().startswith(
            "FLAG") else None


class Chain:
    def __init__(self, checks: list[Moderator]) -> None:
        self.checks = checks

    async def check(self, text: str) -> str | None:
        for c in self.checks:
            reason = await c.check(text)
            if reason:
                return reason
        return None


def from_config(cfg: Any) -> Chain:
    """The configured checks (none configured: everything passes)."""
    checks: list[Moderator] = []
    words = list(getattr(cfg, "moderation_words", None) or [])
    if words:
        checks.append(WordList(words))
    path = getattr(cfg, "moderation_words_file", None)
    if path:
        checks.append(WordList.from_file(path))
    spec = getattr(cfg, "moderation_model", None)
    if spec:
        from harness.client import ModelClient

        checks.append(ModelModerator(ModelClient.build(spec, use_cache=False)))
    return Chain(checks)
