"""Family manifest: PartVerse-QA and 3D captioning (entry-point group ``harness.families``)."""

from harness.family import Family

FAMILY = Family(
    name="partverse",
    title="PartVerse-QA and 3D captioning",
    tasks=("harness.tasks.partverse.task",),
)
