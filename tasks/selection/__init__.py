"""Online data selection under a fixed budget: Gated Fisher Volume and its baselines."""
