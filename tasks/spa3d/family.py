"""Family manifest: 3DSPA physical realism (entry-point group ``harness.families``)."""

from harness.family import Family

FAMILY = Family(
    name="spa3d",
    title="3DSPA physical realism",
    tasks=("harness.tasks.spa3d.task",),
    backends=("harness.tasks.spa3d.backend",),
    cli="harness.tasks.spa3d.cli:spa3d_app",
)
