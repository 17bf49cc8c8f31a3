# methods III (causal, puzzles, selection families): causal-learn for PAGs (dag2pag, FCI) and
# scikit-learn for the digits selection task (the `methods3` extra, installed through the lock by
# 00-python.sh); torch (CPU) and scipy come from there too. The puzzles need nothing else: the
# deformable convolution is plain torch.
if ! python -c "import causallearn, sklearn" >/dev/null 2>&1; then
  pip_pinned "causal-learn==0.1.4.8" "scikit-learn>=1.5"
  python -c "import causallearn, sklearn" || setup_fail "causal-learn / scikit-learn are not importable"
fi
