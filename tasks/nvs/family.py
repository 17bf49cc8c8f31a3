"""Family manifest: Novel-view synthesis (entry-point group ``harness.families``)."""

from harness.family import DemoRun, Family

INSTALL = "pip install 'harness[nvs]'"

FAMILY = Family(
    name="nvs",
    title="Novel-view synthesis",
    arena_display="image",  # in the arena: judged by looking at the rendered views
    tasks=("harness.tasks.nvs.tasks",),
    backends=("harness.tasks.nvs.backends",),
    # the toy scene needs no Blender; the rendered scenes do (full size)
    fixture="harness.tasks.nvs.gs_toy:write_toy_scene",
    demo=(
        DemoRun("nvs_folder", "gs:neural_color", options={"path": "{fixture}"},
                settings={"steps": 20, "gaussians": 200}, full_settings={"steps": 100},
                needs=("torch", "PIL"), install=INSTALL),
        DemoRun("nvs_folder", "ff:consistency", options={"path": "{fixture}"},
                settings={"steps": 20}, full_settings={"steps": 100}, needs=("torch", "PIL"), install=INSTALL),
        DemoRun("nvs_synthetic", "gs:sh", options={"scenes": "textured", "size": 32, "train_views": 8, "test_views": 2},
                settings={"steps": 100, "gaussians": 500}, size="full", needs=("blender", "torch", "PIL"),
                install=INSTALL),
    ),
)
