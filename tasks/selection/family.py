"""Family manifest: online data selection (entry-point group ``harness.families``)."""

from harness.family import DemoRun, Family

INSTALL = "pip install 'harness[methods]' torch"

FAMILY = Family(
    name="selection",
    title="Online data selection: Gated Fisher Volume against RHO-LOSS, GREATS, loss, gradient-norm, entropy and "
          "random selection",
    arena_display="none",  # in the arena: outputs a person cannot compare (a training run's metrics)
    tasks=("harness.tasks.selection.tasks", "harness.tasks.selection.sft_task"),
    backends=("harness.tasks.selection.backends",),
    # the same training budget for the method and its baseline
    demo=(
        DemoRun("select_digits_noisy", "datasel:gfv", settings={"steps": 20}, full_settings={"steps": 150},
                needs=("sklearn", "torch"), install=INSTALL),
        DemoRun("select_digits_noisy", "datasel:random", settings={"steps": 150}, size="full",
                needs=("sklearn", "torch"), install=INSTALL),
    ),
)
