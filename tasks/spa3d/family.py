"""Family manifest: 3DSPA physical realism (entry-point group ``harness.families``)."""

from harness.family import DemoRun, Family

FAMILY = Family(
    name="spa3d",
    title="3DSPA physical realism",
    arena_display="none",  # in the arena: outputs a person cannot compare (realism scores)
    tasks=("harness.tasks.spa3d.task",),
    backends=("harness.tasks.spa3d.backend",),
    cli="harness.tasks.spa3d.cli:spa3d_app",
    demo=(
        DemoRun("spa3d_pairs", "spa3d:fit", options={"n_per_violation": 2, "n_train": 20},
                full_options={"n_per_violation": 6, "n_train": 60}, settings={"steps": 30},
                full_settings={"steps": 200}, needs=("torch",), install="pip install torch"),
    ),
)
