"""Family manifest: 3DCodeBench (entry-point group ``harness.families``)."""

from harness.family import Family

FAMILY = Family(
    name="code3d",
    title="3DCodeBench",
    tasks=("harness.tasks.code3d.task",),
    cli="harness.tasks.code3d.cli:code3d_app",
)
