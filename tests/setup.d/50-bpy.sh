# Blender as a Python module (bpy 5.0.1, PyPI) for the code3d tests, in its own venv because it pins
# numpy 1.26.4 (~75 s, ~820 MB, once; cached under $HARNESS_CACHE_DIR), with its own lock file
# (constraints-bpy.txt): built through it once, then brought back to it (--no-deps, exact versions)
# whenever the lock file changes. Exports HARNESS_BPY_PYTHON. The sandbox needs util-linux `unshare`
# (on Debian's base image; installed here if missing).
BPY_VENV="$HARNESS_CACHE_DIR/venvs/bpy"
BPY_STAMP="$BPY_VENV/.harness-lock"
_bpy_lock="$(sha256sum "$HARNESS_CONSTRAINTS_BPY" | cut -c1-16)"
_bpy_pip() { pip_pinned --python "$BPY_VENV/bin/python" --constraints "$HARNESS_CONSTRAINTS_BPY" "$@"; }
if ! "$BPY_VENV/bin/python" -c "import bpy, trimesh, PIL, networkx, scipy" >/dev/null 2>&1; then
  mkdir -p "$HARNESS_CACHE_DIR/venvs"
  python3 -m venv "$BPY_VENV"
  _bpy_pip bpy==5.0.1 trimesh pillow networkx scipy numpy==1.26.4
  echo "$_bpy_lock" >"$BPY_STAMP"
elif [ -z "${HARNESS_LOCKING:-}" ] && [ "$(cat "$BPY_STAMP" 2>/dev/null || true)" != "$_bpy_lock" ]; then
  _bpy_pip --no-deps -r "$HARNESS_CONSTRAINTS_BPY"
  echo "$_bpy_lock" >"$BPY_STAMP"
fi
"$BPY_VENV/bin/python" -c "import bpy, trimesh, PIL, networkx, scipy" >/dev/null || setup_fail "the bpy venv does not import"
if ! command -v unshare >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq util-linux >/dev/null) \
    || setup_fail "apt-get install util-linux"
fi
export HARNESS_BPY_PYTHON="$BPY_VENV/bin/python"
unset -f _bpy_pip
unset _bpy_lock
