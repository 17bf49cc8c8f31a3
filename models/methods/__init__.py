"""Training methods as model backends (fit on a task's train split, then predict).

Importing this package registers every backend; its modules import numpy/torch/scikit-learn only
inside functions, so discovery stays light.
"""

from harness.models.methods import hartigan, htaf

__all__ = ["hartigan", "htaf"]
