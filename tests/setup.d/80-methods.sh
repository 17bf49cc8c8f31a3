# methods (issue 12): scikit-learn for the bundled datasets, k-means++ seeds and the KMeans baselines.
# torch (CPU) and scipy come from 00-python.sh.
if ! python -c "import sklearn" >/dev/null 2>&1; then
    python -m pip install -q "scikit-learn>=1.5"
fi
