"""Cost accounting for reliability operators: per call, per sample, normalised.

Per call (the reference code's formula): ``input_tokens * rate_in / 1e6 + output_tokens * rate_out / 1e6``
with rates in USD per million tokens: the operator's ``price_in=``/``price_out=`` when given, else
the backend's own figure (``Usage.cost > 0``: the openai backend prices its calls), else the shared
price table. Per sample the calls are split into the generator bucket (the candidate
answers themselves, including FEC parity calls) and the overhead bucket (critic, judge, synthesis),
with judge cost also reported alone; ``normalised`` is the total relative to one plain call of the
base model on the same prompt (the operator's first generator call is exactly such a call, so it
is the baseline). Local models have no price: then the same ratios are taken over tokens
(``basis == "tokens"``), which is what "normalised cost" means for a free model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.types import Output, Usage

# USD per 1M tokens (input, output): the shared table of the openai backend (models/prices.yaml),
# looked up by the model name of an ``openai:NAME[@url][?settings]`` spec (exact name, else the
# longest listed prefix, as that backend does). Operator params price_in=/price_out= override it.
PRICE_FILE = Path(__file__).resolve().parent.parent / "prices.yaml"


@lru_cache(maxsize=1)
def price_table() -> dict[str, tuple[float, float]]:
    if not PRICE_FILE.exists():
        return {}
    import yaml

    data = yaml.safe_load(PRICE_FILE.read_text()) or {}
    return {str(k): (float(v["input"]), float(v["output"])) for k, v in (data.get("models") or {}).items()}


GENERATOR_ROLES = frozenset({"generator"})
OVERHEAD_ROLES = frozenset({"critic", "judge", "synthesis", "probe"})
ROLES = GENERATOR_ROLES | OVERHEAD_ROLES


def listed_price(spec: str) -> tuple[float, float]:
    """Price-table rates of a model spec; (0, 0) for unlisted and local models."""
    backend, _, rest = spec.partition(":")
    if backend != "openai":
        return (0.0, 0.0)
    name = rest.split("@", 1)[0].split("?", 1)[0]
    table = price_table()
    if name in table:
        return table[name]
    prefixes = [k for k in table if name.startswith(k)]
    return table[max(prefixes, key=len)] if prefixes else (0.0, 0.0)


def explicit_rates(spec: str, price_in: float | None, price_out: float | None) -> tuple[float, float]:
    """Operator-given rates; a missing side falls back to the table's."""
    listed = listed_price(spec)
    return (listed[0] if price_in is None else float(price_in), listed[1] if price_out is None else float(price_out))


def call_cost(usage: Usage, rates: tuple[float, float] | None, spec: str = "") -> float:
    """Explicit rates win; else the backend's own figure (it knows its prices); else the table."""
    if rates is None:
        if usage.cost > 0:
            return usage.cost
        rates = listed_price(spec)
    return usage.input_tokens * rates[0] / 1e6 + usage.output_tokens * rates[1] / 1e6


@dataclass(slots=True)
class Call:
    """One underlying model call made by an operator."""

    role: str
    model: str
    input_tokens: int
    output_tokens: int
    cost: float
    seconds: float
    text: str = ""
    error: str | None = None
    note: str = ""  # e.g. "round 2", "parity:verification", "q=0.8"

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "model": self.model, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "cost": self.cost, "seconds": self.seconds,
                "text": self.text[:2000], "error": self.error, "note": self.note}


@dataclass
class Trace:
    """Every call of one operator invocation, in order."""

    prices: dict[str, tuple[float, float]] = field(default_factory=dict)  # explicit rates by model spec
    calls: list[Call] = field(default_factory=list)

    def add(self, role: str, model_spec: str, out: Output, note: str = "") -> Call:
        if role not in ROLES:
            raise ValueError(f"unknown call role {role!r}")
        u = out.usage
        cost = call_cost(u, self.prices.get(model_spec), model_spec)
        call = Call(role, model_spec, u.input_tokens, u.output_tokens, cost, u.seconds, out.text, out.error, note)
        self.calls.append(call)
        return call

    def usage(self) -> Usage:
        total = Usage()
        for c in self.calls:
            total = total + Usage(c.input_tokens, c.output_tokens, 1, c.seconds, c.cost)
        return total

    def split(self) -> dict[str, Any]:
        return cost_split(self.calls)


def cost_split(calls: list[Call]) -> dict[str, Any]:
    """Total, generator, overhead (critic+judge+synthesis+probe), judge alone, and normalised cost."""
    basis = "usd" if any(c.cost > 0 for c in calls) else "tokens"

    def amount(c: Call) -> float:
        return c.cost if basis == "usd" else float(c.tokens)

    total = sum(amount(c) for c in calls)
    generator = sum(amount(c) for c in calls if c.role in GENERATOR_ROLES)
    judge = sum(amount(c) for c in calls if c.role == "judge")
    first = next((c for c in calls if c.role in GENERATOR_ROLES), None)
    baseline = amount(first) if first is not None else 0.0
    return {
        "basis": basis,
        "total": total,
        "generator": generator,
        "overhead": total - generator,
        "judge": judge,
        "baseline": baseline,
        "normalised": total / baseline if baseline > 0 else None,
        "usd": sum(c.cost for c in calls),
        "calls": len(calls),
        "calls_by_role": {r: sum(1 for c in calls if c.role == r) for r in sorted({c.role for c in calls})},
    }
