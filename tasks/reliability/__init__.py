"""Reliability hard splits (GSM8K, MMLU-Redux clean, HumanEval) for the channel-coding operators."""
