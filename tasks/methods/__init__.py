"""Tasks for training methods as model backends: binary-network classification and clustering."""
