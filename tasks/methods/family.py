"""Family manifest: Training methods as backends (entry-point group ``harness.families``)."""

from harness.family import Family

FAMILY = Family(
    name="methods",
    title="Training methods as backends",
    tasks=("harness.tasks.methods.classification", "harness.tasks.methods.clustering"),
    backends=("harness.tasks.methods.backends.htaf", "harness.tasks.methods.backends.hartigan"),
)
