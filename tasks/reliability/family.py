"""Family manifest: Channel-coding reliability (entry-point group ``harness.families``)."""

from harness.family import Family

FAMILY = Family(
    name="reliability",
    title="Channel-coding reliability",
    tasks=("harness.tasks.reliability.task",),
    cli="harness.tasks.reliability.cli:reliability_app",
    charts="harness.tasks.reliability.analysis:chart",
)
