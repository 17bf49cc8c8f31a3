"""GSM8K (test split): grade-school maths word problems, final-answer exact match."""

from harness.tasks.gsm8k.task import gsm8k

__all__ = ["gsm8k"]
