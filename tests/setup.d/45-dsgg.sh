# DSGG metric tests: property tests use hypothesis (pure Python, no dependencies to disturb).
python -c "import hypothesis" 2>/dev/null || python -m pip install -q "hypothesis>=6.100" 2>&1 | grep -v -e WARNING -e "^$" || true
