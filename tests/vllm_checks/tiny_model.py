"""Build a tiny randomly initialised Qwen2 chat model on disk (safetensors + tokenizer + template).

vLLM's CPU attention needs head_dim in {32, 64, 80, ...}: hidden 128 with 4 heads gives 32. The
tokenizer is a byte-level BPE trained with ``tokenizers`` on the repo's GSM8K questions, so any text
encodes; the chat template is ChatML (Qwen's). Weights come from a fixed seed, so the same folder is
rebuilt bit-identically. Runs in either interpreter (only torch, transformers and tokenizers).

    python tests/vllm_checks/tiny_model.py OUT_DIR [tiny|smollm2-135m]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MARKER = "tiny-qwen2-v2"


def _corpus() -> list[str]:
    lines = (ROOT / "tasks" / "gsm8k" / "data" / "test.jsonl").read_text().splitlines()
    texts = []
    for line in lines[:400]:
        row = json.loads(line)
        texts += [row["question"], row["answer"]]
    return texts


# SmolLM2-135M's shape (Llama, 30 layers, hidden 576, 9 heads of 64, 3 KV heads): random weights
# with a realistic cost per token, for throughput benchmarks on machines that reach no hub
SHAPES = {
    "tiny": {"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2},
    "smollm2-135m": {"hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
                     "num_attention_heads": 9, "num_key_value_heads": 3},
}


def build_tiny_chat_model(out: str | Path, vocab_size: int = 1024, seed: int = 0, shape: str = "tiny") -> Path:
    """Write the model to ``out`` (skipped when a complete one is already there) and return it."""
    out = Path(out)
    if (out / MARKER).exists():
        return out
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_corpus(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   bos_token=None, unk_token=None)
    fast.chat_template = CHATML
    fast.save_pretrained(out)

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(fast), **SHAPES[shape], max_position_embeddings=4096,
        eos_token_id=fast.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=fast.convert_tokens_to_ids("<|endoftext|>"),
        bos_token_id=None, tie_word_embeddings=True, torch_dtype="float32",
    )
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(out, safe_serialization=True)
    (out / MARKER).write_text("complete\n")
    return out


if __name__ == "__main__":
    print(build_tiny_chat_model(sys.argv[1], shape=sys.argv[2] if len(sys.argv) > 2 else "tiny"))
