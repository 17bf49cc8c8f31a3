"""Model alias cards in models/aliases/: well-formed, pinned, and resolved by the task's modalities."""

from __future__ import annotations

import pytest

from harness.leaderboard.model_cards import FIELDS as METADATA
from harness.modelspec import ALIAS_DIR, ModelSpecError, alias_names, load_alias, parse_spec, resolve_alias

BACKENDS = {"hf", "vllm", "openai", "llamacpp"}


def test_expected_cards_exist():
    assert {"smollm2", "qwen", "qwen-hf", "gpt4o", "gpt4o-mini", "llama3", "qwen3"} <= set(alias_names())


@pytest.mark.parametrize("name", alias_names())
def test_card_is_well_formed(name):
    card = load_alias(name)
    assert card is not None and str(card.get("description", "")).strip(), f"{name}: needs a description"
    specs = [card["spec"]] if "spec" in card else [v["spec"] for v in card["variants"]]
    for spec in specs:
        node = parse_spec(spec)
        assert node.name in BACKENDS and node.path, f"{name}: {spec!r} is not backend:path on {BACKENDS}"
    for variant in card.get("variants", []):
        assert "text" in variant["modalities"], f"{name}: every variant takes text"
    known = {"description", "spec", "variants", "settings", *METADATA}  # METADATA: what the leaderboard shows
    assert set(card) <= known, f"{name}: unknown keys {set(card)}"
    for layer in [card, *card.get("variants", [])]:
        assert all(isinstance(layer[k], str | int | float) for k in METADATA if k in layer), f"{name}: {layer}"
    assert (ALIAS_DIR / f"{name}.yaml").read_text().isascii()


def test_smollm2_is_the_embedded_hf_model():
    assert resolve_alias("smollm2", {"text"}) == ("hf:smollm2-135m-instruct", {"batch_size": 32})


@pytest.mark.parametrize(
    ("modalities", "spec"),
    [
        ({"text"}, "vllm:Qwen/Qwen2.5-7B-Instruct"),
        ({"text", "image"}, "vllm:Qwen/Qwen2.5-VL-7B-Instruct"),
        ({"image"}, "vllm:Qwen/Qwen2.5-VL-7B-Instruct"),
        ({"text", "video"}, "vllm:Qwen/Qwen2.5-Omni-7B"),
        ({"text", "audio"}, "vllm:Qwen/Qwen2.5-Omni-7B"),
        ({"text", "image", "video", "audio"}, "vllm:Qwen/Qwen2.5-Omni-7B"),
    ],
)
def test_qwen_picks_the_model_that_fits_the_task(modalities, spec):
    assert resolve_alias("qwen", modalities)[0] == spec


def test_qwen_refuses_modalities_no_variant_takes():
    with pytest.raises(ModelSpecError, match="no variant for modalities"):
        resolve_alias("qwen", {"text", "mesh"})
    with pytest.raises(ModelSpecError, match="no variant for modalities"):
        resolve_alias("qwen-hf", {"text", "audio"})


def test_gpt4o_is_a_pinned_snapshot_without_audio():
    spec, settings = resolve_alias("gpt4o", {"text"})
    assert spec == "openai:gpt-4o-2024-08-06"
    assert "audio" not in settings["modalities"] and "video" in settings["modalities"]
