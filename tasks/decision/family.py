"""Family manifest: the 2-Step Agent (entry-point group ``harness.families``)."""

from harness.family import Family

FAMILY = Family(
    name="decision",
    title="2-Step Agent: ML decision support",
    tasks=("harness.tasks.decision.tasks",),
    backends=("harness.tasks.decision.backends",),
)
