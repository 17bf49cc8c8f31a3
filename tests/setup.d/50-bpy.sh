# Blender as a Python module (bpy 5.0.1, PyPI) for the code3d tests, in its own venv because it pins
# numpy 1.26.4 (~75 s, ~820 MB, once; cached under $HARNESS_CACHE_DIR). Exports HARNESS_BPY_PYTHON.
# The sandbox needs util-linux `unshare` (on Debian's base image; installed here if missing).
HARNESS_CACHE_DIR="${HARNESS_CACHE_DIR:-$HOME/.cache/harness}"
BPY_VENV="$HARNESS_CACHE_DIR/venvs/bpy"
if ! "$BPY_VENV/bin/python" -c "import bpy, trimesh, PIL, networkx, scipy" >/dev/null 2>&1; then
  mkdir -p "$HARNESS_CACHE_DIR/venvs"
  python -m venv "$BPY_VENV"
  # a failed install fails the run: the code3d tests would otherwise skip silently
  "$BPY_VENV/bin/python" -m pip install -q bpy==5.0.1 trimesh pillow networkx scipy numpy==1.26.4 2>&1 \
    | { grep -v -e WARNING -e "^$" || true; }
fi
if ! command -v unshare >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq util-linux >/dev/null
fi
export HARNESS_BPY_PYTHON="$BPY_VENV/bin/python"
