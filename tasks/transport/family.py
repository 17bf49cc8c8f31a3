"""Family manifest: Optimal Mixture Transport (entry-point group ``harness.families``)."""

from harness.family import Family

FAMILY = Family(
    name="transport",
    title="Optimal Mixture Transport",
    tasks=("harness.tasks.transport.tasks",),
    backends=("harness.tasks.transport.backends",),
)
