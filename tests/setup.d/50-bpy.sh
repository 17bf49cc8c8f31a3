# Blender as a Python module (bpy 5.0.1, PyPI) for the code3d tests, in its own venv because it pins
# numpy 1.26.4 (~75 s, ~820 MB, once; cached under $HARNESS_CACHE_DIR), with its own lock file
# (constraints-bpy.txt). What it holds is pyproject.toml's `blender` extra (the scripts it runs import
# nothing else; the harness itself is not installed there), through the lock. Whenever the lock file
# or pyproject.toml differ from what the venv was made from, it is re-synced (exact versions, then the
# declared requirements) and checked against the declaration, so a cached venv ends as a fresh one.
# Exports HARNESS_BPY_PYTHON. The sandbox needs util-linux `unshare` (on Debian's base image;
# installed here if missing).
BPY_VENV="$HARNESS_CACHE_DIR/venvs/bpy"
BPY_STAMP="$BPY_VENV/.harness-lock-v2"
_bpy_stamp="$(env_stamp "$HARNESS_CONSTRAINTS_BPY")"
_bpy_pip() { pip_pinned --python "$BPY_VENV/bin/python" --constraints "$HARNESS_CONSTRAINTS_BPY" "$@"; }
if [ ! -x "$BPY_VENV/bin/python" ]; then
  mkdir -p "$HARNESS_CACHE_DIR/venvs"
  python3 -m venv "$BPY_VENV"
fi
if [ "$(cat "$BPY_STAMP" 2>/dev/null || true)" != "$_bpy_stamp" ]; then
  if [ -z "${HARNESS_LOCKING:-}" ]; then
    _bpy_pip --no-deps -r "$HARNESS_CONSTRAINTS_BPY"
  fi
  # numpy 1.26.4: the version bpy 5.0.1 is built against
  mapfile -t _bpy_reqs < <(declared_requirements blender)
  _bpy_pip bpy==5.0.1 numpy==1.26.4 "${_bpy_reqs[@]}"
  echo "$_bpy_stamp" >"$BPY_STAMP"
  unset _bpy_reqs
fi
"$BPY_VENV/bin/python" -c "import bpy, trimesh, PIL, networkx, scipy" >/dev/null || setup_fail "the bpy venv does not import"
check_declared "$BPY_VENV/bin/python" blender
if ! command -v unshare >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq util-linux >/dev/null) \
    || setup_fail "apt-get install util-linux"
fi
export HARNESS_BPY_PYTHON="$BPY_VENV/bin/python"
unset -f _bpy_pip
unset _bpy_stamp
