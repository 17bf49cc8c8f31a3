"""Family manifest: Optimal Mixture Transport (entry-point group ``harness.families``)."""

from harness.family import DemoRun, Family

FAMILY = Family(
    name="transport",
    title="Optimal Mixture Transport",
    arena_display="none",  # in the arena: outputs a person cannot compare (transport plans)
    tasks=("harness.tasks.transport.tasks",),
    backends=("harness.tasks.transport.backends",),
    demo=(
        DemoRun("omt_synthetic", "omt:auto", options={"n": 200}, full_options={"n": 1000}, needs=("ot",),
                install="pip install 'harness[methods2]'"),
        DemoRun("omt_synthetic", "pot:emd", options={"n": 1000}, size="full", needs=("ot",),
                install="pip install 'harness[methods2]'"),
    ),
)
