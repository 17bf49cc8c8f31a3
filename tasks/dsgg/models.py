"""Built-in DSGG models: the frequency-prior baseline and a replay of stored predictions.

- ``dsgg-prior:freq`` -- the classic SGG frequency baseline (Zellers et al., Neural Motifs "FREQ"):
  fitted on the task's train split, it predicts for every ordered pair of the given objects the most
  frequent predicate(s) of each predicate group given the two categories, over the whole video.
  Settings: ``per_group`` (predicates kept per pair and group, default 1), ``top`` (relations kept when
  the prompt names no objects, default 20). It needs the objects, so it is meant for ``setting=predcls``.
- ``dsgg-replay:<file.json|file.pkl>`` -- replays predictions of an existing model: ``{sample id:
  prediction}`` where a prediction is an STTran-format dict, a TRS (``{"relations": [...]}``) or reply text.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.backend_settings import PositiveInt, Setting
from harness.model import Backend
from harness.modelspec import validate_settings
from harness.registry import model
from harness.safeload import check_structure, load_pickle
from harness.tasks.dsgg.trs import OBJECTS_MARK
from harness.types import Output, Request, Sample, Usage

PRIOR_SETTINGS = {
    "per_group": Setting(PositiveInt, 1, "predicates kept per object pair and predicate group"),
    "top": Setting(PositiveInt, 20, "relations kept when the prompt names no objects"),
}
_FRAMES = re.compile(r"has (\d+) annotated frames")
AG_GROUPS = [(0, 3), (3, 9), (9, 26)]


def _last_user_text(request: Request) -> str:
    last = next((m for m in reversed(request.messages) if m.role == "user"), None)
    return last.text_content if last else ""


@dataclass
class FrequencyPrior(Backend):
    spec: str = "dsgg-prior:freq"
    per_group: int = 1
    top: int = 20
    batch_size: int = 256
    cacheable: bool = False
    modalities: frozenset[str] = field(default_factory=lambda: frozenset({"text", "video"}))
    pair_counts: dict[tuple[str, str], Counter] = field(default_factory=dict)
    group_of: dict[str, int] = field(default_factory=dict)

    def fit(self, train: Sequence[Sample]) -> dict[str, Any]:
        counts: dict[tuple[str, str], Counter] = defaultdict(Counter)
        for sample in train:
            video = sample.target
            cat = video["objects"]
            for _, s, p, o in video["relations"]:
                counts[(cat.get(s, s), cat.get(o, o))][p] += 1
        self.pair_counts = dict(counts)
        from harness.tasks.dsgg.vocab import ag_predicates

        names = ag_predicates()
        self.group_of = {names[i]: g for g, (lo, hi) in enumerate(AG_GROUPS) for i in range(lo, hi)}
        return {"videos": len(train), "pairs": len(counts)}

    def predict(self, text: str) -> dict[str, Any]:
        m = _FRAMES.search(text)
        n = int(m.group(1)) if m else 1
        span = [[0, n - 1]]
        objects: list[str] | None = None
        for line in text.splitlines():
            if line.startswith(OBJECTS_MARK):
                objects = json.loads(line[len(OBJECTS_MARK):])
        scored: list[tuple[float, dict[str, Any]]] = []
        if objects is None:
            # no objects given: the most frequent triplets of the training data
            flat = [(c, s, p, o) for (s, o), ctr in self.pair_counts.items() for p, c in ctr.items()]
            for c, s, p, o in sorted(flat, reverse=True)[: self.top]:
                scored.append((c, {"subject": s, "predicate": p, "object": o, "spans": span}))
        else:
            base = {name: name.split("#")[0] for name in objects}
            for a in objects:
                for b in objects:
                    ctr = self.pair_counts.get((base[a], base[b])) if a != b else None
                    if not ctr:
                        continue
                    total = sum(ctr.values())
                    by_group: dict[int, list[tuple[int, str]]] = defaultdict(list)
                    for p, c in ctr.items():
                        by_group[self.group_of.get(p, 0)].append((c, p))
                    for options in by_group.values():
                        for c, p in sorted(options, key=lambda x: (-x[0], x[1]))[: self.per_group]:
                            scored.append((c / total, {"subject": a, "predicate": p, "object": b, "spans": span}))
        scored.sort(key=lambda x: -x[0])
        return {"relations": [r for _, r in scored]}

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        out = []
        for r in requests:
            pred = self.predict(_last_user_text(r))
            out.append(Output(text=json.dumps(pred), prediction=pred, usage=Usage(calls=1)))
        return out


@dataclass
class Replay(Backend):
    path: str
    spec: str = ""
    batch_size: int = 1024
    cacheable: bool = False
    modalities: frozenset[str] = field(default_factory=lambda: frozenset({"text", "video"}))
    table: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        p = Path(self.path)
        if not p.exists():
            raise ValueError(f"dsgg-replay: {p}: file not found")
        if p.suffix == ".pkl":
            # predictions are data (dicts, lists, numpy arrays): the allow-list loader never runs a
            # function the file names, and bounds its nesting (_plain below recurses)
            self.table = load_pickle(p)
        else:
            try:
                self.table = check_structure(json.loads(p.read_text(encoding="utf-8")), str(p))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ValueError(f"dsgg-replay: {p}: not a JSON file ({str(exc).splitlines()[0]})") from None
            except RecursionError:
                raise ValueError(f"dsgg-replay: {p}: JSON nested too deeply to read") from None
        if not isinstance(self.table, dict):
            raise ValueError(f"dsgg-replay: {p}: expected a mapping of sample id to prediction")
        self.spec = f"dsgg-replay:{self.path}"

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        out = []
        for r in requests:
            pred = self.table.get(r.sample_id)
            if pred is None:
                out.append(Output(error=f"dsgg-replay: no prediction for sample {r.sample_id!r}"))
            elif isinstance(pred, str):
                out.append(Output(text=pred))
            else:
                out.append(Output(prediction=_plain(pred), usage=Usage(calls=1)))
        return out


def _plain(x: Any) -> Any:
    """numpy arrays (STTran pickles) -> lists, so the prediction stores as JSON."""
    if hasattr(x, "tolist"):
        return x.tolist()
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    return x


@model("dsgg-prior", kind="method", description="DSGG frequency-prior baseline (fit on the task's train split)",
       settings=PRIOR_SETTINGS, strict=True)
def dsgg_prior(path: str | None = None, **settings: Any) -> FrequencyPrior:
    settings = validate_settings("dsgg-prior", settings, PRIOR_SETTINGS)  # a factory called directly is checked too
    per_group, top = settings.get("per_group", 1), settings.get("top", 20)
    extra = "&".join(f"{k}={v}" for k, v, d in (("per_group", per_group, 1), ("top", top, 20)) if v != d)
    return FrequencyPrior(spec="dsgg-prior:freq" + (f"?{extra}" if extra else ""), per_group=per_group, top=top)


@model("dsgg-replay", kind="method", description="Replay stored DSGG predictions: dsgg-replay:<file.json|.pkl>",
       settings={}, strict=True)
def dsgg_replay(path: str | None = None, **settings: Any) -> Replay:
    if not path:
        raise ValueError("dsgg-replay needs a file: dsgg-replay:<predictions.json|.pkl>")
    return Replay(path)
