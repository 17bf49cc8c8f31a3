#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what the tests need, starts the services they
# use (PostgreSQL on 127.0.0.1, ...), then runs pytest. `.ci/run` calls exactly this script.
# Each tests/setup.d/NN-*.sh fragment installs/starts one thing and may export variables.
set -euo pipefail
cd "$(dirname "$0")/.."
export HARNESS_ROOT="$PWD"
export PIP_DISABLE_PIP_VERSION_CHECK=1 OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export HARNESS_CACHE_DIR="${HARNESS_CACHE_DIR:-$HOME/.cache/harness}"
mkdir -p "$HARNESS_CACHE_DIR"
# Our own virtual environment unless one is active: what the machine's interpreter happens to
# carry must never decide whether the suite passes. Reused across runs (the pins decide versions).
if [ -z "${VIRTUAL_ENV:-}" ] && python3 -c 'import sys; sys.exit(sys.prefix != sys.base_prefix)'; then
  TEST_VENV="$HARNESS_CACHE_DIR/venvs/test-py$(python3 -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')"
  [ -x "$TEST_VENV/bin/python" ] || python3 -m venv "$TEST_VENV"
  # shellcheck disable=SC1091
  source "$TEST_VENV/bin/activate"
  echo "== virtual environment: $TEST_VENV"
fi
# pip_pinned (every install through the lock files constraints*.txt), setup_fail, main_extras
# shellcheck source=tests/pins.sh
source tests/pins.sh
lint() {
  # Only `ruff check`: the code base is not `ruff format`-ted (hand-wrapped calls, `# fmt: skip`
  # blocks), so `ruff format --check` would fail on style the project chose, not on defects.
  echo "== ruff check"
  ruff check .
  # mypy: strict for the core modules, default elsewhere (pyproject.toml [tool.mypy]); any finding
  # fails the run (the findings themselves are printed)
  echo "== mypy"
  if ! bash tests/typecheck.sh >"$HARNESS_CACHE_DIR/mypy.log" 2>&1; then
    cat "$HARNESS_CACHE_DIR/mypy.log"
    setup_fail "mypy found errors"
  fi
  tail -1 "$HARNESS_CACHE_DIR/mypy.log"
}
for fragment in tests/setup.d/*.sh; do
  echo "== setup: $fragment"
  # shellcheck disable=SC1090
  source "$fragment"
  # lint as soon as its tools are in (15-lint.sh), before the slow set-up steps; an `if`, not `||`:
  # set -e must stay in force inside lint()
  if [ "$(basename "$fragment")" = "15-lint.sh" ]; then
    lint
  fi
done
echo "== pytest"
python -m pytest -q -p no:cacheprovider "$@"
