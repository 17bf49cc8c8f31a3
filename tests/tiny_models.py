"""Tiny randomly initialised chat models built locally, for backend tests that reach no hub.

- ``build_tiny_chat_model(path)``: a Qwen2 causal LM (hidden 128, 4 heads of 32 — vLLM's CPU
  attention needs head_dim >= 32 —, 2 KV heads, 2 layers) with a byte-level BPE tokenizer trained
  with ``tokenizers`` on the shipped GSM8K questions and a ChatML chat template.
- ``build_tiny_vision_model(path)``: a LLaVA model (a 1-layer CLIP vision tower on 32x32 images,
  16 patches, + the same tiny Qwen2 as language model) with a LlavaProcessor, for image-text paths
  (needs Pillow).

Weights come from a fixed seed, so rebuilding gives the same files. Both functions skip work when a
complete model is already at ``path`` and are cached per process. Only torch, transformers and
tokenizers are imported (the vLLM venv can run this file too)::

    python tests/tiny_models.py OUT_DIR [chat|vision]

Fixtures ``tiny_chat_model`` / ``tiny_vision_model`` (session-scoped, in a pytest temp dir) can be
imported into a test module: ``from tests.tiny_models import tiny_chat_model  # noqa: F401``.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}{{ '<image>' }}{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "{{ '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>"]
CHAT_MARKER = "tiny-chat.v1"
VISION_MARKER = "tiny-vision.v1"
TEXT_SHAPE = {"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "max_position_embeddings": 1024}
IMAGE_SIZE, PATCH_SIZE = 32, 8  # 16 patches -> 16 <image> tokens per picture


def _corpus() -> list[str]:
    texts = []
    for line in (ROOT / "tasks" / "gsm8k" / "data" / "test.jsonl").read_text().splitlines()[:300]:
        row = json.loads(line)
        texts += [row["question"], row["answer"]]
    return texts


def _tokenizer(vocab_size: int = 1024):  # -> PreTrainedTokenizerFast
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   bos_token=None, unk_token=None,
                                   model_max_length=TEXT_SHAPE["max_position_embeddings"])
    fast.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<image>"]})
    fast.chat_template = CHATML
    return fast


def _text_config(tokenizer, seed_vocab: int):  # -> Qwen2Config
    from transformers import Qwen2Config

    return Qwen2Config(
        # initializer_range 0.1 (not 0.02): with the default, greedy decoding of a random model emits one
        # token forever, and tests comparing batched with unbatched replies would compare nothing
        vocab_size=seed_vocab, tie_word_embeddings=True, rms_norm_eps=1e-6, initializer_range=0.1,
        bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        **TEXT_SHAPE,
    )


def _seeded(seed: int) -> None:
    import torch

    torch.manual_seed(seed)


@functools.cache
def build_tiny_chat_model(path: str | Path, seed: int = 0) -> Path:
    """Write the tiny Qwen2 chat model to ``path`` (unless already complete there); return the path."""
    out = Path(path)
    if (out / CHAT_MARKER).exists():
        return out
    import torch
    from transformers import GenerationConfig, Qwen2ForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer()
    _seeded(seed)
    model = Qwen2ForCausalLM(_text_config(tokenizer, len(tokenizer))).to(torch.float32)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id,
                                               pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    (out / CHAT_MARKER).write_text("complete\n")
    return out


@functools.cache
def build_tiny_vision_model(path: str | Path, seed: int = 0) -> Path:
    """Write a tiny LLaVA (CLIP tower + tiny Qwen2) with its processor to ``path``; return the path."""
    out = Path(path)
    if (out / VISION_MARKER).exists():
        return out
    import torch
    from transformers import (
        CLIPVisionConfig,
        GenerationConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    # the PIL image processor: the default (fast) one needs torchvision, absent from CPU-only setups
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer()
    vision = CLIPVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
                              image_size=IMAGE_SIZE, patch_size=PATCH_SIZE, projection_dim=64)
    config = LlavaConfig(
        vision_config=vision, text_config=_text_config(tokenizer, len(tokenizer)),
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"), vision_feature_select_strategy="default",
        vision_feature_layer=-1, projector_hidden_act="gelu", tie_word_embeddings=True,
    )
    _seeded(seed)
    model = LlavaForConditionalGeneration(config).to(torch.float32)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id,
                                               pad_token_id=tokenizer.pad_token_id)
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": IMAGE_SIZE}, crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE},
        do_center_crop=True, do_resize=True, do_normalize=True, do_convert_rgb=True,
    )
    # "default" strategy drops CLS: 16 patch tokens; the processor expands <image> to that many
    processor = LlavaProcessor(image_processor=image_processor, tokenizer=tokenizer, chat_template=CHATML,
                               patch_size=PATCH_SIZE, vision_feature_select_strategy="default",
                               num_additional_image_tokens=1, image_token="<image>")
    model.save_pretrained(out, safe_serialization=True)
    processor.save_pretrained(out)
    (out / VISION_MARKER).write_text("complete\n")
    return out


try:  # fixtures when pytest is around (the vLLM venv may run this file without it)
    import pytest

    @pytest.fixture(scope="session")
    def tiny_chat_model(tmp_path_factory) -> Path:
        return build_tiny_chat_model(tmp_path_factory.mktemp("tiny-chat"))

    @pytest.fixture(scope="session")
    def tiny_vision_model(tmp_path_factory) -> Path:
        return build_tiny_vision_model(tmp_path_factory.mktemp("tiny-vision"))
except ImportError:  # pragma: no cover
    pass


if __name__ == "__main__":
    kind = sys.argv[2] if len(sys.argv) > 2 else "chat"
    builder = build_tiny_vision_model if kind == "vision" else build_tiny_chat_model
    print(builder(sys.argv[1]))
