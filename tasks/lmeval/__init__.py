"""lm-evaluation-harness's task library as harness tasks (``lmeval:TASK``)."""
