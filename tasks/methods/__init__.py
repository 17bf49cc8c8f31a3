"""Tasks for training methods as model backends: binary-network classification and clustering."""

from harness.tasks.methods.classification import methods_breast_cancer, methods_digits, methods_wine
from harness.tasks.methods.clustering import (
    methods_cluster_blobs,
    methods_cluster_digits,
    methods_cluster_iris,
    methods_cluster_wine,
)

__all__ = ["methods_breast_cancer", "methods_cluster_blobs", "methods_cluster_digits", "methods_cluster_iris",
           "methods_cluster_wine", "methods_digits", "methods_wine"]
