"""Training examples for the fine-tuned DSGG backend: the task's prompt -> a TRS reply, with per-token
importance weights (Importance-Aware Fine-tuning, IAF).

The seed paper names Importance-Aware Fine-tuning but its text is not public (abstract only), so the
definition here is a **reconstruction** from the abstract's argument -- the recall protocol rewards
redundant, *uninformative* relations -- and from the informativeness metric of :mod:`set_metrics`:

- the reply is a short reasoning line (how many objects, the frames where the relations change: the
  "reason" stage), then the TRS as compact JSON without boxes, grouped by object (``setting=predcls`` grounds relations
  to the annotated boxes by name), built from the train annotations by :func:`trs.to_trs`;
- every *relation-content* token (the JSON values of one relation: subject, predicate, object and its
  spans) weighs ``w(p) = I(p) / mean_r I(p_r)``, where ``I(p) = -log freq(p)`` is the informativeness
  weight of the predicate (train-split frequency, add-one smoothed: exactly
  :func:`set_metrics.informativeness_weights`) and the mean runs over the relations of the training
  replies, so the average relation keeps weight 1 and only the balance between relations changes:
  rare, informative predicates weigh more, trivial ones (``not_looking_at``, ``not_contacting``) less;
- every *format* token (the reasoning line, JSON keys and punctuation, the end-of-turn token) weighs 1.

Plain fine-tuning is the same examples with every weight 1.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.errors import UserError
from harness.tasks.dsgg.set_metrics import informativeness_weights
from harness.tasks.dsgg.trs import to_trs
from harness.types import Sample

# bump when the reply text or the weighting changes: cached fits of the old layout are then not reused
REPLY_VERSION = 3
_PREDICATES = re.compile(r"^Allowed predicates: (.*)\.$", re.M)
_OBJECTS = re.compile(r"^Objects in the video \(use these names\): (.*)\.$", re.M)


class FitError(UserError, ValueError):
    """The fine-tune cannot run on what it was given (one line: no train split, not a predcls prompt)."""


@dataclass(frozen=True)
class Reply:
    """A training reply and the character ranges of its relation-content values, each with the
    predicate of the relation it belongs to (``ranges``: ``(start, end, predicate)``, end exclusive)."""

    text: str
    ranges: tuple[tuple[int, int, str], ...]


@dataclass(frozen=True)
class Example:
    """One encoded training example: prompt + reply token ids, the prompt length (its tokens are not
    trained on) and one weight per reply token (``len(weights) == len(ids) - n_prompt``)."""

    ids: tuple[int, ...]
    n_prompt: int
    weights: tuple[float, ...]


def conversation(sample: Sample) -> list[dict[str, str]]:
    """The sample's messages as a chat-template conversation (text parts only: the fixture has no video)."""
    return [{"role": m.role, "content": m.text_content} for m in sample.messages]


def allowed_predicates(sample: Sample) -> list[str]:
    """The predicate vocabulary the task's prompt lists (the backend reads nothing else about the task)."""
    text = "\n".join(m.text_content for m in sample.messages)
    m = _PREDICATES.search(text)
    if m is None:
        raise FitError(f"sample {sample.id!r}: the prompt lists no 'Allowed predicates:' (not a dsgg prompt)")
    return [p.strip() for p in m.group(1).split(",") if p.strip()]


def reasoning(video: dict[str, Any]) -> str:
    """The "reason" line of a training reply: how many objects the person is with and when the
    relations change. It names no object: free-text copying of names is where a small model, freely
    decoding, fell into loops ("book is with book; book is with book; ..."); the JSON names them."""
    n_objects = sum(1 for o in video["objects"] if o != "person")
    by_frame: dict[int, set[tuple[str, str, str]]] = {}
    for f, s, p, o in video["relations"]:
        by_frame.setdefault(int(f), set()).add((s, p, o))
    frames = sorted(by_frame)
    changes = [f for prev, f in zip(frames, frames[1:], strict=False) if by_frame[f] != by_frame[prev]]
    when = ("the relations change at frame " + ", ".join(str(f) for f in changes)) if changes \
        else "the relations hold throughout"
    return f"Reasoning: the person is with {n_objects} object{'s' if n_objects != 1 else ''}; {when}."


def ordered_relations(video: dict[str, Any]) -> list[dict[str, Any]]:
    """The annotation's TRS grouped by object, objects in the prompt's (sorted) order, each object's
    relations by first frame: a fixed layout in which the reply's end is predictable (after the last
    object), which a small model otherwise misses -- it listed relations on to the token cap."""
    names = sorted(video["objects"])

    def key(item: tuple[int, dict[str, Any]]) -> tuple[int, int, int]:
        i, r = item
        other = r["object"] if r["subject"] == "person" else r["subject"]
        return (names.index(other) if other in names else len(names), r["spans"][0][0], i)

    return [r for _, r in sorted(enumerate(to_trs(video)), key=key)]


