"""Family manifest: Novel-view synthesis (entry-point group ``harness.families``)."""

from harness.family import Family

FAMILY = Family(
    name="nvs",
    title="Novel-view synthesis",
    tasks=("harness.tasks.nvs.tasks",),
    backends=("harness.tasks.nvs.backends",),
)
