"""Family manifest: Question answering over your JSONL (entry-point group ``harness.families``)."""

from harness.family import Family

FAMILY = Family(
    name="qa",
    title="Question answering over your JSONL",
    tasks=("harness.tasks.qa.task",),
)
