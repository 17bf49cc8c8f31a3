# methods II (conformal, transport, decision families): POT for the transport baselines and the
# Gaussian mixture-transport reference, vega_datasets for the offline stock series, scikit-learn
# for mixtures/isotonic checks/digits (the `methods2` extra, through the lock). numpy and scipy come
# from 00-python.sh.
if ! python -c "import ot, vega_datasets, sklearn" >/dev/null 2>&1; then
  pip_pinned "POT==0.9.7.post1" "vega_datasets" "scikit-learn>=1.5"
  python -c "import ot, vega_datasets, sklearn" || setup_fail "POT / vega_datasets / scikit-learn are not importable"
fi
if ! python -c "import scanpy" >/dev/null 2>&1; then
  pip_pinned "scanpy"
  python -c "import scanpy" || setup_fail "scanpy is not importable"
fi
