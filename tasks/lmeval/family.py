"""Family manifest: lm-evaluation-harness's task library (entry-point group ``harness.families``)."""

from harness.family import Family

FAMILY = Family(
    name="lmeval",
    title="lm-evaluation-harness task library",
    tasks=("harness.tasks.lmeval.task",),
)
