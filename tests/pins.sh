# Sourced by tests/run.sh and tests/lock.sh: pip through the lock files, and one way to fail set-up.
# Every install in tests/setup.d goes through pip_pinned (or the venv's own constraints file), so the
# versions come from constraints*.txt, not from whatever an index offers today; a failed install
# stops the run (set -e in the callers) instead of letting the tests that need it skip.
HARNESS_CONSTRAINTS="${HARNESS_CONSTRAINTS:-$HARNESS_ROOT/constraints.txt}"            # the main environment
HARNESS_CONSTRAINTS_VLLM="${HARNESS_CONSTRAINTS_VLLM:-$HARNESS_ROOT/constraints-vllm.txt}"  # 60-vllm.sh's venv
HARNESS_CONSTRAINTS_BPY="${HARNESS_CONSTRAINTS_BPY:-$HARNESS_ROOT/constraints-bpy.txt}"    # 50-bpy.sh's venv
export HARNESS_CONSTRAINTS HARNESS_CONSTRAINTS_VLLM HARNESS_CONSTRAINTS_BPY

# pip_pinned [--python PY] [--constraints FILE] ARGS...: pip install -q through the lock; exits non-zero
# when pip does. Only the index's "Location ... is ignored" chatter is filtered out.
pip_pinned() {
  local py=python constraints="$HARNESS_CONSTRAINTS"
  while [ $# -gt 0 ]; do
    case "$1" in
      --python) py="$2"; shift 2 ;;
      --constraints) constraints="$2"; shift 2 ;;
      *) break ;;
    esac
  done
  "$py" -m pip install -q -c "$constraints" "$@" 2>&1 | { grep -v -e "^WARNING: Location '" || true; }
}

# setup_fail MESSAGE: a set-up step that cannot be done ends the run (exit status 1).
setup_fail() {
  echo "setup failed: $*" >&2
  exit 1
}

# The extras installed into the main environment: all of pyproject.toml's except those that live in
# their own venvs (vllm and ray: 60-vllm.sh; blender: 50-bpy.sh) and llamacpp, whose wheel 30-llamacpp.sh
# builds with safe CPU flags (pip's own source build of it would not run on these VMs).
main_extras() {
  python3 - <<'PY'
import tomllib
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
print(",".join(sorted(set(extras) - {"vllm", "ray", "blender", "llamacpp"})))
PY
}

# declared_requirements [core] [EXTRA...]: the requirements pyproject.toml declares, one per line: the
# core's dependencies when `core` is named, then each named extra's. The venvs of 50-bpy.sh and
# 60-vllm.sh install from this, never from a hand-kept list, so a dependency added to pyproject.toml
# reaches every environment (and a stamp over pyproject.toml re-syncs a cached one).
declared_requirements() {
  python3 - "$@" <<'PY'
import sys, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
out = []
for name in sys.argv[1:]:
    out += project["dependencies"] if name == "core" else project["optional-dependencies"][name]
print("\n".join(dict.fromkeys(out)))
PY
}

# env_stamp LOCK: what a cached venv was built from (its lock file and pyproject.toml); a venv whose
# stamp differs is re-synced to both.
env_stamp() {
  cat "$1" "$HARNESS_ROOT/pyproject.toml" | sha256sum | cut -c1-16
}

# check_declared PY [core] [EXTRA...]: every requirement pyproject.toml declares for that environment
# is installed there, at a version it accepts; else set-up fails naming what is missing.
check_declared() {
  local py="$1"; shift
  declared_requirements "$@" | "$py" "$HARNESS_ROOT/tests/check_declared.py" \
    || setup_fail "$py lacks dependencies pyproject.toml declares (listed above)"
}
