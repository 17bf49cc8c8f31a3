"""Build a tiny randomly initialised LLaVA (CLIP vision tower + Qwen2 text model) on disk.

For the image path of the vLLM adapter: vLLM loads ``LlavaForConditionalGeneration`` with its
processor (CLIP image processor at 32x32 px, patch 8 -> 16 image tokens per image) and a ChatML
template that renders OpenAI-style content lists (``{"type": "image"}`` -> ``<image>``). Text sizes
as in tiny_model.py (head_dim 32 for vLLM's CPU attention). Fixed seed: rebuilt bit-identically.

    python tests/vllm_checks/tiny_vlm.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

from tiny_model import SPECIALS, _corpus

IMAGE_TOKEN = "<image>"
TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}{{ '<image>' }}{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}{{ '<|im_end|>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
MARKER = "tiny-llava-v1"


def build_tiny_vlm(out: str | Path, seed: int = 0) -> Path:
    out = Path(out)
    if (out / MARKER).exists():
        return out
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        PreTrainedTokenizerFast,
        Qwen2Config,
    )

    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1024, special_tokens=[*SPECIALS, IMAGE_TOKEN],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_corpus(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    images = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    processor = LlavaProcessor(image_processor=images, tokenizer=fast, patch_size=8,
                               vision_feature_select_strategy="default", chat_template=TEMPLATE,
                               image_token=IMAGE_TOKEN, num_additional_image_tokens=1)
    processor.save_pretrained(out)
    fast.chat_template = TEMPLATE
    fast.save_pretrained(out)

    torch.manual_seed(seed)
    text = Qwen2Config(vocab_size=len(fast), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                       eos_token_id=fast.convert_tokens_to_ids("<|im_end|>"),
                       pad_token_id=fast.convert_tokens_to_ids("<|endoftext|>"), tie_word_embeddings=True)
    vision = CLIPVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                              image_size=32, patch_size=8, projection_dim=64)
    config = LlavaConfig(vision_config=vision, text_config=text,
                         image_token_index=fast.convert_tokens_to_ids(IMAGE_TOKEN),
                         vision_feature_layer=-1, vision_feature_select_strategy="default",
                         projector_hidden_act="gelu", tie_word_embeddings=True)
    model = LlavaForConditionalGeneration(config)
    model.save_pretrained(out, safe_serialization=True)
    (out / MARKER).write_text("complete\n")
    return out


if __name__ == "__main__":
    print(build_tiny_vlm(sys.argv[1]))
