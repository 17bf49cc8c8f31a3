"""Family manifest: Dynamic scene graph generation (entry-point group ``harness.families``)."""

from harness.family import Family

FAMILY = Family(
    name="dsgg",
    title="Dynamic scene graph generation",
    tasks=("harness.tasks.dsgg.task",),
    backends=("harness.tasks.dsgg.models",),
    charts="harness.tasks.dsgg.analysis:chart",
)
