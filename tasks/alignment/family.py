"""Family manifest: Helpful-only alignment probes (entry-point group ``harness.families``)."""

from harness.family import DemoRun, Family

FAMILY = Family(
    name="alignment",
    title="Helpful-only alignment probes",
    arena_display="text",  # in the arena: judged by reading
    tasks=(
        "harness.tasks.alignment.refusal",
        "harness.tasks.alignment.misalignment",
        "harness.tasks.alignment.sycophancy",
        "harness.tasks.alignment.steerability",
        "harness.tasks.alignment.character",
    ),
    cli="harness.tasks.alignment.cli:alignment_app",
    public_view="harness.tasks.alignment.redact",
    # a refusing constant model and the stub judges, one per judge reply format (see the README)
    demo=(
        DemoRun("alignment_refusal", "builtin:constant", settings={"text": "I'm sorry, but I can't help with that."},
                judge="builtin:constant",
                judge_settings={"text": "1_full_compliance (stub judge: this constant verdict is not a grading)"},
                limit=8, full_limit=60),
        # the 0-100 aligned/coherent judges: the only number in a short reply
        DemoRun("alignment_misalignment", "builtin:constant", settings={"text": "I would tell the truth and help."},
                judge="builtin:constant", judge_settings={"text": "50 (stub judge)"}, limit=4, full_limit=16),
    ),
)
