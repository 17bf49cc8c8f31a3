"""Family manifest: causal bounds under Markov equivalence (entry-point group ``harness.families``)."""

from harness.family import DemoRun, Family

FAMILY = Family(
    name="causal",
    title="PAG-constrained neural causal models: bounds on interventional and counterfactual queries",
    arena_display="none",  # in the arena: outputs a person cannot compare (numeric bounds)
    tasks=("harness.tasks.causal.tasks",),
    backends=("harness.tasks.causal.backends",),
    demo=(
        DemoRun("causal_bounds", "bounds:manski", options={"seeds": 1}),
        DemoRun("causal_bounds", "pncm", options={"seeds": 1}, settings={"iters": 100, "restarts": 1},
                full_settings={"iters": 300, "restarts": 2},
                needs=("causallearn", "torch"), install="pip install 'harness[methods3]' torch"),
        DemoRun("causal_bounds", "bounds:lp", options={"seeds": 1}, size="full", needs=("causallearn",),
                install="pip install 'harness[methods3]'"),
    ),
)
