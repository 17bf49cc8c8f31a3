# DSGG metric tests: property tests use hypothesis (the `test` extra, installed by 00-python.sh).
python -c "import hypothesis" || setup_fail "hypothesis is not importable"
