"""LongShOTBench items: the released format, its taxonomy, and one sample per answered turn.

Item format (released dataset; datagen/stages/finalization.py of mbzuai-oryx/LongShOT)::

    {video_id, source_videos, title, duration (s), categories, sample_id, sample_type
     (single_turn | multi_turn), scenario, scenario_id, task, task_id, criteria_count,
     conversations: [
        {role: user, content, difficulty, modalities: [...], key_segments: [...], conversation_role},
        {role: assistant, content: <reference answer>,
         criteria: [{name, description, category, weight, is_penalty}, ...]}, ...]}

Sample mapping (our design): each assistant turn is one harness sample with id
``<sample_id>#t<k>`` (k = 1-based index of the assistant turn), for single-turn items too, so ids
never change shape. The request for turn k is the reference evaluation's: the user turns up to
and including turn k, with the *reference* answers of turns 1..k-1 as assistant history (never the
model's own replies), and the media attached to the first user turn only. Because turns are
independent requests they batch and cache like any other sample; scoring re-joins them (an item's
earned and possible weights are the sums over its turns, exactly as the released scorer sums).
"""

from __future__ import annotations

from typing import Any

from harness.data import DatasetError
from harness.types import Message, Sample

# The 16 canonical tasks in 4 categories (released eval/scoring.py, display order).
TASK_CATEGORIES: dict[str, tuple[str, ...]] = {
    "Core Perception Tasks": ("entity_recognition", "event_understanding", "temporal_reasoning",
                              "audio_understanding"),
    "Reasoning Tasks": ("causal_reasoning", "quantitative_reasoning", "compositional_reasoning",
                        "comparative_analysis"),
    "Information Tasks": ("information_retrieval", "summarization", "instruction_extraction",
                          "sentiment_analysis"),
    "Multimodal Tasks": ("multimodal_synthesis", "cross_modal_verification", "audio_visual_alignment",
                         "motion_analysis"),
}
CATEGORY_OF_TASK: dict[str, str] = {t: c for c, tasks in TASK_CATEGORIES.items() for t in tasks}

# Source task names merged into canonical ones (released TASK_REMAP: 13 source -> 16 canonical).
TASK_REMAP: dict[str, str] = {
    "ocr_text_extraction": "entity_recognition",
    "visual_scene_understanding": "event_understanding",
    "spatial_reasoning": "temporal_reasoning",
    "speech_transcription": "audio_understanding",
    "speaker_identification": "audio_understanding",
    "commonsense_reasoning": "causal_reasoning",
    "mathematical_reasoning": "quantitative_reasoning",
    "pattern_recognition": "quantitative_reasoning",
    "reasoning_tasks": "quantitative_reasoning",
    "counterfactual_reasoning": "compositional_reasoning",
    "question_answering": "summarization",
    "ethical_reasoning": "sentiment_analysis",
    "multimodal_translation": "motion_analysis",
}

# Raw per-turn modality tags -> the three reported groups; unknown tags count as visual (released).
MODALITY_GROUPS: dict[str, str] = {
    "visual": "visual",
    "audio_environment": "audio",
    "speech": "speech",
    "text": "visual",
    "text_extraction": "visual",
    "text_overlay": "visual",
    "cross_modal_information": "visual",
    "timestamp_identification": "visual",
    "implicit_information": "visual",
    "contextual_interpretation": "visual",
}

# (label, lower bound s inclusive, upper bound s exclusive) as released; >= 45 min is "long".
DURATION_BINS: tuple[tuple[str, float, float], ...] = (
    ("short", 0.0, 1800.0),
    ("medium", 1800.0, 2700.0),
    ("long", 2700.0, float("inf")),
)
DURATION_LABELS = {"short": "<30 min", "medium": "30-45 min", "long": ">45 min"}


def canonical_task(task: str) -> str:
    return TASK_REMAP.get(task, task)


def duration_bin(seconds: float) -> str:
    for label, lo, hi in DURATION_BINS:
        if lo <= seconds < hi:
            return label
    return DURATION_BINS[-1][0]  # negative durations: the released code falls through to "long"


def modality_groups(conversations: list[dict[str, Any]]) -> list[str]:
    """Groups an item touches: the union over all its user turns (released: per item, not per turn)."""
    raw = {m for turn in conversations if turn.get("role") == "user" for m in (turn.get("modalities") or [])}
    return sorted({MODALITY_GROUPS.get(m, "visual") for m in raw})


