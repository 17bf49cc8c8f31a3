"""Family manifest: GSM8K (entry-point group ``harness.families``)."""

from harness.family import Family

FAMILY = Family(
    name="gsm8k",
    title="GSM8K",
    tasks=("harness.tasks.gsm8k.task",),
)
