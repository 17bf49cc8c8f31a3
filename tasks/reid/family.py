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
                full_options={"ids": 12, "ground": 4, "aerial": 4},
                # a small lifting model (trained from scratch in the demo's fresh cache): it runs, it is not good
                settings={"steps": 30, "lift_figures": 40, "lift_steps": 60},
                full_settings={"steps": 100, "lift_figures": 120, "lift_steps": 300}, needs=("blender", "torch"),
                install="pip install torch"),
        DemoRun("reid_aerial_ground", "reid:baseline", options={"ids": 12}, settings={"steps": 100}, size="full",
                needs=("blender", "torch"), install="pip install torch"),
    ),
)
