"""MMLU-Redux as multiple choice, scored by loglikelihood the way lm-evaluation-harness scores MMLU."""
