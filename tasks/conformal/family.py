"""Family manifest: multi-level online conformal prediction (entry-point group ``harness.families``)."""

from harness.family import DemoRun, Family

FAMILY = Family(
    name="conformal",
    title="Multi-level online conformal prediction",
    arena_display="none",  # in the arena: outputs a person cannot compare (prediction sets over a stream)
    tasks=("harness.tasks.conformal.tasks",),
    backends=("harness.tasks.conformal.backends",),
    demo=(
        DemoRun("ocp_synthetic", "ocp:pnorm", options={"T": 500}, full_options={"T": 2000}),
        DemoRun("ocp_synthetic", "ocp:aci", options={"T": 500}, full_options={"T": 2000}),
        DemoRun("ocp_elec2", "ocp:aci", size="full"),
    ),
)
