"""DSGG: dynamic scene graph generation metrics (Action Genome, VidVRD, PVSG, set-valued MLLM outputs),
the ``dsgg`` task (Temporal Relation Sets, reason then locate) and its frequency-prior baseline model."""
