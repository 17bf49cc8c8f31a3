"""Ray data parallel for the vLLM backend (in the vLLM venv, which has Ray).

The splitting/merging check runs real Ray actors around a small non-vLLM engine; the second check
runs ``vllm:TINY -M dp=2``: two real vLLM CPU engines in two Ray actors.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from vllm_checks.check_settings import expected_spec
from vllm_checks.venv_runner import run_check, tiny_model, vllm_python

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    vllm_python()
    return tmp_path_factory.mktemp("vllm-dp")


def test_ray_actors_split_and_merge_in_order(work: Path) -> None:
    res = run_check("dp.py", "splitting", tmp=work)
    assert res["in_order"]
    assert res["error_kept"] == "bad request: an error here"
    assert len(res["pids"]) == 2 and res["driver_pid"] not in res["pids"]  # two actor processes
    # 12 requests interleaved over 2 replicas: one call of 6 each; then 1 request -> one replica
    assert sorted(res["replica_batches"]) == [[6], [6, 1]]
    assert res["calls"] == 3
    assert res["single"] == "eno ylno"


def test_vllm_dp2_on_two_engines(work: Path) -> None:
    model_dir = str(tiny_model())
    res = run_check("dp.py", "vllm", model_dir, tmp=work)
    assert res["n"] == 10 and res["errors"] == []
    assert res["nonempty"] >= 9
    assert res["calls"] == 2 and len(res["pids"]) == 2  # one engine call per replica
    assert res["spec"] == expected_spec(model_dir)  # replicas do not change the replies' identity
