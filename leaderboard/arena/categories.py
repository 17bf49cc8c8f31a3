"""Battle categories: task family, prompt language, prompt length and kind (text / code / 3d).

Every battle is labelled when it is served (``arena_battles.categories``, copied onto its vote), so
ratings can be fitted per category. A category filter is ``key=value`` (``language=ru``,
``length=long``, ``kind=code``, ``family=maths``) or a bare value matched against every key
(``code``); several filters (comma-separated) must all match.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

from harness import families

KEYS = ("family", "language", "length", "kind")
LENGTHS = ((280, "short"), (1500, "medium"))  # characters of the prompt; longer: "long"
KINDS = ("text", "code", "3d")

# scripts that name their language outright; Latin script is told apart by stop words below
_SCRIPTS = {"CYRILLIC": "ru", "GREEK": "el", "ARABIC": "ar", "HEBREW": "he", "DEVANAGARI": "hi", "THAI": "th",
            "HANGUL": "ko", "HIRAGANA": "ja", "KATAKANA": "ja", "CJK": "zh"}
_STOP = {
    "en": {"the", "and", "is", "of", "to", "what", "how", "why", "you", "with", "write", "a", "in", "for"},
    "de": {"der", "die", "das", "und", "ist", "nicht", "ich", "wie", "mit", "ein", "eine", "warum"},
    "fr": {"le", "la", "les", "et", "est", "une", "des", "pourquoi", "comment", "avec", "je", "pas"},
    "es": {"el", "los", "las", "y", "es", "una", "por", "qué", "cómo", "con", "para", "que"},
    "it": {"il", "gli", "e", "è", "una", "perché", "come", "con", "per", "che", "non", "sono"},
    "pt": {"o", "os", "as", "e", "é", "uma", "por", "que", "como", "com", "para", "não"},
}
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_CODE = re.compile(r"```|\bdef \w+\(|\bfunction\b|\bclass \w+|#include|\bimport \w+|;\s*$|\bSELECT\b.+\bFROM\b|"
                   r"\b(python|javascript|typescript|rust|golang|java|c\+\+|sql|bash|regex|code|function|script)\b",
                   re.IGNORECASE | re.MULTILINE)
_3D = re.compile(r"\b(blender|bpy|3d|mesh|render|cad|openscad)\b", re.IGNORECASE)


def language(text: str) -> str:
    """A coarse language tag: by script for non-Latin text, by stop words for Latin text, ``other``
    when neither decides and ``none`` for text without letters."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return "none"
    scripts: dict[str, int] = {}
    for c in letters[:2000]:
        name = unicodedata.name(c, "")
        for key, lang in _SCRIPTS.items():
            if name.startswith(key):
                scripts[lang] = scripts.get(lang, 0) + 1
                break
    if scripts:
        lang, n = max(scripts.items(), key=lambda kv: kv[1])
        if n * 2 >= len(letters[:2000]):
            return "ja" if "ja" in scripts and lang == "zh" else lang  # kana mixed with kanji is Japanese
    words = [w.lower() for w in _WORD.findall(text[:5000])]
    hits = {lang: sum(w in stop for w in words) for lang, stop in _STOP.items()}
    best = max(hits.items(), key=lambda kv: kv[1])
    return best[0] if best[1] > 0 else "other"


def length(text: str) -> str:
    n = len(text)
    for limit, name in LENGTHS:
        if n <= limit:
            return name
    return "long"


def kind(text: str, family: str = "", declared: str | None = None) -> str:
    """``3d`` for Blender/3D tasks, ``code`` for programming prompts, else ``text``. A declared kind
    wins, then the one the task's family declares (its manifest's ``arena_category``)."""
    if declared in KINDS:
        return str(declared)
    of_family = families.arena_category(family) if family else None
    if of_family in KINDS:
        return str(of_family)
    if _3D.search(text) and _CODE.search(text):
        return "3d"
    return "code" if _CODE.search(text) else "text"


def categorize(prompt: str, family: str = "", declared_kind: str | None = None) -> dict[str, str]:
    return {"family": family or "chat", "language": language(prompt), "length": length(prompt),
            "kind": kind(prompt, family, declared_kind)}


def parse_filter(spec: str | None) -> list[tuple[str | None, str]]:
    """``"language=en,kind=code"`` -> [("language", "en"), ("kind", "code")]; a bare value has key None."""
    out: list[tuple[str | None, str]] = []
    for part in (spec or "").split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition("=")
        if sep:
            key = key.strip().lower()
            if key not in KEYS:
                raise ValueError(f"unknown category {key!r} (one of {', '.join(KEYS)})")
            out.append((key, value.strip()))
        else:
            out.append((None, part))
    return out


def matches(categories: Mapping[str, Any] | None, filters: Iterable[tuple[str | None, str]]) -> bool:
    cats = categories or {}
    for key, value in filters:
        if key is None:
            if value not in {str(v) for v in cats.values()}:
                return False
        elif str(cats.get(key, "")) != value:
            return False
    return True


def summary(all_categories: Iterable[Mapping[str, Any] | None]) -> dict[str, dict[str, int]]:
    """key -> value -> count, for the category picker on the ratings page."""
    out: dict[str, dict[str, int]] = {k: {} for k in KEYS}
    for cats in all_categories:
        for k in KEYS:
            v = (cats or {}).get(k)
            if v:
                out[k][str(v)] = out[k].get(str(v), 0) + 1
    return {k: dict(sorted(v.items())) for k, v in out.items() if v}
