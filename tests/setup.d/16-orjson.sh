# orjson: the results database's JSON columns are encoded with it on the runner's write path (a core
# dependency, so 00-python.sh's editable install brings it through the lock); installed again here,
# pinned, so an environment set up before it was a dependency has it too.
pip_pinned orjson
python -c "import orjson" || setup_fail "orjson does not import"
