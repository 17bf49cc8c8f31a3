"""Generic question-answer task over a user's JSONL file, scored by exact match."""
