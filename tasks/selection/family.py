"""Family manifest: online data selection (entry-point group ``harness.families``)."""

from harness.family import Family

FAMILY = Family(
    name="selection",
    title="Online data selection: Gated Fisher Volume against loss, gradient-norm, entropy and random selection",
    tasks=("harness.tasks.selection.tasks", "harness.tasks.selection.sft_task"),
    backends=("harness.tasks.selection.backends",),
)
