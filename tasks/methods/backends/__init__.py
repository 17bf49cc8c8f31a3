"""Training methods as model backends (fit on a task's train split, then predict): HTAF/ICBM
binary networks (``htaf:``) and batched Hartigan k-means (``hartigan:``). Their modules import
numpy/torch/scikit-learn only inside functions, so registration stays light."""
