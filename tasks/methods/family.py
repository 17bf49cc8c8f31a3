"""Family manifest: Training methods as backends (entry-point group ``harness.families``)."""

from harness.family import DemoRun, Family

INSTALL = "pip install 'harness[methods]'"

FAMILY = Family(
    name="methods",
    title="Training methods as backends",
    arena_display="none",  # in the arena: outputs a person cannot compare (class ids and cluster labels)
    tasks=("harness.tasks.methods.classification", "harness.tasks.methods.clustering"),
    backends=("harness.tasks.methods.backends.htaf", "harness.tasks.methods.backends.hartigan"),
    demo=(
        DemoRun("methods_cluster_iris", "kmeans:lloyd", needs=("sklearn",), install=INSTALL),
        DemoRun("methods_cluster_iris", "hartigan:batched", needs=("sklearn",), install=INSTALL),
        DemoRun("methods_wine", "htaf:mlp", settings={"epochs": 5, "seeds": 1},
                full_settings={"epochs": 30, "seeds": 3}, needs=("sklearn", "torch"),
                install=INSTALL + " torch"),
    ),
)