def _check_item(item: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """Validate what scoring and prompting need; the message names the field."""
    for key in ("sample_id", "video_id"):
        if not isinstance(item.get(key), str) or not item.get(key):
            raise DatasetError(f"{where}: missing field {key!r}")
    conv = item.get("conversations")
    if not isinstance(conv, list) or not conv:
        raise DatasetError(f"{where}: field 'conversations' should be a non-empty list")
    if conv[0].get("role") != "user":
        raise DatasetError(f"{where}: conversations[0] should be the user turn")
    n_answers = 0
    for i, turn in enumerate(conv):
        role = turn.get("role") if isinstance(turn, dict) else None
        if role not in ("user", "assistant"):
            raise DatasetError(f"{where}: conversations[{i}].role should be user or assistant")
        if not isinstance(turn.get("content"), str):
            raise DatasetError(f"{where}: conversations[{i}].content should be a string")
        if role == "assistant":
            n_answers += 1
            crit = turn.get("criteria")
            if not isinstance(crit, list):
                raise DatasetError(f"{where}: conversations[{i}].criteria should be a list")
            for j, c in enumerate(crit):
                if not isinstance(c, dict) or not isinstance(c.get("description"), str):
                    raise DatasetError(f"{where}: conversations[{i}].criteria[{j}].description missing")
                if not isinstance(c.get("weight"), int | float) or isinstance(c.get("weight"), bool):
                    raise DatasetError(f"{where}: conversations[{i}].criteria[{j}].weight should be a number")
    if n_answers == 0:
        raise DatasetError(f"{where}: no assistant turn to answer")
    return conv


def turn_messages(conversations: list[dict[str, Any]], turn_index: int) -> list[Message]:
    """Text-only conversation for the assistant turn at ``conversations[turn_index]``: all turns
    before it, with the reference answers as assistant history (media are added by the task)."""
    msgs: list[Message] = []
    for turn in conversations[:turn_index]:
        msgs.append(Message.text(turn["role"], turn["content"]))
    return msgs


def item_samples(item: dict[str, Any], where: str) -> list[Sample]:
    """One sample per assistant turn. A malformed item becomes one sample that carries the error
    (raised again by the task's prompt()), so bad rows are recorded per sample, never fatal."""
    if isinstance(item.get("conversations"), str):  # some hub exports keep nested fields as JSON text
        import json

        try:
            item = {**item, "conversations": json.loads(item["conversations"])}
        except json.JSONDecodeError:
            pass  # _check_item reports it
    try:
        conv = _check_item(item, where)
    except DatasetError as exc:
        sid = str(item.get("sample_id") or where)
        return [Sample(id=f"{sid}#t1", messages=[], metadata={"_load_error": str(exc), "sample_id": sid})]
    item_fields = {k: v for k, v in item.items() if k != "conversations"}
    # released: item.get('task', 'unknown') as the fallback, so an item without a task is "unknown"
    task = "unknown" if item.get("task") is None else str(item["task"])
    canon = canonical_task(task)
    groups = modality_groups(conv)
    duration = float(item.get("duration") or 0.0)
    out: list[Sample] = []
    k = 0
    for i, turn in enumerate(conv):
        if turn["role"] != "assistant":
            continue
        k += 1
        user = next((conv[j] for j in range(i - 1, -1, -1) if conv[j]["role"] == "user"), {})
        meta = {
            **item_fields,
            "conversations": conv,  # the whole item, every field kept
            "turn": k,
            "turn_index": i,
            "n_turns": sum(1 for t in conv if t["role"] == "assistant"),
            "criteria": turn["criteria"],
            "question": user.get("content", ""),
            "difficulty": user.get("difficulty"),
            "turn_modalities": list(user.get("modalities") or []),
            "key_segments": list(user.get("key_segments") or []),
            "conversation_role": user.get("conversation_role"),
            "canonical_task": canon,
            "category": CATEGORY_OF_TASK.get(canon, "Uncategorised"),
            "modality": groups,
            "duration_bin": duration_bin(duration),
        }
        out.append(Sample(id=f"{item['sample_id']}#t{k}", messages=turn_messages(conv, i),
                          target=turn["content"], metadata=meta))
    return out


def items_samples(rows: list[tuple[str, dict[str, Any]]]) -> list[Sample]:
    """Samples of all items. Two items with one ``sample_id`` are a data error (one line, at load):
    their turns would share sample ids and be merged as if they were epochs of one item."""
    first: dict[str, str] = {}
    for where, row in rows:
        sid = row.get("sample_id") if isinstance(row, dict) else None
        if isinstance(sid, str) and sid:
            if sid in first:
                raise DatasetError(f"{where}: duplicate sample_id {sid!r} (first at {first[sid]})")
            first[sid] = where
    return [s for where, row in rows for s in item_samples(row, where)]
