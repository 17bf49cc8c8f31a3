"""Family manifest: PartVerse-QA and 3D captioning (entry-point group ``harness.families``)."""

from harness.family import DemoRun, Family

FAMILY = Family(
    name="partverse",
    title="PartVerse-QA and 3D captioning",
    arena_display="render",  # in the arena: judged by looking at renders
    tasks=("harness.tasks.partverse.task",),
    # pointllm:DIR, PointLLM on the clouds; plotllm:DIR, 3D-PLOT-LLM on the clouds and their partition packs
    backends=("harness.tasks.partverse.pointllm", "harness.tasks.partverse.plotllm"),
    demo=(
        DemoRun("partverse_c2s", "builtin:constant", settings={"text": "<part_0>,<part_4>"}),
        # PointLLM's 'score#reason' judge format
        DemoRun("partverse_s2c", "builtin:constant", settings={"text": "A part of the object."},
                judge="builtin:constant", judge_settings={"text": "50#stub judge: one constant score"},
                size="full", needs=("sentence_transformers",), install="pip install 'harness[partverse]'"),
    ),
)
