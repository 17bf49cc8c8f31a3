"""Model metadata (parameters, licence, link, organisation) from the alias cards in ``models/aliases``.

A card describes the model its spec names; a variant may say its own (``qwen``'s VL and Omni
variants are other models than its text one). A model row gets a card's metadata when its spec
names that card's model: the spec itself, or the spec with its ``?settings`` dropped (settings such
as ``max_tokens`` change replies, not the model). A spec served elsewhere (``openai:x@URL``) is not
the card's model. An operator over models (``vote(hf:x, n=5)``) gets the metadata its models share.
Nothing is guessed from a name: a model without a card has no metadata (size "unknown").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

FIELDS = ("parameters", "licence", "link", "organisation")
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ModelCard:
    alias: str
    parameters: str = ""  # "135M", "7.61B": what the size filter and column read
    licence: str = ""
    link: str = ""
    organisation: str = ""

    @property
    def safe_link(self) -> str:
        """The link when it is a web address (a card is the operator's, but a page never links a
        ``javascript:`` URL whoever wrote it)."""
        return self.link if self.link.startswith(("https://", "http://")) else ""


def _card(alias: str, *layers: dict[str, Any]) -> ModelCard:
    merged: dict[str, str] = {}
    for layer in layers:
        merged.update({k: str(layer[k]).strip() for k in FIELDS if layer.get(k) not in (None, "")})
    return ModelCard(alias, **merged)


@lru_cache(maxsize=1)
def cards() -> dict[str, ModelCard]:
    """Leaf spec or alias name -> its card's metadata (cards are package data: read once)."""
    import yaml

    from harness.modelspec import alias_names, load_alias

    out: dict[str, ModelCard] = {}
    for name in alias_names():
        try:
            data = load_alias(name) or {}
        except (OSError, ValueError, yaml.YAMLError) as exc:  # a broken card costs its metadata, never a page
            log.warning("alias card %s unreadable: %s", name, exc)
            continue
        variants = data.get("variants") or [{"spec": data.get("spec")}]
        for variant in variants:
            if isinstance(variant, dict) and variant.get("spec"):
                out.setdefault(str(variant["spec"]).strip(), _card(name, data, variant))
        out.setdefault(name, _card(name, data, variants[0] if isinstance(variants[0], dict) else {}))
    return out


def _leaf_card(leaf: str) -> ModelCard | None:
    table = cards()
    return table.get(leaf) or table.get(leaf.split("?", 1)[0].strip())


def card_for(spec: str) -> ModelCard | None:
    """The card of the model ``spec`` names, or None (see the module docstring)."""
    from harness.modelspec import SpecNode, parse_spec

    def leaves(node: SpecNode) -> list[str] | None:
        if node.is_operator:
            if not node.args:
                return None  # a backend called with settings: no card names it
            out: list[str] = []
            for arg in node.args:
                inner = leaves(arg)
                if inner is None:
                    return None
                out += inner
            return out
        return [f"{node.name}:{node.path}" if node.path is not None else node.name]

    try:
        found = leaves(parse_spec(spec))
    except ValueError:  # a pushed spec that does not parse (ModelSpecError): no card, not an error page
        return None
    if not found:
        return None
    matched = {_leaf_card(leaf) for leaf in found}
    return matched.pop() if len(matched) == 1 else None
