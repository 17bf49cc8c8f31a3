"""Generic question-answer task over a user's JSONL file, scored by exact match."""

from harness.tasks.qa.task import qa

__all__ = ["qa"]
