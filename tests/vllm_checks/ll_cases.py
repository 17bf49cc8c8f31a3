"""The scoring and completion cases tests/test_vllm_loglikelihood.py puts to both backends (vLLM in its
venv, ``hf:`` in the test process): one definition, so both answer the same questions."""

from __future__ import annotations

from typing import Any

# (context, continuation): a clear right and wrong answer, a continuation of several tokens, an empty
# context (-> the prefix token), a context ending in a space (moved to the continuation), a counting
# continuation that greedy decoding reproduces
PAIRS: list[tuple[str, str]] = [
    ("Question: What is 2+2?\nAnswer:", " 4"),
    ("Question: What is 2+2?\nAnswer:", " 5"),
    ("The capital of France is", " Paris"),
    ("The capital of France is", " Berlin, a large city in Germany."),
    ("", "Hello there"),
    ("Answer: ", "B"),
    ("Answer:", " B"),  # the same tokens as the pair before: one engine prompt, the same value
    ("The cat sat on the", " mat."),
    ("1, 2, 3, 4, 5,", " 6, 7, 8"),
]
# a text of ~30 tokens (one window at the default length, several at SHORT) and the empty text (0)
ROLLING: list[str] = ["The quick brown fox jumps over the lazy dog, and then it runs into the forest to hide.", ""]
SHORT = 8  # -M max_length for the windowed checks
SHORT_PAIRS: list[tuple[str, str]] = [
    ("one two three four five six seven eight nine ten eleven twelve thirteen", " fourteen"),  # context cut
    ("Question: What is 2+2?\nAnswer:", " 4"),
]
# more continuation tokens than SHORT: refused for its request alone
TOO_LONG = ("Count:", " one two three four five six seven eight nine ten")
COMPLETION_PROMPT = "Question: What is the capital of France?\nAnswer:"
# raw completions put to both backends: (prompt, GenerationConfig keywords)
COMPLETIONS: list[tuple[str, dict[str, Any]]] = [
    (COMPLETION_PROMPT, {"max_tokens": 8}),
    ("The capital of France is", {"max_tokens": 8}),
    ("1, 2, 3,", {"max_tokens": 16, "stop": [","]}),
]
LONG_PROMPT = "word " * 700  # longer than the engine's max_model_len: left-truncated
