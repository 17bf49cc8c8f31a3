"""ReID backends: fit on the task's train split, then return one embedding per image."""
