"""Family manifest: Game agents (entry-point group ``harness.families``)."""

from harness.family import Family

FAMILY = Family(
    name="agents",
    title="Game agents (Crafter episodes; 3A-VLA)",
    tasks=("harness.tasks.agents.tasks",),
    backends=("harness.tasks.agents.backends.builtin", "harness.tasks.agents.backends.vla"),
    cli="harness.tasks.agents.cli:app",
    cli_help="Record scripted-expert demonstrations for the VLA backends",
)
