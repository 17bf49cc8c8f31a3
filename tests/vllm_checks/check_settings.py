"""Engine settings the vLLM checks use: CPU defaults, overridable with ``HARNESS_VLLM_TEST_ENGINE``
(JSON), e.g. ``{"dtype": "bfloat16", "gpu_memory_utilization": 0.3}`` on a GPU (bench/gpu_check.sh).

``distributed_executor_backend="uni"`` runs the worker inside the engine process: one process (and
one ~30 s vLLM import on a busy 2-core box) fewer; the adapter's code path is the same.
"""

from __future__ import annotations

import json
import os
from typing import Any

CPU_DEFAULTS: dict[str, Any] = {"dtype": "float32", "max_model_len": 256, "enforce_eager": True,
                                "distributed_executor_backend": "uni"}


def engine_settings(**overrides: Any) -> dict[str, Any]:
    extra = json.loads(os.environ.get("HARNESS_VLLM_TEST_ENGINE") or "{}")
    return {**CPU_DEFAULTS, **overrides, **extra}


def expected_spec(model_dir: str, **overrides: Any) -> str:
    """The model spec the adapter should report for these settings."""
    from harness.models.vllm_config import parse_settings

    return parse_settings(model_dir, engine_settings(**overrides)).spec
