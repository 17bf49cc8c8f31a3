"""Helpers for tests/test_vllm_*.py: find the vLLM venv's interpreter and run a check script in it.

The vLLM parts run in ``$HARNESS_VLLM_PYTHON`` (built by tests/setup.d/60-vllm.sh); each check
script prints one JSON object on its last stdout line, which the test asserts on. Outside CI a
missing venv skips the tests; under CI it fails them (tests/requirements.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from requirements import missing

CHECKS = Path(__file__).resolve().parent
ROOT = CHECKS.parents[1]
ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_HOST_IP": "127.0.0.1",
    "RAY_AUTH_MODE": "disabled",
    "OMP_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "VLLM_LOGGING_LEVEL": "WARNING",
    # the engine core in the test process itself: one process (and one ~30 s vLLM import on a busy
    # 2-core box) fewer; the adapter's code path is the same
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
}


def vllm_python() -> str:
    """The venv interpreter, or skip (fail under CI) when it is missing."""
    default = Path(os.environ.get("HARNESS_CACHE_DIR", Path.home() / ".cache" / "harness")) / "venvs/vllm/bin/python"
    python = os.environ.get("HARNESS_VLLM_PYTHON") or str(default)
    if not Path(python).exists():
        missing(f"the vLLM venv ({python})", "run: source tests/setup.d/60-vllm.sh")
    _point_at_this_checkout(Path(python))
    return python


def _point_at_this_checkout(python: Path) -> None:
    """The venv's editable harness must be this checkout (CI clones elsewhere and leaves the venv
    pointing there): reinstall it, as 60-vllm.sh does, when it is not."""
    stamp = python.parent.parent / ".harness-root"
    if stamp.exists() and stamp.read_text().strip() == str(ROOT):
        return
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(ROOT)], check=True,
                   capture_output=True, timeout=300)
    stamp.write_text(f"{ROOT}\n")


def check_env(tmp: Path) -> dict[str, str]:
    return {**os.environ, **ENV, "PYTHONPATH": str(CHECKS)}


def run_check(script: str, *args: str, tmp: Path, timeout: float = 600) -> dict[str, Any]:
    """Run tests/vllm_checks/SCRIPT in the venv; return its JSON (fails with the log tail)."""
    python = vllm_python()
    proc = subprocess.run([python, str(CHECKS / script), *args], capture_output=True, text=True,
                          timeout=timeout, env=check_env(tmp), cwd=str(tmp))
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stdout[-3000:] + "\n" + proc.stderr[-6000:]).strip()
        raise AssertionError(f"{script} exited {proc.returncode}:\n{tail}")
    return json.loads(lines[-1])


def tiny_model() -> Path:
    """The tiny random Qwen2 chat model, built once with the venv's transformers and kept under
    ``$HARNESS_CACHE_DIR/test-models`` (deterministic, versioned by its marker file); built in a
    scratch folder and renamed into place, so concurrent test processes never see half a model."""
    cache = Path(os.environ.get("HARNESS_CACHE_DIR", Path.home() / ".cache" / "harness")) / "test-models"
    out = cache / "tiny-qwen2-v2"
    if not (out / "tiny-qwen2-v2").exists():
        cache.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="tiny-qwen2-", dir=cache))
        subprocess.run([vllm_python(), str(CHECKS / "tiny_model.py"), str(scratch / "m")], check=True,
                       capture_output=True, timeout=300, env={**os.environ, **ENV})
        try:
            os.replace(scratch / "m", out)
        except OSError:  # another process put it there first
            pass
        shutil.rmtree(scratch, ignore_errors=True)
    return out
