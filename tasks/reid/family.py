"""Family manifest: cross-view (aerial-ground) re-identification (entry-point group ``harness.families``)."""

from harness.family import Family

FAMILY = Family(
    name="reid",
    title="Cross-view re-identification (3D-VITAL)",
    tasks=("harness.tasks.reid.task",),
    backends=("harness.tasks.reid.backends.models",),
    cli="harness.tasks.reid.cli:app",
    cli_help="Build the synthetic aerial-ground ReID set",
)
