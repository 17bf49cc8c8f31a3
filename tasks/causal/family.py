"""Family manifest: causal bounds under Markov equivalence (entry-point group ``harness.families``)."""

from harness.family import Family

FAMILY = Family(
    name="causal",
    title="PAG-constrained neural causal models: bounds on interventional queries",
    tasks=("harness.tasks.causal.tasks",),
    backends=("harness.tasks.causal.backends",),
)
