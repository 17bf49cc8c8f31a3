"""Family manifest: LongShOTBench (entry-point group ``harness.families``)."""

from harness.family import Family

FAMILY = Family(
    name="longshot",
    title="LongShOTBench",
    tasks=("harness.tasks.longshot.task",),
    backends=("harness.tasks.longshot.agent.backend",),
    cli="harness.tasks.longshot.cli:app",
    cli_help="Build the offline LongShOTBench fixture",
    fixture="harness.tasks.longshot.synth:build_fixture",
)
