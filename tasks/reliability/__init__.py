"""Reliability hard splits (GSM8K, MMLU-Redux clean, HumanEval) for the channel-coding operators."""

from harness.tasks.reliability.task import reliability, reliability_gsm8k, reliability_humaneval, reliability_mmlu

__all__ = ["reliability", "reliability_gsm8k", "reliability_humaneval", "reliability_mmlu"]
