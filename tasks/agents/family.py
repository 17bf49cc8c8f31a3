"""Family manifest: Game agents (entry-point group ``harness.families``)."""

from harness.family import DemoRun, Family

INSTALL = "pip install 'harness[agents]'"

FAMILY = Family(
    name="agents",
    title="Game agents (Crafter episodes; 3A-VLA)",
    arena_display="none",  # in the arena: outputs a person cannot compare (episodes in an environment)
    tasks=("harness.tasks.agents.tasks",),
    backends=("harness.tasks.agents.backends.builtin", "harness.tasks.agents.backends.vla"),
    cli="harness.tasks.agents.cli:app",
    cli_help="Record scripted-expert demonstrations for the VLA backends",
    demo=(
        DemoRun("crafter", "crafter:random", options={"episodes": 1, "max_steps": 50},
                full_options={"episodes": 3, "max_steps": 200}, needs=("crafter",), install=INSTALL),
        # 3A-VLA, trained on expert demonstrations recorded in-process
        DemoRun("crafter_instruct", "vla:3a",
                options={"goals": "collect_wood", "episodes": 1, "max_steps": 30, "demo_episodes": 2},
                full_options={"goals": "collect_wood,place_table", "episodes": 2},
                settings={"epochs": 2}, full_settings={"epochs": 10},
                needs=("crafter", "torch"), install=INSTALL + " torch"),
        DemoRun("crafter", "crafter:scripted", options={"episodes": 2, "max_steps": 300}, size="full",
                needs=("crafter",), install=INSTALL),
    ),
)
