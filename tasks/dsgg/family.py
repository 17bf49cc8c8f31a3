"""Family manifest: Dynamic scene graph generation (entry-point group ``harness.families``)."""

from harness.family import DemoRun, Family

FAMILY = Family(
    name="dsgg",
    title="Dynamic scene graph generation",
    arena_display="none",  # in the arena: outputs a person cannot compare (scene graphs)
    tasks=("harness.tasks.dsgg.task",),
    backends=("harness.tasks.dsgg.models", "harness.tasks.dsgg.ft_backend"),
    charts="harness.tasks.dsgg.analysis:chart",
    demo=(DemoRun("dsgg", "dsgg-prior:freq"),),  # the seed's contribution is the metrics this run shows
)
