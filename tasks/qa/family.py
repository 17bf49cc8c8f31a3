"""Family manifest: Question answering over your JSONL (entry-point group ``harness.families``)."""

from harness.family import DemoRun, Family

FAMILY = Family(
    name="qa",
    title="Question answering over your JSONL",
    arena_display="text",  # in the arena: judged by reading
    tasks=("harness.tasks.qa.task",),
    fixture="harness.tasks.qa.fixture:write",
    demo=(DemoRun("qa", "builtin:echo", options={"path": "{fixture}/qa.jsonl"}),),
)
