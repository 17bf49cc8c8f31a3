"""Family manifest: Helpful-only alignment probes (entry-point group ``harness.families``)."""

from harness.family import Family

FAMILY = Family(
    name="alignment",
    title="Helpful-only alignment probes",
    tasks=(
        "harness.tasks.alignment.refusal",
        "harness.tasks.alignment.misalignment",
        "harness.tasks.alignment.sycophancy",
        "harness.tasks.alignment.steerability",
        "harness.tasks.alignment.character",
    ),
    cli="harness.tasks.alignment.cli:alignment_app",
    public_view="harness.tasks.alignment.redact",
)
