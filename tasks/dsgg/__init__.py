"""DSGG: dynamic scene graph generation metrics (Action Genome, VidVRD, PVSG, set-valued MLLM outputs),
the ``dsgg`` task (Temporal Relation Sets, reason then locate) and its frequency-prior baseline model."""

from harness.tasks.dsgg import models  # noqa: F401  (registers dsgg-prior / dsgg-replay)
from harness.tasks.dsgg.task import dsgg

__all__ = ["dsgg"]
