"""A tiny randomly initialised PointLLM checkpoint folder, built offline, for the pointllm: backend tests.

Laid out as the released ones (config.json with PointLLM's keys and ``model_type: pointllm``, one
safetensors file with ``model.point_backbone.*`` / ``model.point_proj.*`` next to the Llama weights,
a tokenizer without the point tokens, which the backend adds as PointLLM does: the embedding has
three rows more than the tokenizer, as the released 32003 against Vicuna's 32000). Sizes: Llama
hidden 64, 2 layers; Point-BERT with 16 groups of 8 points (17 point tokens), width 32, 2 blocks;
the projector has two hidden layers, as v1.2's. The tokenizer is a byte-level BPE trained here on a
few prompt sentences, adding ``<s>`` in front as Llama's does. Weights come from a fixed seed.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

BACKBONE = {"trans_dim": 32, "depth": 2, "num_heads": 2, "group_size": 8, "num_group": 16, "encoder_dims": 32,
            "point_dims": 3, "projection_hidden_layer": 2, "projection_hidden_dim": [48, 64], "use_max_pool": False}
CORPUS = [
    "A chat between a curious user and an artificial intelligence assistant.",
    "The assistant gives helpful, detailed, and polite answers to the user's questions.",
    "USER: ASSISTANT: Caption this 3D model in detail.",
    'Text: "a flat square red seat" Output only matching <part_0> tokens, comma-separated.',
    "Describe region <part_3> and <part_7> in one short sentence. a red chair with four legs",
]
MARKER = "tiny-pointllm.v1"


def tokenizer() -> Any:  # PreTrainedTokenizerFast
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<unk>")


def config(vocab_size: int, **overrides: Any) -> Any:  # PointLLMConfig
    from harness.tasks.partverse.pointllm_model import PointLLMConfig

    values: dict[str, Any] = dict(
        vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, max_position_embeddings=512, rms_norm_eps=1e-6, tie_word_embeddings=False,
        # 0.1, not 0.02: with the default a random model's greedy reply is one token repeated
        initializer_range=0.1, bos_token_id=1, eos_token_id=2, pad_token_id=0,
        point_backbone="PointBERT", use_color=True, mm_use_point_start_end=True,
        DEFAULT_POINT_PATCH_TOKEN="<point_patch>", DEFAULT_POINT_START_TOKEN="<point_start>",
        DEFAULT_POINT_END_TOKEN="<point_end>", point_backbone_config=dict(BACKBONE),
    )
    values.update(overrides)
    return PointLLMConfig(**values)


@functools.cache
def build_tiny_pointllm(path: str | Path, seed: int = 0) -> Path:
    """Write the tiny PointLLM folder to ``path`` (unless complete there already); return the path."""
    out = Path(path)
    if (out / MARKER).exists():
        return out
    import torch

    from harness.tasks.partverse.pointllm_model import PointLLMForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    tok = tokenizer()
    torch.manual_seed(seed)
    model = PointLLMForCausalLM(config(len(tok) + 3)).to(torch.float32)
    randomise_batchnorm(model.model.point_backbone)
    return save_tiny(model, tok, out)


def randomise_batchnorm(backbone: Any) -> None:
    """BatchNorm statistics other than the initial 0/1, so the loaded running stats visibly matter."""
    import torch

    with torch.no_grad():
        for module in backbone.modules():
            if isinstance(module, torch.nn.BatchNorm1d):
                assert module.running_mean is not None and module.running_var is not None
                module.running_mean.normal_(0.0, 0.1)
                module.running_var.uniform_(0.5, 1.5)


def save_tiny(model: Any, tok: Any, out: Path) -> Path:
    """The folder as a release has it (safetensors, config, tokenizer), marked complete last."""
    from transformers import GenerationConfig

    model.generation_config = GenerationConfig(bos_token_id=1, eos_token_id=2, pad_token_id=0)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    (out / MARKER).write_text("complete\n")
    return out


def cloud_of(data_dir: Path, name: str) -> str:
    """The fixture's cloud of object ``name`` (chair, lamp, ...)."""
    return str(data_dir / "objaverse_data" / f"fixture_{name}_8192.npy")


def copy_folder(tiny_dir: Path, where: Path) -> Path:
    """A copy of a tiny folder to break (the cached original stays intact)."""
    import shutil

    shutil.copytree(tiny_dir, where)
    return where


def edit_weights(folder: Path, edit: Any) -> None:
    """``edit`` (a function of the name -> tensor dict) applied to a folder's safetensors in place."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(folder / "model.safetensors")
    edit(tensors)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