def build_reply(video: dict[str, Any]) -> Reply:
    """Reasoning line, then ``{"relations":[...]}`` from the annotation as compact JSON (no spaces:
    about a fifth fewer tokens to train on and to decode), with the value ranges of every relation
    recorded while the JSON is written (so they are exact, not searched for)."""
    parts: list[str] = [reasoning(video), "\n", '{"relations":[']
    ranges: list[tuple[int, int, str]] = []
    pos = sum(len(p) for p in parts)
    for i, rel in enumerate(ordered_relations(video)):
        if i:
            parts.append(",")
            pos += 1
        fields = [("subject", rel["subject"]), ("predicate", rel["predicate"]), ("object", rel["object"]),
                  ("spans", rel["spans"])]
        parts.append("{")
        pos += 1
        for j, (key, value) in enumerate(fields):
            head = ("," if j else "") + json.dumps(key) + ":"
            body = json.dumps(value, separators=(",", ":"))
            parts += [head, body]
            pos += len(head)
            ranges.append((pos, pos + len(body), rel["predicate"]))
            pos += len(body)
        parts.append("}")
        pos += 1
    parts.append("]}")
    return Reply("".join(parts), tuple(ranges))


def predicate_importance(train: Sequence[Sample], iaf: bool) -> dict[str, float]:
    """``predicate -> w(p)`` (module docstring); every predicate 1.0 without IAF."""
    predicates = allowed_predicates(train[0])
    if not iaf:
        return dict.fromkeys(predicates, 1.0)
    index = {p: i for i, p in enumerate(predicates)}
    counts = np.zeros(len(predicates))
    for s in train:
        for _, _, p, _ in s.target["relations"]:
            if p in index:
                counts[index[p]] += 1
    info = informativeness_weights(counts)
    # normalise over the relations the replies contain, so the average relation keeps weight 1
    per_relation = [info[index[r["predicate"]]] for s in train for r in to_trs(s.target) if r["predicate"] in index]
    mean = float(np.mean(per_relation)) if per_relation else 1.0
    return {p: float(info[i] / mean) for p, i in index.items()}


def token_weights(offsets: Sequence[tuple[int, int]], reply: Reply, importance: dict[str, float]) -> list[float]:
    """Per reply token: the importance of the relation whose value it overlaps (the largest, when a
    token straddles two values), else 1 (format)."""
    out = []
    for a, b in offsets:
        w = [importance.get(p, 1.0) for s, e, p in reply.ranges if a < e and s < b]
        out.append(max(w) if w else 1.0)
    return out


def encode(tokenizer: Any, sample: Sample, reply: Reply, importance: dict[str, float]) -> Example:
    """Chat-templated prompt (as the hf backend sends it at test time) + reply + end-of-turn token."""
    prompt = tokenizer.apply_chat_template(conversation(sample), add_generation_prompt=True, tokenize=False)
    p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    enc = tokenizer(reply.text, add_special_tokens=False, return_offsets_mapping=True)
    weights = token_weights(enc["offset_mapping"], reply, importance)
    eos = tokenizer.eos_token_id
    ids = list(p_ids) + list(enc["input_ids"]) + ([eos] if eos is not None else [])
    weights += [1.0] * (len(ids) - len(p_ids) - len(weights))
    return Example(tuple(ids), len(p_ids), tuple(weights))


def check_split(train: Sequence[Sample]) -> None:
    """FitError unless ``train`` is a non-empty split of predcls prompts (cheap: before a model loads)."""
    if not train:
        raise FitError("dsgg-ft needs the task's train split (it fine-tunes on it)")
    for s in train:
        text = "\n".join(m.text_content for m in s.messages)
        if not _OBJECTS.search(text):
            raise FitError("dsgg-ft trains on the predcls prompt (objects named); run the task with -T setting=predcls")
    allowed_predicates(train[0])


def train_examples(tokenizer: Any, train: Sequence[Sample], iaf: bool) -> tuple[list[Example], dict[str, Any]]:
    """The encoded examples of the train split and a summary (reply lengths, importance table).

    The only place the backend reads ``Sample.target``: on the train samples the fit is handed."""
    check_split(train)
    importance = predicate_importance(train, iaf)
    examples, lengths = [], []
    for s in train:
        ex = encode(tokenizer, s, build_reply(s.target), importance)
        examples.append(ex)
        lengths.append(len(ex.ids) - ex.n_prompt)
    used = Counter(r["predicate"] for s in train for r in to_trs(s.target))
    summary = {"train_videos": len(train), "reply_tokens_max": max(lengths),
               "reply_tokens_mean": float(np.mean(lengths)),
               "importance": {p: round(importance[p], 4) for p in sorted(used) if p in importance}}
    return examples, summary
