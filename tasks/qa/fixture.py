"""The qa family's offline fixture: a five-row JSONL to evaluate on (``-T path=FOLDER/qa.jsonl``)."""

from __future__ import annotations

import json
from pathlib import Path

ROWS = (("What is the capital of France?", "Paris"), ("2 + 2 =", "4"), ("Spell 'cat' backwards.", "tac"),
        ("Echo this: hello", "Echo this: hello"), ("The colour of the sky on a clear day?", "blue"))


def write(folder: str | Path) -> Path:
    """Write ``qa.jsonl`` into ``folder`` (created if needed); returns the file."""
    path = Path(folder) / "qa.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        for i, (question, answer) in enumerate(ROWS):
            fh.write(json.dumps({"id": f"q{i}", "input": question, "target": answer}) + "\n")
    return path
