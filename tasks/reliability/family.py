"""Family manifest: Channel-coding reliability (entry-point group ``harness.families``)."""

from harness.family import DemoRun, Family

FAMILY = Family(
    name="reliability",
    title="Channel-coding reliability",
    arena_display="text",  # in the arena: judged by reading
    tasks=("harness.tasks.reliability.task",),
    cli="harness.tasks.reliability.cli:reliability_app",
    charts="harness.tasks.reliability.analysis:chart",
    # the seed method is the operators themselves: forward error correction over a built-in model
    demo=(
        DemoRun("reliability_gsm8k", "builtin:number", limit=10, full_limit=100),
        DemoRun("reliability_gsm8k", "fec(builtin:number)", limit=10, full_limit=100),
        DemoRun("reliability_mmlu", "builtin:constant", settings={"text": "Answer: B"}, limit=100, size="full"),
    ),
)
