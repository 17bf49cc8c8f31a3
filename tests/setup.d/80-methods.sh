# methods: scikit-learn for the bundled datasets, k-means++ seeds and the KMeans baselines (the
# `methods` extras, installed by 00-python.sh); torch (CPU) and scipy come from there too.
python -c "import sklearn" || setup_fail "scikit-learn is not importable"
