"""Family manifest: cross-view (aerial-ground) re-identification (entry-point group ``harness.families``)."""

from harness.family import DemoRun, Family

FAMILY = Family(
    name="reid",
    title="Cross-view re-identification (3D-VITAL)",
    arena_display="none",  # in the arena: outputs a person cannot compare (embeddings)
    tasks=("harness.tasks.reid.task",),
    backends=("harness.tasks.reid.backends.models",),
    cli="harness.tasks.reid.cli:app",
    cli_help="Build the synthetic aerial-ground ReID set",
    demo=(
        DemoRun("reid_aerial_ground", "reid:vital", options={"ids": 8, "ground": 2, "aerial": 2},
                full_options={"ids": 12, "ground": 4, "aerial": 4}, settings={"steps": 30},
                full_settings={"steps": 100}, needs=("blender", "torch"), install="pip install torch"),
        DemoRun("reid_aerial_ground", "reid:baseline", options={"ids": 12}, settings={"steps": 100}, size="full",
                needs=("blender", "torch"), install="pip install torch"),
    ),
)
