"""Family manifest: the 2-Step Agent (entry-point group ``harness.families``)."""

from harness.family import DemoRun, Family

FAMILY = Family(
    name="decision",
    title="2-Step Agent: ML decision support",
    arena_display="none",  # in the arena: outputs a person cannot compare (simulated decisions)
    tasks=("harness.tasks.decision.tasks",),
    backends=("harness.tasks.decision.backends",),
    demo=(
        DemoRun("twostep", "twostep:bayes", options={"n_agents": 200}, full_options={"n_agents": 2000}),
        DemoRun("twostep", "twostep:no_support", options={"n_agents": 2000}, size="full"),
    ),
)
