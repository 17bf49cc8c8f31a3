"""Family manifest: multi-level online conformal prediction (entry-point group ``harness.families``)."""

from harness.family import Family

FAMILY = Family(
    name="conformal",
    title="Multi-level online conformal prediction",
    tasks=("harness.tasks.conformal.tasks",),
    backends=("harness.tasks.conformal.backends",),
)
